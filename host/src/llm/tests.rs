//! Unit tests: retry decisions and provider construction. The wire formats are tested over
//! real HTTP in `tests/tests/llm.rs`.

use super::*;
use serde_json::json;
use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A scripted outcome: an optional delta streamed first, then the result.
type Outcome = (Option<&'static str>, Result<Response, LlmError>);

/// A provider playing back outcomes.
struct Script {
    outcomes: Mutex<VecDeque<Outcome>>,
    calls: Mutex<u32>,
}

impl Script {
    fn new(outcomes: Vec<Outcome>) -> Self {
        Script { outcomes: Mutex::new(outcomes.into()), calls: Mutex::new(0) }
    }
}

#[async_trait::async_trait]
impl Provider for Script {
    fn name(&self) -> &'static str {
        "script"
    }

    async fn complete(&self, _: &Request, sink: &mut (dyn FnMut(Delta) + Send)) -> Result<Response, LlmError> {
        *self.calls.lock().unwrap() += 1;
        let (delta, outcome) = self.outcomes.lock().unwrap().pop_front().expect("a scripted outcome");
        if let Some(text) = delta {
            sink(Delta::Text(text.into()));
        }
        outcome
    }
}

fn ok() -> Result<Response, LlmError> {
    Ok(Response { content: vec![Block::Text("hi".into())], stop: StopReason::EndTurn, usage: Usage::default() })
}

fn status(status: u16, retry_after: Option<Duration>) -> Result<Response, LlmError> {
    Err(LlmError::Status { provider: "script", status, message: "x".into(), retry_after })
}

fn fast() -> RetryPolicy {
    let ms = Duration::from_millis;
    RetryPolicy { max_retries: 3, base_delay: ms(1), max_delay: ms(4), max_retry_after: ms(50) }
}

fn request() -> Request {
    Request {
        model: "m".into(),
        system: String::new(),
        messages: vec![Message::user("hi")],
        tools: vec![],
        tool_choice: Default::default(),
        max_tokens: 10,
    }
}

async fn run(outcomes: Vec<Outcome>) -> (Result<Response, LlmError>, u32) {
    let provider = Retrying::new(Script::new(outcomes), fast());
    let result = provider.complete(&request(), &mut |_| {}).await;
    let calls = *provider.inner().calls.lock().unwrap();
    (result, calls)
}

#[tokio::test]
async fn server_errors_and_resets_are_retried() {
    let reset = Err(LlmError::transport("script", "reset"));
    let (result, calls) =
        run(vec![(None, status(500, None)), (None, status(529, None)), (None, reset), (None, ok())]).await;
    assert_eq!(result.unwrap().text(), "hi");
    assert_eq!(calls, 4);
}

#[tokio::test]
async fn retries_stop_after_the_maximum() {
    let (result, calls) = run((0..5).map(|_| (None, status(503, None))).collect()).await;
    assert_eq!(result.unwrap_err().status(), Some(503));
    assert_eq!(calls, 4, "the first attempt and 3 retries");
}

#[tokio::test]
async fn client_errors_and_malformed_answers_are_not_retried() {
    for outcome in [status(401, None), status(400, None), Err(LlmError::protocol("script", "bad"))] {
        let (result, calls) = run(vec![(None, outcome), (None, ok())]).await;
        assert!(result.is_err());
        assert_eq!(calls, 1);
    }
}

#[tokio::test]
async fn nothing_is_retried_once_text_was_streamed() {
    let (result, calls) = run(vec![(Some("partial"), status(500, None)), (None, ok())]).await;
    assert_eq!(result.unwrap_err().status(), Some(500));
    assert_eq!(calls, 1);
}

#[tokio::test]
async fn retry_after_is_honoured_and_capped() {
    let started = Instant::now();
    let (result, _) = run(vec![(None, status(429, Some(Duration::from_millis(30)))), (None, ok())]).await;
    assert!(result.is_ok());
    assert!(started.elapsed() >= Duration::from_millis(30));
    let policy = fast();
    let long = LlmError::Status {
        provider: "p",
        status: 429,
        message: String::new(),
        retry_after: Some(Duration::from_secs(3600)),
    };
    assert_eq!(policy.delay(0, &long), Duration::from_millis(50));
    let plain = LlmError::transport("p", "x");
    assert_eq!((policy.delay(0, &plain), policy.delay(1, &plain), policy.delay(5, &plain)), (ms(1), ms(2), ms(4)));
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn llm(yaml: &str) -> config::Llm {
    serde_yaml_ng::from_str(yaml).unwrap()
}

#[test]
fn from_config_builds_each_provider() {
    let anthropic = from_config(&llm("provider: anthropic\nanthropic: {api_key: k}")).unwrap();
    assert_eq!(anthropic.name(), "anthropic");
    let openai = from_config(&llm("provider: openai\nopenai: {api_key: k, reasoning_effort: none}")).unwrap();
    assert_eq!(openai.name(), "openai");
    let local =
        from_config(&llm("provider: openai_compatible\nopenai_compatible: {base_url: 'http://127.0.0.1:1/v1'}"))
            .unwrap();
    assert_eq!(local.name(), "openai_compatible");
}

#[test]
fn from_config_refuses_what_cannot_work() {
    let err = |yaml| from_config(&llm(yaml)).err().unwrap();
    assert!(err("provider: openai\nopenai: {api_key: k, reasoning_effort: huge}").contains("reasoning_effort"));
    assert!(err("provider: openai_compatible").contains("base_url"));
    assert!(err("provider: bedrock\nbedrock: {api: soap}").contains("llm.bedrock.api"));
}

#[test]
fn openai_floor_and_anthropic_skip_foreign_state() {
    let mut req = request();
    req.messages.push(Message::assistant(vec![Block::Opaque(serde_json::json!({"type": "reasoning", "id": "rs_1"}))]));
    assert_eq!(openai::body(&req, "low")["max_output_tokens"], 4096);
    assert_eq!(openai::body(&req, "none")["max_output_tokens"], 10);
    assert_eq!(openai::body(&req, "low")["input"][1]["id"], "rs_1");
    let anthropic = anthropic::body(&req);
    assert_eq!(anthropic["messages"].as_array().unwrap().len(), 1, "{anthropic}");
}

#[test]
fn a_schema_is_written_as_its_value_would_be() {
    let value = json!({"type": "object", "properties": {"q\"uote": {"type": "string", "maxLength": 3}}, "required": ["q\"uote"]});
    let schema = Schema::new(value.clone());
    assert_eq!(*schema, value, "reads as its value");
    assert_eq!(serde_json::to_string(&schema).unwrap(), serde_json::to_string(&value).unwrap());
    assert_eq!(serde_json::to_value(&schema).unwrap(), value, "also into a tree");
    let decl = ToolDecl { name: "s__t".into(), description: "d".into(), input_schema: value.clone().into() };
    let text = serde_json::to_string(&decl).unwrap();
    assert_eq!(serde_json::from_str::<Value>(&text).unwrap()["input_schema"], value);
    assert_eq!(serde_json::from_str::<ToolDecl>(&text).unwrap(), decl, "and reads back");
    assert_ne!(Schema::new(json!({})), schema);
}
