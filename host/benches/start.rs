//! `cargo bench -p skillhost --bench start`
//!
//! Issue 11, target 5: how long `skillhost run --adapter api` takes, from spawn until it
//! says it is listening and until `/readyz` answers 200 (every skill loaded), with ten skills
//! (one of them Python): from an empty compile cache (it listens at once and compiles in the
//! background, in parallel), from the cache in the page cache, and from the cache evicted
//! from the page cache (`posix_fadvise(DONTNEED)` on every cache and skill file before each
//! start: dropping the whole page cache needs privileges a shared machine should not use).
//!
//! `BENCH_START_LOG=skillhost=debug` passes that `RUST_LOG` to the server and prints what each
//! evicted start logged (how long the sandbox, the cache checks and each skill folder took).

mod common;

use common::{Latency, header, latency_row, value_row};
use skillhost_tests::{Workspace, guests};
use std::io::{BufRead, BufReader};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Starts measured per figure (one under `BENCH_SMOKE`).
fn starts() -> usize {
    common::iterations(7, 1)
}
/// A start that takes longer than this has failed.
const START_LIMIT: Duration = Duration::from_secs(600);

/// Ten skills: eight distinct Rust components, the Python example, and one copy (which
/// compiles once but loads as a skill of its own).
const SKILLS: &[(&str, &str)] = &[
    ("probe", guests::PROBE),
    ("probe_copy", guests::PROBE),
    ("hooks_none", guests::HOOKS_NONE),
    ("hooks_all", guests::HOOKS_ALL),
    ("hostile", guests::HOSTILE),
    ("unavailable", guests::UNAVAILABLE),
    ("services", guests::SERVICES),
    ("http_checker", guests::HTTP_CHECKER),
    ("memory", guests::MEMORY),
    ("word_stats", guests::WORD_STATS),
];

fn main() {
    let ws = Workspace::new();
    for (name, wasm) in SKILLS {
        ws.add_skill("skills", name, wasm, "");
    }
    let config = "llm:\n  provider: anthropic\n  model: bench\n  anthropic: {api_key: bench, base_url: 'http://127.0.0.1:9'}\n\
                  skills:\n  paths: [skills]\n  builtins: []\nstate:\n  filesystem: {path: state}\n";
    std::fs::write(ws.path().join("config.yaml"), config).unwrap();
    let cache = ws.path().join(".skillhost/cache");

    header("skillhost start");
    let cold = start(ws.path());
    let compiled = cold.lines.iter().filter(|l| l.starts_with("compiled skill")).count();
    let label = format!("`skillhost run`, {} skills, empty cache: listening", SKILLS.len());
    value_row("5", &label, &common::human(cold.listening), None, "");
    let label =
        format!("`skillhost run`, {} skills, empty cache: ready ({compiled} compiled in parallel)", SKILLS.len());
    value_row("5", &label, &common::human(cold.ready), None, "");
    let warm = Latency::of((0..starts()).map(|_| start(ws.path()).ready).collect());
    let label = format!("`skillhost run`, {} skills, cache in the page cache: ready", SKILLS.len());
    latency_row("5", &label, &warm, None, "<= 100 ms");
    let evicted = Latency::of(
        (0..starts())
            .map(|_| {
                evict(&cache);
                evict(&ws.path().join("skills"));
                let started = start(ws.path());
                if std::env::var_os("BENCH_START_LOG").is_some() {
                    eprintln!("=== {:?}\n{}", started.ready, started.lines.join(""));
                }
                started.ready
            })
            .collect(),
    );
    let label = format!("`skillhost run`, {} skills, cache evicted from the page cache: ready", SKILLS.len());
    latency_row("5", &label, &evicted, Some(evicted.ratio(&warm)), "<= 100 ms");
}

/// One start of the server.
struct Started {
    /// Until it said it listens.
    listening: Duration,
    /// Until `/readyz` answered 200.
    ready: Duration,
    /// What it said on stderr.
    lines: Vec<String>,
}

/// Starts the server in `dir`, measures how long it took to listen and to be ready, and
/// stops it.
fn start(dir: &Path) -> Started {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let started = Instant::now();
    let mut command = Command::new(env!("CARGO_BIN_EXE_skillhost"));
    match std::env::var("BENCH_START_LOG") {
        Ok(filter) => command.env("RUST_LOG", filter),
        Err(_) => command.env_remove("RUST_LOG"),
    };
    let mut child = command
        .current_dir(dir)
        .args(["--config", "config.yaml", "run", "--adapter", "api"])
        .env("SKILLHOST_UI_PORT", port.to_string())
        .env("SKILLHOST_UI_TOKEN", "bench-token")
        // Its own cache in the workspace (the one emptied and evicted here), not the shared
        // one `.cargo/config.toml` names for tests and benches.
        .env_remove("SKILLHOST_CACHE_DIR")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = Vec::new();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let listening = loop {
        let mut line = String::new();
        if stderr.read_line(&mut line).unwrap() == 0 || started.elapsed() > START_LIMIT {
            let _ = child.kill();
            panic!("skillhost never listened:\n{}", lines.join(""));
        }
        if line.contains("listening on") {
            break started.elapsed();
        }
        lines.push(line);
    };
    // The rest of stderr (compile progress) is read, so that it never blocks the server.
    let rest = std::thread::spawn(move || stderr.lines().map_while(Result::ok).collect::<Vec<String>>());
    while !ready(port) {
        if started.elapsed() > START_LIMIT {
            let _ = child.kill();
            panic!("skillhost never became ready:\n{}", lines.join(""));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let ready = started.elapsed();
    let _ = child.kill();
    let _ = child.wait();
    lines.extend(rest.join().unwrap_or_default().into_iter().map(|line| line + "\n"));
    Started { listening, ready, lines }
}

/// Whether `/readyz` on `port` answers 200.
fn ready(port: u16) -> bool {
    use std::io::{Read, Write};
    let answered = std::net::TcpStream::connect(("127.0.0.1", port)).and_then(|mut stream| {
        stream.write_all(b"GET /readyz HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n")?;
        let mut head = [0u8; 12];
        stream.read_exact(&mut head)?;
        Ok(head.ends_with(b"200"))
    });
    answered.unwrap_or(false)
}

/// Asks the kernel to drop every file under `dir` from the page cache.
fn evict(dir: &Path) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            evict(&path);
        } else if let Ok(file) = std::fs::File::open(&path) {
            // SAFETY: a plain syscall on a file descriptor this function owns.
            unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        }
    }
}
