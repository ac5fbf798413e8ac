//! `skillhost mcp` as a process, driven by a real MCP client: the official `mcp` Python SDK
//! (`tests/mcp/client.py`, installed under `tests/mcp/pylib` by `.ci/run`) over stdio,
//! including approvals through elicitation, at the newest protocol revision and the older
//! ones; and raw JSON-RPC for the revisions the SDK no longer asks for. Modules: the Tasks
//! extension (`mcp/tasks.rs`); Agent Skills taken from MCP servers (`mcp/remote_skills.rs`).

#[path = "mcp/remote_skills.rs"]
mod remote_skills;
mod support;
#[path = "mcp/tasks.rs"]
mod tasks;

use serde_json::{Value, json};
use skillhost_tests::{Workspace, guests};
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;
use support::raw::Raw;

fn mcp_dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/mcp");
    assert!(
        dir.join("pylib/mcp").exists(),
        "the mcp Python SDK is missing: run `python3 -m pip install --target tests/mcp/pylib mcp` (as .ci/run does)"
    );
    dir
}

fn workspace() -> Workspace {
    let ws = Workspace::new();
    ws.add_skill("skills", "hooks_all", guests::HOOKS_ALL, "");
    ws.add_skill("skills", "probe", guests::PROBE, "");
    let config = "skills:\n  paths: [skills]\n  builtins: []\nstate:\n  filesystem: {path: state}\nhuman:\n  overrides:\n    probe__echo: confirm\n";
    std::fs::write(ws.path().join("config.yaml"), config).unwrap();
    ws
}

/// Runs the Python client against `skillhost mcp` in `ws` with the `initialize` handshake,
/// answering elicitations as `elicit` says, and returns its report.
fn client(ws: &Workspace, elicit: &str, calls: Value) -> Value {
    client_in_mode(ws, "legacy", elicit, calls)
}

