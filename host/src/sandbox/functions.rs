//! Cranelift's incremental compilation cache, on disk beside the compiled components: each
//! compiled function under the hash of its Cranelift IR, in one SQLite file.
//!
//! The component cache (`cache.rs`) saves a whole compile only for the same bytes. Skills
//! built with the same toolchain share most of their code, though: every componentize-py skill
//! carries the same CPython, libc and runtime as separate core modules, every Rust skill the
//! same std. With this cache a new or rebuilt skill compiles only the functions nobody
//! compiled before; the rest is read back (a Python skill's cold compile goes from Cranelift
//! over its whole 40 MB to translation and lookups).
//!
//! It is an optimisation only: a cache that cannot be opened or written is logged once and
//! compiling goes on without it. It is dropped and started again when it outgrows
//! [`MAX_BYTES`]. Cranelift's keys cover the compiler's version, target and settings, so an
//! entry never serves another compiler.

use parking_lot::Mutex;
use rusqlite::{Connection, OptionalExtension};
use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// The database file in the cache directory.
pub const FILE_NAME: &str = "functions.sqlite3";
/// Past this size (checked when opened) the cache is dropped and started again.
pub const MAX_BYTES: u64 = 2 << 30;

/// Compiled functions by key; see the module docs.
pub struct FunctionCache {
    path: PathBuf,
    conn: Mutex<Connection>,
    /// Whether a failure was logged already (one line, not one per function).
    failed: AtomicBool,
}

impl std::fmt::Debug for FunctionCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FunctionCache").field("path", &self.path).finish()
    }
}

impl FunctionCache {
    /// The cache in `dir` (made if missing); `None`, logged, when it cannot be opened.
    pub fn open(dir: &Path) -> Option<FunctionCache> {
        let path = dir.join(FILE_NAME);
        match Self::try_open(dir, &path) {
            Ok(conn) => Some(FunctionCache { path, conn: Mutex::new(conn), failed: AtomicBool::new(false) }),
            Err(e) => {
                tracing::warn!(path = %path.display(), "compiling without the function cache: {e}");
                None
            }
        }
    }

    fn try_open(dir: &Path, path: &Path) -> Result<Connection, Box<dyn std::error::Error>> {
        std::fs::create_dir_all(dir)?;
        if std::fs::metadata(path).is_ok_and(|m| m.len() > MAX_BYTES) {
            tracing::info!(path = %path.display(), "the function cache outgrew {} GiB; starting it again", MAX_BYTES >> 30);
            for suffix in ["", "-wal", "-shm"] {
                let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
            }
        }
        let conn = Connection::open(path)?;
        conn.busy_timeout(Duration::from_secs(10))?;
        let _: String = conn.query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))?;
        // A lost last write after a power cut costs a recompile of that function, nothing else.
        conn.execute_batch(
            "PRAGMA synchronous = NORMAL;
             CREATE TABLE IF NOT EXISTS functions (key BLOB PRIMARY KEY, value BLOB NOT NULL) WITHOUT ROWID;",
        )?;
        Ok(conn)
    }

    fn failed(&self, what: &str, e: rusqlite::Error) {
        if !self.failed.swap(true, Ordering::Relaxed) {
            tracing::warn!(path = %self.path.display(), "the function cache could not {what}: {e}");
        }
    }
}

impl wasmtime::CacheStore for FunctionCache {
    fn get(&self, key: &[u8]) -> Option<Cow<'_, [u8]>> {
        let conn = self.conn.lock();
        let found = conn
            .prepare_cached("SELECT value FROM functions WHERE key = ?1")
            .and_then(|mut stmt| stmt.query_row([key], |row| row.get::<_, Vec<u8>>(0)).optional());
        match found {
            Ok(value) => value.map(Cow::Owned),
            Err(e) => {
                self.failed("be read", e);
                None
            }
        }
    }

    fn insert(&self, key: &[u8], value: Vec<u8>) -> bool {
        let conn = self.conn.lock();
        let inserted = conn
            .prepare_cached("INSERT OR IGNORE INTO functions (key, value) VALUES (?1, ?2)")
            .and_then(|mut stmt| stmt.execute(rusqlite::params![key, value]));
        match inserted {
            Ok(_) => true,
            Err(e) => {
                self.failed("be written", e);
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmtime::CacheStore;

    #[test]
    fn entries_survive_reopening_and_a_bad_directory_means_no_cache() {
        let dir = tempfile::tempdir().unwrap();
        let cache = FunctionCache::open(dir.path()).unwrap();
        assert_eq!(cache.get(b"k"), None);
        assert!(cache.insert(b"k", vec![1, 2, 3]));
        assert!(cache.insert(b"k", vec![9]), "a second insert of a key is not an error");
        drop(cache);
        let cache = FunctionCache::open(dir.path()).unwrap();
        assert_eq!(cache.get(b"k").as_deref(), Some(&[1u8, 2, 3][..]));

        let file = dir.path().join("not-a-dir");
        std::fs::write(&file, "x").unwrap();
        assert!(FunctionCache::open(&file).is_none());
    }
}
