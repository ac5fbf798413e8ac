//! Script tools (SKILL.md `tools:`, Mode C) through the real host: the `scripted` fixture
//! (`tests/fixtures/scripted`) with a Python, a JavaScript and a Rust script, built from
//! source once per run (componentize-py, componentize-js, cargo), beside the `probe`
//! component's tools (modes layer: body, component tools and script tools in one folder).

use serde_json::{Value, json};
use skillhost::engine::NoEvents;
use skillhost::sandbox::CallContext;
use skillhost::skills::SkillSet;
use skillhost::tools::{Level, NoScope, ScriptTools, ToolCall, ToolSource};
use skillhost_tests::person::{Does, Person};
use skillhost_tests::{Workspace, guests};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

/// The repository root.
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// Copies the fixture into `ws/skills/scripted` with the Rust probe as `scripts/probe.wasm`
/// and the `probe` component as `skill.wasm`.
fn copy_fixture(ws: &Workspace) -> PathBuf {
    let dir = ws.path().join("skills/scripted");
    std::fs::create_dir_all(dir.join("scripts")).unwrap();
    let from = repo().join("tests/fixtures/scripted");
    for file in ["SKILL.md", "skill.toml", "scripts/probe.py", "scripts/probe.js"] {
        std::fs::copy(from.join(file), dir.join(file)).unwrap();
    }
    std::fs::copy(guests::SCRIPT_PROBE, dir.join("scripts/probe.wasm")).unwrap();
    std::fs::copy(guests::PROBE, dir.join("skill.wasm")).unwrap();
    dir
}

/// The fixture, built once for the whole binary (`skillhost skill build`'s library path).
fn built() -> &'static Workspace {
    static BUILT: OnceLock<Workspace> = OnceLock::new();
    BUILT.get_or_init(|| {
        let ws = Workspace::new();
        let dir = copy_fixture(&ws);
        let componentize = repo().join("sdk-js/node_modules");
        assert!(componentize.is_dir(), "componentize-js is missing: run `npm ci --prefix sdk-js` (as .ci/run does)");
        // The build finds componentize-js in the skill's own node_modules/ first.
        std::os::unix::fs::symlink(componentize, dir.join("node_modules")).unwrap();
        let offline = std::env::var_os("SKILLHOST_OFFLINE").is_some();
        skillhost::skills::build::build(&dir, offline, &mut |m| eprintln!("{m}")).unwrap_or_else(|e| panic!("{e}"));
        ws
    })
}

/// The config. Compiled components go to the cache `SKILLHOST_CACHE_DIR` names, shared by
/// every test (and test binary).
fn config(extra: &str) -> String {
    let _ = built();
    format!("skills:\n  paths: [skills]\n  builtins: []\nstate:\n  filesystem: {{path: state}}\n{extra}")
}

async fn load() -> Arc<SkillSet> {
    let set = built().load(&config("")).await;
    assert!(set.problems.is_empty(), "{:?}", set.problems);
    Arc::new(set)
}

/// Calls `tool` through the script tools' source, as the engine does; (content, is_error).
async fn call(set: &Arc<SkillSet>, tool: &str, input: Value) -> (Value, bool) {
    let ctx = CallContext::standalone("test");
    let tools = ScriptTools::new(set.clone());
    let call = ToolCall { id: "c1", name: tool, input: &input, ctx: &ctx };
    if let Err(refused) = tools.check(tool, &input) {
        return (skillhost_tests::json(&refused.content), true);
    }
    let outcome = tools.execute(call, &NoScope).await;
    let content = serde_json::from_str(&outcome.content).unwrap_or(Value::String(outcome.content.clone()));
    (content, outcome.is_error)
}

fn probe(mode: &str, arg: &str, n: i64) -> Value {
    json!({"mode": mode, "arg": arg, "n": n})
}

#[tokio::test]
async fn every_language_gets_its_arguments_in_declared_order_and_stdout_is_the_result() {
    let set = load().await;
    for tool in ["scripted__py", "scripted__js", "scripted__rs"] {
        let (content, is_error) = call(&set, tool, json!({"n": 7, "arg": "two words", "mode": "argv"})).await;
        assert!(!is_error, "{tool}: {content}");
        assert_eq!(content, json!(["argv", "two words", "7"]), "{tool}");
    }
}

