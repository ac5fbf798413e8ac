//! mithai `tools.py` skills, unchanged, through the real host: the reference's own examples
//! (`services` with `resolve_human`, a memory-using `notes`, the MCP-owning `triage` with
//! `before_mcp_call`) and `sandbox_limits`, which does what a sandbox cannot. Each is a folder
//! of `tests/fixtures/mithai/` built by `build.rs` with the mithai shim, as `skill build` does.

use serde_json::{Value, json};
use skillhost::engine::{EngineEvent, NonInteractive, TurnRequest, gate};
use skillhost::skills::contract::Human;
use skillhost::skills::{LoadMode, SkillSet};
use skillhost::tools::Level;
use skillhost_tests::llm_server::{Answer, LlmServer};
use skillhost_tests::{Workspace, ctx, guests, http_server, json as parse};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/mithai").join(name)
}

/// The 1-based line of `tools.py` holding `needle`: messages must name the author's line.
fn line_of(name: &str, needle: &str) -> usize {
    let source = std::fs::read_to_string(fixture(name).join("tools.py")).unwrap();
    source.lines().position(|l| l.contains(needle)).unwrap_or_else(|| panic!("no {needle} in {name}")) + 1
}

/// A workspace with the fixture's own folder files (prompt.md, skill.toml) and its component.
fn add(ws: &Workspace, name: &str, wasm: &str) {
    let dir = fixture(name);
    let manifest = std::fs::read_to_string(dir.join("skill.toml")).unwrap_or_default();
    let added = ws.add_skill("skills", name, wasm, &manifest);
    std::fs::copy(dir.join("prompt.md"), added.join("prompt.md")).unwrap();
}

const BASE: &str =
    "  builtins: []\nlearning:\n  memory:\n    filesystem: {path: mem}\nstate:\n  filesystem: {path: state}\n";

async fn load(ws: &Workspace, skills_extra: &str, mode: LoadMode) -> SkillSet {
    let yaml = format!("skills:\n  paths: [skills]\n{skills_extra}{BASE}");
    let set = ws.loader(&yaml).load_all(mode).await.unwrap_or_else(|e| panic!("load: {e}"));
    assert!(set.problems.is_empty(), "{:?}", set.problems);
    set
}

async fn call(set: &SkillSet, tool: &str, input: Value) -> (Option<bool>, Value) {
    let (skill, spec) = set.find_tool(tool).unwrap_or_else(|| panic!("no {tool}"));
    let out = skill.call(&spec.name, &input, &ctx()).await.unwrap_or_else(|e| panic!("{tool}: {e}"));
    (out.value.succeeded, parse(&out.value.content))
}

#[tokio::test]
async fn services_runs_with_its_schemas_results_and_resolve_human() {
    let up = http_server(200, "ok");
    let down = http_server(503, "down");
    let ws = Workspace::new();
    add(&ws, "services", guests::MITHAI_SERVICES);
    let extra = format!(
        "  config:\n    services:\n      services: {{checkout: 'http://127.0.0.1:{up}/health'}}\n  grants:\n    services:\n      http_hosts: ['127.0.0.1']\n"
    );
    let set = load(&ws, &extra, LoadMode::Inspect).await;
    let skill = &set.skills["services"];
    let (component, _) = skill.component().unwrap();
    assert_eq!(component.hooks().names(), ["resolve-human"], "exactly the hooks tools.py defines");

    let (_, listed) = call(&set, "services__list_services", json!({})).await;
    assert_eq!(listed["checkout"], format!("http://127.0.0.1:{up}/health"), "ctx['config'] is the skill's block");
    let (_, check) = set.find_tool("services__check_health").unwrap();
    assert!(check.expose_result, "expose_result is carried over");
    let (ok, health) = call(&set, "services__check_health", json!({"url": format!("http://127.0.0.1:{up}/")})).await;
    assert_eq!((ok, health["status"].as_u64(), health["healthy"].as_bool()), (Some(true), Some(200), Some(true)));
    let (ok, health) = call(&set, "services__check_health", json!({"url": format!("http://127.0.0.1:{down}/")})).await;
    assert_eq!((ok, health["status"].as_u64()), (Some(true), Some(503)), "urllib's HTTPError, as urllib raises it");
    // urllib.request.urlopen goes through the host's http import: an ungranted host is refused.
    let (ok, refused) = call(&set, "services__check_health", json!({"url": "http://example.invalid/"})).await;
    assert_eq!(ok, Some(false), "{refused}");
    assert!(refused["error"].as_str().unwrap().contains("not allowed"), "{refused}");

    let (skill, restart) = set.find_tool("services__restart_service").unwrap();
    assert_eq!(restart.human, Human::Dynamic, "human: dynamic");
    let none = BTreeMap::new();
    let prod = json!({"service": "checkout", "environment": "production"});
    let staging = json!({"service": "checkout", "environment": "staging"});
    assert_eq!(gate::resolve(skill, restart, &prod, &ctx(), &none).await, Level::Approve);
    assert_eq!(gate::resolve(skill, restart, &staging, &ctx(), &none).await, Level::Auto);
    let (_, first) = call(&set, "services__restart_service", staging.clone()).await;
    let (_, second) = call(&set, "services__restart_service", staging).await;
    assert_eq!((first["restarts"].as_u64(), second["restarts"].as_u64()), (Some(1), Some(2)), "ctx['state'] persists");
}

