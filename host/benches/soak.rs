//! `cargo bench -p skillhost --bench soak` (`.ci/run` runs it, on the dev profile)
//!
//! Issue 28: whether the host's memory stays bounded over a long mixed load, through the real
//! binary. Two phases, each its own server, each printing the server's resident memory at
//! start (after one round of warm-up), peak and end:
//!
//! 1. `skillhost mcp`, 1,000 calls (`SOAK_CALLS`) eight at a time, mixed: good calls (the
//!    probe's `echo`), loops (ended by fuel), memory bombs (ended at the cap), log and
//!    stdout floods, results far past the result cap (refused before they are copied) and
//!    within what the host copies (copied, refused, handed back).
//! 2. `skillhost run --adapter api`, 1,000 approval-v1 runs (`SOAK_RUNS`) fifty at a time,
//!    each asking an approval its client grants.
//!
//! The bound: the end within 10% of the start plus the sandbox's resident budget
//! (`sandbox.resident_mb`, set to 256 here), and every call answered with the kind its tool
//! provokes. Exits non-zero if either phase misses it.

#[path = "common/approval.rs"]
mod approval;
mod common;
#[path = "../tests/support/mod.rs"]
mod support;

use common::{header, value_row};
use serde_json::{Value, json};
use skillhost_tests::llm_server::LlmServer;
use skillhost_tests::{Workspace, guests};
use std::time::{Duration, Instant};
use support::api::ApiProcess;
use support::raw::Raw;

/// `sandbox.resident_mb` in both phases.
const RESIDENT_MB: u64 = 256;

/// Resident memory of `pid` at start, peak and end, in KiB.
#[derive(Default)]
struct Rss {
    start: u64,
    peak: u64,
    end: u64,
}

impl Rss {
    fn sample(&mut self, pid: u32) -> u64 {
        let now = approval::status_kib(&pid.to_string(), "VmRSS:").unwrap_or(0);
        self.peak = self.peak.max(now);
        now
    }

    /// Whether the end is within 10% of the start plus the resident budget.
    fn bounded(&self) -> bool {
        self.end <= self.start + self.start / 10 + (RESIDENT_MB << 10)
    }

    fn rows(&self, phase: &str) {
        let mib = |kib: u64| format!("{:.0} MiB", kib as f64 / 1024.0);
        let figures = format!("{} / {} / {}", mib(self.start), mib(self.peak), mib(self.end));
        let verdict = if self.bounded() { "met" } else { "MISSED" };
        let goal = format!("end <= start + 10% + {RESIDENT_MB} MiB: {verdict}");
        value_row("28", &format!("{phase}: server RSS start / peak / end"), &figures, None, &goal);
    }
}

/// The tool error's `kind`, `"ok"` for a success.
fn kind(answer: &Value) -> String {
    let result = &answer["result"];
    if result["isError"] == false {
        return "ok".into();
    }
    let text = result["content"][0]["text"].as_str().unwrap_or_default();
    let error: Value = serde_json::from_str(text).unwrap_or(Value::Null);
    error["kind"].as_str().unwrap_or("unparsed").to_owned()
}

/// The mixed calls, in the order they repeat, with the kind each must answer with.
fn mix() -> Vec<(&'static str, Value, &'static str)> {
    vec![
        ("probe__echo", json!({"n": 1}), "ok"),
        ("hostile__spin", json!({}), "fuel_exhausted"),
        ("hostile__hog", json!({}), "memory_cap"),
        ("hostile__log_flood", json!({"count": 10_000}), "ok"),
        ("hostile__stdout_flood", json!({"mb": 8}), "ok"),
        ("hostile__huge_result", json!({"mb": 200}), "memory_cap"),
        ("hostile__huge_result", json!({"mb": 40}), "result_too_large"),
        ("probe__echo", json!({"n": 2}), "ok"),
    ]
}

