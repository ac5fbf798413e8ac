//! The PostgreSQL backend (`state.backend: postgres`): one database shared by every replica.
//!
//! `tokio-postgres` through a `deadpool-postgres` pool, TLS by rustls (`sslmode` as libpq
//! reads it). Keys and values are `bytea` (a skill's key may hold a NUL byte, which `text`
//! refuses); `ORDER BY key` on `bytea` is bytewise, as the store promises. The schema is
//! created and migrated on first use by versioned migrations ([`MIGRATIONS`]) under an
//! advisory lock, so replicas starting at once migrate once. Conditional writes are one
//! statement each (`ON CONFLICT DO NOTHING`, `UPDATE ... WHERE value = ...`), so of racing
//! writers on any replicas exactly one wins; transactions that meet a deadlock or a
//! serialization failure are run again.

mod replicas;
pub use replicas::{ELECTION_RETRY, HEARTBEAT, Leadership, ORPHANED_AFTER};
mod tls;

use super::{Backend, Change, Expiry, StateError, StateQuota, StateWrite, check_growth, entry_bytes};
use crate::config::PostgresState;
use crate::store::with_causes;
use deadpool_postgres::{GenericClient, Manager, ManagerConfig, Object, Pool, RecyclingMethod, Runtime};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, LazyLock, Weak};
use std::time::Duration;
use tokio_postgres::error::SqlState;

/// Connections a process opens at most, unless `state.postgres.pool_size` says otherwise.
const DEFAULT_POOL_SIZE: usize = 16;
/// How long connecting, or waiting for a free connection, may take.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);
/// The advisory lock migrations run under (any fixed number; "skillhost" in ASCII).
const MIGRATION_LOCK: i64 = 0x736b_696c_6c68_6f73;
/// How often a transaction that lost a deadlock or a serialization check runs again.
pub(crate) const RETRIES: usize = 5;

