//! `skillhost mcp` as a process, driven by a real MCP client: the official `mcp` Python SDK
//! (`tests/mcp/client.py`, installed under `tests/mcp/pylib` by `.ci/run`) over stdio,
//! including approvals through elicitation, at the newest protocol revision and the older
//! ones; and raw JSON-RPC for the revisions the SDK no longer asks for.

use serde_json::{Value, json};
use skillhost_tests::{Workspace, guests};
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

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

/// [`client`] in the SDK's connect `mode` (`legacy`, `auto`: discover first, or a revision).
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
    assert!(result(&report, 3).0 && result(&report, 3).1.contains("unknown_tool"), "{report}");
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

/// The SDK's default connect mode discovers first: it gets the newest revision (2026-07-28,
/// no handshake), where approvals travel as `input_required` results the client answers.
#[test]
fn a_client_asking_the_newest_revision_gets_it_with_approvals_and_refusals() {
    let ws = workspace();
    let calls = json!([
        ["hooks_all__plain", {"service": "a"}],
        ["hooks_all__dyn_tool", {"level": "approve"}],
        ["probe__echo", {"x": 1}],
    ]);
    let report = client_in_mode(&ws, "auto", "approve", calls.clone());
    assert_eq!(report["protocol_version"], "2026-07-28", "{report}");
    assert!(report["prompts"].as_array().unwrap().contains(&json!("hooks_all")), "{report}");
    assert!(!result(&report, 0).0, "{report}");
    assert!(!result(&report, 1).0 && result(&report, 1).1.contains("dyn_tool"), "approved: {report}");
    assert!(!result(&report, 2).0 && result(&report, 2).1.contains("\"x\":1"), "confirmed: {report}");
    let asked = report["asked"].as_array().unwrap();
    assert_eq!(asked.len(), 2, "only the gated calls ask: {report}");
    assert!(asked[1].as_str().unwrap().contains("CONFIRM"), "{report}");

    let denied = client_in_mode(&ws, "auto", "deny", calls.clone());
    assert!(result(&denied, 1).0 && result(&denied, 1).1.contains("denied"), "{denied}");
    assert!(result(&denied, 2).0 && result(&denied, 2).1.contains("denied"), "{denied}");
    let unaskable = client_in_mode(&ws, "auto", "none", calls);
    assert!(result(&unaskable, 1).0 && result(&unaskable, 1).1.contains("elicitation"), "{unaskable}");
    assert!(unaskable["asked"].as_array().unwrap().is_empty(), "{unaskable}");
}

/// `skillhost mcp` driven line by line over its stdio.
struct Raw {
    child: std::process::Child,
    lines: mpsc::Receiver<String>,
    next_id: u64,
}

impl Raw {
    fn start(ws: &Workspace) -> Raw {
        let mut child = Command::new(env!("CARGO_BIN_EXE_skillhost"))
            .args(["--config", ws.path().join("config.yaml").to_str().unwrap(), "mcp"])
            .current_dir(ws.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || stdout.lines().map_while(Result::ok).try_for_each(|l| tx.send(l)));
        Raw { child, lines, next_id: 0 }
    }

    fn send(&mut self, message: Value) {
        let stdin = self.child.stdin.as_mut().unwrap();
        writeln!(stdin, "{message}").unwrap();
    }

    /// Sends a request and waits for its response (skipping notifications).
    fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let line = self.lines.recv_timeout(Duration::from_secs(60)).expect("an answer within 60 s");
            let message: Value = serde_json::from_str(&line).unwrap();
            if message["id"] == id {
                return message;
            }
        }
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
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
