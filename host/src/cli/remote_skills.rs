//! The operator's side of the Agent Skills agents take from MCP servers
//! (`mcp_servers.<name>.skills`): `skill list` shows each with how it stands against the
//! manifest accepted earlier, and `skill accept` accepts the one a server serves now.

use skillhost::config::LoadedConfig;
use skillhost::mcp::rmcp::model::{Skill, SkillResources};
use skillhost::mcp::{McpManager, skills};
use skillhost::store::StateStore;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

/// How long `skill list` waits for one server.
const LIST_WAIT: Duration = Duration::from_secs(10);

/// A manager of the one server `server`, started, and the state store of `loaded`; an error
/// when the server is not configured with `skills: true` or does not come up within `wait`.
async fn connect(loaded: &LoadedConfig, server: &str, wait: Duration) -> anyhow::Result<(Arc<McpManager>, StateStore)> {
    let c = &loaded.config;
    let Some(entry) = c.mcp_servers.get(server) else {
        let names: Vec<&str> = c.mcp_servers.keys().map(String::as_str).collect();
        anyhow::bail!("no MCP server `{server}` in mcp_servers (configured: {})", names.join(", "));
    };
    if !entry.serves_skills() {
        anyhow::bail!(
            "mcp_servers.{server}.skills is not true: its skills are not imported, so there is none to accept"
        );
    }
    let state = StateStore::from_config(&c.state, |p| loaded.resolve(p))?;
    let manager = McpManager::new(&std::collections::BTreeMap::from([(server.to_owned(), entry.clone())]));
    manager.set_state(state.clone());
    manager.start([server]);
    if !manager.wait_ready(server, wait).await {
        let status = manager.status(server).map(|s| format!("{s:?}")).unwrap_or_default();
        anyhow::bail!("MCP server `{server}` did not come up within {} s ({status})", wait.as_secs());
    }
    Ok((manager, state))
}

fn files(skill: &Skill) -> usize {
    match &skill.resources {
        SkillResources::Files(files) => files.len(),
        _ => 0,
    }
}

/// `skill accept`: connects to the one server, lists its skills, records the named one's
/// manifest as accepted, and says what changed from the one accepted before.
pub async fn accept(config: Option<&Path>, server: &str, skill: &str) -> anyhow::Result<ExitCode> {
    let loaded = super::load_config(config)?;
    let (manager, state) = connect(&loaded, server, skillhost::mcp::client::CONNECT_TIMEOUT).await?;
    let (admitted, refused) = skills::list(&manager, server).await?;
    let Some(found) = admitted.iter().find(|s| s.name() == skill) else {
        for why in &refused {
            eprintln!("not usable: {why}");
        }
        let names: Vec<&str> = admitted.iter().map(|s| s.name()).collect();
        anyhow::bail!("MCP server `{server}` serves no usable skill `{skill}` (it serves: {})", names.join(", "));
    };
    let files = files(found);
    match skills::accept(&state, server, found).await? {
        Some(changes) if changes.is_empty() => {
            println!("`{server}/{skill}` ({files} files) was already the accepted one")
        }
        Some(changes) => println!("accepted `{server}/{skill}` ({files} files): {changes}"),
        None => println!("accepted `{server}/{skill}` ({files} files), accepted for the first time"),
    }
    Ok(ExitCode::SUCCESS)
}

/// `skill list`'s part: every server with `skills: true`, its skills and how each stands.
/// Nothing is recorded; a server that cannot be reached is a line saying why.
pub async fn list(loaded: &LoadedConfig) {
    let servers = loaded.config.mcp_servers.iter().filter(|(_, s)| s.serves_skills());
    for (server, _) in servers {
        match served(loaded, server).await {
            Ok(lines) => lines.iter().for_each(|line| println!("{line}")),
            Err(e) => println!("{server}/*  (MCP server `{server}`: cannot list its skills: {e:#})"),
        }
    }
}

/// The lines of one server's skills.
async fn served(loaded: &LoadedConfig, server: &str) -> anyhow::Result<Vec<String>> {
    let (manager, state) = connect(loaded, server, LIST_WAIT).await?;
    let (admitted, refused) = skills::list(&manager, server).await?;
    let mut lines = Vec::new();
    for skill in &admitted {
        let standing = match skills::peek(&state, server, skill).await {
            Ok(None) => "new: accepted when an agent first lists it".to_owned(),
            Ok(Some(Ok(()))) => "accepted".to_owned(),
            Ok(Some(Err(why))) | Err(why) => format!("not used: {why}"),
        };
        let (name, count) = (skill.name(), files(skill));
        lines.push(format!("{server}/{name}  (served by MCP server `{server}`, {count} files; {standing})"));
        lines.push(format!("    {}", skill.frontmatter.description.split_whitespace().collect::<Vec<_>>().join(" ")));
    }
    lines.extend(refused.iter().map(|why| format!("{server}/?  (not used: {why})")));
    Ok(lines)
}