/// [`client`] in the SDK's connect `mode` (`legacy`, `auto`: discover first, a revision, or
/// `default`: none given).
fn client_in_mode(ws: &Workspace, mode: &str, elicit: &str, calls: Value) -> Value {
    let dir = mcp_dir();
    let config = ws.path().join("config.yaml");
    let out = Command::new("python3")
        .arg(dir.join("client.py"))
        .args([
            elicit,
            &calls.to_string(),
            "stdio",
            env!("CARGO_BIN_EXE_skillhost"),
            "--config",
            config.to_str().unwrap(),
            "mcp",
        ])
        .env("PYTHONPATH", dir.join("pylib"))
        .env("MCP_MODE", mode)
        .current_dir(ws.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "client failed: {}\n{stdout}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

fn result(report: &Value, i: usize) -> (bool, String) {
    let r = &report["results"][i];
    (r["is_error"].as_bool().unwrap(), r["text"].as_str().unwrap().to_owned())
}

#[test]
fn skills_are_served_with_prompts_and_gated_calls_elicit_approval() {
    let ws = workspace();
    let calls = json!([
        ["hooks_all__plain", {"service": "a"}],
        ["hooks_all__dyn_tool", {"level": "approve"}],
        ["probe__echo", {"x": 1}],
        ["nope__missing", {}],
    ]);
    let report = client(&ws, "approve", calls);
    let tools: Vec<&str> = report["tools"].as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect();
    assert!(tools.contains(&"hooks_all__plain") && tools.contains(&"probe__echo"), "{tools:?}");
    assert!(report["prompts"].as_array().unwrap().contains(&json!("hooks_all")), "{report}");
    assert!(report["first_prompt"].as_str().is_some_and(|p| !p.is_empty()), "{report}");
    assert!(!result(&report, 0).0, "{report}");
    assert!(
        !result(&report, 1).0 && result(&report, 1).1.contains("dyn_tool"),
        "approved through elicitation: {report}"
    );
    assert!(
        !result(&report, 2).0 && result(&report, 2).1.contains("\"x\":1"),
        "confirmed through elicitation: {report}"
    );
    // An unknown tool is the spec's protocol error (-32602), not a tool result.
    assert_eq!(report["results"][3]["error_code"], -32602, "{report}");
    assert!(result(&report, 3).1.contains("Unknown tool: nope__missing"), "{report}");
    let asked = report["asked"].as_array().unwrap();
    assert_eq!(asked.len(), 2, "only the gated calls ask: {report}");
    assert!(asked[1].as_str().unwrap().contains("CONFIRM"), "{report}");
}

#[test]
fn a_denied_or_unaskable_approval_never_runs_the_tool() {
    let ws = workspace();
    let calls = json!([["hooks_all__dyn_tool", {"level": "approve"}], ["hooks_all__plain", {}]]);
    let denied = client(&ws, "deny", calls.clone());
    assert!(result(&denied, 0).0 && result(&denied, 0).1.contains("denied"), "{denied}");
    assert!(!result(&denied, 1).0);
    let unaskable = client(&ws, "none", calls);
    assert!(result(&unaskable, 0).0 && result(&unaskable, 0).1.contains("elicitation"), "{unaskable}");
    assert!(unaskable["asked"].as_array().unwrap().is_empty());
}

/// A workspace whose config promotes after two approvals and budgets `probe__ctx` to one call.
fn policy_workspace() -> Workspace {
    let ws = Workspace::new();
    ws.add_skill("skills", "hooks_all", guests::HOOKS_ALL, "");
    ws.add_skill("skills", "probe", guests::PROBE, "");
    let config = "skills:\n  paths: [skills]\n  builtins: []\nstate:\n  filesystem: {path: state}\n\
                  learning:\n  approval_auto_promote: 2\n\
                  engine:\n  tool_budget:\n    enabled: true\n    tools: [probe__ctx]\n    max_per_turn: 1\n";
    std::fs::write(ws.path().join("config.yaml"), config).unwrap();
    ws
}

#[test]
fn a_tool_served_over_mcp_is_promoted_and_budgeted_as_in_a_chat() {
    let ws = policy_workspace();
    let gated = json!(["hooks_all__dyn_tool", {"level": "approve"}]);
    let ctx = json!(["probe__ctx", {}]);
    let report = client(&ws, "approve", json!([gated, gated, gated, ctx, ctx]));
    assert_eq!(report["asked"].as_array().unwrap().len(), 2, "the third approve-level call is promoted: {report}");
    for i in 0..3 {
        assert!(!result(&report, i).0, "call {i} ran: {report}");
    }
    assert!(!result(&report, 3).0, "the first budgeted call runs: {report}");
    let (refused, text) = result(&report, 4);
    assert!(refused && text.contains("budget"), "the second is refused by the tool budget: {report}");
    // A later session starts a fresh budget; the promotion persists in the state directory.
    let again = client(&ws, "none", json!([gated, ctx]));
    assert!(!result(&again, 0).0, "still promoted, nobody asked: {again}");
    assert!(!result(&again, 1).0, "a new session, a new budget: {again}");
}

#[test]
fn a_denial_over_mcp_is_refused_with_the_chat_refusal_kind() {
    let ws = policy_workspace();
    let report = client(&ws, "deny", json!([["hooks_all__dyn_tool", {"level": "approve"}]]));
    let (refused, text) = result(&report, 0);
    let refusal: Value = serde_json::from_str(&text).unwrap();
    assert!(refused && refusal["kind"] == "denied", "{report}");
}

#[test]
fn two_mcp_clients_keep_separate_channels() {
    let ws = workspace();
    let channel = |report: &Value| {
        let ctx: Value = serde_json::from_str(&result(report, 0).1).unwrap();
        ctx["channel_id"].as_str().unwrap().to_owned()
    };
    let (a, b) = (client(&ws, "none", json!([["probe__ctx", {}]])), client(&ws, "none", json!([["probe__ctx", {}]])));
    let (a, b) = (channel(&a), channel(&b));
    assert!(a.starts_with("mcp-") && b.starts_with("mcp-") && a != b, "{a} {b}");
}

/// The SDK as it comes (no mode given: it discovers first) gets the newest revision
/// (2026-07-28, no handshake), where approvals travel as `input_required` results the client
/// answers.
#[test]
fn a_client_asking_the_newest_revision_gets_it_with_approvals_and_refusals() {
    let ws = workspace();
    let calls = json!([
        ["hooks_all__plain", {"service": "a"}],
        ["hooks_all__dyn_tool", {"level": "approve"}],
        ["probe__echo", {"x": 1}],
    ]);
    let report = client_in_mode(&ws, "default", "approve", calls.clone());
    assert_eq!(report["protocol_version"], "2026-07-28", "{report}");
    assert!(report["prompts"].as_array().unwrap().contains(&json!("hooks_all")), "{report}");
    assert!(!result(&report, 0).0, "{report}");
    assert!(!result(&report, 1).0 && result(&report, 1).1.contains("dyn_tool"), "approved: {report}");
    assert!(!result(&report, 2).0 && result(&report, 2).1.contains("\"x\":1"), "confirmed: {report}");
    let asked = report["asked"].as_array().unwrap();
    assert_eq!(asked.len(), 2, "only the gated calls ask: {report}");
    assert!(asked[1].as_str().unwrap().contains("CONFIRM"), "{report}");

    let denied = client_in_mode(&ws, "default", "deny", calls.clone());
    assert!(result(&denied, 1).0 && result(&denied, 1).1.contains("denied"), "{denied}");
    assert!(result(&denied, 2).0 && result(&denied, 2).1.contains("denied"), "{denied}");
    let unaskable = client_in_mode(&ws, "default", "none", calls);
    assert!(result(&unaskable, 1).0 && result(&unaskable, 1).1.contains("elicitation"), "{unaskable}");
    assert!(unaskable["asked"].as_array().unwrap().is_empty(), "{unaskable}");
}

/// `initialize` echoes a revision it has; an unknown one, or 2026-07-28 (which has no
/// handshake), is answered with the newest revision that has one. Old revisions keep the
/// old result shape, and gated calls are refused to a client that cannot elicit.
#[test]
fn each_revision_a_client_asks_for_is_answered_in_kind() {
    let ws = workspace();
    for (asked, answered) in [
        ("2025-03-26", "2025-03-26"),
        ("2025-06-18", "2025-06-18"),
        ("2025-11-25", "2025-11-25"),
        ("2024-01-01", "2025-11-25"),
        ("2026-07-28", "2025-11-25"),
    ] {
        let mut raw = Raw::start(&ws);
        let client = json!({"name": "raw", "version": "0"});
        let init =
            raw.request("initialize", json!({"protocolVersion": asked, "capabilities": {}, "clientInfo": client}));
        assert_eq!(init["result"]["protocolVersion"], answered, "asked {asked}: {init}");
        assert_eq!(init["result"]["serverInfo"]["name"], "skillhost", "{init}");
        raw.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        let tools = raw.request("tools/list", json!({}));
        let names = tools["result"]["tools"].as_array().unwrap();
        assert!(names.iter().any(|t| t["name"] == "probe__echo"), "asked {asked}: {tools}");
        let plain = raw.request("tools/call", json!({"name": "hooks_all__plain", "arguments": {"service": "a"}}));
        assert_eq!(plain["result"]["isError"], false, "asked {asked}: {plain}");
        assert!(plain["result"].get("resultType").is_none(), "the old result shape: {plain}");
        let gated = raw.request("tools/call", json!({"name": "probe__echo", "arguments": {"x": 1}}));
        let text = gated["result"]["content"][0]["text"].as_str().unwrap_or_default();
        assert!(gated["result"]["isError"] == true && text.contains("elicitation"), "asked {asked}: {gated}");
    }
}

/// No input ends `skillhost mcp`: each malformed message gets the JSON-RPC error the protocol
/// prescribes (a notification, nothing), and the server keeps serving.
#[test]
fn no_message_can_end_the_stdio_server() {
    let ws = workspace();
    let mut raw = Raw::start(&ws);
    // Before `initialize`: a ping is answered, a notification or a stray response ignored.
    assert!(raw.answers_a_ping());
    raw.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    raw.send(json!({"jsonrpc": "2.0", "id": 99, "result": {}}));
    assert!(raw.answers_a_ping(), "a pre-initialization notification ended the server");
    assert_eq!(raw.initialize("2025-06-18")["result"]["protocolVersion"], "2025-06-18");
    for (line, id, code) in [
        ("not json", Value::Null, -32700),
        (r#"{"jsonrpc":"2.0","id":50,"method":"#, Value::Null, -32700),
        (r#"[{"jsonrpc":"2.0","id":51,"method":"ping"}]"#, Value::Null, -32600),
        (r#"{"jsonrpc":"2.0","id":52,"method":"no/such/method"}"#, json!(52), -32601),
        (r#"{"jsonrpc":"2.0","id":53,"method":"tools/call","params":{}}"#, json!(53), -32602),
        (
            r#"{"jsonrpc":"2.0","id":54,"method":"tools/call","params":{"name":"probe__ctx","arguments":[1]}}"#,
            json!(54),
            -32602,
        ),
        (r#"{"id":55,"method":"ping"}"#, json!(55), -32600),
        (r#""a string""#, Value::Null, -32600),
    ] {
        raw.send_line(line);
        let answer = raw.next();
        assert_eq!((&answer["id"], &answer["error"]["code"]), (&id, &json!(code)), "{line}: {answer}");
        assert!(raw.answers_a_ping(), "the server stopped after {line}");
    }
    for silent in ["", "   ", r#"{"jsonrpc":"2.0","method":"no/such/notification"}"#] {
        raw.send_line(silent);
    }
    let ctx = raw.request("tools/call", json!({"name": "probe__ctx", "arguments": {}}));
    assert_eq!(ctx["result"]["isError"], false, "{ctx}");
}

/// Pipes are read and written without blocking; everything else a client or a shell may
/// hand over still works: stdin and stdout as files (answers written before EOF ends the
/// server), and stdout shared with stderr (`2>&1`, where stdout stays blocking so the log
/// writer is not made non-blocking too).
#[test]
fn stdio_works_from_files_and_with_stderr_on_the_same_pipe() {
    let ws = workspace();
    let requests = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "probe__ctx", "arguments": {}}}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "ping"}),
    ];
    let input: String = requests.iter().map(|r| format!("{r}\n")).collect();
    let answered = |out: &str| {
        let answers: Vec<Value> = out.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
        let by_id = |id: u64| answers.iter().find(|a| a["id"] == id).cloned().unwrap_or_default();
        assert_eq!(by_id(1)["result"]["protocolVersion"], "2025-06-18", "{out}");
        assert_eq!(by_id(2)["result"]["isError"], false, "{out}");
        assert!(by_id(3)["result"].is_object(), "{out}");
    };
    let config = ws.path().join("config.yaml");
    let config = config.to_str().unwrap();

    // Files on both ends.
    let (input_path, output_path) = (ws.path().join("requests.jsonl"), ws.path().join("answers.jsonl"));
    std::fs::write(&input_path, &input).unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_skillhost"));
    command
        .args(["--config", config, "mcp"])
        .current_dir(ws.path())
        .stdin(std::fs::File::open(&input_path).unwrap())
        .stdout(std::fs::File::create(&output_path).unwrap())
        .stderr(std::process::Stdio::null());
    let mut child = command.spawn().unwrap();
    let started = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("skillhost mcp did not end at the end of its stdin file");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status}");
    answered(&std::fs::read_to_string(&output_path).unwrap());

    // stdout and stderr on one pipe, stdin a pipe.
    let mut command = Command::new("sh");
    let line = format!("RUST_LOG=debug exec '{}' --config '{config}' mcp 2>&1", env!("CARGO_BIN_EXE_skillhost"));
    command.args(["-c", &line]).current_dir(ws.path());
    let finished = support::run_bounded(command, &input);
    assert_eq!(finished.code, 0, "{}", finished.stdout);
    answered(&finished.stdout);
}

/// Batches belong to revision 2025-03-26 alone: there they run and are answered as one array.
#[test]
fn a_batch_is_answered_as_one_array_at_2025_03_26() {
    let ws = workspace();
    let mut raw = Raw::start(&ws);
    assert_eq!(raw.initialize("2025-03-26")["result"]["protocolVersion"], "2025-03-26");
    let batch = json!([
        {"jsonrpc": "2.0", "id": "p", "method": "ping"},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": "t", "method": "tools/list"},
        {"jsonrpc": "2.0", "id": "bad", "method": "tools/call", "params": {}},
    ]);
    raw.send(batch);
    let answers = raw.next();
    let answers = answers.as_array().unwrap_or_else(|| panic!("an array: {answers}"));
    let ids: std::collections::BTreeSet<String> =
        answers.iter().map(|a| a["id"].as_str().unwrap().to_owned()).collect();
    assert_eq!(ids, ["bad", "p", "t"].map(String::from).into(), "{answers:?}");
    assert!(answers.iter().any(|a| a["id"] == "t" && a["result"]["tools"].is_array()), "{answers:?}");
    assert!(answers.iter().any(|a| a["id"] == "bad" && a["error"]["code"] == -32602), "{answers:?}");
    assert!(raw.answers_a_ping());
}

/// `notifications/cancelled` stops a looping call: no result is sent for it, and the server
/// answers the next call at once.
#[test]
fn a_cancelled_call_stops_and_sends_no_result() {
    let ws = Workspace::new();
    let limits = "[limits]\nfuel = 50_000_000_000\ntimeout_ms = 120_000\n";
    ws.add_skill("skills", "hostile", guests::HOSTILE, limits);
    ws.add_skill("skills", "probe", guests::PROBE, "");
    std::fs::write(ws.path().join("config.yaml"), "skills:\n  paths: [skills]\n  builtins: []\n").unwrap();
    let mut raw = Raw::start(&ws);
    raw.initialize("2025-11-25");
    raw.send(json!({"jsonrpc": "2.0", "id": "spin", "method": "tools/call", "params": {"name": "hostile__spin", "arguments": {}}}));
    std::thread::sleep(Duration::from_millis(300));
    let started = std::time::Instant::now();
    raw.send(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "spin"}}));
    let ctx = raw.request("tools/call", json!({"name": "probe__ctx", "arguments": {}}));
    assert_eq!(ctx["result"]["isError"], false, "{ctx}");
    assert!(raw.answers_a_ping());
    assert!(started.elapsed() < Duration::from_secs(30), "the server was busy for {:?}", started.elapsed());
    // The guest stopped: the process burns no CPU (a spinning guest takes a whole core).
    let cpu = |pid: u32| {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        let fields: Vec<&str> = stat.rsplit_once(')').unwrap().1.split_whitespace().collect();
        fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
    };
    let before = cpu(raw.pid());
    // Nothing more arrives meanwhile: no answer for the cancelled call.
    assert!(raw.quiet_for(Duration::from_secs(1)), "a result of the cancelled call was sent");
    let ticks = cpu(raw.pid()) - before;
    assert!(ticks < 50, "the cancelled guest still runs: {ticks} clock ticks in one second");
}

