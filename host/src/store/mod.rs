//! Durable storage: the key-value state store (SQLite) and the memory files.
//!
//! Both confine themselves to a root directory and never leave a half-written value: state
//! writes are transactions, memory overwrites go through a temp file and a rename.

pub mod memory;
pub mod state;

pub use memory::{MemoryError, MemoryQuota, MemoryStore, SearchHit};
pub use state::{StateError, StateQuota, StateStore};

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
