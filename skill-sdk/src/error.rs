//! The error a handler returns, and how it reaches the model.

use std::fmt;

use crate::http::HttpError;
use crate::mcp::McpError;
use crate::memory::MemoryError;
use crate::notify::NotifyError;
use crate::state::StateError;
use crate::{ToolResult, json};

/// Why a tool call failed. Returned from [`Skill::handle`](crate::Skill::handle), it becomes
/// a failed [`ToolResult`] whose content is `{"error": "<this error's Display>"}`.
///
/// Every host import's error converts into it, and so does `serde_json::Error` (as
/// [`Error::InvalidInput`]), so handlers can use `?` throughout.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The tool name is not one of the skill's.
    UnknownTool(String),
    /// The input (or other JSON the handler decoded) does not have the expected shape.
    InvalidInput(String),
    /// The skill's configuration block does not have the expected shape.
    Config(String),
    /// A [`memory`](crate::memory) operation failed.
    Memory(MemoryError),
    /// A [`state`](crate::state) operation failed.
    State(StateError),
    /// An [`http`](crate::http) request failed before a response arrived.
    Http(HttpError),
    /// An [`mcp`](crate::mcp) call failed.
    Mcp(McpError),
    /// A [`notify`](crate::notify) message was not sent.
    Notify(NotifyError),
    /// Any other failure, described for the model.
    Message(String),
}

impl Error {
    /// An error for a tool name the skill does not offer.
    pub fn unknown_tool(name: &str) -> Self {
        Error::UnknownTool(name.to_owned())
    }

    /// An error with a message of your own.
    pub fn msg(message: impl fmt::Display) -> Self {
        Error::Message(message.to_string())
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::UnknownTool(name) => write!(f, "unknown tool: {name}"),
            Error::InvalidInput(detail) => write!(f, "invalid input: {detail}"),
            Error::Config(detail) => write!(f, "invalid skill configuration: {detail}"),
            Error::Memory(e) => write!(f, "memory: {e}"),
            Error::State(e) => write!(f, "state: {e}"),
            Error::Http(e) => write!(f, "http: {e}"),
            Error::Mcp(e) => write!(f, "mcp: {e}"),
            Error::Notify(e) => write!(f, "notify: {e}"),
            Error::Message(message) => f.write_str(message),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Memory(e) => Some(e),
            Error::State(e) => Some(e),
            Error::Http(e) => Some(e),
            Error::Mcp(e) => Some(e),
            Error::Notify(e) => Some(e),
            _ => None,
        }
    }
}

impl From<serde_json::Error> for Error {
    fn from(e: serde_json::Error) -> Self {
        Error::InvalidInput(e.to_string())
    }
}

impl From<MemoryError> for Error {
    fn from(e: MemoryError) -> Self {
        Error::Memory(e)
    }
}

impl From<StateError> for Error {
    fn from(e: StateError) -> Self {
        Error::State(e)
    }
}

impl From<HttpError> for Error {
    fn from(e: HttpError) -> Self {
        Error::Http(e)
    }
}

impl From<McpError> for Error {
    fn from(e: McpError) -> Self {
        Error::Mcp(e)
    }
}

impl From<NotifyError> for Error {
    fn from(e: NotifyError) -> Self {
        Error::Notify(e)
    }
}

impl From<Error> for ToolResult {
    fn from(e: Error) -> Self {
        ToolResult::failed(json!({ "error": e.to_string() }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_becomes_a_failed_result_naming_the_cause() {
        let result = ToolResult::from(Error::Memory(MemoryError::InvalidPath("../x".into())));
        let content: serde_json::Value = serde_json::from_str(result.content()).unwrap();
        assert_eq!(content, json!({ "error": "memory: invalid path: ../x" }));
        assert_eq!(result.succeeded(), Some(false));
    }

    #[test]
    fn bad_input_is_reported_as_invalid_input() {
        #[derive(Debug, serde::Deserialize)]
        #[allow(dead_code)]
        struct Args {
            url: String,
        }
        let err = crate::parse_input::<Args>(json!({})).unwrap_err();
        assert_eq!(err.to_string(), "invalid input: missing field `url`");
    }
}