#[tokio::test]
async fn notes_uses_memory_state_and_logger_from_ctx() {
    let ws = Workspace::new();
    add(&ws, "notes", guests::MITHAI_NOTES);
    let set = load(&ws, "  grants:\n    notes:\n      memory: true\n", LoadMode::Inspect).await;
    for summary in ["pod OOMKilled at 14:23", "disk full on db-2"] {
        let (_, out) = call(&set, "notes__record_incident", json!({"summary": summary})).await;
        assert_eq!(out["recorded"], true, "{out}");
    }
    let written = std::fs::read_to_string(ws.path().join("mem/incidents.md")).unwrap();
    assert_eq!(written, "- pod OOMKilled at 14:23\n- disk full on db-2\n", "write(append=True) appends");
    call(&set, "notes__approve_runbook", json!({"runbook": "restart.md", "by": "ada"})).await;
    let (_, recalled) = call(&set, "notes__recall_incidents", json!({})).await;
    assert_eq!(recalled["incidents"].as_array().unwrap().len(), 2, "{recalled}");
    assert_eq!(recalled["approved"], json!(["restart.md"]), "read_json reads what write stored: {recalled}");
    let (_, checked) = call(&set, "notes__last_checked", json!({})).await;
    assert_eq!(checked["last_checked"], json!({"by": null, "channel": "test"}), "state keeps JSON values: {checked}");
    assert_eq!(set.find_tool("notes__approve_runbook").unwrap().1.human, Human::Approve);

    // Without the operator's grant ctx["memory"] is false, as the reference's `if memory:` expects.
    let ungranted = Workspace::new();
    add(&ungranted, "notes", guests::MITHAI_NOTES);
    let set = load(&ungranted, "", LoadMode::Inspect).await;
    let (_, out) = call(&set, "notes__record_incident", json!({"summary": "x"})).await;
    assert_eq!(out["error"], "memory is not configured for this skill", "{out}");
    assert!(!ungranted.path().join("mem/incidents.md").exists());
}

/// The `mcp_servers` entry for the reference's `observability` server: `tests/mcp/obs_server.py`.
fn observability() -> String {
    let mcp = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("mcp");
    let pylib = mcp.join("pylib");
    assert!(
        pylib.exists(),
        "install the MCP test server's SDK: python3 -m pip install --target tests/mcp/pylib mcp (as .ci/run does)"
    );
    format!(
        "mcp_servers:\n  observability:\n    transport: stdio\n    command: python3\n    args: ['{}']\n    env: {{PYTHONPATH: '{}'}}\n    tools: [list_things, get_logs, empty]\n",
        mcp.join("obs_server.py").display(),
        pylib.display()
    )
}

#[tokio::test]
async fn triage_owns_its_server_policy_through_a_turn() {
    let ws = Workspace::new();
    add(&ws, "triage", guests::MITHAI_TRIAGE);
    let classify = Answer::text(&["Classifying."]).call("c", "triage__classify", json!({"question": "find errors"}));
    let reads = Answer::text(&["Reading."])
        .call("api", "observability__get_logs", json!({"service": "api"}))
        .call("pay", "observability__get_logs", json!({"service": "payments"}))
        .call("none", "observability__get_logs", json!({}))
        .call("alias", "triage__get_logs", json!({"service": "web"}));
    let llm = LlmServer::start(vec![classify.into(), reads.into(), Answer::text(&["Done."]).into()]).await;
    let yaml = format!(
        "skills:\n  paths: [skills]\n{BASE}llm:\n  provider: anthropic\n  model: m\n  max_tokens: 100\n  anthropic: {{api_key: k, base_url: '{}'}}\n{}",
        llm.url(),
        observability()
    );
    let engine = skillhost_tests::engine_from(&ws, &yaml).await;
    let facts = &engine.skills().skills["triage"].facts;
    assert!(facts.verify && facts.mcp_servers == ["observability"] && facts.mcp_prerequisites == ["list_things"]);
    assert_eq!(facts.mcp_tools, [("observability".to_string(), vec!["get_logs".to_string()])]);

    let events = Mutex::new(Vec::new());
    let request = TurnRequest {
        channel_id: "chan-1".into(),
        user_id: None,
        message: "find errors".into(),
        route: Vec::new(),
        thread: None,
    };
    engine.run_turn(request, &events, &NonInteractive).await.unwrap();
    let classified = tool_results(&llm, 1);
    assert_eq!(parse(&classified["c"]), json!({"route": "search"}), "{classified:?}");
    let results = tool_results(&llm, 2);
    // The observed text is not JSON: the decision's context wraps it as {"result": ...}.
    let api = parse(&results["api"]);
    assert_eq!(
        api["_mithai_preflight_context"],
        json!({"route": "search"}),
        "before_mcp_call saw the route classify set on the incoming message: {api}"
    );
    let read = api["result"].as_str().unwrap();
    assert!(read.ends_with("\n\nRead for session chan-1."), "observe_mcp_result augments: {read}");
    assert!(read.contains("\"service\": \"api\""), "{read}");
    let denied = parse(&results["pay"]);
    assert_eq!(denied["error"], "payments logs are off limits here", "{denied}");
    let retried = parse(&results["none"]);
    assert!(retried["_mithai_prerequisite_retry"].as_str().unwrap().contains("list_things"), "{retried}");
    assert!(retried["result"].as_str().unwrap().contains("\"service\": \"thing-a\""), "corrected arguments: {retried}");
    assert!(!results["alias"].contains("Read for session"), "aliases are not observed: {}", results["alias"]);

    let events = events.into_inner().unwrap();
    let target = events.iter().find_map(|e| match e {
        EngineEvent::ToolStarted { tool_call_id, target, .. } if tool_call_id == "api" => target.clone(),
        _ => None,
    });
    let target = target.expect("tool_target answered for the owned server");
    assert_eq!((target.target.as_deref(), target.query_kind.as_deref()), (Some("api"), Some("logs")));
}

