//! Provider errors: each names the provider and what went wrong, and knows whether a retry
//! could help.

use std::time::Duration;

/// Why a completion failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LlmError {
    /// The API answered with an error status (or an error event carrying one).
    #[error("{provider}: HTTP {status}: {message}")]
    Status {
        /// The provider's name.
        provider: &'static str,
        /// The HTTP status code.
        status: u16,
        /// The API's error message (or the start of the body).
        message: String,
        /// How long the API asked us to wait (`retry-after`), if it said.
        retry_after: Option<Duration>,
    },
    /// The connection failed: refused, reset, timed out, or dropped mid-stream.
    #[error("{provider}: connection failed: {message}")]
    Transport {
        /// The provider's name.
        provider: &'static str,
        /// The cause.
        message: String,
    },
    /// The API answered something we cannot read: a malformed body or stream.
    #[error("{provider}: malformed response: {message}")]
    Protocol {
        /// The provider's name.
        provider: &'static str,
        /// What was wrong.
        message: String,
    },
}

impl LlmError {
    /// The provider the error came from.
    pub fn provider(&self) -> &'static str {
        match self {
            LlmError::Status { provider, .. }
            | LlmError::Transport { provider, .. }
            | LlmError::Protocol { provider, .. } => provider,
        }
    }

    /// The HTTP status, for [`LlmError::Status`].
    pub fn status(&self) -> Option<u16> {
        match self {
            LlmError::Status { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// Whether sending the same request again may succeed: rate limits (429), server errors
    /// (5xx, including Anthropic's 529 "overloaded") and connection failures. Other 4xx say
    /// the request itself is wrong (bad key, bad body), and a malformed answer is a bug on one
    /// side or the other: repeating either only burns time and quota.
    pub fn is_retryable(&self) -> bool {
        match self {
            LlmError::Status { status, .. } => *status == 429 || (500..600).contains(status),
            LlmError::Transport { .. } => true,
            LlmError::Protocol { .. } => false,
        }
    }

    /// The wait the API asked for, if any.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            LlmError::Status { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    pub(crate) fn protocol(provider: &'static str, message: impl Into<String>) -> Self {
        LlmError::Protocol { provider, message: message.into() }
    }

    pub(crate) fn transport(provider: &'static str, message: impl Into<String>) -> Self {
        LlmError::Transport { provider, message: message.into() }
    }
}
