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
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

fn cli_workspace() -> Workspace {
    let ws = Workspace::new();
    let manifest =
        std::fs::read_to_string(format!("{}/../skills/http_checker/skill.toml", env!("CARGO_MANIFEST_DIR"))).unwrap();
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
    // Without `sandbox.cache_dir` nor SKILLHOST_CACHE_DIR (which cargo sets for the tests),
    // compiled components are cached beside the config.
    let status = Command::new(env!("CARGO_BIN_EXE_skillhost"))
        .current_dir(ws.path())
        .args(["skill", "list"])
        .env_remove("SKILLHOST_CACHE_DIR")
        .output()
        .unwrap();
    assert!(status.status.success(), "{}", String::from_utf8_lossy(&status.stderr));
    let cached = ws.path().join(".skillhost/cache").read_dir().unwrap().flatten();
    assert!(
        cached.map(|e| e.path()).any(|p| p.extension().is_some_and(|x| x == "cwasm")),
        "compiled components are cached"
    );
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
    assert!(
        stdout.contains("http_checker__check_url") && stdout.contains("hooks_all__dyn_tool  [approval: dynamic]"),
        "{stdout}"
    );
    assert!(stdout.contains("hooks: resolve-human"), "{stdout}");
    // The built-ins: shell (native) and memory (embedded); the folder's http_checker replaces
    // the built-in one.
    assert!(
        stdout.contains("shell  (native, (built in: shell))")
            && stdout.contains("shell__run_command  [approval: dynamic]"),
        "{stdout}"
    );
    assert!(stdout.contains("memory  (component, (built in: memory))"), "{stdout}");
    assert!(stdout.contains("http_checker  (component, ") && !stdout.contains("(built in: http_checker)"), "{stdout}");
    let (code, stdout, _) = skillhost(&ws, &["skill", "validate"], "");
    assert_eq!(code, 0);
    assert!(stdout.contains("ok: 4 skills"), "{stdout}");

    ws.add_skill("skills", "dup_tool", guests::DUP_TOOL, "");
    ws.add_skill("skills", "bad_schema", guests::BAD_SCHEMA, "");
    let (code, _, stderr) = skillhost(&ws, &["skill", "validate"], "");
    assert_eq!(code, 1);
    let lines: Vec<_> = stderr.lines().filter(|l| l.starts_with("skill `")).collect();
    assert_eq!(lines.len(), 2, "one line per problem: {stderr}");
}

#[test]
fn validate_prints_one_line_per_problem() {
    let ws = cli_workspace();
    // Both break the TOML parser, whose own rendering spans four lines (excerpt and caret).
    ws.add_skill("skills", "bad_toml", guests::PROBE, "[limits]\nfuel = \n");
    ws.add_skill("skills", "bad_type", guests::PROBE, "[capabilities]\nmemory = \"yes\"\n");
    let (code, stdout, stderr) = skillhost(&ws, &["skill", "validate"], "");
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert!(stdout.contains("2 problem(s)"), "{stdout}");
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 2, "one line per problem and nothing else: {stderr}");
    let bad_toml = lines.iter().find(|l| l.starts_with("skill `bad_toml`: ")).expect("bad_toml reported");
    assert!(bad_toml.contains("skill.toml: line 2, column 8: "), "{bad_toml}");
    let bad_type = lines.iter().find(|l| l.starts_with("skill `bad_type`: ")).expect("bad_type reported");
    assert!(bad_type.contains("skill.toml: line 2, column 10: ") && bad_type.contains("bool"), "{bad_type}");
}

#[test]
fn bad_config_is_named_with_key_and_line() {
    let ws = cli_workspace();
    std::fs::write(ws.path().join("bad.yaml"), "skills:\n  paths: [skills]\n  grant: {}\n").unwrap();
    let (code, _, stderr) = skillhost(&ws, &["--config", "bad.yaml", "skill", "list"], "");
    assert_eq!(code, 2);
    assert!(stderr.contains("grant") && stderr.contains("line 3"), "{stderr}");
}

/// The repository root (this file is host/tests/cli.rs).
fn repo() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

