//! The PostgreSQL backend (`learning.memory.backend: postgres`): each file one row of
//! `skillhost_memory`, keyed by the memory root's name ([`super::namespace`]) and the
//! file's normalized path, in the database (and through the pool) of the state store's
//! PostgreSQL backend.
//!
//! Directories are not stored: they are the prefixes of the files' paths. What the kernel
//! enforces on disk is enforced here under a lock: a file cannot be where a directory is
//! (`a` while `a/b` exists) nor under a file (`a/b` while `a` exists). Every write runs in
//! one transaction that first locks the root's usage row (kept by a trigger), so writers of
//! one root, on any replica, check the quota and the paths one at a time, and an overwrite
//! or an append is one statement: a reader sees the file before it or after.

use super::{MAX_FILE_BYTES, MAX_SEARCH_HITS, MemoryError, MemoryQuota, SearchHit, Target, Usage};
use super::{check_quota, search_text, target};
use crate::store::StateError;
use crate::store::state::Backend as _;
use crate::store::state::postgres::{Postgres, in_transaction};
use deadpool_postgres::GenericClient;
use futures::TryStreamExt;
use std::sync::Arc;

const READ: &str = "SELECT content FROM skillhost_memory WHERE ns = $1 AND path = $2";
const SIZE: &str = "SELECT bytes FROM skillhost_memory WHERE ns = $1 AND path = $2";
/// Whether a directory on the way is a file, and whether the path is a directory: some
/// file's path starts with it and `/` (`0` is the byte after `/`).
const SHAPE: &str = "SELECT
    EXISTS (SELECT 1 FROM skillhost_memory WHERE ns = $1 AND path = ANY($2::text[])),
    EXISTS (SELECT 1 FROM skillhost_memory WHERE ns = $1 AND path > $3 || '/' AND path < $3 || '0')";
const LOCK: &str =
    "INSERT INTO skillhost_memory_usage (ns, files, bytes) VALUES ($1, 0, 0) ON CONFLICT (ns) DO NOTHING";
const USAGE: &str = "SELECT files, bytes FROM skillhost_memory_usage WHERE ns = $1";
const REPLACE: &str = "INSERT INTO skillhost_memory (ns, path, content, bytes) VALUES ($1, $2, $3, $4)
    ON CONFLICT (ns, path) DO UPDATE SET content = EXCLUDED.content, bytes = EXCLUDED.bytes, updated_at = now()";
const APPEND: &str = "INSERT INTO skillhost_memory AS m (ns, path, content, bytes) VALUES ($1, $2, $3, $4)
    ON CONFLICT (ns, path) DO UPDATE SET content = m.content || EXCLUDED.content, bytes = m.bytes + EXCLUDED.bytes,
        updated_at = now()";
const FILES: &str = "SELECT path, content FROM skillhost_memory WHERE ns = $1 ORDER BY path";

/// The files of one memory root in one database.
#[derive(Debug, Clone)]
pub struct Rows {
    pg: Arc<Postgres>,
    ns: String,
}

fn db(e: StateError) -> MemoryError {
    MemoryError::Io(format!("memory: {e}"))
}

impl Rows {
    /// Memory root `ns` in `pg`.
    pub fn new(pg: Arc<Postgres>, ns: String) -> Self {
        Rows { pg, ns }
    }

    /// The database and the root's name.
    pub fn describe(&self) -> String {
        format!("{} (memory `{}`)", self.pg.describe(), self.ns)
    }

    fn error(&self, e: tokio_postgres::Error) -> MemoryError {
        db(self.pg.error(e))
    }

    /// Reads a file; `None` when it does not exist.
    pub async fn read(&self, path: &str) -> Result<Option<String>, MemoryError> {
        let target = target(path)?;
        let c = self.pg.client().await.map_err(db)?;
        let row = c.query_opt(READ, &[&self.ns, &target.rel()]).await.map_err(|e| self.error(e))?;
        if let Some(row) = row {
            let bytes: Vec<u8> = row.get(0);
            if bytes.len() > MAX_FILE_BYTES {
                return Err(MemoryError::TooLarge);
            }
            return Ok(Some(String::from_utf8_lossy(&bytes).into_owned()));
        }
        match shape(&c, &self.ns, &target).await.map_err(|e| self.error(e))? {
            Some(refusal) => Err(refusal),
            None => Ok(None),
        }
    }

