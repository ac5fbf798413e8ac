//! AWS Bedrock against the scripted server: Converse (SigV4-signed, not streamed) and the
//! Mantle gateway (OpenAI Responses with a bearer key), plus `from_config` errors.

use serde_json::{Value, json};
use skillhost::config;
use skillhost::llm::bedrock::{AwsCredentials, Converse};
use skillhost::llm::*;
use skillhost_tests::llm_server::{Answer, LlmServer, Reply, complete, sample_request};
use std::time::Duration;

const MODEL: &str = "anthropic.claude-sonnet-4-20250514-v1:0";
const ENCODED: &str = "/model/anthropic.claude-sonnet-4-20250514-v1%3A0/converse";

fn policy() -> RetryPolicy {
    let ms = Duration::from_millis;
    RetryPolicy { max_retries: 3, base_delay: ms(10), max_delay: ms(40), max_retry_after: ms(2000) }
}

fn converse(server: &LlmServer, session_token: Option<&str>) -> Retrying<Converse> {
    let credentials = AwsCredentials {
        access_key_id: "AKID".into(),
        secret_access_key: "SECRET".into(),
        session_token: session_token.map(str::to_owned),
    };
    Retrying::new(Converse::new(credentials, "eu-west-1", Some(&server.url())), policy())
}

fn request(messages: Vec<Message>) -> Request {
    sample_request(MODEL, messages)
}

#[tokio::test]
async fn converse_text_answer_arrives_whole() {
    let server = LlmServer::start(vec![Answer::text(&["Hel", "lo"]).into()]).await;
    let (result, deltas) = complete(&converse(&server, None), &request(vec![Message::user("hi")])).await;
    let response = result.unwrap();
    assert_eq!(deltas, ["Hello"], "one delta: Converse is not streamed");
    assert_eq!(response.content, vec![Block::Text("Hello".into())]);
    assert_eq!((response.stop, response.usage), (StopReason::EndTurn, Usage { input_tokens: 25, output_tokens: 42 }));
    let recorded = &server.requests()[0];
    assert_eq!(recorded.path, ENCODED);
    let body = &recorded.body;
    assert_eq!(body["messages"], json!([{"role": "user", "content": [{"text": "hi"}]}]));
    assert_eq!(body["system"], json!([{"text": "Be brief."}]));
    assert_eq!(body["inferenceConfig"], json!({"maxTokens": 1000}));
    let spec = &body["toolConfig"]["tools"][0]["toolSpec"];
    assert_eq!(
        (&spec["name"], &spec["inputSchema"]["json"]["required"]),
        (&json!("http_checker__check_url"), &json!(["url"]))
    );
    assert!(body["toolConfig"].get("toolChoice").is_none());
}

#[tokio::test]
async fn converse_tool_calls_and_results_are_paired_by_id() {
    let calls = Answer::text(&["Checking."])
        .call("tooluse_1", "http_checker__check_url", json!({"url": "http://a.test/"}))
        .call("tooluse_2", "http_checker__check_url", json!({"url": "http://b.test/"}));
    let server = LlmServer::start(vec![calls.into(), Answer::text(&["Both fine."]).into()]).await;
    let provider = converse(&server, None);
    let mut messages = vec![Message::user("check a and b")];
    let first = complete(&provider, &request(messages.clone())).await.0.unwrap();
    assert_eq!(first.stop, StopReason::ToolUse);
    let uses = first.tool_uses();
    assert_eq!(
        (uses[0].0, uses[0].1, uses[0].2),
        ("tooluse_1", "http_checker__check_url", &json!({"url": "http://a.test/"}))
    );
    assert_eq!(uses[1].0, "tooluse_2");

    messages.push(Message::assistant(first.content.clone()));
    let result = |id: &str, content: &str, is_error| Block::ToolResult {
        tool_use_id: id.into(),
        content: content.into(),
        is_error,
    };
    messages.push(Message {
        role: Role::User,
        content: vec![result("tooluse_1", "ok", false), result("tooluse_2", "boom", true)],
    });
    let second = complete(&provider, &request(messages)).await.0.unwrap();
    assert_eq!(second.text(), "Both fine.");
    let m = &server.body(1)["messages"];
    assert_eq!(m[1]["role"], "assistant");
    assert_eq!(
        m[1]["content"][1],
        json!({"toolUse": {"toolUseId": "tooluse_1", "name": "http_checker__check_url", "input": {"url": "http://a.test/"}}})
    );
    assert_eq!(
        m[2]["content"],
        json!([
            {"toolResult": {"toolUseId": "tooluse_1", "content": [{"text": "ok"}], "status": "success"}},
            {"toolResult": {"toolUseId": "tooluse_2", "content": [{"text": "boom"}], "status": "error"}}
        ])
    );
}

#[tokio::test]
async fn converse_tool_choice_none_drops_calls() {
    let call = Answer::text(&["Done."]).call("tooluse_1", "http_checker__check_url", json!({}));
    let server = LlmServer::start(vec![call.into()]).await;
    let mut req = request(vec![Message::user("hi")]);
    req.tool_choice = ToolChoice::None;
    let response = complete(&converse(&server, None), &req).await.0.unwrap();
    assert_eq!((response.content, response.stop), (vec![Block::Text("Done.".into())], StopReason::EndTurn));
    let body = server.body(0);
    assert_eq!(body["toolConfig"]["tools"].as_array().map(Vec::len), Some(1), "tools stay declared");
    assert!(body["toolConfig"].get("toolChoice").is_none());
}

