//! Skill folders: every load error names skill, file and problem while the others load;
//! precedence across paths; is-available and startup; every hook present, absent, trapping.

use serde_json::json;
use skillhost::config::OverrideLevel;
use skillhost::engine::gate;
use skillhost::sandbox::bindings::types::{PreflightKind, Target};
use skillhost::skills::{LoadMode, Skill};
use skillhost::tools::Level;
use skillhost_tests::{Workspace, ctx, guests};
use std::collections::BTreeMap;

/// The skills folder alone: the built-ins are tested in `builtins.rs`.
const PATHS: &str = "skills:\n  paths: [skills]\n  builtins: []\n";

fn problem_for<'a>(set: &'a skillhost::skills::SkillSet, skill: &str) -> &'a skillhost::skills::LoadProblem {
    set.problems
        .iter()
        .find(|p| p.skill == skill)
        .unwrap_or_else(|| panic!("no problem for {skill}: {:?}", set.problems))
}

#[tokio::test]
async fn each_load_error_names_skill_file_and_problem_and_others_load() {
    let ws = Workspace::new();
    ws.add_skill("skills", "good", guests::PROBE, "");
    ws.add_skill("skills", "bad_schema", guests::BAD_SCHEMA, "");
    ws.add_skill("skills", "dup_tool", guests::DUP_TOOL, "");
    ws.add_skill("skills", "wrong_version", guests::WRONG_VERSION, "");
    ws.add_skill("skills", "bad_manifest", guests::PROBE, "[capabilities]\nnetwork = true\n");
    let garbage = ws.add_skill("skills", "garbage", guests::PROBE, "");
    std::fs::write(garbage.join("skill.wasm"), b"this is not wasm").unwrap();
    let core = ws.add_skill("skills", "core_module", guests::PROBE, "");
    std::fs::write(core.join("skill.wasm"), b"\0asm\x01\0\0\0").unwrap();
    let no_prompt = ws.add_skill("skills", "no_prompt", guests::PROBE, "");
    std::fs::remove_file(no_prompt.join("prompt.md")).unwrap();
    let unbuilt = ws.path().join("skills/unbuilt");
    std::fs::create_dir_all(&unbuilt).unwrap();
    std::fs::write(unbuilt.join("Cargo.toml"), "[package]\nname = \"unbuilt\"\n").unwrap();
    std::fs::write(unbuilt.join("prompt.md"), "Unbuilt.").unwrap();
    ws.add_skill("skills", "human", guests::PROBE, "");
    // Names: the issue's `cx_` + `y` / `cx` + `_y` pair (both `cx___y`), and names outside
    // snake_case, from a folder or from SKILL.md's `name` (slugified).
    ws.add_skill("skills", "cx_", guests::PROBE, "");
    ws.add_skill("skills", "cx", guests::BAD_TOOL_NAME, "");
    ws.add_skill("skills", "2fa", guests::PROBE, "");
    let slug = ws.add_skill("skills", "slug", guests::PROBE, "");
    std::fs::remove_file(slug.join("prompt.md")).unwrap();
    std::fs::write(slug.join("SKILL.md"), "---\nname: 2fa-tools\ndescription: d\n---\nbody\n").unwrap();

    let set = ws.load(PATHS).await;
    assert_eq!(set.skills.keys().collect::<Vec<_>>(), ["good"], "{:?}", set.problems);
    let expect = [
        ("bad_schema", "skill.wasm", "input schema"),
        ("dup_tool", "skill.wasm", "duplicate tool name"),
        ("wrong_version", "skill.wasm", "built against skillhost:skill@0.0.9"),
        ("bad_manifest", "skill.toml", "network"),
        ("garbage", "skill.wasm", "not a valid WebAssembly component"),
        ("core_module", "skill.wasm", "core wasm module"),
        ("no_prompt", "prompt.md", "missing"),
        ("unbuilt", "skill.wasm", "skillhost skill build"),
        ("human", "prompt.md", "reserved"),
        ("cx_", "prompt.md", "skill name `cx_` ends with `_`"),
        ("cx", "skill.wasm", "tool name `_y` does not start with a lowercase letter"),
        ("2fa", "prompt.md", "does not start with a lowercase letter"),
        ("2fa_tools", "SKILL.md", "does not start with a lowercase letter"),
    ];
    for (skill, file, text) in expect {
        let problem = problem_for(&set, skill);
        assert!(problem.file.ends_with(file), "{problem}");
        assert!(problem.message.contains(text), "{skill}: expected `{text}` in {problem}");
        assert!(problem.to_string().starts_with(&format!("skill `{skill}`:")));
    }
    assert_eq!(set.problems.len(), expect.len(), "{:?}", set.problems);
}

