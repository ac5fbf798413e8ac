//! Every LLM provider against the scripted server over real HTTP: streaming, tool calls and
//! results, what each request carries, and each error class.

use serde_json::{Value, json};
use skillhost::llm::anthropic::Anthropic;
use skillhost::llm::openai::OpenAi;
use skillhost::llm::openai_compatible::Chat;
use skillhost::llm::*;
use skillhost_tests::llm_server::{Answer, LlmServer, Reply, complete, sample_request};
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Anthropic,
    OpenAi,
    Chat,
}

const KINDS: [Kind; 3] = [Kind::Anthropic, Kind::OpenAi, Kind::Chat];

/// Retries fast enough for tests; `retry-after` up to 2 s is honoured.
fn policy() -> RetryPolicy {
    let ms = Duration::from_millis;
    RetryPolicy { max_retries: 3, base_delay: ms(10), max_delay: ms(40), max_retry_after: ms(2000) }
}

fn provider(kind: Kind, server: &LlmServer) -> Box<dyn Provider> {
    let url = server.url();
    match kind {
        Kind::Anthropic => Box::new(Retrying::new(Anthropic::new("test-key", Some(&url)), policy())),
        Kind::OpenAi => Box::new(Retrying::new(OpenAi::new("test-key", Some(&url), "medium"), policy())),
        Kind::Chat => Box::new(Retrying::new(Chat::new(None, &format!("{url}/v1")), policy())),
    }
}

fn request(messages: Vec<Message>) -> Request {
    sample_request("test-model", messages)
}

#[tokio::test]
async fn streamed_text_arrives_as_deltas() {
    for kind in KINDS {
        let server = LlmServer::start(vec![Answer::text(&["Hel", "lo", " wörld"]).into()]).await;
        let (result, deltas) = complete(&*provider(kind, &server), &request(vec![Message::user("hi")])).await;
        let response = result.unwrap_or_else(|e| panic!("{kind:?}: {e}"));
        assert_eq!(deltas, ["Hel", "lo", " wörld"], "{kind:?}");
        assert_eq!(response.content, vec![Block::Text("Hello wörld".into())], "{kind:?}");
        assert_eq!(response.stop, StopReason::EndTurn, "{kind:?}");
        assert_eq!(response.usage, Usage { input_tokens: 25, output_tokens: 42 }, "{kind:?}");
    }
}

#[tokio::test]
async fn tools_and_system_prompt_are_sent_in_each_format() {
    for kind in KINDS {
        let server = LlmServer::start(vec![Answer::text(&["ok"]).into()]).await;
        complete(&*provider(kind, &server), &request(vec![Message::user("hi")])).await.0.unwrap();
        let body = server.body(0);
        let schema = &request(vec![]).tools[0].input_schema;
        assert_eq!(body["stream"], true, "{kind:?}");
        assert_eq!(body["model"], "test-model", "{kind:?}");
        let (tool, system) = match kind {
            Kind::Anthropic => {
                assert_eq!(body["messages"], json!([{"role": "user", "content": [{"type": "text", "text": "hi"}]}]));
                (
                    json!({"name": "http_checker__check_url", "description": "Check a URL.", "input_schema": schema}),
                    &body["system"],
                )
            }
            Kind::OpenAi => (
                json!({"type": "function", "name": "http_checker__check_url", "description": "Check a URL.",
                    "parameters": schema, "strict": false}),
                &body["instructions"],
            ),
            Kind::Chat => {
                assert_eq!(body["messages"][0], json!({"role": "system", "content": "Be brief."}));
                let function =
                    json!({"name": "http_checker__check_url", "description": "Check a URL.", "parameters": schema});
                (json!({"type": "function", "function": function}), &body["messages"][0]["content"])
            }
        };
        assert_eq!(body["tools"], json!([tool]), "{kind:?}");
        assert_eq!(system, "Be brief.", "{kind:?}");
    }
}

