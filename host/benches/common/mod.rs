//! What the benchmarks share: percentiles and the one table format every bench prints
//! (`scripts/bench.sh` runs them all and prints one table).

#![allow(dead_code)] // Each bench uses a different part.

use std::time::{Duration, Instant};

/// Whether `BENCH_SMOKE` is set: `.ci/run` runs every bench once this way (few iterations,
/// figures printed, no bound asserted), so that a bench that breaks fails CI. Its figures
/// mean little; measure without it.
pub fn smoke() -> bool {
    std::env::var_os("BENCH_SMOKE").is_some_and(|v| !v.is_empty() && v != "0")
}

/// `full`, or `smoke` under [`smoke`].
pub fn iterations(full: usize, smoke: usize) -> usize {
    if self::smoke() { smoke } else { full }
}

/// `full`, or `smoke` under [`smoke`].
pub fn lasting(full: Duration, smoke: Duration) -> Duration {
    if self::smoke() { smoke } else { full }
}

/// The `p`-th percentile (0..=1) of sorted samples.
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// Microseconds, for printing.
pub fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// A figure: p50 and p99 of `samples`.
#[derive(Clone, Copy, Debug)]
pub struct Latency {
    /// Median.
    pub p50: Duration,
    /// 99th percentile.
    pub p99: Duration,
}

impl Latency {
    /// From unsorted samples.
    pub fn of(mut samples: Vec<Duration>) -> Self {
        samples.sort();
        Latency { p50: percentile(&samples, 0.5), p99: percentile(&samples, 0.99) }
    }

    /// `self.p50 / other.p50`.
    pub fn ratio(&self, other: &Latency) -> f64 {
        self.p50.as_secs_f64() / other.p50.as_secs_f64().max(1e-9)
    }
}

/// Runs `call` `warmup` times untimed, then `samples` times timed, one after another.
pub async fn sample(warmup: usize, samples: usize, mut call: impl AsyncFnMut()) -> Latency {
    for _ in 0..warmup {
        call().await;
    }
    let mut times = Vec::with_capacity(samples);
    for _ in 0..samples {
        let started = Instant::now();
        call().await;
        times.push(started.elapsed());
    }
    Latency::of(times)
}

/// The table's header, unless `scripts/bench.sh` printed it already.
pub fn header(title: &str) {
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    if std::env::var_os("BENCH_NO_HEADER").is_none() {
        let smoke = if smoke() { ", BENCH_SMOKE: few iterations, figures not meaningful" } else { "" };
        println!("{title} ({cores} cores{smoke})");
        println!();
        println!("| # | figure | p50 | p99 | ratio (same run) | goal |");
        println!("|---|---|---:|---:|---:|---|");
    }
}

/// A latency row.
pub fn latency_row(target: &str, figure: &str, latency: &Latency, ratio: Option<f64>, goal: &str) {
    println!(
        "| {target} | {figure} | {} | {} | {} | {goal} |",
        human(latency.p50),
        human(latency.p99),
        ratio.map(|r| format!("{r:.2}x")).unwrap_or_default()
    );
}

/// A row whose figure is not a latency (a throughput, a count).
pub fn value_row(target: &str, figure: &str, value: &str, ratio: Option<f64>, goal: &str) {
    println!(
        "| {target} | {figure} | {value} | | {} | {goal} |",
        ratio.map(|r| format!("{r:.2}x")).unwrap_or_default()
    );
}

/// A duration with a unit that suits it.
pub fn human(d: Duration) -> String {
    let us = micros(d);
    if us < 1_000.0 {
        format!("{us:.1} us")
    } else if us < 1_000_000.0 {
        format!("{:.2} ms", us / 1e3)
    } else {
        format!("{:.2} s", us / 1e6)
    }
}
