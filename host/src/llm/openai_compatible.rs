//! OpenAI-compatible Chat Completions (`POST {base_url}/chat/completions`), streamed: for
//! local servers (Ollama, vLLM, llama.cpp) and gateways. The API key is optional.
//!
//! The stream is `data: {chunk}` events ending with `data: [DONE]`; each chunk's
//! `choices[0].delta` carries `content` text and `tool_calls` fragments keyed by `index` (the
//! first fragment has the `id` and `function.name`, later ones append to
//! `function.arguments`). Usage arrives in a final chunk with `stream_options.include_usage`.

use super::http::{self, Events};
use super::{Block, Delta, LlmError, Message, Provider, Request, Response, Role, StopReason, Usage};
use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderValue};
use serde_json::{Value, json};
use std::collections::BTreeMap;

const NAME: &str = "openai_compatible";

/// The Chat Completions provider.
pub struct Chat {
    url: String,
    api_key: Option<String>,
    effort: Option<String>,
}

impl Chat {
    /// A provider at `base_url` (which usually ends in `/v1`), with a bearer key if given.
    pub fn new(api_key: Option<String>, base_url: &str) -> Self {
        Chat { url: http::endpoint(base_url, "/chat/completions"), api_key, effort: None }
    }

    /// The same provider sending `reasoning_effort` (the Chat Completions parameter, as
    /// given: servers differ in what they take) in every request.
    pub fn with_effort(self, effort: Option<String>) -> Self {
        Chat { effort, ..self }
    }

    fn headers(&self) -> Result<HeaderMap, LlmError> {
        let mut headers = HeaderMap::new();
        if let Some(key) = &self.api_key {
            let bearer = HeaderValue::from_str(&format!("Bearer {key}"));
            headers.insert(
                AUTHORIZATION,
                bearer.map_err(|_| LlmError::protocol(NAME, "the API key is not a valid header value"))?,
            );
        }
        Ok(headers)
    }
}

#[async_trait::async_trait]
impl Provider for Chat {
    fn name(&self) -> &'static str {
        NAME
    }

    async fn complete(&self, req: &Request, sink: &mut (dyn FnMut(Delta) + Send)) -> Result<Response, LlmError> {
        let mut body = body(req);
        if let Some(effort) = &self.effort {
            body["reasoning_effort"] = json!(effort);
        }
        let events = http::post_events(NAME, http::client(), &self.url, self.headers()?, &body).await?;
        read(events, sink).await
    }
}

/// The request body.
pub fn body(req: &Request) -> Value {
    let mut messages = Vec::new();
    if !req.system.is_empty() {
        messages.push(json!({"role": "system", "content": req.system}));
    }
    for m in &req.messages {
        match m.role {
            Role::User => user(m, &mut messages),
            Role::Assistant => messages.extend(assistant(m)),
        }
    }
    let mut body = json!({
        "model": req.model,
        "messages": messages,
        "max_tokens": req.max_tokens,
        "stream": true,
        "stream_options": {"include_usage": true},
    });
    if !req.tools.is_empty() {
        let tools = req.tools.iter().map(|t| {
            let function = json!({"name": t.name, "description": t.description, "parameters": &*t.input_schema});
            json!({"type": "function", "function": function})
        });
        body["tools"] = Value::Array(tools.collect());
        if req.tool_choice == super::ToolChoice::None {
            body["tool_choice"] = json!("none");
        }
    }
    body
}

/// A user message: its tool results first, as `tool` messages (they must directly follow the
/// assistant message that asked for them), then its text as one user message.
fn user(m: &Message, out: &mut Vec<Value>) {
    let mut text = Vec::new();
    for b in &m.content {
        match b {
            Block::ToolResult { tool_use_id, content, .. } => {
                out.push(json!({"role": "tool", "tool_call_id": tool_use_id, "content": content}))
            }
            Block::Text(t) if !t.is_empty() => text.push(t.as_str()),
            _ => {}
        }
    }
    if !text.is_empty() {
        out.push(json!({"role": "user", "content": text.join("\n\n")}));
    }
}

/// An assistant message: its text and its tool calls; `None` when it has neither.
fn assistant(m: &Message) -> Option<Value> {
    let mut text = Vec::new();
    let mut calls = Vec::new();
    for b in &m.content {
        match b {
            Block::Text(t) if !t.is_empty() => text.push(t.as_str()),
            Block::ToolUse { id, name, input } => calls.push(
                json!({"id": id, "type": "function", "function": {"name": name, "arguments": input.to_string()}}),
            ),
            _ => {}
        }
    }
    if text.is_empty() && calls.is_empty() {
        return None;
    }
    let content = if text.is_empty() { Value::Null } else { json!(text.join("\n\n")) };
    let mut message = json!({"role": "assistant", "content": content});
    if !calls.is_empty() {
        message["tool_calls"] = Value::Array(calls);
    }
    Some(message)
}

