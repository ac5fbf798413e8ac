//! `skillhost mcp` as a process, driven by a real MCP client: the official `mcp` Python SDK
//! (`tests/mcp/client.py`, installed under `tests/mcp/pylib` by `.ci/run`) over stdio,
//! including approvals through elicitation.

use serde_json::{Value, json};
use skillhost_tests::{Workspace, guests};
use std::path::PathBuf;
use std::process::Command;

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

/// Runs the Python client against `skillhost mcp` in `ws`, answering elicitations as
/// `elicit` says, and returns its report.
fn client(ws: &Workspace, elicit: &str, calls: Value) -> Value {
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
