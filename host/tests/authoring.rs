//! Skill authoring through the `skillhost` binary, as a newcomer meets it: `skill new` in each
//! language, then `skill build` (real toolchains: cargo, componentize-py, componentize-js),
//! `skill validate` and `call`; a failing build per language names the author's file and
//! line. SKILL.md frontmatter and the prompt-size cap as `skill list` / `validate` report them.
//!
//! Builds are slow, so each language builds once or twice: the Rust build shares the test
//! guests' target dir (`target/wasm-guests`), and the failing builds stop before compiling.

use skillhost_tests::Workspace;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The repository root (this file is host/tests/authoring.rs).
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// Runs the binary in `ws` with `args`; (exit code, stdout, stderr).
fn skillhost(ws: &Workspace, args: &[&str]) -> (i32, String, String) {
    let componentize_js = repo().join("sdk-js");
    let out = Command::new(env!("CARGO_BIN_EXE_skillhost"))
        .current_dir(ws.path())
        .args(args)
        .env_remove("RUST_LOG")
        // componentize-js as `.ci/run` installs it (`npm ci --prefix sdk-js`).
        .env("SKILLHOST_COMPONENTIZE_JS", &componentize_js)
        // The guests' target dir: dependencies and the wasm std are built once for all.
        .env("CARGO_TARGET_DIR", repo().join("target/wasm-guests"))
        .output()
        .unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code().unwrap_or(-1), text(&out.stdout), text(&out.stderr))
}

fn js_toolchain_installed() {
    let package = repo().join("sdk-js/node_modules/@bytecodealliance/componentize-js/package.json");
    assert!(package.is_file(), "componentize-js is missing: run `npm ci --prefix sdk-js` (as .ci/run does)");
}

