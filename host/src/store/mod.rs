//! Durable storage: the key-value state store and the memory files.
//!
//! Both confine themselves to a root directory and write atomically (temp file + rename), so
//! a crash mid-write never leaves a corrupt file.

pub mod memory;
pub mod state;

pub use memory::{MemoryError, MemoryStore, SearchHit};
pub use state::{StateError, StateStore};

use std::io::Write;
use std::path::Path;

/// Writes `bytes` to `path` atomically: a temp file in the same directory, fsync, rename.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}
