//! Durable storage: the key-value state store and the memory files, each on the filesystem
//! (SQLite; files under a directory) or on PostgreSQL (one database for every replica).
//!
//! Both confine what they write to their root (a directory, or a namespace of rows) and
//! never leave a half-written value: state writes and memory writes on PostgreSQL are
//! transactions, memory overwrites on disk go through a temp file and a rename.
//! [`random_id`] makes the unguessable ids that approvals and questions are decided by.

pub mod memory;
pub mod state;

pub use memory::{MemoryError, MemoryQuota, MemoryStore, SearchHit};
pub use state::{StateError, StateQuota, StateStore, StateWrite};

use std::io::Write;
use std::path::Path;

/// Writes `bytes` to `path` atomically: a temp file in the same directory, fsync, rename
/// (for files under the operator's paths, such as the component cache).
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// An error with its causes, as one line (each cause not already said): `tokio-postgres`,
/// for one, says only "db error" at the top.
pub(crate) fn with_causes(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let more = cause.to_string();
        if !text.contains(&more) {
            text = format!("{text}: {more}");
        }
        source = cause.source();
    }
    text
}

/// A fresh 128-bit id from the OS random source, as 32 lowercase hex digits.
///
/// Approval and question ids are capabilities: whoever knows one can decide it. There is no
/// fallback when the OS cannot supply randomness (a counter or the clock can be guessed), so
/// the caller must fail the request that needed the id.
pub fn random_id() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes)?;
    Ok(hex::encode(bytes))
}

#[cfg(test)]
mod tests {
    #[test]
    fn random_ids_are_32_hex_digits_and_differ() {
        let ids: std::collections::HashSet<String> = (0..100).map(|_| super::random_id().unwrap()).collect();
        assert_eq!(ids.len(), 100);
        assert!(
            ids.iter().all(|id| id.len() == 32 && id.chars().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()))
        );
    }
}
