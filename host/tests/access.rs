//! Who may do what on `skillhost run --adapter api`, played as the other party through the
//! binary: named tokens with scopes (`ui.tokens`) each refused what they were not given, the
//! decision's record naming the token, `Host` and `Origin` checks on every `/api` route, the
//! routes that need a token answering 503 without one, and `/mcp` tasks kept per token.

mod support;

use serde_json::{Value, json};
use skillhost_tests::api_client::Sse;
use skillhost_tests::llm_server::{Answer, LlmServer};
use skillhost_tests::{Workspace, guests};
use std::time::Duration;
use support::api::ApiProcess;

/// `probe` with its memory granted, `probe__memory_write` asking for approval, named tokens
/// (beside the process's `SKILLHOST_UI_TOKEN`, which may do everything).
fn workspace(llm: &LlmServer) -> Workspace {
    let ws = Workspace::new();
    ws.add_skill("skills", "probe", guests::PROBE, "[capabilities]\nmemory = true\n");
    let config = format!(
        "skills:\n  paths: [skills]\n  builtins: []\n  grants:\n    probe: {{memory: true}}\n\
         learning:\n  approval_auto_promote: 0\n  memory:\n    filesystem: {{path: memory}}\n\
         state:\n  filesystem: {{path: state}}\nhuman:\n  overrides:\n    probe__memory_write: approve\n\
         llm:\n  provider: anthropic\n  model: m\n  max_tokens: 100\n  anthropic: {{api_key: k, base_url: '{}'}}\n\
         ui:\n  tokens:\n\
         \x20   - {{name: ci, token: ci-token-0001, scopes: [trigger, read]}}\n\
         \x20   - {{name: oncall, token: oncall-token-01, scopes: [read, decide]}}\n\
         \x20   - {{name: ops, token: ops-token-0001, scopes: [admin]}}\n\
         \x20   - {{name: bot-a, token: mcp-token-aaaa, scopes: [mcp]}}\n\
         \x20   - {{name: bot-b, token: mcp-token-bbbb, scopes: [mcp]}}\n",
        llm.url()
    );
    std::fs::write(ws.path().join("config.yaml"), config).unwrap();
    ws
}

/// A request to `base` with `token` (if any) and extra `headers`: its status and JSON body.
async fn send(
    method: reqwest::Method,
    url: String,
    token: Option<&str>,
    headers: &[(&str, &str)],
    body: Option<Value>,
) -> (u16, Value) {
    let mut request = reqwest::Client::new().request(method, url).timeout(Duration::from_secs(30));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

async fn get(api: &ApiProcess, path: &str, token: &str) -> (u16, Value) {
    send(reqwest::Method::GET, format!("{}{path}", api.base()), Some(token), &[], None).await
}

async fn post(api: &ApiProcess, path: &str, token: &str, body: Value) -> (u16, Value) {
    send(reqwest::Method::POST, format!("{}{path}", api.base()), Some(token), &[], Some(body)).await
}

/// A `method` request to `/mcp` at 2026-07-28 with `token`, from a client that polls tasks.
async fn mcp(api: &ApiProcess, token: &str, method: &str, params: Value) -> (u16, Value) {
    let capabilities = json!({"elicitation": {"form": {}}, "extensions": {"io.modelcontextprotocol/tasks": {}}});
    support::api::mcp_rpc(api.base(), token, (1, method), params, capabilities).await
}

/// Each named token does what its scopes say and is refused the rest (403 naming the scope):
/// `ci` starts a run and reads it but cannot decide its approval; `oncall` decides it (the
/// record says `api` and names the token); `ops` reloads but reads nothing; the MCP tokens
/// reach `/mcp` and nothing else, and one's task is not found with the other's token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_token_does_what_its_scopes_say_and_nothing_more() {
    let append = json!({"path": "runs.txt", "content": "x", "mode": "append"});
    let llm = LlmServer::start(vec![
        Answer::default().call("w1", "probe__memory_write", append).into(),
        Answer::text(&["Written."]).into(),
    ])
    .await;
    let ws = workspace(&llm);
    let api = ApiProcess::start(&ws).await;

    let url = format!("{}/api/trigger?wait=1&stream=approval-v1", api.base());
    let body = json!({"message": "append", "channel_id": "c1"});
    let response = reqwest::Client::new().post(url).bearer_auth("ci-token-0001").json(&body).send().await.unwrap();
    assert_eq!(response.status(), 200, "ci may trigger: {}", api.stderr());
    let mut sse = Sse::new(response);
    let asked = sse.until("approval_requested").await.last().unwrap().data.clone();
    let id = asked["approval_id"].as_str().unwrap().to_owned();
    let (status, listed) = get(&api, "/api/approvals", "ci-token-0001").await;
    assert_eq!(
        (status, listed["approvals"][0]["approval_id"].as_str()),
        (200, Some(id.as_str())),
        "ci may read: {listed}"
    );
    let decision = format!("/api/approvals/{id}/decision");
    let (status, refused) = post(&api, &decision, "ci-token-0001", json!({"approved": true})).await;
    assert_eq!(status, 403, "{refused}");
    assert!(refused["error"].as_str().unwrap().contains("`decide`"), "names the scope: {refused}");
    for (token, path) in
        [("ops-token-0001", "/api/approvals"), ("mcp-token-aaaa", "/api/runs"), ("oncall-token-01", "/metrics")]
    {
        let (status, refused) = get(&api, path, token).await;
        let expected = if path == "/metrics" { 200 } else { 403 };
        assert_eq!(status, expected, "{token} on {path}: {refused}");
    }
    let (status, refused) = post(&api, "/api/trigger", "oncall-token-01", json!({"message": "hi"})).await;
    assert_eq!(status, 403, "oncall may not start runs: {refused}");
    assert_eq!(std::fs::read_to_string(ws.path().join("memory/runs.txt")).unwrap_or_default(), "");

    let (status, decided) = post(&api, &decision, "oncall-token-01", json!({"approved": true})).await;
    assert_eq!(status, 200, "{decided}");
    assert_eq!((decided["decided_by"].clone(), decided["token"].clone()), (json!("api"), json!("oncall")), "{decided}");
    let (_, read) = get(&api, &format!("/api/approvals/{id}"), "ci-token-0001").await;
    assert_eq!(read["token"], "oncall", "the record keeps the token's name: {read}");
    sse.rest().await;
    assert_eq!(std::fs::read_to_string(ws.path().join("memory/runs.txt")).unwrap(), "x", "the call ran once");

    for token in ["oncall-token-01", "ci-token-0001", "mcp-token-aaaa"] {
        let (status, refused) = post(&api, "/api/skills/reload", token, json!({})).await;
        assert_eq!(status, 403, "{token} may not reload: {refused}");
        assert!(refused["error"].as_str().unwrap().contains("`admin`"), "{refused}");
    }
    let (status, reloaded) = post(&api, "/api/skills/reload", "ops-token-0001", json!({})).await;
    assert_eq!((status, reloaded["reloaded"].clone()), (200, json!(true)), "ops reloads: {reloaded}");

    // `/mcp`: the MCP tokens only; a task is its token's.
    let (status, refused) = mcp(&api, "ci-token-0001", "tools/list", json!({})).await;
    assert_eq!(status, 403, "ci may not use /mcp: {refused}");
    let slow = json!({"name": "probe__task", "arguments": {"ms": 50, "mark": "a"}});
    let (status, created) = mcp(&api, "mcp-token-aaaa", "tools/call", slow).await;
    assert_eq!((status, created["result"]["resultType"].clone()), (200, json!("task")), "{created}");
    let task = json!({"taskId": created["result"]["taskId"]});
    for method in ["tasks/get", "tasks/cancel", "tasks/update"] {
        let mut params = task.clone();
        if method == "tasks/update" {
            params["inputResponses"] = json!({});
        }
        let (_, foreign) = mcp(&api, "mcp-token-bbbb", method, params).await;
        assert_eq!(foreign["error"]["code"], -32602, "another token's task is not found by {method}: {foreign}");
    }
    let (_, own) = mcp(&api, "mcp-token-aaaa", "tasks/get", task.clone()).await;
    assert!(own["result"]["status"].is_string(), "its own token reads it: {own}");
}

