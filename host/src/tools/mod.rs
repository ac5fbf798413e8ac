//! The tools layer: the vocabulary every kind of tool shares and the one [`ToolSource`] trait
//! they all implement, below the engine.
//!
//! A tool source offers declarations and answers calls by prefixed name. The engine holds a
//! [`Tools`] list of sources and knows none of them by name: skill tools (sandboxed
//! components and the native built-ins alike, [`SkillTools`]), skills' script tools
//! ([`ScriptTools`]: SKILL.md `tools:` run as WASI commands), MCP server tools and their
//! skill aliases ([`McpTools`]), and the tools an adapter answers itself (the API stream's
//! `human__ask`). A new kind of tool is a new implementation, not a branch in the engine.
//!
//! # Layout
//! - [`outcome`]: [`ToolOutcome`], what a call produced, and generic emptiness.
//! - [`level`]: the approval [`Level`] and the [`PromotionKey`] approvals count against.
//! - [`target`]: the checked `tool-target` answer.
//! - [`coverage`]: coverage entries and the turn's public summary.
//! - [`skill`]: [`SkillTools`], the tools of loaded skills.
//! - [`script`]: [`ScriptTools`], the script tools of loaded skills.
//! - [`mcp`]: [`McpTools`], the tools of MCP servers, through their owners' hooks.
//! - [`declared`]: [`DeclaredTools`], the tools declared in config (`skills.declared`).
//! - [`load_skill`]: [`LoadSkill`], the built-in `load_skill` of on-demand `SKILL.md` skills,
//!   one per turn, which withholds their tools until they are loaded.
//! - [`remote_skills`]: [`RemoteSkills`], the skills MCP servers serve
//!   (`mcp_servers.<name>.skills`), listed each turn, verified when they load.
//! - [`joining`]: [`Joining`], the tools of on-demand skills that join while a turn runs.
//! - [`sub_agent`]: [`SubAgents`], the `<skill>__run` tool of each `sub_agent` SKILL.md skill,
//!   a nested turn ([`CallScope::nested`]) that withholds the skill's own tools from the outer
//!   model.
//! - [`temporal`]: `engine.temporal_guardrails`, the normalisation of MCP tools' time
//!   arguments ([`ToolSource::prepare`]).

pub mod coverage;
pub mod declared;
pub mod inquire;
pub mod joining;
pub mod level;
pub mod load_skill;
pub mod mcp;
pub mod outcome;
pub mod remote_skills;
pub mod script;
pub mod skill;
pub mod sub_agent;
pub mod target;
pub mod temporal;

pub use coverage::CoverageEntry;
pub use declared::DeclaredTools;
pub use joining::Joining;
pub use level::{CONFIRMATION_CHALLENGE, Level, PromotionKey};
pub use load_skill::{LOAD_SKILL, LoadSkill, OnDemand};
pub use mcp::McpTools;
pub use outcome::{ToolOutcome, generically_empty};
pub use remote_skills::RemoteSkills;
pub use script::ScriptTools;
pub use skill::SkillTools;
pub use sub_agent::SubAgents;
pub use target::ToolTarget;

use crate::llm::ToolDecl;
use crate::person::{Answer, Question, Replies, Round, Unanswered};
use crate::sandbox::CallContext;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

/// One call, as a source receives it.
#[derive(Debug, Clone, Copy)]
pub struct ToolCall<'a> {
    /// The model's (or client's) call id.
    pub id: &'a str,
    /// The prefixed name.
    pub name: &'a str,
    /// The arguments.
    pub input: &'a Value,
    /// Who is calling.
    pub ctx: &'a CallContext,
}

/// What a source knows of one of its tools without running anything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolInfo {
    /// The tool can attach coverage observations: a call of it that does not run still
    /// counts, as unverified.
    pub declares_coverage: bool,
    /// Its skill asks for a fact check of answers that used it (`VERIFY`).
    pub verify: bool,
    /// Another name `human.overrides` may use for it (an alias's direct `<server>__<tool>`).
    pub override_alias: Option<String>,
    /// The skill's own auto-promotion threshold (`skills.config.<skill>.approval_auto_promote`).
    pub promotion_threshold: Option<u32>,
    /// A person answers it (an adapter's question tool): no approval, no tool events, and
    /// the time it waits is not charged to the turn.
    pub answered_by_person: bool,
    /// Its call runs a nested turn (a delegation, a sub-agent skill), which may wait on a
    /// person while it runs.
    pub nests: bool,
}

