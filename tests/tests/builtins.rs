//! The built-in skills: `shell` (native) and the embedded `memory` and `http_checker`
//! components, loaded with no skills folder; the shell's dynamic approval, auto-promotion per
//! command, and how it runs commands.

use serde_json::{Value, json};
use skillhost::engine::*;
use skillhost::skills::SkillSet;
use skillhost_tests::llm_server::{Answer, LlmServer};
use skillhost_tests::person::{Does, Person};
use skillhost_tests::{Workspace, ctx, json as parse};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Calls `skill__tool` directly (schema checked, no approval), returning the result JSON and
/// whether it succeeded.
async fn call(set: &SkillSet, name: &str, input: Value) -> (Value, Option<bool>) {
    let (skill, tool) = set.find_tool(name).unwrap_or_else(|| panic!("no tool {name}"));
    let outcome = skill.call(&tool.name, &input, &ctx()).await.unwrap_or_else(|e| panic!("{name}: {e}"));
    (parse(&outcome.value.content), outcome.value.succeeded)
}

const BASE: &str = "state:\n  filesystem: {path: state}\nlearning:\n  memory:\n    filesystem: {path: memory}\n";

#[tokio::test]
async fn builtins_load_with_no_skills_folder() {
    let ws = Workspace::new();
    let set = ws.load(BASE).await;
    assert!(set.problems.is_empty(), "the default ./skills may be missing: {:?}", set.problems);
    let names: Vec<&str> = set.skills.keys().map(String::as_str).collect();
    assert_eq!(names, ["http_checker", "memory", "shell"]);

    // memory: the operator's memory root, with no grant written.
    let (written, ok) =
        call(&set, "memory__memory_write", json!({"path": "notes/a.md", "content": "remember me"})).await;
    assert_eq!(ok, Some(true), "{written}");
    assert_eq!(std::fs::read_to_string(ws.path().join("memory/notes/a.md")).unwrap(), "remember me");
    let (read, _) = call(&set, "memory__memory_read", json!({"path": "notes/a.md"})).await;
    assert_eq!(read["content"], "remember me");
}

#[tokio::test]
async fn http_checker_needs_a_grant_for_the_network() {
    let port = skillhost_tests::http_server(200, "ok");
    let url = format!("http://127.0.0.1:{port}/health");
    let ws = Workspace::new();
    let set = ws.load(BASE).await;
    let (denied, ok) = call(&set, "http_checker__check_url", json!({"url": url})).await;
    assert_ne!(ok, Some(true), "no network without a grant: {denied}");
    assert!(denied.to_string().contains("not granted") || denied.to_string().contains("not allowed"), "{denied}");

    let granted = format!("{BASE}skills:\n  grants:\n    http_checker: {{http_hosts: ['127.0.0.1']}}\n");
    let set = ws.load(&granted).await;
    let (checked, ok) = call(&set, "http_checker__check_url", json!({"url": url})).await;
    assert_eq!(ok, Some(true), "{checked}");
    assert_eq!((checked["status"].as_u64(), checked["healthy"].as_bool()), (Some(200), Some(true)), "{checked}");
}

#[tokio::test]
async fn builtins_can_be_left_out_or_replaced() {
    let ws = Workspace::new();
    let set = ws.load(&format!("{BASE}skills:\n  builtins: []\n")).await;
    assert!(set.skills.is_empty(), "{:?}", set.skills.keys().collect::<Vec<_>>());
    let set = ws.load(&format!("{BASE}skills:\n  builtins: [shell]\n")).await;
    assert_eq!(set.skills.keys().collect::<Vec<_>>(), ["shell"]);

    // A folder skill of the same name replaces the built-in.
    let dir = ws.add_skill("skills", "memory", skillhost_tests::guests::PROBE, "");
    let set = ws.load(BASE).await;
    assert_eq!(set.skills["memory"].dir, dir);
    let tools: Vec<&str> = set.skills["memory"].tools.iter().map(|t| t.name.as_str()).collect();
    assert!(tools.contains(&"echo") && tools.contains(&"counter"), "the probe's tools, not the built-in's: {tools:?}");

    // Unknown names and bad shell settings are clear errors.
    let path = ws.path().join("config.yaml");
    std::fs::write(&path, format!("{BASE}skills:\n  builtins: [shel]\n")).unwrap();
    let e = skillhost::config::load(Some(&path)).unwrap_err().to_string();
    assert!(e.contains("builtins") && e.contains("shel"), "{e}");
    let set = ws.load(&format!("{BASE}skills:\n  config:\n    shell: {{timeout: -1}}\n")).await;
    assert!(!set.skills.contains_key("shell"));
    let problem = set.problems.iter().find(|p| p.skill == "shell").expect("a problem for shell");
    assert!(problem.message.contains("timeout"), "{problem}");
}