#[test]
fn skill_build_python_then_call() {
    let ws = Workspace::new();
    let dir = ws.path().join("skills/word_stats");
    std::fs::create_dir_all(&dir).unwrap();
    let source = repo().join("skills/word_stats");
    for file in ["app.py", "prompt.md", "skill.toml"] {
        std::fs::copy(source.join(file), dir.join(file)).unwrap();
    }
    let (code, stdout, stderr) = skillhost(&ws, &["skill", "build", "skills/word_stats"], "");
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stderr.contains("componentize-py"), "progress is printed: {stderr}");
    assert!(stdout.contains("ok: word_stats (1 tools)"), "{stdout}");
    let (code, stdout, stderr) = skillhost(&ws, &["call", "word_stats__count_words", r#"{"text": "a b a"}"#], "");
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("\"words\": 3"), "{stdout}");
}

#[test]
fn skill_build_rust_shows_compiler_errors_then_builds() {
    let ws = Workspace::new();
    let dir = ws.path().join("skills/tiny");
    std::fs::create_dir_all(dir.join("src")).unwrap();
    let sdk = repo().join("skill-sdk");
    // Same profile and lock file as tests/guests, and its target dir: dependencies and the
    // wasm std built for the guests are reused instead of rebuilt.
    std::fs::write(
        dir.join("Cargo.toml"),
        format!(
            "[package]\nname = \"tiny\"\nversion = \"0.1.0\"\nedition = \"2024\"\n\n[lib]\ncrate-type = [\"cdylib\"]\n\n\
             [dependencies]\nskill-sdk = {{ path = {:?} }}\n\n[workspace]\n\n[profile.release]\nopt-level = \"s\"\npanic = \"abort\"\n",
            sdk.display().to_string()
        ),
    )
    .unwrap();
    std::fs::copy(repo().join("tests/guests/Cargo.lock"), dir.join("Cargo.lock")).unwrap();
    std::fs::write(dir.join("prompt.md"), "Say hello.").unwrap();
    let target = repo().join("target/wasm-guests");
    let build = |ws: &Workspace| {
        let out = Command::new(env!("CARGO_BIN_EXE_skillhost"))
            .current_dir(ws.path())
            .args(["skill", "build", "skills/tiny"])
            .env("CARGO_TARGET_DIR", &target)
            // As `.ci/run` exports it on a machine without the rustup target: `1` means yes.
            .env("SKILLHOST_OFFLINE", "1")
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };

    std::fs::write(dir.join("src/lib.rs"), "fn broken() -> u32 { \"not a number\" }\n").unwrap();
    let (code, stdout, stderr) = build(&ws);
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert!(stderr.contains("mismatched types"), "the compiler's message is shown: {stderr}");
    assert!(!dir.join("skill.wasm").exists());

    std::fs::write(
        dir.join("src/lib.rs"),
        r#"use skill_sdk::{json, Context, Error, Skill, Tool, ToolResult, Value};
struct Tiny;
impl Skill for Tiny {
    fn tools() -> Vec<Tool> {
        vec![Tool::with_schema("hello", "Greet.", json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}))]
    }
    fn handle(_name: &str, input: Value, _ctx: &Context) -> Result<ToolResult, Error> {
        Ok(ToolResult::ok(json!({ "greeting": format!("hello {}", input["name"].as_str().unwrap_or("?")) })))
    }
}
skill_sdk::export!(Tiny);
"#,
    )
    .unwrap();
    let (code, stdout, stderr) = build(&ws);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.contains("ok: tiny (1 tools)"), "{stdout}");
    let (code, stdout, _) = skillhost(&ws, &["call", "tiny__hello", r#"{"name": "sandbox"}"#], "");
    assert_eq!(code, 0);
    assert!(stdout.contains("hello sandbox"), "{stdout}");
}

/// Runs `skillhost call ...` on a pseudo-terminal (util-linux `script`), typing `typed`.
fn call_on_terminal(ws: &Workspace, tool: &str, input: &str, typed: &str) -> (i32, String) {
    let command = format!("{} call {tool} '{input}'", env!("CARGO_BIN_EXE_skillhost"));
    skillhost_tests::run_on_terminal(ws.path(), &command, typed)
}

#[test]
fn terminal_approval_and_confirmation() {
    let ws = cli_workspace();
    let confirm = r#"{"level": "confirm"}"#;
    let (code, out) = call_on_terminal(&ws, "hooks_all__dyn_tool", confirm, "CONFIRM\n");
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("Type CONFIRM") && out.contains("\"tool\": \"dyn_tool\""), "{out}");
    let (code, out) = call_on_terminal(&ws, "hooks_all__dyn_tool", confirm, "y\n");
    assert_eq!(code, 1, "confirm needs the challenge, not y: {out}");
    assert!(out.contains("was not run") && !out.contains("\"tool\""), "{out}");
    let approve = r#"{"level": "approve"}"#;
    let (code, out) = call_on_terminal(&ws, "hooks_all__dyn_tool", approve, "y\n");
    assert_eq!(code, 0, "{out}");
    let (code, out) = call_on_terminal(&ws, "hooks_all__dyn_tool", approve, "n\n");
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("was not run"), "{out}");
}

