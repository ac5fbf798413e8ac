//! `cargo bench -p skillhost --bench sandbox`
//!
//! The in-process cost of one tool call, each figure next to the floor it is measured
//! against in the same run (issue 11, targets 1, 2 and 6):
//!
//! - target 1: a skillhost call of the Rust probe's `echo` (schema validation, fresh store,
//!   fuel, deadline, memory cap, logs, result, teardown) against raw wasmtime doing the same
//!   work shape on the same compiled component and engine (pooled `InstancePre`, a fresh
//!   `Store` and WASI context, one call);
//! - target 2: the Python `word_stats__count_words` against the probe, with instantiation
//!   alone measured for both (is it instantiation or the guest's own work?), a second call
//!   in one raw instance as a diagnostic (a fresh interpreter's first call against a warmed
//!   one's), sequential and with callers in flight;
//! - target 6: a CPU-bound call (~10 ms of the probe's `spin`) with fuel and epoch
//!   interruption against the same call on an engine without them.
//!
//! `BENCH_PROFILE=<tool>` (`echo`, `count_words`; `warm:<tool>` with warm instances) makes
//! nothing but calls of that tool for 8 s, for `perf record`, and prints how many it made.

mod common;

use common::{Latency, header, latency_row, sample, value_row};
use serde_json::{Value, json};
use skillhost::sandbox::bindings::guest;
use skillhost::sandbox::{
    CallContext, Resident, Sandbox, SandboxOptions, WARM_INSTANCES, YIELD_FUEL, engine_config, wit_context,
};
use skillhost::skills::{LoadMode, Loader, Skill};
use skillhost_tests::{Workspace, guests};
use std::sync::Arc;
use std::time::{Duration, Instant};
use wasmtime::component::types::ComponentItem;
use wasmtime::component::{Component, InstancePre, Linker, ResourceTable};
use wasmtime::{Engine, Store};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

// Warm-up and timed calls, and how long each throughput run lasts (fewer under `BENCH_SMOKE`).
fn warmup() -> usize {
    common::iterations(300, 20)
}
fn samples() -> usize {
    common::iterations(5_000, 100)
}
fn py_samples() -> usize {
    common::iterations(1_000, 20)
}
fn spin_samples() -> usize {
    common::iterations(100, 5)
}
fn throughput_for() -> Duration {
    common::lasting(Duration::from_secs(2), Duration::from_millis(300))
}

fn main() {
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(cores).enable_all().build().unwrap();
    runtime.block_on(run(cores));
}

/// The store data of the raw-wasmtime floor: WASI with nothing granted, and nothing else.
struct Bare {
    wasi: WasiCtx,
    table: ResourceTable,
}

impl WasiView for Bare {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

/// A component run by plain wasmtime: the floor.
struct Raw {
    engine: Engine,
    pre: InstancePre<Bare>,
    tools: guest::tools::GuestIndices,
    limits: RawLimits,
}

/// What a raw store meters.
#[derive(Clone, Copy, PartialEq)]
enum RawLimits {
    None,
    /// Fuel yielding every [`YIELD_FUEL`], as skillhost's stores do.
    Fuel,
    /// Fuel and an epoch deadline (an engine with epoch interruption).
    FuelAndEpochs,
}

impl Raw {
    /// Links `component` with WASI (the skill's own imports trap: the calls measured here
    /// make none). `limits`: what the engine meters and the store sets.
    fn new(engine: &Engine, component: &Component, limits: RawLimits) -> Raw {
        let mut linker = Linker::<Bare>::new(engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker).unwrap();
        stub_skill_imports(&mut linker, engine, component);
        let pre = linker.instantiate_pre(component).unwrap();
        let tools = guest::tools::GuestIndices::new(&pre).unwrap();
        Raw { engine: engine.clone(), pre, tools, limits }
    }