/// Request ids are unique among a client's open requests: a second request with the id of one
/// still running is refused (alone or in a batch), the first one keeps its id, and cancelling
/// it still stops it. A cancelled request leaves nothing behind that waits for it.
#[test]
fn a_request_id_already_in_flight_is_refused() {
    let ws = Workspace::new();
    let limits = "[limits]\nfuel = 50_000_000_000\ntimeout_ms = 120_000\n";
    ws.add_skill("skills", "hostile", guests::HOSTILE, limits);
    std::fs::write(ws.path().join("config.yaml"), "skills:\n  paths: [skills]\n  builtins: []\n").unwrap();
    for revision in ["2025-11-25", "2025-03-26"] {
        let mut raw = Raw::start(&ws);
        raw.initialize(revision);
        let spin = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "hostile__spin", "arguments": {}}});
        raw.send(spin.clone());
        raw.send(spin.clone());
        let refused = raw.next();
        assert_eq!((refused["id"].clone(), refused["error"]["code"].clone()), (json!(7), json!(-32600)), "{refused}");
        assert!(refused["error"]["message"].as_str().unwrap().contains("already in flight"), "{refused}");
        if revision == "2025-03-26" {
            let ping = json!({"jsonrpc": "2.0", "id": "p", "method": "ping"});
            raw.send(json!([spin, ping, ping]));
            let answers = raw.next();
            let codes: Vec<(Value, Value)> = answers
                .as_array()
                .unwrap_or_else(|| panic!("an array: {answers}"))
                .iter()
                .map(|a| (a["id"].clone(), a["error"]["code"].clone()))
                .collect();
            assert_eq!(codes.len(), 3, "{answers}");
            for expected in [(json!(7), json!(-32600)), (json!("p"), Value::Null), (json!("p"), json!(-32600))] {
                assert!(codes.contains(&expected), "{expected:?} in {answers}");
            }
            // A batch member goes to the session, which answers nothing once it is
            // cancelled: nothing is left waiting for it, and its id is free again.
            let mut other = spin.clone();
            other["id"] = json!(8);
            raw.send(json!([other]));
            std::thread::sleep(Duration::from_millis(300));
            raw.send(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 8}}));
            // Nothing answers it; once its handler has ended, its id may be used again (sent
            // at once, the new request could meet the old handler's dropped answer in rmcp's
            // table of open ids, which MCP spares servers: ids are not reused in a session).
            assert!(raw.quiet_for(Duration::from_millis(500)), "a result of the cancelled batch member was sent");
            raw.send(json!({"jsonrpc": "2.0", "id": 8, "method": "ping"}));
            let pong = raw.next();
            assert_eq!((pong["id"].clone(), pong["result"].is_object()), (json!(8), true), "{pong}");
        }
        raw.send(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}}));
        assert!(raw.answers_a_ping());
        assert!(raw.quiet_for(Duration::from_millis(500)), "a result of the cancelled call was sent");
        // The cancelled call has ended: its id names nothing in flight any more.
        raw.send(json!({"jsonrpc": "2.0", "id": 7, "method": "ping"}));
        let pong = raw.next();
        assert_eq!((pong["id"].clone(), pong["result"].is_object()), (json!(7), true), "{pong}");
    }
}