/// `skill new NAME --lang LANG`, then `skill build`, `skill validate` and a call of `hello`.
fn new_build_call(lang: &str) -> (Workspace, PathBuf) {
    let ws = Workspace::new();
    let name = format!("hi_{lang}");
    let (code, stdout, stderr) = skillhost(&ws, &["skill", "new", &name, "--lang", lang]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let dir = ws.path().join("skills").join(&name);
    let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
    assert!(readme.contains(&format!("skillhost call {name}__hello '{{\"name\": \"Ada\"}}'")), "{readme}");
    // A compile cache of its own: `skill build` fills it, so that a server starts warm.
    std::fs::write(ws.path().join("config.yaml"), "sandbox:\n  cache_dir: cache\n").unwrap();
    let (code, stdout, stderr) = skillhost(&ws, &["skill", "build", &format!("skills/{name}")]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.contains(&format!("ok: {name} (1 tools)")), "{stdout}");
    let compiled = std::fs::read_dir(ws.path().join("cache"))
        .map_or(0, |entries| entries.flatten().filter(|e| e.path().extension().is_some_and(|x| x == "cwasm")).count());
    assert!(compiled >= 1, "`skill build` compiled the skill into the cache");
    let (code, stdout, stderr) = skillhost(&ws, &["skill", "validate"]);
    assert_eq!(code, 0, "the new skill validates unchanged: {stdout}{stderr}");
    let (code, stdout, stderr) =
        skillhost(&ws, &["call", &format!("{name}__hello"), r#"{"name": "Ada", "excited": true}"#]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let out: serde_json::Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    assert_eq!(out["greeting"], "Hello, Ada!");
    let (code, stdout, _) = skillhost(&ws, &["call", &format!("{name}__hello"), r#"{"excited": true}"#]);
    assert_ne!(code, 0, "the typed declaration's schema requires `name`: {stdout}");
    let out: serde_json::Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    assert!(out["error"].as_str().unwrap().contains("\"name\" is a required property"), "{out}");
    (ws, dir)
}

/// Rewrites `file` in `dir` with `edit`, builds, and returns the failed build's stderr.
fn failing_build(ws: &Workspace, dir: &Path, file: &str, edit: impl Fn(String) -> String) -> String {
    let path = dir.join(file);
    std::fs::write(&path, edit(std::fs::read_to_string(&path).unwrap())).unwrap();
    let (code, stdout, stderr) = skillhost(ws, &["skill", "build", &dir.display().to_string()]);
    assert_eq!(code, 1, "{stdout}{stderr}");
    stderr
}

#[test]
fn python_new_build_call_and_a_traceback_naming_the_line() {
    let (ws, dir) = new_build_call("python");
    let stderr = failing_build(&ws, &dir, "app.py", |text| format!("{text}\n\ndef broken(:\n    pass\n"));
    let at = format!("File \"{}\", line", dir.canonicalize().unwrap().join("app.py").display());
    assert!(stderr.contains(&at) && stderr.contains("SyntaxError"), "the traceback names app.py: {stderr}");
    assert!(!stderr.contains("Stack backtrace"), "componentize-py's own backtrace is left out: {stderr}");
}

#[test]
fn js_new_build_call_and_a_syntax_error_naming_the_line() {
    js_toolchain_installed();
    let (ws, dir) = new_build_call("js");
    let lines = std::fs::read_to_string(dir.join("app.js")).unwrap().lines().count();
    let stderr = failing_build(&ws, &dir, "app.js", |text| format!("{text}export const broken = [1,, 2;\n"));
    assert!(stderr.contains(&format!("app.js:{}:", lines + 1)), "the error names app.js and its line: {stderr}");
}

#[test]
fn rust_new_build_call_and_a_compiler_error_naming_the_line() {
    let (ws, dir) = new_build_call("rust");
    let stderr =
        failing_build(&ws, &dir, "src/lib.rs", |text| text.replace("Ok(ToolResult::ok(", "Ok(ToolResult::okk("));
    assert!(stderr.contains("src/lib.rs:"), "the compiler's message names the file: {stderr}");
    assert!(stderr.contains("okk"), "{stderr}");
}

#[test]
fn the_js_example_skill_builds_and_answers_with_its_hook() {
    js_toolchain_installed();
    let ws = Workspace::new();
    let dir = ws.path().join("skills/unit_convert");
    std::fs::create_dir_all(&dir).unwrap();
    for file in ["app.js", "prompt.md", "skill.toml"] {
        std::fs::copy(repo().join("skills/unit_convert").join(file), dir.join(file)).unwrap();
    }
    let (code, stdout, stderr) = skillhost(&ws, &["skill", "build", "skills/unit_convert"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stderr.contains("componentize-js"), "progress is printed: {stderr}");
    let (code, stdout, stderr) = skillhost(&ws, &["skill", "list"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("hooks: tool-target"), "exactly the exported hook: {stdout}");
    let (code, stdout, stderr) =
        skillhost(&ws, &["call", "unit_convert__convert", r#"{"value": 100, "from": "c", "to": "f"}"#]);
    assert_eq!(code, 0, "{stderr}");
    let out: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(out["result"], 212.0, "{out}");
    let (code, stdout, _) =
        skillhost(&ws, &["call", "unit_convert__convert", r#"{"value": 1, "from": "kg", "to": "km"}"#]);
    assert_eq!(code, 1, "a ToolError is a failed result: {stdout}");
    assert!(stdout.contains("cannot convert kg (mass) to km (length)"), "{stdout}");
}

#[test]
fn new_refuses_bad_names_and_existing_folders() {
    let ws = Workspace::new();
    for bad in ["Hello", "a__b", "trailing_", "_lead", "web-search"] {
        let (code, _, stderr) = skillhost(&ws, &["skill", "new", bad, "--lang", "python"]);
        assert_eq!(code, 2, "{bad}: {stderr}");
        assert!(stderr.contains("invalid skill name"), "{stderr}");
    }
    let dir = ws.path().join("mine");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("notes.txt"), "keep me").unwrap();
    let (code, _, stderr) = skillhost(&ws, &["skill", "new", "mine", "--lang", "js", "--dir", "mine"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("already exists"), "{stderr}");
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1, "nothing was written");
    assert!(!ws.path().join("skills").exists());
}

#[test]
fn skill_md_frontmatter_and_the_prompt_cap_as_the_cli_reports_them() {
    let ws = Workspace::new();
    let skill = ws.path().join("skills/pdf");
    std::fs::create_dir_all(skill.join("scripts")).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "--- \nname: PDF Tools\ndescription: >-\n  Extract text and tables\n  from PDF files.\nlicense: MIT\n\
         metadata:\n  extract:\n    description: not the skill's description\n---\nSee reference.md.\n",
    )
    .unwrap();
    std::fs::write(skill.join("reference.md"), "details").unwrap();
    std::fs::write(skill.join("scripts/extract.py"), "print(1)").unwrap();
    let broken = ws.path().join("skills/broken");
    std::fs::create_dir_all(&broken).unwrap();
    std::fs::write(broken.join("SKILL.md"), "---\nname: broken\n---\nbody").unwrap();
    let huge = ws.path().join("skills/huge");
    std::fs::create_dir_all(&huge).unwrap();
    std::fs::write(huge.join("prompt.md"), "x".repeat(300 * 1024)).unwrap();

    let (code, stdout, stderr) = skillhost(&ws, &["skill", "list"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("pdf_tools  (prompt-only"), "the name is slugified: {stdout}");
    assert!(stdout.contains("Extract text and tables from PDF files."), "{stdout}");
    assert!(!stdout.contains("not the skill's description"), "{stdout}");
    assert!(stderr.contains("SKILL.md") && stderr.contains("no `description`"), "one skill's error: {stderr}");
    assert!(stderr.contains("prompt.md") && stderr.contains("skills.max_prompt_bytes (262144 bytes)"), "{stderr}");

    std::fs::write(ws.path().join("config.yaml"), "skills:\n  max_prompt_bytes: 400000\n").unwrap();
    let (code, stdout, stderr) = skillhost(&ws, &["skill", "validate"]);
    assert_eq!(code, 1, "broken is still a problem: {stdout}");
    assert!(!stderr.contains("max_prompt_bytes"), "the operator raised the cap: {stderr}");
}

/// The JS SDK's `ask` (componentize-js): under `call` on a terminal the form is asked there
/// and its answer read; without one, every request is unavailable with why.
#[test]
fn a_js_skill_asks_through_its_sdk() {
    js_toolchain_installed();
    let ws = Workspace::new();
    let dir = ws.path().join("skills/asker");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("skill.toml"), "[build]\nkind = \"js\"\njs_entry = \"app.js\"\n").unwrap();
    std::fs::write(dir.join("prompt.md"), "Asks for a name.\n").unwrap();
    let app = r#"import { ask, lists, tasks, tool, string } from "./skillhost.js";
const schema = { type: "object", properties: { name: { type: "string" } }, required: ["name"] };
export const tools = [
  tool({
    name: "ask_name",
    description: "Asks for a name.",
    input: { message: string("What to ask.") },
    run({ message }) {
      return ask.ask({ name: ask.form(message, schema), capital: ask.sampling("Capital of France?", { maxTokens: 20 }) });
    },
  }),
  tool({
    name: "touch",
    description: "Says its tools changed.",
    input: {},
    run() {
      lists.changed("tools");
      return { told: true };
    },
  }),
  tool({
    name: "later",
    description: "Goes on as an MCP task when it can.",
    input: {},
    run() {
      return { detached: tasks.detach() };
    },
  }),
];
export function requiredClientCapabilities() {
  return { ask_name: ["elicitation"] };
}
export function taskSupport() {
  return { later: "may_detach" };
}
"#;
    std::fs::write(dir.join("app.js"), app).unwrap();
    let (code, stdout, stderr) = skillhost(&ws, &["skill", "build", "skills/asker"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let (code, stdout, stderr) = skillhost(&ws, &["call", "asker__ask_name", r#"{"message": "Who is there?"}"#]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let out: serde_json::Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    assert_eq!(out["name"]["kind"], "unavailable", "{out}");
    assert!(out["capital"]["why"].as_str().unwrap().contains("no model can be sampled here"), "{out}");

    let bin = env!("CARGO_BIN_EXE_skillhost");
    let command = format!("{bin} call asker__ask_name '{{\"message\": \"Who is there?\"}}'");
    let (code, screen) = skillhost_tests::run_on_terminal(ws.path(), &command, "Ada\n");
    assert_eq!(code, 0, "{screen}");
    assert!(screen.contains("Skill `asker` asks: Who is there?"), "{screen}");
    assert!(screen.contains(r#""content": {"#) && screen.contains(r#""name": "Ada""#), "{screen}");
    assert!(screen.contains(r#""action": "accept""#), "{screen}");
    // Its `requiredClientCapabilities` is the `client-capabilities` hook, read at load.
    let (code, stdout, stderr) = skillhost(&ws, &["skill", "list"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("hooks: client-capabilities, task-support"), "{stdout}");
    // `lists.changed` links and runs (under `call` nothing serves: a no-op).
    let (code, stdout, stderr) = skillhost(&ws, &["call", "asker__touch", "{}"]);
    assert_eq!((code, stdout.contains(r#""told": true"#)), (0, true), "{stdout}{stderr}");
    // `tasks.detach` links and runs; under `call` the call cannot become a task.
    let (code, stdout, stderr) = skillhost(&ws, &["call", "asker__later", "{}"]);
    assert_eq!((code, stdout.contains(r#""detached": false"#)), (0, true), "{stdout}{stderr}");
}
