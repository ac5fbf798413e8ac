//! `cargo bench -p skillhost --bench mcp_roundtrip`
//!
//! An MCP `tools/call` round trip through `skillhost mcp` (the real binary, over stdio, with
//! rmcp as the client) for the trivial skill tool `probe__echo`: p50 / p99 latency of
//! sequential calls, and calls per second with 4 calls in flight.

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::TokioChildProcess;
use skillhost_tests::{Workspace, guests};
use std::time::{Duration, Instant};

const WARMUP: usize = 100;
const SAMPLES: usize = 2_000;
const IN_FLIGHT: usize = 4;
const THROUGHPUT_FOR: Duration = Duration::from_secs(3);

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn request() -> CallToolRequestParams {
    let arguments = serde_json::json!({"a": 1, "b": "two"}).as_object().cloned().unwrap_or_default();
    CallToolRequestParams::new("probe__echo").with_arguments(arguments)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let ws = Workspace::new();
    ws.add_skill("skills", "probe", guests::PROBE, "");
    let config = ws.path().join("config.yaml");
    std::fs::write(&config, "skills:\n  paths: [skills]\n  builtins: []\nstate:\n  filesystem: {path: state}\n")?;
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_skillhost"));
    command.arg("--config").arg(&config).arg("mcp").current_dir(ws.path());
    let client = ().serve(TokioChildProcess::new(command)?).await?;

    for _ in 0..WARMUP {
        client.call_tool(request()).await?;
    }
    let mut samples = Vec::with_capacity(SAMPLES);
    for _ in 0..SAMPLES {
        let started = Instant::now();
        let result = client.call_tool(request()).await?;
        samples.push(started.elapsed());
        assert_ne!(result.is_error, Some(true));
    }
    samples.sort();

    let started = Instant::now();
    let mut calls = 0usize;
    while started.elapsed() < THROUGHPUT_FOR {
        let batch = (0..IN_FLIGHT).map(|_| client.call_tool(request()));
        for result in futures::future::join_all(batch).await {
            result?;
            calls += 1;
        }
    }
    let per_second = calls as f64 / started.elapsed().as_secs_f64();
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    println!("skillhost mcp round trip: `probe__echo` over stdio, {SAMPLES} sequential calls, {cores} cores");
    println!("  p50 {:>8.0} us", percentile(&samples, 0.50).as_secs_f64() * 1e6);
    println!("  p99 {:>8.0} us", percentile(&samples, 0.99).as_secs_f64() * 1e6);
    println!("  sequential        {:>8.0} calls/s", SAMPLES as f64 / samples.iter().sum::<Duration>().as_secs_f64());
    println!("  {IN_FLIGHT} in flight       {per_second:>8.0} calls/s");
    client.cancel().await?;
    Ok(())
}