/// Calls sent together run together and are answered by their ids: every answer carries its
/// own request's result (number and string ids alike), each call gets a fresh instance, and
/// the server answers a ping meanwhile.
#[test]
fn calls_in_flight_together_are_answered_by_their_ids() {
    let ws = Workspace::new();
    ws.add_skill("skills", "probe", guests::PROBE, "");
    std::fs::write(ws.path().join("config.yaml"), "skills:\n  paths: [skills]\n  builtins: []\n").unwrap();
    let mut raw = Raw::start(&ws);
    raw.initialize("2025-11-25");
    let id = |i: usize| if i.is_multiple_of(2) { json!(i) } else { json!(format!("call-{i}")) };
    let calls: usize = 200;
    let lines: Vec<String> = (0..calls)
        .map(|i| {
            let (name, arguments) =
                if i.is_multiple_of(10) { ("probe__counter", json!({})) } else { ("probe__echo", json!({"n": i})) };
            let params = json!({"name": name, "arguments": arguments});
            json!({"jsonrpc": "2.0", "id": id(i), "method": "tools/call", "params": params}).to_string()
        })
        .collect();
    raw.send_line(&lines.join("\n"));
    let mut answered = std::collections::HashMap::new();
    while answered.len() < calls {
        let answer = raw.next();
        assert!(answered.insert(answer["id"].to_string(), answer.clone()).is_none(), "answered twice: {answer}");
    }
    for i in 0..calls {
        let answer = &answered[&id(i).to_string()];
        assert_eq!(answer["result"]["isError"], false, "{answer}");
        let text = answer["result"]["content"][0]["text"].as_str().unwrap_or_else(|| panic!("{answer}"));
        let result: Value = serde_json::from_str(text).unwrap();
        if i.is_multiple_of(10) {
            assert_eq!(result["calls"], 1, "a fresh instance for every call: {answer}");
        } else {
            assert_eq!(result, json!({"n": i}), "call {i} got another call's answer: {answer}");
        }
    }
    assert!(raw.answers_a_ping());
}

