//! The adapters: the front doors through which people and programs reach an agent. Each
//! drives the engine through a turn request (or a single tool call), an event sink and its
//! own [`crate::engine::Approver`]; none is known to the engine by name.
//!
//! - [`terminal`]: `skillhost chat` in a terminal (inline approvals, Ctrl-C cancels a turn).
//! - [`api`]: the HTTP API with the approval-v1 SSE stream.
//! - [`mcp`]: the agent's tools served over MCP (stdio, and `/mcp` beside the API), approvals
//!   through elicitation.
//! - [`auth`]: the bearer token the HTTP adapters share.

pub mod api;
pub mod auth;
pub mod mcp;
pub mod terminal;
