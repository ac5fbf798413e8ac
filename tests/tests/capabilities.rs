//! Deny by default: nothing reaches a guest unless its manifest asks and the operator grants.

use serde_json::{Value, json};
use skillhost::sandbox::{CallContext, RouteAttributes};
use skillhost::skills::SkillSet;
use skillhost_tests::{Workspace, ctx, guests, http_server, json as parse};

const PROBE_MANIFEST: &str = "[capabilities]\nmemory = true\nhttp_hosts = [\"127.0.0.1\"]\n";

async fn probe(grants: &str) -> (Workspace, SkillSet) {
    let ws = Workspace::new();
    ws.add_skill("skills", "probe", guests::PROBE, PROBE_MANIFEST);
    let yaml = format!(
        "skills:\n  paths: [skills]\n  config:\n    probe: {{answer: 42}}\n  grants:\n{grants}\nlearning:\n  memory:\n    filesystem:\n      path: mem\nstate:\n  filesystem:\n    path: state\n"
    );
    let set = ws.load(&yaml).await;
    assert!(set.problems.is_empty(), "{:?}", set.problems);
    (ws, set)
}

async fn call_with(set: &SkillSet, tool: &str, input: Value, caller: &CallContext) -> (Option<bool>, Value) {
    let (skill, spec) = set.find_tool(tool).unwrap();
    let out = skill.call(&spec.name, &input, caller).await.unwrap_or_else(|e| panic!("{tool}: {e}"));
    (out.value.succeeded, parse(&out.value.content))
}

async fn call(set: &SkillSet, tool: &str, input: Value) -> (Option<bool>, Value) {
    call_with(set, tool, input, &ctx()).await
}

const ALL_GRANTED: &str = "    probe:\n      memory: true\n      http_hosts: [\"127.0.0.1\"]";

#[tokio::test]
async fn wasi_gives_no_env_no_args_no_files() {
    // SAFETY: set before any thread of this test reads the environment.
    unsafe { std::env::set_var("SKILLHOST_TEST_SECRET", "hunter2") };
    let (_ws, set) = probe(ALL_GRANTED).await;
    let (_, env) = call(&set, "probe__env", json!({})).await;
    assert_eq!(env["vars"], json!([]));
    let (_, args) = call(&set, "probe__args", json!({})).await;
    assert!(args["args"].as_array().unwrap().len() <= 1, "{args}");
    for path in ["/etc/passwd", "Cargo.toml", "."] {
        let (ok, out) = call(&set, "probe__read_file", json!({"path": path})).await;
        assert_eq!(ok, Some(false), "{path}: {out}");
    }
}

#[tokio::test]
async fn memory_is_confined_to_its_root() {
    let (ws, set) = probe(ALL_GRANTED).await;
    let (ok, _) = call(&set, "probe__memory_write", json!({"path": "notes/a.md", "content": "disk full\n"})).await;
    assert_eq!(ok, Some(true));
    assert_eq!(std::fs::read_to_string(ws.path().join("mem/notes/a.md")).unwrap(), "disk full\n");
    let (_, read) = call(&set, "probe__memory_read", json!({"path": "notes/a.md"})).await;
    assert_eq!(read["content"], "disk full\n");
    let (_, hits) = call(&set, "probe__memory_search", json!({"query": "DISK"})).await;
    assert_eq!(hits["hits"][0]["path"], "notes/a.md");

    std::fs::write(ws.path().join("outside.txt"), "secret").unwrap();
    std::os::unix::fs::symlink(ws.path().join("outside.txt"), ws.path().join("mem/link")).unwrap();
    std::os::unix::fs::symlink(ws.path(), ws.path().join("mem/dirlink")).unwrap();
    for path in ["../outside.txt", "/etc/passwd", "notes/../../outside.txt", "link", "dirlink/outside.txt"] {
        let (ok, out) = call(&set, "probe__memory_read", json!({"path": path})).await;
        assert_eq!((ok, out["error"].as_str()), (Some(false), Some("invalid-path")), "{path}: {out}");
        let (ok, out) = call(&set, "probe__memory_write", json!({"path": path, "content": "x"})).await;
        assert_eq!((ok, out["error"].as_str()), (Some(false), Some("invalid-path")), "{path}: {out}");
    }
    assert_eq!(std::fs::read_to_string(ws.path().join("outside.txt")).unwrap(), "secret");
}

#[tokio::test]
async fn memory_needs_the_grant() {
    let (_ws, set) = probe("    probe:\n      http_hosts: [\"127.0.0.1\"]").await;
    let (ok, out) = call(&set, "probe__memory_read", json!({"path": "a.md"})).await;
    assert_eq!((ok, out["error"].as_str()), (Some(false), Some("denied")), "{out}");
}