/// The shell with `settings` (a YAML flow map), alone.
async fn shell(ws: &Workspace, settings: &str) -> SkillSet {
    let set = ws.load(&format!("{BASE}skills:\n  builtins: [shell]\n  config:\n    shell: {settings}\n")).await;
    assert!(set.problems.is_empty(), "{:?}", set.problems);
    set
}

async fn run(set: &SkillSet, command: &str) -> (Value, Option<bool>) {
    call(set, "shell__run_command", json!({"command": command})).await
}

#[tokio::test]
async fn commands_run_plain_or_through_a_shell() {
    let ws = Workspace::new();
    let set = shell(&ws, &format!("{{cwd: '{}'}}", ws.path().display())).await;
    let (out, ok) = run(&set, "echo 'two  spaces'").await;
    assert_eq!(
        (out["stdout"].as_str(), out["exit_code"].as_i64(), ok),
        (Some("two  spaces\n"), Some(0), Some(true)),
        "{out}"
    );
    let (out, _) = run(&set, "echo abc | tr a-c x-z && echo done > made.txt; cat made.txt").await;
    assert_eq!(out["stdout"], "xyz\ndone\n", "{out}");
    assert!(ws.path().join("made.txt").is_file(), "ran in the configured cwd");
    let (out, ok) = run(&set, "ls /no/such/dir").await;
    assert_eq!((ok, out["exit_code"].as_i64()), (Some(false), Some(2)), "{out}");
    assert!(out["stderr"].as_str().unwrap().contains("No such file"), "{out}");
    let (out, ok) = run(&set, "no-such-program-xyz --help").await;
    assert_eq!(ok, Some(false));
    assert!(out["error"].as_str().unwrap().contains("cannot run"), "{out}");
    let (out, ok) = run(&set, "echo 'unbalanced").await;
    assert_eq!(ok, Some(false));
    assert!(out["error"].as_str().unwrap().contains("unbalanced"), "{out}");
}

#[tokio::test]
async fn stdin_is_empty_and_the_environment_is_cleared() {
    let ws = Workspace::new();
    let set = shell(&ws, "{timeout: 5}").await;
    let started = Instant::now();
    let (out, ok) = run(&set, "cat").await;
    assert_eq!((ok, out["stdout"].as_str()), (Some(true), Some("")), "cat reads /dev/null: {out}");
    assert!(started.elapsed() < Duration::from_secs(3));
    // cargo runs tests with CARGO_PKG_NAME set: the host has it, commands do not.
    assert!(std::env::var("CARGO_PKG_NAME").is_ok());
    let (out, _) = run(&set, "env").await;
    let env = out["stdout"].as_str().unwrap();
    assert!(!env.contains("CARGO_PKG_NAME") && env.contains("PATH="), "{env}");
    let set = shell(&ws, "{pass_env: [CARGO_PKG_NAME]}").await;
    let (out, _) = run(&set, "env").await;
    assert!(out["stdout"].as_str().unwrap().contains("CARGO_PKG_NAME=skillhost-tests"), "{out}");
}

#[tokio::test]
async fn timeouts_kill_the_whole_command_and_output_is_capped() {
    let ws = Workspace::new();
    let set = shell(&ws, &format!("{{timeout: 0.5, max_output_bytes: 1000, cwd: '{}'}}", ws.path().display())).await;
    let started = Instant::now();
    let (out, ok) = run(&set, "echo $$ > pid; sleep 30 | cat").await;
    assert!(started.elapsed() < Duration::from_secs(3), "killed at the timeout: {:?}", started.elapsed());
    assert_eq!((ok, out["timed_out"].as_bool()), (Some(false), Some(true)), "{out}");
    let pid = std::fs::read_to_string(ws.path().join("pid")).unwrap();
    assert!(!std::path::Path::new(&format!("/proc/{}", pid.trim())).exists(), "the shell is gone");

    // A background child keeps the pipe open: the command still returns, the child is killed.
    let started = Instant::now();
    let (out, ok) = run(&set, "sleep 30 & echo started").await;
    assert_eq!((ok, out["stdout"].as_str()), (Some(true), Some("started\n")), "{out}");
    assert!(started.elapsed() < Duration::from_secs(3), "{:?}", started.elapsed());

    let (out, _) = run(&set, "head -c 200000 /dev/zero | tr '\\0' x").await;
    assert_eq!(out["stdout"].as_str().unwrap().len(), 1000);
    assert_eq!(out["stdout_truncated_bytes"], 199_000, "{out}");
}

/// The commands `person` was asked to approve.
fn commands(person: &Person) -> Vec<String> {
    person.shown().iter().map(|a| a["tool_input"]["command"].as_str().unwrap_or("").to_owned()).collect()
}

fn shell_call(id: &str, command: &str) -> Answer {
    Answer::text(&[]).call(id, "shell__run_command", json!({"command": command}))
}

