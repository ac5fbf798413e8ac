//! OpenAI Responses API (`POST /v1/responses`), streamed and stateless.
//!
//! Every request sends `store: false` (nothing retained server-side) with
//! `include: ["reasoning.encrypted_content"]`, so each `reasoning` output item comes back
//! encrypted; it is kept as [`Block::Opaque`] and replayed verbatim in the next request's
//! `input`, which keeps the model's reasoning across tool calls without server state.
//!
//! Streaming events used: `response.output_item.added` / `.done` (message, function_call,
//! reasoning items by `output_index`), `response.output_text.delta`,
//! `response.function_call_arguments.delta` / `.done`, `response.completed`,
//! `response.incomplete`, `response.failed` and `error`. Others are ignored.

use super::http::{self, Events};
use super::{Block, Delta, LlmError, Message, Provider, Request, Response, Role, StopReason, Usage};
use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderValue};
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// The public endpoint.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com";
/// `reasoning_effort` when the config names none.
pub const DEFAULT_EFFORT: &str = "medium";
/// The efforts the spec allows.
pub const EFFORTS: &[&str] = &["none", "low", "medium", "high", "xhigh", "max"];
/// `max_output_tokens` floor: reasoning tokens are billed against it, so a small budget can
/// be spent before any visible output. `reasoning_effort: none` opts out.
pub const MIN_OUTPUT_TOKENS: u32 = 4096;

/// Checks a `reasoning_effort` value against [`EFFORTS`].
pub fn check_effort(effort: &str) -> Result<String, String> {
    super::one_of(effort, EFFORTS)
}

/// The OpenAI Responses provider.
pub struct OpenAi {
    url: String,
    api_key: String,
    effort: String,
    name: &'static str,
}

impl OpenAi {
    /// A provider with `api_key` at `base_url` (default [`DEFAULT_BASE_URL`]; a base ending
    /// in `/v1` is fine), sending `effort` as `reasoning.effort`.
    pub fn new(api_key: impl Into<String>, base_url: Option<&str>, effort: impl Into<String>) -> Self {
        let base = base_url.filter(|b| !b.is_empty()).unwrap_or(DEFAULT_BASE_URL);
        let url = http::endpoint(base, "/v1/responses");
        OpenAi { url, api_key: api_key.into(), effort: effort.into(), name: "openai" }
    }

    /// The same wire format under another provider name (Bedrock's Mantle gateway speaks it).
    pub fn named(mut self, name: &'static str) -> Self {
        self.name = name;
        self
    }

    fn headers(&self) -> Result<HeaderMap, LlmError> {
        let mut headers = HeaderMap::new();
        let bearer = HeaderValue::from_str(&format!("Bearer {}", self.api_key));
        headers.insert(
            AUTHORIZATION,
            bearer.map_err(|_| LlmError::protocol(self.name, "the API key is not a valid header value"))?,
        );
        Ok(headers)
    }
}

#[async_trait::async_trait]
impl Provider for OpenAi {
    fn name(&self) -> &'static str {
        self.name
    }

    async fn complete(&self, req: &Request, sink: &mut (dyn FnMut(Delta) + Send)) -> Result<Response, LlmError> {
        let body = body(req, &self.effort);
        let events = http::post_events(self.name, http::client(), &self.url, self.headers()?, &body).await?;
        read(self.name, events, sink).await
    }
}

/// The request body.
pub fn body(req: &Request, effort: &str) -> Value {
    let max_output_tokens = if effort == "none" { req.max_tokens } else { req.max_tokens.max(MIN_OUTPUT_TOKENS) };
    let mut body = json!({
        "model": req.model,
        "input": input(&req.messages),
        "max_output_tokens": max_output_tokens,
        "reasoning": {"effort": effort},
        "store": false,
        "include": ["reasoning.encrypted_content"],
        "stream": true,
    });
    if !req.system.is_empty() {
        body["instructions"] = json!(req.system);
    }
    if !req.tools.is_empty() {
        // `strict: false`: Responses makes function tools strict by default, which rejects any
        // schema not written for structured outputs; skill schemas are plain JSON Schema.
        let tools = req.tools.iter().map(|t| {
            json!({"type": "function", "name": t.name, "description": t.description,
                "parameters": &*t.input_schema, "strict": false})
        });
        body["tools"] = Value::Array(tools.collect());
        if req.tool_choice == super::ToolChoice::None {
            body["tool_choice"] = json!("none");
        }
    }
    body
}

/// The conversation as input items, in order.
fn input(messages: &[Message]) -> Vec<Value> {
    let mut items = Vec::new();
    for m in messages {
        let role = match m.role {
            Role::User => "user",
            Role::Assistant => "assistant",
        };
        for b in &m.content {
            match b {
                Block::Text(t) if t.is_empty() => {}
                Block::Text(t) => items.push(json!({"type": "message", "role": role, "content": t})),
                Block::ToolUse { id, name, input } => items.push(
                    json!({"type": "function_call", "call_id": id, "name": name, "arguments": input.to_string()}),
                ),
                // No error flag exists on function output; the engine's error results say so
                // in their own text.
                Block::ToolResult { tool_use_id, content, .. } => {
                    items.push(json!({"type": "function_call_output", "call_id": tool_use_id, "output": content}))
                }
                Block::Opaque(item) if item["type"] == "reasoning" => items.push(item.clone()),
                Block::Opaque(_) => {} // another provider's state
            }
        }
    }
    items
}

