//! MCP both ways, against servers nobody here wrote: the official `server-everything` (npm;
//! stdio and streamable HTTP) and `tests/mcp/obs_server.py`, built with the official `mcp`
//! Python SDK. `.ci/run` installs both under `tests/mcp/`; a missing install fails the test
//! with the command to run.
//!
//! `obs` is owned by the `hooks_all` guest (its `before-mcp-call` decides by the arguments'
//! `_decision`, its observer appends `\n\nobserved`), and `mcp_user` declares `everything`'s
//! `echo` and `obs`'s `get_logs` in `mcp-tools` (aliases `mcp_user__echo`, `mcp_user__get_logs`).

use serde_json::{Value, json};
use skillhost::engine::*;
use skillhost::mcp::{McpManager, Status};
use skillhost::skills::LoadMode;
use skillhost::tools::coverage::{CoverageEntry, Observation, ObservedStatus, ResultState};
use skillhost_tests::llm_server::{Answer, LlmServer};
use skillhost_tests::person::{Does, Person};
use skillhost_tests::{Workspace, ctx, guests, json as parse};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn fixture(relative: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("mcp").join(relative);
    assert!(
        path.exists(),
        "{} is missing: install the MCP test servers with `npm install --prefix tests/mcp @modelcontextprotocol/server-everything` \
         and `python3 -m pip install --target tests/mcp/pylib mcp` (as .ci/run does)",
        path.display()
    );
    path.display().to_string()
}

fn everything() -> String {
    fixture("node_modules/@modelcontextprotocol/server-everything/dist/index.js")
}

/// The `mcp_servers` section: `obs` (Python, stdio, filtered), `everything` (stdio), and a
/// server no skill declares.
fn servers(obs_tools: &str) -> String {
    format!(
        "mcp_servers:\n  obs:\n    transport: stdio\n    command: python3\n    args: ['{obs}']\n    env: {{PYTHONPATH: '{pylib}'}}\n    tools: {obs_tools}\n\
         \x20 everything:\n    transport: stdio\n    command: node\n    args: ['{everything}', stdio]\n\
         \x20 unused:\n    transport: stdio\n    command: /nonexistent/never-started\n",
        obs = fixture("obs_server.py"),
        pylib = fixture("pylib"),
        everything = everything(),
    )
}

const OBS_TOOLS: &str = "[list_things, get_logs, search_events, fail, crash, empty]";

fn workspace(skills: &[(&str, &str)]) -> Workspace {
    let ws = Workspace::new();
    std::fs::create_dir_all(ws.path().join("skills")).unwrap();
    for (name, wasm) in skills {
        ws.add_skill("skills", name, wasm, "");
    }
    ws
}

fn yaml(llm: &str, extra: &str) -> String {
    format!(
        "skills:\n  paths: [skills]\n  builtins: []\nstate:\n  filesystem: {{path: state}}\nlearning:\n  memory:\n    filesystem: {{path: memory}}\n\
         llm:\n  provider: anthropic\n  model: test-model\n  max_tokens: 500\n  anthropic: {{api_key: k, base_url: '{llm}'}}\n{extra}"
    )
}

/// The engine's tools as these tests drive them directly (outside a turn).
struct McpView {
    tools: skillhost::tools::Tools,
    manager: Arc<McpManager>,
}

impl McpView {
    fn manager(&self) -> &Arc<McpManager> {
        &self.manager
    }

    fn decls(&self) -> Vec<skillhost::llm::ToolDecl> {
        self.tools.decls()
    }

    /// One call with no turn around it (no budget, nobody to ask).
    async fn execute(
        &self,
        name: &str,
        input: &serde_json::Value,
        ctx: &skillhost::sandbox::CallContext,
        _: Option<()>,
    ) -> skillhost::tools::ToolOutcome {
        let (source, _) = self.tools.find(name).unwrap_or_else(|| panic!("no tool {name}"));
        source.execute(skillhost::tools::ToolCall { id: "t", name, input, ctx }, &skillhost::tools::NoScope).await
    }
}

/// Builds the app (skills loaded with the MCP bridge, the servers they declare started, an
/// engine offering their tools): what `skillhost chat` / `run` do.
async fn setup(ws: &Workspace, llm: &str, extra: &str) -> (Engine, McpView) {
    setup_in(ws, llm, extra, LoadMode::Serve).await
}

async fn setup_in(ws: &Workspace, llm: &str, extra: &str, mode: LoadMode) -> (Engine, McpView) {
    use skillhost::app::{Agents, Options};
    let app =
        skillhost_tests::app_with(ws, &yaml(llm, extra), Options { mode, llm: true, agents: Agents::TopLevel }).await;
    let manager = app.mcp.clone();
    let engine = Arc::try_unwrap(app.agents.into_iter().next().unwrap().engine).unwrap_or_else(|_| panic!("shared"));
    let view = McpView { tools: engine.tools().clone(), manager };
    (engine, view)
}

/// An app of `config` (no LLM), for the MCP serving tests.
async fn tools_app(ws: &Workspace, config: &str) -> skillhost::app::App {
    use skillhost::app::{Agents, Options};
    skillhost_tests::app_with(ws, config, Options { mode: LoadMode::Serve, llm: false, agents: Agents::TopLevel }).await
}

async fn run(engine: &Engine, counterpart: &dyn Counterpart) -> (TurnResult, Vec<EngineEvent>) {
    let events = Mutex::new(Vec::new());
    let request = TurnRequest {
        channel_id: "chan-1".into(),
        user_id: None,
        message: "go".into(),
        route: Vec::new(),
        thread: None,
    };
    let result = engine.run_turn(request, &events, counterpart).await.unwrap();
    (result, events.into_inner().unwrap())
}