#[tokio::test]
async fn later_paths_win_and_unavailable_removes_earlier() {
    let ws = Workspace::new();
    ws.add_skill("base", "probe", guests::PROBE, "");
    let overriding = ws.add_skill("custom", "probe", guests::HOOKS_NONE, "");
    ws.add_skill("base", "unavailable", guests::PROBE, "");
    ws.add_skill("custom", "unavailable", guests::UNAVAILABLE, "");
    let set = ws.load("skills:\n  paths: [base, custom]\n").await;
    assert_eq!(set.skills["probe"].dir, overriding, "the later path wins");
    assert!(!set.skills.contains_key("unavailable"), "is-available false removes the lower-priority skill too");
    assert!(set.problems.is_empty(), "{:?}", set.problems);

    let set = ws.load("skills:\n  paths: [custom, base]\n").await;
    assert!(set.skills.contains_key("unavailable"), "a later available skill still overrides");
}

#[tokio::test]
async fn is_available_trap_is_a_configuration_error_without_details() {
    let ws = Workspace::new();
    ws.add_skill("skills", "hooks_trap", guests::HOOKS_TRAP, "");
    let err = ws.loader(PATHS).load_all(LoadMode::Serve).await.err().expect("must stop loading");
    let message = err.to_string();
    assert!(message.contains("configuration error") && message.contains("hooks_trap"), "{message}");
    assert!(!message.contains("panicked") && !message.contains("wasm"), "details leaked: {message}");
    // Validation checks the artifact without calling the hook.
    let set = ws.loader(PATHS).load_all(LoadMode::Validate).await.unwrap();
    assert!(set.skills.contains_key("hooks_trap"));
}

#[tokio::test]
async fn startup_failure_stops_with_the_skills_message() {
    let ws = Workspace::new();
    ws.add_skill("skills", "startup_fail", guests::STARTUP_FAIL, "");
    let err = ws.loader(PATHS).load_all(LoadMode::Serve).await.err().expect("must fail fast");
    assert!(err.to_string().contains("missing api_key"), "{err}");

    let ws = Workspace::new();
    ws.add_skill("skills", "hooks_all", guests::HOOKS_ALL, "");
    let yaml = "skills:\n  paths: [skills]\n  config:\n    hooks_all: {fail_startup: true}\n";
    let err = ws.loader(yaml).load_all(LoadMode::Serve).await.err().expect("config reaches startup");
    assert!(err.to_string().contains("fail_startup is set"), "{err}");
    assert!(ws.load(PATHS).await.skills.contains_key("hooks_all"));
}

#[tokio::test]
async fn prompt_only_skill_md_skill() {
    let ws = Workspace::new();
    let dir = ws.path().join("skills/anything");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("SKILL.md"),
        "---\nname: git-discipline\ndescription: Commit rules.\n---\n\nUse Conventional Commits.\n",
    )
    .unwrap();
    let set = ws.load(PATHS).await;
    let skill = &set.skills["git_discipline"];
    assert!(skill.component().is_none() && skill.tools.is_empty());
    assert_eq!(skill.prompt.body, "Use Conventional Commits.");
    assert_eq!(skill.prompt.description, "Commit rules.");
}

