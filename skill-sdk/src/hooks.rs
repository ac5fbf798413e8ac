//! Optional hooks. Implement a trait on your skill type and name the hook in
//! [`export!`](crate::export); hooks you do not name are not exported, and the host then
//! uses its default behaviour.
//!
//! | trait | name in `export!` | the host calls it |
//! | --- | --- | --- |
//! | [`ResolveHuman`] | `resolve_human` | before each call of every tool of the skill (and of MCP tools it owns) |
//! | [`IsAvailable`] | `is_available` | once at load, before registering the skill |
//! | [`Startup`] | `startup` | once when the engine starts |
//! | [`Scheduled`] | `scheduled` | every `[schedule] every` while `skillhost run` serves |
//! | [`BeforeMcpCall`] | `before_mcp_call` | before each call to an MCP server the skill owns |
//! | [`ObserveMcpResult`] | `observe_mcp_result` | after each successful call to an owned server |
//! | [`ToolResultEmpty`] | `tool_result_empty` | to tell stream consumers whether a result is empty |
//! | [`ToolTarget`] | `tool_target` | to tell stream consumers which entity a call queries |
//!
//! Like handlers, hooks run in a fresh instance per call, under the same limits.

use crate::{Context, Error, Value};

/// The approval one call needs, as [`ResolveHuman`] answers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HumanLevel {
    /// Pause until a person approves or denies the call.
    Approve,
    /// Pause until a person types the confirmation challenge.
    Confirm,
}

/// Decides at call time whether a call needs a person. Once exported, it is asked for every
/// tool of the skill, whatever the tool's static level (`Approve` tools included): answer for
/// each. Without the hook, a [`Dynamic`](crate::Approval::Dynamic) tool needs approval.
pub trait ResolveHuman {
    /// `None` runs the call without asking, even for a tool declared `Approve` or `Confirm`;
    /// otherwise the level it needs. Takes precedence over the tool's static level; a hook
    /// that fails asks for approval; the operator's `human.overrides` have the last word.
    /// Input that is not JSON never reaches this hook: the SDK answers
    /// [`HumanLevel::Approve`] for it.
    fn resolve_human(name: &str, input: Value, ctx: &Context) -> Option<HumanLevel>;
}

/// Whether the skill can run at all here.
///
/// ```
/// # use skill_sdk::{IsAvailable, Value};
/// struct Search;
/// impl IsAvailable for Search {
///     fn is_available(config: Value) -> bool {
///         config["endpoint"].is_string() && std::env::var("SEARCH_API_KEY").is_ok_and(|k| !k.trim().is_empty())
///     }
/// }
/// ```
pub trait IsAvailable {
    /// Called once at load with the skill's config block (`{}` when absent). `false`
    /// excludes the skill (and removes a skill of the same name from a lower-priority path).
    /// Keep it quick and free of side effects.
    ///
    /// Credentials are environment variables (`std::env::var`): the guest's environment
    /// holds exactly those the skill's `skill.toml` names (`[capabilities] env`) and the
    /// operator grants (`skills.grants.<skill>.env`), in this hook and in every other call.
    fn is_available(config: Value) -> bool;
}

/// One-time setup when the engine starts serving.
pub trait Startup {
    /// Receives the skill's config block (`{}` when absent); granted environment variables
    /// are readable as in [`IsAvailable`]. An `Err` stops the host from starting, with the
    /// error's message: use it to fail fast on missing configuration.
    fn startup(config: Value) -> Result<(), Error>;
}

/// Work on a schedule: the sandboxed form of a polling loop started in `startup`. Runs every
/// `[schedule] every` of the skill's `skill.toml` (never more often than the operator's
/// `skills.schedule_minimum`) while `skillhost run` serves, on a fresh instance under the
/// skill's limits, never two runs at once. To tell people what a run found, send it with
/// [`notify::send`](crate::notify::send).
///
/// ```ignore
/// struct Watch;
/// impl skill_sdk::Scheduled for Watch {
///     fn scheduled(config: Value) -> Result<(), Error> {
///         if let Some(alert) = check(&config)? {
///             skill_sdk::notify::wake("slack:C0ALERTS", &alert)?;
///         }
///         Ok(())
///     }
/// }
/// skill_sdk::export!(Watch, hooks: [scheduled]);
/// ```
pub trait Scheduled {
    /// Receives the skill's config block (`{}` when absent). An `Err` (like a trap or the
    /// deadline) is logged and counted by the host; the next run comes as usual.
    fn scheduled(config: Value) -> Result<(), Error>;
}