/// The answer as it streams in: output items by index, with their streamed text/arguments.
#[derive(Default)]
struct Answer {
    items: BTreeMap<u64, Value>,
    text: BTreeMap<u64, String>,
    arguments: BTreeMap<u64, String>,
    stop: Option<StopReason>,
    usage: Usage,
}

async fn read(
    name: &'static str,
    mut events: Events,
    sink: &mut (dyn FnMut(Delta) + Send),
) -> Result<Response, LlmError> {
    let mut answer = Answer::default();
    while let Some(event) = events.next().await? {
        let data = http::json(name, &event.data)?;
        if answer.apply(name, &data, sink)? {
            return answer.finish(name);
        }
    }
    Err(LlmError::protocol(name, "stream ended before response.completed"))
}

impl Answer {
    /// Applies one event; true when the response is over.
    fn apply(
        &mut self,
        name: &'static str,
        data: &Value,
        sink: &mut (dyn FnMut(Delta) + Send),
    ) -> Result<bool, LlmError> {
        let index = data["output_index"].as_u64().unwrap_or_default();
        match data["type"].as_str().unwrap_or_default() {
            "response.output_item.added" | "response.output_item.done" => {
                self.items.insert(index, data["item"].clone());
            }
            "response.output_text.delta" => {
                let piece = data["delta"].as_str().unwrap_or_default();
                self.text.entry(index).or_default().push_str(piece);
                sink(Delta::Text(piece.to_owned()));
            }
            "response.function_call_arguments.delta" => {
                self.arguments.entry(index).or_default().push_str(data["delta"].as_str().unwrap_or_default())
            }
            "response.function_call_arguments.done" => {
                self.arguments.insert(index, data["arguments"].as_str().unwrap_or_default().to_owned());
            }
            "response.completed" => return Ok(self.end(&data["response"])),
            "response.incomplete" => {
                let reason = data["response"]["incomplete_details"]["reason"].as_str().unwrap_or("incomplete");
                self.stop = Some(if reason == "max_output_tokens" {
                    StopReason::MaxTokens
                } else {
                    StopReason::Other(reason.into())
                });
                return Ok(self.end(&data["response"]));
            }
            "response.failed" => return Err(failure(name, &data["response"]["error"])),
            "error" => return Err(failure(name, data)),
            _ => {}
        }
        Ok(false)
    }

    /// Takes usage (and, when no item events came, the output) from the final response.
    fn end(&mut self, response: &Value) -> bool {
        self.usage.input_tokens = response["usage"]["input_tokens"].as_u64().unwrap_or_default();
        self.usage.output_tokens = response["usage"]["output_tokens"].as_u64().unwrap_or_default();
        if self.items.is_empty() {
            let output = response["output"].as_array().into_iter().flatten();
            self.items = output.cloned().enumerate().map(|(i, item)| (i as u64, item)).collect();
        }
        true
    }

    fn finish(mut self, name: &'static str) -> Result<Response, LlmError> {
        let provisional = self.stop.clone().unwrap_or(StopReason::EndTurn);
        let mut content = Vec::new();
        for (index, item) in std::mem::take(&mut self.items) {
            match item["type"].as_str().unwrap_or_default() {
                "message" => content.extend(self.message_text(index, &item).map(Block::Text)),
                "function_call" => content.extend(self.function_call(name, index, &item, &provisional)?),
                "reasoning" => content.push(Block::Opaque(item)),
                _ => {} // hosted tools we never offer
            }
        }
        let calls = content.iter().any(|b| matches!(b, Block::ToolUse { .. }));
        let stop = self.stop.unwrap_or(if calls { StopReason::ToolUse } else { StopReason::EndTurn });
        Ok(Response { content, stop, usage: self.usage })
    }

    /// A message item's text: its `output_text` / `refusal` parts, else the streamed deltas.
    fn message_text(&self, index: u64, item: &Value) -> Option<String> {
        let parts = item["content"].as_array().into_iter().flatten();
        let mut text: String = parts.filter_map(|p| p["text"].as_str().or_else(|| p["refusal"].as_str())).collect();
        if text.is_empty() {
            text = self.text.get(&index).cloned().unwrap_or_default();
        }
        (!text.is_empty()).then_some(text)
    }

    fn function_call(
        &self,
        name: &'static str,
        index: u64,
        item: &Value,
        stop: &StopReason,
    ) -> Result<Option<Block>, LlmError> {
        let field = |key: &str| item[key].as_str().unwrap_or_default().to_owned();
        let (call_id, tool) = (field("call_id"), field("name"));
        if call_id.is_empty() || tool.is_empty() {
            return Err(LlmError::protocol(name, "function_call item without call_id or name"));
        }
        let arguments = match item["arguments"].as_str() {
            Some(args) if !args.is_empty() => args.to_owned(),
            _ => self.arguments.get(&index).cloned().unwrap_or_default(),
        };
        http::tool_use(name, call_id, tool, &arguments, stop)
    }
}

/// A `response.failed` error or an `error` event, as a status error so that retries treat a
/// server-side failure like the HTTP answer it stands for.
fn failure(name: &'static str, error: &Value) -> LlmError {
    let code = error["code"].as_str().unwrap_or("server_error");
    let status = match code {
        "rate_limit_exceeded" => 429,
        "invalid_prompt" | "invalid_request_error" => 400,
        _ => 500,
    };
    let message = format!("{code}: {} (in stream)", error["message"].as_str().unwrap_or("no message"));
    LlmError::Status { provider: name, status, message, retry_after: None }
}