/// The schema's versions, in order. A released migration is never changed: a change is a
/// new one.
pub const MIGRATIONS: &[(i32, &str, &str)] = &[
    (
        1,
        "key-value state",
        "CREATE TABLE skillhost_state (
        ns text NOT NULL, key bytea NOT NULL, value bytea NOT NULL, bytes bigint NOT NULL,
        PRIMARY KEY (ns, key));
    CREATE TABLE skillhost_state_usage (ns text PRIMARY KEY, keys bigint NOT NULL, bytes bigint NOT NULL);
    CREATE FUNCTION skillhost_state_usage() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP = 'INSERT' THEN
            INSERT INTO skillhost_state_usage AS u (ns, keys, bytes) VALUES (NEW.ns, 1, NEW.bytes)
                ON CONFLICT (ns) DO UPDATE SET keys = u.keys + 1, bytes = u.bytes + EXCLUDED.bytes;
            RETURN NEW;
        ELSIF TG_OP = 'UPDATE' THEN
            UPDATE skillhost_state_usage SET bytes = bytes - OLD.bytes + NEW.bytes WHERE ns = NEW.ns;
            RETURN NEW;
        ELSE
            UPDATE skillhost_state_usage SET keys = keys - 1, bytes = bytes - OLD.bytes WHERE ns = OLD.ns;
            RETURN OLD;
        END IF;
    END $$;
    CREATE TRIGGER skillhost_state_usage AFTER INSERT OR UPDATE OR DELETE ON skillhost_state
        FOR EACH ROW EXECUTE FUNCTION skillhost_state_usage();",
    ),
    (
        2,
        "approvals and questions shared by replicas",
        "CREATE TABLE skillhost_replicas (
            id text PRIMARY KEY, started_at double precision NOT NULL, seen_at double precision NOT NULL);
        CREATE TABLE skillhost_interactions (
            id text PRIMARY KEY, kind text NOT NULL, run_id text NOT NULL, channel_id text NOT NULL,
            replica text NOT NULL, expires_at double precision NOT NULL, challenge text, prompt text,
            choices text, outcome text, answer text, created_at double precision NOT NULL,
            decided_at double precision);
        CREATE INDEX skillhost_interactions_pending ON skillhost_interactions (run_id) WHERE outcome IS NULL;
        CREATE INDEX skillhost_interactions_decided ON skillhost_interactions (decided_at)
            WHERE outcome IS NOT NULL;",
    ),
    (
        3,
        "memory files",
        // `path` is bytewise (`C`) text: `ORDER BY path` and the prefix ranges that find a
        // directory's files are the same on every database, and use the primary key.
        "CREATE TABLE skillhost_memory (
            ns text NOT NULL, path text COLLATE \"C\" NOT NULL, content bytea NOT NULL, bytes bigint NOT NULL,
            updated_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (ns, path));
        CREATE TABLE skillhost_memory_usage (ns text PRIMARY KEY, files bigint NOT NULL, bytes bigint NOT NULL);
        CREATE FUNCTION skillhost_memory_usage() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF TG_OP = 'INSERT' THEN
                INSERT INTO skillhost_memory_usage AS u (ns, files, bytes) VALUES (NEW.ns, 1, NEW.bytes)
                    ON CONFLICT (ns) DO UPDATE SET files = u.files + 1, bytes = u.bytes + EXCLUDED.bytes;
                RETURN NEW;
            ELSIF TG_OP = 'UPDATE' THEN
                UPDATE skillhost_memory_usage SET bytes = bytes - OLD.bytes + NEW.bytes WHERE ns = NEW.ns;
                RETURN NEW;
            ELSE
                UPDATE skillhost_memory_usage SET files = files - 1, bytes = bytes - OLD.bytes WHERE ns = OLD.ns;
                RETURN OLD;
            END IF;
        END $$;
        CREATE TRIGGER skillhost_memory_usage AFTER INSERT OR UPDATE OR DELETE ON skillhost_memory
            FOR EACH ROW EXECUTE FUNCTION skillhost_memory_usage();",
    ),
    (
        4,
        "chat turns waiting for a person, resumable on any replica",
        "ALTER TABLE skillhost_interactions ADD COLUMN durable boolean NOT NULL DEFAULT false;
        CREATE TABLE skillhost_waiting_turns (
            run_id text PRIMARY KEY, scope text NOT NULL, approval_id text NOT NULL, replica text NOT NULL,
            leased_by text, place text NOT NULL, checkpoint text NOT NULL, prompt text,
            updated_at double precision NOT NULL);
        CREATE INDEX skillhost_waiting_turns_free ON skillhost_waiting_turns (scope) WHERE leased_by IS NULL;",
    ),
    (
        5,
        "expiring entries",
        // Seconds since the epoch (the database's clock); NULL: never. The partial index
        // serves the sweep.
        "ALTER TABLE skillhost_state ADD COLUMN expires_at double precision;
        CREATE INDEX skillhost_state_expiry ON skillhost_state (expires_at) WHERE expires_at IS NOT NULL;",
    ),
    (
        6,
        "who asked and who may decide",
        // The agent, the surface that asked (`api`, `slack:<bot>`, ...), who may decide
        // there (a JSON array; NULL: anyone the surface lets in), what every view shows (the
        // redacted presentation, JSON), and who decided. The partial index serves the
        // fleet-wide lists.
        "ALTER TABLE skillhost_interactions ADD COLUMN agent text NOT NULL DEFAULT '',
            ADD COLUMN surface text NOT NULL DEFAULT '', ADD COLUMN deciders text,
            ADD COLUMN presentation text, ADD COLUMN decided_by text;
        CREATE INDEX skillhost_interactions_waiting ON skillhost_interactions (agent, kind) WHERE outcome IS NULL;",
    ),
    (
        7,
        "no usage counted for turn bookkeeping",
        // The in-flight markers (`inflight`) and the approval counts (`approvals`,
        // `approvals-<agent>`) change on every turn and no quota applies to them: counting
        // them made every turn of the fleet wait on one usage row. Their counts go.
        "CREATE OR REPLACE FUNCTION skillhost_state_usage() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF TG_OP = 'INSERT' THEN
                IF NOT skillhost_state_uncounted(NEW.ns) THEN
                    INSERT INTO skillhost_state_usage AS u (ns, keys, bytes) VALUES (NEW.ns, 1, NEW.bytes)
                        ON CONFLICT (ns) DO UPDATE SET keys = u.keys + 1, bytes = u.bytes + EXCLUDED.bytes;
                END IF;
                RETURN NEW;
            ELSIF TG_OP = 'UPDATE' THEN
                IF NOT skillhost_state_uncounted(NEW.ns) THEN
                    UPDATE skillhost_state_usage SET bytes = bytes - OLD.bytes + NEW.bytes WHERE ns = NEW.ns;
                END IF;
                RETURN NEW;
            ELSE
                IF NOT skillhost_state_uncounted(OLD.ns) THEN
                    UPDATE skillhost_state_usage SET keys = keys - 1, bytes = bytes - OLD.bytes WHERE ns = OLD.ns;
                END IF;
                RETURN OLD;
            END IF;
        END $$;
        CREATE FUNCTION skillhost_state_uncounted(ns text) RETURNS boolean LANGUAGE sql IMMUTABLE AS
            $$ SELECT ns = 'inflight' OR ns = 'approvals' OR ns LIKE 'approvals-%' $$;
        DELETE FROM skillhost_state_usage WHERE skillhost_state_uncounted(ns);",
    ),
    (
        8,
        "tasks of the MCP Tasks extension",
        // The replica running it; its status; the requests still unanswered and the answers
        // taken while `input_required` (JSON objects); the result or error (JSON text).
        "CREATE TABLE skillhost_tasks (
            id text PRIMARY KEY, agent text NOT NULL, tool text NOT NULL, replica text NOT NULL,
            status text NOT NULL, message text, created_at double precision NOT NULL,
            updated_at double precision NOT NULL, expires_at double precision NOT NULL,
            requests jsonb, responses jsonb, outcome text);
        CREATE INDEX skillhost_tasks_expiry ON skillhost_tasks (expires_at);
        CREATE INDEX skillhost_tasks_running ON skillhost_tasks (replica) WHERE status IN ('working', 'input_required');",
    ),
    (
        9,
        "the token a decision came with",
        // The name of the API token (`ui.tokens`, `default` for `ui.auth_token`); NULL for
        // a decision taken in a chat, the terminal or by an MCP client.
        "ALTER TABLE skillhost_interactions ADD COLUMN decided_token text;",
    ),
];

