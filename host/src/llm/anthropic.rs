//! Anthropic Messages API (`POST /v1/messages`), streamed.
//!
//! Streaming events: `message_start` (input usage), `content_block_start` (a `text` or
//! `tool_use` block at an index), `content_block_delta` (`text_delta` / `input_json_delta`
//! partial JSON for that index), `content_block_stop`, `message_delta` (stop reason, output
//! usage), `message_stop`, `ping`, and `error`. Unknown event and block types are ignored, as
//! the API's versioning policy asks.

use super::http::{self, Events};
use super::{Block, Delta, LlmError, Message, Provider, Request, Response, Role, StopReason, Usage};
use reqwest::header::{HeaderMap, HeaderValue};
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// The public endpoint.
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
/// The API version header value this module speaks.
pub const API_VERSION: &str = "2023-06-01";
const NAME: &str = "anthropic";

/// The Anthropic provider.
pub struct Anthropic {
    url: String,
    api_key: String,
    effort: Option<String>,
}

/// The efforts the Messages API's `output_config.effort` takes (`llm.anthropic.reasoning_effort`).
pub const EFFORTS: &[&str] = &["low", "medium", "high", "xhigh", "max"];

/// Checks a `reasoning_effort` value against [`EFFORTS`].
pub fn check_effort(effort: &str) -> Result<String, String> {
    super::one_of(effort, EFFORTS)
}

impl Anthropic {
    /// A provider with `api_key`, at `base_url` (default [`DEFAULT_BASE_URL`]).
    pub fn new(api_key: impl Into<String>, base_url: Option<&str>) -> Self {
        let base = base_url.filter(|b| !b.is_empty()).unwrap_or(DEFAULT_BASE_URL);
        Anthropic { url: http::endpoint(base, "/v1/messages"), api_key: api_key.into(), effort: None }
    }

    /// The same provider asking for `effort` (`output_config.effort`) in every request;
    /// without one the model's default applies.
    pub fn with_effort(self, effort: Option<String>) -> Self {
        Anthropic { effort, ..self }
    }

    fn headers(&self) -> Result<HeaderMap, LlmError> {
        let mut headers = HeaderMap::new();
        let key = HeaderValue::from_str(&self.api_key)
            .map_err(|_| LlmError::protocol(NAME, "the API key is not a valid header value"))?;
        headers.insert("x-api-key", key);
        headers.insert("anthropic-version", HeaderValue::from_static(API_VERSION));
        Ok(headers)
    }
}

#[async_trait::async_trait]
impl Provider for Anthropic {
    fn name(&self) -> &'static str {
        NAME
    }

    async fn complete(&self, req: &Request, sink: &mut (dyn FnMut(Delta) + Send)) -> Result<Response, LlmError> {
        let body = Body::of(req).with_effort(self.effort.as_deref());
        let events = http::post_events(NAME, http::client(), &self.url, self.headers()?, &body).await?;
        read(events, sink).await
    }
}

/// The request body, as JSON.
pub fn body(req: &Request) -> Value {
    serde_json::to_value(Body::of(req)).expect("a request body serializes")
}

/// The request body, serialized straight from the request: the tools' schemas (most of a
/// request's bytes with a few skills, and the same every round) are written from where they
/// are, not copied into a JSON tree first.
#[derive(serde::Serialize)]
struct Body<'a> {
    model: &'a str,
    max_tokens: u32,
    messages: Vec<Value>,
    stream: bool,
    #[serde(skip_serializing_if = "str::is_empty")]
    system: &'a str,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    tools: Vec<Tool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    output_config: Option<OutputConfig<'a>>,
}

/// `output_config`: how much effort the model spends (`llm.anthropic.reasoning_effort`).
#[derive(serde::Serialize)]
struct OutputConfig<'a> {
    effort: &'a str,
}

#[derive(serde::Serialize)]
struct Tool<'a> {
    name: &'a str,
    description: &'a str,
    /// Written as rendered when the tool was loaded.
    input_schema: &'a super::Schema,
}

impl<'a> Body<'a> {
    fn of(req: &'a Request) -> Self {
        let tools: Vec<Tool<'a>> = req
            .tools
            .iter()
            .map(|t| Tool { name: &t.name, description: &t.description, input_schema: &t.input_schema })
            .collect();
        let choose_none = !tools.is_empty() && req.tool_choice == super::ToolChoice::None;
        Body {
            model: &req.model,
            max_tokens: req.max_tokens,
            messages: req.messages.iter().filter_map(message).collect(),
            stream: true,
            system: &req.system,
            tools,
            tool_choice: choose_none.then(|| json!({"type": "none"})),
            output_config: None,
        }
    }