/// The tool results the model received in request `n`, by call id.
fn tool_results(server: &LlmServer, n: usize) -> BTreeMap<String, String> {
    let body = server.body(n);
    let last = body["messages"].as_array().unwrap().last().unwrap().clone();
    let blocks = last["content"].as_array().unwrap().iter().filter(|b| b["type"] == "tool_result").cloned();
    blocks.map(|b| (b["tool_use_id"].as_str().unwrap().to_owned(), b["content"].as_str().unwrap().to_owned())).collect()
}

#[tokio::test]
async fn what_the_sandbox_cannot_do_fails_naming_the_line() {
    let ws = Workspace::new();
    add(&ws, "sandbox_limits", guests::MITHAI_SANDBOX_LIMITS);
    // is_available reads an ungranted variable with .get(): the default, so it is available.
    let set = load(&ws, "", LoadMode::Inspect).await;
    let cases = [
        ("uptime", "subprocess.run(", "subprocess.run(): a skill cannot start processes"),
        ("raw_socket", "socket.create_connection(", "socket.create_connection(): a skill has no sockets"),
        ("api_key", "os.environ[\"SERVICE_API_KEY\"]", "os.environ['SERVICE_API_KEY'] is not granted"),
    ];
    for (tool, needle, message) in cases {
        let (ok, out) = call(&set, &format!("sandbox_limits__{tool}"), json!({})).await;
        let error = out["error"].as_str().unwrap_or_default();
        let at = format!("tools.py, line {}: ", line_of("sandbox_limits", needle));
        assert_eq!(ok, Some(false), "{out}");
        assert!(error.starts_with(&at) && error.contains(message), "{tool}: {error}");
    }
    // startup's polling thread: serving stops with the author's line.
    let err = ws.loader(&format!("skills:\n  paths: [skills]\n{BASE}")).load_all(LoadMode::Serve).await.err();
    let err = err.expect("a thread started in startup stops the start").to_string();
    let at = format!("tools.py, line {}: threading.Thread.start(): ", line_of("sandbox_limits", "t.start()"));
    assert!(err.contains("skill `sandbox_limits`: startup failed: ") && err.contains(&at), "{err}");
    assert!(err.contains("a skill cannot start threads"), "{err}");
}

#[tokio::test]
async fn warm_instances_serve_one_call_each_with_fresh_state() {
    // A Python interpreter is dear to instantiate: after a first call the sandbox makes
    // instances ahead (`sandbox.warm_instances`, default 2), each for exactly one call.
    let ws = Workspace::new();
    add(&ws, "sandbox_limits", guests::MITHAI_SANDBOX_LIMITS);
    let set = load(&ws, "", LoadMode::Inspect).await;
    let (component, _) = set.skills["sandbox_limits"].component().unwrap();
    assert_eq!(call(&set, "sandbox_limits__count", json!({})).await.1, json!({"calls": 1}));
    for round in 0..3 {
        let ready = async {
            while component.warm_instances() < skillhost::sandbox::WARM_INSTANCES {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(60), ready).await.expect("the warm instances are made");
        let served = component.warm_served();
        assert_eq!(call(&set, "sandbox_limits__count", json!({})).await.1, json!({"calls": 1}), "round {round}");
        assert_eq!(component.warm_served(), served + 1, "the call took a warm instance");
    }
    // Two at once: both warm, both fresh.
    let (a, b) =
        tokio::join!(call(&set, "sandbox_limits__count", json!({})), call(&set, "sandbox_limits__count", json!({})));
    assert_eq!((a.1, b.1), (json!({"calls": 1}), json!({"calls": 1})));
}
