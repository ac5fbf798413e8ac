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