#[tokio::test]
async fn stderr_goes_to_the_log_and_a_nonzero_exit_is_an_error_naming_code_and_stderr() {
    let set = load().await;
    let script = set.skills["scripted"].script("py").unwrap();
    let outcome = script.run(&set.skills["scripted"].dir, &probe("argv", "x", 1)).await.unwrap();
    let stderr: Vec<&str> = outcome.logs.iter().filter(|r| r.source == "stderr").map(|r| r.message.as_str()).collect();
    assert_eq!(stderr, ["argv done"], "stderr is the log, not the result: {:?}", outcome.value);
    // Rust's std on wasm32-wasip2 exits through WASI 0.2.0's `exit`, which says only
    // success or failure: any non-zero code reaches the host as 1.
    for (tool, code) in [("scripted__py", 3), ("scripted__js", 3), ("scripted__rs", 1)] {
        let (content, is_error) = call(&set, tool, probe("fail", "disk full", 3)).await;
        assert!(is_error, "{tool}: {content}");
        let got = (content["kind"].as_str(), content["exit_code"].as_i64());
        assert_eq!(got, (Some("nonzero_exit"), Some(code)), "{tool}: {content}");
        assert!(content["error"].as_str().unwrap().contains(&format!("exited with code {code}")), "{tool}: {content}");
        assert!(content["stderr"].as_str().unwrap().contains("boom: disk full"), "{tool}: {content}");
    }
    let (content, _) = call(&set, "scripted__py", probe("nonsense", "x", 1)).await;
    let stderr = content["stderr"].as_str().unwrap();
    assert!(stderr.contains("scripts/probe.py\", line") && stderr.contains("unknown mode"), "a traceback: {stderr}");
}

#[tokio::test]
async fn input_is_checked_against_the_schema_from_args() {
    let set = load().await;
    let (content, _) = call(&set, "scripted__rs", json!({"mode": "argv", "arg": "x"})).await;
    assert_eq!(content["kind"], "invalid_input", "{content}");
    let (content, _) = call(&set, "scripted__rs", json!({"mode": "argv", "arg": "x", "n": "seven"})).await;
    assert_eq!(content["kind"], "invalid_input", "n is an integer: {content}");
    let (content, _) = call(&set, "scripted__rs", json!({"mode": "argv", "arg": "x", "n": 1, "more": 2})).await;
    assert_eq!(content["kind"], "invalid_input", "no other arguments: {content}");
    let schema = &set.skills["scripted"].script("js").unwrap().spec.schema;
    assert_eq!(schema["required"], json!(["mode", "arg", "n"]), "declared order");
    assert_eq!(schema["properties"]["n"], json!({"type": "integer", "description": "A number (fail's exit code)"}));
}

#[tokio::test]
async fn a_looping_script_ends_at_its_deadline() {
    let set = load().await;
    for tool in ["scripted__rs", "scripted__py", "scripted__js"] {
        let started = std::time::Instant::now();
        let (content, is_error) = call(&set, tool, probe("loop", "", 0)).await;
        assert!(is_error && content["kind"] == "deadline", "{tool}: {content}");
        assert!(started.elapsed() < std::time::Duration::from_secs(8), "{tool}: the 2 s deadline held");
    }
}

#[tokio::test]
async fn a_script_reads_its_own_folder_only_and_writes_nothing() {
    let set = load().await;
    let outside = built().path().join("skills/secret.txt");
    std::fs::write(&outside, "not for scripts").unwrap();
    for tool in ["scripted__rs", "scripted__py"] {
        let (content, is_error) = call(&set, tool, probe("read", "SKILL.md", 0)).await;
        assert!(!is_error && content.as_str().unwrap().contains("name: scripted"), "{tool}: {content}");
        let (content, _) = call(&set, tool, probe("read", "./scripts/probe.py", 0)).await;
        assert!(content.as_str().unwrap().contains("import sys"), "{tool}: {content}");
        for path in ["../secret.txt", outside.to_str().unwrap(), "/etc/passwd"] {
            let (content, is_error) = call(&set, tool, probe("read", path, 0)).await;
            assert!(is_error && content["kind"] == "nonzero_exit", "{tool} read {path}: {content}");
            assert!(content["stderr"].as_str().unwrap().contains("cannot read"), "{tool}: {content}");
        }
        let (content, is_error) = call(&set, tool, probe("write", "new.txt", 0)).await;
        assert!(is_error && content["stderr"].as_str().unwrap().contains("cannot write"), "{tool}: {content}");
        assert!(!set.skills["scripted"].dir.join("new.txt").exists());
    }
}

#[tokio::test]
async fn a_crashing_script_is_a_trap_quoting_its_panic() {
    let set = load().await;
    let (content, is_error) = call(&set, "scripted__rs", probe("panic", "out of cheese", 0)).await;
    assert!(is_error && content["kind"] == "trap", "{content}");
    assert!(content["error"].as_str().unwrap().contains("out of cheese"), "{content}");
}

