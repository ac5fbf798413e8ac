//! A skill asking whoever drives the call, mid-call (the `ask` import), through each command
//! that serves skills, with the real binary and the `probe` test guest's `ask` tool:
//!
//! - `skillhost call`: on a terminal the form is asked there; without one every request is
//!   answered `unavailable`, each with why;
//! - `run --adapter api`: the form is a `question_requested` in the approval-v1 stream,
//!   answered after the skill's own deadline would have passed (the wait does not count),
//!   and sampling is answered by the agent's own model;
//! - `skillhost mcp` at 2025-11-25: `elicitation/create` (the schema untouched) and
//!   `sampling/createMessage` on the session; roots the client did not declare are not asked;
//! - `skillhost mcp` at 2026-07-28: `input_required` rounds whose retries run the tool again
//!   from the start, answered from what is recorded; a repeated retry is accepted, a
//!   different answer to the same round and a state for another call are refused.

mod support;

use serde_json::{Value, json};
use skillhost_tests::llm_server::{Answer, LlmServer};
use skillhost_tests::{Workspace, guests, run_on_terminal};
use std::time::Duration;
use support::api::ApiProcess;
use support::raw::Raw;
use support::*;

/// A workspace with the probe (its own `[limits]` from `limits`) and a config ending in `extra`.
fn probe_workspace(limits: &str, extra: &str) -> Workspace {
    let ws = Workspace::new();
    ws.add_skill("skills", "probe", guests::PROBE, &format!("[capabilities]\nmemory = true\n{limits}"));
    let yaml = format!("skills:\n  paths: [skills]\n  builtins: []\nstate:\n  filesystem: {{path: state}}\n{extra}");
    std::fs::write(ws.path().join("config.yaml"), yaml).unwrap();
    ws
}

fn name_form() -> Value {
    json!({"form": {"message": "What is your name?", "schema": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}}})
}

fn every_kind() -> Value {
    json!({"requests": {
        "name": name_form(),
        "capital": {"sampling": {"prompt": "What is the capital of France?", "max_tokens": 20}},
        "roots": {"roots": {}}
    }})
}

#[test]
fn call_without_a_terminal_answers_every_request_unavailable_saying_why() {
    let ws = probe_workspace("", "");
    let out = skillhost(&ws, &["call", "probe__ask", &every_kind().to_string()], "");
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let answers: Value = serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", out.stdout));
    let why = |key: &str| answers[key]["unavailable"].as_str().unwrap_or_else(|| panic!("{key}: {answers}")).to_owned();
    assert!(why("name").contains("terminal"), "{answers}");
    assert!(why("capital").contains("no model can be sampled here"), "{answers}");
    assert!(why("roots").contains("roots are an MCP client's"), "{answers}");
}

#[test]
fn call_on_a_terminal_asks_the_form_there() {
    let ws = probe_workspace("", "");
    let bin = env!("CARGO_BIN_EXE_skillhost");
    let input = json!({"requests": {"name": name_form()}}).to_string();
    let (code, screen) = run_on_terminal(ws.path(), &format!("{bin} call probe__ask '{input}'"), "Ada\n");
    assert_eq!(code, 0, "{screen}");
    assert!(screen.contains("Skill `probe` asks: What is your name?"), "{screen}");
    // The JSON object printed (pretty, so over lines): from the last line opening one.
    let text = screen.replace('\r', "");
    let opening = |at: &usize| *at == 0 || text[..*at].ends_with('\n') || text[..*at].ends_with("> ");
    let start = text.match_indices("{\n").map(|(at, _)| at).filter(opening).last();
    let start = start.unwrap_or_else(|| panic!("nothing printed: {screen}"));
    let printed: Value = serde_json::from_str(text[start..].trim()).unwrap_or_else(|e| panic!("{e}: {screen}"));
    assert_eq!(printed["name"], json!({"form": {"action": "accept", "content": {"name": "Ada"}}}), "{screen}");
}

