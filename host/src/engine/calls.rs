//! One round of tool calls: resolve each call's approval level, ask for the gated ones, run
//! the approved ones (at most [`MAX_PARALLEL`] at once) and answer every call, in order.

use super::approval::{self, Level};
use super::approver::{ApprovalOutcome, ApprovalRequest, Approver};
use super::events::{EngineEvent, EventSink};
use super::promote::{Promotion, PromotionKey};
use super::tools::{ToolOutcome, ToolRouter};
use crate::config::OverrideLevel;
use crate::llm::Block;
use crate::sandbox::CallContext;
use futures::StreamExt;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// How many tool calls of one round run at the same time.
pub const MAX_PARALLEL: usize = 4;

/// One tool call of a turn and what became of it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCallRecord {
    /// The model's call id.
    pub tool_call_id: String,
    /// The prefixed tool name.
    pub tool_name: String,
    /// The call's arguments.
    pub input: Value,
    /// The approval level it resolved to.
    pub level: Level,
    /// The decision, for gated calls; `None` when no approval was needed.
    pub approval: Option<ApprovalOutcome>,
    /// Approved by auto-promotion (`approval` is then `Approved`, and nobody was asked).
    pub promoted: bool,
    /// Whether the tool ran (ungated, or approved).
    pub executed: bool,
    /// What the model was told.
    pub outcome: ToolOutcome,
}

impl ToolCallRecord {
    /// The `tool_result` block answering this call.
    pub fn to_block(&self) -> Block {
        let (content, is_error) = (self.outcome.content.clone(), self.outcome.is_error);
        Block::ToolResult { tool_use_id: self.tool_call_id.clone(), content, is_error }
    }
}

/// Everything a round needs from the turn.
pub(crate) struct Round<'a> {
    pub router: &'a ToolRouter,
    pub overrides: &'a BTreeMap<String, Option<OverrideLevel>>,
    pub approval_timeout: Duration,
    pub deadline: Instant,
    pub ctx: &'a CallContext,
    pub events: &'a dyn EventSink,
    pub approver: &'a dyn Approver,
    pub promotion: &'a Promotion,
}

/// A call the model made: `(id, prefixed name, input)`.
pub(crate) type Call = (String, String, Value);

