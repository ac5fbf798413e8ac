//! The HTTP API adapter over real HTTP, in-process on 127.0.0.1:0, against the scripted LLM
//! server and real guests: every trigger mode, the approval-v1 stream's events and ordering,
//! approvals and questions through their routes, auth, and malformed requests.

use serde_json::{Value, json};
use skillhost::adapters::api::ApiConfig;
use skillhost_tests::api_client::{self, ApiServer, Event, kinds};
use skillhost_tests::llm_server::{Answer, LlmServer, Reply};
use skillhost_tests::{Workspace, guests};
use std::time::Duration;

const PROBE: (&str, &str, &str) = ("probe", guests::PROBE, "");

/// The scripted LLM, the workspace and the API server over them.
struct Harness {
    llm: LlmServer,
    server: ApiServer,
    _ws: Workspace,
}

/// `skills` as `(name, wasm, skill.toml)`; `extra` is appended to the config (top-level keys);
/// `skills_extra` goes inside `skills:`.
async fn harness_with(
    skills: &[(&str, &str, &str)],
    replies: Vec<Reply>,
    extra: &str,
    skills_extra: &str,
    config: ApiConfig,
) -> Harness {
    let ws = Workspace::new();
    std::fs::create_dir_all(ws.path().join("skills")).unwrap();
    for (name, wasm, manifest) in skills {
        ws.add_skill("skills", name, wasm, manifest);
    }
    let llm = LlmServer::start(replies).await;
    let yaml = format!(
        "skills:\n  paths: [skills]\n{skills_extra}state:\n  filesystem: {{path: state}}\nlearning:\n  memory:\n    filesystem: {{path: memory}}\n\
         llm:\n  provider: anthropic\n  model: test-model\n  max_tokens: 500\n  anthropic: {{api_key: k, base_url: '{}'}}\n{extra}",
        llm.url()
    );
    let engine = skillhost_tests::engine_from(&ws, &yaml).await;
    let server = ApiServer::start(engine, config).await;
    Harness { llm, server, _ws: ws }
}

async fn harness(replies: Vec<Reply>, extra: &str) -> Harness {
    harness_with(&[PROBE], replies, extra, "", api_client::config()).await
}

fn find<'a>(events: &'a [Event], kind: &str) -> &'a Value {
    &events.iter().find(|e| e.kind == kind).unwrap_or_else(|| panic!("no {kind} in {events:#?}")).data
}

/// The tool_result blocks of the last message of LLM request `n`: `(id, content, is_error)`.
fn tool_results(llm: &LlmServer, n: usize) -> Vec<(String, Value, bool)> {
    let body = llm.body(n);
    let last = body["messages"].as_array().unwrap().last().unwrap().clone();
    let blocks = last["content"].as_array().unwrap().iter().filter(|b| b["type"] == "tool_result");
    blocks
        .map(|b| {
            let content = serde_json::from_str(b["content"].as_str().unwrap()).unwrap_or(Value::Null);
            (b["tool_use_id"].as_str().unwrap().to_owned(), content, b["is_error"] == true)
        })
        .collect()
}