/// In a turn over the API: the form is asked in the stream and answered after both the
/// skill's 1 s deadline and the turn's 3 s budget would have passed (a wait for a person
/// counts against neither); the agent's own model samples (its request carries the skill's
/// prompt and no tools); roots are unavailable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_a_turn_the_person_answers_the_form_and_the_agents_model_samples() {
    let llm = LlmServer::start(vec![
        Answer::default().call("a1", "probe__ask", every_kind()).into(),
        Answer::text(&["Paris."]).into(),
        Answer::text(&["Done."]).into(),
    ])
    .await;
    let extra = format!(
        "adapter:\n  type: api\nengine:\n  session:\n    deadline_seconds: 3\nllm:\n  provider: anthropic\n  model: test-model\n  max_tokens: 500\n  anthropic: {{api_key: test, base_url: '{}'}}\n",
        llm.url()
    );
    let ws = probe_workspace("[limits]\ntimeout_ms = 1000\n", &extra);
    let api = ApiProcess::start(&ws).await;
    let mut stream = api.stream("who am I?", "c").await;
    let asked = stream.until("question_requested").await.pop().unwrap();
    assert!(asked.data["prompt"].as_str().unwrap().contains("Skill `probe` asks: What is your name?"), "{asked:?}");
    // Longer than the call's own deadline and the turn's: the wait for the person does not count.
    tokio::time::sleep(Duration::from_millis(3500)).await;
    api.answer(asked.data["question_id"].as_str().unwrap(), "Ada").await;
    let done = stream.until("run_completed").await;
    assert_eq!(done.last().unwrap().data["text"], "Done.", "{}", api.stderr());

    let sampling = llm.body(1);
    assert_eq!(sampling["messages"][0]["content"][0]["text"], "What is the capital of France?", "{sampling}");
    assert!(sampling["tools"].as_array().is_none_or(Vec::is_empty), "no tools offered to sampling: {sampling}");
    let result: Value = serde_json::from_str(tool_results(&llm, 2)[0]["content"].as_str().unwrap()).unwrap();
    assert_eq!(result["name"], json!({"form": {"action": "accept", "content": {"name": "Ada"}}}), "{result}");
    assert_eq!(result["capital"]["sampled"]["text"], "Paris.", "{result}");
    assert_eq!(result["capital"]["sampled"]["model"], "test-model", "{result}");
    assert!(result["roots"]["unavailable"].is_string(), "{result}");
}

/// `skillhost mcp` at 2025-11-25: each request the client declared goes to it on the session
/// as it is (the form's schema untouched, defaults and enums included); roots, which it did
/// not declare, are not asked.
#[test]
fn over_mcp_before_2026_the_client_is_asked_on_its_session() {
    let ws = probe_workspace("", "");
    let mut raw = Raw::start(&ws);
    let client = json!({"name": "raw", "version": "0"});
    let capabilities = json!({"elicitation": {"form": {}}, "sampling": {}});
    let init = json!({"protocolVersion": "2025-11-25", "capabilities": capabilities, "clientInfo": client});
    raw.request("initialize", init);
    raw.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let schema = json!({"type": "object", "properties": {
        "status": {"type": "string", "enum": ["active", "inactive"], "default": "active"},
        "tags": {"type": "array", "items": {"anyOf": [{"const": "a", "title": "A"}, {"const": "b", "title": "B"}]}}
    }, "required": []});
    let requests = json!({"requests": {
        "form": {"form": {"message": "Review", "schema": schema}},
        "capital": {"sampling": {"prompt": "Capital of France?", "max_tokens": 20}},
        "roots": {"roots": {}}
    }});
    raw.send(json!({"jsonrpc": "2.0", "id": 100, "method": "tools/call", "params": {"name": "probe__ask", "arguments": requests}}));
    let mut asked = Vec::new();
    let result = loop {
        let message = raw.next();
        match message["method"].as_str() {
            Some("elicitation/create") => {
                assert_eq!(message["params"]["requestedSchema"], schema, "passed on untouched: {message}");
                let answer = json!({"action": "accept", "content": {"status": "inactive", "tags": ["b"]}});
                raw.send(json!({"jsonrpc": "2.0", "id": message["id"], "result": answer}));
                asked.push("elicitation/create");
            }
            Some("sampling/createMessage") => {
                assert_eq!(message["params"]["maxTokens"], 20, "{message}");
                let said = json!({"role": "assistant", "content": {"type": "text", "text": "Paris"}, "model": "client-model", "stopReason": "endTurn"});
                raw.send(json!({"jsonrpc": "2.0", "id": message["id"], "result": said}));
                asked.push("sampling/createMessage");
            }
            Some(other) if message.get("id").is_some() => panic!("not declared, never asked: {other}"),
            _ if message["id"] == 100 => break message,
            _ => {}
        }
    };
    assert_eq!(asked, ["sampling/createMessage", "elicitation/create"], "in the skill's order (its keys sorted)");
    let answers: Value = serde_json::from_str(result["result"]["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(answers["form"]["form"]["content"], json!({"status": "inactive", "tags": ["b"]}), "{answers}");
    assert_eq!(
        answers["capital"]["sampled"],
        json!({"text": "Paris", "model": "client-model", "stop_reason": "endTurn"})
    );
    assert!(answers["roots"]["unavailable"].as_str().unwrap().contains("roots/list"), "{answers}");
}

/// A `tools/call` at 2026-07-28 on stdio (`_meta` names the revision and a client that
/// answers forms), with `extra` params (`requestState`, `inputResponses`).
fn call_2026(raw: &mut Raw, arguments: &Value, extra: Value) -> Value {
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}}
    });
    let mut params = json!({"name": "probe__ask", "arguments": arguments, "_meta": meta});
    for (key, value) in extra.as_object().unwrap() {
        params[key] = value.clone();
    }
    raw.request("tools/call", params)
}

