//! Script tools (SKILL.md `tools:`) through the `skillhost` binary: `skill build`, `skill
//! validate`, `skill list` and `call skill__tool '{...}'`, with a Rust script (a wasm32-wasip2
//! program built from source, `tests/guests/script_probe`); approval by default, lowered by
//! `human.overrides`; a `.sh` script refused at load. (The Python and JavaScript scripts are
//! built and run in `tests/tests/scripts.rs`.)

use skillhost_tests::{Workspace, guests};
use std::process::Command;

const MD: &str = "---\nname: calc\ndescription: Arithmetic helpers.\ntools:\n  echo:\n    description: Echo.\n    \
                  script: scripts/echo.wasm\n    args:\n      mode: {type: string}\n      arg: {type: string}\n      \
                  n: {type: integer}\n---\nUse calc__echo.\n";

fn workspace(extra: &str) -> Workspace {
    let ws = Workspace::new();
    let dir = ws.path().join("skills/calc/scripts");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(guests::SCRIPT_PROBE, dir.join("echo.wasm")).unwrap();
    std::fs::write(ws.path().join("skills/calc/SKILL.md"), MD).unwrap();
    let yaml = format!("skills:\n  paths: [skills]\n  builtins: []\nstate:\n  filesystem: {{path: state}}\n{extra}");
    std::fs::write(ws.path().join("config.yaml"), yaml).unwrap();
    ws
}

/// Runs the binary in `ws` with no terminal; (exit code, stdout, stderr).
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

const INPUT: &str = r#"{"mode": "argv", "arg": "two words", "n": 7}"#;

#[test]
fn a_script_tool_is_built_listed_and_called_through_the_binary() {
    let ws = workspace("");
    let (code, stdout, stderr) = skillhost(&ws, &["skill", "build", "skills/calc"]);
    assert_eq!(code, 0, "a .wasm script needs no build: {stdout}{stderr}");
    assert!(stdout.contains("ok: calc (1 tools)"), "{stdout}");
    let (code, stdout, stderr) = skillhost(&ws, &["skill", "list"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("calc__echo  [approval: approve] (script scripts/echo.wasm)"), "{stdout}");
    let (code, stdout, stderr) = skillhost(&ws, &["call", "calc__echo", INPUT, "--yes"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let out: serde_json::Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    assert_eq!(out, serde_json::json!(["argv", "two words", "7"]));
    let (code, stdout, _) = skillhost(&ws, &["call", "calc__echo", r#"{"mode": "fail", "arg": "x", "n": 4}"#, "--yes"]);
    assert_eq!(code, 1);
    assert!(stdout.contains("\"kind\": \"nonzero_exit\"") && stdout.contains("boom: x"), "{stdout}");
}

#[test]
fn a_script_tool_needs_approval_unless_the_operator_lowers_it() {
    let ws = workspace("");
    let (code, stdout, stderr) = skillhost(&ws, &["call", "calc__echo", INPUT]);
    assert_ne!(code, 0, "{stdout}");
    assert!(stderr.contains("calc__echo needs `approve` approval"), "{stderr}");
    let ws = workspace("human:\n  overrides:\n    calc__echo: null\n");
    let (code, stdout, stderr) = skillhost(&ws, &["call", "calc__echo", INPUT]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.contains("two words"), "{stdout}");
}

#[test]
fn a_shell_script_is_refused_at_load_naming_it() {
    let ws = workspace("");
    let md = MD.replace("scripts/echo.wasm", "scripts/echo.sh");
    std::fs::write(ws.path().join("skills/calc/SKILL.md"), md).unwrap();
    std::fs::write(ws.path().join("skills/calc/scripts/echo.sh"), "echo hi\n").unwrap();
    let (code, stdout, stderr) = skillhost(&ws, &["skill", "validate"]);
    assert_eq!(code, 1, "{stdout}");
    assert!(
        stderr.contains("skill `calc`") && stderr.contains("`scripts/echo.sh`: a `.sh` script cannot run"),
        "{stderr}"
    );
    let (code, _, stderr) = skillhost(&ws, &["skill", "build", "skills/calc"]);
    assert_ne!(code, 0);
    assert!(stderr.contains("`.sh` script cannot run here"), "{stderr}");
}