/// A call's arguments as they will run, when the source's operator policy rewrote the
/// model's (`engine.temporal_guardrails` for MCP tools).
#[derive(Debug, Clone, PartialEq)]
pub struct Prepared {
    /// The arguments the budget, the approval and the call itself see.
    pub input: Value,
    /// What the model is told about the rewrite, added to the result of a call that ran.
    pub note: Option<(&'static str, Value)>,
}

impl Prepared {
    /// `outcome` with the note added (results of calls that ran), unless the source already
    /// put a later one there (arguments a policy corrected were normalised again).
    pub fn annotate(&self, outcome: ToolOutcome) -> ToolOutcome {
        match &self.note {
            Some((field, note)) if !outcome.has_field(field) => outcome.with_field(field, note.clone()),
            _ => outcome,
        }
    }
}

/// What the engine offers a source while one of its calls runs: the checks a retried call
/// must pass again (the MCP prerequisite retry), and the person's time limit.
#[async_trait::async_trait]
pub trait CallScope: Send + Sync {
    /// Admits a further call of `name` with `input` made on behalf of `original` (same id):
    /// the tool budget and, when its level now needs a person that the original call did
    /// not already settle, the approval. `Err` is the refusal as the model is told it, with
    /// the kind a first call would have been refused with (`denied`, `approval_timeout`,
    /// the budget's).
    async fn admit_again(&self, original: ToolCall<'_>, input: &Value) -> Result<(), ToolOutcome>;

    /// How long a person has to answer (`human.timeout_seconds`).
    fn person_timeout(&self) -> Duration;

    /// Asks the person the adapter running the call can reach (an MCP server's elicitation),
    /// within `human.timeout_seconds`; nobody by default.
    async fn ask(&self, question: Question) -> Answer {
        let _ = question;
        Answer::Unavailable("nobody can be asked here".into())
    }

    /// Answers a round `skill` asks mid-call (its `ask` import): by whoever drives the call
    /// (an MCP client takes it as it is; a person is asked each form; a turn's model
    /// samples), bounded by `human.timeout_seconds`, the wait not charged to the turn's
    /// time. Nobody by default: every request unavailable.
    async fn inquire(&self, skill: &str, round: Round) -> Result<Replies, Unanswered> {
        let _ = skill;
        Ok(crate::person::unavailable(&round, "nobody can be asked here"))
    }

    /// The turn written down (as JSON) with call `id` waiting on a person's answer, when
    /// the turn can be resumed elsewhere from there (a chat turn on a shared store whose
    /// round is that one question): the adapter keeps it with the question. `None` by
    /// default.
    fn checkpoint(&self, id: &str) -> Option<String> {
        let _ = id;
        None
    }

    /// Call `id`'s question was written down with [`CallScope::checkpoint`]: the turn as it
    /// is now, to write again when calls beside the question ended meanwhile (from now on,
    /// each call that ends writes it again). `None` when there is nothing newer.
    fn opened(&self, id: &str) -> Option<String> {
        let _ = id;
        None
    }

    /// Waits until the skill called `skill`, still compiling when the turn began, has joined
    /// the agent (an on-demand skill `load_skill` names), bounded by
    /// `engine.session.skills_wait_seconds`: its tools then, offered to the turn from its
    /// next step on. `Err`: why it did not join. Only turns load skills.
    async fn join_skill(&self, skill: &str) -> Result<Vec<String>, String> {
        let _ = skill;
        Err("skills load only within a turn".into())
    }

    /// Runs a nested turn for the call (a delegation to another agent, a sub-agent skill)
    /// within the call's deadline, its approvals put to the call's person: the nested turn's
    /// answer, or why it did not run (a loop, too deep, no such agent). Only turns can nest.
    async fn nested(&self, turn: NestedTurn) -> Result<String, String> {
        let _ = turn;
        Err(NO_NESTED_TURN.into())
    }
}

/// Why a call outside a turn cannot start a nested turn.
pub const NO_NESTED_TURN: &str = "a nested turn needs a conversation with a model; this call runs outside one";

/// A nested turn a tool asks for ([`CallScope::nested`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NestedTurn {
    /// Who answers.
    pub target: NestedTarget,
    /// The task, as the nested turn's message.
    pub task: String,
    /// The id of the call that runs it.
    pub call_id: String,
}

/// Who answers a nested turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NestedTarget {
    /// Another agent of this process, by its key in `agents`, with its own prompt, skills
    /// and approval policy.
    Agent(String),
    /// A `sub_agent` SKILL.md skill of the same agent: its body as the only system prompt,
    /// only its own tools.
    Skill(String),
}