#[tokio::test]
async fn tool_choice_none_keeps_tools_declared_but_forbids_calls() {
    for kind in KINDS {
        let server = LlmServer::start(vec![Answer::text(&["ok"]).into(), Answer::text(&["ok"]).into()]).await;
        let provider = provider(kind, &server);
        complete(&*provider, &request(vec![Message::user("hi")])).await.0.unwrap();
        assert!(server.body(0).get("tool_choice").is_none(), "{kind:?}: auto is the default");
        let mut wrap_up = request(vec![Message::user("hi")]);
        wrap_up.tool_choice = skillhost::llm::ToolChoice::None;
        complete(&*provider, &wrap_up).await.0.unwrap();
        let body = server.body(1);
        assert_eq!(body["tools"].as_array().map(Vec::len), Some(1), "{kind:?}");
        let expected = if kind == Kind::Anthropic { json!({"type": "none"}) } else { json!("none") };
        assert_eq!(body["tool_choice"], expected, "{kind:?}");
    }
}

#[tokio::test]
async fn each_provider_authenticates_as_documented() {
    for kind in KINDS {
        let server = LlmServer::start(vec![Answer::text(&["ok"]).into()]).await;
        complete(&*provider(kind, &server), &request(vec![Message::user("hi")])).await.0.unwrap();
        let recorded = &server.requests()[0];
        let header = |name: &str| recorded.headers.get(name).map(String::as_str);
        match kind {
            Kind::Anthropic => {
                assert_eq!(recorded.path, "/v1/messages");
                assert_eq!((header("x-api-key"), header("anthropic-version")), (Some("test-key"), Some("2023-06-01")));
            }
            Kind::OpenAi => {
                assert_eq!(recorded.path, "/v1/responses");
                assert_eq!(header("authorization"), Some("Bearer test-key"));
            }
            Kind::Chat => {
                assert_eq!(recorded.path, "/v1/chat/completions");
                assert_eq!(header("authorization"), None, "no key configured, none sent");
            }
        }
    }
}

#[tokio::test]
async fn tool_calls_come_back_parsed_and_results_go_back_paired() {
    for kind in KINDS {
        let calls = Answer::text(&["Checking both."])
            .call("call_1", "http_checker__check_url", json!({"url": "http://a.test/"}))
            .call("call_2", "http_checker__check_url", json!({"url": "http://b.test/", "note": "é"}));
        let server = LlmServer::start(vec![calls.into(), Answer::text(&["Both fine."]).into()]).await;
        let provider = provider(kind, &server);
        let mut messages = vec![Message::user("check a and b")];
        let (first, _) = complete(&*provider, &request(messages.clone())).await;
        let first = first.unwrap_or_else(|e| panic!("{kind:?}: {e}"));
        assert_eq!(first.stop, StopReason::ToolUse, "{kind:?}");
        assert_eq!(first.text(), "Checking both.", "{kind:?}");
        let uses = first.tool_uses();
        assert_eq!(uses.len(), 2, "{kind:?}");
        assert_eq!(
            (uses[0].0, uses[0].1, uses[0].2),
            ("call_1", "http_checker__check_url", &json!({"url": "http://a.test/"}))
        );
        assert_eq!(uses[1].2, &json!({"url": "http://b.test/", "note": "é"}), "{kind:?}");

        messages.push(Message::assistant(first.content.clone()));
        let result = |id: &str, content: &str, is_error| Block::ToolResult {
            tool_use_id: id.into(),
            content: content.into(),
            is_error,
        };
        messages.push(Message {
            role: Role::User,
            content: vec![result("call_1", "{\"status\":200}", false), result("call_2", "boom", true)],
        });
        let (second, _) = complete(&*provider, &request(messages)).await;
        assert_eq!(second.unwrap().text(), "Both fine.", "{kind:?}");
        assert_paired(kind, &server.body(1));
    }
}