/// `libpq`'s `sslmode`, which `tokio-postgres` reads only in part.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SslMode {
    /// No TLS.
    Disable,
    /// TLS when the server offers it (libpq's default), verified as `require` is.
    Prefer,
    /// TLS always; the certificate is verified against `sslrootcert` when one is given (as
    /// libpq does), else not.
    Require,
    /// TLS, the certificate's chain verified (system roots and `sslrootcert`).
    VerifyCa,
    /// TLS, the chain and the host name verified.
    VerifyFull,
}

impl SslMode {
    fn parse(value: &str, section: &str) -> Result<Self, StateError> {
        Ok(match value {
            "disable" => SslMode::Disable,
            "prefer" | "allow" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            other => {
                return Err(StateError::Other(format!(
                    "{section}: sslmode `{other}` is none of disable, allow, prefer, require, verify-ca, verify-full"
                )));
            }
        })
    }

    fn negotiation(self) -> tokio_postgres::config::SslMode {
        match self {
            SslMode::Disable => tokio_postgres::config::SslMode::Disable,
            SslMode::Prefer => tokio_postgres::config::SslMode::Prefer,
            _ => tokio_postgres::config::SslMode::Require,
        }
    }
}

/// Where and how to connect.
#[derive(Clone)]
pub struct Settings {
    config: tokio_postgres::Config,
    ssl: SslMode,
    root_cert: Option<PathBuf>,
    pool_size: usize,
    timeout: Duration,
}

impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe())
    }
}

