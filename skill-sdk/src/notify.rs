//! Messages the skill sends on its own (the spec's `bind(engine, adapter)` adapter `send`):
//! an alert a [`Scheduled`](crate::Scheduled) run found, a notice from a tool.
//!
//! A destination is `slack:<channel id>` or `telegram:<chat id>`. The skill's `skill.toml`
//! asks for the capability (`[capabilities] notify = true`) and the operator grants each
//! destination (`skills.grants.<skill>.notify`); nothing is granted by default. The message
//! is posted by the chat adapter of the agent the skill serves, formatted and guarded like an
//! answer. At most 20 messages per call.

use std::fmt;

use crate::bindings::skillhost::skill::notify as wit;

/// Why a message was not sent.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum NotifyError {
    /// The manifest does not ask for `notify`, the destination is not granted, or the call
    /// already sent its 20 messages.
    Denied(String),
    /// The destination is not `slack:<id>` / `telegram:<id>`, or the text is empty or too long.
    Invalid(String),
    /// No adapter of that platform serves the agent in this process (`skillhost call`, `mcp`).
    Unavailable(String),
    /// The platform refused it or could not be reached, or a guard suppressed it.
    Failed(String),
}

impl NotifyError {
    /// The WIT name of the case (`denied`, `invalid`, `unavailable`, `failed`).
    pub fn kind(&self) -> &'static str {
        match self {
            NotifyError::Denied(_) => "denied",
            NotifyError::Invalid(_) => "invalid",
            NotifyError::Unavailable(_) => "unavailable",
            NotifyError::Failed(_) => "failed",
        }
    }
}

impl fmt::Display for NotifyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NotifyError::Denied(m) => write!(f, "denied: {m}"),
            NotifyError::Invalid(m) => write!(f, "invalid: {m}"),
            NotifyError::Unavailable(m) => write!(f, "unavailable: {m}"),
            NotifyError::Failed(m) => write!(f, "failed: {m}"),
        }
    }
}

impl std::error::Error for NotifyError {}

impl From<wit::Error> for NotifyError {
    fn from(e: wit::Error) -> Self {
        match e {
            wit::Error::Denied(m) => NotifyError::Denied(m),
            wit::Error::Invalid(m) => NotifyError::Invalid(m),
            wit::Error::Unavailable(m) => NotifyError::Unavailable(m),
            wit::Error::Failed(m) => NotifyError::Failed(m),
        }
    }
}

/// Posts `text` (Markdown) to `destination`.
pub fn send(destination: &str, text: &str) -> Result<(), NotifyError> {
    Ok(wit::send(destination, text, false)?)
}

/// Posts `text` to `destination`, then has the agent run a turn there with `text` as the
/// incoming message (on Slack, in the message's thread), so that it looks into it with its
/// tools and approvals. Returns once the message is posted, not when the turn ends.
pub fn wake(destination: &str, text: &str) -> Result<(), NotifyError> {
    Ok(wit::send(destination, text, true)?)
}
