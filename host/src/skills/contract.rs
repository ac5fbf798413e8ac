//! The skill contract in the host's own types: what a skill's exports answer, free of the
//! WIT-generated bindings. The bindings stay in `sandbox/` and in this module's conversions,
//! so the layers above (tools, engine, adapters) and the native built-ins never see them.

pub use super::content::{Content, ToolHints};
use crate::sandbox::bindings::types as wit;

/// A tool's static `human` key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Human {
    /// Runs without asking.
    None,
    /// Needs approve/deny.
    Approve,
    /// Needs the typed confirmation.
    Confirm,
    /// The skill decides per call (`resolve-human`).
    Dynamic,
}

impl Human {
    /// The spec's name of the level.
    pub fn as_str(self) -> &'static str {
        match self {
            Human::None => "none",
            Human::Approve => "approve",
            Human::Confirm => "confirm",
            Human::Dynamic => "dynamic",
        }
    }
}

/// What `resolve-human` may ask for; its `None` answer means "run without asking".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asked {
    /// Approve/deny.
    Approve,
    /// The typed confirmation.
    Confirm,
}

/// A tool as a skill defines it, before the host checks it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolDef {
    /// Unprefixed name.
    pub name: String,
    /// Shown to the model.
    pub description: String,
    /// The input JSON Schema, as text.
    pub input_schema: String,
    /// The static approval level.
    pub human: Human,
    /// Include explicit successes in synchronous API responses.
    pub expose_result: bool,
    /// The tool can attach coverage observations.
    pub declares_coverage: bool,
    /// The JSON Schema of its structured result, as text; `None` when not declared.
    pub output_schema: Option<String>,
    /// Hints about its behaviour (MCP annotations).
    pub hints: ToolHints,
}

/// Whether a search covered everything asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CoverageStatus {
    /// All of it.
    Complete,
    /// Part of it.
    Partial,
}

/// Whether the searched scope held data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResultState {
    /// Data was found.
    Data,
    /// Nothing was found.
    Empty,
}

/// A coverage declaration as a tool (or an MCP server's `_meta`) gives it, unchecked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Coverage {
    /// What was searched.
    pub subject: Option<String>,
    /// The scope asked for.
    pub attempted_scope: Option<String>,
    /// The scope searched.
    pub covered_scope: Option<String>,
    /// Complete or partial.
    pub status: CoverageStatus,
    /// Data or empty.
    pub result_state: ResultState,
}

/// What a tool call returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolResult {
    /// The text the model reads.
    pub content: String,
    /// The skill's own verdict; `None` when it did not say.
    pub succeeded: Option<bool>,
    /// The skill's own emptiness flag.
    pub is_empty: Option<bool>,
    /// Its coverage declaration.
    pub coverage: Option<Coverage>,
    /// Typed content after `content` (empty for a text-only result).
    pub blocks: Vec<Content>,
}

impl ToolResult {
    /// A failed result the model reads.
    pub fn failure(content: String) -> Self {
        ToolResult { content, succeeded: Some(false), is_empty: None, coverage: None, blocks: Vec::new() }
    }
}

/// What `before-mcp-call` decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PreflightKind {
    /// Send the call.
    Proceed,
    /// Refuse it.
    Deny,
    /// Read `tool` with `arguments` (JSON text) first, then retry.
    Prerequisite {
        /// The read-only tool, on the same server.
        tool: String,
        /// Its arguments, as JSON text.
        arguments: String,
    },
}

/// A `before-mcp-call` answer, unparsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Preflight {
    /// The decision.
    pub kind: PreflightKind,
    /// A complete replacement of the arguments, as JSON text.
    pub corrected_arguments: Option<String>,
    /// What the model reads when the call is refused.
    pub correction: Option<String>,
    /// Model-visible policy context, as JSON text.
    pub context: Option<String>,
}

/// A `tool-target` answer, unchecked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Target {
    /// The entity queried.
    pub target: Option<String>,
    /// The kind of data.
    pub query_kind: Option<String>,
}

impl From<wit::Approval> for Human {
    fn from(a: wit::Approval) -> Self {
        match a {
            wit::Approval::None => Human::None,
            wit::Approval::Approve => Human::Approve,
            wit::Approval::Confirm => Human::Confirm,
            wit::Approval::Dynamic => Human::Dynamic,
        }
    }
}

impl From<wit::HumanLevel> for Asked {
    fn from(l: wit::HumanLevel) -> Self {
        match l {
            wit::HumanLevel::Approve => Asked::Approve,
            wit::HumanLevel::Confirm => Asked::Confirm,
        }
    }
}

impl From<wit::ToolDef> for ToolDef {
    fn from(d: wit::ToolDef) -> Self {
        ToolDef {
            name: d.name,
            description: d.description,
            input_schema: d.input_schema,
            human: d.approval.into(),
            expose_result: d.expose_result,
            declares_coverage: d.declares_coverage,
            output_schema: d.output_schema,
            hints: d.hints.into(),
        }
    }
}

impl From<wit::Coverage> for Coverage {
    fn from(c: wit::Coverage) -> Self {
        Coverage {
            subject: c.subject,
            attempted_scope: c.attempted_scope,
            covered_scope: c.covered_scope,
            status: match c.status {
                wit::CoverageStatus::Complete => CoverageStatus::Complete,
                wit::CoverageStatus::Partial => CoverageStatus::Partial,
            },
            result_state: match c.result_state {
                wit::ResultState::Data => ResultState::Data,
                wit::ResultState::Empty => ResultState::Empty,
            },
        }
    }
}

impl From<wit::ToolResult> for ToolResult {
    fn from(r: wit::ToolResult) -> Self {
        ToolResult {
            content: r.content,
            succeeded: r.succeeded,
            is_empty: r.is_empty,
            coverage: r.coverage.map(Into::into),
            blocks: r.blocks.into_iter().map(Into::into).collect(),
        }
    }
}

/// What `handle` returned, its blocks replaced by those the call set (the `blocks` import).
impl From<crate::sandbox::Handled> for ToolResult {
    fn from((result, blocks): crate::sandbox::Handled) -> Self {
        let mut result = ToolResult::from(result);
        if let Some(blocks) = blocks {
            result.blocks = blocks.into_iter().map(Into::into).collect();
        }
        result
    }
}

impl From<wit::PreflightDecision> for Preflight {
    fn from(d: wit::PreflightDecision) -> Self {
        let kind = match d.kind {
            wit::PreflightKind::Proceed => PreflightKind::Proceed,
            wit::PreflightKind::Deny => PreflightKind::Deny,
            wit::PreflightKind::Prerequisite(p) => PreflightKind::Prerequisite { tool: p.tool, arguments: p.arguments },
        };
        Preflight { kind, corrected_arguments: d.corrected_arguments, correction: d.correction, context: d.context }
    }
}

impl From<wit::Target> for Target {
    fn from(t: wit::Target) -> Self {
        Target { target: t.target, query_kind: t.query_kind }
    }
}
