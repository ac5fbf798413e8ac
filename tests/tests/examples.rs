//! The example skills in `skills/`, built from source, run through the real host. This is
//! also the SDK's end-to-end test: every Rust skill here is written against `skill-sdk`.

use serde_json::{Value, json};
use skillhost::engine::gate;
use skillhost::skills::SkillSet;
use skillhost::tools::Level;
use skillhost_tests::{Workspace, ctx, guests, http_server, json as parse};
use std::collections::BTreeMap;

fn manifest(dir: &str) -> String {
    let path = format!("{}/../skills/{dir}/skill.toml", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(path).unwrap()
}

async fn examples(extra_yaml: &str) -> (Workspace, SkillSet) {
    let ws = Workspace::new();
    for (name, wasm) in [
        ("http_checker", guests::HTTP_CHECKER),
        ("memory", guests::MEMORY),
        ("services", guests::SERVICES),
        ("word_stats", guests::WORD_STATS),
    ] {
        ws.add_skill("skills", name, wasm, &manifest(name));
    }
    let yaml = format!(
        "skills:\n  paths: [skills]\n{extra_yaml}\nlearning:\n  memory:\n    filesystem:\n      path: mem\nstate:\n  filesystem:\n    path: state\n"
    );
    let set = ws.load(&yaml).await;
    assert!(set.problems.is_empty(), "{:?}", set.problems);
    (ws, set)
}

async fn call(set: &SkillSet, tool: &str, input: Value) -> (Option<bool>, Value) {
    let (skill, spec) = set.find_tool(tool).unwrap_or_else(|| panic!("no {tool}"));
    let out = skill.call(&spec.name, &input, &ctx()).await.unwrap_or_else(|e| panic!("{tool}: {e}"));
    (out.value.succeeded, parse(&out.value.content))
}

#[tokio::test]
async fn http_checker_reports_status_time_and_health() {
    let up = http_server(200, "ok");
    let down = http_server(503, "down");
    let grants = "  grants:\n    http_checker:\n      http_hosts: [\"127.0.0.1\"]";
    let (_ws, set) = examples(grants).await;
    let (ok, out) =
        call(&set, "http_checker__check_url", json!({"url": format!("http://127.0.0.1:{up}/health")})).await;
    assert_eq!(ok, Some(true), "{out}");
    assert_eq!((out["status"].as_u64(), out["healthy"].as_bool()), (Some(200), Some(true)));
    assert!(out["response_time_ms"].is_u64());
    let (ok, out) = call(&set, "http_checker__check_url", json!({"url": format!("http://127.0.0.1:{down}/")})).await;
    assert_eq!((ok, out["status"].as_u64(), out["healthy"].as_bool()), (Some(true), Some(503), Some(false)));
    // A host the operator did not grant: a failed result naming why, not a crash.
    let (ok, out) = call(&set, "http_checker__check_url", json!({"url": "http://example.invalid/"})).await;
    assert_eq!((ok, out["healthy"].as_bool()), (Some(false), Some(false)), "{out}");
    assert!(out["error"].as_str().unwrap().contains("not allowed"), "{out}");
    // Nothing listening: a connection error.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let (ok, out) = call(&set, "http_checker__check_url", json!({"url": format!("http://127.0.0.1:{closed}/")})).await;
    assert_eq!(ok, Some(false), "{out}");
    assert!(set.find_tool("http_checker__check_url").unwrap().1.expose_result);
}

#[tokio::test]
async fn memory_skill_reads_writes_searches() {
    let grants = "  grants:\n    memory:\n      memory: true";
    let (ws, set) = examples(grants).await;
    let (ok, _) =
        call(&set, "memory__memory_write", json!({"path": "MEMORY.md", "content": "db-1 is the primary\n"})).await;
    assert_eq!(ok, Some(true));
    call(
        &set,
        "memory__memory_write",
        json!({"path": "MEMORY.md", "content": "db-2 is the replica\n", "mode": "append"}),
    )
    .await;
    assert_eq!(
        std::fs::read_to_string(ws.path().join("mem/MEMORY.md")).unwrap(),
        "db-1 is the primary\ndb-2 is the replica\n"
    );
    let (_, read) = call(&set, "memory__memory_read", json!({"path": "MEMORY.md"})).await;
    assert!(read.to_string().contains("db-2 is the replica"), "{read}");
    let (_, found) = call(&set, "memory__memory_search", json!({"query": "REPLICA"})).await;
    assert!(found.to_string().contains("MEMORY.md"), "{found}");
    let (ok, out) = call(&set, "memory__memory_read", json!({"path": "../config.yaml"})).await;
    assert_eq!(ok, Some(false), "{out}");
}

#[tokio::test]
async fn memory_skill_without_grant_is_told_so() {
    let (_ws, set) = examples("").await;
    let (ok, out) = call(&set, "memory__memory_read", json!({"path": "MEMORY.md"})).await;
    assert_eq!(ok, Some(false));
    assert!(out.to_string().to_lowercase().contains("denied") || out.to_string().contains("not granted"), "{out}");
}

#[tokio::test]
async fn services_resolve_human_by_environment() {
    let port = http_server(200, "ok");
    let extra = format!(
        "  config:\n    services:\n      services:\n        checkout:\n          url: http://127.0.0.1:{port}/health\n  grants:\n    services:\n      http_hosts: [\"127.0.0.1\"]"
    );
    let (_ws, set) = examples(&extra).await;
    let (_, listed) = call(&set, "services__list_services", json!({})).await;
    assert!(listed.to_string().contains("checkout"), "{listed}");
    let (ok, health) = call(&set, "services__check_health", json!({"service": "checkout"})).await;
    assert_eq!(ok, Some(true), "{health}");
    assert!(health.to_string().contains("200"), "{health}");

    let (skill, restart) = set.find_tool("services__restart_service").unwrap();
    let none = BTreeMap::new();
    let prod = json!({"service": "checkout", "environment": "production"});
    let staging = json!({"service": "checkout", "environment": "staging"});
    assert_eq!(gate::resolve(skill, restart, &prod, &ctx(), &none).await, Level::Approve);
    assert_eq!(gate::resolve(skill, restart, &staging, &ctx(), &none).await, Level::Auto);
    let (_, first) = call(&set, "services__restart_service", staging.clone()).await;
    let (_, second) = call(&set, "services__restart_service", staging).await;
    assert_ne!(first, second, "restarts are counted in state: {first} {second}");
}

#[tokio::test]
async fn python_skill_runs_through_the_same_contract() {
    let (_ws, set) = examples("").await;
    let (skill, _) = set.find_tool("word_stats__count_words").expect("the Python skill's tool");
    let (component, _) = skill.component().unwrap();
    assert_eq!(component.hooks().names(), ["tool-target"]);
    let (_, out) = call(&set, "word_stats__count_words", json!({"text": "the cat saw the dog\nthe end"})).await;
    assert_eq!(out["words"], 7, "{out}");
    assert_eq!(out["lines"], 2, "{out}");
    assert!(out.to_string().contains("the"), "{out}");
}
