//! Asking whoever drives the call, mid-call, in one round: named requests under your own
//! keys, each answered (or found unavailable) under the same key.
//!
//! Who answers depends on the front door: an MCP client gets the requests as they are
//! (`elicitation/create`, `sampling/createMessage`, `roots/list`); a person in chat or the
//! API is asked each form; a turn's own model answers sampling; `skillhost call` asks a form
//! on the terminal. A request nobody there can answer comes back [`Answer::Unavailable`].
//!
//! **From MCP 2026-07-28 a call that asks runs again from the start** once the client has
//! answered, and [`ask`] then returns the recorded answers: whatever the tool did before
//! asking happens again, so do side effects after the question.
//!
//! ```no_run
//! use skill_sdk::ask::{self, Request};
//! use skill_sdk::json;
//! let schema = json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]});
//! let answers = ask::ask([("user_name", Request::form("What is your name?", schema))])?;
//! let name = answers.accepted("user_name").and_then(|c| c["name"].as_str().map(str::to_owned));
//! # Ok::<(), ask::AskError>(())
//! ```

use crate::bindings::skillhost::skill::ask as wit;
use serde_json::Value;

/// One request of a round.
#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    /// A form: what to ask, and the JSON Schema of the answer (an object schema with flat
    /// properties), passed on untouched.
    Form {
        /// What is asked.
        message: String,
        /// The answer's schema.
        schema: Value,
    },
    /// A completion from the model of whoever drives the call.
    Sampling {
        /// The conversation: `(by_assistant, text)`, oldest first.
        messages: Vec<(bool, String)>,
        /// The system prompt, if any.
        system_prompt: Option<String>,
        /// The longest completion, in tokens.
        max_tokens: u32,
    },
    /// The MCP client's roots.
    Roots,
}

impl Request {
    /// A form asking `message`, answered to fit `schema`.
    pub fn form(message: impl Into<String>, schema: Value) -> Request {
        Request::Form { message: message.into(), schema }
    }

    /// Sampling of one user message, at most `max_tokens` long.
    pub fn sampling(prompt: impl Into<String>, max_tokens: u32) -> Request {
        Request::Sampling { messages: vec![(false, prompt.into())], system_prompt: None, max_tokens }
    }

    fn wit(self) -> wit::Request {
        match self {
            Request::Form { message, schema } => wit::Request::Form(wit::Form { message, schema: schema.to_string() }),
            Request::Sampling { messages, system_prompt, max_tokens } => wit::Request::Sampling(wit::Sampling {
                messages: messages
                    .into_iter()
                    .map(|(by_assistant, text)| wit::Message {
                        role: if by_assistant { wit::Role::Assistant } else { wit::Role::User },
                        text,
                    })
                    .collect(),
                system_prompt,
                max_tokens,
            }),
            Request::Roots => wit::Request::Roots,
        }
    }
}

/// What the person did with a form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Filled it in.
    Accept,
    /// Said no.
    Decline,
    /// Dismissed it.
    Cancel,
}

impl Action {
    /// `accept`, `decline` or `cancel`, as MCP names it.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Accept => "accept",
            Action::Decline => "decline",
            Action::Cancel => "cancel",
        }
    }
}

/// The answer to one request.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// A form's answer: the action, and with `Accept` the content (a JSON object).
    Form {
        /// What the person did.
        action: Action,
        /// The content, with `Accept`.
        content: Option<Value>,
    },
    /// A model's completion.
    Sampled {
        /// Its text.
        text: String,
        /// The model that wrote it.
        model: String,
        /// Why it stopped, if said.
        stop_reason: Option<String>,
    },
    /// The client's roots: `(uri, name)`.
    Roots(Vec<(String, Option<String>)>),
    /// Nobody here can answer this request; why.
    Unavailable(String),
}

impl Answer {
    fn from_wit(answer: wit::Answer) -> Answer {
        match answer {
            wit::Answer::Form(form) => Answer::Form {
                action: match form.action {
                    wit::Action::Accept => Action::Accept,
                    wit::Action::Decline => Action::Decline,
                    wit::Action::Cancel => Action::Cancel,
                },
                content: form.content.and_then(|c| serde_json::from_str(&c).ok()),
            },
            wit::Answer::Sampled(s) => Answer::Sampled { text: s.text, model: s.model, stop_reason: s.stop_reason },
            wit::Answer::Roots(roots) => Answer::Roots(roots.into_iter().map(|r| (r.uri, r.name)).collect()),
            wit::Answer::Unavailable(why) => Answer::Unavailable(why),
        }
    }
}

/// A round's answers, by key.
#[derive(Debug, Clone, PartialEq)]
pub struct Answers(pub Vec<(String, Answer)>);

impl Answers {
    /// The answer under `key`.
    pub fn get(&self, key: &str) -> Option<&Answer> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, a)| a)
    }

    /// The content of the form under `key`, when it was accepted.
    pub fn accepted(&self, key: &str) -> Option<&Value> {
        match self.get(key)? {
            Answer::Form { action: Action::Accept, content } => content.as_ref(),
            _ => None,
        }
    }

    /// The text sampled under `key`.
    pub fn sampled(&self, key: &str) -> Option<&str> {
        match self.get(key)? {
            Answer::Sampled { text, .. } => Some(text),
            _ => None,
        }
    }
}

/// Why a round got no answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AskError {
    /// Nobody answered within the operator's `human.timeout_seconds`.
    TimedOut,
    /// The person, or the end of the turn, cancelled it.
    Cancelled,
    /// The requests are malformed; what is wrong.
    Invalid(String),
}

impl std::fmt::Display for AskError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AskError::TimedOut => f.write_str("nobody answered in time"),
            AskError::Cancelled => f.write_str("the question was cancelled"),
            AskError::Invalid(why) => write!(f, "invalid requests: {why}"),
        }
    }
}

impl std::error::Error for AskError {}

/// Asks every request of `requests` in one round; the answers come back under the same keys.
pub fn ask<K: Into<String>>(requests: impl IntoIterator<Item = (K, Request)>) -> Result<Answers, AskError> {
    let requests: Vec<(String, wit::Request)> = requests.into_iter().map(|(k, r)| (k.into(), r.wit())).collect();
    match wit::ask(&requests) {
        Ok(answers) => Ok(Answers(answers.into_iter().map(|(k, a)| (k, Answer::from_wit(a))).collect())),
        Err(wit::Error::TimedOut) => Err(AskError::TimedOut),
        Err(wit::Error::Cancelled) => Err(AskError::Cancelled),
        Err(wit::Error::Invalid(why)) => Err(AskError::Invalid(why)),
    }
}
