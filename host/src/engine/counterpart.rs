//! The turn's counterpart: what stands, through an adapter, for the person at the other end
//! of one turn. A [`Counterpart`] decides gated calls, answers questions, and may bring tools
//! of its own (the approval-v1 stream's `human__ask`); each adapter implements one (the
//! terminal, the API stream, MCP elicitation, a chat thread). [`NonInteractive`] and
//! [`AutoApprove`] cover runs with nobody to ask. The policy that decides *when* to ask is
//! the [`super::gate`].

use crate::broker::{Broker, Entry, Kind, Opening, Outcome, Scope, Waiting, Watch};
use crate::person::{Answer, Question, Replies, Round, Unanswered};
use crate::tools::{Level, ToolSource};
use serde_json::Value;
use std::sync::{Arc, Weak};
use std::time::{Duration, SystemTime};

/// A gated call waiting for a decision.
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalRequest {
    /// A fresh id for this request (random, unguessable), also in `ApprovalRequested`.
    pub approval_id: String,
    /// The model's call id.
    pub tool_call_id: String,
    /// The prefixed tool name.
    pub tool_name: String,
    /// The call's arguments, to show the person.
    pub input: Value,
    /// `Approve` (yes/no) or `Confirm` (type the challenge).
    pub level: Level,
    /// When the engine stops waiting (`human.timeout_seconds` after the request).
    pub expires_at: SystemTime,
    /// The turn as it can be resumed elsewhere once decided, when its adapter keeps it
    /// (a [`super::checkpoint::Checkpoint`] as JSON, for the adapter to keep).
    pub checkpoint: Option<String>,
}

/// The decision on one gated call.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalOutcome {
    /// Run it.
    Approved,
    /// Do not run it; the reason, if the person gave one, is passed to the model.
    Denied(Option<String>),
    /// Nobody decided within `human.timeout_seconds`; treated as a denial.
    TimedOut,
    /// Nobody can decide here (a non-interactive run), or the person cancelled the turn.
    Cancelled,
    /// The adapter has no way to ask anybody, for the reason given (an MCP client without
    /// elicitation); refused like a cancellation.
    Unavailable(String),
}

impl ApprovalOutcome {
    /// The spec-style name, for logs and events.
    pub fn as_str(&self) -> &'static str {
        match self {
            ApprovalOutcome::Approved => "approved",
            ApprovalOutcome::Denied(_) => "denied",
            ApprovalOutcome::TimedOut => "timed_out",
            ApprovalOutcome::Cancelled | ApprovalOutcome::Unavailable(_) => "cancelled",
        }
    }
}

/// Where one turn's approvals and questions are opened: the broker, who asks, and how the
/// turn can be resumed elsewhere.
#[derive(Clone)]
pub struct Desk {
    /// The process's broker.
    pub broker: Arc<Broker>,
    /// The agent, surface, conversation and run, and who may decide.
    pub scope: Scope,
    /// Told at once of a person's decision (the API's stream, a chat message).
    pub watch: Option<Weak<dyn Watch>>,
    /// For a turn that can be written down: the replicas that may resume it (its bot) and
    /// where its messages go (JSON).
    pub resumable: Option<(String, String)>,
}

impl Desk {
    /// Whether a turn waiting here is written down, so that another replica can resume it.
    pub fn durable(&self) -> bool {
        self.resumable.is_some() && self.broker.durable()
    }

    pub(super) fn opening(
        &self,
        kind: Kind,
        expires_at: SystemTime,
        presentation: Value,
        checkpoint: Option<String>,
    ) -> Opening {
        let resumable = match (&self.resumable, checkpoint) {
            (Some((scope, place)), Some(checkpoint)) => Some(Waiting {
                run_id: self.scope.run_id.clone(),
                scope: scope.clone(),
                place: place.clone(),
                checkpoint,
            }),
            _ => None,
        };
        Opening {
            kind,
            scope: self.scope.clone(),
            expires_at,
            challenge: None,
            prompt: None,
            choices: Vec::new(),
            presentation,
            resumable,
            watch: self.watch.clone(),
        }
    }
}