fn accept(key: &str, name: &str) -> Value {
    json!({key: {"action": "accept", "content": {"name": name}}})
}

/// `skillhost mcp` at 2026-07-28: two rounds, each an `input_required` result; every retry
/// runs the tool from the start (its side effect before the question repeats: the state
/// counter), answered from what is recorded; the same retry again is accepted, a different
/// answer to an answered round is refused, as is a state for other arguments.
#[test]
fn over_mcp_at_2026_each_round_is_a_retry_that_runs_the_tool_again() {
    let ws = probe_workspace("", "");
    let mut raw = Raw::start(&ws);
    let arguments = json!({"requests": {"name": name_form()}, "rounds": 2});

    let first = call_2026(&mut raw, &arguments, json!({}));
    let result = &first["result"];
    assert_eq!(result["resultType"], "input_required", "{first}");
    assert_eq!(result["inputRequests"]["name"]["method"], "elicitation/create", "{first}");
    let one = result["requestState"].as_str().unwrap().to_owned();
    // A retry without answers decides nothing: the round is asked again.
    let bare = call_2026(&mut raw, &arguments, json!({"requestState": one}));
    assert_eq!(bare["result"]["inputRequests"]["name"]["method"], "elicitation/create", "{bare}");

    let second = call_2026(&mut raw, &arguments, json!({"requestState": one, "inputResponses": accept("name", "Ada")}));
    assert_eq!(second["result"]["resultType"], "input_required", "{second}");
    assert!(second["result"]["inputRequests"]["name_2"].is_object(), "the second round: {second}");
    let two = second["result"]["requestState"].as_str().unwrap().to_owned();
    assert_ne!(one, two);

    // The same retry again is the same answer: accepted, the tool runs again to round two.
    let again = call_2026(&mut raw, &arguments, json!({"requestState": one, "inputResponses": accept("name", "Ada")}));
    assert_eq!(again["result"]["resultType"], "input_required", "{again}");
    // Another answer to the round already answered, or the state for other arguments: refused.
    let changed =
        call_2026(&mut raw, &arguments, json!({"requestState": one, "inputResponses": accept("name", "Bob")}));
    assert_eq!(changed["error"]["code"], -32602, "{changed}");
    assert!(changed["error"]["message"].as_str().unwrap().contains("already answered differently"), "{changed}");
    let other = json!({"requests": {"name": name_form()}, "rounds": 3});
    let moved = call_2026(&mut raw, &other, json!({"requestState": two, "inputResponses": accept("name_2", "Bea")}));
    assert_eq!(moved["error"]["code"], -32602, "{moved}");
    assert!(moved["error"]["message"].as_str().unwrap().contains("another call"), "{moved}");

    let last = call_2026(&mut raw, &arguments, json!({"requestState": two, "inputResponses": accept("name_2", "Bea")}));
    assert_eq!(last["result"]["resultType"], "complete", "{last}");
    let answers: Value = serde_json::from_str(last["result"]["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(answers["name"]["form"]["content"]["name"], "Ada", "round one, from the record: {answers}");
    assert_eq!(answers["name_2"]["form"]["content"]["name"], "Bea", "{answers}");

    // Each run counted its rounds before asking: 1 (asked), 1 (the bare retry), 2 (answered,
    // asked again), 2 (the repeated retry), 2 (the last): what a tool does before a question
    // happens again on each retry.
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}});
    let counted =
        raw.request("tools/call", json!({"name": "probe__state_get", "arguments": {"key": "asked"}, "_meta": meta}));
    let counted: Value = serde_json::from_str(counted["result"]["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(counted["value"], "8", "{counted}");
}

/// What the probe's state counter `asked` holds (each run of `probe__ask` adds one per
/// round before asking).
fn asked_count(raw: &mut Raw) -> Value {
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}});
    let counted =
        raw.request("tools/call", json!({"name": "probe__state_get", "arguments": {"key": "asked"}, "_meta": meta}));
    let counted: Value = serde_json::from_str(counted["result"]["content"][0]["text"].as_str().unwrap()).unwrap();
    counted["value"].clone()
}

