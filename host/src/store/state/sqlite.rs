//! The SQLite backend: one database per state directory (see `db.rs` for its connections),
//! one row per (namespace, key), a `usage` row per namespace kept in step by triggers.
//!
//! SQLite answers in microseconds from the page cache, so its calls run on the caller's
//! thread: a hop to a blocking pool would cost more than the work.

use super::db::{self, sql};
use super::{Backend, Change, Expiry, StateError, StateQuota, StateWrite, check_growth, entry_bytes, epoch_seconds};
use rusqlite::{Connection, OptionalExtension, Transaction, TransactionBehavior, params};
use std::path::PathBuf;
use std::time::Duration;

/// The rows of one state directory.
#[derive(Debug)]
pub struct Sqlite {
    pool: db::Pool,
}

impl Sqlite {
    /// The database under `root`; nothing is opened yet.
    pub fn new(root: PathBuf) -> Self {
        Sqlite { pool: db::Pool::new(root) }
    }
}

#[async_trait::async_trait]
impl Backend for Sqlite {
    async fn get(&self, ns: &str, key: &str) -> Result<Option<String>, StateError> {
        self.pool.with(|conn| read(conn, ns, key))
    }

    async fn touch(&self, ns: &str, key: &str, ttl: Duration, slack: Duration) -> Result<Option<String>, StateError> {
        let now = epoch_seconds();
        let found: Option<(String, Option<f64>)> = self.pool.with(|conn| {
            let mut stmt = conn
                .prepare_cached(
                    "SELECT value, expires_at FROM entries WHERE ns = ?1 AND key = ?2
                     AND (expires_at IS NULL OR expires_at > ?3)",
                )
                .map_err(sql)?;
            stmt.query_row(params![ns, key, now], |r| Ok((r.get(0)?, r.get(1)?))).optional().map_err(sql)
        })?;
        let (value, expires_at) = match found {
            Some((value, Some(expires_at))) => (value, expires_at),
            // Absent, or never expiring.
            other => return Ok(other.map(|(value, _)| value)),
        };
        let moved = now + ttl.as_secs_f64();
        if expires_at < moved - slack.as_secs_f64() {
            // Only while it lives: one that expired meanwhile stays gone.
            self.pool.write(|conn| {
                let mut stmt = conn
                    .prepare_cached("UPDATE entries SET expires_at = ?4 WHERE ns = ?1 AND key = ?2 AND expires_at > ?3")
                    .map_err(sql)?;
                stmt.execute(params![ns, key, epoch_seconds(), moved]).map(drop).map_err(sql)
            })?;
        }
        Ok(Some(value))
    }

    async fn set(&self, ns: &str, key: &str, value: &str) -> Result<(), StateError> {
        self.pool.write(|conn| write(conn, ns, key, value))
    }

    async fn set_within(
        &self,
        ns: &str,
        key: &str,
        value: &str,
        quota: &StateQuota,
        expiry: Expiry,
    ) -> Result<(), StateError> {
        let now = epoch_seconds();
        let expires_at = match expiry {
            Expiry::Never => None,
            Expiry::Idle(ttl) => Some(now + ttl.as_secs_f64()),
        };
        self.pool.write(|conn| {
            let tx = immediate(conn)?;
            if let Err(refused) = check_set(&tx, ns, key, value, quota) {
                // What expired is gone: deleted now, the write may fit.
                if purge(&tx, ns, now)? == 0 {
                    return Err(refused);
                }
                check_set(&tx, ns, key, value, quota)?;
            }
            write_expiring(&tx, ns, key, value, expires_at)?;
            tx.commit().map_err(sql)
        })
    }

    async fn update(&self, ns: &str, key: &str, change: &mut Change<'_>) -> Result<Option<String>, StateError> {
        self.pool.write(|conn| {
            let tx = immediate(conn)?;
            let new = change(read(&tx, ns, key)?)?;
            match &new {
                Some(value) => write(&tx, ns, key, value)?,
                None => remove(&tx, ns, key)?,
            }
            tx.commit().map_err(sql)?;
            Ok(new)
        })
    }

    async fn create(&self, ns: &str, key: &str, value: &str) -> Result<bool, StateError> {
        self.pool.write(|conn| {
            let mut stmt = conn
                .prepare_cached(
                    "INSERT INTO entries (ns, key, value, bytes) VALUES (?1, ?2, ?3, ?4)
                     ON CONFLICT (ns, key) DO NOTHING",
                )
                .map_err(sql)?;
            Ok(stmt.execute(params![ns, key, value, entry_bytes(key, value)]).map_err(sql)? == 1)
        })
    }

    async fn replace_if(&self, ns: &str, key: &str, expected: &str, value: &str) -> Result<bool, StateError> {
        self.pool.write(|conn| {
            let mut stmt = conn
                .prepare_cached("UPDATE entries SET value = ?4, bytes = ?5 WHERE ns = ?1 AND key = ?2 AND value = ?3")
                .map_err(sql)?;
            Ok(stmt.execute(params![ns, key, expected, value, entry_bytes(key, value)]).map_err(sql)? == 1)
        })
    }

    async fn delete_if(&self, ns: &str, key: &str, value: &str) -> Result<bool, StateError> {
        self.pool.write(|conn| delete_if(conn, ns, key, value))
    }

    async fn apply(&self, writes: &[StateWrite]) -> Result<(), StateError> {
        self.pool.write(|conn| match writes {
            [one] => run(conn, one),
            _ => {
                let tx = immediate(conn)?;
                writes.iter().try_for_each(|w| run(&tx, w))?;
                tx.commit().map_err(sql)
            }
        })
    }