impl Round<'_> {
    /// Answers every call, in the order given. Approvals are asked one at a time, in order,
    /// before anything runs, so a person sees the calls in the order the model made them.
    ///
    /// A promoted call (see [`Promotion`]) counts as approved without asking: it emits no
    /// approval events, and its `ToolCompleted` says `approved: true`.
    pub async fn run(&self, calls: Vec<Call>) -> Vec<ToolCallRecord> {
        let mut gated = Vec::with_capacity(calls.len());
        for (id, name, input) in calls {
            let level = self.level(&name, &input).await;
            let (approval, promoted) = match level {
                Level::Auto => (None, false),
                Level::Approve if self.promoted(&name) => (Some(ApprovalOutcome::Approved), true),
                _ => {
                    let outcome = self.ask(&id, &name, &input, level).await;
                    self.record(&name, level, &outcome);
                    (Some(outcome), false)
                }
            };
            gated.push((id, name, input, level, approval, promoted));
        }
        let answers = gated.into_iter().map(|(id, name, input, level, approval, promoted)| {
            self.answer(id, name, input, level, approval, promoted)
        });
        futures::stream::iter(answers).buffered(MAX_PARALLEL).collect().await
    }

    fn promoted(&self, name: &str) -> bool {
        let Some((skill, _)) = self.router.skills().find_tool(name) else { return false };
        self.promotion.is_promoted(skill, &PromotionKey::tool(name))
    }

    /// Counts a person's decision. Approvals count only at `approve` level, the one level
    /// that can be promoted; a denial at any level blocks promotion of the tool. Timeouts and
    /// cancellations say nothing about the person's trust and are not counted.
    fn record(&self, name: &str, level: Level, outcome: &ApprovalOutcome) {
        let key = PromotionKey::tool(name);
        match outcome {
            ApprovalOutcome::Approved if level == Level::Approve => self.promotion.record(&key, true),
            ApprovalOutcome::Denied(_) => self.promotion.record(&key, false),
            _ => {}
        }
    }

    /// The call's level. Calls that cannot run (unknown tool, input breaking the schema) need
    /// no approval: asking a person about a call that will fail anyway only wastes their time.
    async fn level(&self, name: &str, input: &Value) -> Level {
        let Some((skill, tool)) = self.router.skills().find_tool(name) else { return Level::Auto };
        if tool.validate(input).is_err() {
            return Level::Auto;
        }
        approval::resolve(skill, tool, input, self.ctx, self.overrides).await
    }

    async fn ask(&self, id: &str, name: &str, input: &Value, level: Level) -> ApprovalOutcome {
        let (tool_call_id, tool_name) = (id.to_owned(), name.to_owned());
        self.events.emit(EngineEvent::ApprovalRequested { tool_call_id: tool_call_id.clone(), tool_name: tool_name.clone(), level });
        let request = ApprovalRequest { tool_call_id: tool_call_id.clone(), tool_name, input: input.clone(), level };
        let outcome = tokio::time::timeout(self.approval_timeout, self.approver.decide(request))
            .await
            .unwrap_or(ApprovalOutcome::TimedOut);
        self.events.emit(EngineEvent::ApprovalResolved { tool_call_id, outcome: outcome.clone() });
        outcome
    }

    async fn answer(
        &self,
        id: String,
        name: String,
        input: Value,
        level: Level,
        approval: Option<ApprovalOutcome>,
        promoted: bool,
    ) -> ToolCallRecord {
        let executed = matches!(approval, None | Some(ApprovalOutcome::Approved));
        let outcome = match &approval {
            Some(refused) if !executed => refusal(refused, self.approval_timeout),
            _ => self.execute(&id, &name, &input).await,
        };
        ToolCallRecord { tool_call_id: id, tool_name: name, input, level, approval, promoted, executed, outcome }
    }

    /// Runs the call, cut off at the turn deadline (dropping the future stops the guest).
    async fn execute(&self, id: &str, name: &str, input: &Value) -> ToolOutcome {
        let started = Instant::now();
        self.events.emit(EngineEvent::ToolStarted { tool_call_id: id.into(), tool_name: name.into(), input: input.clone() });
        let run = self.router.execute(name, input, self.ctx);
        let outcome = tokio::time::timeout_at(self.deadline.into(), run).await.unwrap_or_else(|_| {
            let error = json!({"error": "the turn's time budget ran out before the tool finished", "kind": "turn_deadline"});
            ToolOutcome::error(&error, started.elapsed())
        });
        let (duration, is_error) = (outcome.duration, outcome.is_error);
        // Only calls allowed to run get here (auto, promoted or approved by a person): the
        // approval-v1 stream reports those as `approved: true`, whatever the outcome.
        let approved = true;
        self.events.emit(EngineEvent::ToolCompleted { tool_call_id: id.into(), tool_name: name.into(), duration, approved, is_error });
        outcome
    }
}

/// What the model is told about a call that did not run. Spelled out so it neither retries
/// the call blindly nor claims it ran.
fn refusal(outcome: &ApprovalOutcome, timeout: Duration) -> ToolOutcome {
    let json = match outcome {
        ApprovalOutcome::Denied(reason) => json!({
            "error": "the user denied this tool call; it was not executed. Do not retry it without asking the user.",
            "kind": "denied",
            "reason": reason,
        }),
        ApprovalOutcome::TimedOut => json!({
            "error": format!("nobody approved this tool call within {} s; it was not executed (treated as denied)", timeout.as_secs()),
            "kind": "approval_timeout",
        }),
        ApprovalOutcome::Cancelled | ApprovalOutcome::Approved => json!({
            "error": "this tool call needs a person's approval, which is not available here; it was cancelled and not executed",
            "kind": "cancelled",
        }),
    };
    ToolOutcome::error(&json, Duration::ZERO)
}
