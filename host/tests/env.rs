//! Granted environment variables through the real binary: `skill list` shows a skill whose
//! `is-available` needs a credential only when the operator's environment has it, and
//! `call` shows that nothing but the variables asked for and granted reaches the guest.

use skillhost_tests::{Workspace, guests};
use std::process::Command;

fn skillhost(ws: &Workspace, args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_skillhost"))
        .current_dir(ws.path())
        .args(args)
        .env_remove("RUST_LOG")
        .env_remove("NEEDS_ENV_TOKEN")
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code().unwrap_or(-1), text(&out.stdout), text(&out.stderr))
}

fn workspace() -> Workspace {
    let ws = Workspace::new();
    let manifest = "[capabilities]\nenv = [\"NEEDS_ENV_TOKEN\", \"ENV_CLI_ASKED_ONLY\"]\n";
    ws.add_skill("skills", "needs_env", guests::NEEDS_ENV, manifest);
    let config = "skills:\n  paths: [skills]\n  builtins: []\n  grants:\n    needs_env:\n      env: [NEEDS_ENV_TOKEN, ENV_CLI_GRANTED_ONLY]\n";
    std::fs::write(ws.path().join("config.yaml"), config).unwrap();
    ws
}

#[test]
fn skill_list_shows_the_skill_only_with_its_granted_credential() {
    let ws = workspace();
    let (code, stdout, stderr) = skillhost(&ws, &["skill", "list"], &[]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(!stdout.contains("needs_env"), "unavailable without NEEDS_ENV_TOKEN: {stdout}");
    let (code, stdout, stderr) = skillhost(&ws, &["skill", "list"], &[("NEEDS_ENV_TOKEN", "t0ken")]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.contains("needs_env"), "{stdout}");
    assert!(!stdout.contains("t0ken") && !stderr.contains("t0ken"), "values are never printed: {stdout}{stderr}");
}

#[test]
fn call_sees_only_the_variables_asked_for_and_granted() {
    let ws = workspace();
    let env = [("NEEDS_ENV_TOKEN", "t0ken"), ("ENV_CLI_ASKED_ONLY", "a"), ("ENV_CLI_GRANTED_ONLY", "g")];
    let (code, stdout, stderr) = skillhost(&ws, &["call", "needs_env__env"], &env);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let out: serde_json::Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    assert_eq!(out["vars"], serde_json::json!({"NEEDS_ENV_TOKEN": "t0ken"}), "{out}");
    assert_eq!(out["user_message"], serde_json::Value::Null, "`call` runs outside any turn: {out}");
}
