//! LLM providers behind one provider-neutral conversation model.
//!
//! The engine speaks [`Request`] / [`Response`] made of [`Message`]s and [`Block`]s; each
//! provider module translates them to its wire format and streams the answer back, calling a
//! sink with [`Delta`]s as text arrives. [`from_config`] builds the configured provider,
//! wrapped in [`Retrying`].
//!
//! - [`anthropic`]: Messages API. [`openai`]: Responses API. [`openai_compatible`]: Chat Completions
//!   (any OpenAI-compatible server). [`bedrock`]: AWS Bedrock (Converse, or Responses
//!   through the Mantle gateway). [`sse`]: the shared Server-Sent Events reader.

pub mod anthropic;
pub mod bedrock;
mod error;
mod http;
pub mod openai;
pub mod openai_compatible;
mod retry;
pub mod sse;

pub use error::LlmError;
pub use retry::{RetryPolicy, Retrying};

/// Builds the HTTP client the providers share, if no request has yet (it is built on first
/// use: reading the system's root certificates takes milliseconds a start need not wait for).
pub fn prepare_client() {
    http::client();
}

use crate::config::{self, Provider as ProviderKind};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The person, or the engine returning tool results.
    User,
    /// The model.
    Assistant,
}

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Its author.
    pub role: Role,
    /// Its content, in order.
    pub content: Vec<Block>,
}

impl Message {
    /// A user message holding one text block.
    pub fn user(text: impl Into<String>) -> Self {
        Message { role: Role::User, content: vec![Block::Text(text.into())] }
    }

    /// An assistant message: typically a [`Response`]'s content, stored for the next request.
    pub fn assistant(content: Vec<Block>) -> Self {
        Message { role: Role::Assistant, content }
    }
}

/// One piece of a message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Block {
    /// Plain text.
    Text(String),
    /// The model asks for a tool call (assistant messages).
    ToolUse {
        /// The provider's call id; the result must carry it back.
        id: String,
        /// The tool's name as offered.
        name: String,
        /// The parsed arguments (a JSON object).
        input: Value,
    },
    /// The outcome of a tool call (user messages).
    ToolResult {
        /// The [`Block::ToolUse`] id this answers.
        tool_use_id: String,
        /// The result text (JSON for skill tools).
        content: String,
        /// Whether the call failed.
        is_error: bool,
    },
    /// Provider state replayed verbatim on the next request and never shown: OpenAI Responses
    /// `reasoning` items with `encrypted_content`. Providers skip opaque blocks they do not
    /// recognise, so a conversation survives a change of provider.
    Opaque(Value),
}

/// A tool offered to the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDecl {
    /// The name the model calls it by (`skill__tool`).
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// JSON Schema of its input; shared, since every round offers the same tools again.
    pub input_schema: Schema,
}

/// A tool's input schema: the value, and its JSON rendered once, so that a request
/// offering the tool (every round of every turn) copies the text instead of serializing
/// the value again. Cheap to clone; reads as the [`Value`] it holds.
#[derive(Debug, Clone)]
pub struct Schema {
    value: std::sync::Arc<Value>,
    json: std::sync::Arc<serde_json::value::RawValue>,
}

impl Schema {
    /// The schema `value`.
    pub fn new(value: Value) -> Self {
        // A `Value` always renders (its keys are strings): the fallback is never taken.
        let json = serde_json::value::to_raw_value(&value)
            .unwrap_or_else(|_| serde_json::value::RawValue::from_string("{}".into()).expect("valid JSON"));
        Schema { value: value.into(), json: json.into() }
    }

    /// A schema already rendered: `json` must be `value` written as JSON (a skill's tool
    /// renders its schema once, when it is loaded).
    pub fn from_parts(value: std::sync::Arc<Value>, json: std::sync::Arc<serde_json::value::RawValue>) -> Self {
        debug_assert_eq!(serde_json::from_str::<Value>(json.get()).ok().as_ref(), Some(&*value));
        Schema { value, json }
    }
}

impl std::ops::Deref for Schema {
    type Target = Value;

    fn deref(&self) -> &Value {
        &self.value
    }
}

impl From<Value> for Schema {
    fn from(value: Value) -> Self {
        Schema::new(value)
    }
}

impl PartialEq for Schema {
    fn eq(&self, other: &Self) -> bool {
        self.value == other.value
    }
}

impl Serialize for Schema {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.json.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Schema {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Value::deserialize(deserializer).map(Schema::new)
    }
}

/// One completion request.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// The model id.
    pub model: String,
    /// The system prompt (empty for none).
    pub system: String,
    /// The conversation so far, oldest first; the last one is the user's.
    pub messages: Vec<Message>,
    /// Tools the model may call (empty for none).
    pub tools: Vec<ToolDecl>,
    /// Whether the model may call them now.
    pub tool_choice: ToolChoice,
    /// Maximum output tokens.
    pub max_tokens: u32,
}

/// Whether the model may call the offered tools in this request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ToolChoice {
    /// The model decides.
    #[default]
    Auto,
    /// Tools stay declared (a conversation holding tool calls needs them declared: Anthropic
    /// rejects tool_use blocks without tools) but the model must answer in text.
    None,
}

/// A piece of the answer, delivered while it streams.
#[derive(Debug, Clone, PartialEq)]
pub enum Delta {
    /// Text to show now.
    Text(String),
}