/// The tool results the model received in request `n`: (id, content, is_error).
fn results(server: &LlmServer, n: usize) -> Vec<(String, String, bool)> {
    let body = server.body(n);
    let last = body["messages"].as_array().unwrap().last().unwrap().clone();
    let blocks = last["content"].as_array().unwrap().iter().filter(|b| b["type"] == "tool_result");
    blocks
        .map(|b| {
            (
                b["tool_use_id"].as_str().unwrap().to_owned(),
                b["content"].as_str().unwrap().to_owned(),
                b["is_error"] == true,
            )
        })
        .collect()
}

fn offered(server: &LlmServer, n: usize) -> Vec<String> {
    server.body(n)["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_owned()).collect()
}

#[tokio::test]
async fn declared_servers_start_and_their_filtered_tools_are_offered_and_routed() {
    let ws = workspace(&[("mcp_user", guests::MCP_USER), ("hooks_all", guests::HOOKS_ALL)]);
    let first = Answer::text(&["Calling."])
        .call("t1", "everything__echo", json!({"message": "hi"}))
        .call("t2", "mcp_user__echo", json!({"message": "alias"}))
        .call("t3", "obs__hidden", json!({}));
    let llm = LlmServer::start(vec![first.into(), Answer::text(&["Done."]).into()]).await;
    let (engine, tools) = setup(&ws, &llm.url(), &servers(OBS_TOOLS)).await;
    assert_eq!(tools.manager().status("unused"), Some(Status::Idle), "no skill declares it: never started");
    let (result, events) = run(&engine, &NonInteractive).await;
    assert_eq!(result.text, "Done.");

    let names = offered(&llm, 0);
    for expected in
        ["everything__get-sum", "obs__list_things", "mcp_user__echo", "mcp_user__get_logs", "hooks_all__plain"]
    {
        assert!(names.iter().any(|n| n == expected), "{expected} not offered: {names:?}");
    }
    assert!(!names.iter().any(|n| n == "obs__hidden"), "the tools filter leaves it out");
    // A tool mcp_user lists in MCP_TOOLS is offered once, as its alias; a call under the
    // server's name (t1) is still accepted as a direct call.
    for (alias, direct) in [("mcp_user__echo", "everything__echo"), ("mcp_user__get_logs", "obs__get_logs")] {
        assert_eq!(names.iter().filter(|n| *n == alias).count(), 1, "{alias} once: {names:?}");
        assert!(!names.iter().any(|n| n == direct), "{direct} is not offered beside its alias: {names:?}");
    }
    let results = results(&llm, 1);
    assert_eq!(results[0], ("t1".into(), "Echo: hi".into(), false));
    assert_eq!(results[1], ("t2".into(), "Echo: alias".into(), false));
    assert!(results[2].2 && results[2].1.contains("unknown_tool"), "{:?}", results[2]);
    let started: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            EngineEvent::ToolStarted { tool_name, .. } => Some(tool_name.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(started[..2], ["everything__echo", "mcp_user__echo"], "MCP calls emit tool events like native ones");
}

#[tokio::test]
async fn before_mcp_call_outcomes_and_prerequisite_retry() {
    let ws = workspace(&[("hooks_all", guests::HOOKS_ALL), ("mcp_user", guests::MCP_USER)]);
    let first = Answer::text(&["Calling."])
        .call("deny", "obs__get_logs", json!({"_decision": "deny"}))
        .call("fix", "obs__get_logs", json!({"_decision": "correct", "service": "api"}))
        .call("ctx", "obs__get_logs", json!({"_decision": "context"}))
        .call("pre-a", "obs__get_logs", json!({"_decision": "prerequisite", "service": "a"}))
        .call("pre-b", "obs__get_logs", json!({"_decision": "prerequisite", "service": "b"}))
        .call("fail", "obs__fail", json!({}))
        .call("alias", "mcp_user__get_logs", json!({"service": "via-alias"}))
        .call("pre-deny", "obs__get_logs", json!({"_decision": "prerequisite_then_deny"}));
    let llm = LlmServer::start(vec![first.into(), Answer::text(&["Done."]).into()]).await;
    let (engine, _tools) = setup(&ws, &llm.url(), &servers(OBS_TOOLS)).await;
    run(&engine, &NonInteractive).await;
    let r = results(&llm, 1);

    let deny = parse(&r[0].1);
    assert!(r[0].2 && deny["error"] == "hooks_all denied the call" && deny["kind"] == "mcp_preflight_denied", "{deny}");

    let (fixed, observed) = r[1].1.split_once("\n\nobserved").expect("the owner observed the result");
    assert_eq!(parse(fixed)["corrected"], true, "the corrected arguments replaced the call's");
    assert_eq!(parse(fixed)["service"], "api");
    assert_eq!(observed, "");

    let with_context = parse(&r[2].1);
    assert_eq!(
        with_context["_mithai_preflight_context"],
        json!({"policy": "hooks_all"}),
        "decision context is model-visible"
    );

    for (i, service) in [(3, "a"), (4, "b")] {
        let retried = parse(&r[i].1);
        assert!(!r[i].2, "{retried}");
        assert!(retried["_mithai_prerequisite_retry"].as_str().unwrap().contains("list_things"), "{retried}");
        let inner = retried["result"].as_str().unwrap();
        let logs = parse(inner.split_once("\n\nobserved").unwrap().0);
        assert_eq!(
            (logs["service"].as_str(), logs["list_things_calls"].as_i64()),
            (Some(service), Some(1)),
            "one prerequisite read for the batch"
        );
    }

    assert!(
        r[5].2 && r[5].1.contains("Error executing tool fail") && !r[5].1.contains("observed"),
        "failures are never observed: {:?}",
        r[5]
    );
    let alias = parse(&r[6].1);
    assert_eq!(alias["service"], "via-alias", "aliases are not observed: {}", r[6].1);
    // The retry passes the policy again: its refusal is the new correction.
    let refused = parse(&r[7].1);
    assert!(
        r[7].2 && refused["error"] == "hooks_all refused the retry" && refused["kind"] == "mcp_retry_refused",
        "{refused}"
    );
}

#[tokio::test]
async fn a_refused_prerequisite_returns_the_original_correction() {
    // `list_things` filtered out: the prerequisite cannot run.
    let ws = workspace(&[("hooks_all", guests::HOOKS_ALL)]);
    let first = Answer::text(&["Calling."]).call("pre", "obs__get_logs", json!({"_decision": "prerequisite"}));
    let llm = LlmServer::start(vec![first.into(), Answer::text(&["Done."]).into()]).await;
    let (engine, _tools) = setup(&ws, &llm.url(), &servers("[get_logs]")).await;
    run(&engine, &NonInteractive).await;
    let r = results(&llm, 1);
    let refused = parse(&r[0].1);
    assert!(r[0].2 && refused["error"] == "hooks_all: list_things failed", "{refused}");
}

#[tokio::test]
async fn a_trapping_policy_fails_closed() {
    let ws = workspace(&[("hooks_trap", guests::HOOKS_TRAP)]);
    let first = Answer::text(&["Calling."]).call("t1", "obs__get_logs", json!({"service": "x"}));
    let llm = LlmServer::start(vec![first.into(), Answer::text(&["Done."]).into()]).await;
    // Validate mode: its `is-available` traps too, which would stop a serving host.
    let (engine, tools) = setup_in(&ws, &llm.url(), &servers(OBS_TOOLS), LoadMode::Validate).await;
    // Its `resolve-human` traps as well: that asks for approval (fails closed); approve it.
    let (_, events) = run(&engine, &Person::new(&engine, Does::Approve)).await;
    assert!(events.iter().any(|e| matches!(e, EngineEvent::ApprovalRequested { .. })));
    let r = results(&llm, 1);
    assert!(r[0].2 && r[0].1.contains("could not check"), "a failed policy fails closed: {:?}", r[0]);
    assert_eq!(tools.manager().status("obs"), Some(Status::Ready), "a trapping hook does not hurt the server");
}

#[tokio::test]
async fn approval_applies_to_mcp_tools() {
    let ws = workspace(&[("hooks_all", guests::HOOKS_ALL), ("mcp_user", guests::MCP_USER)]);
    let first = Answer::text(&["Calling."])
        .call("override", "everything__echo", json!({"message": "x"}))
        .call("dynamic", "obs__get_logs", json!({"level": "approve"}))
        .call("free", "obs__get_logs", json!({}));
    let llm = LlmServer::start(vec![first.into(), Answer::text(&["Done."]).into()]).await;
    let extra = format!("{}human:\n  overrides:\n    everything__echo: approve\n", servers(OBS_TOOLS));
    let (engine, _tools) = setup(&ws, &llm.url(), &extra).await;
    let (_, events) = run(&engine, &Person::new(&engine, Does::Deny(None))).await;
    let r = results(&llm, 1);
    assert!(r[0].2 && r[0].1.contains("denied"), "human.overrides gate MCP tools: {:?}", r[0]);
    assert!(r[1].2 && r[1].1.contains("denied"), "the owning skill's resolve-human gates them: {:?}", r[1]);
    assert!(!r[2].2, "{:?}", r[2]);
    let asked: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            EngineEvent::ApprovalRequested { tool_name, .. } => Some(tool_name.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(asked, ["everything__echo", "obs__get_logs"]);
}

#[tokio::test]
async fn approvals_of_an_mcp_tool_are_promoted_like_a_native_tools() {
    let ws = workspace(&[("mcp_user", guests::MCP_USER)]);
    let echo = |id: &str| Answer::text(&[]).call(id, "everything__echo", json!({"message": "x"}));
    let script = (0..4).flat_map(|i| [echo(&format!("e{i}")).into(), Answer::text(&["ok"]).into()]).collect();
    let llm = LlmServer::start(script).await;
    let extra = format!("{}human:\n  overrides:\n    everything__echo: approve\n", servers(OBS_TOOLS));
    let (engine, _tools) = setup(&ws, &llm.url(), &extra).await;
    let counterpart = Person::new(&engine, Does::Approve);
    let mut promoted = Vec::new();
    for _ in 0..4 {
        let (result, _) = run(&engine, &counterpart).await;
        assert!(
            result.tool_calls[0].executed && !result.tool_calls[0].outcome.is_error,
            "{:?}",
            result.tool_calls[0].outcome
        );
        promoted.push(result.tool_calls[0].promoted);
    }
    // learning.approval_auto_promote defaults to 3: three approvals, then it runs unasked.
    assert_eq!(counterpart.shown().len(), 3);
    assert_eq!(promoted, [false, false, false, true]);
}

#[tokio::test]
async fn tool_target_and_result_empty_come_from_the_owner() {
    let ws = workspace(&[("hooks_all", guests::HOOKS_ALL)]);
    let first = Answer::text(&["Calling."]).call("t1", "obs__empty", json!({"service": "db"})).call(
        "t2",
        "obs__get_logs",
        json!({}),
    );
    let llm = LlmServer::start(vec![first.into(), Answer::text(&["Done."]).into()]).await;
    let (engine, _tools) = setup(&ws, &llm.url(), &servers(OBS_TOOLS)).await;
    let (_, events) = run(&engine, &NonInteractive).await;
    let target = events.iter().find_map(|e| match e {
        EngineEvent::ToolStarted { tool_call_id, target, .. } if tool_call_id == "t1" => Some(target.clone()),
        _ => None,
    });
    assert_eq!(target.flatten(), ToolTarget::checked(Some("db".into()), Some("logs".into())));
    let empty: Vec<(String, bool)> = events
        .iter()
        .filter_map(|e| match e {
            EngineEvent::ToolCompleted { tool_call_id, is_empty, .. } => Some((tool_call_id.clone(), *is_empty)),
            _ => None,
        })
        .collect();
    assert!(empty.contains(&("t1".into(), true)) && empty.contains(&("t2".into(), false)), "{empty:?}");
}

#[tokio::test]
async fn coverage_descriptors_from_meta_are_bounded() {
    let ws = workspace(&[("mcp_user", guests::MCP_USER)]);
    let (_engine, tools) = setup(&ws, "http://127.0.0.1:9", &servers(OBS_TOOLS)).await;
    let observed = |status, result_state| Some(CoverageEntry::Verified(Observation { status, result_state }));
    let cases = [
        ("valid", observed(ObservedStatus::Complete, ResultState::Data)),
        ("partial", observed(ObservedStatus::Partial, ResultState::Data)),
        ("bad_status", Some(CoverageEntry::Unverified)),
        ("deep", Some(CoverageEntry::Unverified)),
        ("oversized", Some(CoverageEntry::Unverified)),
        ("long_subject", Some(CoverageEntry::Unverified)),
        ("not_object", Some(CoverageEntry::Unverified)),
        ("none", Some(CoverageEntry::Unverified)),
    ];
    for (case, expected) in cases {
        let outcome = tools.execute("obs__search_events", &json!({"case": case}), &ctx(), None).await;
        assert!(!outcome.is_error, "{case}: {}", outcome.content);
        assert_eq!(outcome.coverage, expected, "{case}");
        assert!(!outcome.content.contains("attempted_scope"), "raw descriptors never reach the model");
    }
    let plain = tools.execute("obs__get_logs", &json!({}), &ctx(), None).await;
    assert_eq!(plain.coverage, None, "a tool that neither advertises nor declares has no coverage");
}

#[tokio::test]
async fn the_mcp_import_calls_declared_servers_only() {
    let ws = workspace(&[("mcp_user", guests::MCP_USER), ("probe", guests::PROBE)]);
    let (engine, _tools) = setup(&ws, "http://127.0.0.1:9", &servers(OBS_TOOLS)).await;
    let call = |skill: &str, tool: &str, input: Value| {
        let skill = engine.skills().skills[skill].clone();
        let tool = tool.to_owned();
        async move { parse(&skill.call(&tool, &input, &ctx()).await.unwrap().value.content) }
    };
    let echo =
        call("mcp_user", "call", json!({"server": "everything", "tool": "echo", "arguments": {"message": "m"}})).await;
    assert_eq!(echo["result"], "Echo: m");
    let failed = call("mcp_user", "call", json!({"server": "obs", "tool": "fail"})).await;
    assert_eq!(failed["error"], "tool-failed", "{failed}");
    let filtered = call("mcp_user", "call", json!({"server": "obs", "tool": "hidden"})).await;
    assert_eq!(filtered["error"], "other", "the tools filter holds here too: {filtered}");
    let undeclared =
        call("probe", "mcp_call", json!({"server": "everything", "tool": "echo", "arguments": {"message": "m"}})).await;
    assert_eq!(undeclared["error"], "unknown-server", "{undeclared}");
    let unknown = call("mcp_user", "call", json!({"server": "nope", "tool": "x"})).await;
    assert_eq!(unknown["error"], "unknown-server");
}

#[tokio::test]
async fn the_calling_tools_approval_covers_its_mcp_calls() {
    let ws = workspace(&[("mcp_user", guests::MCP_USER)]);
    let input = json!({"server": "everything", "tool": "echo", "arguments": {"message": "m"}});
    let first = Answer::text(&["Calling."]).call("t1", "mcp_user__guarded_call", input);
    let llm = LlmServer::start(vec![first.into(), Answer::text(&["Done."]).into()]).await;
    let (engine, _tools) = setup(&ws, &llm.url(), &servers(OBS_TOOLS)).await;
    run(&engine, &Person::new(&engine, Does::Deny(None))).await;
    let r = results(&llm, 1);
    assert!(r[0].2 && r[0].1.contains("denied"), "{:?}", r[0]);
}

#[tokio::test]
async fn a_crashed_server_is_restarted_and_its_tools_come_back() {
    let ws = workspace(&[("hooks_all", guests::HOOKS_ALL)]);
    let (_engine, tools) = setup(&ws, "http://127.0.0.1:9", &servers(OBS_TOOLS)).await;
    let manager = tools.manager().clone();
    assert!(tools.decls().iter().any(|d| d.name == "obs__get_logs"));
    let crashed = tools.execute("obs__crash", &json!({}), &ctx(), None).await;
    assert!(crashed.is_error, "the call the server died in fails: {}", crashed.content);
    let mut saw_down = false;
    for _ in 0..100 {
        if manager.status("obs") != Some(Status::Ready) {
            saw_down = true;
            assert!(
                !tools.decls().iter().any(|d| d.name.starts_with("obs__")),
                "a down server's tools are not offered"
            );
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(saw_down, "the crash was not noticed");
    assert!(manager.wait_ready("obs", Duration::from_secs(30)).await, "not restarted: {:?}", manager.status("obs"));
    let again = tools.execute("obs__get_logs", &json!({"service": "after"}), &ctx(), None).await;
    assert!(!again.is_error && again.content.contains("after"), "{}", again.content);
}

#[tokio::test]
async fn a_server_that_cannot_start_is_reported_and_retried() {
    let yaml = "mcp_servers:\n  broken:\n    transport: stdio\n    command: /nonexistent/mcp-server\n";
    let ws = Workspace::new();
    let config = ws.config(yaml);
    let manager = McpManager::new(&config.config.mcp_servers);
    manager.start(["broken"]);
    manager.wait_started(Duration::from_secs(10)).await;
    match manager.status("broken") {
        Some(Status::Down(why)) => assert!(why.contains("/nonexistent/mcp-server"), "{why}"),
        other => panic!("{other:?}"),
    }
    assert!(manager.tools("broken").is_empty());
    let err = manager.call("broken", "x", Default::default()).await.unwrap_err();
    assert!(err.contains("not available"), "{err}");
}

/// Starts server-everything on a free port with `transport` (`streamableHttp` or `sse`).
fn everything_over_http(transport: &str) -> (u16, tokio::process::Child) {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let child = tokio::process::Command::new("node")
        .args([everything().as_str(), transport])
        .env("PORT", port.to_string())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    (port, child)
}

#[tokio::test]
async fn legacy_sse_server_everything() {
    let (port, mut child) = everything_over_http("sse");
    let yaml =
        format!("mcp_servers:\n  ev:\n    transport: sse\n    url: http://127.0.0.1:{port}/sse\n    tools: [echo]\n");
    let config = Workspace::new().config(&yaml);
    let manager = McpManager::new(&config.config.mcp_servers);
    manager.start(["ev"]);
    assert!(manager.wait_ready("ev", Duration::from_secs(30)).await, "{:?}", manager.status("ev"));
    let result = manager.call("ev", "echo", json!({"message": "over sse"}).as_object().unwrap().clone()).await.unwrap();
    assert_eq!(skillhost::mcp::client::result_text(&result), "Echo: over sse");
    child.kill().await.unwrap();
}

#[tokio::test]
async fn streamable_http_server_everything() {
    let (port, mut child) = everything_over_http("streamableHttp");
    let yaml = format!(
        "mcp_servers:\n  ev:\n    transport: streamablehttp\n    url: http://127.0.0.1:{port}/mcp\n    headers: {{X-Test: yes}}\n    tools: [echo, get-sum]\n"
    );
    let ws = Workspace::new();
    let config = ws.config(&yaml);
    let manager = McpManager::new(&config.config.mcp_servers);
    // The node server takes a moment to listen; the manager retries until it does.
    manager.start(["ev"]);
    assert!(manager.wait_ready("ev", Duration::from_secs(30)).await, "{:?}", manager.status("ev"));
    let names: Vec<String> = manager.tools("ev").iter().map(|t| t.name.to_string()).collect();
    assert_eq!(names, ["echo", "get-sum"]);
    let result = manager.call("ev", "get-sum", json!({"a": 2, "b": 3}).as_object().unwrap().clone()).await.unwrap();
    assert!(skillhost::mcp::client::result_text(&result).contains('5'), "{result:?}");
    child.kill().await.unwrap();
}

/// `/mcp` over streamable HTTP, behind the bearer token, driven by the Python SDK's client
/// with the handshake (2025-11-25) and with discovery (2026-07-28, stateless).
#[tokio::test]
async fn skills_are_served_over_streamable_http_behind_the_token() {
    use skillhost::adapters::auth::{Allowed, Tokens};
    use skillhost::adapters::mcp::{SkillServer, http_app};
    let ws = workspace(&[("hooks_all", guests::HOOKS_ALL), ("probe", guests::PROBE)]);
    let app = tools_app(&ws, "skills:\n  paths: [skills]\n  builtins: []\nstate:\n  filesystem: {path: state}\n").await;
    let server = SkillServer::new(app.agent().engine.clone(), "skillhost");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let (tokens, allowed) = (Tokens::new(Some("s3cret"), &[]), Allowed::of(&Default::default()));
        axum::serve(listener, http_app(server, tokens, &allowed, Default::default())).await.unwrap()
    });

    let unauthorized = reqwest::Client::new().post(&url).json(&json!({})).send().await.unwrap();
    assert_eq!(unauthorized.status(), 401);

    let dir = PathBuf::from(fixture("pylib")).parent().unwrap().to_owned();
    let calls = json!([["probe__echo", {"a": 1}], ["hooks_all__dyn_tool", {"level": "approve"}]]).to_string();
    for (mode, revision) in [("legacy", "2025-11-25"), ("auto", "2026-07-28")] {
        let out = tokio::process::Command::new("python3")
            .arg(dir.join("client.py"))
            .args(["approve", calls.as_str(), "http", url.as_str(), "s3cret"])
            .env("PYTHONPATH", dir.join("pylib"))
            .env("MCP_MODE", mode)
            .output()
            .await
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{}\n{stdout}", String::from_utf8_lossy(&out.stderr));
        let report = parse(stdout.trim());
        assert_eq!(report["protocol_version"], revision, "{report}");
        assert!(report["tools"].as_array().unwrap().contains(&json!("probe__echo")), "{report}");
        assert_eq!(report["results"][0]["is_error"], false, "{report}");
        assert_eq!(report["results"][1]["is_error"], false, "approved through elicitation over HTTP: {report}");
        assert_eq!(report["asked"].as_array().unwrap().len(), 1, "{report}");
    }
}

/// DNS-rebinding protection: `/mcp` answers loopback `Host`s and `ui.allowed_hosts`, and
/// browser `Origin`s that are loopback or in `ui.allowed_origins`.
#[tokio::test]
async fn mcp_over_http_refuses_foreign_hosts_and_origins() {
    use skillhost::adapters::mcp::{SkillServer, http_app};
    let ws = workspace(&[("probe", guests::PROBE)]);
    let app = tools_app(&ws, "skills:\n  paths: [skills]\n  builtins: []\nstate:\n  filesystem: {path: state}\n").await;
    let server = SkillServer::new(app.agent().engine.clone(), "skillhost");
    let ui = skillhost::config::Ui {
        allowed_hosts: vec!["skills.example.com".into()],
        allowed_origins: vec!["https://console.example.com:443".into()],
        ..Default::default()
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let (tokens, allowed) = (skillhost::adapters::auth::Tokens::default(), skillhost::adapters::auth::Allowed::of(&ui));
    tokio::spawn(async move {
        axum::serve(listener, http_app(server, tokens, &allowed, Default::default())).await.unwrap()
    });
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}});
    let post = |host: Option<&str>, origin: Option<&str>| {
        let mut request =
            reqwest::Client::new().post(&url).header("accept", "application/json, text/event-stream").json(&init);
        if let Some(host) = host {
            request = request.header("host", host);
        }
        if let Some(origin) = origin {
            request = request.header("origin", origin);
        }
        async move { request.send().await.unwrap().status().as_u16() }
    };
    assert_eq!(post(None, None).await, 200, "loopback, no Origin");
    assert_eq!(post(Some("localhost:1234"), Some("http://localhost:5173")).await, 200);
    assert_eq!(post(Some("skills.example.com"), Some("https://console.example.com")).await, 200, "allowed");
    assert_eq!(post(Some("evil.example.com"), None).await, 403, "a foreign Host");
    assert_eq!(post(None, Some("https://evil.example.com")).await, 403, "a foreign Origin");
}

/// The last user message's text blocks of request `n`.
fn last_user_text(server: &LlmServer, n: usize) -> String {
    let body = server.body(n);
    let last = body["messages"].as_array().unwrap().last().unwrap().clone();
    last["content"].as_array().unwrap().iter().filter_map(|b| b["text"].as_str()).collect()
}

#[tokio::test]
async fn the_tool_budget_caps_calls_and_ends_with_an_honest_partial_answer() {
    let ws = workspace(&[("hooks_all", guests::HOOKS_ALL)]);
    let first = Answer::text(&["Reading."]).call("a", "obs__get_logs", json!({"service": "a"})).call(
        "b",
        "obs__get_logs",
        json!({"service": "b"}),
    );
    let llm = LlmServer::start(vec![first.into(), Answer::text(&["Partial: only a."]).into()]).await;
    let extra = format!(
        "{}engine:\n  tool_budget:\n    enabled: true\n    tools: [get_logs]\n    max_per_turn: 1\n",
        servers(OBS_TOOLS)
    );
    let (engine, _tools) = setup(&ws, &llm.url(), &extra).await;
    let (result, events) = run(&engine, &NonInteractive).await;
    assert_eq!((result.text.as_str(), result.time_boxed), ("Partial: only a.", false));
    let r = results(&llm, 1);
    assert!(!r[0].2 && r[1].2 && r[1].1.contains("budget"), "{r:?}");
    assert!(
        last_user_text(&llm, 1).contains("tool budget for this request is spent"),
        "the answer is requested tools-free"
    );
    assert_eq!(llm.body(1)["tool_choice"]["type"], "none");
    let started = events.iter().filter(|e| matches!(e, EngineEvent::ToolStarted { .. })).count();
    assert_eq!(started, 1, "the refused call never ran");
}

#[tokio::test]
async fn replan_offers_one_corrective_round_without_the_spent_tools() {
    let ws = workspace(&[("hooks_all", guests::HOOKS_ALL)]);
    let first = Answer::text(&["Reading."]).call("a", "obs__get_logs", json!({"window": "24h"})).call(
        "b",
        "obs__get_logs",
        json!({"window": "7d"}),
    );
    let second = Answer::text(&["Retrying."]).call("c", "obs__get_logs", json!({"window": "2d"}));
    let llm = LlmServer::start(vec![first.into(), second.into(), Answer::text(&["Partial."]).into()]).await;
    let budget = "engine:\n  log_tool_budget:\n    tools: [get_logs]\n    max_long_range_per_turn: 1\n    long_range_threshold_minutes: 60\n    replan_enabled: true\n";
    let (engine, _tools) = setup(&ws, &llm.url(), &format!("{}{budget}", servers(OBS_TOOLS))).await;
    let (result, _) = run(&engine, &NonInteractive).await;
    assert_eq!(result.text, "Partial.");
    assert!(
        offered(&llm, 1).contains(&"obs__get_logs".to_owned()),
        "short windows can still run: the tool stays offered"
    );
    assert_ne!(llm.body(1)["tool_choice"]["type"], "none", "the corrective round may call tools");
    let r = results(&llm, 2);
    assert!(r[0].2 && r[0].1.contains("budget"), "the corrective round is admitted again: {r:?}");
    assert!(last_user_text(&llm, 2).contains("tool budget for this request is spent"), "then exactly one: the answer");
}

/// A client that counts `notifications/tools/list_changed`.
#[derive(Clone, Default)]
struct Watcher(Arc<tokio::sync::Notify>);

impl skillhost::mcp::rmcp::ClientHandler for Watcher {
    async fn on_tool_list_changed(
        &self,
        _: skillhost::mcp::rmcp::service::NotificationContext<skillhost::mcp::rmcp::RoleClient>,
    ) {
        self.0.notify_one();
    }
}

#[tokio::test]
async fn clients_are_told_when_the_skills_change() {
    use skillhost::adapters::mcp::SkillServer;
    use skillhost::mcp::rmcp::ServiceExt;
    let config = "skills:\n  paths: [skills]\n  builtins: []\nstate:\n  filesystem: {path: state}\n";
    let ws = workspace(&[("hooks_all", guests::HOOKS_ALL)]);
    let app = tools_app(&ws, config).await;
    let server = SkillServer::new(app.agent().engine.clone(), "skillhost");
    let (server_io, client_io) = tokio::io::duplex(1 << 16);
    let serving = server.clone();
    tokio::spawn(async move { serving.serve(server_io).await.unwrap().waiting().await });
    let watcher = Watcher::default();
    let client = watcher.clone().serve(client_io).await.unwrap();
    let before: Vec<String> = client.list_all_tools().await.unwrap().iter().map(|t| t.name.to_string()).collect();
    assert!(before.contains(&"hooks_all__plain".to_owned()) && !before.iter().any(|t| t.starts_with("probe__")));

    ws.add_skill("skills", "probe", guests::PROBE, "");
    app.agent().reload().await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), watcher.0.notified()).await.expect("tools/list_changed was sent");
    let after = client.list_all_tools().await.unwrap();
    assert!(after.iter().any(|t| t.name == "probe__echo"), "the new skill's tools are listed");
}

