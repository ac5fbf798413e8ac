//! The turn loop against the scripted LLM server (Anthropic format) over real HTTP, with real
//! guests: parallel tool calls, error results, approvals, the time budget, history, prompt.

use serde_json::{Value, json};
use skillhost::engine::deadline::TIME_SPENT;
use skillhost::engine::*;
use skillhost::tools::Level;
use skillhost_tests::llm_server::{Answer, LlmServer, Reply};
use skillhost_tests::person::{Does, Person};
use skillhost_tests::{Workspace, guests, json as parse};
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

/// An engine over `ws` talking to `server`; `extra` is appended to the config.
async fn engine(ws: &Workspace, server: &LlmServer, extra: &str) -> Engine {
    let yaml = format!(
        "skills:\n  paths: [skills]\n  builtins: []\nstate:\n  filesystem: {{path: state}}\nlearning:\n  memory:\n    filesystem: {{path: memory}}\n\
         llm:\n  provider: anthropic\n  model: test-model\n  max_tokens: 500\n  anthropic: {{api_key: k, base_url: '{}'}}\n{extra}",
        server.url()
    );
    skillhost_tests::engine_from(ws, &yaml).await
}

fn turn(channel: &str, message: &str) -> TurnRequest {
    TurnRequest {
        channel_id: channel.into(),
        user_id: Some("u1".into()),
        message: message.into(),
        route: Vec::new(),
        thread: None,
    }
}

async fn run(engine: &Engine, message: &str, counterpart: &dyn Counterpart) -> (TurnResult, Vec<EngineEvent>) {
    let events = Mutex::new(Vec::new());
    let result = engine.run_turn(turn("chan-1", message), &events, counterpart).await.unwrap();
    (result, events.into_inner().unwrap())
}

/// The `tool_result` blocks of the last message of request `n`, by tool-use id.
fn results(server: &LlmServer, n: usize) -> Vec<(String, Value, bool)> {
    let body = server.body(n);
    let last = body["messages"].as_array().unwrap().last().unwrap().clone();
    let blocks = last["content"].as_array().unwrap().iter().filter(|b| b["type"] == "tool_result");
    blocks
        .map(|b| {
            (
                b["tool_use_id"].as_str().unwrap().to_owned(),
                parse(b["content"].as_str().unwrap()),
                b["is_error"] == true,
            )
        })
        .collect()
}

#[tokio::test]
async fn parallel_tool_calls_go_back_paired_in_order() {
    let ws = workspace(&[("probe", guests::PROBE)]);
    let first =
        Answer::text(&["Checking."]).call("t1", "probe__echo", json!({"a": 1})).call("t2", "probe__ctx", json!({}));
    let server = LlmServer::start(vec![first.into(), Answer::text(&["Do", "ne."]).into()]).await;
    let engine = engine(&ws, &server, "").await;
    let (result, events) = run(&engine, "hi", &NonInteractive).await;
    assert_eq!((result.text.as_str(), result.rounds, result.time_boxed), ("Done.", 2, false));
    let body = server.body(1);
    assert_eq!(body["messages"][0], json!({"role": "user", "content": [{"type": "text", "text": "hi"}]}));
    let calls: Vec<&str> =
        body["messages"][1]["content"].as_array().unwrap().iter().filter_map(|b| b["id"].as_str()).collect();
    assert_eq!(calls, ["t1", "t2"]);
    let results = results(&server, 1);
    assert_eq!(results.iter().map(|r| r.0.as_str()).collect::<Vec<_>>(), ["t1", "t2"]);
    assert_eq!(results[0].1, json!({"a": 1}));
    assert_eq!((results[1].1["channel_id"].clone(), results[1].1["user_id"].clone()), (json!("chan-1"), json!("u1")));
    assert!(server.body(0)["tools"].as_array().unwrap().iter().any(|t| t["name"] == "probe__echo"));
    let completed =
        events.iter().filter(|e| matches!(e, EngineEvent::ToolCompleted { approved: true, is_error: false, .. }));
    assert_eq!(completed.count(), 2);
    let text: String =
        events.iter().filter_map(|e| if let EngineEvent::TextDelta(t) = e { Some(t.as_str()) } else { None }).collect();
    assert_eq!(text, "Checking.Done.");
}

