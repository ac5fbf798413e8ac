//! One round of tool calls: resolve each call's approval level, ask for the gated ones, run
//! the approved ones (at most [`MAX_PARALLEL`] at once) and answer every call, in order.

use super::approval::{self, Level};
use super::approver::{ApprovalOutcome, ApprovalRequest, Approver};
use super::budget::Budget;
use super::events::{EngineEvent, EventSink};
use super::interaction::InteractionCall;
use super::promote::{Promotion, PromotionKey};
use super::tools::{ToolOutcome, ToolRouter};
use crate::config::OverrideLevel;
use crate::llm::Block;
use crate::sandbox::CallContext;
use futures::StreamExt;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime};

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
    /// The turn's budget; approval waits are given back to it.
    pub deadline: Budget,
    pub ctx: &'a CallContext,
    pub events: &'a dyn EventSink,
    pub approver: &'a dyn Approver,
    pub promotion: &'a Promotion,
    /// `engine.tool_budget`: calls past a cap are refused, in call order, before any approval.
    pub tool_budget: &'a super::tool_budget::TurnBudget,
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
        self.router.begin_batch(&self.ctx.channel_id);
        let mut gated = Vec::with_capacity(calls.len());
        let mut refused = std::collections::HashMap::new();
        for (id, name, input) in calls {
            if let Some(outcome) = self.tool_budget.admit(&name, &input) {
                refused.insert(id.clone(), outcome);
                gated.push((id, name, input, Level::Auto, None, false));
                continue;
            }
            let level = self.level(&name, &input).await;
            let (approval, promoted) = match level {
                Level::Auto => (None, false),
                Level::Approve if self.promoted(&name, &input) => (Some(ApprovalOutcome::Approved), true),
                _ => {
                    let outcome = self.ask(&id, &name, &input, level).await;
                    self.record(&name, &input, level, &outcome);
                    (Some(outcome), false)
                }
            };
            gated.push((id, name, input, level, approval, promoted));
        }
        let answers = gated.into_iter().map(|(id, name, input, level, approval, promoted)| {
            let refused = refused.remove(&id);
            async move {
                match refused {
                    // Not run: no approval, no tool events.
                    Some(outcome) => ToolCallRecord {
                        tool_call_id: id,
                        tool_name: name,
                        input,
                        level,
                        approval,
                        promoted,
                        executed: false,
                        outcome,
                    },
                    None => self.answer(id, name, input, level, approval, promoted).await,
                }
            }
        });
        futures::stream::iter(answers).buffered(MAX_PARALLEL).collect().await
    }

    fn promoted(&self, name: &str, input: &Value) -> bool {
        let Some(key) = self.promotion_key(name, input) else { return false };
        self.promotion.is_promoted(self.router.policy_skill(name).map(|s| &**s), &key)
    }

    /// What approvals of the call count against: the tool, narrowed by the skill's subject
    /// (the shell's command) when it has one. MCP tools count per tool, like native ones.
    fn promotion_key(&self, name: &str, input: &Value) -> Option<PromotionKey> {
        if let Some((skill, tool)) = self.router.skills().find_tool(name) {
            let subject = skill.promotion_subject(&tool.name, input);
            return Some(PromotionKey { tool: name.to_owned(), subject });
        }
        self.router.mcp_tool(name).is_some().then(|| PromotionKey::tool(name))
    }

    /// Counts a person's decision. Approvals count only at `approve` level, the one level
    /// that can be promoted; a denial at any level blocks promotion of the tool (or of the
    /// subject). Timeouts and cancellations say nothing about the person's trust and are not
    /// counted.
    fn record(&self, name: &str, input: &Value, level: Level, outcome: &ApprovalOutcome) {
        let Some(key) = self.promotion_key(name, input) else { return };
        match outcome {
            ApprovalOutcome::Approved if level == Level::Approve => self.promotion.record(&key, true),
            ApprovalOutcome::Denied(_) => self.promotion.record(&key, false),
            _ => {}
        }
    }

    /// The call's level. Calls that cannot run (unknown tool, input breaking the schema) need
    /// no approval: asking a person about a call that will fail anyway only wastes their time.
    async fn level(&self, name: &str, input: &Value) -> Level {
        if let Some(level) = self.router.mcp_level(name, input, self.ctx).await {
            return level;
        }
        let Some((skill, tool)) = self.router.skills().find_tool(name) else { return Level::Auto };
        if tool.validate(input).is_err() {
            return Level::Auto;
        }
        approval::resolve(skill, tool, input, self.ctx, self.overrides).await
    }

    async fn ask(&self, id: &str, name: &str, input: &Value, level: Level) -> ApprovalOutcome {
        let request = ApprovalRequest {
            approval_id: new_id(),
            tool_call_id: id.to_owned(),
            tool_name: name.to_owned(),
            input: input.clone(),
            level,
            expires_at: SystemTime::now() + self.approval_timeout,
        };
        self.events.emit(EngineEvent::ApprovalRequested {
            approval_id: request.approval_id.clone(),
            tool_call_id: request.tool_call_id.clone(),
            tool_name: request.tool_name.clone(),
            input: request.input.clone(),
            level,
            expires_at: request.expires_at,
        });
        let tool_call_id = request.tool_call_id.clone();
        let decision = tokio::time::timeout(self.approval_timeout, self.approver.decide(request));
        let outcome = self.deadline.paused(decision).await.unwrap_or(ApprovalOutcome::TimedOut);
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
    /// The adapter's own tools (see [`Interaction`]) go to the adapter, without tool events.
    async fn execute(&self, id: &str, name: &str, input: &Value) -> ToolOutcome {
        let started = Instant::now();
        if let Some(interaction) = self.approver.interaction().filter(|i| i.handles(name)) {
            let call = InteractionCall {
                tool_call_id: id.into(),
                tool_name: name.into(),
                input: input.clone(),
                timeout: self.approval_timeout,
            };
            // A question waits for a person: bounded by its own timeout, not charged to the budget.
            return self.deadline.paused(interaction.call(call)).await;
        }
        let target = self.router.target(name, input).await;
        self.events.emit(EngineEvent::ToolStarted {
            tool_call_id: id.into(),
            tool_name: name.into(),
            input: input.clone(),
            target,
        });
        let run = self.router.execute_in_turn(name, input, self.ctx, Some(self.tool_budget));
        let outcome = tokio::time::timeout_at(self.deadline.deadline().into(), run)
            .await
            .unwrap_or_else(|_| deadline_error(started));
        let (duration, is_error) = (outcome.duration, outcome.is_error);
        let is_empty = self.router.is_empty(name, &outcome).await;
        // Only calls allowed to run get here (auto, promoted or approved by a person): the
        // approval-v1 stream reports those as `approved: true`, whatever the outcome.
        let approved = true;
        self.events.emit(EngineEvent::ToolCompleted {
            tool_call_id: id.into(),
            tool_name: name.into(),
            duration,
            approved,
            is_error,
            is_empty,
        });
        outcome
    }
}

fn deadline_error(started: Instant) -> ToolOutcome {
    let error = json!({"error": "the turn's time budget ran out before the tool finished", "kind": "turn_deadline"});
    ToolOutcome::error(&error, started.elapsed())
}

/// A fresh random id (128 bits, hex) for an approval or question.
pub fn new_id() -> String {
    let mut bytes = [0u8; 16];
    if getrandom::fill(&mut bytes).is_err() {
        // No OS randomness: fall back to a per-process counter mixed with the clock, which
        // still never repeats within the process.
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let nanos = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0) as u64;
        bytes[..8].copy_from_slice(&n.to_le_bytes());
        bytes[8..].copy_from_slice(&nanos.to_le_bytes());
    }
    hex::encode(bytes)
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
