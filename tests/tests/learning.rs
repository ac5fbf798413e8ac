//! The engine's learning features against the scripted LLM server (Anthropic format) and real
//! guests: approval auto-promotion, the post-turn verifier, the daily reflection.
//!
//! `hooks_all` has `verify` in its facts, so every turn that runs one of its tools ends with
//! a verifier request, which these scripts answer.

use serde_json::json;
use skillhost::engine::reflection::utc_date;
use skillhost::engine::*;
use skillhost_tests::llm_server::{Answer, LlmServer, Reply};
use skillhost_tests::person::{Does, Person};
use skillhost_tests::{Workspace, guests};
use std::sync::Mutex;

/// A workspace with the given guests as skills (`(name, wasm)`).
fn workspace(skills: &[(&str, &str)]) -> Workspace {
    let ws = Workspace::new();
    std::fs::create_dir_all(ws.path().join("skills")).unwrap();
    for (name, wasm) in skills {
        ws.add_skill("skills", name, wasm, "");
    }
    ws
}

/// An engine over `ws` talking to `server`; `skills` and `learning` are extra lines (two
/// spaces in) of those sections, `extra` more top-level config.
async fn engine(ws: &Workspace, server: &LlmServer, skills: &str, learning: &str, extra: &str) -> Engine {
    let yaml = format!(
        "skills:\n  paths: [skills]\n{skills}state:\n  filesystem: {{path: state}}\n\
         learning:\n  memory:\n    filesystem: {{path: memory}}\n{learning}\
         llm:\n  provider: anthropic\n  model: test-model\n  max_tokens: 500\n  anthropic: {{api_key: k, base_url: '{}'}}\n{extra}",
        server.url()
    );
    skillhost_tests::engine_from(ws, &yaml).await
}

async fn run(engine: &Engine, message: &str, counterpart: &dyn Counterpart) -> (TurnResult, Vec<EngineEvent>) {
    let events = Mutex::new(Vec::new());
    let req = TurnRequest {
        channel_id: "chan-1".into(),
        user_id: Some("u1".into()),
        message: message.into(),
        route: Vec::new(),
        thread: None,
    };
    let result = engine.run_turn(req, &events, counterpart).await.unwrap();
    (result, events.into_inner().unwrap())
}

/// Runs one turn calling `dyn_tool` at `level` and returns its only call. The script: the
/// call, the answer, and the verifier's `OK` when the call will run.
async fn dyn_call(
    engine: &Engine,
    server: &LlmServer,
    level: &str,
    counterpart: &Person,
) -> (ToolCallRecord, Vec<EngineEvent>) {
    server.push(Answer::default().call("t1", "hooks_all__dyn_tool", json!({ "level": level })));
    server.push(Answer::text(&["Done."]));
    if counterpart.next_approves() {
        server.push(Answer::text(&["OK"]));
    }
    let (result, events) = run(engine, "go", counterpart).await;
    (result.tool_calls.into_iter().next().unwrap(), events)
}

#[tokio::test]
async fn approvals_promote_a_tool_and_the_counts_survive_a_restart() {
    let ws = workspace(&[("hooks_all", guests::HOOKS_ALL)]);
    let server = LlmServer::start(vec![]).await;
    let engine = engine(&ws, &server, "", "  approval_auto_promote: 2\n", "").await;
    let counterpart = Person::new(&engine, Does::Approve);
    for _ in 0..2 {
        let (call, _) = dyn_call(&engine, &server, "approve", &counterpart).await;
        assert!(!call.promoted && call.executed);
    }
    assert_eq!(counterpart.shown().len(), 2);
    let (call, events) = dyn_call(&engine, &server, "approve", &counterpart).await;
    assert_eq!((call.promoted, call.executed, call.approval), (true, true, Some(ApprovalOutcome::Approved)));
    assert_eq!(counterpart.shown().len(), 2);
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, EngineEvent::ApprovalRequested { .. } | EngineEvent::ApprovalResolved { .. }))
    );
    assert!(events.iter().any(|e| matches!(e, EngineEvent::ToolCompleted { approved: true, .. })));
    let counts = engine.promotion().counts(&PromotionKey::tool("hooks_all__dyn_tool")).await;
    assert_eq!((counts.approved, counts.denied), (2, 0), "a promoted call is no decision");

    let server = LlmServer::start(vec![]).await;
    let restarted = self::engine(&ws, &server, "", "  approval_auto_promote: 2\n", "").await;
    let (call, _) = dyn_call(&restarted, &server, "approve", &counterpart).await;
    assert!(call.promoted);
    assert_eq!(counterpart.shown().len(), 2);
}