#[tokio::test]
async fn at_most_four_calls_run_at_once() {
    let ws = workspace(&[]);
    ws.add_skill("skills", "hostile", guests::HOSTILE, "[limits]\nfuel = 50_000_000_000\ntimeout_ms = 300\n");
    let five = (1..=5).fold(Answer::default(), |a, i| a.call(&format!("t{i}"), "hostile__spin", json!({})));
    let server = LlmServer::start(vec![five.into(), Answer::text(&["OK."]).into()]).await;
    let engine = engine(&ws, &server, "").await;
    let (_, events) = run(&engine, "go", &NonInteractive).await;
    let first_done = events.iter().position(|e| matches!(e, EngineEvent::ToolCompleted { .. })).unwrap();
    let started_before = events[..first_done].iter().filter(|e| matches!(e, EngineEvent::ToolStarted { .. })).count();
    assert_eq!(started_before, MAX_PARALLEL, "{events:?}");
    let ids: Vec<String> = results(&server, 1).into_iter().map(|r| r.0).collect();
    assert_eq!(ids, ["t1", "t2", "t3", "t4", "t5"]);
}

#[tokio::test]
async fn failures_become_structured_results_and_the_turn_completes() {
    let ws = workspace(&[("probe", guests::PROBE), ("hostile", guests::HOSTILE)]);
    let first = Answer::default()
        .call("t1", "nope__missing", json!({}))
        .call("t2", "probe__read_file", json!({}))
        .call("t3", "hostile__trap", json!({}))
        .call("t4", "probe__read_file", json!({"path": "/no/such/file"}));
    let server = LlmServer::start(vec![first.into(), Answer::text(&["Sorry."]).into()]).await;
    let engine = engine(&ws, &server, "").await;
    let (result, _) = run(&engine, "go", &NonInteractive).await;
    assert_eq!(result.text, "Sorry.");
    let results = results(&server, 1);
    let kinds: Vec<(&str, &Value, bool)> = results.iter().map(|(id, c, e)| (id.as_str(), &c["kind"], *e)).collect();
    let expected =
        [("t1", &json!("unknown_tool"), true), ("t2", &json!("invalid_input"), true), ("t3", &json!("trap"), true)];
    assert_eq!(kinds[..3], expected);
    assert_eq!(
        (results[3].1["error"].clone(), results[3].2),
        (json!("io"), true),
        "succeeded:false keeps the guest's content"
    );
    assert_eq!(result.tool_calls.len(), 4);
}

#[tokio::test]
async fn a_denied_call_does_not_run_and_the_model_is_told() {
    let ws = workspace(&[("hooks_all", guests::HOOKS_ALL)]);
    let first = Answer::default().call("t1", "hooks_all__dyn_tool", json!({"level": "approve"})).call(
        "t2",
        "hooks_all__plain",
        json!({}),
    );
    let server = LlmServer::start(vec![first.into(), Answer::text(&["OK."]).into()]).await;
    let engine = engine(&ws, &server, "").await;
    let (result, events) = run(&engine, "go", &Person::new(&engine, Does::Deny(Some("not today".into())))).await;
    let results = results(&server, 1);
    assert_eq!(
        (results[0].1["kind"].clone(), results[0].1["reason"].clone(), results[0].2),
        (json!("denied"), json!("not today"), true)
    );
    assert_eq!((results[1].1["tool"].clone(), results[1].2), (json!("plain"), false));
    assert_eq!(result.tool_calls[0].level, Level::Approve);
    assert!(!result.tool_calls[0].executed && result.tool_calls[1].executed);
    let started: Vec<&str> = events
        .iter()
        .filter_map(|e| {
            if let EngineEvent::ToolStarted { tool_call_id, .. } = e { Some(tool_call_id.as_str()) } else { None }
        })
        .collect();
    assert_eq!(started, ["t2"]);
    let denied = ApprovalOutcome::Denied(Some("not today".into()));
    assert!(events.contains(&EngineEvent::ApprovalResolved { tool_call_id: "t1".into(), outcome: denied }));
}

