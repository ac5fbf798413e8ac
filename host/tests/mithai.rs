//! mithai `tools.py` skills through the `skillhost` binary: `skill build` detects the folder
//! and builds it unchanged, `call` runs it, and what the sandbox cannot do is reported with
//! the author's line. The fixtures are `tests/fixtures/mithai/`; all but the `skill build`
//! test use the components the tests package built from them.

use skillhost_tests::{Workspace, guests, http_server};
use std::path::{Path, PathBuf};
use std::process::Command;

fn skillhost(ws: &Workspace, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_skillhost"))
        .current_dir(ws.path())
        .args(args)
        .stdin(std::process::Stdio::null())
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code().unwrap_or(-1), text(&out.stdout), text(&out.stderr))
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/mithai").join(name)
}

/// Copies the author's files of fixture `name` into `ws/skills/name`, plus `wasm` if given.
fn copy_fixture(ws: &Workspace, name: &str, wasm: Option<&str>) -> PathBuf {
    let dir = ws.path().join("skills").join(name);
    std::fs::create_dir_all(&dir).unwrap();
    for entry in std::fs::read_dir(fixture(name)).unwrap().flatten().filter(|e| e.path().is_file()) {
        std::fs::copy(entry.path(), dir.join(entry.file_name())).unwrap();
    }
    if let Some(wasm) = wasm {
        std::fs::copy(wasm, dir.join("skill.wasm")).unwrap();
    }
    dir
}

/// `config.yaml` with `skills_extra` under `skills:`. Compiled components go to the cache
/// `SKILLHOST_CACHE_DIR` names (one for every test binary: a Python component takes long to
/// compile).
fn config(ws: &Workspace, skills_extra: &str) {
    let yaml = format!(
        "skills:\n  paths: [skills]\n  builtins: []\n{skills_extra}learning:\n  memory:\n    filesystem: {{path: mem}}\n\
         state:\n  filesystem: {{path: state}}\n"
    );
    std::fs::write(ws.path().join("config.yaml"), yaml).unwrap();
}