    fn store(&self) -> Store<Bare> {
        let mut store =
            Store::new(&self.engine, Bare { wasi: WasiCtx::builder().build(), table: ResourceTable::new() });
        if self.limits != RawLimits::None {
            store.set_fuel(u64::MAX).unwrap();
            store.fuel_async_yield_interval(Some(YIELD_FUEL)).unwrap();
        }
        if self.limits == RawLimits::FuelAndEpochs {
            store.set_epoch_deadline(u64::MAX / 2);
        }
        store
    }

    /// Fresh store, instantiate, drop.
    async fn instantiate(&self) {
        let mut store = self.store();
        self.pre.instantiate_async(&mut store).await.unwrap();
    }

    /// Fresh store, instantiate, one `handle`, drop.
    async fn call(&self, tool: &str, input: &str) -> String {
        self.calls(tool, input, 1).await.0
    }

    /// The time of a second `handle` in one instance, after an untimed first: the guest's
    /// work once its first call has warmed it (skillhost never reuses an instance; this
    /// splits a fresh instance's first-call cost from the work).
    async fn second_call(&self, tool: &str, input: &str) -> Duration {
        self.calls(tool, input, 2).await.1
    }

    /// Fresh store, instantiate, `times` calls of `handle` in that instance, drop: the last
    /// call's output and how long it took.
    async fn calls(&self, tool: &str, input: &str, times: usize) -> (String, Duration) {
        let mut store = self.store();
        let instance = self.pre.instantiate_async(&mut store).await.unwrap();
        let tools = self.tools.load(&mut store, &instance).unwrap();
        let ctx = wit_context(&CallContext::standalone("bench"));
        let mut last = (String::new(), Duration::ZERO);
        for _ in 0..times {
            let started = Instant::now();
            let content = tools.call_handle(&mut store, tool, input, &ctx).await.unwrap().content;
            last = (content, started.elapsed());
        }
        last
    }
}

/// The skill contract's imports as functions that fail (the calls measured make none).
/// Not `define_unknown_imports_as_traps`: it would also stub WASI interfaces of a newer
/// minor version than the linker's, shadowing the linker's semver match.
fn stub_skill_imports(linker: &mut Linker<Bare>, engine: &Engine, component: &Component) {
    for (name, item) in component.component_type().imports(engine) {
        let ComponentItem::ComponentInstance(instance) = item.ty else { continue };
        if !name.starts_with("skillhost:") {
            continue;
        }
        let mut stub = linker.instance(name).unwrap();
        for (func, item) in instance.exports(engine) {
            if matches!(item.ty, ComponentItem::ComponentFunc(_)) {
                // Those without results (`log`) succeed; the rest fail.
                stub.func_new(func, |_, _, _, results| {
                    if results.is_empty() { Ok(()) } else { wasmtime::bail!("not provided by the floor") }
                })
                .unwrap();
            }
        }
    }
}

fn echo_input() -> Value {
    json!({"message": "hello", "n": 42})
}

fn words_input() -> Value {
    let text = "The quick brown fox jumps over the lazy dog. The dog sleeps; the fox runs on.\n".repeat(4);
    json!({"text": text, "top": 3})
}

async fn call(skill: &Skill, tool: &str, input: &Value) -> String {
    let out = skill.call(tool, input, &CallContext::standalone("bench")).await.unwrap();
    assert_ne!(out.value.succeeded, Some(false), "{}", out.value.content);
    out.value.content
}

/// The probe and the Python example loaded by a sandbox making `warm` instances ahead.
/// `resident`: what its pool keeps resident between calls.
async fn load(ws: &Workspace, warm: usize, resident: Resident) -> (Arc<Sandbox>, Arc<Skill>, Arc<Skill>) {
    // A compile cache kept between runs: the Python component takes a minute to compile.
    let cache = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/bench-cache");
    let options = SandboxOptions {
        warm_instances: warm,
        cache_dir: Some(cache),
        resident_budget: resident,
        ..SandboxOptions::default()
    };
    let sandbox = Arc::new(Sandbox::new(&options).unwrap());
    let loader = Loader::new(sandbox.clone(), ws.config("skills:\n  paths: [skills]\n")).unwrap();
    let set = loader.load_all(LoadMode::Serve).await.unwrap();
    (sandbox, set.skills["probe"].clone(), set.skills["word_stats"].clone())
}

async fn run(cores: usize) {
    let ws = Workspace::new();
    ws.add_skill("skills", "probe", guests::PROBE, "");
    ws.add_skill("skills", "word_stats", guests::WORD_STATS, "");
    // Target 1 compares fresh instances made in the call; the warm rows show the default.
    let (sandbox, probe, python) = load(&ws, 0, Resident::DEFAULT).await;
    let before = rss_kib();
    let (_, warm_probe, warm_python) = load(&ws, WARM_INSTANCES, Resident::DEFAULT).await;
    tokio::time::sleep(Duration::from_secs(2)).await; // The warm instances are made.
    let warm_rss = before.zip(rss_kib()).map(|(a, b)| b.saturating_sub(a));
    let probe_wasm = sandbox.compile(&std::fs::read(guests::PROBE).unwrap()).unwrap();
    let python_wasm = sandbox.compile(&std::fs::read(guests::WORD_STATS).unwrap()).unwrap();
    let raw_probe = Raw::new(sandbox.engine(), &probe_wasm, RawLimits::Fuel);
    let raw_python = Raw::new(sandbox.engine(), &python_wasm, RawLimits::Fuel);

    if let Ok(tool) = std::env::var("BENCH_PROFILE") {
        // For `perf record`: nothing but calls of one tool for a few seconds.
        // `count_words` or `echo`, instantiated in the call; `warm:count_words`, `warm:echo`
        // with warm instances.
        let (warm, tool) = match tool.strip_prefix("warm:") {
            Some(tool) => (true, tool.to_string()),
            None => (false, tool),
        };
        let (skill, input) = match (tool == "count_words", warm) {
            (true, false) => (&python, words_input()),
            (true, true) => (&warm_python, words_input()),
            (false, false) => (&probe, echo_input()),
            (false, true) => (&warm_probe, echo_input()),
        };
        let (started, mut calls) = (Instant::now(), 0u64);
        while started.elapsed() < Duration::from_secs(8) {
            call(skill, &tool, &input).await;
            calls += 1;
        }
        eprintln!("{calls} calls of {tool} in {:?}", started.elapsed());
        return;
    }
    header("skillhost in-process calls");
    let echo = echo_input();
    let echo_text = echo.to_string();
    let floor =
        sample(warmup(), samples(), || async { assert_eq!(raw_probe.call("echo", &echo_text).await, echo_text) }).await;
    let ours = sample(warmup(), samples(), || async { assert_eq!(call(&probe, "echo", &echo).await, echo_text) }).await;
    let warm =
        sample(warmup(), samples(), || async { assert_eq!(call(&warm_probe, "echo", &echo).await, echo_text) }).await;
    latency_row("1", "raw wasmtime floor: probe `echo` (fresh Store + WASI, pooled InstancePre)", &floor, None, "");
    let label = "skillhost call: probe `echo`, instantiated in the call (`warm_instances: 0`)";
    latency_row("1", label, &ours, Some(ours.ratio(&floor)), "<= 1.2x floor");
    let label = format!("skillhost call: probe `echo`, {WARM_INSTANCES} warm instances (the default)");
    latency_row("1", &label, &warm, Some(warm.ratio(&floor)), "");

    let words = words_input();
    let words_text = words.to_string();
    let py = sample(20, py_samples(), || async { drop(call(&python, "count_words", &words).await) }).await;
    let label = "skillhost call: Python `word_stats count_words`, instantiated in the call";
    latency_row("2", label, &py, Some(py.ratio(&ours)), "<= 5x probe");
    let py_warm = sample(20, py_samples(), || async { drop(call(&warm_python, "count_words", &words).await) }).await;
    let label = format!("skillhost call: Python `count_words`, {WARM_INSTANCES} warm instances (vs probe, same)");
    latency_row("2", &label, &py_warm, Some(py_warm.ratio(&warm)), "<= 5x probe");
    // The same without the resident budget (`sandbox.resident_mb`): what bounding the memory
    // kept costs a well-behaved skill's fast path.
    let unbounded = Resident { total: usize::MAX, per_skill: usize::MAX };
    let (_, _, free_python) = load(&ws, WARM_INSTANCES, unbounded).await;
    let py_free = sample(20, py_samples(), || async { drop(call(&free_python, "count_words", &words).await) }).await;
    let label = "skillhost call: Python `count_words`, warm, without the resident budget (vs the above)";
    latency_row("2", label, &py_free, Some(py_free.ratio(&py_warm)), "budget within 10%");
    let py_floor = sample(20, py_samples(), || async { drop(raw_python.call("count_words", &words_text).await) }).await;
    latency_row("2", "raw wasmtime: Python instantiate + call", &py_floor, Some(py.ratio(&py_floor)), "");
    let mut seconds = Vec::new();
    for _ in 0..py_samples() {
        seconds.push(raw_python.second_call("count_words", &words_text).await);
    }
    let second = Latency::of(seconds);
    let label = "raw wasmtime: Python second call in one instance (diagnostic: skillhost never reuses one)";
    latency_row("2", label, &second, Some(second.ratio(&py_floor)), "");
    let py_inst = sample(20, py_samples(), || raw_python.instantiate()).await;
    latency_row("2", "raw wasmtime: Python instantiate only", &py_inst, Some(py_inst.ratio(&py_floor)), "");
    let unmapped = engine_with(&SandboxOptions { keep_resident_bytes: 0, ..SandboxOptions::default() }, &python_wasm);
    let raw_unmapped = Raw::new(unmapped.engine(), &unmapped, RawLimits::Fuel);
    let before = sample(20, py_samples(), || async { drop(raw_unmapped.call("count_words", &words_text).await) }).await;
    let label = "raw wasmtime: Python instantiate + call, memory unmapped between calls (the old setting)";
    latency_row("2", label, &before, Some(before.ratio(&py_floor)), "");
    let probe_inst = sample(warmup(), samples(), || raw_probe.instantiate()).await;
    latency_row("2", "raw wasmtime: probe instantiate only", &probe_inst, None, "");

    let tasks = cores * 2;
    let rust_rate = throughput(warm_probe.clone(), "echo", echo.clone(), tasks).await;
    let py_rate = throughput(warm_python.clone(), "count_words", words.clone(), tasks).await;
    let free_rate = throughput(free_python.clone(), "count_words", words.clone(), tasks).await;
    let label = format!("calls/s, {tasks} callers in flight: probe `echo`");
    value_row("2", &label, &format!("{rust_rate:.0}/s"), None, "");
    let label = format!("calls/s, {tasks} callers in flight: Python `count_words`");
    value_row("2", &label, &format!("{py_rate:.0}/s"), Some(rust_rate / py_rate), "<= 5x fewer");
    let label = format!("calls/s, {tasks} callers in flight: Python, without the resident budget (vs the above)");
    value_row("2", &label, &format!("{free_rate:.0}/s"), Some(free_rate / py_rate), "budget within 10%");
    if let Some(kib) = warm_rss {
        let label =
            format!("VmRSS added by a second sandbox with {WARM_INSTANCES} warm instances of each (code mapped too)");
        value_row("2", &label, &format!("{:.1} MiB", kib as f64 / 1024.0), None, "");
    }

    limits(&probe, &raw_probe).await;
}

/// The process's resident memory, in KiB.
fn rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status.lines().find(|l| l.starts_with("VmRSS:"))?.split_whitespace().nth(1)?.parse().ok()
}

