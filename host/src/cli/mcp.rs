//! `skillhost mcp`: serves every loaded skill tool as an MCP tool on stdin/stdout, so any MCP
//! client can use the skills with no LLM configured here. Logs go to stderr; SIGHUP reloads
//! the skills and notifies the client.

use skillhost::mcp::serve::{self, SkillServer};
use skillhost::sandbox::McpBridge;
use skillhost::skills::LoadMode;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

/// Loads the skills (and the MCP servers they use) and serves them until stdin closes.
pub async fn run(config: Option<&Path>) -> anyhow::Result<ExitCode> {
    let config = super::load_config(config)?;
    let human = config.config.human.clone();
    let manager = skillhost::mcp::McpManager::new(&config.config.mcp_servers);
    let mut loader = super::loader(config)?;
    loader.mcp = manager.is_configured().then(|| manager.clone() as Arc<dyn McpBridge>);
    let set = loader.load_all(LoadMode::Serve).await?;
    for problem in &set.problems {
        eprintln!("warning: {problem}");
    }
    let set = Arc::new(set);
    // The skills' `mcp` import reaches the servers they declare.
    let _tools = skillhost::mcp::start_for(&manager, set.clone(), &[], human.overrides.clone()).await;
    let server = SkillServer::new(set, human.overrides, Duration::from_secs(human.timeout_seconds));
    tokio::spawn(reload_on_hangup(loader, manager, server.clone()));
    serve::stdio(server).await?;
    Ok(ExitCode::SUCCESS)
}

/// SIGHUP reloads the skills (starting the MCP servers new skills declare); connected
/// clients are told their tool and prompt lists changed.
async fn reload_on_hangup(
    loader: skillhost::skills::Loader,
    manager: Arc<skillhost::mcp::McpManager>,
    server: SkillServer,
) {
    use tokio::signal::unix::{SignalKind, signal};
    let Ok(mut hangup) = signal(SignalKind::hangup()) else { return };
    while hangup.recv().await.is_some() {
        match server.reload(&loader, &manager).await {
            Ok(problems) => {
                for problem in &problems {
                    eprintln!("warning: {problem}");
                }
                eprintln!("skills reloaded");
            }
            Err(e) => eprintln!("error: reloading the skills failed, keeping the loaded ones: {e}"),
        }
    }
}
