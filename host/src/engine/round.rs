//! One round of tool calls: each call's arguments are prepared first (the source's
//! normalisation, `engine.temporal_guardrails`), the tool budget admits calls in order, the
//! gate settles each one's approval (asked in order, before anything runs, about the
//! prepared arguments), the allowed ones run at most [`MAX_PARALLEL`] at once with the
//! prepared arguments, and every call is answered, in call order.

use super::checkpoint::Durable;
use super::counterpart::{ApprovalOutcome, Counterpart};
use super::deadline::Deadline;
use super::events::{EngineEvent, EventSink};
use super::gate::{Gate, Given, Resume, Verdict};
use super::tool_budget::TurnBudget;
use crate::llm::{Block, ToolDecl};
use crate::person::{Answer, Person, Question, Replies, Reply, Request, Round as AskRound, Sampling, Unanswered};
use crate::sandbox::CallContext;
use crate::tools::{
    CallScope, CoverageEntry, Level, NestedTurn, Prepared, ToolCall, ToolInfo, ToolOutcome, ToolSource, Tools,
    unknown_tool,
};
use futures::StreamExt;
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use tracing::Instrument as _;

/// How many tool calls of one round run at the same time.
pub const MAX_PARALLEL: usize = 4;
/// The field of a result that tells the model a person changed the call's arguments.
pub const EDITED: &str = "_edited_by_person";
/// What it says.
const EDITED_NOTE: &str =
    "A person changed this call's arguments before approving it; it ran with these arguments, not the ones you gave.";

/// One tool call of a turn and what became of it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCallRecord {
    /// The model's call id.
    pub tool_call_id: String,
    /// The prefixed tool name.
    pub tool_name: String,
    /// The arguments it ran (or would have run) with: the model's, as the source prepared
    /// them (`engine.temporal_guardrails`).
    pub input: Value,
    /// The approval level it resolved to.
    pub level: Level,
    /// The decision, for gated calls; `None` when no approval was needed.
    pub approval: Option<ApprovalOutcome>,
    /// Approved by auto-promotion (`approval` is then `Approved`, and nobody was asked).
    pub promoted: bool,
    /// Whether the tool ran (ungated, or approved).
    pub executed: bool,
    /// Its skill asks for a fact check of the answer (`VERIFY`).
    pub verify: bool,
    /// What the model was told.
    pub outcome: ToolOutcome,
}

impl ToolCallRecord {
    /// A call not run because the skill that would offer it was still compiling when the
    /// wait for it ended ([`super::ready::NotReady`]).
    pub(super) fn not_ready(call: Call, why: &super::ready::NotReady) -> Self {
        let json = json!({"error": why.to_string(), "kind": "skill_not_ready"});
        Self::unrun(call, ToolOutcome::error(&json, Duration::ZERO))
    }

    /// A call answered with `outcome` without running here: not ready, or in a round
    /// resumed after its replica died while it ran (its kept result, or
    /// [`super::checkpoint::interrupted_outcome`]).
    pub(super) fn unrun((tool_call_id, tool_name, input): Call, outcome: ToolOutcome) -> Self {
        ToolCallRecord {
            tool_call_id,
            tool_name,
            input,
            level: Level::Auto,
            approval: None,
            promoted: false,
            executed: false,
            verify: false,
            outcome,
        }
    }

    /// The `tool_result` block answering this call.
    pub fn to_block(&self) -> Block {
        let (content, is_error) = (self.outcome.content.clone(), self.outcome.is_error);
        Block::ToolResult { tool_use_id: self.tool_call_id.clone(), content, is_error }
    }
}

/// A call the model made: `(id, prefixed name, input)`.
pub type Call = (String, String, Value);

/// One call after its budget, input check and approval.
struct Settled {
    /// The prepared arguments.
    input: Value,
    decision: Verdict,
    verify: bool,
    /// The answer of a call that does not run.
    refused: Option<ToolOutcome>,
    /// The source's preparation, whose note the result gets.
    prepared: Option<Prepared>,
}

impl Settled {
    fn unasked(input: Value, verify: bool, refused: Option<ToolOutcome>) -> Self {
        let decision = Verdict { level: Level::Auto, approval: None, promoted: false, entry: None };
        Settled { input, decision, verify, refused, prepared: None }
    }
}

