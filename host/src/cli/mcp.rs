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
    app.announce_pending();
    tokio::spawn(app.clone().load_pending());
    tokio::spawn(reload_on_hangup(app.clone()));
    app.relisting();
    mcp::stdio(server).await?;
    Ok(ExitCode::SUCCESS)
}

/// SIGHUP reloads the skills (starting the MCP servers new skills declare); connected
/// clients are told their tool and prompt lists changed. A failed reload keeps the skills.
async fn reload_on_hangup(app: std::sync::Arc<App>) {
    use tokio::signal::unix::{SignalKind, signal};
    let Ok(mut hangup) = signal(SignalKind::hangup()) else { return };
    let agent: &Agent = app.agent();
    while hangup.recv().await.is_some() {
        match agent.reload().await {
            Ok(problems) => {
                for problem in &problems {
                    eprintln!("warning: {problem}");
                }
                eprintln!("skills reloaded");
            }
            Err(e) => eprintln!("error: reloading the skills failed, keeping the loaded ones: {e:#}"),
        }
    }
}
