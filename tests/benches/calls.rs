//! `cargo bench -p skillhost-tests --bench calls`
//!
//! Per-call cost of a trivial tool through the sandbox (fresh instance + `handle`, input
//! validation included), calls per second with every core busy, and the same logic run
//! natively, reported as ratios measured in one run.

use serde_json::json;
use skillhost::sandbox::{CallContext, Sandbox, SandboxOptions};
use skillhost::skills::{LoadMode, Loader};
use skillhost_tests::{Workspace, guests};
use std::sync::Arc;
use std::time::{Duration, Instant};

const WARMUP: usize = 500;
const SAMPLES: usize = 10_000;
const THROUGHPUT_FOR: Duration = Duration::from_secs(3);

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// What the probe's `echo` does, natively: parse the input JSON and encode it again.
fn native_echo(input: &str) -> String {
    let value: serde_json::Value = serde_json::from_str(input).unwrap();
    value.to_string()
}

fn main() {
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(cores).enable_all().build().unwrap();
    runtime.block_on(run(cores));
}

async fn run(cores: usize) {
    let ws = Workspace::new();
    ws.add_skill("skills", "probe", guests::PROBE, "");
    let sandbox = Arc::new(Sandbox::new(&SandboxOptions::default()).unwrap());
    let set = Loader::new(sandbox, ws.config("skills:\n  paths: [skills]\n")).load_all(LoadMode::Serve).await.unwrap();
    let skill = set.skills["probe"].clone();
    let input = json!({"message": "hello", "n": 42});
    let input_text = input.to_string();
    let caller = CallContext::standalone("bench");

    for _ in 0..WARMUP {
        skill.call("echo", &input, &caller).await.unwrap();
    }
    let mut sandboxed = Vec::with_capacity(SAMPLES);
    for _ in 0..SAMPLES {
        let start = Instant::now();
        let out = skill.call("echo", &input, &caller).await.unwrap();
        sandboxed.push(start.elapsed());
        assert_eq!(out.value.content, input_text);
    }
    sandboxed.sort();

    let mut native = Vec::with_capacity(SAMPLES);
    for _ in 0..SAMPLES {
        let start = Instant::now();
        let out = std::hint::black_box(native_echo(std::hint::black_box(&input_text)));
        native.push(start.elapsed());
        assert_eq!(out, input_text);
    }
    native.sort();

    let throughput = throughput(skill.clone(), input.clone(), cores * 2).await;
    let native_throughput = {
        let start = Instant::now();
        let mut n = 0u64;
        while start.elapsed() < Duration::from_millis(500) {
            std::hint::black_box(native_echo(&input_text));
            n += 1;
        }
        n as f64 / start.elapsed().as_secs_f64()
    };

    let (s50, s99, n50, n99) = (
        percentile(&sandboxed, 0.5),
        percentile(&sandboxed, 0.99),
        percentile(&native, 0.5),
        percentile(&native, 0.99),
    );
    println!("skillhost call benchmark: trivial tool `probe__echo`, {SAMPLES} sequential calls, {cores} cores");
    println!("{:<44} {:>10} {:>10}", "", "p50 (us)", "p99 (us)");
    println!("{:<44} {:>10.1} {:>10.1}", "sandboxed call (fresh instance + handle)", micros(s50), micros(s99));
    println!("{:<44} {:>10.2} {:>10.2}", "native call (same logic)", micros(n50), micros(n99));
    println!(
        "{:<44} {:>10.0}x {:>9.0}x",
        "ratio sandboxed / native",
        micros(s50) / micros(n50).max(0.001),
        micros(s99) / micros(n99).max(0.001)
    );
    println!(
        "throughput, {} concurrent callers on {cores} cores: {:.0} calls/s sandboxed, {:.0} calls/s native on one core",
        cores * 2,
        throughput,
        native_throughput
    );
}

/// Calls per second with `tasks` callers running at once for [`THROUGHPUT_FOR`].
async fn throughput(skill: Arc<skillhost::skills::Skill>, input: serde_json::Value, tasks: usize) -> f64 {
    let start = Instant::now();
    let handles: Vec<_> = (0..tasks)
        .map(|_| {
            let (skill, input) = (skill.clone(), input.clone());
            tokio::spawn(async move {
                let caller = CallContext::standalone("bench");
                let mut calls = 0u64;
                while start.elapsed() < THROUGHPUT_FOR {
                    skill.call("echo", &input, &caller).await.unwrap();
                    calls += 1;
                }
                calls
            })
        })
        .collect();
    let mut total = 0;
    for h in handles {
        total += h.await.unwrap();
    }
    total as f64 / start.elapsed().as_secs_f64()
}