impl Settings {
    /// The settings of `state.postgres` (absent: all from the environment), with what its
    /// URL leaves out read from `env` (`PGHOST`, `PGPORT`, `PGUSER`, `PGPASSWORD`,
    /// `PGDATABASE`, `PGSSLMODE`, `PGSSLROOTCERT`, as libpq reads them).
    pub fn from_config(
        postgres: Option<&PostgresState>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, StateError> {
        Settings::from_section(postgres, "state.postgres", env)
    }

    /// [`Settings::from_config`] for a block at `section` (such as
    /// `learning.memory.postgres`), which its errors name.
    pub fn from_section(
        postgres: Option<&PostgresState>,
        section: &str,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, StateError> {
        let bad = |m: String| StateError::Other(format!("{section}.url: {m}"));
        let (mut config, mut ssl, mut root_cert) = (tokio_postgres::Config::new(), None, None);
        if let Some(text) = postgres.and_then(|p| p.url.as_deref()) {
            let mut url = url::Url::parse(text).map_err(|e| bad(format!("not a URL ({e})")))?;
            if !matches!(url.scheme(), "postgres" | "postgresql") {
                return Err(bad(format!("the scheme is `{}`, not postgres://", url.scheme())));
            }
            // `tokio-postgres` knows neither `sslrootcert` nor the verify modes: taken out here.
            let mut rest = Vec::new();
            for (name, value) in url.query_pairs() {
                match &*name {
                    "sslmode" => ssl = Some(SslMode::parse(&value, section)?),
                    "sslrootcert" => root_cert = Some(PathBuf::from(&*value)),
                    _ => rest.push((name.into_owned(), value.into_owned())),
                }
            }
            url.query_pairs_mut().clear().extend_pairs(&rest);
            let mut text = url.to_string();
            if rest.is_empty() {
                text = text.trim_end_matches('?').to_owned();
            }
            config = text.parse().map_err(|e: tokio_postgres::Error| bad(with_causes(&e)))?;
        }
        if config.get_hosts().is_empty() {
            for host in env("PGHOST").unwrap_or_else(|| "localhost".into()).split(',') {
                config.host(host.trim());
            }
        }
        if config.get_ports().is_empty()
            && let Some(port) = env("PGPORT")
        {
            config.port(port.trim().parse().map_err(|_| bad(format!("PGPORT `{port}` is not a port")))?);
        }
        if config.get_user().is_none() {
            let user = env("PGUSER").or_else(|| env("USER")).unwrap_or_else(|| "postgres".into());
            config.user(&user);
        }
        if config.get_password().is_none()
            && let Some(password) = env("PGPASSWORD")
        {
            config.password(password);
        }
        if config.get_dbname().is_none()
            && let Some(db) = env("PGDATABASE")
        {
            config.dbname(&db);
        }
        let ssl = match ssl {
            Some(ssl) => ssl,
            None => env("PGSSLMODE").map(|m| SslMode::parse(&m, section)).transpose()?.unwrap_or(SslMode::Prefer),
        };
        let root_cert = root_cert.or_else(|| env("PGSSLROOTCERT").map(PathBuf::from));
        let timeout = postgres.and_then(|p| p.connect_timeout_seconds).map_or(DEFAULT_TIMEOUT, Duration::from_secs);
        config.ssl_mode(ssl.negotiation()).connect_timeout(timeout).application_name("skillhost");
        let pool_size = postgres.and_then(|p| p.pool_size).map_or(DEFAULT_POOL_SIZE, |n| n as usize);
        Ok(Settings { config, ssl, root_cert, pool_size, timeout })
    }

    /// `user@host:port/database`, never the password.
    pub fn describe(&self) -> String {
        let hosts: Vec<String> = self
            .config
            .get_hosts()
            .iter()
            .map(|h| match h {
                tokio_postgres::config::Host::Tcp(h) => h.clone(),
                tokio_postgres::config::Host::Unix(p) => p.display().to_string(),
            })
            .collect();
        let port = self.config.get_ports().first().copied().unwrap_or(5432);
        let user = self.config.get_user().unwrap_or("");
        let db = self.config.get_dbname().unwrap_or(user);
        format!("postgres://{user}@{}:{port}/{db}", hosts.join(","))
    }

    /// What tells one pool from another: every setting (the password by its hash).
    fn identity(&self) -> String {
        use sha2::Digest;
        let password = hex::encode(sha2::Sha256::digest(self.config.get_password().unwrap_or_default()));
        format!("{} {password} {:?} {:?} {}", self.describe(), self.ssl, self.root_cert, self.pool_size)
    }
}

/// The rows in one PostgreSQL database.
pub struct Postgres {
    pool: Pool,
    settings: Settings,
    /// Set once the schema is at this binary's version.
    migrated: tokio::sync::OnceCell<()>,
}

impl std::fmt::Debug for Postgres {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Postgres({})", self.settings.describe())
    }
}

impl Postgres {
    /// A backend with a pool of its own (as another replica would have); nothing is
    /// connected yet.
    pub fn connect(settings: Settings) -> Result<Arc<Self>, StateError> {
        let tls = tls::connector(settings.ssl, settings.root_cert.as_deref())?;
        let manager = Manager::from_config(
            settings.config.clone(),
            tls,
            ManagerConfig { recycling_method: RecyclingMethod::Fast },
        );
        let pool = Pool::builder(manager)
            .max_size(settings.pool_size)
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(settings.timeout))
            .create_timeout(Some(settings.timeout))
            .recycle_timeout(Some(settings.timeout))
            .build()
            .map_err(|e| StateError::Other(format!("state database {}: {e}", settings.describe())))?;
        Ok(Arc::new(Postgres { pool, settings, migrated: tokio::sync::OnceCell::new() }))
    }

    /// The backend of this process for `settings`: every store on the same database with
    /// the same settings shares one pool.
    pub fn shared(settings: Settings) -> Result<Arc<Self>, StateError> {
        static SHARED: LazyLock<Mutex<HashMap<String, Weak<Postgres>>>> = LazyLock::new(Mutex::default);
        let mut shared = SHARED.lock();
        shared.retain(|_, pool| pool.strong_count() > 0);
        let identity = settings.identity();
        if let Some(backend) = shared.get(&identity).and_then(Weak::upgrade) {
            return Ok(backend);
        }
        let backend = Postgres::connect(settings)?;
        shared.insert(identity, Arc::downgrade(&backend));
        Ok(backend)
    }

    /// A connection, once the schema is ready.
    pub(crate) async fn client(&self) -> Result<Object, StateError> {
        self.migrated.get_or_try_init(|| self.migrate()).await?;
        self.checkout().await
    }

    async fn checkout(&self) -> Result<Object, StateError> {
        self.pool.get().await.map_err(|e| {
            use deadpool_postgres::PoolError;
            let why = match &e {
                PoolError::Timeout(_) => format!("no answer within {:?}", self.settings.timeout),
                PoolError::Backend(e) => with_causes(e),
                other => other.to_string(),
            };
            StateError::Other(format!("state database {} unreachable: {why}", self.settings.describe()))
        })
    }

