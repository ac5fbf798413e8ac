//! The `skillhost` command end to end, as a process: exit codes, output, approval prompts.
//! (Here rather than in `tests/` because cargo builds this package's binary for it.)

use skillhost_tests::{Workspace, guests, http_server};
use std::process::Command;

fn skillhost(ws: &Workspace, args: &[&str], stdin: &str) -> (i32, String, String) {
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_skillhost"))
        .current_dir(ws.path())
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .env_remove("RUST_LOG")
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

fn cli_workspace() -> Workspace {
    let ws = Workspace::new();
    let manifest = std::fs::read_to_string(format!("{}/../skills/http_checker/skill.toml", env!("CARGO_MANIFEST_DIR"))).unwrap();
    ws.add_skill("skills", "http_checker", guests::HTTP_CHECKER, &manifest);
    ws.add_skill("skills", "hooks_all", guests::HOOKS_ALL, "");
    std::fs::write(
        ws.path().join("config.yaml"),
        "skills:\n  paths: [skills]\n  grants:\n    http_checker:\n      http_hosts: [\"127.0.0.1\"]\n",
    )
    .unwrap();
    ws
}

#[test]
fn call_prints_the_result() {
    let ws = cli_workspace();
    let port = http_server(200, "ok");
    let input = format!(r#"{{"url": "http://127.0.0.1:{port}/"}}"#);
    let (code, stdout, stderr) = skillhost(&ws, &["call", "http_checker__check_url", &input], "");
    assert_eq!(code, 0, "{stdout}{stderr}");
    let out: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(out["healthy"], true);
    assert!(ws.path().join(".skillhost/cache").read_dir().unwrap().next().is_some(), "compiled components are cached");
}

#[test]
fn call_reports_bad_input_and_unknown_tools() {
    let ws = cli_workspace();
    let (code, _, stderr) = skillhost(&ws, &["call", "http_checker__check_url", "{not json"], "");
    assert_eq!(code, 2);
    assert!(stderr.contains("not valid JSON"), "{stderr}");
    let (code, stdout, _) = skillhost(&ws, &["call", "http_checker__check_url", r#"{"url": 5}"#], "");
    assert_eq!(code, 1);
    assert!(stdout.contains("invalid_input"), "{stdout}");
    let (code, _, stderr) = skillhost(&ws, &["call", "nope__nothing", "{}"], "");
    assert_eq!(code, 2);
    assert!(stderr.contains("http_checker__check_url"), "lists the loaded tools: {stderr}");
}

#[test]
fn gated_calls_ask_or_need_yes() {
    let ws = cli_workspace();
    let approve = r#"{"level": "approve"}"#;
    // No terminal: refused with a hint, the tool does not run.
    let (code, stdout, stderr) = skillhost(&ws, &["call", "hooks_all__dyn_tool", approve], "y\n");
    assert_eq!(code, 2, "{stdout}{stderr}");
    assert!(stderr.contains("--yes"), "{stderr}");
    assert!(stdout.is_empty());
    let (code, stdout, _) = skillhost(&ws, &["call", "--yes", "hooks_all__dyn_tool", approve], "");
    assert_eq!(code, 0);
    assert!(stdout.contains("dyn_tool"));
    let (code, stdout, _) = skillhost(&ws, &["call", "hooks_all__dyn_tool", "{}"], "");
    assert_eq!(code, 0, "auto level runs without asking: {stdout}");
}

#[test]
fn skill_list_and_validate() {
    let ws = cli_workspace();
    let (code, stdout, stderr) = skillhost(&ws, &["skill", "list"], "");
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("http_checker__check_url") && stdout.contains("hooks_all__dyn_tool  [approval: dynamic]"), "{stdout}");
    assert!(stdout.contains("hooks: resolve-human"), "{stdout}");
    let (code, stdout, _) = skillhost(&ws, &["skill", "validate"], "");
    assert_eq!(code, 0);
    assert!(stdout.contains("ok: 2 skills"), "{stdout}");

    ws.add_skill("skills", "dup_tool", guests::DUP_TOOL, "");
    ws.add_skill("skills", "bad_schema", guests::BAD_SCHEMA, "");
    let (code, _, stderr) = skillhost(&ws, &["skill", "validate"], "");
    assert_eq!(code, 1);
    let lines: Vec<_> = stderr.lines().filter(|l| l.starts_with("skill `")).collect();
    assert_eq!(lines.len(), 2, "one line per problem: {stderr}");
}

#[test]
fn bad_config_is_named_with_key_and_line() {
    let ws = cli_workspace();
    std::fs::write(ws.path().join("bad.yaml"), "skills:\n  paths: [skills]\n  grant: {}\n").unwrap();
    let (code, _, stderr) = skillhost(&ws, &["--config", "bad.yaml", "skill", "list"], "");
    assert_eq!(code, 2);
    assert!(stderr.contains("grant") && stderr.contains("line 3"), "{stderr}");
}
