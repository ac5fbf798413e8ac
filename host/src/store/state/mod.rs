//! The persistent key-value store: namespaces of string keys and values (one per skill, and
//! the engine's own: histories, approval counts, in-flight markers, adapters' bookkeeping).
//!
//! One [`StateStore`] API over two backends ([`Backend`]): SQLite, one database per state
//! directory (`state.sqlite3`, WAL mode; the default: nothing to install, shared by the
//! processes of one machine), and PostgreSQL (`state.backend: postgres`; shared by replicas on
//! many machines). The store checks keys, values and namespaces; a backend only stores. Every
//! read goes to the database, so processes sharing it see each other's writes at once.
//!
//! Entries written with an [`Expiry::Idle`] (the `state` import's per-conversation
//! namespaces, [`scope`]) expire once that long passes with no get or set of the key: `get`
//! and `keys` no longer see them, and they are deleted by a sweep at most once a minute per
//! store ([`StateStore::sweep_expired`]) or when their namespace meets its quota.

mod db;
mod migrate;
pub mod postgres;
pub mod scope;
mod sqlite;
#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub use scope::{Conversation, Namespace, StateScope};

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

/// How long an entry lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Expiry {
    /// Until it is deleted.
    #[default]
    Never,
    /// Until this long passes with no get ([`StateStore::get_touching`]) or set of the key.
    Idle(Duration),
}

/// The most an entry's expiry may lag behind its last get (see [`StateStore::get_touching`]).
const MAX_TOUCH_SLACK: Duration = Duration::from_secs(60);
/// How often a store deletes expired entries (at most; only while expiring entries are
/// written).
const SWEEP_EVERY: Duration = Duration::from_secs(60);
/// The most expired entries one statement of a sweep deletes (it runs again while it finds
/// as many), so a sweep never holds the database's write lock for long.
const SWEEP_BATCH: u32 = 1000;

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
}

/// A read-modify-write's change: the current value in, the new one out (`None` removes).
/// A backend may call it more than once (PostgreSQL, when another writer created the key
/// between its read and its write): it must depend on nothing but its argument.
pub type Change<'a> = dyn FnMut(Option<String>) -> Result<Option<String>, StateError> + Send + 'a;

/// Where a store keeps its rows. Every method gets arguments the store has checked already.
#[async_trait::async_trait]
pub trait Backend: std::fmt::Debug + Send + Sync {
    /// Reads a key (not an expired one).
    async fn get(&self, ns: &str, key: &str) -> Result<Option<String>, StateError>;
    /// Reads a key (not an expired one) and, when its expiry is more than `slack` before
    /// `ttl` from now, moves it there (see [`StateStore::get_touching`]).
    async fn touch(&self, ns: &str, key: &str, ttl: Duration, slack: Duration) -> Result<Option<String>, StateError>;
    /// Sets a key, for good.
    async fn set(&self, ns: &str, key: &str, value: &str) -> Result<(), StateError>;
    /// Sets a key unless the namespace would then pass `quota`, counting what expired as
    /// gone (see [`StateStore::set_within`]).
    async fn set_within(
        &self,
        ns: &str,
        key: &str,
        value: &str,
        quota: &StateQuota,
        expiry: Expiry,
    ) -> Result<(), StateError>;
    /// An atomic read-modify-write (see [`StateStore::update`]).
    async fn update(&self, ns: &str, key: &str, change: &mut Change<'_>) -> Result<Option<String>, StateError>;
    /// Sets a key only if absent.
    async fn create(&self, ns: &str, key: &str, value: &str) -> Result<bool, StateError>;
    /// Sets a key only while it holds `expected`.
    async fn replace_if(&self, ns: &str, key: &str, expected: &str, value: &str) -> Result<bool, StateError>;
    /// Removes a key only while it holds `value`.
    async fn delete_if(&self, ns: &str, key: &str, value: &str) -> Result<bool, StateError>;
    /// Makes every write or none, in order.
    async fn apply(&self, writes: &[StateWrite]) -> Result<(), StateError>;
    /// Removes a key.
    async fn delete(&self, ns: &str, key: &str) -> Result<(), StateError>;
    /// The keys of a namespace, sorted bytewise, but the expired ones.
    async fn keys(&self, ns: &str) -> Result<Vec<String>, StateError>;
    /// Deletes at most `limit` expired entries, of any namespace; how many it deleted.
    async fn sweep(&self, limit: u32) -> Result<u64, StateError>;
    /// (keys, bytes of keys plus values) of a namespace.
    async fn usage(&self, ns: &str) -> Result<(u64, u64), StateError>;
    /// Whether the database answers (and its schema is ready): `/readyz`.
    async fn ping(&self) -> Result<(), StateError>;
    /// Where the rows are, for logs and errors (never a password).
    fn describe(&self) -> String;
}

/// The store. Cheap to clone; clones share the backend and its connections.
#[derive(Debug, Clone)]
pub struct StateStore {
    backend: Arc<dyn Backend>,
    /// The database, for the PostgreSQL backend (what replicas share beside the keys).
    postgres: Option<Arc<postgres::Postgres>>,
    /// When (seconds since the epoch) the next sweep of expired entries is due.
    next_sweep: Arc<AtomicU64>,
}

impl StateStore {
    /// A SQLite store rooted at `root` (the directory and database are created on first use).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        StateStore::with_backend(Arc::new(sqlite::Sqlite::new(root.into())))
    }