fn refused(answer: &Value, why: &str) {
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    assert!(answer["error"]["message"].as_str().unwrap().contains(why), "{answer}");
}

/// `skillhost mcp` at 2026-07-28, a gated tool that also asks its caller: one approval runs
/// it to completion once. Once the call completed, a retry of any of its states (the
/// approval's, the round's; with or without answers) runs nothing and is -32602; the round's
/// state expires with the approval, not later; an approval's state asked again is a new
/// approval, which runs nothing until decided.
#[test]
fn over_mcp_at_2026_one_approval_completes_its_call_once_however_it_is_replayed() {
    let ws = probe_workspace("", "human:\n  overrides: {probe__ask: approve}\n");
    let mut raw = Raw::start(&ws);
    let arguments = json!({"requests": {"name": name_form()}, "rounds": 1});
    let approve = json!({"approval": {"action": "accept", "content": {"approve": true}}});

    let first = call_2026(&mut raw, &arguments, json!({}));
    assert_eq!(first["result"]["inputRequests"]["approval"]["method"], "elicitation/create", "{first}");
    let approval = first["result"]["requestState"].as_str().unwrap().to_owned();
    let approval_claims = state_claims(&approval);
    let second = call_2026(&mut raw, &arguments, json!({"requestState": approval, "inputResponses": approve.clone()}));
    assert!(second["result"]["inputRequests"]["name"].is_object(), "approved, it asks its question: {second}");
    let round = second["result"]["requestState"].as_str().unwrap().to_owned();
    let round_claims = state_claims(&round);
    assert_eq!(round_claims["p"], approval_claims["e"], "the round carries the approval's entry: {round_claims}");
    assert!(round_claims["x"].as_u64() <= approval_claims["x"].as_u64(), "no later than the approval's deadline");
    let done = call_2026(&mut raw, &arguments, json!({"requestState": round, "inputResponses": accept("name", "Ada")}));
    assert_eq!(done["result"]["resultType"], "complete", "{done}");
    assert_eq!(asked_count(&mut raw), "2", "one run to the question, one to the end");

    for _ in 0..2 {
        let answers = accept("name", "Ada");
        refused(&call_2026(&mut raw, &arguments, json!({"requestState": round, "inputResponses": answers})), "already");
        refused(&call_2026(&mut raw, &arguments, json!({"requestState": round})), "already");
        let replayed = json!({"requestState": approval, "inputResponses": approve.clone()});
        refused(&call_2026(&mut raw, &arguments, replayed), "already");
    }
    // The approval's state without an answer: the call is asked again, a new approval.
    let anew = call_2026(&mut raw, &arguments, json!({"requestState": approval}));
    assert_eq!(anew["result"]["inputRequests"]["approval"]["method"], "elicitation/create", "{anew}");
    assert_ne!(state_claims(anew["result"]["requestState"].as_str().unwrap())["e"], approval_claims["e"]);
    assert_eq!(asked_count(&mut raw), "2", "nothing ran again");
}

