//! A turn that waits for a person, written down so that another process can finish it.
//!
//! Approvals are asked in call order before any call of a round runs ([`super::round`]), so
//! while a person is asked nothing of the round has run: the conversation up to the model's
//! calls, the decisions already taken in the round and the call being asked about are the
//! whole state of the turn. A chat adapter on a shared store keeps it ([`Checkpoint`]); when
//! the process that asked is gone, another replica resumes the turn with the person's
//! decision ([`super::Engine::resume_turn`]): the round is run again with the decisions
//! taken, nothing is asked twice, and the turn goes on to its answer.

use super::counterpart::ApprovalOutcome;
use super::request::TurnRequest;
use crate::llm::Message;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::Arc;

/// The version [`Checkpoint`]s are written as; another is refused, not misread.
pub const VERSION: u32 = 1;

/// What the call a [`Checkpoint`] waits on waits for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Waits {
    /// A person's decision on a gated call.
    #[default]
    Approval,
    /// A person's answer to the question the call asks (`human__ask`), its round's only call.
    Answer,
}

/// A turn waiting on one approval, or on the answer to its round's one question.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// [`VERSION`].
    pub version: u32,
    /// The message the turn answers.
    pub request: TurnRequest,
    /// The conversation, ending with the model's message whose calls the round answers.
    pub messages: Vec<Message>,
    /// The people's decisions already taken in this round, by call id.
    pub decided: Vec<(String, ApprovalOutcome)>,
    /// The call the person is asked about.
    pub waiting: String,
    /// What it waits for.
    #[serde(default)]
    pub waits: Waits,
    /// Set when it is resumed after the replica running its round died: the round's calls
    /// may have run, so each is answered as interrupted instead of run again.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
}

impl Checkpoint {
    /// The decisions a resumed round starts from: those taken, and `outcome` for the call
    /// that waited on an approval.
    pub fn decisions(&self, outcome: Option<ApprovalOutcome>) -> HashMap<String, ApprovalOutcome> {
        let mut decided: HashMap<_, _> = self.decided.iter().cloned().collect();
        if let Some(outcome) = outcome {
            decided.insert(self.waiting.clone(), outcome);
        }
        decided
    }
}

/// A turn whose waits can be written down: what its rounds need to make a [`Checkpoint`],
/// and the decisions a resumed round was given.
#[derive(Debug)]
pub struct Durable {
    request: TurnRequest,
    /// The conversation as the current round started.
    messages: Mutex<Arc<Vec<Message>>>,
    /// Decisions given to a resumed round, used instead of asking (each once).
    given: Mutex<HashMap<String, ApprovalOutcome>>,
    /// The current round once its calls are settled.
    settled: Mutex<Settled>,
}

/// A round whose calls are settled: the people's decisions, and the one question it asks,
/// if that is all it does.
#[derive(Debug, Clone, Default)]
struct Settled {
    decided: Vec<(String, ApprovalOutcome)>,
    question: Option<String>,
}

impl Durable {
    /// For the turn answering `request`; `given`: a resumed turn's decisions.
    pub fn new(request: TurnRequest, given: HashMap<String, ApprovalOutcome>) -> Self {
        Durable { request, messages: Mutex::default(), given: Mutex::new(given), settled: Mutex::default() }
    }

    /// The round about to run starts from `messages`.
    pub fn round_starts(&self, messages: &[Message]) {
        *self.messages.lock() = Arc::new(messages.to_vec());
        *self.settled.lock() = Default::default();
    }

    /// The round's calls are settled, with `decided`; `question`: its only call, when that
    /// asks a person a question (then its wait can be written down: nothing else of the
    /// round runs, so nothing would run twice).
    pub fn round_settled(&self, decided: &[(String, ApprovalOutcome)], question: Option<&str>) {
        let settled = Settled { decided: decided.to_vec(), question: question.map(str::to_owned) };
        *self.settled.lock() = settled;
    }

    /// The checkpoint of the round waiting on the answer to its question `id`, if the round
    /// is that one question.
    pub fn question_checkpoint(&self, id: &str) -> Option<Checkpoint> {
        let Settled { decided, question } = self.settled.lock().clone();
        (question.as_deref() == Some(id)).then(|| Checkpoint { waits: Waits::Answer, ..self.checkpoint(&decided, id) })
    }

    /// The decision given for call `id`, taken (a later round asks again).
    pub fn given(&self, id: &str) -> Option<ApprovalOutcome> {
        self.given.lock().remove(id)
    }

    /// The checkpoint of the round waiting on call `waiting`, after `decided`.
    pub fn checkpoint(&self, decided: &[(String, ApprovalOutcome)], waiting: &str) -> Checkpoint {
        let messages = self.messages.lock().clone();
        Checkpoint {
            version: VERSION,
            request: self.request.clone(),
            messages: messages.as_ref().clone(),
            decided: decided.to_vec(),
            waiting: waiting.to_owned(),
            waits: Waits::Approval,
            interrupted: false,
        }
    }
}