#[test]
fn skill_build_detects_a_mithai_folder_and_call_runs_it() {
    let ws = Workspace::new();
    let dir = copy_fixture(&ws, "services", None);
    let port = http_server(200, "ok");
    config(&ws, "  grants:\n    services:\n      http_hosts: ['127.0.0.1']\n");
    let (code, stdout, stderr) = skillhost(&ws, &["skill", "build", "skills/services"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stderr.contains("mithai shim"), "progress names the kind: {stderr}");
    assert!(stdout.contains("ok: services (3 tools)"), "{stdout}");
    for file in ["tools.py", "prompt.md", "skill.toml"] {
        let (built, original) = (std::fs::read(dir.join(file)).unwrap(), std::fs::read(fixture("services").join(file)));
        assert_eq!(built, original.unwrap(), "{file} is the author's, unchanged");
    }
    let mut left: Vec<String> =
        std::fs::read_dir(&dir).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
    left.sort();
    assert_eq!(left, ["prompt.md", "skill.toml", "skill.wasm", "tools.py"], "the build adds only the component");

    let input = format!(r#"{{"url": "http://127.0.0.1:{port}/"}}"#);
    let (code, stdout, stderr) = skillhost(&ws, &["call", "services__check_health", &input]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("\"healthy\": true") && stdout.contains("\"status\": 200"), "{stdout}");
}

#[test]
fn call_runs_a_memory_skill_with_its_grant() {
    let ws = Workspace::new();
    copy_fixture(&ws, "notes", Some(guests::MITHAI_NOTES));
    config(&ws, "  grants:\n    notes:\n      memory: true\n");
    let (code, stdout, stderr) = skillhost(&ws, &["call", "notes__record_incident", r#"{"summary": "db-2 down"}"#]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.contains("\"recorded\": true"), "{stdout}");
    assert_eq!(std::fs::read_to_string(ws.path().join("mem/incidents.md")).unwrap(), "- db-2 down\n");
}

/// `ctx["ask"]` (the shim over the `ask` import): a form asked on the terminal under `call`.
#[test]
fn ctx_ask_asks_whoever_drives_the_call() {
    let ws = Workspace::new();
    copy_fixture(&ws, "notes", Some(guests::MITHAI_NOTES));
    config(&ws, "");
    let bin = env!("CARGO_BIN_EXE_skillhost");
    let (code, screen) = skillhost_tests::run_on_terminal(ws.path(), &format!("{bin} call notes__ask_owner"), "Ada\n");
    assert_eq!(code, 0, "{screen}");
    assert!(screen.contains("Skill `notes` asks: Who owns these notes?"), "{screen}");
    let compact: String = screen.split_whitespace().collect();
    assert!(compact.contains(r#""owner":{"action":"accept","content":{"owner":"Ada"},"kind":"form"}"#), "{screen}");
}

/// The 1-based line of the fixture's `tools.py` holding `needle`.
fn line_of(name: &str, needle: &str) -> usize {
    let source = std::fs::read_to_string(fixture(name).join("tools.py")).unwrap();
    source.lines().position(|l| l.contains(needle)).unwrap() + 1
}

#[test]
fn sandbox_limits_are_reported_with_the_authors_line() {
    let ws = Workspace::new();
    copy_fixture(&ws, "sandbox_limits", Some(guests::MITHAI_SANDBOX_LIMITS));
    config(&ws, "");
    let (code, stdout, stderr) = skillhost(&ws, &["call", "sandbox_limits__uptime", "{}"]);
    assert_eq!(code, 1, "a failed result: {stdout}{stderr}");
    let at = format!("tools.py, line {}: subprocess.run(): ", line_of("sandbox_limits", "subprocess.run("));
    assert!(stdout.contains(&at) && stdout.contains("cannot start processes"), "{stdout}");
    let (code, _, stderr) = skillhost(&ws, &["mcp"]);
    assert_eq!(code, 2, "serving runs startup, whose thread stops the start: {stderr}");
    let at = format!("tools.py, line {}: threading.Thread.start(): ", line_of("sandbox_limits", "t.start()"));
    assert!(stderr.contains(&at) && stderr.contains("cannot start threads"), "{stderr}");
}

/// The spec's `bind(engine, adapter)`: `engine.mcp_manager` is `None` when the skill's
/// `MCP_TOOLS` and `MCP_SERVERS` name no server (the spec's is with none configured), so a
/// ported skill's `is None` branch is taken; a skill that names a server gets the accessor.
/// Both built from source by `skill build`, and called.
#[test]
fn bind_gets_no_mcp_manager_unless_the_skill_names_a_server() {
    let ws = Workspace::new();
    let tools = |facts: &str| {
        format!(
            "{facts}TOOLS = [{{\"name\": \"branch\", \"description\": \"The branch bind took.\", \
             \"input_schema\": {{\"type\": \"object\", \"properties\": {{}}}}}}]\n\n\
             _branch = \"bind never ran\"\n\n\n\
             def bind(engine, adapter):\n    global _branch\n    if engine.mcp_manager is None:\n        \
             _branch = \"no MCP\"\n    else:\n        _branch = \"MCP through \" + type(engine.mcp_manager).__name__\n\n\n\
             def handle(name, input, ctx):\n    return {{\"branch\": _branch}}\n"
        )
    };
    let skills = [
        ("plain", String::new()),
        ("ported", "MCP_TOOLS = [{\"server\": \"obs\", \"tools\": [\"get_logs\"]}]\n".into()),
    ];
    for (name, facts) in &skills {
        let dir = ws.path().join("skills").join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("tools.py"), tools(facts)).unwrap();
        std::fs::write(dir.join("prompt.md"), "Says which branch `bind` took.\n").unwrap();
    }
    config(&ws, "");
    let (code, stdout, stderr) = skillhost(&ws, &["skill", "build", "skills/plain", "skills/ported"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    for (name, branch) in [("plain", "no MCP"), ("ported", "MCP through McpManager")] {
        let (code, stdout, stderr) = skillhost(&ws, &["call", &format!("{name}__branch"), "{}"]);
        assert_eq!(code, 0, "{stdout}{stderr}");
        let out: serde_json::Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
        assert_eq!(out["branch"], branch, "{name}: {out}");
    }
}