#[tokio::test]
async fn one_denial_blocks_promotion_and_cancellations_do_not_count() {
    let ws = workspace(&[("hooks_all", guests::HOOKS_ALL)]);
    let server = LlmServer::start(vec![]).await;
    let engine = engine(&ws, &server, "", "  approval_auto_promote: 2\n", "").await;
    let counterpart = Person::scripted(&engine, vec![Does::Approve, Does::Fail, Does::Deny(None)]);
    for _ in 0..3 {
        dyn_call(&engine, &server, "approve", &counterpart).await;
    }
    let counts = engine.promotion().counts(&PromotionKey::tool("hooks_all__dyn_tool")).await;
    assert_eq!((counts.approved, counts.denied), (1, 1));
    for _ in 0..3 {
        let (call, _) = dyn_call(&engine, &server, "approve", &counterpart).await;
        assert!(!call.promoted);
    }
    assert_eq!(counterpart.shown().len(), 6);
}

#[tokio::test]
async fn a_skill_overrides_the_threshold_and_zero_disables() {
    let ws = workspace(&[("hooks_all", guests::HOOKS_ALL)]);
    let server = LlmServer::start(vec![]).await;
    let skills = "  config:\n    hooks_all: {approval_auto_promote: 1}\n";
    let engine = engine(&ws, &server, skills, "  approval_auto_promote: 5\n", "").await;
    let counterpart = Person::new(&engine, Does::Approve);
    dyn_call(&engine, &server, "approve", &counterpart).await;
    assert!(dyn_call(&engine, &server, "approve", &counterpart).await.0.promoted);

    let ws = workspace(&[("hooks_all", guests::HOOKS_ALL)]);
    let skills = "  config:\n    hooks_all: {approval_auto_promote: 0}\n";
    let engine = self::engine(&ws, &server, skills, "  approval_auto_promote: 1\n", "").await;
    let counterpart = Person::new(&engine, Does::Approve);
    for _ in 0..3 {
        assert!(!dyn_call(&engine, &server, "approve", &counterpart).await.0.promoted);
    }
    assert_eq!(counterpart.shown().len(), 3);
}

#[tokio::test]
async fn confirm_level_calls_are_never_promoted_nor_count() {
    let ws = workspace(&[("hooks_all", guests::HOOKS_ALL)]);
    let server = LlmServer::start(vec![]).await;
    let engine = engine(&ws, &server, "", "  approval_auto_promote: 1\n", "").await;
    let counterpart = Person::new(&engine, Does::Approve);
    assert!(!dyn_call(&engine, &server, "confirm", &counterpart).await.0.promoted);
    assert!(
        !dyn_call(&engine, &server, "approve", &counterpart).await.0.promoted,
        "a confirmation is no approve-level approval"
    );
    assert!(!dyn_call(&engine, &server, "confirm", &counterpart).await.0.promoted);
    assert!(dyn_call(&engine, &server, "approve", &counterpart).await.0.promoted);
    assert_eq!(counterpart.shown().len(), 3);
}

/// Scripts a turn calling `hooks_all__plain` and answering `answer`, then the verifier's reply.
fn verified_turn(server: &LlmServer, answer: &str, verdict: Reply) {
    server.push(Answer::default().call("t1", "hooks_all__plain", json!({ "service": "three pods" })));
    server.push(Answer::text(&[answer]));
    server.push(verdict);
}

