//! The MCP client: [`McpManager`] connects to the `mcp_servers` that loaded skills declare (or
//! an agent lists), supervises each connection (backoff restarts), and serves the skills'
//! `mcp` import ([`crate::sandbox::McpBridge`]). The engine sees the servers' tools through
//! [`crate::tools::McpTools`]; serving skills *as* an MCP server is an adapter
//! ([`crate::adapters::mcp`]).
//!
//! Layout: `transport.rs` (connecting by transport), `sse.rs` (the legacy HTTP+SSE transport,
//! which rmcp dropped), `client.rs` (manager, supervision, bridge), `handler.rs` (what the
//! client answers a server: capabilities, elicitation, list changes), `elicit.rs` (a form as
//! questions to a person), `supervise.rs` (connecting, reconnecting, re-listing),
//! `oauth.rs` (OAuth 2.1 for remote servers), `slack_guard.rs` (the external-channel guard on
//! tools that post to Slack, for the model's calls and the `mcp` import alike).

pub mod client;
pub mod elicit;
mod handler;
mod listening;
pub mod oauth;
pub mod skills;
pub mod slack_guard;
mod sse;
mod supervise;
pub mod transport;

pub use client::{McpManager, Status};
/// The MCP SDK in use, for clients of the MCP adapter (tests, embedders).
pub use rmcp;
pub use slack_guard::{GuardedBridge, SlackChannels, SlackPostingGuard};
