//! `mcp`: MCP tool calls on the skill's behalf, through the host's MCP client.

use crate::sandbox::bindings::skillhost::skill::mcp::{Error, Host};
use crate::sandbox::capabilities::McpCallError;
use crate::sandbox::host_state::HostState;

impl Host for HostState {
    async fn call_tool(&mut self, server: String, tool: String, arguments: String) -> Result<String, Error> {
        let Some(bridge) = self.caps.mcp.clone() else {
            return Err(Error::NotConfigured);
        };
        let skill = self.caps.skill.clone();
        bridge.call_tool(&skill, &server, &tool, &arguments).await.map_err(|e| match e {
            McpCallError::UnknownServer(m) => Error::UnknownServer(m),
            McpCallError::ToolFailed(m) => Error::ToolFailed(m),
            McpCallError::Other(m) => Error::Other(m),
        })
    }
}