#[tokio::test]
async fn converse_requests_are_sigv4_signed() {
    for token in [None, Some("SESSION")] {
        let server = LlmServer::start(vec![Answer::text(&["ok"]).into()]).await;
        complete(&converse(&server, token), &request(vec![Message::user("hi")])).await.0.unwrap();
        let headers = &server.requests()[0].headers;
        let date = headers.get("x-amz-date").expect("x-amz-date");
        assert_eq!(date.len(), 16, "{date}");
        let auth = &headers["authorization"];
        let scope = format!("AWS4-HMAC-SHA256 Credential=AKID/{}/eu-west-1/bedrock/aws4_request", &date[..8]);
        assert!(auth.starts_with(&scope), "{auth}");
        assert!(auth.contains("SignedHeaders=") && auth.contains("Signature="), "{auth}");
        assert_eq!(headers.get("x-amz-security-token").map(String::as_str), token);
        assert_eq!(headers["content-type"], "application/json");
    }
}

#[tokio::test]
async fn converse_throttling_is_retried_and_errors_name_the_exception() {
    let server = LlmServer::start(vec![Reply::rate_limited(0), Answer::text(&["ok"]).into()]).await;
    let response = complete(&converse(&server, None), &request(vec![Message::user("hi")])).await.0.unwrap();
    assert_eq!(response.text(), "ok");
    assert_eq!(server.requests().len(), 2);

    let server = LlmServer::start(vec![Reply::error(400, "The model is not available")]).await;
    let error = complete(&converse(&server, None), &request(vec![Message::user("hi")])).await.0.unwrap_err();
    assert_eq!(error.status(), Some(400));
    assert_eq!(error.to_string(), "bedrock: HTTP 400: ValidationException: The model is not available");
    assert_eq!(server.requests().len(), 1, "a 400 is not retried");
}

/// An `llm` section from its JSON text.
fn llm(json: &str) -> config::Llm {
    serde_json::from_str(json).unwrap()
}

#[tokio::test]
async fn mantle_speaks_responses_with_a_bearer_key() {
    let server = LlmServer::start(vec![Answer::text(&["ok"]).into()]).await;
    let config = json!({"provider": "bedrock", "model": "openai.gpt-5.6-terra", "bedrock":
        {"api": "responses", "api_key": "BEDROCK-KEY", "region": "us-east-1", "base_url": server.url()}});
    let provider = from_config(&llm(&config.to_string())).unwrap();
    assert_eq!(provider.name(), "bedrock");
    let mut req = request(vec![Message::user("hi")]);
    req.model = "openai.gpt-5.6-terra".into();
    complete(&*provider, &req).await.0.unwrap();
    let recorded = &server.requests()[0];
    assert_eq!(recorded.path, "/v1/responses");
    assert_eq!(recorded.headers["authorization"], "Bearer BEDROCK-KEY");
    let body = &recorded.body;
    assert_eq!((&body["store"], &body["include"]), (&json!(false), &json!(["reasoning.encrypted_content"])));
    assert_eq!((&body["max_output_tokens"], &body["reasoning"]["effort"]), (&json!(4096), &json!("medium")));
}

#[test]
fn from_config_names_the_missing_setting() {
    let err = |bedrock: Value| from_config(&llm(&json!({"provider": "bedrock", "bedrock": bedrock}).to_string())).err();
    if std::env::var("AWS_REGION").is_err() {
        let missing = err(json!({"access_key_id": "AKID", "secret_access_key": "S"})).unwrap();
        assert!(missing.contains("llm.bedrock.region"), "{missing}");
        let missing = err(json!({"api": "responses", "api_key": "K"})).unwrap();
        assert!(missing.contains("llm.bedrock.region"), "{missing}");
    }
    if std::env::var("AWS_ACCESS_KEY_ID").is_err() {
        let missing = err(json!({"region": "us-east-1"})).unwrap();
        assert!(missing.contains("llm.bedrock.access_key_id"), "{missing}");
    }
    if std::env::var("AWS_SECRET_ACCESS_KEY").is_err() {
        let missing = err(json!({"region": "us-east-1", "access_key_id": "AKID"})).unwrap();
        assert!(missing.contains("llm.bedrock.secret_access_key"), "{missing}");
    }
    if std::env::var("AWS_BEDROCK_API_KEY").is_err() {
        let missing = err(json!({"api": "responses", "region": "us-east-1"})).unwrap();
        assert!(missing.contains("llm.bedrock.api_key"), "{missing}");
    }
    assert!(err(json!({"api": "invoke"})).unwrap().contains("llm.bedrock.api"));
    let ok = from_config(&llm(&json!({"provider": "bedrock", "bedrock":
        {"region": "us-east-1", "access_key_id": "AKID", "secret_access_key": "S"}})
    .to_string()));
    assert_eq!(ok.unwrap().name(), "bedrock");
}