/// Why the model stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopReason {
    /// The answer is complete.
    EndTurn,
    /// The model waits for tool results.
    ToolUse,
    /// The output token budget ran out.
    MaxTokens,
    /// Anything else, with the provider's word for it.
    Other(String),
}

/// Token counts of one request, as the provider reports them (or of several, added up).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Usage {
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Generated tokens (including reasoning, where billed).
    pub output_tokens: u64,
}

impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, other: Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
    }
}

/// A complete answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    /// Its blocks in order: text, tool calls, opaque provider state.
    pub content: Vec<Block>,
    /// Why it ended.
    pub stop: StopReason,
    /// Token counts.
    pub usage: Usage,
}

impl Response {
    /// All text blocks, joined.
    pub fn text(&self) -> String {
        self.content.iter().filter_map(|b| if let Block::Text(t) = b { Some(t.as_str()) } else { None }).collect()
    }

    /// The tool calls, in order: `(id, name, input)`.
    pub fn tool_uses(&self) -> Vec<(&str, &str, &Value)> {
        let calls = self.content.iter().filter_map(|b| match b {
            Block::ToolUse { id, name, input } => Some((id.as_str(), name.as_str(), input)),
            _ => None,
        });
        calls.collect()
    }
}

/// The sink a provider streams [`Delta`]s into.
pub type Sink<'a> = &'a mut (dyn FnMut(Delta) + Send);

/// An LLM API.
#[async_trait::async_trait]
pub trait Provider: Send + Sync {
    /// The provider's name, used in errors (`anthropic`, `openai`, ...).
    fn name(&self) -> &'static str;

    /// Sends `req`, streams text into `sink` as it arrives, and returns the whole answer.
    async fn complete(&self, req: &Request, sink: &mut (dyn FnMut(Delta) + Send)) -> Result<Response, LlmError>;
}

/// Builds the provider `llm.provider` names, with its key from config or the environment, and
/// wraps it in [`Retrying`] with the default policy.
pub fn from_config(llm: &config::Llm) -> Result<Box<dyn Provider>, String> {
    fn boxed<P: Provider + 'static>(p: P) -> Box<dyn Provider> {
        Box::new(Retrying::new(p, RetryPolicy::default()))
    }
    let empty = config::ProviderSettings::default();
    match llm.provider {
        ProviderKind::Anthropic => {
            let s = llm.anthropic.as_ref().unwrap_or(&empty);
            let key = key(s, Some("ANTHROPIC_API_KEY"))
                .ok_or("llm.anthropic: no api_key and ANTHROPIC_API_KEY is not set")?;
            let effort = s.reasoning_effort.as_deref().map(anthropic::check_effort).transpose();
            let effort = effort.map_err(|e| format!("llm.anthropic.reasoning_effort: {e}"))?;
            Ok(boxed(anthropic::Anthropic::new(key, s.base_url.as_deref()).with_effort(effort)))
        }
        ProviderKind::Openai => {
            let s = llm.openai.as_ref().unwrap_or(&empty);
            let key = key(s, Some("OPENAI_API_KEY")).ok_or("llm.openai: no api_key and OPENAI_API_KEY is not set")?;
            let effort = s.reasoning_effort.as_deref().unwrap_or(openai::DEFAULT_EFFORT);
            let effort = openai::check_effort(effort).map_err(|e| format!("llm.openai.reasoning_effort: {e}"))?;
            Ok(boxed(openai::OpenAi::new(key, s.base_url.as_deref(), effort)))
        }
        ProviderKind::OpenaiCompatible => {
            let s = llm.openai_compatible.as_ref().unwrap_or(&empty);
            let base = s.base_url.as_deref().filter(|b| !b.is_empty());
            let base = base.ok_or("llm.openai_compatible.base_url is required (e.g. http://127.0.0.1:11434/v1)")?;
            // No fallback to OPENAI_API_KEY: that key must never be sent to a third-party or
            // local server the operator did not explicitly give it to.
            let effort = s.reasoning_effort.clone().filter(|e| !e.is_empty());
            Ok(boxed(openai_compatible::Chat::new(key(s, None), base).with_effort(effort)))
        }
        ProviderKind::Bedrock => {
            let s = llm.bedrock.clone().unwrap_or_default();
            match s.api().map_err(|e| format!("llm.bedrock.{e}"))? {
                config::BedrockApi::Converse => Ok(boxed(bedrock::Converse::from_settings(&s)?)),
                config::BedrockApi::Responses => Ok(boxed(bedrock::mantle(&s)?)),
            }
        }
    }
}

/// `value` when it is one of `allowed`, else an error listing them (a provider's efforts).
fn one_of(value: &str, allowed: &[&str]) -> Result<String, String> {
    match allowed.contains(&value) {
        true => Ok(value.to_owned()),
        false => Err(format!("{value:?} is not one of {}", allowed.join(", "))),
    }
}

/// The key from the settings, or else from `env` (an empty value counts as unset).
fn key(settings: &config::ProviderSettings, env: Option<&str>) -> Option<String> {
    let configured = settings.api_key.clone().filter(|k| !k.is_empty());
    configured.or_else(|| env.and_then(|name| std::env::var(name).ok()).filter(|k| !k.is_empty()))
}

#[cfg(test)]
mod tests;