/// The claims of a `requestState` (`v1.<day>.<claims>.<mac>`), as JSON.
fn state_claims(state: &str) -> Value {
    use base64::Engine as _;
    let payload = state.split('.').nth(2).unwrap();
    serde_json::from_slice(&base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(payload).unwrap()).unwrap()
}

/// The Python SDK's `skillhost.ask` (`reader_py`, built with componentize-py): unavailable
/// under `call` without a terminal, and over MCP at 2026-07-28 a round its retry answers.
#[test]
fn a_python_skill_asks_through_its_sdk() {
    let ws = Workspace::new();
    ws.add_skill("skills", "reader_py", guests::READER_PY, "");
    let yaml = "skills:\n  paths: [skills]\n  builtins: []\nstate:\n  filesystem: {path: state}\n";
    std::fs::write(ws.path().join("config.yaml"), yaml).unwrap();
    let out = skillhost(&ws, &["call", "reader_py__ask_name", r#"{"message": "Who is there?"}"#], "");
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let answers: Value = serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", out.stdout));
    assert_eq!(answers["name"]["kind"], "unavailable", "{answers}");
    assert!(answers["name"]["why"].as_str().unwrap().contains("terminal"), "{answers}");

    let mut raw = Raw::start(&ws);
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}, "roots": {}}
    });
    let arguments = json!({"message": "Who is there?"});
    let params = json!({"name": "reader_py__ask_name", "arguments": arguments, "_meta": meta});
    let first = raw.request("tools/call", params.clone());
    assert_eq!(first["result"]["resultType"], "input_required", "{first}");
    // Its `required_client_capabilities` hook: a client that answers no forms is refused.
    let mut bare = params.clone();
    bare["_meta"]["io.modelcontextprotocol/clientCapabilities"] = json!({});
    let refused = raw.request("tools/call", bare);
    assert_eq!(refused["error"]["code"], -32021, "{refused}");
    assert_eq!(refused["error"]["data"]["requiredCapabilities"], json!({"elicitation": {}}), "{refused}");
    assert_eq!(first["result"]["inputRequests"]["name"]["params"]["message"], "Who is there?", "{first}");
    assert_eq!(first["result"]["inputRequests"]["roots"]["method"], "roots/list", "{first}");
    let mut retry = params;
    retry["requestState"] = first["result"]["requestState"].clone();
    retry["inputResponses"] = json!({
        "name": {"action": "accept", "content": {"name": "Ada"}},
        "roots": {"roots": [{"uri": "file:///work", "name": "work"}]}
    });
    let last = raw.request("tools/call", retry);
    let answers: Value = serde_json::from_str(last["result"]["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(answers["name"], json!({"kind": "form", "action": "accept", "content": {"name": "Ada"}}), "{answers}");
    assert_eq!(answers["roots"], json!({"kind": "roots", "roots": [{"uri": "file:///work", "name": "work"}]}));
}

/// The Python SDK's `skillhost.lists`: a Python skill says its tools changed over `skillhost
/// mcp`, and the client is told its tool list changed.
#[test]
fn a_python_skill_says_its_tools_changed() {
    let ws = Workspace::new();
    ws.add_skill("skills", "reader_py", guests::READER_PY, "");
    let yaml = "skills:\n  paths: [skills]\n  builtins: []\nstate:\n  filesystem: {path: state}\n";
    std::fs::write(ws.path().join("config.yaml"), yaml).unwrap();
    let mut raw = Raw::start(&ws);
    raw.initialize("2025-11-25");
    let (told, _) = raw.call("reader_py__lists_changed", json!({}));
    assert_eq!(told["result"]["isError"], false, "{told}");
    let changed =
        (0..50).any(|_| raw.next_within(Duration::from_secs(20))["method"] == "notifications/tools/list_changed");
    assert!(changed, "the client is told its tool list changed");
}
