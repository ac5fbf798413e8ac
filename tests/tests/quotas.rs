//! Storage quotas and the state store's guarantees, through real guests: a skill cannot fill
//! the memory root or its state namespace past the operator's quotas, the refusal reaches it
//! as a clear error, and state written through one loader is read at once through another
//! (as by another process) while writers never hold up readers.

use serde_json::{Value, json};
use skillhost::skills::SkillSet;
use skillhost::store::StateStore;
use skillhost::store::state::Namespace;
use skillhost_tests::{Workspace, ctx, guests, json as parse};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const HOSTILE_MANIFEST: &str = "[capabilities]\nmemory = true\n";

/// `hostile` (memory asked for and granted) and `probe`, with `sandbox:` set to `sandbox`.
async fn load(ws: &Workspace, sandbox: &str, hostile_limits: &str) -> SkillSet {
    let manifest = format!("{HOSTILE_MANIFEST}[limits]\n{hostile_limits}\n");
    ws.add_skill("skills", "hostile", guests::HOSTILE, &manifest);
    ws.add_skill("skills", "probe", guests::PROBE, "");
    let yaml = format!(
        "skills:\n  paths: [skills]\n  grants:\n    hostile:\n      memory: true\nlearning:\n  memory:\n    filesystem:\n      path: mem\nstate:\n  filesystem:\n    path: state\nsandbox:\n{sandbox}\n"
    );
    let set = ws.load(&yaml).await;
    assert!(set.problems.is_empty(), "{:?}", set.problems);
    set
}

/// The namespace `hostile`'s calls in [`ctx`]'s conversation write to: quotas bound each
/// namespace.
fn hostile_namespace() -> String {
    Namespace::conversation("hostile", &ctx().conversation(), std::time::Duration::from_secs(1)).name
}

async fn call(set: &SkillSet, tool: &str, input: Value) -> Value {
    let (skill, spec) = set.find_tool(tool).unwrap_or_else(|| panic!("no tool {tool}"));
    let out = skill.call(&spec.name, &input, &ctx()).await.unwrap_or_else(|e| panic!("{tool}: {e}"));
    parse(&out.value.content)
}

/// Bytes and regular files under `dir`.
fn disk_usage(dir: &std::path::Path) -> (u64, u64) {
    let (mut bytes, mut files) = (0, 0);
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let meta = entry.metadata().unwrap();
        if meta.is_dir() {
            let (b, f) = disk_usage(&entry.path());
            (bytes, files) = (bytes + b, files + f);
        } else {
            (bytes, files) = (bytes + meta.len(), files + 1);
        }
    }
    (bytes, files)
}

/// The flood (512 files of 1 MiB in one call) stops at the default 64 MiB.
#[tokio::test]
async fn the_default_memory_quota_stops_a_flood() {
    let ws = Workspace::new();
    let set = load(&ws, "  defaults: {}", "").await;
    let started = Instant::now();
    let out = call(&set, "hostile__fill_memory", json!({"files": 512, "kb": 1024})).await;
    println!("64 MiB of memory files, then refused, in {:?}", started.elapsed());
    assert_eq!((out["written"].as_u64(), out["error"].as_str()), (Some(64), Some("too-large")), "{out}");
    assert_eq!(disk_usage(&ws.path().join("mem")), (64 << 20, 64));
}

/// Operator defaults set the quota; a manifest asking for more is clamped to the maximums.
#[tokio::test]
async fn memory_quotas_come_from_the_operator() {
    let ws = Workspace::new();
    let sandbox = "  defaults: {memory_quota_files: 10}\n  maximums: {memory_quota_mb: 2}";
    let set = load(&ws, sandbox, "memory_quota_mb = 1000").await;
    let files = call(&set, "hostile__fill_memory", json!({"files": 100, "kb": 1})).await;
    assert_eq!((files["written"].as_u64(), files["error"].as_str()), (Some(10), Some("too-large")), "{files}");
    std::fs::remove_dir_all(ws.path().join("mem/fill")).unwrap();
    let bytes = call(&set, "hostile__fill_memory", json!({"files": 100, "kb": 1024})).await;
    assert_eq!((bytes["written"].as_u64(), bytes["error"].as_str()), (Some(2), Some("too-large")), "{bytes}");
    assert_eq!(disk_usage(&ws.path().join("mem")), (2 << 20, 2));
}