/// A page on another site cannot drive the API through a visitor's browser, nor a
/// rebinding name reach it: a request with a foreign `Origin` or `Host` is refused (403)
/// before anything runs, with the right token; one without an `Origin` (not from a browser)
/// or with a loopback one is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cross_origin_or_foreign_host_request_is_refused() {
    let llm = LlmServer::start(vec![Answer::text(&["Hello."]).into()]).await;
    let ws = workspace(&llm);
    let api = ApiProcess::start(&ws).await;
    let body = json!({"message": "hi", "channel_id": "c1"});
    let url = format!("{}/api/trigger?wait=true", api.base());
    let token = Some(support::api::TOKEN);
    for headers in [[("origin", "http://evil.example")], [("host", "evil.example")], [("origin", "null")]] {
        let (status, refused) = send(reqwest::Method::POST, url.clone(), token, &headers, Some(body.clone())).await;
        assert_eq!(status, 403, "{headers:?}: {refused}");
    }
    let (status, _) = send(
        reqwest::Method::GET,
        format!("{}/api/runs", api.base()),
        token,
        &[("origin", "http://evil.example")],
        None,
    )
    .await;
    assert_eq!(status, 403, "reads too");
    assert!(llm.requests().is_empty(), "nothing ran");
    let (status, answered) = send(reqwest::Method::POST, url.clone(), token, &[], Some(body.clone())).await;
    assert_eq!(status, 200, "{answered}");
    let local = [("origin", "http://localhost:3000")];
    assert_eq!(send(reqwest::Method::GET, format!("{}/api/runs", api.base()), token, &local, None).await.0, 200);
}

/// Without any token (the server then listens on loopback only) the routes that read,
/// decide or reload answer 503 like the interactive ones, `/metrics` too unless public:
/// anyone on the machine could otherwise read every run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_token_reads_and_reload_answer_503() {
    let ws = Workspace::new();
    ws.add_skill("skills", "probe", guests::PROBE, "");
    let config = "skills:\n  paths: [skills]\n  builtins: []\nstate:\n  filesystem: {path: state}\n\
        llm:\n  provider: anthropic\n  model: m\n  anthropic: {api_key: k, base_url: 'http://127.0.0.1:9'}\n";
    std::fs::write(ws.path().join("config.yaml"), config).unwrap();
    let api = ApiProcess::start_with(&ws, &[("SKILLHOST_UI_TOKEN", "")]).await;
    assert!(api.stderr().contains("every other /api route answers 503"), "{}", api.stderr());
    for path in ["/api/runs", "/api/approvals", "/api/skills", "/api/mcp", "/api/activity", "/metrics"] {
        let (status, said) = send(reqwest::Method::GET, format!("{}{path}", api.base()), None, &[], None).await;
        assert_eq!(status, 503, "{path}: {said}");
    }
    let url = format!("{}/api/skills/reload", api.base());
    let (status, said) = send(reqwest::Method::POST, url, None, &[], Some(json!({}))).await;
    assert_eq!(status, 503, "{said}");
    assert!(said["error"].as_str().unwrap().contains("ui.tokens"), "says what to set: {said}");
}
