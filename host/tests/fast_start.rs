//! A server answers at once whatever its compile cache holds: `skillhost mcp` with a Python
//! skill still to compile answers `initialize` and lists what is ready (a skill `skill
//! validate` compiled into the cache), then the Python skill's tools join and the client is told
//! (`notifications/tools/list_changed`); `skillhost run --adapter api` answers `/healthz` and
//! `/mcp` at once the same way, and the skill joins every adapter. Ordering, not timing: the
//! tests never rest on how long a compile takes.

mod support;

use serde_json::{Value, json};
use skillhost_tests::{Workspace, guests};
use support::raw::Raw;

fn tool_names(list: &Value) -> Vec<String> {
    let tools = list["result"]["tools"].as_array().unwrap_or_else(|| panic!("{list}"));
    tools.iter().map(|t| t["name"].as_str().unwrap().to_owned()).collect()
}

#[test]
fn initialize_is_answered_while_a_python_skill_compiles_and_its_tools_join_later() {
    let ws = Workspace::new();
    ws.add_skill("skills", "probe", guests::PROBE, "");
    // A cache of its own, empty, which `skill validate` fills for `probe` (`skill build`
    // does too: host/tests/authoring.rs).
    let yaml = "skills:\n  paths: [skills]\n  builtins: []\nsandbox:\n  cache_dir: cache\nstate:\n  filesystem: {path: state}\n";
    std::fs::write(ws.path().join("config.yaml"), yaml).unwrap();
    let built = support::skillhost(&ws, &["skill", "validate"], "");
    assert_eq!(built.code, 0, "{}", built.stderr);
    ws.add_skill("skills", "word_stats", guests::WORD_STATS, "");

    let mut raw = Raw::start(&ws);
    let init = raw.initialize("2025-11-25");
    assert!(init["result"]["capabilities"]["tools"]["listChanged"] == true, "{init}");
    // `probe` is in the cache: it serves at once; the Python skill compiles meanwhile.
    let (first, _) = raw.exchange("tools/list", json!({}));
    let names = tool_names(&first);
    assert!(names.contains(&"probe__echo".to_owned()), "{names:?}");
    assert!(!names.iter().any(|n| n.starts_with("word_stats__")), "still compiling: {names:?}");
    let (echo, _) = raw.call("probe__echo", json!({"ready": true}));
    assert_eq!(echo["result"]["isError"], false, "a ready skill answers meanwhile: {echo}");

    // Then the Python skill joins, and the client is told (however long the compile takes
    // on a busy machine).
    loop {
        let message = raw.next_within(std::time::Duration::from_secs(600));
        if message["method"] == "notifications/tools/list_changed" {
            break;
        }
    }
    let (after, _) = raw.exchange("tools/list", json!({}));
    let names = tool_names(&after);
    assert!(names.iter().any(|n| n.starts_with("word_stats__")), "{names:?}");
    assert!(names.contains(&"probe__echo".to_owned()), "{names:?}");
    let tool = names.iter().find(|n| n.starts_with("word_stats__")).unwrap().clone();
    let (called, _) = raw.call(&tool, json!({"text": "one two two"}));
    assert!(called["result"].is_object(), "the joined skill answers: {called}");
}

/// One JSON-RPC message to the API's `/mcp`; the session id it answered with and its messages.
async fn mcp_http(api: &support::api::ApiProcess, session: Option<&str>, body: Value) -> (Option<String>, Vec<Value>) {
    let client = reqwest::Client::new();
    let mut request = client
        .post(format!("{}/mcp", api.base()))
        .bearer_auth(support::api::TOKEN)
        .header("accept", "application/json, text/event-stream")
        .json(&body);
    if let Some(session) = session {
        request = request.header("mcp-session-id", session);
    }
    let response = request.send().await.unwrap();
    let session = response.headers().get("mcp-session-id").map(|v| v.to_str().unwrap().to_owned());
    let text = response.text().await.unwrap();
    let messages = match serde_json::from_str::<Value>(&text) {
        Ok(value) => vec![value],
        Err(_) => {
            text.lines().filter_map(|l| l.strip_prefix("data:")).filter_map(|d| serde_json::from_str(d).ok()).collect()
        }
    };
    (session, messages)
}

/// A workspace whose `probe` is in the compile cache (`skill validate` compiled it), served
/// by `run --adapter api`; what a test adds to `skills/` after this compiles after the start.
fn probe_in_the_cache() -> Workspace {
    let ws = Workspace::new();
    ws.add_skill("skills", "probe", guests::PROBE, "");
    let yaml = "skills:\n  paths: [skills]\n  builtins: []\nsandbox:\n  cache_dir: cache\nstate:\n  filesystem: {path: state}\n\
                llm:\n  provider: anthropic\n  model: m\n  max_tokens: 100\n  anthropic: {api_key: k, base_url: 'http://127.0.0.1:9'}\n";
    std::fs::write(ws.path().join("config.yaml"), yaml).unwrap();
    let built = support::skillhost(&ws, &["skill", "validate"], "");
    assert_eq!(built.code, 0, "{}", built.stderr);
    ws
}

