//! The adapters: the front doors through which people and programs reach an agent. Each
//! drives the engine through a turn request (or a single tool call), an event sink and its
//! own [`crate::engine::Counterpart`]; none is known to the engine by name.
//!
//! - [`terminal`]: `skillhost chat` in a terminal (inline approvals, Ctrl-C cancels a turn).
//! - [`api`]: the HTTP API with the approval-v1 SSE stream.
//! - [`mcp`]: the agent's tools served over MCP (stdio, and `/mcp` beside the API), approvals
//!   through elicitation.
//! - [`slack`]: a Slack app in Socket Mode; [`telegram`]: a Telegram bot, long polling. Both
//!   on [`chat`], the kit of conversations with streamed answers, buttons and questions.
//!
//! What a remote adapter needs, shared by all of them:
//! - [`auth`]: the bearer token the HTTP adapters share.
//! - approvals and questions wait at the person broker ([`crate::broker`]).
//! - [`present`]: what a person may be shown of a call: the redacted, capped input, the
//!   tool's safe description (every tool kind), the `wait=true` summary.
//! - [`runs`]: the agent's recent runs and their events, for the console and the read routes.
//! - [`ask`]: `human__ask`, the question tool the interactive adapters offer.
//! - [`outbox`]: where skills' own messages (the `notify` import) find the agent's chat
//!   adapters.

// No function over 60 lines here (clippy.toml); the engine holds the same.
#![deny(clippy::too_many_lines)]

pub mod api;
pub mod ask;
pub mod auth;
pub mod chat;
pub mod http;
pub mod mcp;
pub mod outbox;
pub mod present;
pub mod runs;
pub mod slack;
pub mod telegram;
pub mod terminal;

/// Set once when the process is asked to stop (Ctrl-C, SIGTERM, the terminal's session
/// ending); an adapter then stops taking new work and returns once what is open has
/// drained.
pub type Stop = tokio::sync::watch::Receiver<bool>;

/// Resolves once `stop` is set (or its sender is gone).
pub async fn stopped(mut stop: Stop) {
    let _ = stop.wait_for(|stop| *stop).await;
}

/// One front door of `skillhost run`, made for one agent by the app (`app/serve.rs`) from
/// the plan it checked, then served until the process stops, as Spin's triggers are. Made
/// first and served after, so that every adapter can fail its setup (a port in use, a bad
/// token) before any of them serves.
#[async_trait::async_trait]
pub trait Adapter: Send + 'static {
    /// What it is, for logs and errors (`the api on 127.0.0.1:8080 (agent `ops`)`).
    fn describe(&self) -> String;

    /// Whether the process ends when this adapter returns: the terminal's session is the
    /// process's (as `skillhost chat`).
    fn ends_the_process(&self) -> bool {
        false
    }

    /// Serves until `stop` is set, or until its own end (the terminal's session). An error
    /// is logged; the other adapters keep serving.
    async fn serve(self: Box<Self>, stop: Stop) -> anyhow::Result<()>;
}
