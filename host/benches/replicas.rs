//! `cargo bench -p skillhost --bench replicas`
//!
//! Issue 29: what sharing the state through PostgreSQL costs approval-v1 runs. N concurrent
//! runs (`REPLICAS_RUNS`, default 1000), each on its own channel, each asking one approval
//! that its client grants as soon as it sees it, against three set-ups of the real
//! `skillhost run --adapter api` binary, one after the other in this run:
//!
//! 1. one replica on SQLite (the default: nothing to install);
//! 2. one replica on PostgreSQL (a throwaway cluster of Debian's PostgreSQL 15);
//! 3. two replicas on that PostgreSQL, the runs spread over both, each run's decision sent
//!    to the *other* replica (so every decision crosses the database: its conditional update,
//!    then the owner woken by `NOTIFY`).
//!
//! Reports runs/s and the p50/p99 time from sending the decision to receiving
//! `approval_resolved`, and the replicas' peak RSS; and where the database's time goes in
//! the two-replica set-up: `pg_stat_statements`' statements by total execution time, with
//! their calls per run. Everything shares the machine's cores:
//! the clients, the scripted LLM, the replicas and PostgreSQL.

#[path = "common/approval.rs"]
mod approval;
mod common;
#[path = "../tests/support/mod.rs"]
mod support;

use approval::{respond, run, run_deciding_on, status_kib};
use common::{Latency, header, human, latency_row, value_row};
use skillhost_tests::llm_server::LlmServer;
use skillhost_tests::postgres::Postgres;
use skillhost_tests::{Workspace, guests};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::api::ApiProcess;

struct Measured {
    rate: f64,
    latency: Latency,
    max: Duration,
    failures: Vec<String>,
    peak_mib: Vec<u64>,
    wall: Duration,
    /// CPU seconds spent during the runs: by the replicas, by PostgreSQL's processes, and
    /// by this process (the clients and the scripted LLM).
    cpu: Cpu,
}

/// Where the machine's CPU went while the runs ran.
#[derive(Default)]
struct Cpu {
    replicas: f64,
    postgres: f64,
    bench: f64,
}

/// The CPU seconds (user + system) process `pid` has used.
fn cpu_seconds(pid: u32) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return 0.0 };
    // Fields after the command (which may hold spaces), from field 3 on.
    let Some((_, rest)) = stat.rsplit_once(") ") else { return 0.0 };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok()).unwrap_or(0.0);
    // utime and stime are fields 14 and 15; `rest` starts at field 3.
    (ticks(11) + ticks(12)) / 100.0
}

/// Every process named `postgres` (the cluster's server and backends).
fn postgres_pids() -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "postgres"))
        .collect()
}

/// CPU seconds so far: the replicas', PostgreSQL's (its backends come and go: those that
/// ended are not counted, so this is a lower bound) and this process's.
fn cpu_now(replicas: &[ApiProcess]) -> Cpu {
    Cpu {
        replicas: replicas.iter().map(|r| cpu_seconds(r.pid())).sum(),
        postgres: postgres_pids().into_iter().map(cpu_seconds).sum(),
        bench: cpu_seconds(std::process::id()),
    }
}

/// `runs` concurrent runs over `replicas`, run `i` on replica `i % n` and decided on the next.
async fn measure(replicas: Vec<ApiProcess>, runs: usize) -> Measured {
    let replicas = Arc::new(replicas);
    for api in replicas.iter() {
        run(api, usize::MAX).await.expect("a first run");
    }
    let (started, before) = (Instant::now(), cpu_now(&replicas));
    let tasks: Vec<_> = (0..runs)
        .map(|i| {
            let replicas = replicas.clone();
            tokio::spawn(async move {
                let n = replicas.len();
                run_deciding_on(&replicas[i % n], &replicas[(i + 1) % n], i).await
            })
        })
        .collect();
    let (mut latencies, mut failures) = (Vec::with_capacity(runs), Vec::new());
    for task in tasks {
        match task.await {
            Ok(Ok(latency)) => latencies.push(latency),
            Ok(Err(e)) => failures.push(e),
            Err(e) => failures.push(format!("task: {e}")),
        }
    }
    let wall = started.elapsed();
    let after = cpu_now(&replicas);
    let cpu = Cpu {
        replicas: after.replicas - before.replicas,
        postgres: after.postgres - before.postgres,
        bench: after.bench - before.bench,
    };
    let peak_mib = replicas.iter().filter_map(|api| status_kib(&api.pid().to_string(), "VmHWM:")).map(|k| k >> 10);
    let peak_mib = peak_mib.collect();
    let rate = latencies.len() as f64 / wall.as_secs_f64();
    let max = latencies.iter().max().copied().unwrap_or_default();
    Measured { rate, latency: Latency::of(latencies), max, failures, peak_mib, wall, cpu }
}

