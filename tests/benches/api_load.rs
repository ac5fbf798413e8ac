//! Load on the approval-v1 stream: N concurrent runs (`API_LOAD_RUNS`, default 1000), each on
//! its own channel, each asking one approval that the client grants as soon as it sees it.
//! The API server, the scripted LLM and the clients share this process.
//!
//! Reports throughput (runs/s), the p50/p99 time from sending the decision to receiving
//! `approval_resolved`, and the process's peak resident memory (VmHWM).
//!
//! `cargo bench -p skillhost-tests --bench api_load` (`API_LOAD_RUNS=200` for a quick one).

use serde_json::{Value, json};
use skillhost_tests::api_client::{self, ApiServer, Sse};
use skillhost_tests::llm_server::{Answer, LlmServer, Reply};
use skillhost_tests::{Workspace, guests};
use std::time::{Duration, Instant};

/// The model asks for `probe__echo` once, then answers once it has the tool's result.
fn respond(body: &Value) -> Reply {
    let answered = body["messages"].as_array().and_then(|m| m.last()).is_some_and(|last| {
        last["content"].as_array().is_some_and(|blocks| blocks.iter().any(|b| b["type"] == "tool_result"))
    });
    if answered {
        Answer::text(&["Done."]).into()
    } else {
        Answer::text(&["Checking."]).call("c1", "probe__echo", json!({"n": 1})).into()
    }
}

/// One run: open the stream, approve, read to the end; returns the decision latency.
async fn run(server: &ApiServer, i: usize) -> Result<Duration, String> {
    let body = json!({"message": "go", "channel_id": format!("load-{i}")});
    let response =
        server.post("/api/trigger?wait=1&stream=approval-v1").json(&body).send().await.map_err(|e| e.to_string())?;
    if response.status() != 200 {
        return Err(format!("trigger: {}", response.status()));
    }
    let mut sse = Sse::new(response);
    let (mut sent, mut latency) = (None, None);
    while let Some(event) = sse.next().await {
        match event.kind.as_str() {
            "approval_requested" => {
                let id = event.data["approval_id"].as_str().ok_or("no approval id")?.to_owned();
                sent = Some(Instant::now());
                let (status, body) = server.decide(&id, json!({"approved": true})).await;
                if status != 200 {
                    return Err(format!("decision: {status} {body}"));
                }
            }
            "approval_resolved" => latency = sent.map(|t| t.elapsed()),
            "run_completed" => return latency.ok_or_else(|| "completed without an approval".to_owned()),
            "run_failed" => return Err(format!("run failed: {}", event.data["error"])),
            _ => {}
        }
    }
    Err("the stream ended without run_completed".into())
}

fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted.get(index).copied().unwrap_or_default()
}

fn main() {
    let runs: usize = std::env::var("API_LOAD_RUNS").ok().and_then(|v| v.parse().ok()).unwrap_or(1000);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    runtime.block_on(async move {
        let ws = Workspace::new();
        std::fs::create_dir_all(ws.path().join("skills")).unwrap();
        ws.add_skill("skills", "probe", guests::PROBE, "");
        let llm = LlmServer::responding(Box::new(respond)).await;
        let yaml = format!(
            "skills:\n  paths: [skills]\nstate:\n  filesystem: {{path: state}}\nlearning:\n  approval_auto_promote: 0\n  memory:\n    filesystem: {{path: memory}}\n\
             llm:\n  provider: anthropic\n  model: m\n  max_tokens: 500\n  anthropic: {{api_key: k, base_url: '{}'}}\n\
             human:\n  overrides: {{probe__echo: approve}}\n",
            llm.url()
        );
        let engine = skillhost_tests::engine_from(&ws, &yaml).await;
        let server = std::sync::Arc::new(ApiServer::start(engine, api_client::config()).await);
        let rss_before = peak_rss_kib();
        let started = Instant::now();
        let tasks: Vec<_> = (0..runs)
            .map(|i| {
                let server = server.clone();
                tokio::spawn(async move { run(&server, i).await })
            })
            .collect();
        let mut latencies = Vec::with_capacity(runs);
        let mut failures = Vec::new();
        for task in tasks {
            match task.await {
                Ok(Ok(latency)) => latencies.push(latency),
                Ok(Err(e)) => failures.push(e),
                Err(e) => failures.push(format!("task: {e}")),
            }
        }
        let elapsed = started.elapsed();
        latencies.sort();
        let (p50, p99) = (percentile(&latencies, 0.5), percentile(&latencies, 0.99));
        let rate = latencies.len() as f64 / elapsed.as_secs_f64();
        if std::env::var_os("BENCH_NO_HEADER").is_none() {
            println!("api_load ({} cores)\n", std::thread::available_parallelism().map_or(1, |n| n.get()));
            println!("| # | figure | p50 | p99 | ratio (same run) | goal |\n|---|---|---:|---:|---:|---|");
        }
        let ms = |d: Duration| format!("{:.2} ms", d.as_secs_f64() * 1e3);
        println!("| 4 | {runs} concurrent approval-v1 runs: decision -> `approval_resolved` | {} | {} | | p99 <= 50 ms |", ms(p50), ms(p99));
        println!("| 4 | {runs} concurrent approval-v1 runs: completed runs/s ({} failed) | {rate:.0}/s | | | >= 1,000/s |", failures.len());
        if let (Some(before), Some(peak)) = (rss_before, peak_rss_kib()) {
            let per_run = peak.saturating_sub(before) as f64 / runs as f64;
            println!("| 4 | peak RSS per concurrent run (VmHWM growth / runs; server, LLM stub and clients in one process) | {per_run:.0} KiB | | | reported |");
        }
        println!("wall time {:.2} s; max decision latency {}; peak RSS {} MiB; approval entries held {}",
            elapsed.as_secs_f64(), ms(latencies.last().copied().unwrap_or_default()),
            peak_rss_kib().unwrap_or(0) >> 10, server.api.interactions().approvals.len());
        for failure in failures.iter().take(5) {
            println!("  failure: {failure}");
        }
    });
}