    /// A store over any backend.
    pub fn with_backend(backend: Arc<dyn Backend>) -> Self {
        StateStore { backend, postgres: None, next_sweep: Arc::default() }
    }

    /// A store on PostgreSQL.
    pub fn on_postgres(pg: Arc<postgres::Postgres>) -> Self {
        StateStore { postgres: Some(pg.clone()), ..StateStore::with_backend(pg) }
    }

    /// The PostgreSQL database, when the store is on one.
    pub fn postgres(&self) -> Option<Arc<postgres::Postgres>> {
        self.postgres.clone()
    }

    /// The store `state` configures: SQLite under its `filesystem.path` (resolved by the
    /// caller against the config file's folder), or PostgreSQL. Stores of one process on
    /// one PostgreSQL database share a connection pool. Nothing is connected yet: the first
    /// use connects and migrates the schema.
    pub fn from_config(state: &crate::config::State, resolve: impl Fn(&Path) -> PathBuf) -> Result<Self, StateError> {
        match state.backend {
            crate::config::StateBackend::Filesystem => Ok(StateStore::new(resolve(&state.directory()))),
            crate::config::StateBackend::Postgres => {
                let settings =
                    postgres::Settings::from_config(state.postgres.as_ref(), |name| std::env::var(name).ok())?;
                Ok(StateStore::on_postgres(postgres::Postgres::shared(settings)?))
            }
        }
    }

    /// Where the rows are, for logs and errors.
    pub fn describe(&self) -> String {
        self.backend.describe()
    }

    /// Whether the database answers: an error saying why not.
    pub async fn ping(&self) -> Result<(), StateError> {
        self.backend.ping().await
    }

    /// Reads a key; an expired entry is not there.
    pub async fn get(&self, ns: &str, key: &str) -> Result<Option<String>, StateError> {
        check_namespace(ns)?;
        self.backend.get(ns, key).await
    }

    /// Reads a key of a namespace whose entries expire, and gives it `ttl` from now: a read
    /// keeps an entry alive as a write does. The expiry moves only when it is more than a
    /// tenth of `ttl` (at most a minute) behind, so that most reads stay reads: they never
    /// wait for a writer, and one that moves the expiry waits like a write.
    pub async fn get_touching(&self, ns: &str, key: &str, ttl: Duration) -> Result<Option<String>, StateError> {
        check_namespace(ns)?;
        self.backend.touch(ns, key, ttl, (ttl / 10).min(MAX_TOUCH_SLACK)).await
    }

    /// Sets a key.
    pub async fn set(&self, ns: &str, key: &str, value: &str) -> Result<(), StateError> {
        check_entry(ns, key, value)?;
        self.backend.set(ns, key, value).await
    }

    /// Sets a key, living as `expiry` says, unless the namespace would then hold more than
    /// `quota` allows (an [`StateError::Invalid`] naming the quota; nothing is written).
    /// Replacing a value counts only the difference; a set that does not grow the namespace
    /// always succeeds; entries that expired are deleted before a write is refused, so they
    /// never count against it. Concurrent writers of one namespace, on any process, cannot
    /// pass the quota together.
    pub async fn set_within(
        &self,
        ns: &str,
        key: &str,
        value: &str,
        quota: &StateQuota,
        expiry: Expiry,
    ) -> Result<(), StateError> {
        check_entry(ns, key, value)?;
        self.backend.set_within(ns, key, value, quota, expiry).await?;
        if expiry != Expiry::Never {
            self.sweep_when_due();
        }
        Ok(())
    }