fn workspace(llm: &str, state: &str) -> Workspace {
    let ws = Workspace::new();
    ws.add_skill("skills", "probe", guests::PROBE, "");
    let yaml = format!(
        "skills:\n  paths: [skills]\n{state}learning:\n  approval_auto_promote: 0\n  memory:\n    filesystem: {{path: memory}}\n\
         llm:\n  provider: anthropic\n  model: m\n  max_tokens: 500\n  anthropic: {{api_key: k, base_url: '{llm}'}}\n\
         human:\n  overrides: {{probe__echo: approve}}\n"
    );
    std::fs::write(ws.path().join("config.yaml"), yaml).unwrap();
    ws
}

#[tokio::main]
async fn main() {
    let runs: usize =
        std::env::var("REPLICAS_RUNS").ok().and_then(|v| v.parse().ok()).unwrap_or(common::iterations(1000, 50));
    let llm_runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let llm = llm_runtime.spawn(LlmServer::responding_for_load(Box::new(respond))).await.unwrap();

    let sqlite = workspace(&llm.url(), "state:\n  filesystem: {path: state}\n");
    let one_sqlite = measure(vec![ApiProcess::start(&sqlite).await], runs).await;

    let pg = Postgres::start_with_files(
        "-c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.track=all",
        |_| {},
    );
    pg.psql("postgres", "CREATE DATABASE bench");
    pg.psql("bench", "CREATE EXTENSION pg_stat_statements");
    let url = format!("{}?sslmode=disable", pg.url("postgres", "bench"));
    let on_pg = workspace(&llm.url(), &format!("state:\n  backend: postgres\n  postgres: {{url: '{url}'}}\n"));
    let one_pg = measure(vec![ApiProcess::start(&on_pg).await], runs).await;
    let two = vec![ApiProcess::start(&on_pg).await, ApiProcess::start(&on_pg).await];
    pg.psql("bench", "SELECT pg_stat_statements_reset()");
    let two_pg = measure(two, runs).await;
    let profile = pg.psql("bench", PROFILE);
    llm_runtime.shutdown_background();

    header("replicas");
    let rows = [
        ("one replica, SQLite", &one_sqlite),
        ("one replica, PostgreSQL", &one_pg),
        ("two replicas, PostgreSQL, decided on the other", &two_pg),
    ];
    for (name, m) in rows {
        let label = format!("{runs} concurrent approval-v1 runs, {name}: decision -> `approval_resolved`");
        let ratio = Some(m.latency.p99.as_secs_f64() / one_sqlite.latency.p99.as_secs_f64());
        latency_row("29", &label, &m.latency, ratio, "reported");
        let label = format!("{runs} concurrent approval-v1 runs, {name}: runs/s ({} failed)", m.failures.len());
        value_row("29", &label, &format!("{:.0}/s", m.rate), Some(m.rate / one_sqlite.rate), "reported");
        println!(
            "  {name}: wall {:.2} s, max decision latency {}, peak RSS {:?} MiB",
            m.wall.as_secs_f64(),
            human(m.max),
            m.peak_mib
        );
        let of_wall = |s: f64| s / m.wall.as_secs_f64();
        println!(
            "  {name}: CPU during the runs: replicas {:.1} s ({:.2} cores), PostgreSQL >= {:.1} s ({:.2} cores), \
             clients and LLM {:.1} s ({:.2} cores)",
            m.cpu.replicas,
            of_wall(m.cpu.replicas),
            m.cpu.postgres,
            of_wall(m.cpu.postgres),
            m.cpu.bench,
            of_wall(m.cpu.bench)
        );
        for failure in m.failures.iter().take(3) {
            println!("    failure: {failure}");
        }
    }
    // Every statement of the two-replica set-up, counted from just before its runs (its
    // first run per replica included): total and mean execution time, calls per run.
    println!("  two replicas: the database's time by statement (pg_stat_statements):");
    println!("    total ms | mean ms | calls/run | statement");
    for line in profile.lines() {
        let fields: Vec<&str> = line.splitn(4, '|').collect();
        let [total, mean, calls, query] = fields[..] else { continue };
        let per_run = calls.parse::<f64>().unwrap_or(0.0) / (runs + 2) as f64;
        println!("    {total} | {mean} | {per_run:.2} | {query}");
    }
}

/// The statements of the bench's database by total execution time (`psql -At`: `|`-separated).
const PROFILE: &str = "SELECT round(total_exec_time::numeric, 1), round(mean_exec_time::numeric, 3), calls, \
    left(regexp_replace(query, '\\s+', ' ', 'g'), 110) FROM pg_stat_statements \
    WHERE dbid = (SELECT oid FROM pg_database WHERE datname = 'bench') ORDER BY total_exec_time DESC LIMIT 15";
