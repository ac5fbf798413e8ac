//! One resume for a call whose approval waits on a surface that answers later (MCP at
//! 2026-07-28 and its tasks): the gate opened the broker entry and suspended the call
//! ([`super::ApprovalOutcome::Suspended`]); the surface carried the person's decision to the
//! broker; [`Engine::resume_call`] reads the entry, checks that it covers the call, holds the
//! approval's use ([`crate::broker::Uses`]) and runs the call with the decision given. The
//! approval is used up when the call completes, and given back when it stops at a round of
//! questions its client answers in a later request.

use super::counterpart::{ApprovalOutcome, Counterpart};
use super::events::EventSink;
use super::gate::Given;
use super::round::{Call, ToolCallRecord};
use super::tool_budget::TurnBudget;
use super::turn::Engine;
use crate::broker::{Kind, Outcome, UseRefused, Uses, Who};
use crate::sandbox::CallContext;

/// Why a call was not resumed: nothing ran.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResumeError {
    /// The entry is unknown to this agent, or no longer kept.
    #[error("the approval is unknown or no longer kept")]
    Gone,
    /// Nobody has decided it yet.
    #[error("the approval has not been decided yet")]
    Undecided,
    /// It covers another tool.
    #[error("the approval was given for another call (other tool or arguments)")]
    OtherCall,
    /// Its use was refused (used up, running).
    #[error(transparent)]
    Use(#[from] UseRefused),
    /// The broker cannot be read.
    #[error("the approval cannot be read now: {0}")]
    Unavailable(String),
}

/// A call resumed: its record, and the approval it ran with (whose later rounds carry it).
#[derive(Debug)]
pub struct Resumed {
    /// What became of the call.
    pub record: ToolCallRecord,
    /// The approval, as the broker decided it.
    pub given: Given,
    /// The call stopped at a round of questions its client answers in a later request.
    pub suspended: bool,
}

impl Engine {
    /// The decision on approval `entry`, as the broker recorded it, for a call of `tool`.
    pub async fn given(&self, entry: &str, tool: &str) -> Result<Given, ResumeError> {
        // The engine reads as the agent's operator: every entry of the agent.
        let reader = Who { agent: self.agent(), surface: None, user: "engine", conversation: None, token: None };
        let found = self.broker().get(entry, Kind::Approval, reader).await;
        let found = found.map_err(|e| ResumeError::Unavailable(e.to_string()))?.ok_or(ResumeError::Gone)?;
        let outcome = ApprovalOutcome::from(Outcome::of(&found).ok_or(ResumeError::Undecided)?);
        let (covered, arguments, level) =
            crate::broker::present::covered(found.presentation.as_deref()).ok_or(ResumeError::OtherCall)?;
        if covered != tool {
            return Err(ResumeError::OtherCall);
        }
        Ok(Given { entry: found.id, tool: covered, arguments, level, outcome, expires_at: found.expires_at })
    }

    /// Runs `call` again with the decision on approval `entry` (opened by an earlier run of
    /// it, decided at the broker since), once: the approval's use is held for the run, used
    /// up when the call completes, given back when it stops at a round its client answers
    /// later. A decision is never asked again, and the tool's level is not resolved again.
    pub async fn resume_call(
        &self,
        entry: &str,
        call: Call,
        ctx: &CallContext,
        events: &dyn EventSink,
        counterpart: &dyn Counterpart,
        budget: &TurnBudget,
    ) -> Result<Resumed, ResumeError> {
        let given = self.given(entry, &call.1).await?;
        let held = Uses::new(self.history().state().clone()).take(&given.entry, given.expires_at).await?;
        let (record, suspended) = self.call_once(call, ctx, events, counterpart, budget, Some(&given)).await;
        let suspended = suspended || matches!(record.approval, Some(ApprovalOutcome::Suspended(_)));
        match suspended {
            true => held.release().await,
            false => {
                if let Err(e) = held.complete().await {
                    tracing::warn!(approval = given.entry, "the approval's use cannot be recorded: {e}");
                }
                if let (Some(desk), true) = (counterpart.desk(), record.executed) {
                    let (call, failed) = ((record.tool_name.as_str(), &record.input), record.outcome.is_error);
                    desk.broker.note_consumed(&desk.scope, &given.entry, call, failed).await;
                }
            }
        }
        Ok(Resumed { record, given, suspended })
    }
}
