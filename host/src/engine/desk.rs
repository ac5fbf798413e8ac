//! Asking a person through the [`crate::broker`]: the one path every interactive adapter's
//! approvals and questions take. The entry is opened (recorded, its waiter registered)
//! before anything shows its id; then the turn's events announce it, the counterpart
//! presents it, and the wait ends with the person's decision, the expiry or the turn's end.

pub use super::counterpart::Desk;
use super::counterpart::{ApprovalOutcome, Counterpart};
use super::events::{EngineEvent, EventSink};
use crate::broker::{Entry, Kind, Outcome, Ticket};
use crate::tools::{CONFIRMATION_CHALLENGE, Level};
use serde_json::Value;
use std::time::{Duration, SystemTime};

/// A gated call to put to a person.
pub struct Asked<'a> {
    /// The model's call id.
    pub tool_call_id: &'a str,
    /// The prefixed tool name.
    pub tool_name: &'a str,
    /// The call's arguments.
    pub input: &'a Value,
    /// `approve` or `confirm`.
    pub level: Level,
    /// When the wait ends.
    pub expires_at: SystemTime,
    /// What every surface shows (from [`crate::broker::present::Approval`]).
    pub presentation: Value,
    /// The turn as it can be resumed elsewhere, when it can.
    pub checkpoint: Option<String>,
}

/// Opens the approval of `asked` at `desk`, announces and presents it, and waits for the
/// outcome; with the entry's id when this run waited on it (the call it covers is this run's
/// to use up).
pub async fn approval(
    desk: &Desk,
    counterpart: &dyn Counterpart,
    events: &dyn EventSink,
    asked: Asked<'_>,
) -> (ApprovalOutcome, Option<String>) {
    let mut opening = desk.opening(Kind::Approval, asked.expires_at, asked.presentation, asked.checkpoint);
    opening.challenge = (asked.level == Level::Confirm).then(|| CONFIRMATION_CHALLENGE.to_owned());
    let requested = |id: &str| EngineEvent::ApprovalRequested {
        approval_id: id.to_owned(),
        tool_call_id: asked.tool_call_id.to_owned(),
        tool_name: asked.tool_name.to_owned(),
        input: asked.input.clone(),
        level: asked.level,
        expires_at: asked.expires_at,
    };
    if desk.answers_later {
        // Recorded with nobody here waiting: the surface's later request decides it and
        // resumes the call ([`super::Engine::resume_call`]).
        return match desk.broker.post(opening).await {
            Ok(entry) => {
                events.emit(requested(&entry.id));
                (ApprovalOutcome::Suspended(entry.id), None)
            }
            Err(e) => {
                tracing::error!(tool = asked.tool_name, "the approval cannot be opened: {e}");
                (ApprovalOutcome::Unavailable(e.to_string()), None)
            }
        };
    }
    let ticket = match desk.broker.open(opening).await {
        Ok(ticket) => ticket,
        Err(e) => {
            tracing::error!(tool = asked.tool_name, "the approval cannot be opened: {e}");
            return (ApprovalOutcome::Unavailable(e.to_string()), None);
        }
    };
    let id = ticket.id().to_owned();
    events.emit(requested(&id));
    match wait(&desk.broker, counterpart, ticket).await {
        Ok(outcome) => (outcome.into(), Some(id)),
        Err(why) => (ApprovalOutcome::Unavailable(why.to_string()), None),
    }
}

/// A question to put to a person.
pub struct Question<'a> {
    /// The question.
    pub prompt: &'a str,
    /// Suggested answers.
    pub choices: &'a [String],
    /// The JSON schema of the answer, if it has one.
    pub schema: Option<&'a Value>,
    /// How long the person has.
    pub timeout: Duration,
    /// The turn as it can be resumed elsewhere, when it can.
    pub checkpoint: Option<String>,
    /// Once the question is open: the turn as it is now, when it changed since `checkpoint`
    /// was taken (calls beside the question ended), to write again.
    pub opened: Option<&'a (dyn Fn() -> Option<String> + Send + Sync)>,
}

/// Opens `question` at `desk`, presents it, and waits for the answer (or how the wait ended).
pub async fn question(desk: &Desk, counterpart: &dyn Counterpart, question: Question<'_>) -> Outcome {
    let expires_at = SystemTime::now() + question.timeout;
    // The id is the broker's: the presentation gets it when opened.
    let presentation =
        crate::broker::present::question("", question.prompt, question.choices, question.schema, expires_at);
    let mut opening = desk.opening(Kind::Question, expires_at, presentation, question.checkpoint);
    opening.prompt = Some(question.prompt.to_owned());
    opening.choices = question.choices.to_vec();
    let ticket = match desk.broker.open(opening).await {
        Ok(ticket) => ticket,
        Err(e) => {
            tracing::warn!("a question cannot be opened: {e}");
            return Outcome::Cancelled;
        }
    };
    if let Some(newer) = question.opened.and_then(|opened| opened()) {
        desk.broker.rewrite(&desk.scope.run_id, &newer).await;
    }
    wait(&desk.broker, counterpart, ticket).await.unwrap_or(Outcome::Cancelled)
}

/// Presents `ticket`'s entry and waits for its outcome; the counterpart is told how it
/// ended (`Err`: it could not be shown). A surface may take the person's decision while it
/// presents (a terminal prompt, an MCP client's elicitation): the presenting is bounded by
/// the entry's expiry, and a decision taken elsewhere meanwhile (the console) ends it.
async fn wait(
    broker: &crate::broker::Broker,
    counterpart: &dyn Counterpart,
    ticket: Ticket,
) -> Result<Outcome, super::counterpart::PresentError> {
    let entry: Entry = ticket.entry().clone();
    let resumable = ticket.resumable();
    let left = entry.expires_at.duration_since(SystemTime::now()).unwrap_or_default();
    let mut presenting = std::pin::pin!(tokio::time::timeout(left, counterpart.present(&entry, resumable)));
    let mut waiting = std::pin::pin!(ticket.wait());
    let outcome = tokio::select! {
        biased;
        presented = &mut presenting => match presented {
            Ok(Err(why)) => {
                broker.settle(&entry.id, &Outcome::Cancelled);
                counterpart.ended(&entry, &Outcome::Cancelled).await;
                return Err(why);
            }
            Ok(Ok(())) | Err(_) => waiting.await,
        },
        outcome = &mut waiting => outcome,
    };
    counterpart.ended(&entry, &outcome).await;
    Ok(outcome)
}