#[test]
fn a_variable_cannot_add_to_the_config() {
    let ws = cli_workspace();
    let port = http_server(200, "ok");
    let config = "skills:\n  paths: [skills]\n  grants:\n    http_checker:\n      http_hosts: [${HOSTS}]\n";
    std::fs::write(ws.path().join("config.yaml"), config).unwrap();
    let input = format!(r#"{{"url": "http://127.0.0.1:{port}/"}}"#);
    let call = |hosts: &str| {
        let mut child = Command::new(env!("CARGO_BIN_EXE_skillhost"));
        child.current_dir(ws.path()).args(["call", "http_checker__check_url", &input]).env("HOSTS", hosts);
        let out = child.env_remove("RUST_LOG").output().unwrap();
        (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let (stdout, stderr) = call("127.0.0.1");
    assert!(stdout.contains("\"healthy\": true"), "the variable grants one host: {stdout}{stderr}");
    // Substituted into the text, this would be a list of two hosts, or a comment.
    for hostile in ["evil.example, 127.0.0.1", "evil.example] # 127.0.0.1", "x\n        - 127.0.0.1"] {
        let (stdout, stderr) = call(hostile);
        assert!(!stdout.contains("\"healthy\": true"), "{hostile:?} is one host name, not 127.0.0.1: {stdout}{stderr}");
    }
}

#[test]
fn dot_env_feeds_config_variables_and_unset_ones_warn() {
    let ws = cli_workspace();
    let port = http_server(200, "ok");
    std::fs::write(ws.path().join(".env"), "CHECK_HOST=127.0.0.1\n").unwrap();
    std::fs::write(
        ws.path().join("config.yaml"),
        "bot:\n  name: ${BOT_NAME_UNSET}\nskills:\n  paths: [skills]\n  grants:\n    http_checker:\n      http_hosts: [\"${CHECK_HOST}\"]\n",
    )
    .unwrap();
    let input = format!(r#"{{"url": "http://127.0.0.1:{port}/"}}"#);
    let (code, stdout, stderr) = skillhost(&ws, &["call", "http_checker__check_url", &input], "");
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.contains("\"healthy\": true"), "{stdout}");
    assert!(stderr.contains("BOT_NAME_UNSET") && stderr.contains("line 2"), "{stderr}");
}

#[test]
fn skill_list_and_call_do_not_run_startup() {
    let ws = cli_workspace();
    ws.add_skill("skills", "startup_fail", guests::STARTUP_FAIL, "");
    let (code, stdout, stderr) = skillhost(&ws, &["skill", "list"], "");
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.contains("startup_fail"), "{stdout}");
    let (code, stdout, stderr) = skillhost(&ws, &["call", "startup_fail__x"], "");
    assert_eq!(code, 0, "startup belongs to an engine that starts serving: {stdout}{stderr}");
    let (code, _, stderr) = skillhost(&ws, &["mcp"], "");
    assert_eq!(code, 2, "serving runs it, and its failure stops the start: {stderr}");
    assert!(stderr.contains("missing api_key"), "{stderr}");
}