async fn load_one(guest: &str, name: &str) -> (Workspace, Skill) {
    let ws = Workspace::new();
    let dir = ws.add_skill("skills", name, guest, "");
    let skill = ws.loader(PATHS).load_one(&dir).await.unwrap();
    (ws, skill)
}

#[tokio::test]
async fn hooks_are_detected_present_or_absent() {
    let (_ws, all) = load_one(guests::HOOKS_ALL, "hooks_all").await;
    let (component, _) = all.component().unwrap();
    assert_eq!(component.hooks().names().len(), 7, "{:?}", component.hooks());
    assert!(all.facts.verify);
    assert_eq!(all.facts.mcp_servers, ["obs"]);
    assert_eq!(all.facts.mcp_prerequisites, ["list_things"]);
    let (_ws, none) = load_one(guests::HOOKS_NONE, "hooks_none").await;
    assert!(none.component().unwrap().0.hooks().names().is_empty());
}

#[tokio::test]
async fn resolve_human_then_overrides() {
    let (_ws, skill) = load_one(guests::HOOKS_ALL, "hooks_all").await;
    let tool = skill.tool("dyn_tool").unwrap();
    let none = BTreeMap::new();
    let level = async |input: serde_json::Value, overrides: &BTreeMap<String, Option<OverrideLevel>>| {
        gate::resolve(&skill, tool, &input, &ctx(), overrides).await
    };
    assert_eq!(level(json!({}), &none).await, Level::Auto);
    assert_eq!(level(json!({"level": "approve"}), &none).await, Level::Approve);
    assert_eq!(level(json!({"level": "confirm"}), &none).await, Level::Confirm);
    let de_escalate = BTreeMap::from([("hooks_all__dyn_tool".to_string(), None)]);
    assert_eq!(level(json!({"level": "confirm"}), &de_escalate).await, Level::Auto, "null override de-escalates");
    let escalate = BTreeMap::from([("hooks_all__dyn_tool".to_string(), Some(OverrideLevel::Confirm))]);
    assert_eq!(level(json!({}), &escalate).await, Level::Confirm, "override is the final word");
    let plain = skill.tool("plain").unwrap();
    assert_eq!(gate::resolve(&skill, plain, &json!({}), &ctx(), &none).await, Level::Auto);
    // The spec: resolve_human "takes precedence over the static human key", so a tool with no
    // static level still asks when the hook says so.
    let asked = gate::resolve(&skill, plain, &json!({"level": "approve"}), &ctx(), &none).await;
    assert_eq!(asked, Level::Approve, "the hook is asked for every tool, not only dynamic ones");
}

#[tokio::test]
async fn startup_runs_only_when_serving() {
    let ws = Workspace::new();
    ws.add_skill("skills", "startup_fail", guests::STARTUP_FAIL, "");
    let loader = ws.loader("skills:\n  paths: [skills]\n  builtins: []\n");
    let inspected = loader.load_all(LoadMode::Inspect).await.expect("inspecting runs no startup");
    assert!(inspected.skills.contains_key("startup_fail"), "listed and callable without its startup");
    assert!(loader.load_all(LoadMode::Serve).await.is_err(), "serving runs it");
}