/// Everything a round needs from its turn (or from an adapter's single call).
pub struct Round<'a> {
    /// The agent's tools.
    pub tools: &'a Tools,
    /// The agent's approval policy.
    pub gate: &'a Gate,
    /// The turn's deadline; waits for people are given back to it.
    pub deadline: Deadline,
    /// Who is calling.
    pub ctx: &'a CallContext,
    /// Where events go.
    pub events: &'a dyn EventSink,
    /// Who decides on gated calls, and the adapter's own tools.
    pub counterpart: &'a dyn Counterpart,
    /// `engine.tool_budget`: calls past a cap are refused, in call order, before any approval.
    pub tool_budget: &'a TurnBudget,
    /// Who runs the nested turns its calls ask for; `None` outside a turn.
    pub nesting: Option<Nesting<'a>>,
    /// The tokens the turn's nested turns used (shared with them), for the turn's usage.
    pub spent: &'a Spent,
    /// A turn that is written down while it waits for a person (a chat turn on a shared
    /// store), or resumed with the decisions it was given.
    pub durable: Option<&'a Durable<'a>>,
    /// The approval an earlier run of the call opened and the broker has decided since
    /// (a surface that answers later): it settles the call it covers.
    pub given: Option<&'a Given>,
    /// Set when a call stopped at a round of questions its counterpart answers with a later
    /// request ([`Unanswered::Suspended`]).
    pub suspended: std::sync::atomic::AtomicBool,
}

/// Tokens added up across a turn and its nested turns.
#[derive(Debug, Default)]
pub struct Spent {
    input: std::sync::atomic::AtomicU64,
    output: std::sync::atomic::AtomicU64,
}

impl Spent {
    /// Adds `usage`.
    pub fn add(&self, usage: crate::llm::Usage) {
        use std::sync::atomic::Ordering::Relaxed;
        self.input.fetch_add(usage.input_tokens, Relaxed);
        self.output.fetch_add(usage.output_tokens, Relaxed);
    }

    /// The total so far.
    pub fn get(&self) -> crate::llm::Usage {
        use std::sync::atomic::Ordering::Relaxed;
        crate::llm::Usage { input_tokens: self.input.load(Relaxed), output_tokens: self.output.load(Relaxed) }
    }
}

/// What lets a round's calls start nested turns ([`CallScope::nested`]).
#[derive(Clone, Copy)]
pub struct Nesting<'a> {
    /// The engine whose turn this is.
    pub runner: &'a dyn NestedRunner,
    /// The agents this turn is nested in, outermost first (empty for a person's turn).
    pub chain: &'a [String],
}

