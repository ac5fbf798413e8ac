//! A throwaway PostgreSQL cluster for a test: Debian's `initdb` and `pg_ctl` (PostgreSQL 15),
//! run as user `postgres` with `runuser`, in a temporary directory, on a free loopback port,
//! stopped when dropped. Nothing depends on a system service.

use std::path::PathBuf;
use std::process::Command;

/// Where Debian's PostgreSQL 15 programs are.
pub const BIN: &str = "/usr/lib/postgresql/15/bin";

/// A running cluster.
pub struct Postgres {
    dir: tempfile::TempDir,
    port: u16,
    options: String,
}

fn as_postgres(program: &str, args: &[&str]) -> std::process::Output {
    let out = Command::new("runuser")
        .args(["-u", "postgres", "--"])
        .arg(format!("{BIN}/{program}"))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("runuser {program}: {e} (is PostgreSQL 15 installed? .ci/run installs it)"));
    assert!(
        out.status.success(),
        "{program} {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

impl Postgres {
    /// Initialises and starts a cluster (trust authentication on loopback only).
    pub fn start() -> Self {
        Self::start_in(tempfile::tempdir().unwrap(), "")
    }

    /// [`Postgres::start`] with more server options (`-c name=value ...`); `{dir}` in them is
    /// the cluster's own temporary directory (for files such as TLS keys, written there by
    /// `prepare` before the server starts).
    pub fn start_with_files(extra: &str, prepare: impl FnOnce(&std::path::Path)) -> Self {
        let dir = tempfile::tempdir().unwrap();
        prepare(dir.path());
        let extra = extra.replace("{dir}", &dir.path().display().to_string());
        Self::start_in(dir, &extra)
    }

    fn start_in(dir: tempfile::TempDir, extra: &str) -> Self {
        let status = Command::new("chown").args(["-R", "postgres:postgres"]).arg(dir.path()).status().unwrap();
        assert!(status.success(), "chown to postgres");
        let data = dir.path().join("data");
        as_postgres("initdb", &["-D", data.to_str().unwrap(), "-A", "trust", "-U", "postgres", "--no-sync"]);
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let options = format!(
            "-p {port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={} -c fsync=off {extra}",
            dir.path().display()
        );
        let cluster = Postgres { dir, port, options };
        cluster.resume();
        cluster
    }

    /// Stops the server (`pg_ctl stop -m fast`: sessions are cut off), as an operator's
    /// restart or a failover would; [`Postgres::resume`] starts it again on the same port.
    pub fn stop(&self) {
        as_postgres("pg_ctl", &["-D", self.data().to_str().unwrap(), "-m", "fast", "-w", "-t", "60", "stop"]);
    }

    /// Starts the (stopped) server again, on its port, with its data.
    pub fn resume(&self) {
        let log = self.dir.path().join("log");
        let data = self.data();
        as_postgres(
            "pg_ctl",
            &[
                "-D",
                data.to_str().unwrap(),
                "-o",
                &self.options,
                "-l",
                log.to_str().unwrap(),
                "-w",
                "-t",
                "60",
                "start",
            ],
        );
    }

    /// Replaces its `pg_hba.conf` with `rules` and reloads it.
    pub fn hba(&self, rules: &str) {
        std::fs::write(self.data().join("pg_hba.conf"), rules).unwrap();
        as_postgres("pg_ctl", &["-D", self.data().to_str().unwrap(), "reload"]);
    }

    /// Its port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// A URL for database `db` as user `user`.
    pub fn url(&self, user: &str, db: &str) -> String {
        format!("postgres://{user}@127.0.0.1:{}/{db}", self.port)
    }

    /// Runs `sql` with `psql` as the superuser on database `db`, stopping at the first error;
    /// its output.
    pub fn psql(&self, db: &str, sql: &str) -> String {
        let port = self.port.to_string();
        let out = as_postgres(
            "psql",
            &["-h", "127.0.0.1", "-p", &port, "-U", "postgres", "-d", db, "-v", "ON_ERROR_STOP=1", "-qAt", "-c", sql],
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let data = self.data();
        let _ = Command::new("runuser")
            .args(["-u", "postgres", "--"])
            .arg(format!("{BIN}/pg_ctl"))
            .args(["-D", data.to_str().unwrap(), "-m", "immediate", "-w", "stop"])
            .output();
    }
}
