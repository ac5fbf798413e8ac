//! The persistent key-value store: namespaces of string keys and values (one per skill, and
//! the engine's own: histories, approval counts).
//!
//! Backed by one SQLite database per state directory (`state.sqlite3`, WAL mode), one row per
//! (namespace, key): a set writes one row, every read goes to the database (so processes
//! sharing the directory see each other's writes at once), and no Rust lock is held while
//! SQLite works. Old `<namespace>.json` files are imported once, on first open.

mod db;
mod migrate;
#[cfg(test)]
mod tests;

use rusqlite::{OptionalExtension, Transaction, TransactionBehavior, params};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use db::sql;

/// The longest key, in bytes.
pub const MAX_KEY_BYTES: usize = 256;
/// The largest value, in bytes.
pub const MAX_VALUE_BYTES: usize = 1024 * 1024;

/// Why a state operation failed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum StateError {
    /// A bad key or value, or a write past a quota.
    #[error("{0}")]
    Invalid(String),
    /// An I/O or database failure.
    #[error("{0}")]
    Other(String),
}

/// How much one namespace may hold: keys, and bytes of keys plus values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateQuota {
    /// The most bytes (keys plus values).
    pub max_bytes: u64,
    /// The most keys.
    pub max_keys: u64,
}

/// One write of a [`StateStore::apply`] batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StateWrite {
    /// Sets `key` of namespace `ns` to `value`.
    #[allow(missing_docs)]
    Set { ns: String, key: String, value: String },
    /// Removes `key` of namespace `ns` only while it holds exactly `value` (as
    /// [`StateStore::delete_if`]).
    #[allow(missing_docs)]
    DeleteIf { ns: String, key: String, value: String },
}

impl StateWrite {
    fn check(&self) -> Result<(), StateError> {
        match self {
            StateWrite::Set { ns, key, value } => check_entry(ns, key, value),
            StateWrite::DeleteIf { ns, .. } => check_namespace(ns),
        }
    }

    fn run(&self, conn: &rusqlite::Connection) -> Result<(), StateError> {
        match self {
            StateWrite::Set { ns, key, value } => write(conn, ns, key, value),
            StateWrite::DeleteIf { ns, key, value } => delete_if(conn, ns, key, value).map(drop),
        }
    }
}

/// The store. Cheap to clone; clones share the connection pool.
#[derive(Debug, Clone)]
pub struct StateStore {
    root: PathBuf,
    pool: Arc<db::Pool>,
}