    /// Atomically replaces a key's value with `change(current)`: `Some` sets it, `None`
    /// removes it. No other read-modify-write of the key, in this process or another, runs in
    /// between, so concurrent counters lose nothing. Returns the new value.
    ///
    /// `change` runs while the key is locked: keep it short. It may run more than once
    /// (see [`Change`]).
    pub async fn update(
        &self,
        ns: &str,
        key: &str,
        mut change: impl FnMut(Option<String>) -> Result<Option<String>, StateError> + Send,
    ) -> Result<Option<String>, StateError> {
        check_namespace(ns)?;
        check_key(key)?;
        let mut checked = |old: Option<String>| {
            let new = change(old)?;
            if let Some(value) = &new {
                check_value(value)?;
            }
            Ok(new)
        };
        self.backend.update(ns, key, &mut checked).await
    }

    /// Sets a key only if it is absent; `true` if this call set it. Of writers racing for
    /// the same key, in this process or another, exactly one wins.
    pub async fn create(&self, ns: &str, key: &str, value: &str) -> Result<bool, StateError> {
        check_entry(ns, key, value)?;
        self.backend.create(ns, key, value).await
    }

    /// Sets a key to `value` only while it holds exactly `expected`; `true` if this call set
    /// it: a compare-and-swap across processes.
    pub async fn replace_if(&self, ns: &str, key: &str, expected: &str, value: &str) -> Result<bool, StateError> {
        check_entry(ns, key, value)?;
        self.backend.replace_if(ns, key, expected, value).await
    }

    /// Removes a key only while it holds exactly `value`; `true` if this call removed it.
    pub async fn delete_if(&self, ns: &str, key: &str, value: &str) -> Result<bool, StateError> {
        check_namespace(ns)?;
        self.backend.delete_if(ns, key, value).await
    }

    /// Applies `writes` in order, in one transaction: every one of them or, on an error,
    /// none. Every write is checked before any is made. One commit for the batch instead of
    /// one each: what a turn writes at its end (the history, and the release of its
    /// in-flight marker) goes in one.
    pub async fn apply(&self, writes: &[StateWrite]) -> Result<(), StateError> {
        writes.iter().try_for_each(StateWrite::check)?;
        if writes.is_empty() {
            return Ok(());
        }
        self.backend.apply(writes).await
    }

    /// Removes a key.
    pub async fn delete(&self, ns: &str, key: &str) -> Result<(), StateError> {
        check_namespace(ns)?;
        self.backend.delete(ns, key).await
    }

    /// Lists keys, sorted (bytewise); the expired ones are not there.
    pub async fn keys(&self, ns: &str) -> Result<Vec<String>, StateError> {
        check_namespace(ns)?;
        self.backend.keys(ns).await
    }

    /// Deletes every expired entry, of every namespace, a batch at a time; how many.
    pub async fn sweep_expired(&self) -> Result<u64, StateError> {
        let mut deleted = 0;
        loop {
            let batch = self.backend.sweep(SWEEP_BATCH).await?;
            deleted += batch;
            if batch < u64::from(SWEEP_BATCH) {
                return Ok(deleted);
            }
        }
    }

    /// Starts a sweep in the background when none ran on this store for [`SWEEP_EVERY`]
    /// (one caller wins the turn; the others go on at once).
    fn sweep_when_due(&self) {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let due = self.next_sweep.load(Ordering::Relaxed);
        let next = now + SWEEP_EVERY.as_secs();
        if now < due || self.next_sweep.compare_exchange(due, next, Ordering::Relaxed, Ordering::Relaxed).is_err() {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        let store = self.clone();
        runtime.spawn(async move {
            match store.sweep_expired().await {
                Ok(0) => {}
                Ok(deleted) => tracing::debug!(deleted, "deleted expired state entries"),
                Err(e) => tracing::warn!("deleting expired state entries: {e}"),
            }
        });
    }

    /// What a namespace holds: (keys, bytes of keys plus values).
    pub async fn usage(&self, ns: &str) -> Result<(u64, u64), StateError> {
        check_namespace(ns)?;
        self.backend.usage(ns).await
    }
}

/// The bytes an entry counts for in its namespace's usage.
fn entry_bytes(key: &str, value: &str) -> i64 {
    (key.len() + value.len()) as i64
}

/// A quota check for a write that makes the namespace hold `keys` and `bytes`, where it
/// held `keys_now` and `bytes_now`: a write that does not grow the namespace is always
/// allowed (a quota lowered below what a namespace holds must not stop it from shrinking).
fn check_growth(now: (u64, u64), keys: u64, bytes: u64, quota: &StateQuota) -> Result<(), StateError> {
    if keys > now.0 || bytes > now.1 { check_quota(keys, bytes, quota) } else { Ok(()) }
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

/// Seconds since the epoch, as the SQLite backend stores expiries.
fn epoch_seconds() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
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
