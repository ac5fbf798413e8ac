//! Command-line parsing and one module per command.

mod audit;
mod call;
mod chat;
mod conformance;
mod init;
mod mcp;
mod oci;
mod remote_skills;
mod skill;
pub mod telemetry;

use clap::{Parser, Subcommand};
use skillhost::config::LoadedConfig;
use skillhost::skills::Loader;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

/// Runs LLM-agent skills as sandboxed WebAssembly components.
#[derive(Debug, Parser)]
#[command(name = "skillhost", version, about)]
pub struct Args {
    /// The config file (default: ./config.yaml when it exists).
    #[arg(long, global = true, env = "SKILLHOST_CONFIG")]
    pub config: Option<PathBuf>,
    /// Log debug detail to stderr (RUST_LOG overrides).
    #[arg(long, short, global = true)]
    pub verbose: bool,
    /// A name in config that matches nothing loaded (a skill in skills.config, grants,
    /// allowed, loading_overrides; a tool in human.overrides, engine.tool_budget.tools,
    /// engine.temporal_guardrails) is an error, not a warning: `skills.strict: true`.
    #[arg(long, global = true)]
    pub strict: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Start a project: config.yaml, .env.example, .gitignore and one example skill in
    /// skills/, built. Writes nothing if any of those files exists.
    Init(init::InitArgs),
    /// Work with skills: list, validate, build, new; push, pull, sign and diff published ones.
    #[command(subcommand)]
    Skill(skill::SkillCommand),
    /// Call one tool through the sandbox and print its result.
    Call(call::CallArgs),
    /// Chat with the agent in the terminal (channel `cli`).
    Chat(chat::ChatArgs),
    /// Serve an adapter: `cli` is the same as `chat`; `api` serves the HTTP API, and the skills
    /// over MCP at `/mcp`; `slack` and `telegram` the chat bots. Skills with a `[schedule]` run
    /// their `scheduled` export meanwhile.
    Run(chat::RunArgs),
    /// Serve every skill tool as an MCP tool on stdin/stdout (no LLM needed).
    Mcp(mcp::McpArgs),
    /// The record of approvals and questions: print its head, or check it is whole.
    #[command(subcommand)]
    Audit(audit::AuditCommand),
    /// The MCP client as the official conformance suite's client scenarios drive it.
    #[command(hide = true)]
    ConformanceClient(conformance::ConformanceArgs),
}

/// Sets up logging to stderr (warnings by default, debug with `--verbose`) and, when the
/// environment asks for it, traces over OTLP ([`telemetry`]): the returned handle flushes
/// them at exit.
pub fn init_logging(verbose: bool, traces: &skillhost::config::Telemetry) -> telemetry::Telemetry {
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    use tracing_subscriber::{Layer as _, filter::Targets};
    let default = if verbose { "debug,cranelift=info,wasmtime=info" } else { "warn" };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let logs = tracing_subscriber::fmt::layer().with_writer(std::io::stderr).with_ansi(ansi).with_filter(filter);
    let (traces, telemetry) = telemetry::layer(traces);
    // The spans skillhost makes for traces are at INFO; nothing of the dependencies'.
    let traces = traces.map(|layer| layer.with_filter(Targets::new().with_target("skillhost", tracing::Level::INFO)));
    tracing_subscriber::registry().with(logs).with(traces).init();
    telemetry
}

/// Runs the parsed command.
pub async fn run(args: Args) -> ExitCode {
    STRICT.store(args.strict, std::sync::atomic::Ordering::Relaxed);
    let result = match args.command {
        Command::Init(init) => init::run(init).await,
        Command::Skill(cmd) => skill::run(cmd, args.config.as_deref()).await,
        Command::Call(call) => call::run(call, args.config.as_deref()).await,
        Command::Chat(chat) => chat::run(chat, args.config.as_deref()).await,
        Command::Run(run) => chat::run_adapter(run, args.config.as_deref()).await,
        Command::Mcp(mcp) => mcp::run(mcp, args.config.as_deref()).await,
        Command::Audit(audit) => audit::run(audit, args.config.as_deref()).await,
        Command::ConformanceClient(c) => conformance::run(c).await,
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// `--strict`, for [`load_config`].
static STRICT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Loads the config, reporting problems clearly; `--strict` sets `skills.strict` (every
/// agent's blocks inherit it). A setting that is written but does nothing is a warning (an
/// error when strict).
pub fn load_config(path: Option<&std::path::Path>) -> anyhow::Result<LoadedConfig> {
    let mut config = skillhost::app::load_config(path)?;
    if STRICT.load(std::sync::atomic::Ordering::Relaxed) {
        config.config.skills.strict = true;
        for agent in config.config.agents.values_mut() {
            if let Some(skills) = &mut agent.skills {
                skills.strict = true;
            }
        }
    }
    if let Some(warning) = config.config.engine.inert_budget() {
        if skillhost::app::names::strict(&config.config) {
            anyhow::bail!("{warning} (skills.strict: add enabled: true, or remove the caps)");
        }
        eprintln!("warning: {warning}");
    }
    Ok(config)
}

/// Builds the sandbox and a loader for `config` (the skill commands, which inspect skills
/// rather than serve them).
pub fn loader(config: LoadedConfig) -> anyhow::Result<Loader> {
    let sandbox = Arc::new(skillhost::app::sandbox(&config)?);
    Ok(Loader::new(sandbox, config)?)
}