/// Runs nested turns (the engine, in `nested.rs`).
#[async_trait::async_trait]
pub trait NestedRunner: Send + Sync {
    /// Runs `turn` for a call of `outer`'s (its deadline, person, events and budget), with
    /// `chain` the agents the outer turn is nested in.
    async fn run_nested(&self, turn: NestedTurn, outer: &Round<'_>, chain: &[String]) -> Result<String, String>;

    /// Answers `turn`'s task, delegated to this agent by a call of `outer`'s; `chain` ends
    /// with the delegating agent.
    async fn run_delegated(&self, turn: NestedTurn, outer: &Round<'_>, chain: &[String]) -> Result<String, String>;

    /// A completion of `sampling` by the agent's own model, for a skill's `ask` during a
    /// call of `outer`'s (its tokens count toward the turn's); `Err`: why there is none.
    async fn sample(&self, sampling: &Sampling, outer: &Round<'_>) -> Result<Reply, String>;

    /// Waits (bounded) until the skill called `skill`, compiling when the turn began, has
    /// joined this agent; its tools then ([`CallScope::join_skill`]).
    async fn join_skill(&self, skill: &str) -> Result<Vec<String>, String>;
}

/// The agents of this process by key, for delegations: filled by the app once every agent
/// is built; an agent that is gone (reloaded, stopped) is not found.
#[derive(Default)]
pub struct Peers {
    agents: parking_lot::RwLock<std::collections::BTreeMap<String, std::sync::Weak<dyn NestedRunner>>>,
}

impl Peers {
    /// Adds (or replaces) the agent called `name`.
    pub fn register(&self, name: &str, agent: std::sync::Weak<dyn NestedRunner>) {
        self.agents.write().insert(name.to_owned(), agent);
    }

    /// The agent called `name`, while it runs.
    pub fn get(&self, name: &str) -> Option<std::sync::Arc<dyn NestedRunner>> {
        self.agents.read().get(name).and_then(std::sync::Weak::upgrade)
    }

    /// The names of the agents registered.
    pub fn names(&self) -> Vec<String> {
        self.agents.read().keys().cloned().collect()
    }
}

impl Round<'_> {
    /// The adapter's tools first, then the agent's.
    fn find(&self, name: &str) -> Option<(&dyn ToolSource, ToolInfo)> {
        let adapter = self.counterpart.tools().and_then(|s| s.info(name).map(|info| (s, info)));
        adapter.or_else(|| self.tools.find(name))
    }

    /// What the model is offered this round: the adapter's tools, then the agent's.
    pub fn decls(&self) -> Vec<ToolDecl> {
        let mut decls = self.counterpart.tools().map(|s| s.decls()).unwrap_or_default();
        let theirs: Vec<ToolDecl> =
            self.tools.decls().into_iter().filter(|d| !decls.iter().any(|a| a.name == d.name)).collect();
        decls.extend(theirs);
        decls
    }

    /// Answers every call, in the order given. Approvals are asked one at a time, in order,
    /// before anything runs, so a person sees the calls in the order the model made them.
    pub async fn run(&self, calls: Vec<Call>) -> Vec<ToolCallRecord> {
        self.tools.begin_round(&self.ctx.channel_id);
        let mut settled = Vec::with_capacity(calls.len());
        // The people's decisions so far in this round, for a checkpoint taken while asking.
        let mut decided: Vec<(String, ApprovalOutcome)> = Vec::new();
        for (id, name, input) in calls {
            let answer = self.settle(&id, &name, input, &decided).await;
            if let (Some(outcome), false) = (&answer.decision.approval, answer.decision.promoted) {
                decided.push((id.clone(), outcome.clone()));
            }
            settled.push((id, name, answer));
        }
        self.note_settled(&settled, &decided);
        let answers = settled.into_iter().map(|(id, name, answer)| async move {
            let Settled { input, decision, verify, refused, prepared } = answer;
            // A person who changed the arguments approved the call they typed: it runs as such.
            let (input, refused) = match decision.edited() {
                Some(edited) => (edited.clone(), refused.or_else(|| self.recheck(&name, edited))),
                None => (input, refused),
            };
            let executed = refused.is_none() && decision.allows();
            let mut outcome = match refused {
                Some(outcome) => outcome,
                None if !executed => {
                    self.gate.refusal(decision.approval.as_ref().unwrap_or(&ApprovalOutcome::Cancelled))
                }
                // A resumed round: it ran (or was cut off) before the turn was written down.
                None => match self.durable.and_then(|d| d.replayed(&id)) {
                    Some(replayed) => replayed,
                    None => {
                        let outcome = annotated(self.execute(&id, &name, &input).await, &prepared, &decision);
                        self.ended(&id, &outcome).await;
                        if let (Some(entry), Some(desk)) = (&decision.entry, self.counterpart.desk()) {
                            desk.broker.note_consumed(&desk.scope, entry, (&name, &input), outcome.is_error).await;
                        }
                        outcome
                    }
                },
            };
            // A coverage-capable tool's call that did not run (denied, unknown input) is
            // unverified coverage, whichever source the tool comes from.
            if !executed && outcome.coverage.is_none() && self.find(&name).is_some_and(|(_, i)| i.declares_coverage) {
                outcome.coverage = Some(CoverageEntry::Unverified);
            }
            self.count(&name, executed, &outcome);
            let Verdict { level, approval, promoted, .. } = decision;
            ToolCallRecord {
                tool_call_id: id,
                tool_name: name,
                input,
                level,
                approval,
                promoted,
                executed,
                verify,
                outcome,
            }
        });
        futures::stream::iter(answers).buffered(MAX_PARALLEL).collect().await
    }

    /// The refusal of a call whose arguments a person changed into ones the tool's input
    /// schema refuses (the route that took them checks them first).
    fn recheck(&self, name: &str, edited: &Value) -> Option<ToolOutcome> {
        let (source, _) = self.find(name)?;
        source.check(name, edited).err()
    }

    /// Tells a turn that can be written down how its round settled: its decisions, and its
    /// one call that may wait on a person while it runs (a question, `human__ask`, or a
    /// nested turn), if it has exactly one, with or without calls beside it.
    fn note_settled(&self, settled: &[(String, String, Settled)], decided: &[(String, ApprovalOutcome)]) {
        let Some(durable) = self.durable else { return };
        let mut questions = settled.iter().filter(|(_, name, answer)| {
            answer.refused.is_none() && self.find(name).is_some_and(|(_, i)| i.answered_by_person || i.nests)
        });
        let question = match (questions.next(), questions.next()) {
            (Some((id, ..)), None) => Some(id.as_str()),
            _ => None,
        };
        durable.round_settled(decided, question, settled.len() > 1);
    }

    /// Call `id` ended with `outcome`: a round written down while it waits on its question
    /// keeps the result in its checkpoint, so a replica resuming it does not run it again.
    async fn ended(&self, id: &str, outcome: &ToolOutcome) {
        let Some(checkpoint) = self.durable.and_then(|d| d.ended(id, outcome)) else { return };
        let (Some(desk), Ok(json)) = (self.counterpart.desk(), serde_json::to_string(&checkpoint)) else { return };
        desk.broker.rewrite(&desk.scope.run_id, &json).await;
    }

    /// Records an answered call in the metrics: by tool (unknown names, which the model
    /// makes up, as one label), kind and outcome; the sandbox's stops; a person's answers
    /// as questions.
    fn count(&self, name: &str, executed: bool, outcome: &ToolOutcome) {
        let Some((source, info)) = self.find(name) else {
            crate::metrics::tool_call("(unknown)", "unknown", "refused", None);
            return;
        };
        if info.answered_by_person {
            crate::metrics::question(if outcome.is_error { "not_answered" } else { "answered" });
            return;
        }
        let result = match (executed, outcome.is_error) {
            (false, _) => "refused",
            (true, true) => "error",
            (true, false) => "ok",
        };
        crate::metrics::tool_call(name, source.kind(name), result, executed.then_some(outcome.duration));
        let stopped = outcome.error_kind.as_deref().and_then(crate::metrics::sandbox_failure_kind);
        if let (true, Some(kind)) = (executed, stopped) {
            crate::metrics::sandbox_failure(kind);
        }
    }

    /// Preparation, budget, input check and approval of one call; a `refused` answer
    /// answers it unrun. Calls that cannot run (unknown tool, unusable time arguments, input
    /// breaking the schema) need no approval: asking a person about a call that will fail
    /// anyway only wastes their time. Everything after preparation sees the prepared input.
    async fn settle(&self, id: &str, name: &str, input: Value, decided: &[(String, ApprovalOutcome)]) -> Settled {
        let Some((source, info)) = self.find(name) else {
            return Settled::unasked(input, false, Some(unknown_tool(name)));
        };
        let prepared = match source.prepare(name, &input) {
            Ok(prepared) => prepared,
            Err(refusal) => return Settled::unasked(input, info.verify, Some(refusal)),
        };
        let input = prepared.as_ref().map_or(input, |p| p.input.clone());
        if let Some(mut refusal) = self.tool_budget.admit(name, &input) {
            // A budgeted call that did not run still counts toward coverage, as unverified
            // (the spec: truncated calls are coverage-relevant when the tool is budgeted).
            refusal.coverage = Some(CoverageEntry::Unverified);
            return Settled::unasked(input, info.verify, Some(refusal));
        }
        if let Err(outcome) = source.check(name, &input) {
            return Settled::unasked(input, info.verify, Some(outcome));
        }
        if info.answered_by_person {
            return Settled { prepared, ..Settled::unasked(input, false, None) };
        }
        let call = ToolCall { id, name, input: &input, ctx: self.ctx };
        let given = self.given.filter(|given| given.covers(name, &input));
        let (level, resume) = match (given, self.durable) {
            // Asked before, at this level: the tool's level is not resolved again.
            (Some(given), _) => (given.level, Resume::Given(given)),
            (None, Some(durable)) => (self.gate.level(source, &info, call).await, Resume::Durable(durable, decided)),
            (None, None) => (self.gate.level(source, &info, call).await, Resume::No),
        };
        let decision =
            self.gate.decide(source, &info, call, level, self.events, self.counterpart, &self.deadline, resume).await;
        Settled { input, decision, verify: info.verify, refused: None, prepared }
    }

    /// Runs the call, cut off at the turn deadline (dropping the future stops the guest).
    /// Tools a person answers run without tool events, and their wait is not charged.
    async fn execute(&self, id: &str, name: &str, input: &Value) -> ToolOutcome {
        let started = Instant::now();
        let Some((source, info)) = self.find(name) else { return unknown_tool(name) };
        let call = ToolCall { id, name, input, ctx: self.ctx };
        if info.answered_by_person {
            return self.deadline.paused(source.execute(call, self)).await;
        }
        // The hooks deciding the target and emptiness are bounded by the turn deadline too,
        // falling back as the spec says (no target; the generic emptiness check).
        let deadline = tokio::time::Instant::from(self.deadline.deadline());
        let target = tokio::time::timeout_at(deadline, source.target(call)).await.ok().flatten();
        self.events.emit(EngineEvent::ToolStarted {
            tool_call_id: id.into(),
            tool_name: name.into(),
            input: input.clone(),
            target,
        });
        let skill = crate::skills::skill::split_exposed(name).map_or("", |(prefix, _)| prefix);
        let span = tracing::info_span!(
            "execute_tool",
            otel.name = %format!("execute_tool {name}"),
            gen_ai.operation.name = "execute_tool",
            gen_ai.tool.name = %name,
            gen_ai.tool.call.id = %id,
            skillhost.skill = %skill,
            skillhost.tool.kind = source.kind(name),
            skillhost.outcome = tracing::field::Empty,
            skillhost.failure = tracing::field::Empty,
            skillhost.sandbox.fuel_used = tracing::field::Empty,
            skillhost.sandbox.wall_ms = tracing::field::Empty,
            skillhost.sandbox.memory_bytes = tracing::field::Empty,
            mithai.tool.retried_after_prerequisite = tracing::field::Empty,
            otel.status_code = tracing::field::Empty,
        );
        let run = source.execute(call, self).instrument(span.clone());
        // Bound by the turn's clock itself, not the instant it showed when the call began: a
        // wait for a person during the call (a skill's `ask`, a server's elicitation) stops it.
        let outcome = self.deadline.bound(Duration::ZERO, run).await.unwrap_or_else(|| deadline_error(started));
        span.record("skillhost.outcome", if outcome.is_error { "error" } else { "ok" });
        if outcome.is_error {
            span.record("otel.status_code", "ERROR");
            if let Some(kind) = &outcome.error_kind {
                span.record("skillhost.failure", kind.as_str());
            }
        }
        let (duration, is_error) = (outcome.duration, outcome.is_error);
        let generic =
            !is_error && outcome.is_empty.unwrap_or_else(|| crate::tools::generically_empty(&outcome.content));
        let is_empty = tokio::time::timeout_at(deadline, source.is_empty(call, &outcome)).await.unwrap_or(generic);
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

#[async_trait::async_trait]
impl CallScope for Round<'_> {
    /// The wait is given back to the turn's deadline once it ends, like a person's.
    async fn join_skill(&self, skill: &str) -> Result<Vec<String>, String> {
        let Some(nesting) = self.nesting else { return Err("skills load only within a turn".into()) };
        self.deadline.paused(nesting.runner.join_skill(skill)).await
    }

    /// A retried call (the MCP prerequisite retry) passes the tool budget and the approval
    /// again: a level that the original call's decision does not cover is asked anew.
    async fn admit_again(&self, original: ToolCall<'_>, input: &Value) -> Result<(), ToolOutcome> {
        let Some((source, info)) = self.find(original.name) else { return Err(unknown_tool(original.name)) };
        if let Some(mut refusal) = self.tool_budget.admit(original.name, input) {
            crate::metrics::budget_suppressed();
            refusal.coverage = Some(CoverageEntry::Unverified);
            return Err(refusal);
        }
        let retry = ToolCall { input, ..original };
        let (before, after) =
            (self.gate.level(source, &info, original).await, self.gate.level(source, &info, retry).await);
        if after == Level::Auto || (after == before && input == original.input) {
            return Ok(());
        }
        let (events, counterpart, deadline) = (self.events, self.counterpart, &self.deadline);
        let decision = self.gate.decide(source, &info, retry, after, events, counterpart, deadline, Resume::No).await;
        match decision.approval {
            Some(ApprovalOutcome::Approved) | None => Ok(()),
            Some(outcome) => Err(self.gate.refusal(&outcome)),
        }
    }

    fn person_timeout(&self) -> Duration {
        self.gate.timeout()
    }

    /// The counterpart's own answer when it takes rounds as they are (MCP); else each form
    /// asked of the person ([`CallScope::ask`]), each sampling by the turn's model, and
    /// roots unavailable. The waits are not charged to the turn's time.
    async fn inquire(&self, skill: &str, round: AskRound) -> Result<Replies, Unanswered> {
        let asked = tokio::time::timeout(self.gate.timeout(), self.counterpart.inquire(&round));
        match self.deadline.paused(asked).await {
            Ok(Some(Err(Unanswered::Suspended))) => {
                self.suspended.store(true, std::sync::atomic::Ordering::Relaxed);
                return Err(Unanswered::Suspended);
            }
            Ok(Some(answered)) => return answered,
            Ok(None) => {}
            Err(_) => return Err(Unanswered::TimedOut),
        }
        let mut replies = Replies::with_capacity(round.len());
        for (key, request) in round {
            let reply = match request {
                Request::Form { message, schema } => {
                    crate::tools::inquire::form(&ScopePerson(self), skill, &message, &schema).await
                }
                Request::Sampling(sampling) => match self.nesting {
                    Some(nesting) => {
                        let sampled = nesting.runner.sample(&sampling, self);
                        let bounded = tokio::time::timeout(self.gate.timeout(), sampled);
                        match self.deadline.paused(bounded).await {
                            Ok(Ok(reply)) => reply,
                            Ok(Err(why)) => Reply::Unavailable { why },
                            Err(_) => return Err(Unanswered::TimedOut),
                        }
                    }
                    None => Reply::Unavailable { why: crate::tools::inquire::NO_SAMPLING.into() },
                },
                Request::Roots => Reply::Unavailable { why: crate::tools::inquire::NO_ROOTS.into() },
            };
            replies.push((key, reply));
        }
        Ok(replies)
    }

    fn checkpoint(&self, id: &str) -> Option<String> {
        let checkpoint = self.durable?.question_checkpoint(id)?;
        serde_json::to_string(&checkpoint).ok()
    }

    fn opened(&self, id: &str) -> Option<String> {
        let checkpoint = self.durable?.opened(id)?;
        serde_json::to_string(&checkpoint).ok()
    }

    /// The adapter's person, bounded by `human.timeout_seconds`; the wait is not charged to
    /// the turn's time budget.
    async fn ask(&self, question: Question) -> Answer {
        let timeout = self.gate.timeout();
        let answer = match self.counterpart.desk() {
            Some(desk) => {
                let put = super::desk::Question {
                    prompt: &question.prompt,
                    choices: &question.choices,
                    schema: None,
                    timeout,
                    checkpoint: None,
                    opened: None,
                };
                match self.deadline.paused(super::desk::question(&desk, self.counterpart, put)).await {
                    crate::broker::Outcome::Answered(answer) => Answer::Answered(answer),
                    crate::broker::Outcome::TimedOut => Answer::TimedOut,
                    _ => Answer::Cancelled,
                }
            }
            None => {
                let asked = tokio::time::timeout(timeout, self.counterpart.ask(question, timeout));
                self.deadline.paused(asked).await.unwrap_or(Answer::TimedOut)
            }
        };
        crate::metrics::question(match &answer {
            Answer::Answered(_) => "answered",
            Answer::Cancelled => "cancelled",
            Answer::TimedOut => "timed_out",
            Answer::Unavailable(_) => "unavailable",
        });
        answer
    }

    async fn nested(&self, turn: NestedTurn) -> Result<String, String> {
        match self.nesting {
            Some(nesting) => nesting.runner.run_nested(turn, self, nesting.chain).await,
            None => Err(crate::tools::NO_NESTED_TURN.into()),
        }
    }
}

/// A call's result with what the model should know of how it ran: the source's note on its
/// prepared arguments, and the arguments a person changed it to.
fn annotated(outcome: ToolOutcome, prepared: &Option<Prepared>, decision: &Verdict) -> ToolOutcome {
    let outcome = match prepared {
        Some(prepared) => prepared.annotate(outcome),
        None => outcome,
    };
    match decision.edited() {
        Some(edited) => outcome.with_field(EDITED, json!({"arguments": edited, "note": EDITED_NOTE})),
        None => outcome,
    }
}

fn deadline_error(started: Instant) -> ToolOutcome {
    let error = json!({"error": "the turn's time budget ran out before the tool finished", "kind": "turn_deadline"});
    ToolOutcome::error(&error, started.elapsed())
}

/// A round's person, as a skill's form asks them ([`CallScope::ask`]).
struct ScopePerson<'a, 'b>(&'a Round<'b>);

#[async_trait::async_trait]
impl Person for ScopePerson<'_, '_> {
    async fn ask(&self, question: Question) -> Answer {
        CallScope::ask(self.0, question).await
    }
}
