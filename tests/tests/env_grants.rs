//! Environment variables reach a skill only when its manifest names them AND the operator
//! grants them (`[capabilities] env`, `skills.grants.<skill>.env`): then they are its WASI
//! environment in every call, which is how `is-available` and `startup` check credentials.
//! Each test uses its own variable names: the test threads share one process environment.

use serde_json::{Value, json};
use skillhost::skills::{LoadMode, SkillSet};
use skillhost_tests::{Workspace, ctx, guests, json as parse};

/// Sets the process's variables before any loader of this test reads them.
fn set_env(vars: &[(&str, &str)]) {
    for (name, value) in vars {
        // SAFETY: the names are this test's own; nothing else reads or writes them.
        unsafe { std::env::set_var(name, value) };
    }
}

fn workspace(manifest_env: &[&str]) -> Workspace {
    let ws = Workspace::new();
    let manifest = format!("[capabilities]\nenv = {}\n", json!(manifest_env));
    ws.add_skill("skills", "needs_env", guests::NEEDS_ENV, &manifest);
    ws
}

fn yaml(granted: &[&str], config: &str) -> String {
    format!(
        "skills:\n  paths: [skills]\n  builtins: []\n  grants:\n    needs_env:\n      env: {}\n  config:\n    needs_env: {config}\n",
        json!(granted)
    )
}

async fn env_seen(set: &SkillSet) -> Value {
    let (skill, spec) = set.find_tool("needs_env__env").expect("needs_env is loaded");
    let out = skill.call(&spec.name, &json!({}), &ctx()).await.unwrap();
    parse(&out.value.content)["vars"].clone()
}

#[tokio::test]
async fn only_variables_asked_and_granted_reach_the_guest() {
    set_env(&[("NEEDS_ENV_TOKEN", "t0ken"), ("ENV_T1_ASKED_ONLY", "a"), ("ENV_T1_GRANTED_ONLY", "g")]);
    let ws = workspace(&["NEEDS_ENV_TOKEN", "ENV_T1_ASKED_ONLY", "ENV_T1_UNSET"]);
    let set = ws.load(&yaml(&["NEEDS_ENV_TOKEN", "ENV_T1_GRANTED_ONLY", "ENV_T1_UNSET"], "{}")).await;
    assert!(set.problems.is_empty(), "{:?}", set.problems);
    // The manifest asks for ENV_T1_ASKED_ONLY (not granted); the operator grants
    // ENV_T1_GRANTED_ONLY (not asked); ENV_T1_UNSET is both but not set: none of them.
    assert_eq!(env_seen(&set).await, json!({"NEEDS_ENV_TOKEN": "t0ken"}));
}

#[tokio::test]
async fn is_available_is_false_without_the_granted_credential() {
    // Asked and granted but not set in skillhost's environment: unavailable, not an error.
    let ws = workspace(&["NEEDS_ENV_TOKEN"]);
    let loader = ws.loader(&yaml(&[], "{}"));
    let set = loader.load_all(LoadMode::Inspect).await.unwrap();
    assert!(!set.skills.contains_key("needs_env"), "the operator granted nothing");
    assert!(set.problems.is_empty(), "{:?}", set.problems);

    set_env(&[("NEEDS_ENV_TOKEN", "t0ken")]);
    let ws = workspace(&[]);
    let set = ws.loader(&yaml(&["NEEDS_ENV_TOKEN"], "{}")).load_all(LoadMode::Inspect).await.unwrap();
    assert!(!set.skills.contains_key("needs_env"), "granted, but the manifest does not ask for it");

    let ws = workspace(&["NEEDS_ENV_TOKEN"]);
    let set = ws.loader(&yaml(&["NEEDS_ENV_TOKEN"], "{}")).load_all(LoadMode::Inspect).await.unwrap();
    assert!(set.skills.contains_key("needs_env"), "asked, granted and set: {:?}", set.problems);
}

#[tokio::test]
async fn is_available_and_startup_receive_the_config_block() {
    set_env(&[("NEEDS_ENV_TOKEN", "t0ken")]);
    let ws = workspace(&["NEEDS_ENV_TOKEN"]);
    let granted = ["NEEDS_ENV_TOKEN"];
    let set = ws.loader(&yaml(&granted, "{disabled: true}")).load_all(LoadMode::Inspect).await.unwrap();
    assert!(!set.skills.contains_key("needs_env"), "is-available read `disabled` from its config");

    let config = "{fail_startup: true, endpoint: https://example.test}";
    let err = ws.loader(&yaml(&granted, config)).load_all(LoadMode::Serve).await.err().expect("startup fails");
    let err = err.to_string();
    assert!(err.contains(r#"["NEEDS_ENV_TOKEN"]"#) && err.contains("endpoint https://example.test"), "{err}");
}

#[test]
fn bad_names_are_config_and_manifest_errors() {
    let ws = Workspace::new();
    std::fs::write(ws.path().join("config.yaml"), yaml(&["AWS_*"], "{}")).unwrap();
    let err = skillhost::config::load(Some(&ws.path().join("config.yaml"))).err().unwrap().to_string();
    assert!(err.contains("skills.grants.needs_env.env: `AWS_*` is not an environment variable name"), "{err}");
}