    fn with_effort(self, effort: Option<&'a str>) -> Self {
        Body { output_config: effort.map(|effort| OutputConfig { effort }), ..self }
    }
}

/// A message; `None` when nothing in it is for Anthropic (the API refuses empty content).
fn message(m: &Message) -> Option<Value> {
    let content: Vec<Value> = m.content.iter().filter_map(block).collect();
    let role = match m.role {
        Role::User => "user",
        Role::Assistant => "assistant",
    };
    (!content.is_empty()).then(|| json!({"role": role, "content": content}))
}

fn block(b: &Block) -> Option<Value> {
    match b {
        // The API refuses empty text blocks.
        Block::Text(t) if t.is_empty() => None,
        Block::Text(t) => Some(json!({"type": "text", "text": t})),
        Block::ToolUse { id, name, input } => Some(json!({"type": "tool_use", "id": id, "name": name, "input": input})),
        Block::ToolResult { tool_use_id, content, is_error } => {
            Some(json!({"type": "tool_result", "tool_use_id": tool_use_id, "content": content, "is_error": is_error}))
        }
        // We request no extended thinking, so no Anthropic state is ever opaque; what is there
        // came from another provider and means nothing here.
        Block::Opaque(_) => None,
    }
}

/// One content block being streamed.
enum Part {
    Text(String),
    Tool {
        id: String,
        name: String,
        json: String,
    },
    /// A block type we do not use (e.g. thinking): kept so its deltas are not errors.
    Other,
}

/// The answer as it streams in.
#[derive(Default)]
struct Answer {
    parts: BTreeMap<u64, Part>,
    stop: Option<StopReason>,
    usage: Usage,
    done: bool,
}

async fn read(mut events: Events, sink: &mut (dyn FnMut(Delta) + Send)) -> Result<Response, LlmError> {
    let mut answer = Answer::default();
    while let Some(event) = events.next().await? {
        answer.apply(&http::json(NAME, &event.data)?, sink)?;
        if answer.done {
            return answer.finish();
        }
    }
    Err(LlmError::protocol(NAME, "stream ended before message_stop"))
}

impl Answer {
    fn apply(&mut self, data: &Value, sink: &mut (dyn FnMut(Delta) + Send)) -> Result<(), LlmError> {
        match data["type"].as_str().unwrap_or_default() {
            "message_start" => self.usage(&data["message"]["usage"]),
            "content_block_start" => self.start(data, sink)?,
            "content_block_delta" => self.delta(data, sink)?,
            "message_delta" => {
                if let Some(reason) = data["delta"]["stop_reason"].as_str() {
                    self.stop = Some(stop_reason(reason));
                }
                self.usage(&data["usage"]);
            }
            "message_stop" => self.done = true,
            "error" => return Err(stream_error(&data["error"])),
            _ => {} // ping, content_block_stop, and event types added after this was written
        }
        Ok(())
    }

    fn usage(&mut self, usage: &Value) {
        if let Some(n) = usage["input_tokens"].as_u64() {
            self.usage.input_tokens = n;
        }
        if let Some(n) = usage["output_tokens"].as_u64() {
            self.usage.output_tokens = n;
        }
    }

    fn start(&mut self, data: &Value, sink: &mut (dyn FnMut(Delta) + Send)) -> Result<(), LlmError> {
        let index = index(data)?;
        let block = &data["content_block"];
        let part = match block["type"].as_str() {
            Some("text") => {
                let text = block["text"].as_str().unwrap_or_default().to_owned();
                if !text.is_empty() {
                    sink(Delta::Text(text.clone()));
                }
                Part::Text(text)
            }
            Some("tool_use") => {
                let field = |name: &str| block[name].as_str().map(str::to_owned);
                let (Some(id), Some(name)) = (field("id"), field("name")) else {
                    return Err(LlmError::protocol(NAME, "tool_use block without id or name"));
                };
                Part::Tool { id, name, json: String::new() }
            }
            _ => Part::Other,
        };
        self.parts.insert(index, part);
        Ok(())
    }