#[tokio::test]
async fn non_interactive_cancels_gated_calls_and_overrides_gate_too() {
    let ws = workspace(&[("hooks_all", guests::HOOKS_ALL)]);
    let first = Answer::default().call("t1", "hooks_all__dyn_tool", json!({"level": "confirm"})).call(
        "t2",
        "hooks_all__plain",
        json!({}),
    );
    let server = LlmServer::start(vec![first.into(), Answer::text(&["OK."]).into()]).await;
    let engine = engine(&ws, &server, "human:\n  overrides: {hooks_all__plain: approve}\n").await;
    let (result, events) = run(&engine, "go", &NonInteractive).await;
    let kinds: Vec<Value> = results(&server, 1).into_iter().map(|r| r.1["kind"].clone()).collect();
    assert_eq!(kinds, [json!("cancelled"), json!("cancelled")]);
    let levels: Vec<Level> = result.tool_calls.iter().map(|c| c.level).collect();
    assert_eq!(levels, [Level::Confirm, Level::Approve]);
    assert!(!events.iter().any(|e| matches!(e, EngineEvent::ToolStarted { .. })));
}

#[tokio::test]
async fn an_unanswered_approval_times_out_as_denied() {
    let ws = workspace(&[("hooks_all", guests::HOOKS_ALL)]);
    let first = Answer::default().call("t1", "hooks_all__dyn_tool", json!({"level": "approve"}));
    let server = LlmServer::start(vec![first.into(), Answer::text(&["OK."]).into()]).await;
    let engine = engine(&ws, &server, "human:\n  timeout_seconds: 1\n").await;
    let (result, _) = run(&engine, "go", &Person::new(&engine, Does::Nothing)).await;
    assert_eq!(result.tool_calls[0].approval, Some(ApprovalOutcome::TimedOut));
    assert_eq!(results(&server, 1)[0].1["kind"], "approval_timeout");
}

#[tokio::test]
async fn a_spent_budget_forces_a_tools_free_wrap_up() {
    let ws = workspace(&[]);
    // Fuel and sandbox deadline well past the turn's 1 s budget, so the budget cuts the call.
    ws.add_skill("skills", "hostile", guests::HOSTILE, "[limits]\nfuel = 50_000_000_000\ntimeout_ms = 60_000\n");
    let spin = Answer::default().call("t1", "hostile__spin", json!({}));
    let server = LlmServer::start(vec![spin.into(), Answer::text(&["Partial answer."]).into()]).await;
    let session = "engine:\n  session: {deadline_seconds: 1, wrapup_timeout_seconds: 5}\n";
    let engine = engine(&ws, &server, session).await;
    let (result, _) = run(&engine, "go", &NonInteractive).await;
    assert!(result.time_boxed);
    assert_eq!((result.text.as_str(), result.rounds), ("Partial answer.", 2));
    assert!(!server.body(0)["tools"].as_array().unwrap().is_empty());
    let wrap = server.body(1);
    // Tools stay declared (the history holds tool calls) but the model may not call them.
    assert!(!wrap["tools"].as_array().unwrap().is_empty());
    assert_eq!(wrap["tool_choice"], json!({"type": "none"}), "no tool may be called");
    let last = wrap["messages"].as_array().unwrap().last().unwrap();
    assert_eq!(last["content"][0]["tool_use_id"], "t1", "the cut-off call is still answered");
    assert_eq!(parse(last["content"][0]["content"].as_str().unwrap())["kind"], "turn_deadline");
    assert_eq!(last["content"][1]["text"], TIME_SPENT.instruction);
}