/// A scope with no budget and nobody to ask: every retry needing a person is refused.
pub struct NoScope;

#[async_trait::async_trait]
impl CallScope for NoScope {
    async fn admit_again(&self, _original: ToolCall<'_>, _input: &Value) -> Result<(), ToolOutcome> {
        Ok(())
    }

    fn person_timeout(&self) -> Duration {
        Duration::ZERO
    }
}

/// A kind of tool. Every method takes the prefixed name, as the model sees it.
///
/// The engine calls [`ToolSource::info`] to find the source of a call, then
/// [`ToolSource::prepare`], [`ToolSource::check`] and [`ToolSource::level`] before approvals, then
/// [`ToolSource::target`], [`ToolSource::execute`] and [`ToolSource::is_empty`] for calls
/// that run. Sources must be cheap to query: `decls` and `info` run on every round.
#[async_trait::async_trait]
pub trait ToolSource: Send + Sync {
    /// The tools offered now (a server that went down takes its tools with it).
    fn decls(&self) -> Vec<ToolDecl>;

    /// What kind of tool `name` is, for metrics and traces (`component`, `native`, `script`,
    /// `mcp`, `declared`, ...).
    fn kind(&self, _name: &str) -> &'static str {
        "other"
    }

    /// What the source knows of `name`; `None` when `name` is not one of its tools now.
    fn info(&self, name: &str) -> Option<ToolInfo>;

    /// The arguments the call will run with, first thing after the model's are parsed:
    /// `Ok(None)` keeps them; `Err` is the error result the model gets instead (the call
    /// does not run and nobody is asked about it).
    fn prepare(&self, _name: &str, _input: &Value) -> Result<Option<Prepared>, ToolOutcome> {
        Ok(None)
    }

    /// Whether the call can run at all (its input fits the schema). A call that cannot is
    /// answered with the error at once, without asking anybody about it.
    fn check(&self, _name: &str, _input: &Value) -> Result<(), ToolOutcome> {
        Ok(())
    }

    /// The level the tool's own policy asks for this call (the skill's `resolve-human`,
    /// else its static level), before the operator's `human.overrides`. A policy that
    /// cannot answer must fail closed (`Approve`).
    async fn level(&self, call: ToolCall<'_>) -> Level;

    /// What approvals of the call count against for auto-promotion; `None`: never promoted.
    fn promotion_key(&self, name: &str, _input: &Value) -> Option<PromotionKey> {
        Some(PromotionKey::tool(name))
    }

    /// The checked `tool-target` answer for a call about to run; `None` never fails it.
    async fn target(&self, _call: ToolCall<'_>) -> Option<ToolTarget> {
        None
    }

    /// Runs the call. Never fails: every problem is an error outcome the model can read.
    /// Dropping the future must stop the work (deadlines and cancellation rely on it).
    async fn execute(&self, call: ToolCall<'_>, scope: &dyn CallScope) -> ToolOutcome;

    /// Whether a successful outcome is empty; errors never are.
    async fn is_empty(&self, _call: ToolCall<'_>, outcome: &ToolOutcome) -> bool {
        !outcome.is_error && outcome.is_empty.unwrap_or_else(|| generically_empty(&outcome.content))
    }

    /// A new round of calls starts on `channel` (per-batch de-duplication resets).
    fn begin_round(&self, _channel: &str) {}

    /// Whether this source keeps `name` from the model for now although a later source
    /// offers it (an on-demand skill's tools before the skill is loaded): [`Tools::decls`]
    /// leaves it out, and this source must answer its calls (`info` and `check`).
    fn withholds(&self, _name: &str) -> bool {
        false
    }
}

/// The sources one agent offers, in precedence order: the first source that knows a name
/// answers its calls.
#[derive(Clone, Default)]
pub struct Tools {
    sources: Vec<Arc<dyn ToolSource>>,
}

impl Tools {
    /// The sources, in precedence order.
    pub fn new(sources: Vec<Arc<dyn ToolSource>>) -> Self {
        Tools { sources }
    }

    /// The same sources with `first` in front (an adapter's per-turn tools).
    pub fn with_first(&self, first: Arc<dyn ToolSource>) -> Self {
        let mut sources = Vec::with_capacity(self.sources.len() + 1);
        sources.push(first);
        sources.extend(self.sources.iter().cloned());
        Tools { sources }
    }

    /// The same sources with `last` behind them (tools no other source offers).
    pub fn with_last(&self, last: Arc<dyn ToolSource>) -> Self {
        let mut sources = self.sources.clone();
        sources.push(last);
        Tools { sources }
    }

    /// Every tool offered, each name once (an earlier source hides a later one's namesake),
    /// without the names a source withholds.
    pub fn decls(&self) -> Vec<ToolDecl> {
        let mut seen = std::collections::HashSet::new();
        let all = self.sources.iter().flat_map(|s| s.decls());
        let withheld = |name: &str| self.sources.iter().any(|s| s.withholds(name));
        all.filter(|d| seen.insert(d.name.clone()) && !withheld(&d.name)).collect()
    }

    /// The source of `name` and what it says of it.
    pub fn find(&self, name: &str) -> Option<(&dyn ToolSource, ToolInfo)> {
        self.sources.iter().find_map(|s| s.info(name).map(|info| (&**s, info)))
    }

    /// Only the tools of the skill called `skill` (`<skill>__<tool>`), from every source
    /// (a sub-agent skill's nested turn).
    pub fn only_skill(&self, skill: &str) -> Self {
        let prefix = format!("{skill}__");
        let only = |source: &Arc<dyn ToolSource>| -> Arc<dyn ToolSource> {
            Arc::new(Only { inner: source.clone(), prefix: prefix.clone() })
        };
        Tools { sources: self.sources.iter().map(only).collect() }
    }

    /// Tells every source a round starts on `channel`.
    pub fn begin_round(&self, channel: &str) {
        for source in &self.sources {
            source.begin_round(channel);
        }
    }
}

/// The error outcome of a call no source knows.
pub fn unknown_tool(name: &str) -> ToolOutcome {
    let json = serde_json::json!({"error": format!("unknown tool `{name}`"), "kind": "unknown_tool"});
    ToolOutcome::error(&json, Duration::ZERO)
}

/// A source with only the names under `prefix` ([`Tools::only_skill`]).
struct Only {
    inner: Arc<dyn ToolSource>,
    prefix: String,
}

#[async_trait::async_trait]
impl ToolSource for Only {
    fn decls(&self) -> Vec<ToolDecl> {
        self.inner.decls().into_iter().filter(|d| d.name.starts_with(&self.prefix)).collect()
    }

    fn info(&self, name: &str) -> Option<ToolInfo> {
        name.starts_with(&self.prefix).then(|| self.inner.info(name)).flatten()
    }

    fn kind(&self, name: &str) -> &'static str {
        self.inner.kind(name)
    }

    fn prepare(&self, name: &str, input: &Value) -> Result<Option<Prepared>, ToolOutcome> {
        self.inner.prepare(name, input)
    }

    fn check(&self, name: &str, input: &Value) -> Result<(), ToolOutcome> {
        self.inner.check(name, input)
    }

    async fn level(&self, call: ToolCall<'_>) -> Level {
        self.inner.level(call).await
    }

    fn promotion_key(&self, name: &str, input: &Value) -> Option<PromotionKey> {
        self.inner.promotion_key(name, input)
    }

    async fn target(&self, call: ToolCall<'_>) -> Option<ToolTarget> {
        self.inner.target(call).await
    }

    async fn execute(&self, call: ToolCall<'_>, scope: &dyn CallScope) -> ToolOutcome {
        self.inner.execute(call, scope).await
    }

    async fn is_empty(&self, call: ToolCall<'_>, outcome: &ToolOutcome) -> bool {
        self.inner.is_empty(call, outcome).await
    }

    fn begin_round(&self, channel: &str) {
        self.inner.begin_round(channel);
    }
}
