//! docs/deployment.md's local recipe, run as written: `deploy/local/replicas.sh --check`
//! starts a throwaway PostgreSQL 15 cluster, two `skillhost run --adapter api` replicas of
//! this test's binary (serving the `probe` guest) and nginx in front of them, then
//! `deploy/local/smoke.sh` checks through nginx: readiness, spreading, an SSE stream, a
//! skill's state written through the load balancer and read on every replica and in the
//! database, and a replica killed while nginx keeps serving. Whatever happens, the processes
//! it started are stopped and its directory removed.

mod support;

use std::io::Read;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The recipe's whole run: a cold compile cache per replica, PostgreSQL's start, the checks.
const LIMIT: Duration = Duration::from_secs(300);

/// The recipe's process group and run directory: stopped and removed when dropped, also
/// when the test fails half-way.
struct Recipe {
    child: Child,
    run: tempfile::TempDir,
}

impl Recipe {
    fn signal_group(&self, signal: &str) {
        let group = format!("-{}", self.child.id());
        let _ = Command::new("kill").args([signal, "--", &group]).stderr(Stdio::null()).status();
    }

    fn data(&self) -> PathBuf {
        self.run.path().join("pg/data")
    }
}

impl Drop for Recipe {
    fn drop(&mut self) {
        // The script's own trap stops everything on SIGTERM; what survives it is killed.
        if self.child.try_wait().ok().flatten().is_none() {
            self.signal_group("-TERM");
            let asked = Instant::now();
            while self.child.try_wait().ok().flatten().is_none() && asked.elapsed() < Duration::from_secs(20) {
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        self.signal_group("-KILL");
        let _ = self.child.wait();
        // `pg_ctl` detaches the server from the group: stopped by its data directory.
        if self.data().join("postmaster.pid").exists() {
            let pg_ctl = format!("{}/pg_ctl", skillhost_tests::postgres::BIN);
            let data = self.data().display().to_string();
            let args = ["-D", data.as_str(), "-m", "immediate", "-w", "stop"];
            let _ = as_postgres(&pg_ctl).args(args).output();
        }
    }
}

/// `program` as user `postgres` when the test runs as root (as the recipe runs it).
fn as_postgres(program: &str) -> Command {
    use std::os::unix::fs::MetadataExt as _;
    if std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0) {
        let mut command = Command::new("runuser");
        command.args(["-u", "postgres", "--", program]);
        command
    } else {
        Command::new(program)
    }
}

fn nginx() -> Option<PathBuf> {
    let on_path = std::env::var_os("PATH")
        .map(|paths| std::env::split_paths(&paths).map(|p| p.join("nginx")).collect::<Vec<_>>())
        .unwrap_or_default();
    on_path.into_iter().chain([PathBuf::from("/usr/sbin/nginx")]).find(|p| p.is_file())
}

fn drain(mut pipe: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut text = String::new();
        let _ = pipe.read_to_string(&mut text);
        text
    })
}

#[test]
fn the_local_recipe_serves_replicas_behind_nginx_and_its_smoke_check_passes() {
    assert!(
        nginx().is_some(),
        "nginx is not installed: the recipe's load balancer is Debian's nginx (.ci/run installs it: apt-get install nginx)"
    );
    assert!(
        Path::new(skillhost_tests::postgres::BIN).join("initdb").exists(),
        "PostgreSQL 15 is not installed (.ci/run installs it: apt-get install postgresql)"
    );
    let script = support::repo().join("deploy/local/replicas.sh");
    let run = tempfile::tempdir().unwrap();
    let mut child = Command::new("bash")
        .arg(&script)
        .args(["--replicas", "2", "--check", "--run-dir"])
        .arg(run.path())
        .arg("--skillhost")
        .arg(env!("CARGO_BIN_EXE_skillhost"))
        .arg("--probe")
        .arg(skillhost_tests::guests::PROBE)
        .env_remove("RUST_LOG")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("SKILLHOST_CONFIG")
        .env_remove("SKILLHOST_UI_PORT")
        .env_remove("SKILLHOST_UI_TOKEN")
        .env_remove("SKILLHOST_CACHE_DIR")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap_or_else(|e| panic!("bash {}: {e}", script.display()));
    let (stdout, stderr) = (drain(child.stdout.take().unwrap()), drain(child.stderr.take().unwrap()));
    let mut recipe = Recipe { child, run };

    let started = Instant::now();
    let status = loop {
        if let Some(status) = recipe.child.try_wait().unwrap() {
            break Some(status);
        }
        if started.elapsed() > LIMIT {
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let still_up = recipe.data().join("postmaster.pid").exists();
    let logs = |recipe: &Recipe| {
        (1..=2)
            .map(|i| {
                let log = recipe.run.path().join(format!("replica-{i}/skillhost.log"));
                format!("--- replica {i}:\n{}", std::fs::read_to_string(log).unwrap_or_default())
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    let replica_logs = logs(&recipe);
    drop(recipe); // stops whatever is left before the pipes can close
    let (stdout, stderr) = (stdout.join().unwrap(), stderr.join().unwrap());
    let Some(status) = status else {
        panic!("the recipe still ran after {LIMIT:?}:\n{stderr}\n{replica_logs}");
    };
    assert!(status.success(), "the recipe failed ({status}):\n{stdout}\n{stderr}\n{replica_logs}");
    for check in [
        "ok: /readyz 200 on all 2 replicas",
        "requests spread over the replicas",
        "an SSE stream comes through the load balancer",
        "every replica's own /mcp reads the key back",
        "the key is a row of skillhost_state in PostgreSQL",
        "every one 200, from the survivors",
        "a new session (on",
        "all checks passed",
    ] {
        assert!(stderr.contains(check), "no `{check}` in:\n{stderr}");
    }
    assert!(!stderr.contains("SKIPPED"), "{stderr}");
    assert!(stdout.trim().starts_with("http://127.0.0.1:"), "the recipe prints the load balancer's URL: {stdout}");
    assert!(!still_up, "the recipe left PostgreSQL running:\n{stderr}");
    assert!(stderr.contains("replicas.sh: stopped"), "{stderr}");
}
