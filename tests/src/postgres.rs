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

/// A TCP proxy in front of one server for one replica, which cuts it off at a chosen moment:
/// it forwards every connection until a client sends bytes containing `trigger` (a statement
/// it is about to run), then, without forwarding them, closes every connection it carries and
/// refuses every new one, as a network partition would. The statement never reaches the
/// server.
pub struct CutProxy {
    port: u16,
    cut: tokio::sync::watch::Sender<bool>,
}

impl CutProxy {
    /// A proxy to `127.0.0.1:target` on a free loopback port, cutting at `trigger`.
    pub async fn start(target: u16, trigger: &'static [u8]) -> CutProxy {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let (cut, _) = tokio::sync::watch::channel(false);
        let watch = cut.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                if *watch.borrow() {
                    continue; // dropped: refused
                }
                let Ok(server) = tokio::net::TcpStream::connect(("127.0.0.1", target)).await else { continue };
                tokio::spawn(carry(client, server, trigger, watch.clone()));
            }
        });
        CutProxy { port, cut }
    }

    /// Its port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Whether it has cut its client off.
    pub fn is_cut(&self) -> bool {
        *self.cut.borrow()
    }
}

/// Carries one connection both ways until either side closes or the proxy cuts.
async fn carry(
    client: tokio::net::TcpStream,
    server: tokio::net::TcpStream,
    trigger: &'static [u8],
    cut: tokio::sync::watch::Sender<bool>,
) {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let (mut client_in, mut client_out) = client.into_split();
    let (mut server_in, mut server_out) = server.into_split();
    let mut stopped = cut.subscribe();
    let upstream = async {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = client_in.read(&mut buf).await.unwrap_or(0);
            if n == 0 {
                return;
            }
            if buf[..n].windows(trigger.len()).any(|w| w == trigger) {
                cut.send_replace(true);
                return;
            }
            if server_out.write_all(&buf[..n]).await.is_err() {
                return;
            }
        }
    };
    let downstream = async {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = server_in.read(&mut buf).await.unwrap_or(0);
            if n == 0 || client_out.write_all(&buf[..n]).await.is_err() {
                return;
            }
        }
    };
    tokio::select! {
        () = upstream => {}
        () = downstream => {}
        _ = stopped.wait_for(|cut| *cut) => {}
    }
}