#[tokio::test]
async fn a_contradiction_is_flagged_in_the_answer_and_the_history() {
    let ws = workspace(&[("hooks_all", guests::HOOKS_ALL)]);
    let server = LlmServer::start(vec![]).await;
    let engine = engine(&ws, &server, "", "", "verifier:\n  model: check-model\n").await;
    verified_turn(
        &server,
        "There are 5 things.",
        Answer::text(&["CONTRADICTION: the tool returned a count of 3"]).into(),
    );
    let (result, events) = run(&engine, "how many?", &NonInteractive).await;
    let expected = "⚠️ the tool returned a count of 3\n\nThere are 5 things.";
    assert_eq!(result.text, expected);
    assert!(!events.iter().any(|e| matches!(e, EngineEvent::TextDelta(t) if t.contains("CONTRADICTION"))));
    let check = server.body(2);
    assert_eq!(check["model"], "check-model");
    assert!(check["system"].as_str().unwrap().contains("CONTRADICTION: "));
    let prompt = check["messages"][0]["content"][0]["text"].as_str().unwrap();
    assert!(
        prompt.contains("hooks_all__plain")
            && prompt.contains(r#""service":"three pods""#)
            && prompt.contains("There are 5 things."),
        "{prompt}"
    );
    let history = engine.history().load("chan-1").await.unwrap();
    let last = &history.last().unwrap().content;
    assert!(matches!(last.as_slice(), [skillhost::llm::Block::Text(t)] if t == expected), "{last:?}");
}

#[tokio::test]
async fn ok_errors_and_unreadable_verdicts_leave_the_answer_alone() {
    let ws = workspace(&[("hooks_all", guests::HOOKS_ALL)]);
    let server = LlmServer::start(vec![]).await;
    let engine = engine(&ws, &server, "", "", "").await;
    let verdicts = [
        Answer::text(&["OK"]).into(),
        Reply::error(400, "checker broke"),
        Answer::text(&["Looks right to me."]).into(),
    ];
    for (n, verdict) in verdicts.into_iter().enumerate() {
        verified_turn(&server, "There are 3 things.", verdict);
        let (result, _) = run(&engine, "how many?", &NonInteractive).await;
        assert_eq!(result.text, "There are 3 things.");
        assert_eq!(server.body(3 * n + 2)["model"], "test-model", "the main model without verifier.model");
    }
    assert_eq!(server.requests().len(), 9);
}

#[tokio::test]
async fn only_turns_running_a_verify_skill_are_checked() {
    let ws = workspace(&[("probe", guests::PROBE), ("hooks_all", guests::HOOKS_ALL)]);
    let echo = Answer::default().call("t1", "probe__echo", json!({"a": 1}));
    let server = LlmServer::start(vec![echo.into(), Answer::text(&["Echoed."]).into()]).await;
    let engine = engine(&ws, &server, "", "", "").await;
    assert_eq!(run(&engine, "echo", &NonInteractive).await.0.text, "Echoed.");
    // A refused call of a verify skill ran nothing the answer could contradict.
    server.push(Answer::default().call("t2", "hooks_all__dyn_tool", json!({"level": "approve"})));
    server.push(Answer::text(&["Not allowed."]));
    assert_eq!(run(&engine, "try", &NonInteractive).await.0.text, "Not allowed.");
    assert_eq!(server.requests().len(), 4);
}

#[tokio::test]
async fn reflections_append_to_the_daily_file_in_the_background() {
    let ws = workspace(&[("probe", guests::PROBE)]);
    let echo = Answer::default().call("t1", "probe__echo", json!({"a": 1}));
    let replies = vec![
        echo.into(),
        Answer::text(&["Echoed it."]).into(),
        Answer::text(&["User asked for an echo; probe__echo returned it."]).into(),
        Answer::text(&["Hello back."]).into(),
        Answer::text(&["User said hello."]).into(),
    ];
    let server = LlmServer::start(replies).await;
    let engine = engine(&ws, &server, "", "  reflection: true\n", "").await;
    assert_eq!(run(&engine, "echo this", &NonInteractive).await.0.text, "Echoed it.");
    engine.wait_for_background().await;
    assert_eq!(run(&engine, "hello", &NonInteractive).await.0.text, "Hello back.");
    engine.wait_for_background().await;

    let date = utc_date(std::time::SystemTime::now());
    let diary = std::fs::read_to_string(ws.path().join(format!("memory/daily/{date}.md"))).unwrap();
    let expected = format!(
        "# {date}\n\n## chan-1\n\nUser asked for an echo; probe__echo returned it.\n\n## chan-1\n\nUser said hello.\n"
    );
    assert_eq!(diary, expected);
    let summary = server.body(2);
    assert!(summary["system"].as_str().unwrap().contains("diary"));
    let prompt = summary["messages"][0]["content"][0]["text"].as_str().unwrap();
    assert!(
        prompt.contains("echo this") && prompt.contains("probe__echo") && prompt.contains("Echoed it."),
        "{prompt}"
    );
}

#[tokio::test]
async fn no_reflection_unless_configured_or_with_learning_off() {
    let ws = workspace(&[("probe", guests::PROBE)]);
    let server = LlmServer::start(vec![Answer::text(&["Hi."]).into(), Answer::text(&["Hi again."]).into()]).await;
    let engine = engine(&ws, &server, "", "  enabled: false\n  reflection: true\n", "").await;
    run(&engine, "hello", &NonInteractive).await;
    engine.wait_for_background().await;
    let default = self::engine(&ws, &server, "", "", "").await;
    run(&default, "hello", &NonInteractive).await;
    default.wait_for_background().await;
    assert_eq!(server.requests().len(), 2);
    assert!(!ws.path().join("memory/daily").exists());
}