    /// Writes or appends, within `quota` when there is one.
    pub async fn write(
        &self,
        path: &str,
        content: &str,
        append: bool,
        quota: Option<&MemoryQuota>,
    ) -> Result<(), MemoryError> {
        if content.len() > MAX_FILE_BYTES {
            return Err(MemoryError::TooLarge);
        }
        let target = target(path)?;
        let (ns, rel, len) = (&self.ns, target.rel(), content.len() as i64);
        // Refusals are outcomes of the transaction (it wrote nothing); its errors are the database's.
        let done: Result<Result<(), MemoryError>, StateError> = async {
            in_transaction!(self.pg, tx, Result<(), MemoryError>, {
            // The root's usage row, locked: writers of one root take turns, on any replica.
            tx.execute(LOCK, &[ns]).await?;
            let row = tx.query_one(&format!("{USAGE} FOR UPDATE"), &[ns]).await?;
            let usage = Usage { files: row.get::<_, i64>(0).max(0) as u64, bytes: row.get::<_, i64>(1).max(0) as u64 };
            let existing = tx.query_opt(SIZE, &[ns, &rel]).await?.map(|r| r.get::<_, i64>(0).max(0) as u64);
            if existing.is_none()
                && let Some(refusal) = shape(&tx, ns, &target).await?
            {
                return Ok(Some(Err(refusal)));
            }
            if let Some(quota) = quota
                && let Err(refusal) = check_quota(usage, existing, len as u64, append, quota)
            {
                return Ok(Some(Err(refusal)));
            }
            if append && existing.unwrap_or(0) as usize + content.len() > MAX_FILE_BYTES {
                return Ok(Some(Err(MemoryError::TooLarge)));
            }
            let sql = if append { APPEND } else { REPLACE };
            tx.execute(sql, &[ns, &rel, &content.as_bytes(), &len]).await?;
            Ok(Some(Ok(())))
            })
        }
        .await;
        done.map_err(db)?
    }

    /// What the root holds.
    pub async fn usage(&self) -> Result<Usage, MemoryError> {
        let c = self.pg.client().await.map_err(db)?;
        let row = c.query_opt(USAGE, &[&self.ns]).await.map_err(|e| self.error(e))?;
        let (files, bytes): (i64, i64) = row.map_or((0, 0), |r| (r.get(0), r.get(1)));
        Ok(Usage { files: files.max(0) as u64, bytes: bytes.max(0) as u64 })
    }

    /// Searches the files in path order, reading rows only until the hits are complete.
    pub async fn search(&self, query: &str) -> Result<Vec<SearchHit>, MemoryError> {
        let needle = query.to_lowercase();
        let mut hits = Vec::new();
        if needle.is_empty() {
            return Ok(hits);
        }
        let c = self.pg.client().await.map_err(db)?;
        let rows = c.query_raw(FILES, [&self.ns]).await.map_err(|e| self.error(e))?;
        let mut rows = std::pin::pin!(rows);
        while hits.len() < MAX_SEARCH_HITS
            && let Some(row) = rows.try_next().await.map_err(|e| self.error(e))?
        {
            let (path, content): (String, Vec<u8>) = (row.get(0), row.get(1));
            search_text(&path, &String::from_utf8_lossy(&content), &needle, &mut hits);
        }
        Ok(hits)
    }
}

/// Why `target`, which is not a file, cannot be read or written as one: a directory on its
/// way is a file, or it is a directory itself. `None` when it can.
async fn shape<C: GenericClient + Sync>(
    c: &C,
    ns: &str,
    target: &Target<'_>,
) -> Result<Option<MemoryError>, tokio_postgres::Error> {
    let row = c.query_one(SHAPE, &[&ns, &target.parents(), &target.rel()]).await?;
    Ok(match (row.get::<_, bool>(0), row.get::<_, bool>(1)) {
        (true, _) => Some(target.invalid(super::NOT_A_DIRECTORY)),
        (false, true) => Some(target.invalid(super::IS_A_DIRECTORY)),
        (false, false) => None,
    })
}
