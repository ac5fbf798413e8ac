//! `skillhost init` through the binary, as a newcomer meets it: a project written in a missing
//! folder, an empty one and the current one, its example skill built in each language (real
//! toolchains: componentize-py, cargo, componentize-js), then `skill validate` and a call
//! with the variables the config names unset; an existing file refused with nothing written;
//! a missing toolchain named with every file still written.

use skillhost_tests::Workspace;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The repository root (this file is host/tests/init.rs).
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// Runs the binary in `dir` with `args`, as a user who has set nothing yet: (exit code,
/// stdout, stderr).
fn skillhost(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let out = base(dir, args).output().unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code().unwrap_or(-1), text(&out.stdout), text(&out.stderr))
}

fn base(dir: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_skillhost"));
    cmd.current_dir(dir)
        .args(args)
        .env_remove("RUST_LOG")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("SKILLHOST_UI_TOKEN")
        .env_remove("MITHAI_UI_TOKEN")
        // componentize-js as `.ci/run` installs it (`npm ci --prefix sdk-js`).
        .env("SKILLHOST_COMPONENTIZE_JS", repo().join("sdk-js"))
        // The guests' target dir: dependencies and the wasm std are built once for all.
        .env("CARGO_TARGET_DIR", repo().join("target/wasm-guests"));
    cmd
}

/// `init` with `args` in `cwd`, then in `project`: `skill validate` exits 0 with nothing set,
/// and the example tool answers.
fn init_validate_call(cwd: &Path, args: &[&str], project: &Path) {
    let (code, stdout, stderr) = skillhost(cwd, args);
    assert_eq!(code, 0, "{stdout}{stderr}");
    for file in ["config.yaml", ".env.example", ".gitignore", "skills/greeter/prompt.md", "skills/greeter/skill.wasm"] {
        assert!(project.join(file).is_file(), "{file}: {stdout}{stderr}");
    }
    assert!(stdout.contains("built greeter (1 tool: greeter__hello)"), "{stdout}");
    assert!(stdout.contains("ANTHROPIC_API_KEY") && stdout.contains("skillhost chat"), "the next commands: {stdout}");
    assert!(stdout.contains("skillhost run"), "{stdout}");
    let env = std::fs::read_to_string(project.join(".env.example")).unwrap();
    assert!(env.contains("ANTHROPIC_API_KEY=") && env.contains("SKILLHOST_UI_TOKEN="), "{env}");
    let ignored = std::fs::read_to_string(project.join(".gitignore")).unwrap();
    for line in [".env", ".skillhost/", "*.wasm"] {
        assert!(ignored.lines().any(|l| l == line), "{line}: {ignored}");
    }

    let (code, stdout, stderr) = skillhost(project, &["--config", "config.yaml", "skill", "validate"]);
    assert_eq!(code, 0, "validates right after init: {stdout}{stderr}");
    assert!(stdout.contains("ok: 4 skills"), "greeter and the three built-ins: {stdout}");
    let (code, stdout, stderr) = skillhost(project, &["call", "greeter__hello", r#"{"name": "Ada"}"#]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let out: serde_json::Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    assert_eq!(out["greeting"], "Hello, Ada.");
}

#[test]
fn python_into_a_missing_folder() {
    let ws = Workspace::new();
    let project = ws.path().join("agents/first");
    init_validate_call(ws.path(), &["init", "agents/first"], &project);
    let config = std::fs::read_to_string(project.join("config.yaml")).unwrap();
    assert!(config.contains("api_key: ${ANTHROPIC_API_KEY}") && config.contains("auth_token: ${SKILLHOST_UI_TOKEN}"));
    assert!(config.contains("type: api"), "{config}");
}

#[test]
fn rust_into_an_empty_folder() {
    let ws = Workspace::new();
    let project = ws.path().join("empty");
    std::fs::create_dir(&project).unwrap();
    init_validate_call(ws.path(), &["init", "empty", "--lang", "rust"], &project);
    let ignored = std::fs::read_to_string(project.join(".gitignore")).unwrap();
    assert!(ignored.lines().any(|l| l == "target/"), "{ignored}");
}

#[test]
fn js_into_the_current_folder() {
    let package = repo().join("sdk-js/node_modules/@bytecodealliance/componentize-js/package.json");
    assert!(package.is_file(), "componentize-js is missing: run `npm ci --prefix sdk-js` (as .ci/run does)");
    let ws = Workspace::new();
    init_validate_call(ws.path(), &["init", "--lang", "js"], ws.path());
}

#[test]
fn an_existing_file_is_named_and_nothing_is_written() {
    let ws = Workspace::new();
    std::fs::write(ws.path().join("config.yaml"), "mine\n").unwrap();
    std::fs::write(ws.path().join("notes.txt"), "keep\n").unwrap();
    let (code, stdout, stderr) = skillhost(ws.path(), &["init"]);
    assert_eq!(code, 2, "{stdout}{stderr}");
    assert!(stderr.contains("nothing was written") && stderr.contains("config.yaml"), "{stderr}");
    assert!(!stderr.contains(".gitignore"), "only what exists is named: {stderr}");
    let mut left: Vec<String> =
        std::fs::read_dir(ws.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    left.sort();
    assert_eq!(left, ["config.yaml", "notes.txt"], "nothing was written");
    assert_eq!(std::fs::read_to_string(ws.path().join("config.yaml")).unwrap(), "mine\n");

    std::fs::remove_file(ws.path().join("config.yaml")).unwrap();
    std::fs::create_dir_all(ws.path().join("skills/greeter")).unwrap();
    std::fs::write(ws.path().join("skills/greeter/app.py"), "mine").unwrap();
    std::fs::write(ws.path().join(".gitignore"), "mine").unwrap();
    let (code, _, stderr) = skillhost(ws.path(), &["init", "."]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains(".gitignore") && stderr.contains("skills/greeter"), "each one is named: {stderr}");
    assert!(!ws.path().join("config.yaml").exists() && !ws.path().join(".env.example").exists());

    let (code, _, stderr) = skillhost(ws.path(), &["init", "notes.txt"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("notes.txt is a file"), "{stderr}");
}

/// No componentize-js where the build looks (and offline, so nothing is installed): every
/// file is written, the message says what to install, and the exit code is 1.
#[test]
fn a_missing_toolchain_is_named_and_every_file_written() {
    let ws = Workspace::new();
    let cache = ws.path().join("no-cache");
    let out = base(ws.path(), &["init", "--lang", "js", "--offline"])
        .env_remove("SKILLHOST_COMPONENTIZE_JS")
        .env("XDG_CACHE_HOME", &cache)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("componentize-js is not installed") && stderr.contains("npm install"), "{stderr}");
    assert!(stderr.contains("skillhost skill build skills/greeter"), "how to finish: {stderr}");
    for file in ["config.yaml", ".env.example", ".gitignore", "skills/greeter/app.js", "skills/greeter/package.json"] {
        assert!(ws.path().join(file).is_file(), "{file}");
    }
    assert!(!ws.path().join("skills/greeter/skill.wasm").exists());
}
