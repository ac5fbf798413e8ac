//! `skillhost chat` (and `skillhost run --adapter cli`): an interactive session on channel
//! `cli`, driving the engine one turn per line typed.

use super::terminal::{Input, Terminal, TerminalApprover};
use clap::{Args, ValueEnum};
use skillhost::config::{AdapterKind, LoadedConfig};
use skillhost::engine::{Engine, EngineSettings, TurnRequest};
use skillhost::skills::LoadMode;
use std::io::{IsTerminal, Write};
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, Args)]
pub struct ChatArgs {
    /// Chat with this agent from the config's `agents` (its prompt and allowed skills).
    #[arg(long)]
    agent: Option<String>,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The adapter to serve (default: `adapter.type` from the config, else cli).
    #[arg(long, value_enum)]
    adapter: Option<AdapterArg>,
    /// The agent to run (as for `chat`).
    #[arg(long)]
    agent: Option<String>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum AdapterArg {
    Cli,
    Api,
}

/// `skillhost run`: picks the adapter, and serves the ones that exist.
pub async fn run_adapter(args: RunArgs, config: Option<&Path>) -> anyhow::Result<ExitCode> {
    let adapter = match args.adapter {
        Some(AdapterArg::Cli) => AdapterKind::Cli,
        Some(AdapterArg::Api) => AdapterKind::Api,
        None => {
            let loaded = super::load_config(config)?;
            let a = &loaded.config.adapter;
            match (a.kind, a.types.as_slice()) {
                (Some(kind), _) => kind,
                (None, [kind]) => *kind,
                (None, []) => AdapterKind::Cli,
                (None, _) => anyhow::bail!(
                    "adapter.types: serving several adapters at once is not supported yet; pass --adapter"
                ),
            }
        }
    };
    match adapter {
        AdapterKind::Cli => run(ChatArgs { agent: args.agent }, config).await,
        AdapterKind::Api => super::api::run(args.agent.as_deref(), config).await,
        other => anyhow::bail!(
            "the {} adapter is not served by skillhost; use --adapter cli",
            format!("{other:?}").to_lowercase()
        ),
    }
}

/// `skillhost chat`.
pub async fn run(args: ChatArgs, config: Option<&Path>) -> anyhow::Result<ExitCode> {
    let config = super::load_config(config)?;
    let (engine, channel) = engine(config, args.agent.as_deref(), "cli").await?;
    session(&engine, &channel).await;
    finish_background(&engine).await;
    Ok(ExitCode::SUCCESS)
}

/// Lets the last turns' daily reflections reach the memory files before the process ends,
/// but never hangs the exit on a slow provider.
pub async fn finish_background(engine: &Engine) {
    if tokio::time::timeout(Duration::from_secs(30), engine.wait_for_background()).await.is_err() {
        eprintln!("warning: a background reflection was still running and was dropped");
    }
}

/// The engine an adapter serves, as `config` (and `--agent`) set it up: the provider first
/// (a missing key is reported before skills spend time loading), then the skills (problems
/// printed as warnings). Also returns the channel for single-conversation adapters:
/// `default_channel`, or `<default_channel>-<agent>` so each agent keeps its own history.
pub async fn engine(
    config: LoadedConfig,
    agent: Option<&str>,
    default_channel: &str,
) -> anyhow::Result<(Engine, String)> {
    let agent = match agent {
        None => None,
        Some(name) if config.config.agents.is_empty() => anyhow::bail!("--agent {name}: no agents configured"),
        Some(name) => match config.config.agents.get(name) {
            Some(agent) => Some((name.to_owned(), agent.clone())),
            None => {
                let known: Vec<&str> = config.config.agents.keys().map(String::as_str).collect();
                anyhow::bail!("--agent {name}: no such agent; configured agents: {}", known.join(", "))
            }
        },
    };
    let llm = agent.as_ref().and_then(|(_, a)| a.llm.clone()).unwrap_or_else(|| config.config.llm.clone());
    let provider =
        skillhost::llm::from_config(&llm).map_err(|e| anyhow::anyhow!("cannot use the LLM provider: {e}"))?;
    let mut settings = EngineSettings::from_config(&config);
    (settings.model, settings.max_tokens) = (llm.model.clone(), llm.max_tokens);

    let mcp = skillhost::mcp::McpManager::new(&config.config.mcp_servers);
    let overrides = config.config.human.overrides.clone();
    let mut loader = super::loader(config)?;
    loader.mcp = mcp.is_configured().then(|| mcp.clone() as Arc<dyn skillhost::sandbox::McpBridge>);
    let mut set = loader.load_all(LoadMode::Serve).await?;
    for problem in &set.problems {
        eprintln!("warning: {problem}");
    }
    let mut channel = default_channel.to_owned();
    if let Some((name, agent)) = &agent {
        set.skills.retain(|skill, _| agent.skills.allowed.iter().any(|a| a == skill));
        if let Some(prompt) = &agent.system_prompt {
            settings.system_prompt = prompt.clone();
        }
        channel = format!("{default_channel}-{name}");
    }
    let set = Arc::new(set);
    let mut engine = Engine::with_settings(set.clone(), provider, settings, loader.state.clone());
    if mcp.is_configured() {
        let extra = agent.map(|(_, a)| a.skills.allowed).unwrap_or_default();
        engine = engine.with_mcp(skillhost::mcp::start_for(&mcp, set, &extra, overrides).await);
    }
    Ok((engine, channel))
}

/// The read–answer loop. Ends on EOF, `/exit`, `/quit` or Ctrl-C at the prompt; Ctrl-C during
/// a turn drops the turn's future (its history is not saved) and goes back to the prompt.
async fn session(engine: &Engine, channel: &str) {
    let input = Input::stdin();
    let terminal = Terminal::new();
    let approver = TerminalApprover { input: input.clone(), terminal: terminal.clone() };
    let interactive = std::io::stdin().is_terminal();
    let user_id = std::env::var("USER").ok().filter(|u| !u.is_empty());
    if interactive {
        eprintln!("skillhost chat — /exit, Ctrl-D or Ctrl-C to leave; Ctrl-C during an answer cancels it.");
    }
    loop {
        if interactive {
            eprint!("> ");
            let _ = std::io::stderr().flush();
        }
        let line = tokio::select! {
            line = input.line() => line,
            () = ctrl_c() => None,
        };
        let Some(line) = line else {
            if interactive {
                eprintln!();
            }
            return;
        };
        let message = line.trim();
        match message {
            "" => continue,
            "/exit" | "/quit" => return,
            _ => {}
        }
        let request =
            TurnRequest { channel_id: channel.to_owned(), user_id: user_id.clone(), message: message.to_owned() };
        tokio::select! {
            result = engine.run_turn(request, &*terminal, &approver) => match result {
                Ok(result) => {
                    terminal.finish(&result.text);
                    if result.time_boxed {
                        terminal.note("(time budget spent: this is a wrap-up answer)");
                    }
                }
                Err(e) => {
                    terminal.discard();
                    eprintln!("error: {e}");
                }
            },
            () = ctrl_c() => {
                terminal.discard();
                terminal.note("(cancelled)");
            }
        }
    }
}

/// Resolves on Ctrl-C; never, when the signal cannot be watched (rather than at once).
async fn ctrl_c() {
    if tokio::signal::ctrl_c().await.is_err() {
        std::future::pending::<()>().await;
    }
}
