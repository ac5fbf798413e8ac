//! MCP both ways.
//!
//! - Client: [`McpManager`] connects to the `mcp_servers` that loaded skills declare (or an
//!   agent lists), supervises each connection (backoff restarts), and serves the skills'
//!   `mcp` import ([`crate::sandbox::McpBridge`]). [`McpTools`] offers their tools to the
//!   engine and runs each call through the owning skill's hooks.
//! - Server: [`serve`] exposes every loaded skill tool as an MCP tool (`skillhost mcp` on
//!   stdio, `/mcp` streamable HTTP), approvals through MCP elicitation.
//!
//! Layout: `transport.rs` (connecting by transport), `sse.rs` (the legacy HTTP+SSE transport), `client.rs` (manager, supervision,
//! bridge), `route.rs` (engine-side routing and hooks), `preflight.rs` (`before-mcp-call`, prerequisites), `coverage.rs` (`_meta` descriptors),
//! `serve.rs` (the server side), `elicit.rs` (its approval questions).

pub mod client;
pub mod coverage;
mod elicit;
mod preflight;
pub mod route;
pub mod serve;
mod sse;
pub mod transport;

pub use client::{McpManager, Status};
/// The MCP SDK in use, for clients of [`serve`] (tests, embedders).
pub use rmcp;
pub use route::{McpCall, McpTools};

use crate::config::OverrideLevel;
use crate::skills::SkillSet;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// Starts the servers `skills` declare plus `extra` (an agent's `skills.allowed` entries that
/// name servers), waits for their first connection attempt, and returns the engine's view of
/// their tools. Servers declared but not configured are reported and skipped.
pub async fn start_for(
    manager: &Arc<McpManager>,
    skills: Arc<SkillSet>,
    extra: &[String],
    overrides: BTreeMap<String, Option<OverrideLevel>>,
) -> Arc<McpTools> {
    let mut servers = BTreeSet::new();
    for skill in skills.skills.values() {
        for server in client::declared_servers(skill) {
            if manager.has_server(&server) {
                servers.insert(server);
            } else {
                tracing::warn!(skill = %skill.name, "skill declares MCP server `{server}`, which mcp_servers does not configure");
            }
        }
    }
    servers.extend(extra.iter().filter(|s| manager.has_server(s)).cloned());
    manager.declare(&skills);
    manager.start(servers.iter().map(String::as_str));
    manager.wait_started(client::CONNECT_TIMEOUT).await;
    for server in &servers {
        if let Some(Status::Down(why)) = manager.status(server) {
            eprintln!("warning: MCP server `{server}` is not available ({why}); retrying in the background");
        }
    }
    Arc::new(McpTools::new(manager.clone(), skills, servers, overrides))
}