/// Polls `f` until it holds (5 s at most).
async fn eventually(mut f: impl AsyncFnMut() -> bool) {
    for _ in 0..250 {
        if f().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("condition not reached in 5 s");
}

#[tokio::test]
async fn approval_v1_streams_text_blocks_and_tool_events_in_order() {
    let first =
        Answer::text(&["\n", "Checking ", "logs."]).call("c1", "probe__echo", json!({"query": "select 1", "a": 1}));
    let h = harness(vec![first.into(), Answer::text(&["Do", "ne."]).into()], "").await;
    let mut sse = h.server.stream(json!({"message": "check", "channel_id": "hook"})).await;
    let headers = sse.response.headers().clone();
    assert_eq!(headers["content-type"], "text/event-stream");
    assert_eq!(headers["x-mithai-capability"], "human-interaction-v1");
    let events = sse.rest().await;
    assert_eq!(
        kinds(&events),
        [
            "run_started",
            "assistant_text_start",
            "assistant_text",
            "assistant_text",
            "assistant_text_end",
            "tool_started",
            "tool_completed",
            "assistant_text_start",
            "assistant_text",
            "assistant_text",
            "assistant_text_end",
            "run_completed"
        ]
    );
    let run_id = events[0].data["run_id"].clone();
    for (i, event) in events.iter().enumerate() {
        assert_eq!(event.data["sequence"], i as u64 + 1);
        assert_eq!(
            (event.data["protocol_version"].clone(), event.data["run_id"].clone()),
            (json!("v2"), run_id.clone())
        );
        assert_eq!((event.data["channel_id"].clone(), event.data["type"].clone()), (json!("hook"), json!(event.kind)));
    }
    assert_eq!(events[2].data["text"], "\nChecking ", "leading whitespace flushed with the first text");
    let started = find(&events, "tool_started");
    assert_eq!(started["tool_input"], json!({"query": "[redacted]", "a": 1}));
    assert_eq!((started["tool_call_id"].clone(), started["approval_id"].clone()), (json!("c1"), Value::Null));
    let completed = find(&events, "tool_completed");
    assert_eq!((completed["approved"].clone(), completed["is_empty"].clone()), (json!(true), json!(false)));
    assert!(completed["duration"].as_f64().unwrap() >= 0.0);
    assert_eq!(find(&events, "run_completed")["text"], "Done.");
    assert!(h.llm.body(0)["tools"].as_array().unwrap().iter().any(|t| t["name"] == "human__ask"));
}

#[tokio::test]
async fn approve_and_confirm_through_the_decision_route() {
    let replies = vec![
        Answer::default().call("c1", "probe__echo", json!({"a": 1})).into(),
        Answer::default().call("c2", "probe__counter", json!({})).into(),
        Answer::text(&["Both ran."]).into(),
    ];
    let h = harness(replies, "human:\n  overrides: {probe__echo: approve, probe__counter: confirm}\n").await;
    let mut sse = h.server.stream(json!({"message": "go"})).await;
    let events = sse.until("approval_requested").await;
    let request = &events.last().unwrap().data;
    assert_eq!(request["channel_id"], "trigger", "the default channel");
    assert_eq!((request["level"].clone(), request["confirmation_challenge"].clone()), (json!("approve"), Value::Null));
    assert_eq!((request["tool_name"].clone(), request["tool_call_id"].clone()), (json!("probe__echo"), json!("c1")));
    assert_eq!(request["tool_input"], json!({"a": 1}));
    assert_eq!(request["safe_description"], "Tool: probe__echo\nAction: Return the input unchanged.");
    assert!(request["expires_at"].as_f64().unwrap() > 1.7e9);
    let id = request["approval_id"].as_str().unwrap().to_owned();

    // A field the route does not act on is refused, naming it, and decides nothing.
    let (status, refused) = h.server.decide(&id, json!({"approved": true, "argument": {"a": 2}})).await;
    assert_eq!(status, 400, "{refused}");
    assert!(refused["error"].as_str().unwrap().contains("`argument`"), "{refused}");
    let (status, pending) = ApiServer::call(h.server.get(&format!("/api/approvals/{id}"))).await;
    assert_eq!((status, pending["outcome"].clone()), (200, json!("pending")));
    assert_eq!(pending["run_id"], request["run_id"]);
    let (status, decided) = h.server.decide(&id, json!({"approved": true})).await;
    assert_eq!((status, decided["outcome"].clone()), (200, json!("approved")));
    assert_eq!(decided["expires_at"], request["expires_at"]);
    assert_eq!(h.server.decide(&id, json!({"approved": true})).await.0, 200, "a repeat is idempotent");
    let (status, conflict) = h.server.decide(&id, json!({"approved": false})).await;
    assert_eq!(status, 409, "{conflict}");
    assert!(conflict["error"].as_str().unwrap().contains("approved"));

    let events = sse.until("approval_requested").await;
    assert_eq!(kinds(&events), ["approval_resolved", "tool_started", "tool_completed", "approval_requested"]);
    assert_eq!(
        (events[0].data["outcome"].clone(), events[0].data["approval_id"].clone()),
        (json!("approved"), json!(id))
    );
    assert_eq!(events[1].data["approval_id"], json!(id));
    let confirm = &events[3].data;
    assert_eq!(
        (confirm["level"].clone(), confirm["confirmation_challenge"].clone()),
        (json!("confirm"), json!("CONFIRM"))
    );
    let id = confirm["approval_id"].as_str().unwrap().to_owned();
    for wrong in [json!({"approved": true}), json!({"approved": true, "confirmation": "confirm"})] {
        let (status, body) = h.server.decide(&id, wrong).await;
        assert_eq!(status, 400, "{body}");
        assert!(body["error"].as_str().unwrap().contains("confirmation"));
    }
    let (_, still) = ApiServer::call(h.server.get(&format!("/api/approvals/{id}"))).await;
    assert_eq!(still["outcome"], "pending");
    let (status, _) = h.server.decide(&id, json!({"approved": true, "confirmation": "CONFIRM"})).await;
    assert_eq!(status, 200);
    let events = sse.rest().await;
    assert_eq!(
        kinds(&events),
        [
            "approval_resolved",
            "tool_started",
            "tool_completed",
            "assistant_text_start",
            "assistant_text",
            "assistant_text_end",
            "run_completed"
        ]
    );
    assert_eq!(tool_results(&h.llm, 2)[0].1, json!({"calls": 1}));
}

#[tokio::test]
async fn a_denied_call_emits_no_tool_events() {
    let replies = vec![Answer::default().call("c1", "probe__echo", json!({})).into(), Answer::text(&["Fine."]).into()];
    let h = harness(replies, "human:\n  overrides: {probe__echo: approve}\n").await;
    let mut sse = h.server.stream(json!({"message": "go"})).await;
    let id = sse.until("approval_requested").await.last().unwrap().data["approval_id"].as_str().unwrap().to_owned();
    assert_eq!(
        h.server.decide(&id, json!({"approved": false, "confirmation": 7})).await.0,
        400,
        "a non-string confirmation"
    );
    let (status, body) = h.server.decide(&id, json!({"approved": false})).await;
    assert_eq!((status, body["outcome"].clone()), (200, json!("denied")));
    let events = sse.rest().await;
    assert_eq!(
        kinds(&events),
        ["approval_resolved", "assistant_text_start", "assistant_text", "assistant_text_end", "run_completed"]
    );
    assert_eq!(events[0].data["outcome"], "denied");
    assert_eq!(tool_results(&h.llm, 1)[0].1["kind"], "denied");
}

#[tokio::test]
async fn of_concurrent_decisions_exactly_one_wins() {
    let replies = vec![Answer::default().call("c1", "probe__echo", json!({})).into(), Answer::text(&["Ok."]).into()];
    let h = harness(replies, "human:\n  overrides: {probe__echo: approve}\n").await;
    let mut sse = h.server.stream(json!({"message": "go"})).await;
    let id = sse.until("approval_requested").await.last().unwrap().data["approval_id"].as_str().unwrap().to_owned();
    let decisions = (0..16).map(|i| {
        let approved = i % 2 == 0;
        let fut = h.server.decide(&id, json!({"approved": approved}));
        async move { (approved, fut.await) }
    });
    let answers = futures::future::join_all(decisions).await;
    let winners: Vec<&(bool, (u16, Value))> = answers.iter().filter(|(_, (s, _))| *s == 200).collect();
    let winning = winners[0].0;
    assert!(winners.iter().all(|(a, _)| *a == winning), "{answers:?}");
    assert_eq!(winners.len(), 8, "every request with the winning decision gets 200: {answers:?}");
    assert!(answers.iter().filter(|(a, _)| *a != winning).all(|(_, (s, _))| *s == 409), "{answers:?}");
    let events = sse.rest().await;
    let expected = if winning { "approved" } else { "denied" };
    assert_eq!(find(&events, "approval_resolved")["outcome"], expected);
    assert_eq!(events.iter().filter(|e| e.kind == "approval_resolved").count(), 1);
}

/// A person's decision is announced (`approval_resolved`) by the route that took it, not when
/// the turn resumes: with the runtime the turns run on held busy, it still arrives at once,
/// exactly once, and the turn goes on when the runtime is free.
#[tokio::test]
async fn a_decision_is_announced_while_the_turns_runtime_is_busy() {
    let replies = vec![Answer::default().call("c1", "probe__echo", json!({})).into(), Answer::text(&["Ran."]).into()];
    let busy = BusyTurns::start(replies, "human:\n  overrides: {probe__echo: approve}\n").await;
    let server = &busy.server;
    let mut sse = server.stream(json!({"message": "go"})).await;
    let id = sse.until("approval_requested").await.last().unwrap().data["approval_id"].as_str().unwrap().to_owned();
    busy.hold().await;
    let decided = std::time::Instant::now();
    assert_eq!(server.decide(&id, json!({"approved": true})).await.0, 200);
    let events = BusyTurns::announced(&mut sse, "approval_resolved", decided).await;
    assert_eq!(
        (events[0].data["approval_id"].clone(), events[0].data["outcome"].clone()),
        (json!(id), json!("approved"))
    );
    assert_eq!(events[0].data["tool_call_id"], "c1");

    let rest = sse.rest().await;
    assert!(decided.elapsed() >= Duration::from_secs(3), "the turn went on only once the runtime was free");
    assert_eq!(
        kinds(&rest),
        [
            "tool_started",
            "tool_completed",
            "assistant_text_start",
            "assistant_text",
            "assistant_text_end",
            "run_completed"
        ]
    );
    let sequences: Vec<u64> =
        events.iter().chain(&rest).map(|e| e.data["sequence"].as_u64().unwrap()).collect::<Vec<_>>();
    assert!(sequences.windows(2).all(|w| w[1] == w[0] + 1), "{sequences:?}");
}

/// The same for an answer: `question_resolved` while the turns' runtime is held busy.
#[tokio::test]
async fn an_answer_is_announced_while_the_turns_runtime_is_busy() {
    let ask = json!({"question": "Which environment?"});
    let replies = vec![Answer::default().call("q1", "human__ask", ask).into(), Answer::text(&["Staging."]).into()];
    let busy = BusyTurns::start(replies, "").await;
    let mut sse = busy.server.stream(json!({"message": "deploy"})).await;
    let id = sse.until("question_requested").await.last().unwrap().data["question_id"].as_str().unwrap().to_owned();
    busy.hold().await;
    let answered = std::time::Instant::now();
    let path = format!("/api/questions/{id}/answer");
    assert_eq!(ApiServer::call(busy.server.post(&path).json(&json!({"answer": "staging"}))).await.0, 200);
    let events = BusyTurns::announced(&mut sse, "question_resolved", answered).await;
    assert_eq!(
        (events[0].data["outcome"].clone(), events[0].data["answer"].clone()),
        (json!("answered"), json!("staging"))
    );
    let rest = sse.rest().await;
    assert!(answered.elapsed() >= Duration::from_secs(3), "the turn went on only once the runtime was free");
    assert_eq!(kinds(&rest), ["assistant_text_start", "assistant_text", "assistant_text_end", "run_completed"]);
    assert_eq!(tool_results(&busy.llm, 1)[0].1, json!({"answer": "staging"}));
}

/// An API server whose turns run on a runtime of one worker that a test can hold busy.
struct BusyTurns {
    server: ApiServer,
    llm: LlmServer,
    /// Always `Some` until dropped.
    turns: Option<tokio::runtime::Runtime>,
    _ws: Workspace,
}

impl BusyTurns {
    /// The probe skill, the scripted LLM with `replies`, `extra` appended to the config.
    async fn start(replies: Vec<Reply>, extra: &str) -> BusyTurns {
        let ws = Workspace::new();
        ws.add_skill("skills", PROBE.0, PROBE.1, PROBE.2);
        let llm = LlmServer::start(replies).await;
        let yaml = format!(
            "skills:\n  paths: [skills]\nstate:\n  filesystem: {{path: state}}\nlearning:\n  memory:\n    filesystem: {{path: memory}}\n\
             llm:\n  provider: anthropic\n  model: m\n  max_tokens: 500\n  anthropic: {{api_key: k, base_url: '{}'}}\n{extra}",
            llm.url()
        );
        let engine = skillhost_tests::engine_from(&ws, &yaml).await;
        let turns = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        let server = ApiServer::start_with_turns(engine, api_client::config(), turns.handle().clone()).await;
        BusyTurns { server, llm, turns: Some(turns), _ws: ws }
    }

    /// Holds the turns' only worker for 3 s, from when this returns.
    async fn hold(&self) {
        let (held, holding) = tokio::sync::oneshot::channel();
        self.turns.as_ref().expect("running").spawn(async move {
            held.send(()).unwrap();
            std::thread::sleep(Duration::from_secs(3));
        });
        holding.await.unwrap();
    }

    /// The stream's next event, which must be `kind`, within 2 s of `since`: while the
    /// turns' runtime is held, only the route that took the decision can have sent it.
    async fn announced(sse: &mut api_client::Sse, kind: &str, since: std::time::Instant) -> Vec<Event> {
        let announced = tokio::time::timeout(Duration::from_secs(2), sse.until(kind)).await;
        let events = announced.unwrap_or_else(|_| panic!("no {kind} while the turns' runtime was busy"));
        assert!(since.elapsed() < Duration::from_secs(2));
        assert_eq!(kinds(&events), [kind]);
        events
    }
}

impl Drop for BusyTurns {
    fn drop(&mut self) {
        // A runtime cannot be dropped inside another one's task.
        if let Some(turns) = self.turns.take() {
            turns.shutdown_background();
        }
    }
}

#[tokio::test]
async fn a_client_leaving_cancels_the_run_and_its_pending_approval() {
    let replies = vec![Answer::default().call("c1", "probe__echo", json!({})).into(), Answer::text(&["never"]).into()];
    let mut config = api_client::config();
    config.heartbeat = Duration::from_millis(50);
    let h = harness_with(&[PROBE], replies, "human:\n  overrides: {probe__echo: approve}\n", "", config).await;
    let mut sse = h.server.stream(json!({"message": "go"})).await;
    let id = sse.until("approval_requested").await.last().unwrap().data["approval_id"].as_str().unwrap().to_owned();
    drop(sse);
    let path = format!("/api/approvals/{id}");
    eventually(async || ApiServer::call(h.server.get(&path)).await.1["outcome"] == "cancelled").await;
    let (status, body) = h.server.decide(&id, json!({"approved": true})).await;
    assert_eq!(status, 410, "{body}");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(h.llm.requests().len(), 1, "the tool never ran, so the model was never asked again");
}

/// With the default 15 s heartbeat: the server notices a closed connection by itself, not only
/// when it next writes (`eventually` gives up after 5 s).
#[tokio::test]
async fn a_client_leaving_is_noticed_before_the_next_heartbeat() {
    let replies = vec![Answer::default().call("c1", "probe__echo", json!({})).into(), Answer::text(&["never"]).into()];
    let h = harness_with(&[PROBE], replies, "human:\n  overrides: {probe__echo: approve}\n", "", api_client::config())
        .await;
    let mut sse = h.server.stream(json!({"message": "go"})).await;
    let id = sse.until("approval_requested").await.last().unwrap().data["approval_id"].as_str().unwrap().to_owned();
    drop(sse);
    let path = format!("/api/approvals/{id}");
    eventually(async || ApiServer::call(h.server.get(&path)).await.1["outcome"] == "cancelled").await;
}

#[tokio::test]
async fn an_unanswered_approval_times_out_and_is_then_gone() {
    let replies =
        vec![Answer::default().call("c1", "probe__echo", json!({})).into(), Answer::text(&["Timed out."]).into()];
    let h = harness(replies, "human:\n  timeout_seconds: 1\n  overrides: {probe__echo: approve}\n").await;
    let mut sse = h.server.stream(json!({"message": "go"})).await;
    let id = sse.until("approval_requested").await.last().unwrap().data["approval_id"].as_str().unwrap().to_owned();
    let events = sse.rest().await;
    assert_eq!(find(&events, "approval_resolved")["outcome"], "timed_out");
    assert!(!events.iter().any(|e| e.kind == "tool_started"));
    assert_eq!(h.server.decide(&id, json!({"approved": true})).await.0, 410);
    let (status, body) = ApiServer::call(h.server.get(&format!("/api/approvals/{id}"))).await;
    assert_eq!((status, body["outcome"].clone()), (200, json!("timed_out")));
    assert_eq!(tool_results(&h.llm, 1)[0].1["kind"], "approval_timeout");
}

#[tokio::test]
async fn questions_are_asked_and_answered_through_their_route() {
    let ask = json!({"question": "Which environment?", "choices": ["staging", "prod"]});
    let replies =
        vec![Answer::default().call("q1", "human__ask", ask).into(), Answer::text(&["Staging it is."]).into()];
    let h = harness(replies, "").await;
    let mut sse = h.server.stream(json!({"message": "deploy"})).await;
    let events = sse.until("question_requested").await;
    let question = &events.last().unwrap().data;
    assert_eq!(
        (question["prompt"].clone(), question["choices"].clone()),
        (json!("Which environment?"), json!(["staging", "prod"]))
    );
    let id = question["question_id"].as_str().unwrap().to_owned();
    let path = format!("/api/questions/{id}");
    let (status, pending) = ApiServer::call(h.server.get(&path)).await;
    assert_eq!((status, pending["outcome"].clone(), pending["answer"].clone()), (200, json!("pending"), Value::Null));
    let answer = |body: Value| ApiServer::call(h.server.post(&format!("{path}/answer")).json(&body));
    for bad in [json!({}), json!({"answer": ""}), json!({"answer": 5}), json!({"answer": "x".repeat(4097)})] {
        assert_eq!(answer(bad).await.0, 400);
    }
    let (status, refused) = answer(json!({"answer": "prod", "reason": "why not"})).await;
    assert_eq!(status, 400, "a field the route does not act on: {refused}");
    assert!(refused["error"].as_str().unwrap().contains("`reason`"), "{refused}");
    let (status, answered) = answer(json!({"answer": "staging"})).await;
    assert_eq!(
        (status, answered["outcome"].clone(), answered["answer"].clone()),
        (200, json!("answered"), json!("staging"))
    );
    assert_eq!(answered["prompt"], "Which environment?");
    assert_eq!(answer(json!({"answer": "staging"})).await.0, 200);
    assert_eq!(answer(json!({"answer": "prod"})).await.0, 409);
    let unknown = ApiServer::call(h.server.post("/api/questions/nope/answer").json(&json!({"answer": "a"}))).await;
    assert_eq!(unknown.0, 410);
    assert_eq!(ApiServer::call(h.server.get("/api/questions/nope")).await.0, 410);
    let events = sse.rest().await;
    assert_eq!(
        kinds(&events),
        ["question_resolved", "assistant_text_start", "assistant_text", "assistant_text_end", "run_completed"]
    );
    assert_eq!(
        (events[0].data["outcome"].clone(), events[0].data["answer"].clone()),
        (json!("answered"), json!("staging"))
    );
    assert_eq!(tool_results(&h.llm, 1)[0].1, json!({"answer": "staging"}));
}

/// Forms: a question with a JSON schema shows it in `question_requested` and the status
/// route; an answer that does not fit is refused (422, saying where) and the question stays
/// open; `answer_json` that fits is taken and reaches the model as JSON.
#[tokio::test]
async fn a_question_with_a_schema_takes_only_an_answer_that_fits() {
    let schema = json!({"type": "object", "properties": {"replicas": {"type": "integer", "minimum": 1}}, "required": ["replicas"]});
    let ask = json!({"question": "How many replicas?", "schema": schema});
    let replies = vec![Answer::default().call("q1", "human__ask", ask).into(), Answer::text(&["Three."]).into()];
    let h = harness(replies, "").await;
    let mut sse = h.server.stream(json!({"message": "scale"})).await;
    let events = sse.until("question_requested").await;
    let question = &events.last().unwrap().data;
    assert_eq!(question["schema"], schema);
    let id = question["question_id"].as_str().unwrap().to_owned();
    let path = format!("/api/questions/{id}");
    assert_eq!(ApiServer::call(h.server.get(&path)).await.1["schema"], schema);
    let listed = ApiServer::call(h.server.get("/api/questions")).await.1;
    assert_eq!(listed["questions"][0]["schema"], schema, "{listed}");
    let answer = |body: Value| ApiServer::call(h.server.post(&format!("{path}/answer")).json(&body));
    let (status, refused) = answer(json!({"answer_json": {"replicas": 0}})).await;
    assert_eq!(status, 422, "{refused}");
    assert!(refused["error"].as_str().unwrap().contains("/replicas"), "{refused}");
    assert_eq!(answer(json!({"answer": "three"})).await.0, 422);
    assert_eq!(answer(json!({"answer": "x", "answer_json": 1})).await.0, 400);
    let (status, pending) = ApiServer::call(h.server.get(&path)).await;
    assert_eq!((status, pending["outcome"].clone()), (200, json!("pending")), "a refused answer changes nothing");
    let (status, answered) = answer(json!({"answer_json": {"replicas": 3}})).await;
    assert_eq!((status, answered["outcome"].clone()), (200, json!("answered")), "{answered}");
    assert_eq!(answered["answer_json"], json!({"replicas": 3}));
    assert_eq!(answered["answer"], json!(r#"{"replicas":3}"#));
    let events = sse.rest().await;
    assert_eq!(kinds(&events).last(), Some(&"run_completed"));
    assert_eq!(tool_results(&h.llm, 1)[0].1, json!({"answer": {"replicas": 3}}));
}

/// A question whose schema is not a JSON Schema is not asked: the model is told why.
#[tokio::test]
async fn a_question_with_a_broken_schema_is_not_asked() {
    let ask = json!({"question": "How many?", "schema": {"type": 12}});
    let replies = vec![Answer::default().call("q1", "human__ask", ask).into(), Answer::text(&["Sorry."]).into()];
    let h = harness(replies, "").await;
    let events = h.server.stream(json!({"message": "scale"})).await.rest().await;
    assert!(!kinds(&events).contains(&"question_requested"), "{events:#?}");
    let (_, result, is_error) = tool_results(&h.llm, 1).remove(0);
    assert!(is_error && result["error"].as_str().unwrap().contains("schema"), "{result}");
}

#[tokio::test]
async fn heartbeats_fill_idle_time_with_numbered_events() {
    let replies = vec![Answer::default().call("c1", "probe__echo", json!({})).into(), Answer::text(&["Ok."]).into()];
    let mut config = api_client::config();
    config.heartbeat = Duration::from_millis(40);
    let h = harness_with(&[PROBE], replies, "human:\n  overrides: {probe__echo: approve}\n", "", config).await;
    let mut sse = h.server.stream(json!({"message": "go"})).await;
    let id = sse.until("approval_requested").await.last().unwrap().data["approval_id"].as_str().unwrap().to_owned();
    let beats = sse.until("heartbeat").await;
    assert_eq!(beats.len(), 1);
    tokio::time::sleep(Duration::from_millis(200)).await;
    h.server.decide(&id, json!({"approved": true})).await;
    let events = sse.rest().await;
    assert!(events.iter().any(|e| e.kind == "heartbeat"), "more heartbeats while waiting");
    let heartbeat = &beats[0].data;
    assert_eq!((heartbeat["type"].clone(), heartbeat["protocol_version"].clone()), (json!("heartbeat"), json!("v2")));
    let seqs: Vec<u64> = events.iter().map(|e| e.data["sequence"].as_u64().unwrap()).collect();
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1) && seqs[0] > heartbeat["sequence"].as_u64().unwrap(), "{seqs:?}");
}

#[tokio::test]
async fn a_run_failing_mid_block_closes_it_before_run_failed() {
    let h = harness(vec![Reply::Drop(vec!["Half an ".into(), "answer".into()])], "").await;
    let mut sse = h.server.stream(json!({"message": "go"})).await;
    let events = sse.rest().await;
    let k = kinds(&events);
    assert_eq!(k.first(), Some(&"run_started"));
    assert_eq!(&k[k.len() - 2..], ["assistant_text_end", "run_failed"], "{k:?}");
    assert_eq!(k.iter().filter(|k| **k == "assistant_text_start").count(), 1);
    assert!(find(&events, "run_failed")["error"].as_str().unwrap().contains("run failed"));
}

#[tokio::test]
async fn hooks_give_the_target_and_emptiness() {
    let replies = vec![
        Answer::default()
            .call("c1", "hooks_all__plain", json!({"service": "payments-api"}))
            .call("c2", "probe__echo", json!({}))
            .into(),
        Answer::text(&["Ok."]).into(),
    ];
    let skills = [PROBE, ("hooks_all", guests::HOOKS_ALL, "")];
    let h = harness_with(&skills, replies, "", "", api_client::config()).await;
    let events = h.server.stream(json!({"message": "go"})).await.rest().await;
    let started: Vec<&Event> = events.iter().filter(|e| e.kind == "tool_started").collect();
    let plain = started.iter().find(|e| e.data["tool_call_id"] == "c1").unwrap();
    assert_eq!(
        (plain.data["target"].clone(), plain.data["query_kind"].clone()),
        (json!("payments-api"), json!("logs"))
    );
    let echo = started.iter().find(|e| e.data["tool_call_id"] == "c2").unwrap();
    assert!(echo.data.get("target").is_none());
    let empty = |id: &str| {
        events.iter().find(|e| e.kind == "tool_completed" && e.data["tool_call_id"] == id).unwrap().data["is_empty"]
            .clone()
    };
    assert_eq!((empty("c1"), empty("c2")), (json!(false), json!(true)), "`{{}}` is generically empty");
}

#[tokio::test]
async fn fire_and_forget_answers_202_and_cancels_gated_calls() {
    let replies =
        vec![Answer::default().call("c1", "probe__echo", json!({})).into(), Answer::text(&["Could not."]).into()];
    let h = harness(replies, "human:\n  overrides: {probe__echo: approve}\n").await;
    let (status, body) = ApiServer::call(h.server.post("/api/trigger").json(&json!({"message": "go"}))).await;
    let run_id = body["run_id"].as_str().unwrap_or_else(|| panic!("the 202 names its run: {body}")).to_owned();
    assert_eq!((status, body), (202, json!({"status": "accepted", "channel_id": "trigger", "run_id": run_id})));
    eventually(async || h.llm.requests().len() == 2).await;
    assert_eq!(tool_results(&h.llm, 1)[0].1["kind"], "cancelled");
    assert!(
        !h.llm.body(0)["tools"].as_array().unwrap().iter().any(|t| t["name"] == "human__ask"),
        "no questions without a stream"
    );
}

#[tokio::test]
async fn wait_returns_the_answer_with_only_exposed_explicit_successes() {
    let port = skillhost_tests::http_server(200, "ok");
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let first = Answer::text(&["Checking."])
        .call("c1", "http_checker__check_url", json!({"url": format!("http://127.0.0.1:{port}/")}))
        .call("c2", "probe__echo", json!({"x": 1}))
        .call("c3", "http_checker__check_url", json!({"url": format!("http://127.0.0.1:{closed}/"), "timeout_ms": 500}))
        .call("c4", "nope__missing", json!({}));
    let skills = [PROBE, ("http_checker", guests::HTTP_CHECKER, "[capabilities]\nhttp_hosts = [\"127.0.0.1\"]\n")];
    let grants = "  grants:\n    http_checker: {http_hosts: ['127.0.0.1']}\n";
    let h = harness_with(
        &skills,
        vec![first.into(), Answer::text(&["All checked."]).into()],
        "",
        grants,
        api_client::config(),
    )
    .await;
    let (status, body) =
        ApiServer::call(h.server.post("/api/trigger?wait=true").json(&json!({"message": "go", "user_id": "u7"}))).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        (body["text"].clone(), body["time_boxed"].clone(), body["channel_id"].clone()),
        (json!("All checked."), json!(false), json!("trigger"))
    );
    let results = body["tool_results"].as_array().unwrap();
    assert_eq!(results.len(), 1, "{results:?}");
    assert_eq!(results[0]["tool"], "http_checker__check_url");
    assert_eq!(
        (results[0]["result"]["status"].clone(), results[0]["result"]["healthy"].clone()),
        (json!(200), json!(true))
    );
    assert!(results[0].get("input").is_none());
    assert_eq!(body["coverage"], json!({"status": "not_applicable", "observations": []}));
}

