//! The turn's counterpart: what stands, through an adapter, for the person at the other end
//! of one turn. A [`Counterpart`] decides gated calls, answers questions, and may bring tools
//! of its own (the approval-v1 stream's `human__ask`); each adapter implements one (the
//! terminal, the API stream, MCP elicitation, a chat thread). [`NonInteractive`] and
//! [`AutoApprove`] cover runs with nobody to ask. The policy that decides *when* to ask is
//! the [`super::gate`].

use crate::broker::{Broker, DecideError, Decision, Entry, Kind, Opening, Outcome, Scope, Waiting, Watch, Who};
use crate::person::{Answer, Question, Replies, Round, Unanswered};
use crate::tools::ToolSource;
use serde_json::Value;
use std::sync::{Arc, Weak};
use std::time::{Duration, SystemTime};

/// The decision on one gated call.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalOutcome {
    /// Run it.
    Approved,
    /// Run it with these arguments: the person changed the call before approving it (the
    /// model is told).
    Edited(Value),
    /// Do not run it; the reason, if the person gave one, is passed to the model.
    Denied(Option<String>),
    /// Nobody decided within `human.timeout_seconds`; treated as a denial.
    TimedOut,
    /// Nobody can decide here (a non-interactive run), or the person cancelled the turn.
    Cancelled,
    /// The adapter has no way to ask anybody, for the reason given (an MCP client without
    /// elicitation); refused like a cancellation.
    Unavailable(String),
    /// The surface answers later, with another request (MCP at 2026-07-28): the call waits
    /// on the broker entry named, and does not run now.
    Suspended(String),
}

impl ApprovalOutcome {
    /// The spec-style name, for logs and events.
    pub fn as_str(&self) -> &'static str {
        match self {
            ApprovalOutcome::Approved | ApprovalOutcome::Edited(_) => "approved",
            ApprovalOutcome::Denied(_) => "denied",
            ApprovalOutcome::TimedOut => "timed_out",
            ApprovalOutcome::Cancelled | ApprovalOutcome::Unavailable(_) => "cancelled",
            ApprovalOutcome::Suspended(_) => "suspended",
        }
    }
}

impl From<Outcome> for ApprovalOutcome {
    /// How an approval entry ended, as the gate takes it.
    fn from(outcome: Outcome) -> Self {
        match outcome {
            Outcome::Approved(None) => ApprovalOutcome::Approved,
            Outcome::Approved(Some(arguments)) => match serde_json::from_str(&arguments) {
                Ok(arguments) => ApprovalOutcome::Edited(arguments),
                Err(e) => ApprovalOutcome::Unavailable(format!("the edited arguments cannot be read ({e})")),
            },
            Outcome::Denied(reason) => ApprovalOutcome::Denied(reason),
            Outcome::TimedOut => ApprovalOutcome::TimedOut,
            Outcome::Answered(_) | Outcome::Cancelled => ApprovalOutcome::Cancelled,
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
    /// The surface answers with a later request rather than while the call waits (MCP at
    /// 2026-07-28): an approval opened here suspends the call ([`ApprovalOutcome::Suspended`]).
    pub answers_later: bool,
}

impl Desk {
    /// A desk of `scope` at `broker` whose person decides while the call waits (a terminal,
    /// an MCP client's elicitation).
    pub fn new(broker: Arc<Broker>, scope: Scope) -> Desk {
        Desk { broker, scope, watch: None, resumable: None, answers_later: false }
    }

    /// Carries `user`'s decision on entry `id`, taken on this desk's surface, to the broker.
    /// An entry decided otherwise meanwhile (the console), or no longer waiting, is left as
    /// it is; `Err` when the broker cannot record it.
    pub async fn carry(&self, id: &str, user: &str, decision: Decision) -> Result<(), PresentError> {
        let surface = Some(self.scope.surface.as_str());
        let who = Who { agent: &self.scope.agent, surface, user, conversation: None, token: None };
        match self.broker.decide(id, who, decision).await {
            Ok(_) | Err(DecideError::Conflict(_) | DecideError::Gone) => Ok(()),
            Err(e) => Err(PresentError::new(e)),
        }
    }

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
/// An adapter that can ask a person has a [`Desk`]: the gate opens the turn's approvals at
/// the person broker ([`super::desk`]), and the adapter only presents what opened
/// ([`Counterpart::present`]: a stream event, a chat message, a terminal prompt, an MCP
/// elicitation), carries the person's decision to the broker, and learns how it ended
/// ([`Counterpart::ended`]). It never decides itself. One without a desk has nobody to ask:
/// its [`Counterpart::unattended`] outcome stands for every gated call.
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

    /// The wait on `entry` ended with `outcome`. A surface whose turn another replica took
    /// over meanwhile stops the turn here: this never returns, so nothing after it runs (no
    /// call, no further request to the model), and the surface drops the turn.
    async fn ended(&self, entry: &Entry, outcome: &Outcome) {
        let _ = (entry, outcome);
    }

    /// Answers a skill's round as it is (an MCP client: its elicitation, sampling and
    /// roots), or `None` to have the engine ask the person each form and the turn's model
    /// each sampling (the default).
    async fn inquire(&self, round: &Round) -> Option<Result<Replies, Unanswered>> {
        let _ = round;
        None
    }

    /// The outcome of every gated call for a counterpart without a desk (nobody to ask):
    /// cancelled by default.
    fn unattended(&self) -> ApprovalOutcome {
        ApprovalOutcome::Cancelled
    }

    /// Whether the turn is written down while it waits for a person, so that another
    /// process can resume it.
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

impl Counterpart for NonInteractive {}

/// Approves everything (`--yes`, tests). Only for operators who accept every call.
pub struct AutoApprove;

impl Counterpart for AutoApprove {
    fn unattended(&self) -> ApprovalOutcome {
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