/// The state flood stops at the default 10,000 keys, with an `invalid` error naming
/// the quota; the keys already set stay.
#[tokio::test]
async fn the_default_state_quota_stops_a_flood() {
    let ws = Workspace::new();
    let set = load(&ws, "  defaults: {}", "").await;
    let started = Instant::now();
    let out = call(&set, "hostile__fill_state", json!({"keys": 20_000, "bytes": 1024})).await;
    println!("10,000 state keys, then refused, in {:?}", started.elapsed());
    assert_eq!((out["written"].as_u64(), out["error"].as_str()), (Some(10_000), Some("invalid")), "{out}");
    assert!(out["detail"].as_str().unwrap().contains("state_quota_keys"), "{out}");
    let store = StateStore::new(ws.path().join("state"));
    assert_eq!(store.usage(&hostile_namespace()).await.unwrap().0, 10_000);
}

#[tokio::test]
async fn the_state_byte_quota_names_its_limit() {
    let ws = Workspace::new();
    let set = load(&ws, "  defaults: {state_quota_mb: 1}", "").await;
    let out = call(&set, "hostile__fill_state", json!({"keys": 5_000, "bytes": 1024})).await;
    let written = out["written"].as_u64().unwrap();
    assert!((900..1024).contains(&written), "{out}");
    assert_eq!(out["error"], "invalid", "{out}");
    assert!(out["detail"].as_str().unwrap().contains("state_quota_mb"), "{out}");
    let (keys, bytes) = StateStore::new(ws.path().join("state")).usage(&hostile_namespace()).await.unwrap();
    assert!(keys > 0 && bytes <= 1 << 20, "{keys} {bytes}");
}

/// Two loaders on one state directory (two processes, as far as the store can tell): each
/// reads what the other's skill wrote, at once.
#[tokio::test]
async fn state_written_through_one_loader_is_read_through_another() {
    let ws = Workspace::new();
    let first = load(&ws, "  defaults: {}", "").await;
    let second = load(&ws, "  defaults: {}", "").await;
    assert_eq!(call(&second, "probe__state_get", json!({"key": "k"})).await["value"], Value::Null);
    call(&first, "probe__state_set", json!({"key": "k", "value": "one"})).await;
    assert_eq!(call(&second, "probe__state_get", json!({"key": "k"})).await["value"], "one");
    call(&second, "probe__state_set", json!({"key": "k", "value": "two"})).await;
    assert_eq!(call(&first, "probe__state_get", json!({"key": "k"})).await["value"], "two");
}

/// One skill's write transaction is open (held by another store, as by another process);
/// another skill's state read through its guest completes meanwhile.
#[tokio::test]
async fn a_skill_reads_state_while_another_write_is_open() {
    let ws = Workspace::new();
    let set = load(&ws, "  defaults: {}", "").await;
    call(&set, "probe__state_set", json!({"key": "k", "value": "v"})).await;
    let writer = StateStore::new(ws.path().join("state"));
    let (inside_tx, inside_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let holder = std::thread::spawn(move || {
        futures::executor::block_on(writer.update("skill-hostile", "big", move |_| {
            inside_tx.send(()).unwrap();
            release_rx.recv_timeout(Duration::from_secs(30)).unwrap();
            Ok(Some("x".repeat(1 << 20)))
        }))
    });
    inside_rx.recv_timeout(Duration::from_secs(10)).unwrap();
    let started = Instant::now();
    let got = call(&set, "probe__state_get", json!({"key": "k"})).await;
    let took = started.elapsed();
    assert!(!holder.is_finished(), "the write transaction is still open");
    release_tx.send(()).unwrap();
    holder.join().unwrap().unwrap();
    assert_eq!(got["value"], "v");
    println!("a guest's state get while another skill's write transaction is open: {took:?}");
    assert!(took < Duration::from_secs(2), "the read waited for the writer: {took:?}");
}