#[tokio::test]
async fn ndjson_ends_with_a_done_event_carrying_the_summary() {
    let replies =
        vec![Answer::text(&["One "]).call("c1", "probe__echo", json!({"a": 1})).into(), Answer::text(&["two."]).into()];
    let h = harness(replies, "").await;
    let response =
        h.server.post("/api/trigger?wait=true&stream=true").json(&json!({"message": "go"})).send().await.unwrap();
    assert_eq!(response.headers()["content-type"], "application/x-ndjson");
    let text = response.text().await.unwrap();
    let lines: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let types: Vec<&str> = lines.iter().map(|l| l["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["text", "tool_started", "tool_completed", "text", "done"]);
    let done = lines.last().unwrap();
    assert_eq!((done["text"].clone(), done["time_boxed"].clone()), (json!("two."), json!(false)));
    assert_eq!(
        (done["tool_results"].clone(), done["coverage"]["status"].clone()),
        (json!([]), json!("not_applicable"))
    );
}

#[tokio::test]
async fn auth_is_required_except_for_the_probes() {
    let h = harness(vec![], "").await;
    let url = |path: &str| format!("{}{path}", h.server.base);
    let client = &h.server.client;
    let (status, body) = ApiServer::call(client.post(url("/api/trigger")).json(&json!({"message": "hi"}))).await;
    assert_eq!((status, body), (401, json!({"error": "missing bearer token (Authorization: Bearer <token>)"})));
    let wrong = client.get(url("/api/approvals/x")).bearer_auth("nope");
    assert_eq!(ApiServer::call(wrong).await, (401, json!({"error": "invalid bearer token"})));
    assert_eq!(ApiServer::call(client.get(url("/healthz"))).await, (200, json!({"status": "ok"})));
    assert_eq!(ApiServer::call(client.get(url("/readyz"))).await, (200, json!({"status": "ready"})));
    assert_eq!(ApiServer::call(h.server.get("/api/approvals/unknown")).await.0, 410);
    assert_eq!(ApiServer::call(h.server.get("/nowhere")).await.0, 404);
    assert_eq!(ApiServer::call(h.server.get("/api/trigger")).await.0, 405);
}

#[tokio::test]
async fn interactive_routes_need_a_token_and_the_api_adapter() {
    let mut no_token = api_client::config();
    no_token.auth_token = None;
    let h = harness_with(&[PROBE], vec![Answer::text(&["Open."]).into()], "", "", no_token).await;
    let required = json!({"error": skillhost::adapters::auth::NO_TOKEN});
    let stream = h.server.post("/api/trigger?wait=1&stream=approval-v1").json(&json!({"message": "hi"}));
    assert_eq!(ApiServer::call(stream).await, (503, required.clone()));
    assert_eq!(ApiServer::call(h.server.get("/api/approvals/x")).await, (503, required.clone()));
    assert_eq!(
        ApiServer::call(h.server.post("/api/questions/x/answer").json(&json!({"answer": "a"}))).await,
        (503, required)
    );
    let (status, body) = ApiServer::call(
        h.server.client.post(format!("{}/api/trigger?wait=1", h.server.base)).json(&json!({"message": "hi"})),
    )
    .await;
    assert_eq!((status, body["text"].clone()), (200, json!("Open.")), "without a token the plain trigger is open");

    let mut other_adapter = api_client::config();
    other_adapter.adapter_is_api = false;
    let h = harness_with(&[PROBE], vec![], "", "", other_adapter).await;
    let adapter = json!({"error": "interactive API adapter required"});
    let stream = h.server.post("/api/trigger?wait=1&stream=approval-v1").json(&json!({"message": "hi"}));
    assert_eq!(ApiServer::call(stream).await, (409, adapter.clone()));
    assert_eq!(
        ApiServer::call(h.server.post("/api/approvals/x/decision").json(&json!({"approved": true}))).await,
        (409, adapter.clone())
    );
    assert_eq!(ApiServer::call(h.server.get("/api/questions/x")).await, (409, adapter));
}

#[tokio::test]
async fn malformed_requests_get_json_errors() {
    let h = harness(vec![], "").await;
    let trigger = |query: &str, body: String| {
        let request =
            h.server.post(&format!("/api/trigger{query}")).header("content-type", "application/json").body(body);
        ApiServer::call(request)
    };
    let bad = [
        ("", "not json".to_owned()),
        ("", "{}".to_owned()),
        ("", r#"{"message": 5}"#.to_owned()),
        ("", r#"{"message": "  "}"#.to_owned()),
        ("", r#"{"message": "hi", "channel_id": 5}"#.to_owned()),
        ("", r#"{"message": "hi", "channel_id": ""}"#.to_owned()),
        ("", "[1, 2]".to_owned()),
        ("?wait=yes", r#"{"message": "hi"}"#.to_owned()),
        ("?stream=approval-v1", r#"{"message": "hi"}"#.to_owned()),
        ("?wait=1&stream=sse", r#"{"message": "hi"}"#.to_owned()),
        ("?wait=1&debug=1", r#"{"message": "hi"}"#.to_owned()),
    ];
    for (query, body) in bad {
        let (status, response) = trigger(query, body.clone()).await;
        assert_eq!(status, 400, "{query} {body}: {response}");
        assert!(response["error"].as_str().is_some_and(|e| !e.is_empty()), "{response}");
    }
    let huge = format!(r#"{{"message": "{}"}}"#, "x".repeat(100 * 1024));
    let (status, response) = trigger("", huge).await;
    assert_eq!(status, 413, "{response}");
    assert!(response["error"].is_string());
    for body in [json!({}), json!({"approved": "yes"}), json!([true])] {
        let (status, response) = h.server.decide("any", body).await;
        assert_eq!(status, 400, "{response}");
    }
    let (status, response) = h.server.decide("unknown", json!({"approved": true})).await;
    assert_eq!((status, response), (410, json!({"error": "unknown, expired or cancelled approval"})));
    let raw = h.server.post("/api/approvals/x/decision").body("{\"approved\": tru");
    assert_eq!(ApiServer::call(raw).await.0, 400);
}

/// A provider that answers without streaming a single delta.
struct Silent;

#[async_trait::async_trait]
impl skillhost::llm::Provider for Silent {
    fn name(&self) -> &'static str {
        "silent"
    }

    async fn complete(
        &self,
        _req: &skillhost::llm::Request,
        _sink: &mut (dyn FnMut(skillhost::llm::Delta) + Send),
    ) -> Result<skillhost::llm::Response, skillhost::llm::LlmError> {
        let content = vec![skillhost::llm::Block::Text("The whole answer.".into())];
        Ok(skillhost::llm::Response { content, stop: skillhost::llm::StopReason::EndTurn, usage: Default::default() })
    }
}

#[tokio::test]
async fn a_run_without_deltas_sends_one_bare_assistant_text() {
    let ws = Workspace::new();
    std::fs::create_dir_all(ws.path().join("skills")).unwrap();
    let yaml = "skills:\n  paths: [skills]\nstate:\n  filesystem: {path: state}\nlearning:\n  memory:\n    filesystem: {path: memory}\n";
    let loader = ws.loader(yaml);
    let set = loader.load_all(skillhost::skills::LoadMode::Serve).await.unwrap();
    let engine = skillhost_tests::engine_over(&loader, set, Box::new(Silent));
    let server = ApiServer::start(engine, api_client::config()).await;
    let events = server.stream(json!({"message": "hi"})).await.rest().await;
    assert_eq!(kinds(&events), ["run_started", "assistant_text", "run_completed"]);
    assert_eq!(events[1].data["text"], "The whole answer.");
    assert_eq!(events[2].data["text"], "The whole answer.");
}

#[tokio::test]
async fn a_client_leaving_a_wait_request_cancels_its_run() {
    // A tool that spins for up to a minute; the client gives up after half a second.
    let hostile = ("hostile", guests::HOSTILE, "[limits]\nfuel = 50_000_000_000\ntimeout_ms = 60_000\n");
    let replies =
        vec![Answer::default().call("c1", "hostile__spin", json!({})).into(), Answer::text(&["never"]).into()];
    let h = harness_with(&[hostile], replies, "", "", api_client::config()).await;
    let request = h.server.post("/api/trigger?wait=true").json(&json!({"message": "go", "channel_id": "w"}));
    let gave_up = tokio::time::timeout(Duration::from_millis(500), request.send()).await;
    assert!(gave_up.is_err(), "the run was still going");
    // The turn was dropped with the connection: its in-flight marker is gone long before the
    // spin's minute is up, and the model is never asked again.
    let state = skillhost::store::StateStore::new(h._ws.path().join("state"));
    eventually(async || state.keys(skillhost::engine::inflight::NAMESPACE).await.unwrap().is_empty()).await;
    assert_eq!(h.llm.requests().len(), 1);
}

#[tokio::test]
async fn calls_the_tool_budget_refused_count_as_unverified_coverage() {
    // `obs` (the official Python SDK; its owner is `hooks_all`): `search_events` advertises
    // coverage and declares it complete; `get_logs` neither advertises nor declares.
    let mcp = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("mcp");
    assert!(mcp.join("pylib/mcp").exists(), "install the MCP test servers as .ci/run does");
    let servers = format!(
        "mcp_servers:\n  obs:\n    transport: stdio\n    command: python3\n    args: ['{}']\n    env: {{PYTHONPATH: '{}'}}\n    tools: [list_things, get_logs, search_events]\n",
        mcp.join("obs_server.py").display(),
        mcp.join("pylib").display()
    );
    let budget =
        "engine:\n  tool_budget:\n    enabled: true\n    tools: [search_events, get_logs]\n    max_per_turn: 2\n";
    let first = Answer::text(&["Searching."])
        .call("c1", "obs__search_events", json!({"case": "valid"}))
        .call("c2", "obs__get_logs", json!({}))
        .call("c3", "obs__get_logs", json!({"service": "refused"}));
    let plain = Answer::text(&["Reading."])
        .call("d1", "obs__get_logs", json!({}))
        .call("d2", "obs__get_logs", json!({}))
        .call("d3", "obs__get_logs", json!({}));
    // `hooks_all` verifies: each turn ends with a fact check, answered `OK`.
    let (done, ok) = (|| Answer::text(&["Done."]).into(), || Answer::text(&["OK"]).into());
    let replies = vec![first.into(), done(), ok(), plain.into(), done(), ok()];
    let skills = [("hooks_all", guests::HOOKS_ALL, "")];
    let h = harness_with(&skills, replies, &format!("{servers}{budget}"), "", api_client::config()).await;

    let (status, body) = ApiServer::call(h.server.post("/api/trigger?wait=true").json(&json!({"message": "go"}))).await;
    assert_eq!(status, 200, "{body}");
    let refused = tool_results(&h.llm, 1);
    assert!(refused[2].2, "the third call is past the budget: {refused:?}");
    assert_eq!(
        body["coverage"],
        json!({"status": "partial", "observations": [{"status": "complete", "result_state": "data"}]}),
        "one verified complete observation plus a refused budgeted call: partial"
    );

    // No tool here advertises coverage: only the refused call is coverage-relevant.
    let (status, body) = ApiServer::call(h.server.post("/api/trigger?wait=true").json(&json!({"message": "go"}))).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["coverage"], json!({"status": "unknown", "observations": []}), "{body}");
}
