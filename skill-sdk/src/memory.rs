//! Files under the operator's memory root. Needs `memory = true` in `skill.toml`.
//!
//! Paths are relative to the root; the host refuses absolute paths, `..` and symlinks that
//! leave it.
//!
//! ```no_run
//! use skill_sdk::memory;
//! # fn run() -> Result<(), skill_sdk::Error> {
//! memory::append("incidents.md", "- pod OOMKilled at 14:23\n")?;
//! let playbook = memory::read("playbooks/restart.md")?.unwrap_or_default();
//! for hit in memory::search("OOMKilled")? {
//!     println!("{}:{}: {}", hit.path, hit.line, hit.text);
//! }
//! # Ok(()) }
//! ```

use std::fmt;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::bindings::skillhost::skill::memory as wit;

/// Why a memory operation failed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum MemoryError {
    /// The manifest does not ask for memory, or the operator did not grant it.
    Denied,
    /// The path is absolute, leaves the memory root, or is otherwise unusable.
    InvalidPath(String),
    /// The file is not valid JSON, or not the JSON the caller expected.
    InvalidJson(String),
    /// The content or file is larger than the host allows.
    TooLarge,
    /// Any other failure, described.
    Other(String),
}

impl MemoryError {
    /// The WIT name of the case (`denied`, `invalid-path`, ...), for matching on in tests
    /// and reports.
    pub fn kind(&self) -> &'static str {
        match self {
            MemoryError::Denied => "denied",
            MemoryError::InvalidPath(_) => "invalid-path",
            MemoryError::InvalidJson(_) => "invalid-json",
            MemoryError::TooLarge => "too-large",
            MemoryError::Other(_) => "other",
        }
    }
}

impl fmt::Display for MemoryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MemoryError::Denied => f.write_str("access denied (the skill or operator did not enable memory)"),
            MemoryError::InvalidPath(d) => write!(f, "invalid path: {d}"),
            MemoryError::InvalidJson(d) => write!(f, "invalid JSON: {d}"),
            MemoryError::TooLarge => f.write_str("too large"),
            MemoryError::Other(d) => f.write_str(d),
        }
    }
}

impl std::error::Error for MemoryError {}

impl From<wit::Error> for MemoryError {
    fn from(e: wit::Error) -> Self {
        match e {
            wit::Error::Denied => MemoryError::Denied,
            wit::Error::InvalidPath(d) => MemoryError::InvalidPath(d),
            wit::Error::InvalidJson(d) => MemoryError::InvalidJson(d),
            wit::Error::TooLarge => MemoryError::TooLarge,
            wit::Error::Other(d) => MemoryError::Other(d),
        }
    }
}

/// One line that matched a [`search`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SearchHit {
    /// The file's path relative to the memory root.
    pub path: String,
    /// The 1-based line number.
    pub line: u32,
    /// The line's text.
    pub text: String,
}

/// Reads a file; `None` when it does not exist.
pub fn read(path: &str) -> Result<Option<String>, MemoryError> {
    Ok(wit::read(path)?)
}

/// Reads a file holding JSON and decodes it into `T`; `None` when it does not exist.
pub fn read_json<T: DeserializeOwned>(path: &str) -> Result<Option<T>, MemoryError> {
    match wit::read_json(path)? {
        None => Ok(None),
        Some(text) => serde_json::from_str(&text).map(Some).map_err(|e| MemoryError::InvalidJson(e.to_string())),
    }
}

/// Replaces a file's content (atomically), creating parent directories.
pub fn write(path: &str, content: &str) -> Result<(), MemoryError> {
    Ok(wit::write(path, content, wit::WriteMode::Overwrite)?)
}

/// Adds `content` to the end of a file, creating it and its parent directories.
pub fn append(path: &str, content: &str) -> Result<(), MemoryError> {
    Ok(wit::write(path, content, wit::WriteMode::Append)?)
}

/// Finds lines containing `query` (case-insensitive) in every file, at most 100 hits.
pub fn search(query: &str) -> Result<Vec<SearchHit>, MemoryError> {
    let hits = wit::search(query)?;
    Ok(hits.into_iter().map(|h| SearchHit { path: h.path, line: h.line, text: h.text }).collect())
}
