//! `cargo bench -p skillhost --bench api_load`
//!
//! Issue 11, target 4: load on the approval-v1 stream of the real `skillhost run --adapter api`
//! binary. N concurrent runs (`API_LOAD_RUNS`, default 1000), each on its own channel, each
//! asking one approval (`probe__echo`, gated by `human.overrides`) that its client grants as
//! soon as it sees it. The scripted LLM (Anthropic's wire format, on a runtime of its own) and
//! the clients share this process; the server has its own, so its peak memory and CPU time
//! are its own.
//!
//! Reports throughput (runs/s), the p50/p99 time from sending the decision to receiving
//! `approval_resolved`, the server's peak resident memory per concurrent run (VmHWM growth
//! over the runs), and the CPU time the server and this process spent per run.

#[path = "common/approval.rs"]
mod approval;
mod common;
#[path = "../tests/support/mod.rs"]
mod support;

use approval::{respond, run, status_kib};
use common::{Latency, header, human, latency_row, value_row};
use skillhost_tests::llm_server::LlmServer;
use skillhost_tests::{Workspace, guests};
use std::time::{Duration, Instant};
use support::api::ApiProcess;

/// User plus system CPU time of a process, from `/proc/<pid>/stat`.
fn cpu_time(pid: &str) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The fields after the command name, which is in parentheses and may hold spaces.
    let after = stat.rsplit_once(')').map(|(_, rest)| rest).unwrap_or_default();
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok()).unwrap_or(0);
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    // SAFETY: sysconf reads a constant.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    Duration::from_secs_f64((ticks(11) + ticks(12)) as f64 / hz)
}

#[tokio::main]
async fn main() {
    let runs: usize =
        std::env::var("API_LOAD_RUNS").ok().and_then(|v| v.parse().ok()).unwrap_or(common::iterations(1000, 50));
    let ws = Workspace::new();
    ws.add_skill("skills", "probe", guests::PROBE, "");
    // The scripted LLM stands for a remote service: it serves from a runtime of its own, so
    // that its work does not queue in front of the clients whose latency is measured (it
    // still shares the two cores).
    let llm_runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let llm = llm_runtime.spawn(LlmServer::responding_for_load(Box::new(respond))).await.unwrap();
    let yaml = format!(
        "skills:\n  paths: [skills]\nstate:\n  filesystem: {{path: state}}\nlearning:\n  approval_auto_promote: 0\n  memory:\n    filesystem: {{path: memory}}\n\
         llm:\n  provider: anthropic\n  model: m\n  max_tokens: 500\n  anthropic: {{api_key: k, base_url: '{}'}}\n\
         human:\n  overrides: {{probe__echo: approve}}\n",
        llm.url()
    );
    std::fs::write(ws.path().join("config.yaml"), yaml).unwrap();
    let api = std::sync::Arc::new(ApiProcess::start(&ws).await);
    let pid = api.pid().to_string();
    // One run first, so that the server's lazily built parts (the LLM client, the first
    // instance) are not counted against the load.
    run(&api, usize::MAX).await.expect("a first run");
    let rss_before = status_kib(&pid, "VmRSS:");
    let (server_cpu, own_cpu) = (cpu_time(&pid), cpu_time("self"));
    let started = Instant::now();
    let tasks: Vec<_> = (0..runs)
        .map(|i| {
            let api = api.clone();
            tokio::spawn(async move { run(&api, i).await })
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
    let (server_cpu, own_cpu) = (cpu_time(&pid) - server_cpu, cpu_time("self") - own_cpu);
    let peak = status_kib(&pid, "VmHWM:");
    drop(api); // kills the server
    llm_runtime.shutdown_background();

    header("api_load");
    let latency = Latency::of(latencies.clone());
    let label = format!("{runs} concurrent approval-v1 runs: decision -> `approval_resolved`");
    latency_row("4", &label, &latency, None, "p99 <= 50 ms");
    let rate = latencies.len() as f64 / elapsed.as_secs_f64();
    let label = format!("{runs} concurrent approval-v1 runs: completed runs/s ({} failed)", failures.len());
    value_row("4", &label, &format!("{rate:.0}/s"), None, ">= 1,000/s");
    if let (Some(before), Some(peak)) = (rss_before, peak) {
        let per_run = peak.saturating_sub(before) as f64 / runs as f64;
        let label = format!("server peak RSS per concurrent run (VmHWM growth / runs; {} MiB at peak)", peak >> 10);
        value_row("4", &label, &format!("{per_run:.0} KiB"), None, "reported");
    }
    let per_run = |cpu: Duration| human(cpu / runs.max(1) as u32);
    let label = "CPU time per run: the server (the LLM stub and the clients, in the bench's process)";
    value_row("4", label, &format!("{} ({})", per_run(server_cpu), per_run(own_cpu)), None, "");
    println!(
        "wall time {:.2} s; max decision latency {}",
        elapsed.as_secs_f64(),
        human(latencies.iter().max().copied().unwrap_or_default())
    );
    for failure in failures.iter().take(5) {
        println!("  failure: {failure}");
    }
}