/// The owning skill's policy for calls to the MCP servers it lists in
/// [`SkillInfo::mcp_servers`](crate::SkillInfo::mcp_servers).
pub trait BeforeMcpCall {
    /// Called with the prepared arguments of each direct MCP call or alias. Arguments that
    /// are not JSON never reach this hook: the SDK denies such calls.
    fn before_mcp_call(server: &str, tool: &str, arguments: Value, ctx: &Context) -> Preflight;
}

/// Augments successful results of owned MCP servers.
pub trait ObserveMcpResult {
    /// `Some(text)` replaces what the model reads; `None` keeps `output`. Bounded at 30 s.
    fn observe_mcp_result(server: &str, tool: &str, arguments: Value, output: &str, ctx: &Context) -> Option<String>;
}

/// Whether a successful result is empty, for API stream consumers.
pub trait ToolResultEmpty {
    /// `None` falls back to [`ToolResult::empty`](crate::ToolResult::empty), then to
    /// generic emptiness (`""`, `[]`, `{}`, `null`). `tool_name` is unprefixed.
    fn tool_result_empty(tool_name: &str, raw_result: &str) -> Option<bool>;
}

/// Which entity, and what kind of data, a call queries, for API stream consumers.
pub trait ToolTarget {
    /// Receives a copy of the input that will run. `None` emits no target.
    fn tool_target(tool_name: &str, tool_input: Value) -> Option<Target>;
}

/// The answer of [`ToolTarget`]. The host drops (does not truncate) a `target` outside 1 to
/// 128 characters and a `query_kind` outside 1 to 32 characters of `[a-z_]`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Target {
    /// The entity queried.
    pub target: Option<String>,
    /// The kind of data, such as `logs`.
    pub query_kind: Option<String>,
}

impl Target {
    /// A target with both facts.
    pub fn new(target: impl Into<String>, query_kind: impl Into<String>) -> Self {
        Target { target: Some(target.into()), query_kind: Some(query_kind.into()) }
    }
}

/// What the owning skill decides about an MCP call before it is sent.
///
/// ```
/// # use skill_sdk::{json, Preflight};
/// let go = Preflight::proceed();
/// let fixed = Preflight::proceed().with_arguments(json!({ "limit": 100 }));
/// let no = Preflight::deny("Query one service at a time.");
/// let first = Preflight::prerequisite("list_sources", json!({}), "Could not list sources.");
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Preflight {
    pub(crate) kind: PreflightKind,
    pub(crate) corrected_arguments: Option<Value>,
    pub(crate) correction: Option<String>,
    pub(crate) context: Option<Value>,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum PreflightKind {
    Proceed,
    Deny,
    Prerequisite { tool: String, arguments: Value },
}

impl Preflight {
    fn of(kind: PreflightKind) -> Self {
        Preflight { kind, corrected_arguments: None, correction: None, context: None }
    }

    /// Send the call.
    pub fn proceed() -> Self {
        Self::of(PreflightKind::Proceed)
    }

    /// Refuse the call; the model receives `correction`.
    pub fn deny(correction: impl Into<String>) -> Self {
        Self::of(PreflightKind::Deny).with_correction(correction)
    }

    /// Run `tool` (a read-only tool of the same server, listed in
    /// [`SkillInfo::mcp_prerequisites`](crate::SkillInfo::mcp_prerequisites)) with the JSON
    /// object `arguments` first; on success the host retries the call once, on failure the
    /// model receives `correction`.
    pub fn prerequisite(tool: impl Into<String>, arguments: Value, correction: impl Into<String>) -> Self {
        Self::of(PreflightKind::Prerequisite { tool: tool.into(), arguments }).with_correction(correction)
    }

    /// Replaces the call's arguments completely with the JSON object `arguments`.
    pub fn with_arguments(mut self, arguments: Value) -> Self {
        self.corrected_arguments = Some(arguments);
        self
    }

    /// Sets the message for the model explaining a denial or what to change.
    pub fn with_correction(mut self, correction: impl Into<String>) -> Self {
        self.correction = Some(correction.into());
        self
    }

    /// Adds safe policy metadata (a JSON object) that the model sees.
    pub fn with_context(mut self, context: Value) -> Self {
        self.context = Some(context);
        self
    }
}