#[tokio::test]
async fn allowlisted_commands_run_new_ones_ask_and_approved_ones_are_promoted_per_command() {
    let ws = Workspace::new();
    let mut script = Vec::new();
    for (i, command) in ["echo allowed", "echo new", "echo new", "echo new", "echo other"].iter().enumerate() {
        script.push(shell_call(&format!("c{i}"), command).into());
        script.push(Answer::text(&["ok"]).into());
    }
    let server = LlmServer::start(script).await;
    let yaml = format!(
        "{BASE}skills:\n  builtins: [shell]\n  config:\n    shell: {{allowed_commands: ['echo  allowed'], approval_auto_promote: 2}}\n\
         llm:\n  provider: anthropic\n  model: m\n  anthropic: {{api_key: k, base_url: '{}'}}\n",
        server.url()
    );
    let engine = skillhost_tests::engine_from(&ws, &yaml).await;
    let counterpart = Person::new(&engine, Does::Approve);
    let mut promoted = Vec::new();
    for n in 0..5 {
        let events = Mutex::new(Vec::new());
        let turn = TurnRequest {
            channel_id: "c".into(),
            user_id: None,
            message: format!("m{n}"),
            route: Vec::new(),
            thread: None,
        };
        let result = engine.run_turn(turn, &events, &counterpart).await.unwrap();
        let call = &result.tool_calls[0];
        assert!(call.executed && !call.outcome.is_error, "{:?}", call.outcome);
        promoted.push(call.promoted);
    }
    // The allowlisted one never asks; "echo new" asks twice, then runs promoted; "echo other"
    // is a new command and asks again.
    assert_eq!(commands(&counterpart), ["echo new", "echo new", "echo other"]);
    assert_eq!(promoted, [false, false, false, true, false]);
    let system = server.body(0)["system"].as_str().unwrap().to_owned();
    assert!(system.contains(skillhost::skills::builtin::shell::PROMPT), "the shell's prompt is offered: {system}");
    let result = parse(&results_of(&server, 7));
    assert_eq!(result["stdout"], "new\n", "the promoted call ran");
}

/// The content of the first tool result in request `n`.
fn results_of(server: &LlmServer, n: usize) -> String {
    let body = server.body(n);
    let last = body["messages"].as_array().unwrap().last().unwrap().clone();
    last["content"][0]["content"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn a_denied_command_is_not_promoted_and_overrides_have_the_last_word() {
    let ws = Workspace::new();
    let script =
        (0..6).flat_map(|i| [shell_call(&format!("c{i}"), "echo x").into(), Answer::text(&["ok"]).into()]).collect();
    let server = LlmServer::start(script).await;
    let yaml = |extra: &str| {
        format!(
            "state:\n  filesystem: {{path: state}}\nlearning:\n  approval_auto_promote: 1\n\
             skills:\n  builtins: [shell]\n  config:\n    shell: {{allowed_commands: ['echo x']}}\n\
             llm:\n  provider: anthropic\n  model: m\n  anthropic: {{api_key: k, base_url: '{}'}}\n{extra}",
            server.url()
        )
    };
    // `confirm` overrides the allowlist: the person is asked every time, and never promoted.
    let engine = skillhost_tests::engine_from(&ws, &yaml("human:\n  overrides: {shell__run_command: confirm}\n")).await;
    let counterpart = Person::new(&engine, Does::Approve);
    for n in 0..3 {
        let turn = TurnRequest {
            channel_id: "c".into(),
            user_id: None,
            message: format!("m{n}"),
            route: Vec::new(),
            thread: None,
        };
        let result = engine.run_turn(turn, &NoEvents, &counterpart).await.unwrap();
        assert_eq!(result.tool_calls[0].level, skillhost::tools::Level::Confirm);
    }
    assert_eq!(counterpart.shown().len(), 3);
    // A denial at approve level blocks the promotion the one approval would have earned.
    let engine = skillhost_tests::engine_from(&ws, &yaml("human:\n  overrides: {shell__run_command: approve}\n")).await;
    let denier = Person::new(&engine, Does::Deny(None));
    let turn = |m: &str| TurnRequest {
        channel_id: "d".into(),
        user_id: None,
        message: m.into(),
        route: Vec::new(),
        thread: None,
    };
    let result = engine.run_turn(turn("a"), &NoEvents, &denier).await.unwrap();
    assert!(!result.tool_calls[0].executed);
    let counterpart = Person::new(&engine, Does::Approve);
    for m in ["b", "c"] {
        let result = engine.run_turn(turn(m), &NoEvents, &counterpart).await.unwrap();
        assert!(!result.tool_calls[0].promoted, "denied once: never promoted");
    }
    assert_eq!(counterpart.shown().len(), 2);
}