    /// Brings the schema to [`MIGRATIONS`]' last version, in one transaction under an
    /// advisory lock: of replicas starting at once, one migrates and the others then find
    /// it done. A database migrated by a newer skillhost is refused, not written.
    async fn migrate(&self) -> Result<(), StateError> {
        let mut client = self.checkout().await?;
        let tx = client.transaction().await.map_err(|e| self.error(e))?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK]).await.map_err(|e| self.error(e))?;
        tx.batch_execute(
            "CREATE TABLE IF NOT EXISTS skillhost_schema (
                version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())",
        )
        .await
        .map_err(|e| self.error(e))?;
        let rows = tx.query("SELECT version FROM skillhost_schema", &[]).await.map_err(|e| self.error(e))?;
        let applied: Vec<i32> = rows.iter().map(|r| r.get(0)).collect();
        let known = MIGRATIONS.last().map_or(0, |m| m.0);
        if let Some(newer) = applied.iter().copied().filter(|v| *v > known).max() {
            return Err(StateError::Other(format!(
                "state database {}: its schema is at version {newer}, newer than this skillhost knows ({known}); \
                 run the newer skillhost, or a database of this version",
                self.settings.describe()
            )));
        }
        for (version, name, sql) in MIGRATIONS.iter().filter(|m| !applied.contains(&m.0)) {
            tx.batch_execute(sql).await.map_err(|e| self.error(e))?;
            tx.execute("INSERT INTO skillhost_schema (version, name) VALUES ($1, $2)", &[version, name])
                .await
                .map_err(|e| self.error(e))?;
            tracing::info!(version, name, database = %self.settings.describe(), "migrated the state database");
        }
        tx.commit().await.map_err(|e| self.error(e))
    }

    pub(crate) fn error(&self, e: tokio_postgres::Error) -> StateError {
        StateError::Other(format!("state database {}: {}", self.settings.describe(), with_causes(&e)))
    }

    /// Ends a transaction's attempt: commits after `body` gave `Some`, and returns what
    /// it gave; `None` when it should run again (a deadlock or a serialization failure
    /// aborted it, or `body` gave `None`: a conditional insert lost its race).
    pub(crate) async fn finish<T>(
        &self,
        tx: deadpool_postgres::Transaction<'_>,
        body: Result<Option<T>, Retry>,
    ) -> Result<Option<T>, StateError> {
        match body {
            Ok(Some(value)) => match tx.commit().await {
                Ok(()) => Ok(Some(value)),
                Err(e) if is_retryable(&e) => Ok(None),
                Err(e) => Err(self.error(e)),
            },
            Ok(None) => Ok(None),
            Err(Retry::Db(e)) if is_retryable(&e) => Ok(None),
            Err(Retry::Db(e)) => Err(self.error(e)),
            Err(Retry::State(e)) => Err(e),
        }
    }

    pub(crate) fn lost_races(&self) -> StateError {
        StateError::Other(format!(
            "state database {}: a transaction lost {RETRIES} races with other writers in a row",
            self.settings.describe()
        ))
    }
}

/// Runs `$body` (an async block's contents giving `Result<Option<$ty>, Retry>`, with the
/// transaction as `$tx`) in a transaction of a pooled connection, again when
/// [`Postgres::finish`] says so, up to [`RETRIES`] times.
macro_rules! in_transaction {
    ($pg:expr, $tx:ident, $ty:ty, $body:block) => {{
        let mut client = $pg.client().await?;
        let mut done = None;
        for _ in 0..$crate::store::state::postgres::RETRIES {
            let $tx = client.transaction().await.map_err(|e| $pg.error(e))?;
            let body: Result<Option<$ty>, $crate::store::state::postgres::Retry> = async { $body }.await;
            if let Some(value) = $pg.finish($tx, body).await? {
                done = Some(value);
                break;
            }
        }
        done.ok_or_else(|| $pg.lost_races())
    }};
}
pub(crate) use in_transaction;

/// Why a transaction's body stopped.
pub(crate) enum Retry {
    Db(tokio_postgres::Error),
    State(StateError),
}

impl From<tokio_postgres::Error> for Retry {
    fn from(e: tokio_postgres::Error) -> Self {
        Retry::Db(e)
    }
}

impl From<StateError> for Retry {
    fn from(e: StateError) -> Self {
        Retry::State(e)
    }
}

fn is_retryable(e: &tokio_postgres::Error) -> bool {
    matches!(e.code(), Some(c) if *c == SqlState::T_R_DEADLOCK_DETECTED || *c == SqlState::T_R_SERIALIZATION_FAILURE)
}

fn text(bytes: Vec<u8>) -> Result<String, StateError> {
    String::from_utf8(bytes).map_err(|_| StateError::Other("state database: a stored value is not UTF-8".into()))
}

/// The database's clock, in seconds since the epoch: every replica reads the same one.
macro_rules! now {
    () => {
        "extract(epoch FROM clock_timestamp())::float8"
    };
}

/// A row that has not expired.
macro_rules! live {
    () => {
        concat!("(expires_at IS NULL OR expires_at > ", now!(), ")")
    };
}