/// An MCP session on `/mcp`: initialized, its id and the `initialize` answer.
async fn mcp_session(api: &support::api::ApiProcess) -> (String, Vec<Value>) {
    let client = json!({"name": "t", "version": "0"});
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": client}});
    let (session, answer) = mcp_http(api, None, init).await;
    let session = session.expect("a session id");
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    mcp_http(api, Some(&session), initialized).await;
    (session, answer)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_answers_healthz_and_mcp_while_a_python_skill_compiles_and_its_tools_join_later() {
    let ws = probe_in_the_cache();
    ws.add_skill("skills", "word_stats", guests::WORD_STATS, "");

    // Started: `/healthz` answers (the helper waits for it), while the Python skill compiles.
    let api = support::api::ApiProcess::serving(&ws).await;
    api.healthz().await;
    let ready = reqwest::get(format!("{}/readyz", api.base())).await.unwrap();
    assert_eq!(ready.status(), 503, "not ready while it compiles");
    assert_eq!(ready.json::<Value>().await.unwrap(), json!({"status": "compiling", "pending": 1}));
    let (session, answer) = mcp_session(&api).await;
    assert!(answer[0]["result"]["capabilities"]["tools"]["listChanged"] == true, "{answer:?}");
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}});
    let (_, first) = mcp_http(&api, Some(&session), list.clone()).await;
    let names = tool_names(&first[0]);
    assert!(names.contains(&"probe__echo".to_owned()), "{names:?}");
    assert!(!names.iter().any(|n| n.starts_with("word_stats__")), "still compiling: {names:?}");
    assert!(api.stderr().contains("compiling in the background: word_stats"), "{}", api.stderr());
    let echo = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "probe__echo", "arguments": {"ready": true}}});
    let (_, echoed) = mcp_http(&api, Some(&session), echo).await;
    assert_eq!(echoed[0]["result"]["isError"], false, "a ready skill answers meanwhile: {echoed:?}");

    // Then it joins: listed and answering on the same session, and the log says so.
    let started = std::time::Instant::now();
    let names = loop {
        let (_, now) = mcp_http(&api, Some(&session), list.clone()).await;
        let names = tool_names(&now[0]);
        if names.iter().any(|n| n.starts_with("word_stats__")) {
            break names;
        }
        assert!(started.elapsed() < std::time::Duration::from_secs(600), "never joined: {}", api.stderr());
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    };
    let tool = names.iter().find(|n| n.starts_with("word_stats__")).unwrap().clone();
    let call = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": tool, "arguments": {"text": "one two two"}}});
    let (_, called) = mcp_http(&api, Some(&session), call).await;
    assert!(called[0]["result"].is_object(), "the joined skill answers: {called:?}");
    assert!(api.stderr().contains("every skill is ready (word_stats joined)"), "{}", api.stderr());
    let ready = reqwest::get(format!("{}/readyz", api.base())).await.unwrap();
    assert_eq!(ready.status(), 200, "ready once it joined");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_skill_whose_startup_fails_once_compiled_is_reported_and_the_server_never_says_ready() {
    let ws = probe_in_the_cache();
    // Not in the cache: it compiles after the start, then its `startup` fails, which a start
    // that waited for it would have refused to serve.
    ws.add_skill("skills", "startup_fail", guests::STARTUP_FAIL, "");
    let api = support::api::ApiProcess::serving(&ws).await;
    let started = std::time::Instant::now();
    while !api.stderr().contains("loading the compiled skills failed") {
        assert!(started.elapsed() < support::PROCESS_LIMIT, "no error: {}", api.stderr());
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let stderr = api.stderr();
    assert!(stderr.contains("missing api_key in skills.config.startup_fail"), "the skill's message: {stderr}");
    assert!(!stderr.contains("every skill is ready"), "{stderr}");
    let ready = reqwest::get(format!("{}/readyz", api.base())).await.unwrap();
    assert_eq!(ready.status(), 503, "a load balancer keeps away");
    // The skills that loaded still serve.
    let (session, _) = mcp_session(&api).await;
    let echo =
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "probe__echo", "arguments": {}}});
    let (_, echoed) = mcp_http(&api, Some(&session), echo).await;
    assert_eq!(echoed[0]["result"]["isError"], false, "{echoed:?}");
}