/// A tool call being streamed.
#[derive(Default)]
struct Call {
    id: String,
    name: String,
    arguments: String,
}

#[derive(Default)]
struct Answer {
    text: String,
    calls: BTreeMap<u64, Call>,
    finish: Option<String>,
    usage: Usage,
}

async fn read(mut events: Events, sink: &mut (dyn FnMut(Delta) + Send)) -> Result<Response, LlmError> {
    let mut answer = Answer::default();
    while let Some(event) = events.next().await? {
        if event.data.trim() == "[DONE]" {
            return answer.finish();
        }
        answer.apply(&http::json(NAME, &event.data)?, sink)?;
    }
    // Some servers close without [DONE]; a stream that reached its finish_reason is whole.
    match answer.finish {
        Some(_) => answer.finish(),
        None => Err(LlmError::protocol(NAME, "stream ended before a finish_reason or [DONE]")),
    }
}

impl Answer {
    fn apply(&mut self, chunk: &Value, sink: &mut (dyn FnMut(Delta) + Send)) -> Result<(), LlmError> {
        if chunk.get("error").is_some() {
            return Err(stream_error(&chunk["error"]));
        }
        if let Some(usage) = chunk.get("usage").filter(|u| u.is_object()) {
            self.usage.input_tokens = usage["prompt_tokens"].as_u64().unwrap_or_default();
            self.usage.output_tokens = usage["completion_tokens"].as_u64().unwrap_or_default();
        }
        let Some(choice) = chunk["choices"].as_array().and_then(|c| c.first()) else { return Ok(()) };
        if let Some(piece) = choice["delta"]["content"].as_str().filter(|p| !p.is_empty()) {
            self.text.push_str(piece);
            sink(Delta::Text(piece.to_owned()));
        }
        for fragment in choice["delta"]["tool_calls"].as_array().into_iter().flatten() {
            self.fragment(fragment);
        }
        if let Some(reason) = choice["finish_reason"].as_str() {
            self.finish = Some(reason.to_owned());
        }
        Ok(())
    }

    /// Merges one `tool_calls` fragment. Servers that omit `index` (seen in some local ones)
    /// send each call whole: a new id starts a new call.
    fn fragment(&mut self, fragment: &Value) {
        let id = fragment["id"].as_str().filter(|id| !id.is_empty());
        let index = match fragment["index"].as_u64() {
            Some(index) => index,
            None if id.is_some() || self.calls.is_empty() => self.calls.len() as u64,
            None => self.calls.len() as u64 - 1,
        };
        let call = self.calls.entry(index).or_default();
        if let Some(id) = id {
            call.id = id.to_owned();
        }
        if let Some(name) = fragment["function"]["name"].as_str().filter(|n| !n.is_empty()) {
            call.name = name.to_owned();
        }
        call.arguments.push_str(fragment["function"]["arguments"].as_str().unwrap_or_default());
    }

    fn finish(self) -> Result<Response, LlmError> {
        let mut stop = match self.finish.as_deref() {
            Some("stop") | None => StopReason::EndTurn,
            Some("tool_calls" | "function_call") => StopReason::ToolUse,
            Some("length") => StopReason::MaxTokens,
            Some(other) => StopReason::Other(other.to_owned()),
        };
        let mut content = Vec::new();
        if !self.text.is_empty() {
            content.push(Block::Text(self.text));
        }
        for (index, call) in self.calls {
            if call.name.is_empty() {
                return Err(LlmError::protocol(NAME, format!("tool call {index} without a function name")));
            }
            // A server that sends no id still needs one to pair the result with.
            let id = if call.id.is_empty() { format!("call_{index}") } else { call.id };
            content.extend(http::tool_use(NAME, id, call.name, &call.arguments, &stop)?);
        }
        // Some local servers report "stop" even when they called tools.
        if stop == StopReason::EndTurn && content.iter().any(|b| matches!(b, Block::ToolUse { .. })) {
            stop = StopReason::ToolUse;
        }
        Ok(Response { content, stop, usage: self.usage })
    }
}

/// An error chunk (`{"error": {"message", "code"}}`); a numeric code is the HTTP status.
fn stream_error(error: &Value) -> LlmError {
    let status = error["code"].as_u64().filter(|c| (400..600).contains(c)).unwrap_or(500) as u16;
    let message = error["message"].as_str().or_else(|| error.as_str()).unwrap_or("no message");
    LlmError::Status { provider: NAME, status, message: format!("{message} (in stream)"), retry_after: None }
}
