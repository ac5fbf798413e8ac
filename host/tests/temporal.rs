//! `engine.temporal_guardrails` through the `skillhost` binary: `call` sends (and asks a
//! person about) the normalised arguments of a real MCP server's tool, refuses unusable
//! times, and a bad guardrails config stops every command with one line naming the key.
//! Absolute windows in the past keep the assertions independent of the wall clock.

use serde_json::{Value, json};
use skillhost_tests::{Workspace, guests};
use std::path::PathBuf;
use std::process::Command;

fn mcp_fixture(relative: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/mcp").join(relative);
    assert!(path.exists(), "{} is missing: install the MCP test servers as .ci/run does", path.display());
    path.display().to_string()
}

/// `hooks_all` owning the `obs` server, its `get_log_attributes` clamped to 5 minutes.
fn workspace(guardrails: &str) -> Workspace {
    let ws = Workspace::new();
    ws.add_skill("skills", "hooks_all", guests::HOOKS_ALL, "");
    let config = format!(
        "skills:\n  paths: [skills]\n  builtins: []\nstate:\n  filesystem: {{path: state}}\n\
         mcp_servers:\n  obs:\n    transport: stdio\n    command: python3\n    args: ['{}']\n    env: {{PYTHONPATH: '{}'}}\n\
         engine:\n  temporal_guardrails:\n{guardrails}",
        mcp_fixture("obs_server.py"),
        mcp_fixture("pylib"),
    );
    std::fs::write(ws.path().join("config.yaml"), config).unwrap();
    ws
}

const CLAMPED: &str = "    tools: [get_logs]\n    attribute_discovery_tools: [get_log_attributes]\n    attribute_discovery_lookback_minutes: 5\n";

fn skillhost(ws: &Workspace, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_skillhost"))
        .current_dir(ws.path())
        .args(args)
        .env_remove("RUST_LOG")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code().unwrap_or(-1), text(&out.stdout), text(&out.stderr))
}

/// What `obs` echoed it received, from the printed result (`{"result": "<echo>...", ...}`).
fn received(printed: &Value) -> Value {
    let inner = printed["result"].as_str().unwrap_or_else(|| panic!("a wrapped result: {printed}"));
    let echo = inner.split_once("\n\nobserved").map_or(inner, |(echo, _)| echo);
    serde_json::from_str::<Value>(echo).unwrap()["received"].clone()
}

const SIX_HOURS: &str = r#"{"start_time_iso": "2020-01-01T00:00:00Z", "end_time_iso": "2020-01-01T06:00:00+00:00"}"#;

fn last_five_minutes() -> Value {
    json!({"start_time_iso": "2020-01-01T05:55:00Z", "end_time_iso": "2020-01-01T06:00:00Z"})
}

#[test]
fn call_sends_the_clamped_window_and_says_so() {
    let ws = workspace(CLAMPED);
    let (code, stdout, stderr) = skillhost(&ws, &["call", "obs__get_log_attributes", SIX_HOURS]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let printed: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(received(&printed), last_five_minutes(), "{printed}");
    assert_eq!(printed["_mithai_temporal"]["sent"], last_five_minutes(), "{printed}");
}

#[test]
fn the_terminal_approval_shows_the_clamped_window() {
    let ws = workspace(CLAMPED);
    let input =
        r#"{"level": "approve", "start_time_iso": "2020-01-01T00:00:00Z", "end_time_iso": "2020-01-01T06:00:00Z"}"#;
    let command = format!("{} call obs__get_log_attributes '{input}'", env!("CARGO_BIN_EXE_skillhost"));
    let (code, out) = skillhost_tests::run_on_terminal(ws.path(), &command, "y\n");
    assert_eq!(code, 0, "{out}");
    let line = out.lines().find_map(|l| l.trim().strip_prefix("input: ")).unwrap_or_else(|| panic!("{out}"));
    let mut shown = last_five_minutes();
    shown["level"] = json!("approve");
    assert_eq!(serde_json::from_str::<Value>(line).unwrap(), shown, "the person approves what runs: {out}");
}

#[test]
fn call_refuses_unusable_times_without_running() {
    let ws = workspace(CLAMPED);
    let (code, stdout, _) = skillhost(&ws, &["call", "obs__get_log_attributes", r#"{"end_time_iso": "soon"}"#]);
    assert_eq!(code, 1, "{stdout}");
    let printed: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(printed["kind"], "invalid_time_arguments", "{printed}");
    assert!(printed["error"].as_str().unwrap().contains("`end_time_iso` is not a time"), "{printed}");
}

#[test]
fn a_bad_guardrails_config_is_one_line_naming_the_key() {
    let cases = [
        ("    tool_profiles: {get_alerts: alerts_window}\n", "engine.temporal_guardrails.tool_profiles is set but"),
        ("    tools: [get_logs]\n    tool_profiles: {get_alerts: hourly}\n", "unknown variant `hourly`"),
        (
            "    tools: [get_logs]\n    attribute_discovery_tools: [a]\n    attribute_discovery_lookback_minutes: 0\n",
            "attribute_discovery_lookback_minutes must be greater than 0",
        ),
    ];
    for (guardrails, expected) in cases {
        let ws = workspace(guardrails);
        for args in [&["skill", "validate"][..], &["run"][..]] {
            let (code, stdout, stderr) = skillhost(&ws, args);
            assert_eq!(code, 2, "{args:?} {guardrails}: {stdout}{stderr}");
            let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
            assert_eq!(lines.len(), 1, "one line: {stderr}");
            assert!(lines[0].contains(expected) && lines[0].contains("config.yaml"), "{args:?}: {stderr}");
        }
    }
    let ws = workspace("    tools: []\n");
    let budget =
        "  tool_budget:\n    enabled: true\n    tools: [get_logs]\n    long_range_service_name_heuristic: true\n";
    let path = ws.path().join("config.yaml");
    std::fs::write(&path, format!("{}{budget}", std::fs::read_to_string(&path).unwrap())).unwrap();
    let (code, _, stderr) = skillhost(&ws, &["skill", "validate"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.trim().lines().count() == 1 && stderr.contains("engine.tool_budget.long_range_service_name_heuristic"),
        "{stderr}"
    );
}
