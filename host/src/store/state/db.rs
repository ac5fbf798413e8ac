//! The SQLite database behind the state store: one file per state directory, opened in WAL
//! mode by every process that shares the directory, and a small pool of connections so that
//! concurrent callers never wait on one another in Rust (SQLite itself lets readers run
//! beside the one writer).

use super::StateError;
use parking_lot::Mutex;
use rusqlite::{Connection, OpenFlags};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};

/// The database file inside the state directory.
pub const FILE_NAME: &str = "state.sqlite3";
/// How long a write waits for another connection's (or process's) write to finish.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);
/// Idle connections kept for reuse; more may be open while busy.
const MAX_IDLE: usize = 16;

/// One row per (namespace, key); `bytes` is the key's plus the value's length, and the
/// triggers keep `usage` (keys and bytes per namespace) in step, so a quota check reads one
/// row instead of summing the namespace. The first of the versioned migrations
/// (`migrate.rs`): never changed.
pub const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS entries (
    ns TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, bytes INTEGER NOT NULL,
    PRIMARY KEY (ns, key));
CREATE TABLE IF NOT EXISTS usage (
    ns TEXT PRIMARY KEY, keys INTEGER NOT NULL, bytes INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TRIGGER IF NOT EXISTS entries_insert AFTER INSERT ON entries BEGIN
    INSERT INTO usage (ns, keys, bytes) VALUES (new.ns, 1, new.bytes)
        ON CONFLICT (ns) DO UPDATE SET keys = keys + 1, bytes = bytes + excluded.bytes;
END;
CREATE TRIGGER IF NOT EXISTS entries_update AFTER UPDATE ON entries BEGIN
    UPDATE usage SET bytes = bytes - old.bytes + new.bytes WHERE ns = new.ns;
END;
CREATE TRIGGER IF NOT EXISTS entries_delete AFTER DELETE ON entries BEGIN
    UPDATE usage SET keys = keys - 1, bytes = bytes - old.bytes WHERE ns = old.ns;
END;
";

/// Connections to one state directory's database, opened on first use.
#[derive(Debug)]
pub struct Pool {
    root: PathBuf,
    idle: Mutex<Vec<Connection>>,
    /// Set once the schema is at this binary's version (and old JSON namespaces imported).
    ready: AtomicBool,
    /// This process's writers to the database take turns here (see [`Pool::write`]).
    writer: Arc<Mutex<()>>,
}

/// One writer lock per database file in this process, shared by every [`Pool`] on it. The
/// directory may not exist yet, so it is keyed by its absolute path, not a canonical one
/// (which would change once the directory is made).
fn writer_for(root: &Path) -> Arc<Mutex<()>> {
    static WRITERS: LazyLock<Mutex<HashMap<PathBuf, Arc<Mutex<()>>>>> = LazyLock::new(Mutex::default);
    let key = std::path::absolute(root).unwrap_or_else(|_| root.to_path_buf());
    WRITERS.lock().entry(key).or_default().clone()
}

impl Pool {
    /// A pool for the database under `root`; nothing is opened yet.
    pub fn new(root: PathBuf) -> Self {
        let writer = writer_for(&root);
        Pool { root, idle: Mutex::default(), ready: AtomicBool::new(false), writer }
    }

    /// The database file.
    pub fn file(&self) -> PathBuf {
        self.root.join(FILE_NAME)
    }

    /// [`Pool::with`] for a write. SQLite lets one writer in at a time, and one that finds
    /// the database locked sleeps in its busy handler (1 ms, then 2, 5, 10 ... up to 100 ms
    /// a try), so writers of one process that raced for the lock waited far longer than the
    /// writes take. They queue here instead, each woken as the one before finishes; the busy
    /// timeout is left for writers in other processes.
    pub fn write<T>(&self, f: impl FnOnce(&mut Connection) -> Result<T, StateError>) -> Result<T, StateError> {
        let _turn = self.writer.lock();
        self.with(f)
    }

    /// Runs `f` on a connection of the pool. The pool's lock is held only to take and
    /// return a connection, never while `f` runs.
    pub fn with<T>(&self, f: impl FnOnce(&mut Connection) -> Result<T, StateError>) -> Result<T, StateError> {
        let taken = self.idle.lock().pop();
        let mut conn = match taken {
            Some(conn) => conn,
            None => self.open()?,
        };
        let result = f(&mut conn);
        // A connection left inside a transaction (a failed commit) is not reused.
        if conn.is_autocommit() {
            let mut idle = self.idle.lock();
            if idle.len() < MAX_IDLE {
                idle.push(conn);
            }
        }
        result
    }

    /// Opens a connection, retrying while another connection (or process) sets up the
    /// database: SQLite reports some of those conflicts at once instead of waiting.
    fn open(&self) -> Result<Connection, StateError> {
        let deadline = Instant::now() + BUSY_TIMEOUT;
        loop {
            match self.try_open() {
                Ok(conn) => return Ok(conn),
                Err(Opening::Busy(_)) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
                Err(Opening::Busy(e)) => return Err(self.failed(&e)),
                Err(Opening::Failed(e)) => return Err(e),
            }
        }
    }

    fn try_open(&self) -> Result<Connection, Opening> {
        std::fs::create_dir_all(&self.root).map_err(|e| Opening::Failed(self.failed(&e)))?;
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let mut conn = Connection::open_with_flags(self.root.join(FILE_NAME), flags).map_err(|e| self.opening(e))?;
        configure(&conn).map_err(|e| self.opening(e))?;
        if !self.ready.load(Ordering::Acquire) {
            // Already migrated (by another process, or before a restart): no write lock, so
            // opening never waits for another writer.
            let version: u32 = conn.query_row("PRAGMA user_version", [], |r| r.get(0)).map_err(|e| self.opening(e))?;
            if version != super::migrate::latest() {
                prepare(&mut conn, &self.root)?;
            }
            self.ready.store(true, Ordering::Release);
        }
        Ok(conn)
    }

    fn failed(&self, e: &dyn std::fmt::Display) -> StateError {
        StateError::Other(format!("opening {}: {e}", self.root.join(FILE_NAME).display()))
    }

    fn opening(&self, e: rusqlite::Error) -> Opening {
        if is_busy(&e) { Opening::Busy(e) } else { Opening::Failed(self.failed(&e)) }
    }
}

/// Why opening failed: worth another try, or not.
enum Opening {
    Busy(rusqlite::Error),
    Failed(StateError),
}

fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(e.sqlite_error_code(), Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked))
}

