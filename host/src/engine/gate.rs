//! The gate: the one approval path every adapter uses: which level a call needs (the tool's policy,
//! then `human.overrides` as the final word), auto-promotion, asking the adapter's
//! [`Counterpart`] with an id and an expiry, the events, and what the model is told when a call
//! is refused. Adapters differ only in how they ask: the terminal, the approval-v1 stream,
//! MCP elicitation.

use super::checkpoint::Durable;
use super::counterpart::{ApprovalOutcome, Counterpart};
use super::deadline::Deadline;
use super::desk::Asked;
use super::events::{EngineEvent, EventSink};
use super::promote::Promotion;
use crate::config::OverrideLevel;
use crate::sandbox::CallContext;
use crate::skills::{Skill, ToolSpec};
use crate::tools::{Level, PromotionKey, ToolCall, ToolInfo, ToolOutcome, ToolSource};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};
use tracing::Instrument as _;

pub use crate::tools::CONFIRMATION_CHALLENGE;

/// What the gate decided for one call.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    /// The level it resolved to.
    pub level: Level,
    /// The decision, for gated calls; `None` when none was needed.
    pub approval: Option<ApprovalOutcome>,
    /// Approved by auto-promotion: nobody was asked.
    pub promoted: bool,
    /// The approval entry this run waited on, when a person was asked here: the call that
    /// runs uses it up (on the record).
    pub entry: Option<String>,
}

impl Verdict {
    /// Whether the call may run.
    pub fn allows(&self) -> bool {
        matches!(self.approval, None | Some(ApprovalOutcome::Approved | ApprovalOutcome::Edited(_)))
    }

    /// The arguments a person changed the call to, when they edited it.
    pub fn edited(&self) -> Option<&Value> {
        match &self.approval {
            Some(ApprovalOutcome::Edited(arguments)) => Some(arguments),
            _ => None,
        }
    }
}