impl StateStore {
    /// A store rooted at `root` (the directory and database are created on first use).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        let root = root.into();
        StateStore { pool: Arc::new(db::Pool::new(root.clone())), root }
    }

    /// The directory it writes to.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Reads a key.
    pub fn get(&self, ns: &str, key: &str) -> Result<Option<String>, StateError> {
        check_namespace(ns)?;
        self.pool.with(|conn| read(conn, ns, key))
    }

    /// Sets a key.
    pub fn set(&self, ns: &str, key: &str, value: &str) -> Result<(), StateError> {
        check_entry(ns, key, value)?;
        self.pool.write(|conn| write(conn, ns, key, value))
    }

    /// Sets a key unless the namespace would then hold more than `quota` allows (an
    /// [`StateError::Invalid`] naming the quota; nothing is written). Replacing a value
    /// counts only the difference; a set that does not grow the namespace always succeeds.
    pub fn set_within(&self, ns: &str, key: &str, value: &str, quota: &StateQuota) -> Result<(), StateError> {
        check_entry(ns, key, value)?;
        self.pool.write(|conn| {
            let tx = immediate(conn)?;
            let old: Option<i64> = tx
                .prepare_cached("SELECT bytes FROM entries WHERE ns = ?1 AND key = ?2")
                .and_then(|mut s| s.query_row(params![ns, key], |r| r.get(0)).optional())
                .map_err(sql)?;
            let (keys_now, bytes_now) = usage_in(&tx, ns)?;
            let keys = keys_now + u64::from(old.is_none());
            let bytes = (bytes_now + (key.len() + value.len()) as u64).saturating_sub(old.unwrap_or(0) as u64);
            // A write that does not grow the namespace is always allowed (a quota lowered
            // below what a namespace holds must not stop it from shrinking).
            if keys > keys_now || bytes > bytes_now {
                check_quota(keys, bytes, quota)?;
            }
            write(&tx, ns, key, value)?;
            tx.commit().map_err(sql)
        })
    }

    /// Atomically replaces a key's value with `change(current)`: `Some` sets it, `None`
    /// removes it. No other writer, in this process or another, runs in between, so
    /// concurrent read-modify-writes (counters) lose nothing. Returns the new value.
    ///
    /// `change` runs while the database's write lock is held: keep it short.
    pub fn update(
        &self,
        ns: &str,
        key: &str,
        change: impl FnOnce(Option<String>) -> Result<Option<String>, StateError>,
    ) -> Result<Option<String>, StateError> {
        check_namespace(ns)?;
        check_key(key)?;
        self.pool.write(|conn| {
            let tx = immediate(conn)?;
            let new = change(read(&tx, ns, key)?)?;
            match &new {
                Some(value) => {
                    check_value(value)?;
                    write(&tx, ns, key, value)?;
                }
                None => remove(&tx, ns, key)?,
            }
            tx.commit().map_err(sql)?;
            Ok(new)
        })
    }

    /// Sets a key only if it is absent; `true` if this call set it. One statement: of
    /// writers racing for the same key, in this process or another, exactly one wins.
    pub fn create(&self, ns: &str, key: &str, value: &str) -> Result<bool, StateError> {
        check_entry(ns, key, value)?;
        self.pool.write(|conn| {
            let mut stmt = conn
                .prepare_cached(
                    "INSERT INTO entries (ns, key, value, bytes) VALUES (?1, ?2, ?3, ?4)
                     ON CONFLICT (ns, key) DO NOTHING",
                )
                .map_err(sql)?;
            let inserted = stmt.execute(params![ns, key, value, (key.len() + value.len()) as i64]).map_err(sql)?;
            Ok(inserted == 1)
        })
    }

    /// Sets a key to `value` only while it holds exactly `expected`; `true` if this call set
    /// it. One statement, like [`StateStore::create`]: a compare-and-swap across processes.
    pub fn replace_if(&self, ns: &str, key: &str, expected: &str, value: &str) -> Result<bool, StateError> {
        check_entry(ns, key, value)?;
        self.pool.write(|conn| {
            let mut stmt = conn
                .prepare_cached("UPDATE entries SET value = ?4, bytes = ?5 WHERE ns = ?1 AND key = ?2 AND value = ?3")
                .map_err(sql)?;
            let bytes = (key.len() + value.len()) as i64;
            Ok(stmt.execute(params![ns, key, expected, value, bytes]).map_err(sql)? == 1)
        })
    }

    /// Removes a key only while it holds exactly `value`; `true` if this call removed it.
    pub fn delete_if(&self, ns: &str, key: &str, value: &str) -> Result<bool, StateError> {
        check_namespace(ns)?;
        self.pool.write(|conn| delete_if(conn, ns, key, value))
    }

    /// Applies `writes` in order, in one transaction: every one of them or, on an error,
    /// none. Every write is checked before any is made. One commit for the batch instead of
    /// one each: what a turn writes at its end (the history, and the release of its
    /// in-flight marker) goes in one.
    pub fn apply(&self, writes: &[StateWrite]) -> Result<(), StateError> {
        writes.iter().try_for_each(StateWrite::check)?;
        self.pool.write(|conn| match writes {
            [] => Ok(()),
            [one] => one.run(conn),
            _ => {
                let tx = immediate(conn)?;
                writes.iter().try_for_each(|w| w.run(&tx))?;
                tx.commit().map_err(sql)
            }
        })
    }

    /// Removes a key.
    pub fn delete(&self, ns: &str, key: &str) -> Result<(), StateError> {
        check_namespace(ns)?;
        self.pool.write(|conn| remove(conn, ns, key))
    }

    /// Lists keys, sorted (bytewise).
    pub fn keys(&self, ns: &str) -> Result<Vec<String>, StateError> {
        check_namespace(ns)?;
        self.pool.with(|conn| {
            let mut stmt = conn.prepare_cached("SELECT key FROM entries WHERE ns = ?1 ORDER BY key").map_err(sql)?;
            let rows = stmt.query_map([ns], |r| r.get(0)).map_err(sql)?;
            rows.collect::<Result<Vec<String>, _>>().map_err(sql)
        })
    }

    /// What a namespace holds: (keys, bytes of keys plus values).
    pub fn usage(&self, ns: &str) -> Result<(u64, u64), StateError> {
        check_namespace(ns)?;
        self.pool.with(|conn| usage_in(conn, ns))
    }
}

