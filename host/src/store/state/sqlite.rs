//! The SQLite backend: one database per state directory (see `db.rs` for its connections),
//! one row per (namespace, key), a `usage` row per namespace kept in step by triggers.
//!
//! SQLite answers in microseconds from the page cache, so its calls run on the caller's
//! thread: a hop to a blocking pool would cost more than the work.

use super::db::{self, sql};
use super::{Backend, Change, StateError, StateQuota, StateWrite, check_growth, entry_bytes};
use rusqlite::{Connection, OptionalExtension, Transaction, TransactionBehavior, params};
use std::path::PathBuf;

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

    async fn set(&self, ns: &str, key: &str, value: &str) -> Result<(), StateError> {
        self.pool.write(|conn| write(conn, ns, key, value))
    }

    async fn set_within(&self, ns: &str, key: &str, value: &str, quota: &StateQuota) -> Result<(), StateError> {
        self.pool.write(|conn| {
            let tx = immediate(conn)?;
            let old: Option<i64> = tx
                .prepare_cached("SELECT bytes FROM entries WHERE ns = ?1 AND key = ?2")
                .and_then(|mut s| s.query_row(params![ns, key], |r| r.get(0)).optional())
                .map_err(sql)?;
            let now = usage_in(&tx, ns)?;
            let keys = now.0 + u64::from(old.is_none());
            let bytes = (now.1 + entry_bytes(key, value) as u64).saturating_sub(old.unwrap_or(0) as u64);
            check_growth(now, keys, bytes, quota)?;
            write(&tx, ns, key, value)?;
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
            let mut stmt = conn.prepare_cached("SELECT key FROM entries WHERE ns = ?1 ORDER BY key").map_err(sql)?;
            let rows = stmt.query_map([ns], |r| r.get(0)).map_err(sql)?;
            rows.collect::<Result<Vec<String>, _>>().map_err(sql)
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
    let mut stmt = conn.prepare_cached("SELECT value FROM entries WHERE ns = ?1 AND key = ?2").map_err(sql)?;
    stmt.query_row(params![ns, key], |r| r.get(0)).optional().map_err(sql)
}

fn write(conn: &Connection, ns: &str, key: &str, value: &str) -> Result<(), StateError> {
    let mut stmt = conn
        .prepare_cached(
            "INSERT INTO entries (ns, key, value, bytes) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (ns, key) DO UPDATE SET value = excluded.value, bytes = excluded.bytes",
        )
        .map_err(sql)?;
    stmt.execute(params![ns, key, value, entry_bytes(key, value)]).map(drop).map_err(sql)
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