/// A client at 2026-07-28 (no handshake) hears of it on its `subscriptions/listen` stream.
#[tokio::test]
async fn clients_at_the_newest_revision_are_told_through_their_subscription() {
    use skillhost::adapters::mcp::SkillServer;
    use skillhost::mcp::rmcp::ServiceExt;
    use skillhost::mcp::rmcp::model::{ProtocolVersion, ServerNotification, SubscriptionFilter};
    use skillhost::mcp::rmcp::service::{ClientLifecycleMode, ClientServiceExt};
    let config = "skills:\n  paths: [skills]\n  builtins: []\nstate:\n  filesystem: {path: state}\n";
    let ws = workspace(&[("hooks_all", guests::HOOKS_ALL)]);
    let app = tools_app(&ws, config).await;
    let server = SkillServer::new(app.agent().engine.clone(), "skillhost");
    let (server_io, client_io) = tokio::io::duplex(1 << 16);
    let serving = server.clone();
    tokio::spawn(async move { serving.serve(server_io).await.unwrap().waiting().await });
    let modern = ClientLifecycleMode::Discover { preferred_versions: vec![ProtocolVersion::LATEST] };
    let client = ().serve_with_lifecycle(client_io, modern).await.unwrap();
    let filter = SubscriptionFilter::builder().tools_list_changed().prompts_list_changed().build();
    let mut subscription = client.peer().listen(filter).await.unwrap();
    assert_eq!(subscription.acknowledged().tools_list_changed, Some(true));

    ws.add_skill("skills", "probe", guests::PROBE, "");
    app.agent().reload().await.unwrap();
    let told = tokio::time::timeout(Duration::from_secs(10), subscription.next()).await.expect("told within 10 s");
    assert!(matches!(told, Ok(Some(ServerNotification::ToolListChangedNotification(_)))), "{told:?}");
    let after = client.list_all_tools().await.unwrap();
    assert!(after.iter().any(|t| t.name == "probe__echo"), "the new skill's tools are listed");
}