#[tokio::test]
async fn history_survives_a_new_engine_and_channels_are_separate() {
    let ws = workspace(&[]);
    let server = LlmServer::start(vec![Answer::text(&["Noted."]).into()]).await;
    let first = engine(&ws, &server, "").await;
    run(&first, "remember 42", &NonInteractive).await;
    drop(first);
    let replies = vec![Answer::text(&["42."]).into(), Answer::text(&["Hello."]).into()];
    let server = LlmServer::start(replies).await;
    let second = engine(&ws, &server, "").await;
    run(&second, "what number?", &NonInteractive).await;
    let texts: Vec<Value> =
        server.body(0)["messages"].as_array().unwrap().iter().map(|m| m["content"][0]["text"].clone()).collect();
    assert_eq!(texts, [json!("remember 42"), json!("Noted."), json!("what number?")]);
    second.run_turn(turn("other", "hi"), &NoEvents, &NonInteractive).await.unwrap();
    assert_eq!(server.body(1)["messages"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn same_channel_turns_are_serialized() {
    let ws = workspace(&[]);
    let server = LlmServer::start(vec![Answer::text(&["One."]).into(), Answer::text(&["Two."]).into()]).await;
    let engine = engine(&ws, &server, "").await;
    let (a, b) = (turn("c", "first"), turn("c", "second"));
    let (ra, rb) =
        tokio::join!(engine.run_turn(a, &NoEvents, &NonInteractive), engine.run_turn(b, &NoEvents, &NonInteractive));
    ra.unwrap();
    rb.unwrap();
    let lengths: Vec<usize> = (0..2).map(|n| server.body(n)["messages"].as_array().unwrap().len()).collect();
    assert_eq!(lengths, [1, 3], "the second turn saw the first one's exchange");
}

#[tokio::test]
async fn system_prompt_is_bot_then_skills_by_name_then_memory() {
    let ws = workspace(&[("probe", guests::PROBE), ("hooks_all", guests::HOOKS_ALL)]);
    std::fs::create_dir_all(ws.path().join("memory")).unwrap();
    std::fs::write(ws.path().join("memory/MEMORY.md"), "The sky is green here.\n").unwrap();
    let server = LlmServer::start(vec![Answer::text(&["Hi."]).into()]).await;
    let engine = engine(&ws, &server, "bot:\n  system_prompt: You are Bot.\n").await;
    run(&engine, "hi", &NonInteractive).await;
    let expected = "You are Bot.\n\nYou can use the hooks_all skill.\n\nYou can use the probe skill.\n\n\
                    # Memory (MEMORY.md)\n\nThe sky is green here.";
    assert_eq!(server.body(0)["system"], expected);
}

/// An LLM failure fails the turn and leaves the history as it was.
#[tokio::test]
async fn a_failed_turn_is_not_persisted() {
    let ws = workspace(&[]);
    let server = LlmServer::start(vec![Reply::error(400, "bad request"), Answer::text(&["Fine."]).into()]).await;
    let engine = engine(&ws, &server, "").await;
    assert!(engine.run_turn(turn("c", "first"), &NoEvents, &NonInteractive).await.is_err());
    engine.run_turn(turn("c", "second"), &NoEvents, &NonInteractive).await.unwrap();
    assert_eq!(server.body(1)["messages"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn time_spent_waiting_for_a_person_is_not_charged_to_the_budget() {
    let ws = workspace(&[("probe", guests::PROBE)]);
    let first = Answer::text(&["Asking."]).call("t1", "probe__echo", json!({"x": 1}));
    let server = LlmServer::start(vec![first.into(), Answer::text(&["Ran it."]).into()]).await;
    let extra = "engine:\n  session: {deadline_seconds: 1}\nhuman:\n  overrides: {probe__echo: approve}\n";
    let engine = engine(&ws, &server, extra).await;
    let slow = Person::new(&engine, Does::Approve).after(std::time::Duration::from_millis(1500));
    let (result, _) = run(&engine, "go", &slow).await;
    assert!(!result.time_boxed, "the 1.5 s approval wait was given back to the 1 s budget");
    assert_eq!(result.text, "Ran it.");
    assert!(!result.tool_calls[0].outcome.is_error, "{:?}", result.tool_calls[0].outcome);
}

#[tokio::test]
async fn one_turn_per_channel_across_engines_sharing_a_state_directory() {
    let ws = workspace(&[("probe", guests::PROBE)]);
    let gated = Answer::text(&["Asking."]).call("t1", "probe__echo", json!({}));
    let server = LlmServer::start(vec![gated.into(), Answer::text(&["Second."]).into()]).await;
    let extra = "human:\n  overrides: {probe__echo: approve}\n";
    let (a, b) = (
        std::sync::Arc::new(engine(&ws, &server, extra).await),
        std::sync::Arc::new(engine(&ws, &server, extra).await),
    );
    let first = tokio::spawn({
        let a = a.clone();
        async move { a.run_turn(turn("shared", "first"), &NoEvents, &Person::new(&a, Does::Nothing)).await }
    });
    while server.requests().is_empty() {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let state = skillhost::store::StateStore::new(ws.path().join("state"));
    let markers = async || state.keys(skillhost::engine::inflight::NAMESPACE).await.unwrap().len();
    assert_eq!(markers().await, 1, "the running turn holds a marker");
    let second = tokio::spawn(async move { b.run_turn(turn("shared", "second"), &NoEvents, &NonInteractive).await });
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    assert_eq!(server.requests().len(), 1, "the other engine waits for the channel");
    first.abort(); // the person never answers; the turn is dropped, its marker removed
    let result = tokio::time::timeout(std::time::Duration::from_secs(5), second).await.unwrap().unwrap().unwrap();
    assert_eq!(result.text, "Second.");
    assert_eq!(markers().await, 0, "no marker is left behind");
}

#[tokio::test]
async fn every_provider_drives_a_multi_step_turn_with_parallel_calls() {
    let providers = [
        "provider: anthropic\n  anthropic: {api_key: k, base_url: 'URL'}",
        "provider: openai\n  openai: {api_key: k, base_url: 'URL'}",
        "provider: openai_compatible\n  openai_compatible: {base_url: 'URL/v1'}",
        "provider: bedrock\n  bedrock: {access_key_id: AKID, secret_access_key: S, region: us-east-1, base_url: 'URL'}",
        "provider: bedrock\n  bedrock: {api: responses, api_key: BK, region: us-east-1, base_url: 'URL'}",
    ];
    for llm in providers {
        let ws = workspace(&[("probe", guests::PROBE)]);
        let first = Answer::text(&["Looking."]).call("c1", "probe__echo", json!({"n": 1})).call(
            "c2",
            "probe__echo",
            json!({"n": 2}),
        );
        let second = Answer::text(&[]).call("c3", "probe__counter", json!({}));
        let server = LlmServer::start(vec![first.into(), second.into(), Answer::text(&["All ", "done."]).into()]).await;
        let yaml = format!(
            "skills:\n  paths: [skills]\n  builtins: []\nstate:\n  filesystem: {{path: state}}\nllm:\n  model: test-model\n  {}\n",
            llm.replace("URL", &server.url())
        );
        let engine = skillhost_tests::engine_from(&ws, &yaml).await;
        let (result, _) = run(&engine, "go", &NonInteractive).await;
        let calls: Vec<(&str, bool)> =
            result.tool_calls.iter().map(|c| (c.tool_call_id.as_str(), c.outcome.is_error)).collect();
        assert_eq!(calls, [("c1", false), ("c2", false), ("c3", false)], "{llm}");
        assert_eq!((result.text.as_str(), result.rounds), ("All done.", 3), "{llm}");
        assert_eq!(parse(&result.tool_calls[1].outcome.content)["n"], 2, "{llm}");
        // The third request carries every call and result so far, whatever the wire format.
        let third = server.body(2).to_string();
        for id in ["c1", "c2", "c3"] {
            assert!(third.contains(&format!("\"{id}\"")), "{llm}: {id} missing from {third}");
        }
    }
}