/// Per-connection settings. WAL lets readers run beside a writer, in this process or
/// another; `synchronous = NORMAL` makes a commit a WAL append without an fsync (a crash of
/// the process loses nothing, a power cut at most the last commits, and never corrupts).
fn configure(conn: &Connection) -> rusqlite::Result<()> {
    conn.busy_timeout(BUSY_TIMEOUT)?;
    // WAL mode is a property of the file: switch only when it is not (switching needs the
    // write lock, which another process may hold for a while).
    let mode: String = conn.query_row("PRAGMA journal_mode", [], |row| row.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))?;
        if !mode.eq_ignore_ascii_case("wal") {
            tracing::warn!("the state database is not in WAL mode ({mode}): readers may wait on writers");
        }
    }
    conn.execute_batch("PRAGMA synchronous = NORMAL")?;
    conn.set_prepared_statement_cache_capacity(32);
    Ok(())
}

/// Migrates the schema (importing the old JSON namespaces on the way), in one transaction,
/// so that of two processes opening a directory at once exactly one migrates.
fn prepare(conn: &mut Connection, root: &Path) -> Result<(), Opening> {
    let sql = |e: rusqlite::Error| match is_busy(&e) {
        true => Opening::Busy(e),
        false => Opening::Failed(StateError::Other(format!("preparing the state database in {}: {e}", root.display()))),
    };
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate).map_err(sql)?;
    super::migrate::migrate(&tx, root).map_err(Opening::Failed)?;
    tx.commit().map_err(sql)
}

/// A SQLite failure as a [`StateError`].
pub fn sql(e: rusqlite::Error) -> StateError {
    StateError::Other(format!("state database: {e}"))
}