#[tokio::test]
async fn modes_layer_body_component_tools_and_script_tools_in_one_skill() {
    let set = load().await;
    let skill = &set.skills["scripted"];
    assert!(skill.prompt.body.starts_with("# Scripted"), "{}", skill.prompt.body);
    assert!(skill.tool("echo").is_some() && skill.scripts.len() == 3, "{:?} {:?}", skill.tools, skill.scripts);
    let app = skillhost_tests::app_with(built(), &config(""), inspect()).await;
    let engine = &app.agents[0].engine;
    let names: Vec<String> = engine.tools().decls().into_iter().map(|d| d.name).collect();
    for name in ["scripted__echo", "scripted__py", "scripted__js", "scripted__rs"] {
        assert!(names.contains(&name.to_owned()), "{name} in {names:?}");
    }
}

fn inspect() -> skillhost::app::Options {
    use skillhost::app::{Agents, Options};
    Options { mode: skillhost::skills::LoadMode::Inspect, llm: false, agents: Agents::TopLevel }
}

#[tokio::test]
async fn script_tools_need_approval_unless_the_operator_lowers_them() {
    for (extra, asked) in [("", true), ("human:\n  overrides:\n    scripted__rs: null\n", false)] {
        let app = skillhost_tests::app_with(built(), &config(extra), inspect()).await;
        let engine = &app.agents[0].engine;
        let counterpart = Person::new(engine, Does::Approve);
        let call = ("c1".to_owned(), "scripted__rs".to_owned(), probe("argv", "a", 1));
        let ctx = CallContext::standalone("test");
        let record = engine.call_tool(call, &ctx, &NoEvents, &counterpart, &engine.tool_budget()).await;
        assert!(record.executed, "{:?}", record.outcome);
        assert_eq!(record.outcome.content.trim(), r#"["argv","a","1"]"#);
        let requests: Vec<(Value, Value)> =
            counterpart.shown().into_iter().map(|a| (a["tool_name"].clone(), a["level"].clone())).collect();
        if asked {
            assert_eq!(requests, [(json!("scripted__rs"), json!("approve"))], "destructive by default");
        } else {
            assert!(requests.is_empty() && record.level == Level::Auto, "lowered by human.overrides: {requests:?}");
        }
    }
    // Nobody to ask: refused, and the script does not run.
    let app = skillhost_tests::app_with(built(), &config(""), inspect()).await;
    let engine = &app.agents[0].engine;
    let call = ("c1".to_owned(), "scripted__rs".to_owned(), probe("write", "x", 1));
    let ctx = CallContext::standalone("test");
    let record =
        engine.call_tool(call, &ctx, &NoEvents, &skillhost::engine::NonInteractive, &engine.tool_budget()).await;
    assert!(!record.executed && record.outcome.is_error, "{:?}", record.outcome);
}

#[tokio::test]
async fn other_interpreters_and_unbuilt_scripts_are_refused_at_load_naming_the_script() {
    let ws = Workspace::new();
    let dir = ws.path().join("skills/shelly");
    std::fs::create_dir_all(dir.join("scripts")).unwrap();
    std::fs::write(dir.join("scripts/run.sh"), "#!/bin/sh\necho hi\n").unwrap();
    let md = "---\nname: shelly\ndescription: Shell.\ntools:\n  run:\n    description: Runs it.\n    script: scripts/run.sh\n---\nbody\n";
    std::fs::write(dir.join("SKILL.md"), md).unwrap();
    copy_fixture(&ws); // never built: its .py and .js have no component yet
    let set = ws.load("skills:\n  paths: [skills]\n  builtins: []\nstate:\n  filesystem: {path: state}\n").await;
    assert!(set.skills.is_empty(), "{:?}", set.skills.keys());
    let text: Vec<String> = set.problems.iter().map(|p| p.to_string()).collect();
    let shelly = text.iter().find(|p| p.contains("shelly")).unwrap();
    assert!(shelly.contains("`scripts/run.sh`") && shelly.contains("`.sh` script cannot run here"), "{shelly}");
    assert!(shelly.contains("Python (.py)") && shelly.contains("wasm32-wasip2"), "what to do instead: {shelly}");
    let scripted = text.iter().find(|p| p.contains("scripted")).unwrap();
    assert!(scripted.contains("`scripts/probe.py` is not built: run `skillhost skill build"), "{scripted}");
}

#[tokio::test]
async fn a_script_changed_after_its_build_must_be_rebuilt() {
    let ws = Workspace::new();
    let dir = copy_fixture(&ws);
    let built_dir = built().path().join("skills/scripted/.build");
    copy_tree(&built_dir, &dir.join(".build"));
    let set = ws.load(&config("")).await;
    assert!(set.problems.is_empty(), "{:?}", set.problems);
    let later = std::time::SystemTime::now() + std::time::Duration::from_secs(60);
    std::fs::File::options().append(true).open(dir.join("scripts/probe.js")).unwrap().set_modified(later).unwrap();
    let set = ws.load(&config("")).await;
    let problem = set.problems.first().map(|p| p.to_string()).unwrap_or_default();
    assert!(problem.contains("`scripts/probe.js` changed after its build"), "{problem}");
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap().flatten() {
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}