/// How a call that needs a person is settled besides asking.
#[derive(Clone, Copy)]
pub enum Resume<'a> {
    /// Asked, and waited for here.
    No,
    /// Part of a turn that can be written down while it waits ([`Durable`]), after the
    /// round's decisions so far; a resumed round's decision is given rather than asked.
    Durable(&'a Durable<'a>, &'a [(String, ApprovalOutcome)]),
    /// The call's approval was opened by an earlier run of it and decided at the broker since
    /// ([`super::Engine::resume_call`]): its decision stands, nobody is asked again.
    Given(&'a Given),
}

/// An approval entry decided at the broker before this run of its call (a surface that
/// answers later): what it covers and how it was decided.
#[derive(Debug, Clone, PartialEq)]
pub struct Given {
    /// The broker entry.
    pub entry: String,
    /// The tool it covers.
    pub tool: String,
    /// The hash of the arguments it covers ([`crate::broker::arguments_hash`]).
    pub arguments: String,
    /// The level it was asked at (the call's level is not resolved again).
    pub level: Level,
    /// The person's decision.
    pub outcome: ApprovalOutcome,
    /// When the approval's wait ended (its `requestState`s expire then).
    pub expires_at: SystemTime,
}

impl Given {
    /// Whether it covers a call of `tool` with `input`: changed arguments need a new approval.
    pub fn covers(&self, tool: &str, input: &Value) -> bool {
        self.tool == tool && self.arguments == crate::broker::arguments_hash(input)
    }
}

/// The approval policy of one agent.
#[derive(Debug, Clone)]
pub struct Gate {
    overrides: BTreeMap<String, Option<OverrideLevel>>,
    timeout: Duration,
    promotion: Promotion,
}

impl Gate {
    /// A gate with the operator's `human` settings and the agent's approval counts.
    pub fn new(overrides: BTreeMap<String, Option<OverrideLevel>>, timeout: Duration, promotion: Promotion) -> Self {
        Gate { overrides, timeout, promotion }
    }

    /// How long a person has to decide.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The operator's `human.overrides` level for the tool called `name`, if any.
    pub fn override_of(&self, name: &str) -> Option<Level> {
        overridden(&self.overrides, name, None)
    }

    /// The approval counts behind auto-promotion.
    pub fn promotion(&self) -> &Promotion {
        &self.promotion
    }

    /// The call's level: `human.overrides` for its name (or its alias's direct name) is the
    /// final word; otherwise the tool's own policy (`resolve-human`, then its static level).
    pub async fn level(&self, source: &dyn ToolSource, info: &ToolInfo, call: ToolCall<'_>) -> Level {
        match overridden(&self.overrides, call.name, info.override_alias.as_deref()) {
            Some(level) => level,
            None => source.level(call).await,
        }
    }

    /// Whether a call at `level` would be put to a person (not auto, not promoted).
    pub async fn would_ask(&self, source: &dyn ToolSource, info: &ToolInfo, call: ToolCall<'_>, level: Level) -> bool {
        match level {
            Level::Auto => false,
            Level::Approve => !self.promoted(info, source.promotion_key(call.name, call.input).as_ref()).await,
            _ => true,
        }
    }

    /// Whether approvals under `key` have promoted the tool past asking.
    async fn promoted(&self, info: &ToolInfo, key: Option<&PromotionKey>) -> bool {
        match key {
            Some(k) => self.promotion.is_promoted(info.promotion_threshold, k).await,
            None => false,
        }
    }

    /// Settles a call at `level`: auto, promoted, or asked of the `counterpart` (the decision
    /// counted toward promotion).
    #[allow(clippy::too_many_arguments)]
    pub async fn decide(
        &self,
        source: &dyn ToolSource,
        info: &ToolInfo,
        call: ToolCall<'_>,
        level: Level,
        events: &dyn EventSink,
        counterpart: &dyn Counterpart,
        deadline: &Deadline,
        resume: Resume<'_>,
    ) -> Verdict {
        let key = source.promotion_key(call.name, call.input);
        match level {
            Level::Auto => Verdict { level, approval: None, promoted: false, entry: None },
            Level::Approve if self.promoted(info, key.as_ref()).await => {
                // Nobody is asked; the record still says so.
                if let Some(desk) = counterpart.desk() {
                    desk.broker.note_promoted(&desk.scope, call.name, call.input).await;
                }
                Verdict { level, approval: Some(ApprovalOutcome::Approved), promoted: true, entry: None }
            }
            _ => {
                let (given, checkpoint) = match resume {
                    Resume::Durable(durable, decided) => match durable.given(call.id) {
                        // A resumed round: the person decided while the turn was written down
                        // (on the entry named, whose use the round records).
                        Some(given) => (Some((given.outcome, given.entry)), None),
                        None => {
                            (None, durable.checkpoint(decided, call.id).and_then(|c| serde_json::to_string(&c).ok()))
                        }
                    },
                    // The MCP resume records the use itself, once the call completes.
                    Resume::Given(given) => (Some((given.outcome.clone(), None)), None),
                    Resume::No => (None, None),
                };
                let (outcome, entry) = match given {
                    Some(given) => given,
                    None => self.ask(source, call, level, events, counterpart, deadline, checkpoint).await,
                };
                if let Some(key) = &key {
                    // Approvals count only at `approve` level, the one level that can be
                    // promoted; a denial at any level blocks promotion. Timeouts and
                    // cancellations say nothing about the person's trust.
                    match &outcome {
                        ApprovalOutcome::Approved if level == Level::Approve => {
                            self.promotion.record(info.promotion_threshold, key, true).await;
                        }
                        ApprovalOutcome::Denied(_) => self.promotion.record(info.promotion_threshold, key, false).await,
                        _ => {}
                    }
                }
                Verdict { level, approval: Some(outcome), promoted: false, entry }
            }
        }
    }

    /// Puts the call to a person at the counterpart's desk (the broker entry opened there,
    /// one id per approval), inside an `approval` span, the wait not charged to the turn's
    /// time; a counterpart without a desk has nobody to ask and gives its standing answer.
    #[allow(clippy::too_many_arguments)]
    async fn ask(
        &self,
        source: &dyn ToolSource,
        call: ToolCall<'_>,
        level: Level,
        events: &dyn EventSink,
        counterpart: &dyn Counterpart,
        deadline: &Deadline,
        checkpoint: Option<String>,
    ) -> (ApprovalOutcome, Option<String>) {
        let span = tracing::info_span!(
            "approval",
            otel.name = %format!("approval {}", call.name),
            gen_ai.tool.name = %call.name,
            gen_ai.tool.call.id = %call.id,
            skillhost.approval.level = level.as_str(),
            skillhost.approval.outcome = tracing::field::Empty,
            skillhost.approval.wait_ms = tracing::field::Empty,
            skillhost.adapter = events.adapter().unwrap_or("none"),
        );
        let expires_at = SystemTime::now() + self.timeout;
        let Some(desk) = counterpart.desk() else {
            // Nobody to ask here: no entry, the counterpart's standing answer.
            let outcome = counterpart.unattended();
            span.record("skillhost.approval.outcome", outcome.as_str());
            crate::metrics::approval(outcome.as_str(), Duration::ZERO);
            return (outcome, None);
        };
        let presentation = crate::broker::present::Approval {
            tool_name: call.name,
            tool_call_id: call.id,
            input: call.input,
            level,
            safe_description: crate::broker::present::safe_description(&source.decls(), call.name),
            expires_at,
        }
        .json("");
        let asked = Asked {
            tool_call_id: call.id,
            tool_name: call.name,
            input: call.input,
            level,
            expires_at,
            presentation,
            checkpoint,
        };
        let (pending, asked_at) = (crate::metrics::approval_pending(), std::time::Instant::now());
        let asking = super::desk::approval(&desk, counterpart, events, asked);
        let (outcome, entry) = deadline.paused(asking).instrument(span.clone()).await;
        let waited = asked_at.elapsed();
        drop(pending);
        span.record("skillhost.approval.outcome", outcome.as_str());
        span.record("skillhost.approval.wait_ms", waited.as_millis() as u64);
        if let ApprovalOutcome::Suspended(_) = outcome {
            // Decided with a later request, which resumes the call.
            return (outcome, None);
        }
        crate::metrics::approval(outcome.as_str(), waited);
        events.emit(EngineEvent::ApprovalResolved { tool_call_id: call.id.to_owned(), outcome: outcome.clone() });
        (outcome, entry)
    }

    /// What the model is told about a call that did not run. Spelled out so it neither
    /// retries the call blindly nor claims it ran.
    pub fn refusal(&self, outcome: &ApprovalOutcome) -> ToolOutcome {
        let json = match outcome {
            ApprovalOutcome::Denied(reason) => json!({
                "error": "the user denied this tool call; it was not executed. Do not retry it without asking the user.",
                "kind": "denied",
                "reason": reason,
            }),
            ApprovalOutcome::TimedOut => json!({
                "error": format!("nobody approved this tool call within {} s; it was not executed (treated as denied)", self.timeout.as_secs()),
                "kind": "approval_timeout",
            }),
            ApprovalOutcome::Cancelled
            | ApprovalOutcome::Approved
            | ApprovalOutcome::Edited(_)
            | ApprovalOutcome::Suspended(_) => json!({
                "error": "this tool call needs a person's approval, which is not available here; it was cancelled and not executed",
                "kind": "cancelled",
            }),
            ApprovalOutcome::Unavailable(why) => json!({
                "error": format!("this tool call needs a person's approval, and {why}; it was cancelled and not executed"),
                "kind": "cancelled",
            }),
        };
        ToolOutcome::error(&json, Duration::ZERO)
    }
}

/// The operator's `human.overrides` level for `name` (or its alias's direct name), if any.
fn overridden(overrides: &BTreeMap<String, Option<OverrideLevel>>, name: &str, alias: Option<&str>) -> Option<Level> {
    let level = overrides.get(name).or_else(|| alias.and_then(|a| overrides.get(a)))?;
    Some(level.map_or(Level::Auto, Level::from))
}

/// The level of one call of `skill`'s `tool` as the gate resolves it: the operator's
/// override, else the skill's own policy. For callers holding a skill rather than an engine.
pub async fn resolve(
    skill: &Skill,
    tool: &ToolSpec,
    input: &Value,
    caller: &CallContext,
    overrides: &BTreeMap<String, Option<OverrideLevel>>,
) -> Level {
    if let Some(level) = overridden(overrides, &tool.full_name, None) {
        return level;
    }
    let call = ToolCall { id: "", name: &tool.full_name, input, ctx: caller };
    crate::tools::skill::skill_level(skill, &tool.name, tool.human, input, &call).await
}

/// A fresh random id (128 bits, hex) for an approval or question, from the OS random source;
/// an error when it fails: a guessable id would let anyone decide in a person's place.
pub fn new_id() -> Result<String, getrandom::Error> {
    crate::store::random_id()
}
