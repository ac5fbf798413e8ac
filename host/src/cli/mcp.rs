//! `skillhost mcp`: serves the agent's tools over MCP on stdin/stdout, so any MCP client can
//! use the skills with no LLM configured here. Logs go to stderr; SIGHUP reloads the skills
//! and notifies the client.
//!
//! It answers at once whatever the compile cache holds: the skills whose components are
//! compiled (or cached) serve from the start; the others compile in the background (progress
//! on stderr) and join when ready, and the client is told its tool list changed
//! (`notifications/tools/list_changed`).

use clap::Args;
use skillhost::adapters::mcp::{self, SkillServer};
use skillhost::app::{Agent, Agents, App, Options};
use skillhost::skills::LoadMode;
use std::path::Path;
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct McpArgs {
    /// Serve this agent of the config's `agents` (default: the top-level skills).
    #[arg(long)]
    agent: Option<String>,
}

/// Loads the skills (and the MCP servers they use) and serves them until stdin closes.
pub async fn run(args: McpArgs, config: Option<&Path>) -> anyhow::Result<ExitCode> {
    let config = super::load_config(config)?;
    let agents = args.agent.map_or(Agents::TopLevel, Agents::One);
    let app = App::build(config, Options { mode: LoadMode::ServeReady, llm: false, agents }).await?;
    let agent = app.agent();
    for problem in &agent.problems {
        eprintln!("warning: {problem}");
    }
    let server = SkillServer::new(agent.engine.clone(), &agent.display_name);
    let app = std::sync::Arc::new(app);
    if !app.agent().pending().is_empty() {
        tokio::spawn(load_pending(app.clone(), server.clone()));
    }
    tokio::spawn(reload_on_hangup(app.clone(), server.clone()));
    mcp::stdio(server).await?;
    Ok(ExitCode::SUCCESS)
}

/// Compiles the skills the start left pending, off the runtime, then loads every skill and
/// swaps them in (the client is told its lists changed). The names the config writes are
/// checked then.
async fn load_pending(app: std::sync::Arc<App>, server: SkillServer) {
    let pending = app.agent().pending().join(", ");
    eprintln!("skillhost: serving now; compiling in the background: {pending}");
    let compiling = app.clone();
    if tokio::task::spawn_blocking(move || compiling.agent().compile_pending()).await.is_err() {
        eprintln!("error: compiling the pending skills stopped; serving without them");
        return;
    }
    match app.agent().reload().await {
        Ok((engine, problems)) => {
            for problem in &problems {
                eprintln!("warning: {problem}");
            }
            if let Err(e) = app.check_names_with(&engine) {
                eprintln!("error: {e:#}");
            }
            server.set_engine(engine).await;
            eprintln!("skillhost: every skill is ready ({pending} joined)");
        }
        Err(e) => eprintln!("error: loading the compiled skills failed, serving without them: {e:#}"),
    }
}

/// SIGHUP reloads the skills (starting the MCP servers new skills declare); connected
/// clients are told their tool and prompt lists changed. A failed reload keeps the skills.
async fn reload_on_hangup(app: std::sync::Arc<App>, server: SkillServer) {
    use tokio::signal::unix::{SignalKind, signal};
    let Ok(mut hangup) = signal(SignalKind::hangup()) else { return };
    let agent: &Agent = app.agent();
    while hangup.recv().await.is_some() {
        match agent.reload().await {
            Ok((engine, problems)) => {
                for problem in &problems {
                    eprintln!("warning: {problem}");
                }
                server.set_engine(engine).await;
                eprintln!("skills reloaded");
            }
            Err(e) => eprintln!("error: reloading the skills failed, keeping the loaded ones: {e:#}"),
        }
    }
}