/// A read that locks the row (`update`): the row whatever its expiry, as the SQLite backend's.
const READ: &str = "SELECT value FROM skillhost_state WHERE ns = $1 AND key = $2";
const READ_LIVE: &str = concat!("SELECT value FROM skillhost_state WHERE ns = $1 AND key = $2 AND ", live!());
/// A live row's value and how far its expiry is behind `$3` seconds from now.
const READ_TOUCHED: &str = concat!(
    "SELECT value, ",
    now!(),
    " + $3 - expires_at FROM skillhost_state WHERE ns = $1 AND key = $2 AND ",
    live!()
);
/// Moves a live row's expiry to `$3` seconds from now.
const TOUCH: &str =
    concat!("UPDATE skillhost_state SET expires_at = ", now!(), " + $3 WHERE ns = $1 AND key = $2 AND ", live!());
const KEYS: &str = concat!("SELECT key FROM skillhost_state WHERE ns = $1 AND ", live!(), " ORDER BY key");
const SWEEP: &str = concat!(
    "DELETE FROM skillhost_state WHERE (ns, key) IN
    (SELECT ns, key FROM skillhost_state WHERE expires_at <= ",
    now!(),
    " LIMIT $1)"
);
const PURGE: &str = concat!("DELETE FROM skillhost_state WHERE ns = $1 AND expires_at <= ", now!());
const WRITE: &str = "INSERT INTO skillhost_state (ns, key, value, bytes) VALUES ($1, $2, $3, $4)
    ON CONFLICT (ns, key) DO UPDATE SET value = EXCLUDED.value, bytes = EXCLUDED.bytes, expires_at = NULL";
/// [`WRITE`] with an expiry `$5` seconds from now (`NULL`: never).
const WRITE_EXPIRING: &str = concat!(
    "INSERT INTO skillhost_state (ns, key, value, bytes, expires_at) VALUES ($1, $2, $3, $4, ",
    now!(),
    " + $5)
    ON CONFLICT (ns, key) DO UPDATE SET value = EXCLUDED.value, bytes = EXCLUDED.bytes, expires_at = EXCLUDED.expires_at"
);
const CREATE: &str = "INSERT INTO skillhost_state (ns, key, value, bytes) VALUES ($1, $2, $3, $4)
    ON CONFLICT (ns, key) DO NOTHING";
const DELETE_IF: &str = "DELETE FROM skillhost_state WHERE ns = $1 AND key = $2 AND value = $3";
const REMOVE: &str = "DELETE FROM skillhost_state WHERE ns = $1 AND key = $2";
const USAGE: &str = "SELECT keys, bytes FROM skillhost_state_usage WHERE ns = $1";

async fn write<C: GenericClient + Sync>(c: &C, ns: &str, key: &str, value: &str) -> Result<(), tokio_postgres::Error> {
    let stmt = c.prepare_cached(WRITE).await?;
    c.execute(&stmt, &[&ns, &key.as_bytes(), &value.as_bytes(), &entry_bytes(key, value)]).await.map(drop)
}

async fn delete_if<C: GenericClient + Sync>(
    c: &C,
    ns: &str,
    key: &str,
    value: &str,
) -> Result<bool, tokio_postgres::Error> {
    let stmt = c.prepare_cached(DELETE_IF).await?;
    Ok(c.execute(&stmt, &[&ns, &key.as_bytes(), &value.as_bytes()]).await? == 1)
}

/// Whether setting `key` to `value` keeps `ns` within `quota`; the caller holds the lock on
/// the namespace's usage row.
async fn check_set<C: GenericClient + Sync>(
    c: &C,
    ns: &str,
    key: &str,
    value: &str,
    quota: &StateQuota,
) -> Result<Result<(), StateError>, tokio_postgres::Error> {
    let row = c.query_one("SELECT keys, bytes FROM skillhost_state_usage WHERE ns = $1 FOR UPDATE", &[&ns]).await?;
    let now = (row.get::<_, i64>(0).max(0) as u64, row.get::<_, i64>(1).max(0) as u64);
    let old = c
        .query_opt("SELECT bytes FROM skillhost_state WHERE ns = $1 AND key = $2", &[&ns, &key.as_bytes()])
        .await?
        .map(|r| r.get::<_, i64>(0));
    let keys = now.0 + u64::from(old.is_none());
    let bytes = (now.1 + entry_bytes(key, value) as u64).saturating_sub(old.unwrap_or(0) as u64);
    Ok(check_growth(now, keys, bytes, quota))
}

async fn usage_in<C: GenericClient + Sync>(c: &C, ns: &str) -> Result<(u64, u64), tokio_postgres::Error> {
    let stmt = c.prepare_cached(USAGE).await?;
    let row = c.query_opt(&stmt, &[&ns]).await?;
    let (keys, bytes): (i64, i64) = row.map_or((0, 0), |r| (r.get(0), r.get(1)));
    Ok((keys.max(0) as u64, bytes.max(0) as u64))
}

#[async_trait::async_trait]
impl Backend for Postgres {
    async fn get(&self, ns: &str, key: &str) -> Result<Option<String>, StateError> {
        let c = self.client().await?;
        let stmt = c.prepare_cached(READ_LIVE).await.map_err(|e| self.error(e))?;
        let row = c.query_opt(&stmt, &[&ns, &key.as_bytes()]).await.map_err(|e| self.error(e))?;
        row.map(|r| text(r.get(0))).transpose()
    }

    async fn touch(
        &self,
        ns: &str,
        key: &str,
        ttl: std::time::Duration,
        slack: std::time::Duration,
    ) -> Result<Option<String>, StateError> {
        let c = self.client().await?;
        let args: [&(dyn tokio_postgres::types::ToSql + Sync); 3] = [&ns, &key.as_bytes(), &ttl.as_secs_f64()];
        let stmt = c.prepare_cached(READ_TOUCHED).await.map_err(|e| self.error(e))?;
        let Some(row) = c.query_opt(&stmt, &args).await.map_err(|e| self.error(e))? else { return Ok(None) };
        // NULL: the row never expires.
        let behind: Option<f64> = row.get(1);
        if behind.is_some_and(|behind| behind > slack.as_secs_f64()) {
            let stmt = c.prepare_cached(TOUCH).await.map_err(|e| self.error(e))?;
            c.execute(&stmt, &args).await.map_err(|e| self.error(e))?;
        }
        text(row.get(0)).map(Some)
    }

    async fn set(&self, ns: &str, key: &str, value: &str) -> Result<(), StateError> {
        let c = self.client().await?;
        write(&c, ns, key, value).await.map_err(|e| self.error(e))
    }

    async fn set_within(
        &self,
        ns: &str,
        key: &str,
        value: &str,
        quota: &StateQuota,
        expiry: Expiry,
    ) -> Result<(), StateError> {
        let ttl = match expiry {
            Expiry::Never => None,
            Expiry::Idle(ttl) => Some(ttl.as_secs_f64()),
        };
        in_transaction!(self, tx, (), {
            // The namespace's usage row, locked: writers of one namespace check the quota
            // one at a time, whichever replica they run on.
            let lock = "INSERT INTO skillhost_state_usage (ns, keys, bytes) VALUES ($1, 0, 0)
                ON CONFLICT (ns) DO NOTHING";
            tx.execute(lock, &[&ns]).await?;
            if let Err(refused) = check_set(&tx, ns, key, value, quota).await? {
                // What expired is gone: deleted now, the write may fit.
                if tx.execute(PURGE, &[&ns]).await? == 0 {
                    return Err(refused.into());
                }
                check_set(&tx, ns, key, value, quota).await??;
            }
            let args: [&(dyn tokio_postgres::types::ToSql + Sync); 5] =
                [&ns, &key.as_bytes(), &value.as_bytes(), &entry_bytes(key, value), &ttl];
            tx.execute(WRITE_EXPIRING, &args).await?;
            Ok(Some(()))
        })
    }

    async fn update(&self, ns: &str, key: &str, change: &mut Change<'_>) -> Result<Option<String>, StateError> {
        let locked = format!("{READ} FOR UPDATE");
        in_transaction!(self, tx, Option<String>, {
            let old = tx.query_opt(&locked, &[&ns, &key.as_bytes()]).await?.map(|r| text(r.get(0))).transpose()?;
            let existed = old.is_some();
            let new = change(old)?;
            match (&new, existed) {
                (Some(value), true) => write(&tx, ns, key, value).await?,
                (None, true) => {
                    tx.execute(REMOVE, &[&ns, &key.as_bytes()]).await?;
                }
                // Absent when read, so not locked: created only if still absent; if
                // another writer created it meanwhile, read it again.
                (Some(value), false) => {
                    let args: [&(dyn tokio_postgres::types::ToSql + Sync); 4] =
                        [&ns, &key.as_bytes(), &value.as_bytes(), &entry_bytes(key, value)];
                    if tx.execute(CREATE, &args).await? == 0 {
                        return Ok(None);
                    }
                }
                (None, false) => {}
            }
            Ok(Some(new))
        })
    }

    async fn create(&self, ns: &str, key: &str, value: &str) -> Result<bool, StateError> {
        let c = self.client().await?;
        let stmt = c.prepare_cached(CREATE).await.map_err(|e| self.error(e))?;
        let args: [&(dyn tokio_postgres::types::ToSql + Sync); 4] =
            [&ns, &key.as_bytes(), &value.as_bytes(), &entry_bytes(key, value)];
        Ok(c.execute(&stmt, &args).await.map_err(|e| self.error(e))? == 1)
    }

    async fn replace_if(&self, ns: &str, key: &str, expected: &str, value: &str) -> Result<bool, StateError> {
        let c = self.client().await?;
        let sql = "UPDATE skillhost_state SET value = $4, bytes = $5 WHERE ns = $1 AND key = $2 AND value = $3";
        let stmt = c.prepare_cached(sql).await.map_err(|e| self.error(e))?;
        let args: [&(dyn tokio_postgres::types::ToSql + Sync); 5] =
            [&ns, &key.as_bytes(), &expected.as_bytes(), &value.as_bytes(), &entry_bytes(key, value)];
        Ok(c.execute(&stmt, &args).await.map_err(|e| self.error(e))? == 1)
    }

    async fn delete_if(&self, ns: &str, key: &str, value: &str) -> Result<bool, StateError> {
        let c = self.client().await?;
        delete_if(&c, ns, key, value).await.map_err(|e| self.error(e))
    }

    async fn apply(&self, writes: &[StateWrite]) -> Result<(), StateError> {
        in_transaction!(self, tx, (), {
            for w in writes {
                match w {
                    StateWrite::Set { ns, key, value } => write(&tx, ns, key, value).await?,
                    StateWrite::DeleteIf { ns, key, value } => {
                        delete_if(&tx, ns, key, value).await?;
                    }
                }
            }
            Ok(Some(()))
        })
    }

    async fn delete(&self, ns: &str, key: &str) -> Result<(), StateError> {
        let c = self.client().await?;
        let stmt = c.prepare_cached(REMOVE).await.map_err(|e| self.error(e))?;
        c.execute(&stmt, &[&ns, &key.as_bytes()]).await.map(drop).map_err(|e| self.error(e))
    }

    async fn keys(&self, ns: &str) -> Result<Vec<String>, StateError> {
        let c = self.client().await?;
        let stmt = c.prepare_cached(KEYS).await.map_err(|e| self.error(e))?;
        let rows = c.query(&stmt, &[&ns]).await.map_err(|e| self.error(e))?;
        rows.into_iter().map(|r| text(r.get(0))).collect()
    }

    async fn sweep(&self, limit: u32) -> Result<u64, StateError> {
        let c = self.client().await?;
        c.execute(SWEEP, &[&i64::from(limit)]).await.map_err(|e| self.error(e))
    }

    async fn usage(&self, ns: &str) -> Result<(u64, u64), StateError> {
        let c = self.client().await?;
        usage_in(&c, ns).await.map_err(|e| self.error(e))
    }

    async fn ping(&self) -> Result<(), StateError> {
        let c = self.client().await?;
        c.simple_query("SELECT 1").await.map(drop).map_err(|e| self.error(e))
    }

    fn describe(&self) -> String {
        self.settings.describe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(url: Option<&str>, env: &[(&str, &str)]) -> Result<Settings, StateError> {
        let config = PostgresState { url: url.map(str::to_owned), ..Default::default() };
        let env: HashMap<String, String> = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Settings::from_config(Some(&config), |name| env.get(name).cloned())
    }

    #[test]
    fn the_url_wins_and_the_environment_fills_in_what_it_leaves_out() {
        let env = [("PGHOST", "db.internal"), ("PGPORT", "6543"), ("PGUSER", "envuser"), ("PGPASSWORD", "envpw")];
        let s = settings(Some("postgres://app:pw@10.0.0.5:5433/prod?sslmode=verify-full"), &env).unwrap();
        assert_eq!(s.describe(), "postgres://app@10.0.0.5:5433/prod");
        assert_eq!(s.config.get_password(), Some(&b"pw"[..]));
        assert_eq!(s.ssl, SslMode::VerifyFull);
        let s = settings(Some("postgres:///prod"), &env).unwrap();
        assert_eq!(s.describe(), "postgres://envuser@db.internal:6543/prod");
        assert_eq!(s.config.get_password(), Some(&b"envpw"[..]));
        assert_eq!(s.ssl, SslMode::Prefer, "libpq's default");
        let s = settings(None, &[("PGHOST", "h"), ("PGDATABASE", "d"), ("PGSSLMODE", "require")]).unwrap();
        assert_eq!((s.describe().as_str(), s.ssl), ("postgres://postgres@h:5432/d", SslMode::Require));
        let s = settings(Some("postgres://u@h/d?sslrootcert=/etc/ca.pem&application_name=x"), &[]).unwrap();
        assert_eq!(s.root_cert.as_deref(), Some(std::path::Path::new("/etc/ca.pem")));
        assert_eq!(s.config.get_application_name(), Some("skillhost"));
        assert!(!format!("{s:?}").contains("pw"));
    }

    #[test]
    fn bad_urls_say_what_is_wrong() {
        let error = |url: &str| settings(Some(url), &[]).unwrap_err().to_string();
        assert!(error("mysql://h/d").contains("not postgres://"));
        assert!(error("not a url").contains("not a URL"));
        assert!(error("postgres://h/d?sslmode=sometimes").contains("sslmode `sometimes`"));
        assert!(error("postgres://h/d?bogus=1").contains("bogus"));
        assert!(settings(None, &[("PGPORT", "x")]).unwrap_err().to_string().contains("PGPORT"));
    }
}
