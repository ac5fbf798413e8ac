//! A persistent key-value store; no skill sees another's keys.
//!
//! By default the keys are the conversation's: every agent and channel (an MCP session, a
//! `skillhost call --channel`) has its own, and a key expires `skills.state_ttl_seconds` (a
//! day unless the operator says otherwise) after its last get or set. With
//! `[capabilities] state = "skill"` in `skill.toml` the keys are the skill's own, shared by
//! every conversation, and never expire. `startup`, `scheduled` and `is-available` serve no
//! conversation: they always see the skill's own keys.
//!
//! ```no_run
//! use skill_sdk::state;
//! # fn run() -> Result<(), skill_sdk::Error> {
//! let restarts: u32 = state::get_json("restarts:checkout")?.unwrap_or(0);
//! state::set_json("restarts:checkout", &(restarts + 1))?;
//! # Ok(()) }
//! ```

use std::fmt;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::bindings::skillhost::skill::state as wit;

/// Why a state operation failed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StateError {
    /// The key is empty or longer than 256 bytes, or the value is too large.
    Invalid(String),
    /// A stored value is not the JSON that [`get_json`] expected.
    Decode(String),
    /// Any other failure, described.
    Other(String),
}

impl StateError {
    /// The name of the case (`invalid`, `decode`, `other`); `decode` is the SDK's own.
    pub fn kind(&self) -> &'static str {
        match self {
            StateError::Invalid(_) => "invalid",
            StateError::Decode(_) => "decode",
            StateError::Other(_) => "other",
        }
    }
}

impl fmt::Display for StateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StateError::Invalid(d) => write!(f, "invalid key or value: {d}"),
            StateError::Decode(d) => write!(f, "stored value is not the expected JSON: {d}"),
            StateError::Other(d) => f.write_str(d),
        }
    }
}

impl std::error::Error for StateError {}

impl From<wit::Error> for StateError {
    fn from(e: wit::Error) -> Self {
        match e {
            wit::Error::Invalid(d) => StateError::Invalid(d),
            wit::Error::Other(d) => StateError::Other(d),
        }
    }
}

/// Reads a key; `None` when it is not set.
pub fn get(key: &str) -> Result<Option<String>, StateError> {
    Ok(wit::get(key)?)
}

/// Sets a key.
pub fn set(key: &str, value: &str) -> Result<(), StateError> {
    Ok(wit::set(key, value)?)
}

/// Removes a key; removing a missing key is not an error.
pub fn delete(key: &str) -> Result<(), StateError> {
    Ok(wit::delete(key)?)
}

/// Lists the skill's keys, sorted.
pub fn keys() -> Result<Vec<String>, StateError> {
    Ok(wit::keys()?)
}

/// Reads a key holding JSON and decodes it into `T`; `None` when it is not set.
pub fn get_json<T: DeserializeOwned>(key: &str) -> Result<Option<T>, StateError> {
    match get(key)? {
        None => Ok(None),
        Some(text) => serde_json::from_str(&text).map(Some).map_err(|e| StateError::Decode(e.to_string())),
    }
}

/// Stores `value` as JSON under `key`.
pub fn set_json<T: Serialize + ?Sized>(key: &str, value: &T) -> Result<(), StateError> {
    let text = serde_json::to_string(value).map_err(|e| StateError::Invalid(e.to_string()))?;
    set(key, &text)
}
