//! Route context through the HTTP API: a run request's `route` attributes reach every tool
//! call of that turn beside those its tools set, `call-context.user-message` is the turn's
//! message, and the next turn starts with neither.

use serde_json::{Value, json};
use skillhost_tests::api_client::{self, ApiServer};
use skillhost_tests::llm_server::{Answer, LlmServer};
use skillhost_tests::{Workspace, guests};

/// The JSON of the one tool result in the last message of LLM request `n`.
fn tool_result(llm: &LlmServer, n: usize) -> Value {
    let body = llm.body(n);
    let last = body["messages"].as_array().unwrap().last().unwrap().clone();
    let block = last["content"].as_array().unwrap().iter().find(|b| b["type"] == "tool_result").unwrap().clone();
    serde_json::from_str(block["content"].as_str().unwrap()).unwrap()
}

#[tokio::test]
async fn run_request_attributes_reach_the_turns_calls_and_end_with_it() {
    let ws = Workspace::new();
    ws.add_skill("skills", "probe", guests::PROBE, "");
    let replies = vec![
        Answer::text(&[]).call("c1", "probe__route_set", json!({"key": "stage", "value": "classified"})).into(),
        Answer::text(&[]).call("c2", "probe__ctx", json!({})).into(),
        Answer::text(&["Done."]).into(),
        Answer::text(&[]).call("c3", "probe__ctx", json!({})).into(),
        Answer::text(&["Again."]).into(),
    ];
    let llm = LlmServer::start(replies).await;
    let yaml = format!(
        "skills:\n  paths: [skills]\n  builtins: []\nstate:\n  filesystem: {{path: state}}\n\
         llm:\n  provider: anthropic\n  model: m\n  max_tokens: 100\n  anthropic: {{api_key: k, base_url: '{}'}}\n",
        llm.url()
    );
    let server = ApiServer::start(skillhost_tests::engine_from(&ws, &yaml).await, api_client::config()).await;

    let body = json!({"message": "find the payment logs", "route": {"intent": "search"}});
    let (status, answer) = ApiServer::call(server.post("/api/trigger?wait=true").json(&body)).await;
    assert_eq!(status, 200, "{answer}");
    let seen = tool_result(&llm, 2);
    assert_eq!(seen["route"], json!([["intent", "search"], ["stage", "classified"]]), "{seen}");
    assert_eq!(seen["user_message"], "find the payment logs");

    let (status, answer) =
        ApiServer::call(server.post("/api/trigger?wait=true").json(&json!({"message": "more"}))).await;
    assert_eq!(status, 200, "{answer}");
    let seen = tool_result(&llm, 4);
    assert_eq!((seen["route"].clone(), seen["user_message"].clone()), (json!([]), json!("more")), "a new turn: {seen}");

    let long = "x".repeat(5000);
    for bad in [
        json!({"message": "hi", "route": {"k": 5}}),
        json!({"message": "hi", "route": {"": "v"}}),
        json!({"message": "hi", "route": {"k": long}}),
    ] {
        let (status, error) = ApiServer::call(server.post("/api/trigger?wait=true").json(&bad)).await;
        assert_eq!(status, 400, "{bad}: {error}");
        assert!(error["error"].is_string(), "{error}");
    }
}
