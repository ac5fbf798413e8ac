//! The person at the other end of a turn, in the words every layer shares: a [`Question`],
//! its [`Answer`], and [`Person`], somebody who can be asked during a call. The adapters ask
//! (the terminal, the API's `question_requested`, a chat message with buttons); the engine
//! routes; the tools and the MCP client (a server's elicitation) wait for the answer. Like
//! `config`, read by every layer and using none.

/// One question for a person.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Question {
    /// What is asked, with the context the person needs.
    pub prompt: String,
    /// Suggested answers (an enum's values), possibly none.
    pub choices: Vec<String>,
}

/// What came back from asking.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// The person's answer.
    Answered(String),
    /// The question was cancelled (the turn ended, the person left).
    Cancelled,
    /// Nobody answered in time.
    TimedOut,
    /// Nobody can be asked here, for the reason given.
    Unavailable(String),
}

/// Somebody who can be asked questions during a call.
#[async_trait::async_trait]
pub trait Person: Send + Sync {
    /// Asks `question` and waits for the answer (bounded by whoever implements it).
    async fn ask(&self, question: Question) -> Answer;
}

/// Nobody: every question is [`Answer::Unavailable`].
pub struct Nobody;

#[async_trait::async_trait]
impl Person for Nobody {
    async fn ask(&self, _question: Question) -> Answer {
        Answer::Unavailable("nobody can be asked here".into())
    }
}

/// One request of a skill's round (the `ask` import), under the skill's own key.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Request {
    /// A form for a person: the message, and the JSON Schema of the answer (passed on as it is).
    Form {
        /// What is asked.
        message: String,
        /// The answer's JSON Schema (an object schema).
        schema: serde_json::Value,
    },
    /// A completion from the model of whoever drives the call.
    Sampling(Sampling),
    /// The MCP client's roots.
    Roots,
}

impl Request {
    /// The MCP method that carries it.
    pub fn method(&self) -> &'static str {
        match self {
            Request::Form { .. } => "elicitation/create",
            Request::Sampling(_) => "sampling/createMessage",
            Request::Roots => "roots/list",
        }
    }
}

/// A sampling request.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Sampling {
    /// The conversation to complete.
    pub messages: Vec<Said>,
    /// The system prompt, if any.
    pub system_prompt: Option<String>,
    /// The longest completion, in tokens.
    pub max_tokens: u32,
}

/// One message of a sampling request: `assistant` when `by_assistant`, else `user`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Said {
    /// Said by the assistant (else by the user).
    pub by_assistant: bool,
    /// The text.
    pub text: String,
}

/// What a person did with a form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FormAction {
    /// Filled it in.
    Accept,
    /// Said no.
    Decline,
    /// Dismissed it.
    Cancel,
}

/// One of an MCP client's roots.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Root {
    /// Its URI.
    pub uri: String,
    /// Its name, if it has one.
    pub name: Option<String>,
}

/// The answer to one [`Request`].
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Reply {
    /// A form's answer: with `Accept`, its content (a JSON object).
    Form {
        /// What the person did.
        action: FormAction,
        /// The content, with `Accept`.
        content: Option<serde_json::Value>,
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
    /// The client's roots.
    Roots {
        /// The roots.
        roots: Vec<Root>,
    },
    /// Nobody here can answer this request; why.
    Unavailable {
        /// Why.
        why: String,
    },
}

/// A round of requests, in the skill's order.
pub type Round = Vec<(String, Request)>;
/// A round's answers, in the same order.
pub type Replies = Vec<(String, Reply)>;

/// Why a round got no answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unanswered {
    /// Nobody answered within `human.timeout_seconds`.
    TimedOut,
    /// The person, or the end of the turn, cancelled it.
    Cancelled,
    /// The round goes to the client in the call's result instead (an MCP `input_required`
    /// result at 2026-07-28): the call stops here, and runs again with the answers.
    Suspended,
}

/// Every request of `round` answered `Unavailable` with `why`.
pub fn unavailable(round: &Round, why: &str) -> Replies {
    round.iter().map(|(key, _)| (key.clone(), Reply::Unavailable { why: why.to_owned() })).collect()
}
