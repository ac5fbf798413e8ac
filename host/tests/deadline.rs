//! The sandbox's wall-clock deadline in every command, as a process: a guest looping on CPU
//! (the `hooks_loop` test guest: 300 ms deadline, fuel for far longer) ends at its deadline in
//! `skillhost call`, `chat`, `run --adapter api` and `mcp`, each looping hook fails closed or
//! falls back as the spec says, and the process keeps answering meanwhile. The API adapter's
//! cases are in `deadline_api.rs`.

mod support;

use serde_json::{Value, json};
use skillhost_tests::llm_server::Answer;
use skillhost_tests::{Workspace, guests};
use std::process::Command;
use std::time::Duration;
use support::*;

#[test]
fn call_ends_a_looping_tool_at_its_deadline() {
    let ws = workspace("", false);
    // Compiles (and caches) the skill, so the next process's time is mostly the call.
    let warm = skillhost(&ws, &["call", "hooks_loop__work", "{}"], "");
    assert_eq!(warm.code, 0, "{}{}", warm.stdout, warm.stderr);
    let spin = skillhost(&ws, &["call", "hooks_loop__spin"], "");
    assert_eq!(spin.code, 1, "{}{}", spin.stdout, spin.stderr);
    let out: Value = serde_json::from_str(&spin.stdout).unwrap_or_else(|e| panic!("{e}: {}", spin.stdout));
    assert_eq!(out["kind"], "deadline", "the deadline, not the fuel, ended it: {out}");
    assert!(out["error"].as_str().unwrap().contains("300ms"), "{out}");
    assert!(spin.elapsed < warm.elapsed + Duration::from_secs(10), "{:?} vs {:?}", spin.elapsed, warm.elapsed);
}