#[tokio::test]
async fn every_hook_answers_when_present() {
    let (_ws, skill) = load_one(guests::HOOKS_ALL, "hooks_all").await;
    let (c, env) = skill.component().unwrap();
    assert!(c.is_available(env, &json!({})).await.unwrap().unwrap().value);
    assert_eq!(c.startup(env, &json!({})).await.unwrap().unwrap().value, Ok(()));
    let deny =
        c.before_mcp_call(env, "obs", "get_logs", r#"{"_decision":"deny"}"#, &ctx()).await.unwrap().unwrap().value;
    assert!(
        matches!(deny.kind, PreflightKind::Deny) && deny.correction.as_deref() == Some("hooks_all denied the call")
    );
    let pre = c
        .before_mcp_call(env, "obs", "get_logs", r#"{"_decision":"prerequisite"}"#, &ctx())
        .await
        .unwrap()
        .unwrap()
        .value;
    assert!(matches!(&pre.kind, PreflightKind::Prerequisite(p) if p.tool == "list_things"));
    let fix = c
        .before_mcp_call(env, "obs", "get_logs", r#"{"_decision":"correct","q":1}"#, &ctx())
        .await
        .unwrap()
        .unwrap()
        .value;
    assert!(matches!(fix.kind, PreflightKind::Proceed));
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(fix.corrected_arguments.as_deref().unwrap()).unwrap(),
        json!({"q": 1, "corrected": true})
    );
    let seen = c.observe_mcp_result(env, "obs", "get_logs", "{}", "rows", &ctx()).await.unwrap().unwrap().value;
    assert_eq!(seen.as_deref(), Some("rows\n\nobserved"));
    assert_eq!(c.tool_result_empty(env, "get_logs", "[]", &ctx()).await.unwrap().unwrap().value, Some(true));
    assert_eq!(c.tool_result_empty(env, "get_logs", "[1]", &ctx()).await.unwrap().unwrap().value, None);
    let target = c.tool_target(env, "get_logs", r#"{"service":"payments"}"#, &ctx()).await.unwrap().unwrap().value;
    assert_eq!(target, Some(Target { target: Some("payments".into()), query_kind: Some("logs".into()) }));
}

/// `is-available` and `startup` serve no conversation: a skill whose state is per
/// conversation (the default) writes to its own namespace there, and a call's hook reads its
/// conversation's.
#[tokio::test]
async fn lifecycle_hooks_see_the_skills_own_state_namespace() {
    let ws = Workspace::new();
    ws.add_skill("skills", "hooks_all", guests::HOOKS_ALL, "");
    let set = ws.load("skills:\n  paths: [skills]\n  builtins: []\nstate:\n  filesystem: {path: state}\n").await;
    assert!(set.problems.is_empty(), "{:?}", set.problems);
    let store = skillhost::store::StateStore::new(ws.path().join("state"));
    assert_eq!(store.keys("skill-hooks_all").await.unwrap(), ["is_available", "startup"]);
}

#[tokio::test]
async fn absent_hooks_are_none_and_trapping_hooks_are_errors() {
    let (_ws, none) = load_one(guests::HOOKS_NONE, "hooks_none").await;
    let (c, env) = none.component().unwrap();
    assert!(c.is_available(env, &json!({})).await.is_none());
    assert!(c.startup(env, &json!({})).await.is_none());
    assert!(c.resolve_human(env, "x", "{}", &ctx()).await.is_none());
    assert!(c.before_mcp_call(env, "s", "t", "{}", &ctx()).await.is_none());
    assert!(c.observe_mcp_result(env, "s", "t", "{}", "r", &ctx()).await.is_none());
    assert!(c.tool_result_empty(env, "t", "", &ctx()).await.is_none());
    assert!(c.tool_target(env, "t", "{}", &ctx()).await.is_none());

    let (_ws, trap) = load_one(guests::HOOKS_TRAP, "hooks_trap").await;
    let (c, env) = trap.component().unwrap();
    assert!(c.is_available(env, &json!({})).await.unwrap().is_err());
    assert!(c.startup(env, &json!({})).await.unwrap().is_err());
    assert!(c.resolve_human(env, "x", "{}", &ctx()).await.unwrap().is_err());
    assert!(c.before_mcp_call(env, "s", "t", "{}", &ctx()).await.unwrap().is_err());
    assert!(c.observe_mcp_result(env, "s", "t", "{}", "r", &ctx()).await.unwrap().is_err());
    assert!(c.tool_result_empty(env, "t", "", &ctx()).await.unwrap().is_err());
    assert!(c.tool_target(env, "t", "{}", &ctx()).await.unwrap().is_err());
    // A dynamic tool whose resolve-human traps fails closed: it needs approval.
    if let Some(tool) = trap.tools.iter().find(|t| t.human == skillhost::skills::contract::Human::Dynamic) {
        assert_eq!(gate::resolve(&trap, tool, &json!({}), &ctx(), &BTreeMap::new()).await, Level::Approve);
    }
}