#[tokio::test]
async fn http_needs_manifest_and_grant() {
    let port = http_server(200, "pong");
    let url = format!("http://127.0.0.1:{port}/ping");
    let (_ws, set) = probe(ALL_GRANTED).await;
    let (ok, out) = call(&set, "probe__http_get", json!({"url": url})).await;
    assert_eq!(ok, Some(true), "{out}");
    assert_eq!((out["status"].as_u64(), out["body"].as_str()), (Some(200), Some("pong")));

    // Asked for in the manifest, not granted.
    let (_ws, set) = probe("    probe:\n      memory: true").await;
    let (ok, out) = call(&set, "probe__http_get", json!({"url": url})).await;
    assert_eq!((ok, out["error"].as_str()), (Some(false), Some("denied")), "{out}");
    assert!(out["detail"].as_str().unwrap().contains("skills.grants.probe.http_hosts"));

    // Granted, but the manifest asks only for 127.0.0.1.
    let (_ws, set) = probe("    probe:\n      http_hosts: [\"*\"]").await;
    let (ok, out) = call(&set, "probe__http_get", json!({"url": format!("http://localhost:{port}/")})).await;
    assert_eq!((ok, out["error"].as_str()), (Some(false), Some("denied")), "{out}");
    let (ok, out) = call(&set, "probe__http_get", json!({"url": "file:///etc/passwd"})).await;
    assert_eq!((ok, out["error"].as_str()), (Some(false), Some("invalid-url")), "{out}");
}

#[tokio::test]
async fn state_persists_and_is_scoped_to_the_skill() {
    let ws = Workspace::new();
    ws.add_skill("skills", "probe", guests::PROBE, PROBE_MANIFEST);
    ws.add_skill("skills", "other", guests::PROBE, PROBE_MANIFEST);
    let yaml = "skills:\n  paths: [skills]\nstate:\n  filesystem:\n    path: state\n";
    let set = ws.load(yaml).await;
    call(&set, "probe__state_set", json!({"key": "k", "value": "v1"})).await;
    let (_, other) = call(&set, "other__state_get", json!({"key": "k"})).await;
    assert_eq!(other["value"], Value::Null, "another skill must not see the key");
    let reloaded = ws.load(yaml).await;
    let (_, got) = call(&reloaded, "probe__state_get", json!({"key": "k"})).await;
    assert_eq!(got["value"], "v1");
    let (_, keys) = call(&reloaded, "probe__state_keys", json!({})).await;
    assert_eq!(keys["keys"], json!(["k"]));
}

#[tokio::test]
async fn context_carries_config_channel_user_and_route() {
    let (_ws, set) = probe(ALL_GRANTED).await;
    let turn = RouteAttributes::default();
    let caller = CallContext {
        user_id: Some("U7".into()),
        route: turn.clone(),
        config: json!({"ignored": true}),
        user_message: Some("find the logs".into()),
        ..CallContext::standalone("C42")
    };
    call_with(&set, "probe__route_set", json!({"key": "route", "value": "search"}), &caller).await;
    let (_, ctx_seen) = call_with(&set, "probe__ctx", json!({}), &caller).await;
    assert_eq!(ctx_seen["config"], json!({"answer": 42}), "the skill's own config block, not the caller's");
    assert_eq!((ctx_seen["channel_id"].as_str(), ctx_seen["user_id"].as_str()), (Some("C42"), Some("U7")));
    assert_eq!(ctx_seen["route"], json!([["route", "search"]]), "later calls of the turn see the attribute");
    assert_eq!(ctx_seen["user_message"], "find the logs");
    let (_, fresh) = call(&set, "probe__route_get", json!({})).await;
    assert_eq!(fresh["route"], json!([]), "another turn does not");
}

#[tokio::test]
async fn mcp_import_reports_not_configured() {
    let (_ws, set) = probe(ALL_GRANTED).await;
    let (ok, out) = call(&set, "probe__mcp_call", json!({"server": "linear", "tool": "list_issues"})).await;
    assert_eq!((ok, out["error"].as_str()), (Some(false), Some("not-configured")), "{out}");
}

#[tokio::test]
async fn no_state_leaks_between_calls() {
    let (_ws, set) = probe(ALL_GRANTED).await;
    // A fresh instance per call: a guest global incremented by one call is gone in the next.
    for _ in 0..3 {
        let (_, out) = call(&set, "probe__counter", json!({})).await;
        assert_eq!(out["calls"], 1, "guest memory carried over between calls");
    }
    // Concurrent callers each get their own answer.
    let set = std::sync::Arc::new(set);
    let tasks: Vec<_> = (0..32)
        .map(|i| {
            let set = set.clone();
            tokio::spawn(async move { (i, call(&set, "probe__echo", json!({"i": i})).await.1) })
        })
        .collect();
    for task in tasks {
        let (i, out) = task.await.unwrap();
        assert_eq!(out, json!({"i": i}));
    }
}

#[tokio::test]
async fn a_hanging_server_is_bounded_by_the_call_deadline() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let held: Vec<_> = listener.incoming().take(1).collect();
        std::thread::sleep(std::time::Duration::from_secs(30));
        drop(held);
    });
    let ws = Workspace::new();
    ws.add_skill("skills", "probe", guests::PROBE, &format!("{PROBE_MANIFEST}[limits]\ntimeout_ms = 500\n"));
    let set = ws.load(&format!("skills:\n  paths: [skills]\n  grants:\n{ALL_GRANTED}\n")).await;
    let (skill, spec) = set.find_tool("probe__http_get").unwrap();
    let started = std::time::Instant::now();
    let result = skill.call(&spec.name, &json!({"url": format!("http://127.0.0.1:{port}/")}), &ctx()).await;
    let elapsed = started.elapsed();
    assert!(elapsed < std::time::Duration::from_millis(500 + 750), "took {elapsed:?}");
    match result {
        Ok(out) => assert!(out.value.content.contains("timeout"), "{}", out.value.content),
        Err(e) => assert_eq!(e.kind(), "deadline"),
    }
}
