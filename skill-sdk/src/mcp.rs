//! Calls to tools of MCP servers that the operator configured (the spec's `bind` escape
//! hatch for deterministic composite tools).
//!
//! The server must be declared in [`SkillInfo`](crate::SkillInfo) (`mcp_tools` or
//! `mcp_servers`). The calling tool's approval covers these calls: give it an approval
//! level that matches what the MCP tools do.

use std::fmt;

use crate::Value;
use crate::bindings::skillhost::skill::mcp as wit;

/// Why an MCP call failed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum McpError {
    /// The operator configured no MCP servers.
    NotConfigured,
    /// No server of that name is configured, or the skill does not declare it.
    UnknownServer(String),
    /// The server reported the call as failed; its message.
    ToolFailed(String),
    /// Any other failure, described.
    Other(String),
}

impl McpError {
    /// The WIT name of the case (`not-configured`, `unknown-server`, ...).
    pub fn kind(&self) -> &'static str {
        match self {
            McpError::NotConfigured => "not-configured",
            McpError::UnknownServer(_) => "unknown-server",
            McpError::ToolFailed(_) => "tool-failed",
            McpError::Other(_) => "other",
        }
    }
}

impl fmt::Display for McpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            McpError::NotConfigured => f.write_str("no MCP servers are configured"),
            McpError::UnknownServer(s) => write!(f, "unknown or undeclared MCP server `{s}`"),
            McpError::ToolFailed(m) => write!(f, "the MCP tool failed: {m}"),
            McpError::Other(d) => f.write_str(d),
        }
    }
}

impl std::error::Error for McpError {}

impl From<wit::Error> for McpError {
    fn from(e: wit::Error) -> Self {
        match e {
            wit::Error::NotConfigured => McpError::NotConfigured,
            wit::Error::UnknownServer(s) => McpError::UnknownServer(s),
            wit::Error::ToolFailed(m) => McpError::ToolFailed(m),
            wit::Error::Other(d) => McpError::Other(d),
        }
    }
}

/// Calls `tool` on `server` with JSON object `arguments`; returns the result's text.
pub fn call_tool(server: &str, tool: &str, arguments: &Value) -> Result<String, McpError> {
    Ok(wit::call_tool(server, tool, &arguments.to_string())?)
}