    fn delta(&mut self, data: &Value, sink: &mut (dyn FnMut(Delta) + Send)) -> Result<(), LlmError> {
        let index = index(data)?;
        let Some(part) = self.parts.get_mut(&index) else {
            return Err(LlmError::protocol(NAME, format!("delta for content block {index}, which never started")));
        };
        let delta = &data["delta"];
        match (part, delta["type"].as_str()) {
            (Part::Text(text), Some("text_delta")) => {
                let piece = delta["text"].as_str().unwrap_or_default();
                text.push_str(piece);
                sink(Delta::Text(piece.to_owned()));
            }
            (Part::Tool { json, .. }, Some("input_json_delta")) => {
                json.push_str(delta["partial_json"].as_str().unwrap_or_default())
            }
            (Part::Other, _) => {}
            (_, Some(kind @ ("text_delta" | "input_json_delta"))) => {
                return Err(LlmError::protocol(NAME, format!("{kind} for content block {index} of another type")));
            }
            _ => {} // other delta kinds (citations, signatures) carry nothing we use
        }
        Ok(())
    }

    fn finish(self) -> Result<Response, LlmError> {
        let stop = self.stop.ok_or_else(|| LlmError::protocol(NAME, "message ended without a stop_reason"))?;
        let mut content = Vec::new();
        for part in self.parts.into_values() {
            match part {
                Part::Text(text) if !text.is_empty() => content.push(Block::Text(text)),
                Part::Tool { id, name, json } => content.extend(http::tool_use(NAME, id, name, &json, &stop)?),
                _ => {}
            }
        }
        Ok(Response { content, stop, usage: self.usage })
    }
}

fn index(data: &Value) -> Result<u64, LlmError> {
    data["index"].as_u64().ok_or_else(|| LlmError::protocol(NAME, "content block event without an index"))
}

fn stop_reason(reason: &str) -> StopReason {
    match reason {
        "end_turn" => StopReason::EndTurn,
        "tool_use" => StopReason::ToolUse,
        "max_tokens" => StopReason::MaxTokens,
        other => StopReason::Other(other.to_owned()),
    }
}

/// An `error` event: the API's error types map to the HTTP statuses its docs give them, so
/// retries treat a mid-stream "overloaded" like a 529 answer.
fn stream_error(error: &Value) -> LlmError {
    let kind = error["type"].as_str().unwrap_or("error");
    let status = match kind {
        "invalid_request_error" => 400,
        "authentication_error" => 401,
        "permission_error" => 403,
        "not_found_error" => 404,
        "request_too_large" => 413,
        "rate_limit_error" => 429,
        "overloaded_error" => 529,
        _ => 500,
    };
    let message = format!("{kind}: {} (in stream)", error["message"].as_str().unwrap_or("no message"));
    LlmError::Status { provider: NAME, status, message, retry_after: None }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;

    /// Reads `frames` (SSE text) as a response body.
    fn run(frames: &str) -> Result<Response, LlmError> {
        let chunks = vec![Ok(bytes::Bytes::copy_from_slice(frames.as_bytes()))];
        let events = Events::new(NAME, futures::stream::iter(chunks).boxed());
        futures::executor::block_on(read(events, &mut |_| {}))
    }

    const START: &str =
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":3}}}\n\n";

    #[test]
    fn an_overloaded_error_event_is_a_retryable_529() {
        let error = "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n";
        let err = run(&format!("{START}{error}")).unwrap_err();
        assert_eq!(err.status(), Some(529));
        assert!(err.is_retryable() && err.to_string().contains("Overloaded"), "{err}");
    }

    #[test]
    fn a_tool_call_cut_by_max_tokens_is_dropped() {
        let tool = r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t1","name":"x","input":{}}}"#;
        let part =
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"a\": "}}"#;
        let end = r#"{"type":"message_delta","delta":{"stop_reason":"max_tokens"},"usage":{"output_tokens":9}}"#;
        let frames =
            format!("{START}data: {tool}\n\ndata: {part}\n\ndata: {end}\n\ndata: {{\"type\":\"message_stop\"}}\n\n");
        let response = run(&frames).unwrap();
        assert_eq!((response.stop, response.content.len()), (StopReason::MaxTokens, 0));
        assert_eq!(response.usage, Usage { input_tokens: 3, output_tokens: 9 });
    }
}