/// The second request carries both calls and both results, each result under its call's id.
fn assert_paired(kind: Kind, body: &Value) {
    let args = |v: &Value| serde_json::from_str::<Value>(v.as_str().unwrap()).unwrap();
    match kind {
        Kind::Anthropic => {
            let m = &body["messages"];
            assert_eq!(m[1]["role"], "assistant");
            assert_eq!(
                m[1]["content"][1],
                json!({"type": "tool_use", "id": "call_1", "name": "http_checker__check_url",
                    "input": {"url": "http://a.test/"}})
            );
            assert_eq!(m[2]["role"], "user");
            assert_eq!(
                m[2]["content"][0],
                json!({"type": "tool_result", "tool_use_id": "call_1", "content": "{\"status\":200}",
                    "is_error": false})
            );
            assert_eq!(
                m[2]["content"][1],
                json!({"type": "tool_result", "tool_use_id": "call_2", "content": "boom", "is_error": true})
            );
        }
        Kind::OpenAi => {
            let input = body["input"].as_array().unwrap();
            let kinds: Vec<&str> = input.iter().map(|i| i["type"].as_str().unwrap()).collect();
            assert_eq!(
                kinds,
                [
                    "message",
                    "message",
                    "function_call",
                    "function_call",
                    "function_call_output",
                    "function_call_output"
                ]
            );
            assert_eq!(
                (&input[2]["call_id"], &input[2]["name"]),
                (&json!("call_1"), &json!("http_checker__check_url"))
            );
            assert_eq!(args(&input[3]["arguments"]), json!({"url": "http://b.test/", "note": "é"}));
            assert_eq!(
                input[4],
                json!({"type": "function_call_output", "call_id": "call_1", "output": "{\"status\":200}"})
            );
            assert_eq!(input[5], json!({"type": "function_call_output", "call_id": "call_2", "output": "boom"}));
        }
        Kind::Chat => {
            let m = &body["messages"];
            assert_eq!((&m[2]["role"], &m[2]["content"]), (&json!("assistant"), &json!("Checking both.")));
            assert_eq!(m[2]["tool_calls"][0]["id"], "call_1");
            assert_eq!(m[2]["tool_calls"][1]["function"]["name"], "http_checker__check_url");
            assert_eq!(
                args(&m[2]["tool_calls"][1]["function"]["arguments"]),
                json!({"url": "http://b.test/", "note": "é"})
            );
            assert_eq!(m[3], json!({"role": "tool", "tool_call_id": "call_1", "content": "{\"status\":200}"}));
            assert_eq!(m[4], json!({"role": "tool", "tool_call_id": "call_2", "content": "boom"}));
        }
    }
}

#[tokio::test]
async fn openai_is_stateless_and_replays_encrypted_reasoning() {
    let first = Answer::default().reasoning("ENC_1").call(
        "call_1",
        "http_checker__check_url",
        json!({"url": "http://a.test/"}),
    );
    let server = LlmServer::start(vec![first.into(), Answer::text(&["done"]).into()]).await;
    let provider = provider(Kind::OpenAi, &server);
    let mut messages = vec![Message::user("check a")];
    let response = complete(&*provider, &request(messages.clone())).await.0.unwrap();
    assert!(matches!(&response.content[0], Block::Opaque(item) if item["encrypted_content"] == "ENC_1"));
    assert_eq!(response.stop, StopReason::ToolUse);

    let body = server.body(0);
    assert_eq!(body["store"], false);
    assert_eq!(body["include"], json!(["reasoning.encrypted_content"]));
    assert_eq!(body["reasoning"], json!({"effort": "medium"}));
    assert_eq!(body["max_output_tokens"], 4096, "1000 is raised to the floor");

    messages.push(Message::assistant(response.content.clone()));
    let result = Block::ToolResult { tool_use_id: "call_1".into(), content: "ok".into(), is_error: false };
    messages.push(Message { role: Role::User, content: vec![result] });
    complete(&*provider, &request(messages)).await.0.unwrap();
    let input = server.body(1)["input"].clone();
    let reasoning = json!({"id": "rs_1", "type": "reasoning", "summary": [], "encrypted_content": "ENC_1"});
    assert_eq!(input[1], reasoning, "replayed verbatim, before the call it led to");
    assert_eq!(input[2]["type"], "function_call");
    assert_eq!(input[3], json!({"type": "function_call_output", "call_id": "call_1", "output": "ok"}));
}

#[tokio::test]
async fn openai_effort_none_keeps_the_token_budget() {
    let server = LlmServer::start(vec![Answer::text(&["ok"]).into()]).await;
    let provider = OpenAi::new("k", Some(&format!("{}/v1", server.url())), "none");
    complete(&provider, &request(vec![Message::user("hi")])).await.0.unwrap();
    let body = server.body(0);
    assert_eq!((&body["max_output_tokens"], &body["reasoning"]["effort"]), (&json!(1000), &json!("none")));
    assert_eq!(server.requests()[0].path, "/v1/responses", "a base_url ending in /v1 gets no second /v1");
}

#[path = "llm/errors.rs"]
mod errors;