#[test]
fn call_with_a_looping_resolve_human_asks_for_approval() {
    let ws = workspace("", false);
    let looping = r#"{"loop_in": "resolve_human"}"#;
    // No terminal to ask on: refused, and the tool does not run.
    let refused = skillhost(&ws, &["call", "hooks_loop__work", looping], "y\n");
    assert_eq!(refused.code, 2, "{}{}", refused.stdout, refused.stderr);
    assert!(refused.stderr.contains("needs `approve` approval"), "{}", refused.stderr);
    assert!(refused.stdout.is_empty(), "{}", refused.stdout);
    // The hook ended at its deadline (not after its fuel, minutes later).
    assert!(refused.stderr.contains(r#"operation="resolve-human" kind="deadline""#), "{}", refused.stderr);
    // Approved, it runs; the hook's answer when it does not loop is "no approval".
    let approved = skillhost(&ws, &["call", "--yes", "hooks_loop__work", looping], "");
    assert_eq!(approved.code, 0, "{}", approved.stderr);
    assert!(approved.stdout.contains("\"loop_in\": \"resolve_human\""), "{}", approved.stdout);
    let unasked = skillhost(&ws, &["call", "hooks_loop__work", "{}"], "");
    assert_eq!(unasked.code, 0, "{}", unasked.stderr);
}

#[test]
fn a_failed_hook_logs_no_detail_by_default() {
    // hooks_trap's is-available panics: a configuration error naming the skill, without the
    // panic message, which only --verbose shows.
    let ws = workspace("", true);
    let quiet = skillhost(&ws, &["call", "hooks_loop__work", "{}"], "");
    assert_eq!(quiet.code, 2, "{}{}", quiet.stdout, quiet.stderr);
    assert!(quiet.stderr.contains("hooks_trap") && quiet.stderr.contains("is-available"), "{}", quiet.stderr);
    assert!(!quiet.stderr.contains("panicked"), "the panic message is logged: {}", quiet.stderr);
    let verbose = skillhost(&ws, &["--verbose", "call", "hooks_loop__work", "{}"], "");
    assert!(verbose.stderr.contains("hooks_trap: is_available panicked"), "{}", verbose.stderr);
}

#[test]
fn a_panicking_resolve_human_keeps_its_message_out_of_the_log() {
    let ws = workspace("", false);
    let out = skillhost(&ws, &["call", "--yes", "hooks_loop__work", r#"{"panic_in": "resolve_human"}"#], "");
    assert_eq!(out.code, 0, "a failed hook asks; --yes approves: {}", out.stderr);
    assert!(!out.stderr.contains(SECRET), "the panic message is logged: {}", out.stderr);
}

#[test]
fn call_names_a_result_past_the_host_copy_limit_as_oversize() {
    let ws = Workspace::new();
    let limits = "[limits]\nmemory_mb = 512\nfuel = 50_000_000_000\ntimeout_ms = 60_000\n";
    ws.add_skill("skills", "hostile", guests::HOSTILE, limits);
    std::fs::write(ws.path().join("config.yaml"), "skills:\n  paths: [skills]\n  builtins: []\n").unwrap();
    let out = skillhost(&ws, &["call", "hostile__huge_result", r#"{"mb": 200}"#], "");
    assert_eq!(out.code, 1, "{}", out.stderr);
    let result: Value = serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", out.stdout));
    assert_eq!(result["kind"], "result_too_large", "{result}");
    let message = result["error"].as_str().unwrap();
    assert!(message.contains("65 MiB") && message.contains("1048576-byte result limit"), "{message}");
}

#[test]
fn chat_gets_the_deadline_error_and_answers_the_next_line() {
    let spin = Answer::text(&["Spinning."]).call("s1", "hooks_loop__spin", json!({}));
    let llm = llm(vec![spin.into(), Answer::text(&["Spun."]).into(), Answer::text(&["Second."]).into()]);
    let ws = workspace(&llm_config(&llm), false);
    let out = skillhost(&ws, &["chat"], "spin\nnext\n");
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert_eq!(out.stdout, "Spinning.\nSpun.\nSecond.\n", "{}", out.stderr);
    let result = &tool_results(&llm.server, 1)[0];
    assert_eq!(result["is_error"], true, "{result}");
    let content: Value = serde_json::from_str(result["content"].as_str().unwrap()).unwrap();
    assert_eq!(content["kind"], "deadline", "{content}");
    assert_eq!(llm.server.requests().len(), 3, "the next line got its own request");
}

#[test]
fn mcp_answers_a_looping_call_with_an_error_at_its_deadline() {
    let dir = repo().join("tests/mcp");
    assert!(
        dir.join("pylib/mcp").exists(),
        "the mcp Python SDK is missing: run `python3 -m pip install --target tests/mcp/pylib mcp` (as .ci/run does)"
    );
    let ws = workspace("", false);
    let calls = json!([
        ["hooks_loop__spin", {}],
        ["hooks_loop__work", {"after": "spin"}],
        ["hooks_loop__work", {"loop_in": "resolve_human"}],
    ]);
    let mut command = Command::new("python3");
    command
        .arg(dir.join("client.py"))
        .args(["approve", &calls.to_string(), "stdio", env!("CARGO_BIN_EXE_skillhost"), "mcp"])
        .env("PYTHONPATH", dir.join("pylib"))
        .current_dir(ws.path());
    let out = run_bounded(command, "");
    assert_eq!(out.code, 0, "client failed: {}\n{}", out.stderr, out.stdout);
    let report: Value = serde_json::from_str(out.stdout.trim()).unwrap_or_else(|e| panic!("{e}: {}", out.stdout));
    let result = |i: usize| (report["results"][i]["is_error"] == true, report["results"][i]["text"].to_string());
    let (failed, text) = result(0);
    assert!(failed && text.contains("deadline"), "{report}");
    let (failed, text) = result(1);
    assert!(!failed && text.contains("spin"), "the next request is answered: {report}");
    // A looping resolve-human fails closed: the call needs approval, asked by elicitation.
    let (failed, text) = result(2);
    assert!(!failed && text.contains("resolve_human"), "{report}");
    assert_eq!(report["asked"].as_array().unwrap().len(), 1, "only the looping hook's call asked: {report}");
}