    async fn delete(&self, ns: &str, key: &str) -> Result<(), StateError> {
        self.pool.write(|conn| remove(conn, ns, key))
    }

    async fn keys(&self, ns: &str) -> Result<Vec<String>, StateError> {
        self.pool.with(|conn| {
            let mut stmt = conn
                .prepare_cached(
                    "SELECT key FROM entries WHERE ns = ?1 AND (expires_at IS NULL OR expires_at > ?2) ORDER BY key",
                )
                .map_err(sql)?;
            let rows = stmt.query_map(params![ns, epoch_seconds()], |r| r.get(0)).map_err(sql)?;
            rows.collect::<Result<Vec<String>, _>>().map_err(sql)
        })
    }

    async fn sweep(&self, limit: u32) -> Result<u64, StateError> {
        self.pool.write(|conn| {
            let mut stmt = conn
                .prepare_cached(
                    "DELETE FROM entries WHERE rowid IN
                     (SELECT rowid FROM entries WHERE expires_at <= ?1 LIMIT ?2)",
                )
                .map_err(sql)?;
            Ok(stmt.execute(params![epoch_seconds(), limit]).map_err(sql)? as u64)
        })
    }

    async fn usage(&self, ns: &str) -> Result<(u64, u64), StateError> {
        self.pool.with(|conn| usage_in(conn, ns))
    }

    async fn ping(&self) -> Result<(), StateError> {
        self.pool.with(|conn| conn.query_row("SELECT 1", [], |_| Ok(())).map_err(sql))
    }

    fn describe(&self) -> String {
        self.pool.file().display().to_string()
    }
}

fn run(conn: &Connection, write_: &StateWrite) -> Result<(), StateError> {
    match write_ {
        StateWrite::Set { ns, key, value } => write(conn, ns, key, value),
        StateWrite::DeleteIf { ns, key, value } => delete_if(conn, ns, key, value).map(drop),
    }
}

fn immediate(conn: &mut Connection) -> Result<Transaction<'_>, StateError> {
    conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(sql)
}

fn read(conn: &Connection, ns: &str, key: &str) -> Result<Option<String>, StateError> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT value FROM entries WHERE ns = ?1 AND key = ?2 AND (expires_at IS NULL OR expires_at > ?3)",
        )
        .map_err(sql)?;
    stmt.query_row(params![ns, key, epoch_seconds()], |r| r.get(0)).optional().map_err(sql)
}

fn write(conn: &Connection, ns: &str, key: &str, value: &str) -> Result<(), StateError> {
    write_expiring(conn, ns, key, value, None)
}

/// Sets a key that expires at `expires_at` (seconds since the epoch), or never (`None`).
fn write_expiring(
    conn: &Connection,
    ns: &str,
    key: &str,
    value: &str,
    expires_at: Option<f64>,
) -> Result<(), StateError> {
    let mut stmt = conn
        .prepare_cached(
            "INSERT INTO entries (ns, key, value, bytes, expires_at) VALUES (?1, ?2, ?3, ?4, ?5)
             ON CONFLICT (ns, key) DO UPDATE SET value = excluded.value, bytes = excluded.bytes,
                 expires_at = excluded.expires_at",
        )
        .map_err(sql)?;
    stmt.execute(params![ns, key, value, entry_bytes(key, value), expires_at]).map(drop).map_err(sql)
}

/// Whether setting `key` to `value` keeps the namespace within `quota`.
fn check_set(tx: &Connection, ns: &str, key: &str, value: &str, quota: &StateQuota) -> Result<(), StateError> {
    let old: Option<i64> = tx
        .prepare_cached("SELECT bytes FROM entries WHERE ns = ?1 AND key = ?2")
        .and_then(|mut s| s.query_row(params![ns, key], |r| r.get(0)).optional())
        .map_err(sql)?;
    let now = usage_in(tx, ns)?;
    let keys = now.0 + u64::from(old.is_none());
    let bytes = (now.1 + entry_bytes(key, value) as u64).saturating_sub(old.unwrap_or(0) as u64);
    check_growth(now, keys, bytes, quota)
}

/// Deletes the entries of `ns` that expired by `now`; how many.
fn purge(tx: &Connection, ns: &str, now: f64) -> Result<usize, StateError> {
    let mut stmt = tx.prepare_cached("DELETE FROM entries WHERE ns = ?1 AND expires_at <= ?2").map_err(sql)?;
    stmt.execute(params![ns, now]).map_err(sql)
}

fn delete_if(conn: &Connection, ns: &str, key: &str, value: &str) -> Result<bool, StateError> {
    let mut stmt = conn.prepare_cached("DELETE FROM entries WHERE ns = ?1 AND key = ?2 AND value = ?3").map_err(sql)?;
    Ok(stmt.execute(params![ns, key, value]).map_err(sql)? == 1)
}

fn remove(conn: &Connection, ns: &str, key: &str) -> Result<(), StateError> {
    let mut stmt = conn.prepare_cached("DELETE FROM entries WHERE ns = ?1 AND key = ?2").map_err(sql)?;
    stmt.execute(params![ns, key]).map(drop).map_err(sql)
}

fn usage_in(conn: &Connection, ns: &str) -> Result<(u64, u64), StateError> {
    let mut stmt = conn.prepare_cached("SELECT keys, bytes FROM usage WHERE ns = ?1").map_err(sql)?;
    let row: Option<(i64, i64)> = stmt.query_row([ns], |r| Ok((r.get(0)?, r.get(1)?))).optional().map_err(sql)?;
    let (keys, bytes) = row.unwrap_or((0, 0));
    Ok((keys.max(0) as u64, bytes.max(0) as u64))
}