/// Phase 1: `skillhost mcp` under `calls` mixed calls. Returns the figures and the calls
/// that answered otherwise than expected.
fn mcp_phase(calls: usize) -> (Rss, Vec<String>, Duration) {
    let ws = Workspace::new();
    ws.add_skill("skills", "probe", guests::PROBE, "");
    // Fuel ends the loop in about a tenth of a second; 64 MiB stops the bombs and the
    // 200 MiB result; 40 MiB is within what the host copies, so it is copied and refused.
    let hostile = "[limits]\nfuel = 200_000_000\nmemory_mb = 64\ntimeout_ms = 30_000\n";
    ws.add_skill("skills", "hostile", guests::HOSTILE, hostile);
    let yaml = format!(
        "skills:\n  paths: [skills]\n  builtins: []\nsandbox:\n  cache_dir: cache\n  resident_mb: {RESIDENT_MB}\n\
         state:\n  filesystem: {{path: state}}\n"
    );
    std::fs::write(ws.path().join("config.yaml"), yaml).unwrap();
    let built = support::skillhost(&ws, &["skill", "validate"], "");
    assert_eq!(built.code, 0, "{}", built.stderr);
    let mut raw = Raw::start(&ws);
    raw.initialize("2025-11-25");
    let mix = mix();
    let batch: Vec<(&str, Value)> = mix.iter().map(|(name, args, _)| (*name, args.clone())).collect();
    let mut rss = Rss::default();
    let mut wrong = Vec::new();
    let check = |answers: Vec<Value>, wrong: &mut Vec<String>| {
        for (answer, (name, _, expected)) in answers.iter().zip(&mix) {
            let got = kind(answer);
            if got != *expected {
                wrong.push(format!("{name}: {got} (expected {expected})"));
            }
        }
    };
    check(raw.mixed_at_once(&batch), &mut wrong);
    std::thread::sleep(Duration::from_secs(1));
    rss.start = rss.sample(raw.pid());
    let started = Instant::now();
    for _ in 0..calls.div_ceil(batch.len()) {
        check(raw.mixed_at_once(&batch), &mut wrong);
        rss.sample(raw.pid());
    }
    let took = started.elapsed();
    std::thread::sleep(Duration::from_secs(1));
    rss.end = rss.sample(raw.pid());
    (rss, wrong, took)
}

/// Phase 2: `skillhost run --adapter api` under `runs` approval-v1 runs, fifty at a time.
async fn api_phase(runs: usize) -> (Rss, Vec<String>, Duration) {
    let ws = Workspace::new();
    ws.add_skill("skills", "probe", guests::PROBE, "");
    let llm = LlmServer::responding(Box::new(approval::respond)).await;
    let yaml = format!(
        "skills:\n  paths: [skills]\n  builtins: []\nstate:\n  filesystem: {{path: state}}\n\
         sandbox:\n  resident_mb: {RESIDENT_MB}\nlearning:\n  approval_auto_promote: 0\n\
         llm:\n  provider: anthropic\n  model: m\n  max_tokens: 500\n  anthropic: {{api_key: k, base_url: '{}'}}\n\
         human:\n  overrides: {{probe__echo: approve}}\n",
        llm.url()
    );
    std::fs::write(ws.path().join("config.yaml"), yaml).unwrap();
    let api = std::sync::Arc::new(ApiProcess::start(&ws).await);
    let mut wrong = Vec::new();
    let mut rss = Rss::default();
    let batch = |from: usize, count: usize| {
        let api = api.clone();
        async move {
            let tasks: Vec<_> = (from..from + count)
                .map(|i| {
                    let api = api.clone();
                    tokio::spawn(async move { approval::run(&api, i).await })
                })
                .collect();
            let mut failures = Vec::new();
            for task in tasks {
                match task.await {
                    Ok(Ok(_)) => {}
                    Ok(Err(e)) => failures.push(e),
                    Err(e) => failures.push(format!("task: {e}")),
                }
            }
            failures
        }
    };
    wrong.extend(batch(usize::MAX - 50, 50).await);
    tokio::time::sleep(Duration::from_secs(1)).await;
    rss.start = rss.sample(api.pid());
    let started = Instant::now();
    let mut done = 0;
    while done < runs {
        let count = 50.min(runs - done);
        wrong.extend(batch(done, count).await);
        rss.sample(api.pid());
        done += count;
    }
    let took = started.elapsed();
    tokio::time::sleep(Duration::from_secs(1)).await;
    rss.end = rss.sample(api.pid());
    (rss, wrong, took)
}

#[tokio::main]
async fn main() {
    let count = |var: &str| std::env::var(var).ok().and_then(|v| v.parse().ok()).unwrap_or(1000usize);
    let (calls, runs) = (count("SOAK_CALLS"), count("SOAK_RUNS"));
    let (mcp, mcp_wrong, mcp_took) = tokio::task::spawn_blocking(move || mcp_phase(calls)).await.unwrap();
    let (api, api_wrong, api_took) = api_phase(runs).await;

    header("soak");
    mcp.rows(&format!("`skillhost mcp`, {calls} mixed calls, 8 at a time ({:.0} s)", mcp_took.as_secs_f64()));
    api.rows(&format!("`run --adapter api`, {runs} approval-v1 runs, 50 at a time ({:.0} s)", api_took.as_secs_f64()));
    for (phase, wrong) in [("mcp", &mcp_wrong), ("api", &api_wrong)] {
        println!("{phase}: {} calls or runs answered otherwise than expected", wrong.len());
        for w in wrong.iter().take(5) {
            println!("  {w}");
        }
    }
    if !(mcp.bounded() && api.bounded() && mcp_wrong.is_empty() && api_wrong.is_empty()) {
        eprintln!("soak: the bound was missed or a call answered wrongly (figures above)");
        std::process::exit(1);
    }
}
