//! `skillhost chat` (a terminal conversation with one agent) and `skillhost run` (every
//! agent's adapters in one process).

use clap::{Args, ValueEnum};
use skillhost::app::{self, Agents, App, Options};
use skillhost::config::AdapterKind;
use skillhost::skills::LoadMode;
use std::path::Path;
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct ChatArgs {
    /// Chat with this agent from the config's `agents` (its prompt, skills, model, memory).
    #[arg(long)]
    agent: Option<String>,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The adapter to serve for every agent (default: each agent's `adapter.type` / `types`,
    /// else cli).
    #[arg(long, value_enum)]
    adapter: Option<AdapterArg>,
    /// Run only this agent (default: every agent of `agents`, or the single agent).
    #[arg(long)]
    agent: Option<String>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum AdapterArg {
    Cli,
    Api,
    Slack,
    Telegram,
}

/// `skillhost run`.
pub async fn run_adapter(args: RunArgs, path: Option<&Path>) -> anyhow::Result<ExitCode> {
    let config = super::load_config(path)?;
    let agents = args.agent.map_or(Agents::All, Agents::One);
    let adapter = args.adapter.map(|a| match a {
        AdapterArg::Cli => AdapterKind::Cli,
        AdapterArg::Api => AdapterKind::Api,
        AdapterArg::Slack => AdapterKind::Slack,
        AdapterArg::Telegram => AdapterKind::Telegram,
    });
    // A chat adapter without its token stops here, before any skill loads.
    app::check_adapters(&config, &agents, adapter)?;
    // A server answers at once whatever the compile cache holds: skills still to compile join
    // as they are ready (`App::load_pending`); a person at the terminal waits for them.
    let mode = match app::serves_terminal(&config, &agents, adapter)? {
        true => LoadMode::Serve,
        false => LoadMode::ServeReady,
    };
    let mut app = build(config, agents, mode).await?;
    // A reload (SIGHUP, `POST /api/skills/reload`) reads the same file again.
    app.config_path = path.map(Path::to_path_buf);
    app::serve(app, adapter).await?;
    Ok(ExitCode::SUCCESS)
}

/// `skillhost chat`.
pub async fn run(args: ChatArgs, config: Option<&Path>) -> anyhow::Result<ExitCode> {
    let config = super::load_config(config)?;
    let app = build(config, args.agent.map_or(Agents::TopLevel, Agents::One), LoadMode::Serve).await?;
    let engine = &app.agent().engine;
    skillhost::adapters::terminal::chat(engine, "cli").await;
    app::serve::finish_background(engine).await;
    Ok(ExitCode::SUCCESS)
}

/// The app with LLM providers (a missing key is reported before skills spend time loading),
/// skill problems printed as warnings.
async fn build(config: skillhost::config::LoadedConfig, agents: Agents, mode: LoadMode) -> anyhow::Result<App> {
    let app = App::build(config, Options { mode, llm: true, agents }).await?;
    for agent in &app.agents {
        for problem in &agent.problems {
            eprintln!("warning: {problem}");
        }
    }
    Ok(app)
}