#[tokio::test]
async fn a_reload_starts_the_servers_new_skills_declare() {
    use skillhost::adapters::mcp::SkillServer;
    let ws = workspace(&[]);
    let app = tools_app(&ws, &yaml("http://127.0.0.1:9", &servers(OBS_TOOLS))).await;
    let manager = app.mcp.clone();
    assert_eq!(manager.status("everything"), Some(Status::Idle), "no skill declares it yet");
    let _server = SkillServer::new(app.agent().engine.clone(), "skillhost");

    ws.add_skill("skills", "mcp_user", guests::MCP_USER, "");
    let problems = app.agent().reload().await.unwrap();
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(manager.status("everything"), Some(Status::Ready), "the new skill's server was started");
    assert_eq!(manager.status("unused"), Some(Status::Idle));
}

#[tokio::test]
async fn configured_headers_are_sent_with_variables_substituted() {
    let seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let record = seen.clone();
    let app = axum::Router::new().fallback(move |headers: axum::http::HeaderMap| {
        let record = record.clone();
        async move {
            let auth = headers.get("authorization").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
            record.lock().unwrap().push(auth);
            axum::http::StatusCode::UNAUTHORIZED
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    // SAFETY: a variable no other test reads or writes.
    unsafe { std::env::set_var("SKILLHOST_MCP_TEST_TOKEN", "t0ken") };
    let yaml = format!(
        "mcp_servers:\n  remote:\n    transport: streamablehttp\n    url: http://127.0.0.1:{port}/mcp\n    headers:\n      Authorization: Bearer ${{SKILLHOST_MCP_TEST_TOKEN}}\n"
    );
    let config = Workspace::new().config(&yaml);
    let manager = McpManager::new(&config.config.mcp_servers);
    manager.start(["remote"]);
    manager.wait_started(Duration::from_secs(20)).await;
    assert!(matches!(manager.status("remote"), Some(Status::Down(_))), "{:?}", manager.status("remote"));
    assert_eq!(seen.lock().unwrap().first().map(String::as_str), Some("Bearer t0ken"));
}

#[tokio::test]
async fn a_prerequisite_retry_passes_the_tool_budget_again() {
    let ws = workspace(&[("hooks_all", guests::HOOKS_ALL)]);
    let first = Answer::text(&["Reading."]).call("a", "obs__get_logs", json!({"_decision": "prerequisite"}));
    let llm = LlmServer::start(vec![first.into(), Answer::text(&["Partial."]).into()]).await;
    let extra = format!(
        "{}engine:\n  tool_budget:\n    enabled: true\n    tools: [get_logs]\n    max_per_turn: 1\n",
        servers(OBS_TOOLS)
    );
    let (engine, _tools) = setup(&ws, &llm.url(), &extra).await;
    run(&engine, &NonInteractive).await;
    let r = results(&llm, 1);
    assert!(r[0].2 && r[0].1.contains("the budget for this tool in this request is spent"), "{r:?}");
}

/// Records, per tool call id, the spec's `mithai.tool.retried_after_prerequisite` as the
/// engine writes it on the call's `execute_tool` span.
struct RetryMarks(Arc<Mutex<Vec<(String, bool)>>>);

/// A span's tool call id (`gen_ai.tool.call.id`).
struct CallId(String);

impl<S> tracing_subscriber::Layer<S> for RetryMarks
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    fn on_new_span(
        &self,
        attrs: &tracing::span::Attributes<'_>,
        id: &tracing::span::Id,
        ctx: tracing_subscriber::layer::Context<'_, S>,
    ) {
        struct Find(Option<String>);
        impl tracing::field::Visit for Find {
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                if field.name() == "gen_ai.tool.call.id" {
                    self.0 = Some(format!("{value:?}"));
                }
            }
        }
        let mut find = Find(None);
        attrs.record(&mut find);
        if let (Some(call), Some(span)) = (find.0, ctx.span(id)) {
            span.extensions_mut().insert(CallId(call));
        }
    }

    fn on_record(
        &self,
        id: &tracing::span::Id,
        values: &tracing::span::Record<'_>,
        ctx: tracing_subscriber::layer::Context<'_, S>,
    ) {
        struct Mark(Option<bool>);
        impl tracing::field::Visit for Mark {
            fn record_bool(&mut self, field: &tracing::field::Field, value: bool) {
                if field.name() == "mithai.tool.retried_after_prerequisite" {
                    self.0 = Some(value);
                }
            }
            fn record_debug(&mut self, _: &tracing::field::Field, _: &dyn std::fmt::Debug) {}
        }
        let mut mark = Mark(None);
        values.record(&mut mark);
        let call = ctx.span(id).and_then(|s| s.extensions().get::<CallId>().map(|c| c.0.clone()));
        if let (Some(value), Some(call)) = (mark.0, call) {
            self.0.lock().unwrap().push((call, value));
        }
    }
}

/// The spec's span attribute: an MCP call retried after its prerequisite says so on its
/// `execute_tool` span; a plain call does not.
#[tokio::test]
async fn a_prerequisite_retry_is_marked_on_the_calls_span() {
    use tracing_subscriber::layer::SubscriberExt as _;
    let marks = Arc::new(Mutex::new(Vec::new()));
    // This test's runtime is single-threaded: the subscriber sees every span of the turn.
    let _traced = tracing::subscriber::set_default(tracing_subscriber::registry().with(RetryMarks(marks.clone())));
    let ws = workspace(&[("hooks_all", guests::HOOKS_ALL)]);
    let first = Answer::text(&["Reading."])
        .call("retried", "obs__get_logs", json!({"_decision": "prerequisite"}))
        .call("plain", "obs__get_logs", json!({"service": "api"}));
    let llm = LlmServer::start(vec![first.into(), Answer::text(&["Done."]).into()]).await;
    let (engine, _tools) = setup(&ws, &llm.url(), &servers(OBS_TOOLS)).await;
    run(&engine, &NonInteractive).await;
    let r = results(&llm, 1);
    assert!(parse(&r[0].1)["_mithai_prerequisite_retry"].is_string(), "{r:?}");
    assert_eq!(*marks.lock().unwrap(), [("retried".to_owned(), true)]);
}

#[tokio::test]
async fn a_prerequisite_retry_that_needs_a_person_is_asked() {
    // The first call needs nobody; the policy's retry asks for `level: approve`.
    let ws = workspace(&[("hooks_all", guests::HOOKS_ALL)]);
    let call =
        || Answer::text(&["Reading."]).call("a", "obs__get_logs", json!({"_decision": "prerequisite_then_approve"}));
    // `hooks_all` verifies: each turn ends with a fact check, answered `OK`.
    let turn = || [call().into(), Answer::text(&["Done."]).into(), Answer::text(&["OK"]).into()];
    let llm = LlmServer::start(turn().into_iter().chain(turn()).collect()).await;
    let (engine, _tools) = setup(&ws, &llm.url(), &servers(OBS_TOOLS)).await;

    let approve = Person::new(&engine, Does::Approve);
    let (_, events) = run(&engine, &approve).await;
    assert_eq!(approve.shown().len(), 1, "the retry was put to the person once");
    let r = results(&llm, 1);
    let ran = parse(&r[0].1);
    assert!(!r[0].2, "approved, the retry ran: {ran}");
    assert!(ran["_mithai_prerequisite_retry"].as_str().unwrap().contains("list_things"), "{ran}");
    let asked = events.iter().filter(|e| matches!(e, EngineEvent::ApprovalRequested { .. })).count();
    assert_eq!(asked, 1, "one approval_requested for the retry");

    let deny = Person::new(&engine, Does::Deny(Some("not now".into())));
    run(&engine, &deny).await;
    assert_eq!(deny.shown().len(), 1);
    let r = results(&llm, 4);
    let refused = parse(&r[0].1);
    assert!(r[0].2, "{refused}");
    assert_eq!(refused["kind"], "denied", "a denied retry is refused as any denied call: {refused}");
    assert_eq!(refused["reason"], "not now");
    assert!(refused.get("_mithai_prerequisite_retry").is_none(), "a refused retry did not run: {refused}");
}

#[tokio::test]
async fn a_failing_observer_keeps_the_original_result() {
    // `mcp_user` owns `everything`: its observer traps on `trap`, spins past the sandbox's
    // deadline on `spin`, and answers nothing otherwise.
    let ws = workspace(&[("mcp_user", guests::MCP_USER)]);
    let (engine, tools) = setup(&ws, "http://127.0.0.1:9", &servers(OBS_TOOLS)).await;
    let skills = engine.skills();
    let (component, _) = skills.skills["mcp_user"].component().unwrap();
    assert!(component.hooks().names().contains(&"observe-mcp-result"));
    for message in ["trap", "spin", "plain"] {
        let outcome = tools.execute("everything__echo", &json!({"message": message}), &ctx(), None).await;
        assert_eq!((outcome.is_error, outcome.content.as_str()), (false, format!("Echo: {message}").as_str()));
    }
}

#[tokio::test]
async fn an_agent_listing_a_server_starts_it() {
    use skillhost::app::{Agents, Options};
    let ws = workspace(&[("hooks_all", guests::HOOKS_ALL)]);
    let agent = "agents:\n  a:\n    skills:\n      allowed: [everything, hooks_all]\n";
    let yaml = yaml("http://127.0.0.1:9", &format!("{}{agent}", servers(OBS_TOOLS)));
    let options = Options { mode: LoadMode::Serve, llm: true, agents: Agents::One("a".into()) };
    let app = skillhost_tests::app_with(&ws, &yaml, options).await;
    let decls = app.agent().engine.tools().decls();
    assert!(decls.iter().any(|d| d.name == "everything__echo"), "an agent's skills.allowed may name a server");
}