/// `component` on an engine built with `options`: one that unmaps linear memory between
/// instances (no `keep_resident_bytes`), as the sandbox did before, or one without the
/// resident budget.
fn engine_with(options: &SandboxOptions, component: &Component) -> Component {
    let engine = Engine::new(&engine_config(options)).unwrap();
    let bytes = component.serialize().unwrap();
    // SAFETY: serialized just above by an engine whose settings differ only in how memory
    // is reset, not in how code is compiled (and `deserialize` checks compatibility).
    unsafe { Component::deserialize(&engine, &bytes) }
        .unwrap_or_else(|_| Component::new(&engine, std::fs::read(guests::WORD_STATS).unwrap()).unwrap())
}

/// Target 6: what the limits cost a CPU-bound call: fuel (which also paces the deadline)
/// against an engine metering nothing, and the epoch interruption skillhost used to add.
async fn limits(probe: &Skill, raw_limited: &Raw) {
    let engine_with = |fuel: bool, epochs: bool| {
        let mut config = engine_config(&SandboxOptions::default());
        config.consume_fuel(fuel).epoch_interruption(epochs);
        let engine = Engine::new(&config).unwrap();
        let component = Component::new(&engine, std::fs::read(guests::PROBE).unwrap()).unwrap();
        (engine, component)
    };
    let (free_engine, free) = engine_with(false, false);
    let raw_free = Raw::new(&free_engine, &free, RawLimits::None);
    let (epoch_engine, with_epochs) = engine_with(true, true);
    let raw_epochs = Raw::new(&epoch_engine, &with_epochs, RawLimits::FuelAndEpochs);
    let rounds = calibrate(&raw_free).await;
    let input = json!({ "rounds": rounds });
    let text = input.to_string();
    let none = sample(5, spin_samples(), || async { drop(raw_free.call("spin", &text).await) }).await;
    let epochs = sample(5, spin_samples(), || async { drop(raw_epochs.call("spin", &text).await) }).await;
    let metered = sample(5, spin_samples(), || async { drop(raw_limited.call("spin", &text).await) }).await;
    let ours = sample(5, spin_samples(), || async { drop(call(probe, "spin", &input).await) }).await;
    let what = format!("probe `spin` ({rounds} rounds)");
    latency_row("6", &format!("{what}, raw wasmtime, no fuel, no epochs"), &none, None, "");
    let label = format!("{what}, raw wasmtime, fuel + epoch interruption (skillhost's engine before)");
    latency_row("6", &label, &epochs, Some(epochs.ratio(&none)), "");
    let label = format!("{what}, raw wasmtime, fuel yielding every {YIELD_FUEL} (skillhost's engine)");
    latency_row("6", &label, &metered, Some(metered.ratio(&none)), "");
    latency_row("6", &format!("{what}, skillhost call (all limits)"), &ours, Some(ours.ratio(&none)), "<= 1.3x");
}

/// How many `spin` rounds take about 10 ms without limits.
async fn calibrate(raw: &Raw) -> u64 {
    let mut rounds = 100_000u64;
    loop {
        let started = Instant::now();
        raw.call("spin", &json!({ "rounds": rounds }).to_string()).await;
        let took = started.elapsed();
        if took >= Duration::from_millis(5) || rounds > 1 << 34 {
            return (rounds as f64 * 0.010 / took.as_secs_f64()) as u64;
        }
        rounds *= 4;
    }
}

/// Calls per second with `tasks` callers running at once for [`throughput_for`].
async fn throughput(skill: Arc<Skill>, tool: &'static str, input: Value, tasks: usize) -> f64 {
    let start = Instant::now();
    let handles: Vec<_> = (0..tasks)
        .map(|_| {
            let (skill, input) = (skill.clone(), input.clone());
            tokio::spawn(async move {
                let mut calls = 0u64;
                while start.elapsed() < throughput_for() {
                    call(&skill, tool, &input).await;
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