/// The person at the other end of a turn, as its adapter reaches them: decisions, answers,
/// and the adapter's own tools.
///
/// An interactive adapter (the API's stream, a chat conversation) has a [`Desk`]: the
/// turn's approvals and questions are opened at the person broker ([`super::desk`], which opens them), and the
/// adapter only presents what opened ([`Counterpart::present`]) and learns how it ended
/// ([`Counterpart::ended`]). One without a desk (the terminal, `call`, an MCP client
/// asked through `elicitation/create`) decides itself ([`Counterpart::decide`]), bounded by
/// `human.timeout_seconds`.
#[async_trait::async_trait]
pub trait Counterpart: Send + Sync {
    /// Where this turn's approvals and questions are opened, if at the broker.
    fn desk(&self) -> Option<Desk> {
        None
    }

    /// Shows an entry just opened at the desk (`resumable`: the turn was written down with
    /// it); `Err(why)` when it cannot be shown there (then the call does not run).
    async fn present(&self, entry: &Entry, resumable: bool) -> Result<(), PresentError> {
        let _ = (entry, resumable);
        Ok(())
    }

    /// The wait on `entry` ended with `outcome`; `false` when the turn must stop here
    /// (another replica took it over).
    async fn ended(&self, entry: &Entry, outcome: &Outcome) -> bool {
        let _ = (entry, outcome);
        true
    }

    /// Answers a skill's round as it is (an MCP client: its elicitation, sampling and
    /// roots), or `None` to have the engine ask the person each form and the turn's model
    /// each sampling (the default).
    async fn inquire(&self, round: &Round) -> Option<Result<Replies, Unanswered>> {
        let _ = round;
        None
    }

    /// The decision on `request`, for a counterpart without a desk; nobody decides by default.
    async fn decide(&self, request: ApprovalRequest) -> ApprovalOutcome {
        let _ = request;
        ApprovalOutcome::Cancelled
    }

    /// Whether the turn is written down while it waits for a person, so that another
    /// process can resume it ([`ApprovalRequest::checkpoint`]).
    fn durable(&self) -> bool {
        self.desk().is_some_and(|desk| desk.durable())
    }

    /// Tools this adapter answers itself for the turn (the `human__ask` of an interactive
    /// adapter), routed before every other source; none by default. Asked once per LLM request.
    fn tools(&self) -> Option<&dyn ToolSource> {
        None
    }

    /// Asks the person a question during a call (an MCP server's elicitation), waiting at
    /// most `timeout`, for a counterpart without a desk; nobody can be asked by default.
    async fn ask(&self, question: Question, timeout: Duration) -> Answer {
        let _ = (question, timeout);
        Answer::Unavailable("this adapter cannot ask questions".into())
    }
}

/// For fire-and-forget runs: every gated call is cancelled, as the spec says.
pub struct NonInteractive;

#[async_trait::async_trait]
impl Counterpart for NonInteractive {
    async fn decide(&self, _request: ApprovalRequest) -> ApprovalOutcome {
        ApprovalOutcome::Cancelled
    }
}

/// Approves everything (`--yes`, tests). Only for operators who accept every call.
pub struct AutoApprove;

#[async_trait::async_trait]
impl Counterpart for AutoApprove {
    async fn decide(&self, _request: ApprovalRequest) -> ApprovalOutcome {
        ApprovalOutcome::Approved
    }
}

/// Why an entry could not be shown where its turn runs (then its call does not run, or its
/// question is cancelled): what the surface said.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct PresentError(pub Box<dyn std::error::Error + Send + Sync>);

impl PresentError {
    /// `error`, as the reason.
    pub fn new(error: impl std::error::Error + Send + Sync + 'static) -> Self {
        PresentError(Box::new(error))
    }
}