fn immediate(conn: &mut rusqlite::Connection) -> Result<Transaction<'_>, StateError> {
    conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(sql)
}

fn read(conn: &rusqlite::Connection, ns: &str, key: &str) -> Result<Option<String>, StateError> {
    let mut stmt = conn.prepare_cached("SELECT value FROM entries WHERE ns = ?1 AND key = ?2").map_err(sql)?;
    stmt.query_row(params![ns, key], |r| r.get(0)).optional().map_err(sql)
}

fn write(conn: &rusqlite::Connection, ns: &str, key: &str, value: &str) -> Result<(), StateError> {
    let mut stmt = conn
        .prepare_cached(
            "INSERT INTO entries (ns, key, value, bytes) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (ns, key) DO UPDATE SET value = excluded.value, bytes = excluded.bytes",
        )
        .map_err(sql)?;
    stmt.execute(params![ns, key, value, (key.len() + value.len()) as i64]).map(drop).map_err(sql)
}

fn delete_if(conn: &rusqlite::Connection, ns: &str, key: &str, value: &str) -> Result<bool, StateError> {
    let mut stmt = conn.prepare_cached("DELETE FROM entries WHERE ns = ?1 AND key = ?2 AND value = ?3").map_err(sql)?;
    Ok(stmt.execute(params![ns, key, value]).map_err(sql)? == 1)
}

fn remove(conn: &rusqlite::Connection, ns: &str, key: &str) -> Result<(), StateError> {
    let mut stmt = conn.prepare_cached("DELETE FROM entries WHERE ns = ?1 AND key = ?2").map_err(sql)?;
    stmt.execute(params![ns, key]).map(drop).map_err(sql)
}

fn usage_in(conn: &rusqlite::Connection, ns: &str) -> Result<(u64, u64), StateError> {
    let mut stmt = conn.prepare_cached("SELECT keys, bytes FROM usage WHERE ns = ?1").map_err(sql)?;
    let row: Option<(i64, i64)> = stmt.query_row([ns], |r| Ok((r.get(0)?, r.get(1)?))).optional().map_err(sql)?;
    let (keys, bytes) = row.unwrap_or((0, 0));
    Ok((keys.max(0) as u64, bytes.max(0) as u64))
}

fn check_quota(keys: u64, bytes: u64, quota: &StateQuota) -> Result<(), StateError> {
    if keys > quota.max_keys {
        return Err(StateError::Invalid(format!(
            "state quota exceeded: the skill may hold at most {} keys (limit state_quota_keys)",
            quota.max_keys
        )));
    }
    if bytes > quota.max_bytes {
        return Err(StateError::Invalid(format!(
            "state quota exceeded: the skill's keys and values may total at most {} bytes (limit state_quota_mb)",
            quota.max_bytes
        )));
    }
    Ok(())
}

/// Namespaces are `[A-Za-z0-9_.-]+`, not starting with `.` (they were file names once).
pub(crate) fn check_namespace(ns: &str) -> Result<(), StateError> {
    let valid = !ns.is_empty()
        && ns.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        && !ns.starts_with('.');
    if !valid {
        return Err(StateError::Invalid(format!("invalid namespace `{ns}`")));
    }
    Ok(())
}

fn check_entry(ns: &str, key: &str, value: &str) -> Result<(), StateError> {
    check_namespace(ns)?;
    check_key(key)?;
    check_value(value)
}

fn check_key(key: &str) -> Result<(), StateError> {
    if key.is_empty() || key.len() > MAX_KEY_BYTES {
        return Err(StateError::Invalid(format!("keys must be 1 to {MAX_KEY_BYTES} bytes")));
    }
    Ok(())
}

fn check_value(value: &str) -> Result<(), StateError> {
    if value.len() > MAX_VALUE_BYTES {
        return Err(StateError::Invalid(format!("value larger than {MAX_VALUE_BYTES} bytes")));
    }
    Ok(())
}