/// A skill whose tool list depends on what it finds (the probe's memory names one more tool)
/// says its tools changed (the `lists` import): `skillhost mcp` describes it again, tells the
/// client `notifications/tools/list_changed`, and lists and runs the new tool.
#[test]
fn a_skill_that_says_its_tools_changed_is_described_again_and_the_client_told() {
    let ws = Workspace::new();
    ws.add_skill("skills", "probe", guests::PROBE, "[capabilities]\nmemory = true\n");
    let config = "skills:\n  paths: [skills]\n  builtins: []\n  grants:\n    probe: {memory: true}\n\
                  learning:\n  memory:\n    filesystem: {path: memory}\nstate:\n  filesystem: {path: state}\n";
    std::fs::write(ws.path().join("config.yaml"), config).unwrap();
    let mut raw = Raw::start(&ws);
    raw.initialize("2025-11-25");
    let listed = |raw: &mut Raw| -> Vec<String> {
        let tools = raw.request("tools/list", json!({}));
        tools["result"]["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_owned()).collect()
    };
    assert!(!listed(&mut raw).contains(&"probe__grown".to_owned()));
    let (written, _) = raw.call("probe__memory_write", json!({"path": "probe_extra_tool.txt", "content": "grown"}));
    assert_eq!(written["result"]["isError"], false, "{written}");
    assert!(!listed(&mut raw).contains(&"probe__grown".to_owned()), "nothing said yet: the list stands");

    let (told, _) = raw.call("probe__lists_changed", json!({}));
    assert_eq!(told["result"]["isError"], false, "{told}");
    let changed = (0..50).find_map(|_| {
        let message = raw.next_within(Duration::from_secs(10));
        (message["method"] == "notifications/tools/list_changed").then_some(message)
    });
    assert!(changed.is_some(), "the client is told its tool list changed");
    assert!(listed(&mut raw).contains(&"probe__grown".to_owned()), "described again");
    let (grown, _) = raw.call("probe__grown", json!({}));
    assert_eq!(grown["result"]["content"][0]["text"], r#"{"extra":"grown"}"#, "{grown}");
}
