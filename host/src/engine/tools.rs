//! Routes the model's tool calls, by prefixed `skill__tool` name, to the loaded skills, and
//! turns every way a call can fail into a result the model can read.

use super::coverage::{self, CoverageEntry};
use super::events::ToolTarget;
use super::tool_budget::TurnBudget;
use crate::llm::ToolDecl;
use crate::mcp::McpTools;
use crate::sandbox::CallContext;
use crate::skills::{SkillSet, ToolError};
use serde_json::Value;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What one tool call produced, ready to become a `tool_result` block.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutcome {
    /// The text the model reads: the guest's content, or a structured error as JSON.
    pub content: String,
    /// Whether the call failed (a host-side error or the guest's `succeeded: false`).
    pub is_error: bool,
    /// Wall-clock time of the call.
    pub duration: Duration,
    /// The guest's own `succeeded` flag; `None` when it did not say or the call never ran.
    pub succeeded: Option<bool>,
    /// The machine-readable cause when the host failed the call (`unknown_tool`, `trap`, ...).
    pub error_kind: Option<String>,
    /// The guest's own `is-empty` flag.
    pub is_empty: Option<bool>,
    /// The guest's coverage declaration: verified when valid, unverified when not; `None`
    /// when it attached none.
    pub coverage: Option<CoverageEntry>,
}

impl ToolOutcome {
    /// An error result built from a structured JSON value (`{"error", "kind", ...}`).
    pub fn error(json: &Value, duration: Duration) -> Self {
        let kind = json.get("kind").and_then(Value::as_str).map(str::to_owned);
        ToolOutcome {
            content: json.to_string(),
            is_error: true,
            duration,
            succeeded: None,
            error_kind: kind,
            is_empty: None,
            coverage: None,
        }
    }

    /// A successful plain result (adapter tools).
    pub fn text(content: String, duration: Duration) -> Self {
        ToolOutcome {
            content,
            is_error: false,
            duration,
            succeeded: None,
            error_kind: None,
            is_empty: None,
            coverage: None,
        }
    }
}

/// The tools of a [`SkillSet`], as the model sees them and as calls reach them.
#[derive(Clone)]
pub struct ToolRouter {
    skills: Arc<SkillSet>,
    /// The MCP servers' tools, when any are in use (see [`crate::mcp`]).
    mcp: Option<Arc<McpTools>>,
}

impl ToolRouter {
    /// A router over `skills`.
    pub fn new(skills: Arc<SkillSet>) -> Self {
        ToolRouter { skills, mcp: None }
    }

    /// Also routes to the tools of MCP servers; skill tools win a name clash.
    pub fn with_mcp(mut self, mcp: Arc<McpTools>) -> Self {
        self.mcp = Some(mcp);
        self
    }

    /// The skill whose policy governs calls of `name`: its own skill for a native tool, the
    /// owning skill (or the alias's) for an MCP tool; `None` when none does.
    pub fn policy_skill(&self, name: &str) -> Option<&Arc<crate::skills::Skill>> {
        match self.skills.find_tool(name) {
            Some((skill, _)) => Some(skill),
            None => self.mcp_tool(name)?.policy_skill(name),
        }
    }

    /// The MCP tools, when `name` is one of them (and no skill tool).
    pub fn mcp_tool(&self, name: &str) -> Option<&McpTools> {
        let mcp = self.mcp.as_deref()?;
        (self.skills.find_tool(name).is_none() && mcp.resolve(name).is_some()).then_some(mcp)
    }

    /// The level of an MCP tool's call (see [`McpTools::level`]); `None` for other tools.
    pub async fn mcp_level(&self, name: &str, input: &Value, ctx: &CallContext) -> Option<super::approval::Level> {
        self.mcp_tool(name)?.level(name, input, ctx).await
    }

    /// Starts a round of calls on `channel` (MCP prerequisites are de-duplicated per round).
    pub fn begin_batch(&self, channel: &str) {
        if let Some(mcp) = &self.mcp {
            mcp.begin_batch(channel);
        }
    }

    /// The skills routed to.
    pub fn skills(&self) -> &SkillSet {
        &self.skills
    }

    /// Every tool of every runnable skill, by skill name then in the skill's order.
    pub fn decls(&self) -> Vec<ToolDecl> {
        let runnable = self.skills.skills.values().filter(|s| s.is_runnable());
        runnable
            .flat_map(|skill| skill.tools.iter())
            .map(|t| ToolDecl {
                name: t.full_name.clone(),
                description: t.description.clone(),
                input_schema: t.schema.clone(),
            })
            .chain(self.mcp.iter().flat_map(|mcp| mcp.decls()))
            .collect()
    }

    /// Runs the tool `name` (prefixed) with `input`. Never fails: every problem becomes an
    /// error result, because the model must receive an answer for every call it made.
    pub async fn execute(&self, name: &str, input: &Value, ctx: &CallContext) -> ToolOutcome {
        self.execute_in_turn(name, input, ctx, None).await
    }

    /// [`Self::execute`] within a turn: an MCP call retried after its prerequisite is
    /// admitted by the turn's tool budget again.
    pub async fn execute_in_turn(
        &self,
        name: &str,
        input: &Value,
        ctx: &CallContext,
        budget: Option<&TurnBudget>,
    ) -> ToolOutcome {
        let started = Instant::now();
        if let Some(mcp) = self.mcp_tool(name) {
            return mcp.execute(name, input, ctx, budget).await;
        }
        let Some((skill, tool)) = self.skills.find_tool(name) else {
            return ToolOutcome::error(&ToolError::UnknownTool(name.to_owned()).to_model_json(), started.elapsed());
        };
        match skill.call(&tool.name, input, ctx).await {
            Ok(outcome) => {
                let result = outcome.value;
                let coverage = result.coverage.as_ref().map(|c| match coverage::observe(c) {
                    Some(observation) => CoverageEntry::Verified(observation),
                    None => CoverageEntry::Unverified,
                });
                ToolOutcome {
                    is_error: result.succeeded == Some(false),
                    content: result.content,
                    duration: started.elapsed(),
                    succeeded: result.succeeded,
                    error_kind: None,
                    is_empty: result.is_empty,
                    coverage,
                }
            }
            Err(e) => {
                tracing::warn!(tool = %name, "tool call failed: {e}");
                ToolOutcome::error(&e.to_model_json(), started.elapsed())
            }
        }
    }
}

impl ToolRouter {
    /// The skill's `tool-target` answer for a call, checked; `None` when the skill has no
    /// such hook, it fails (logged) or answers nothing valid. It never fails the call.
    pub async fn target(&self, name: &str, input: &Value) -> Option<ToolTarget> {
        if let Some(mcp) = self.mcp_tool(name) {
            return mcp.target(name, input).await;
        }
        let (skill, tool) = self.skills.find_tool(name)?;
        let (component, env) = skill.runtime.as_ref()?;
        match component.tool_target(env, &tool.name, &input.to_string()).await? {
            Ok(outcome) => outcome.value.and_then(|t| ToolTarget::checked(t.target, t.query_kind)),
            Err(e) => {
                tracing::warn!(tool = %name, "tool-target failed: {e}");
                None
            }
        }
    }

    /// Whether a call's result is empty: the skill's `tool-result-empty` answer, else the
    /// handler's flag, else generic emptiness (`""`, `[]`, `{}`, `null`). Errors are not empty.
    pub async fn is_empty(&self, name: &str, outcome: &ToolOutcome) -> bool {
        if outcome.is_error {
            return false;
        }
        if let Some(mcp) = self.mcp_tool(name) {
            return mcp.is_empty(name, outcome).await;
        }
        if let Some(answer) = self.result_empty_hook(name, &outcome.content).await {
            return answer;
        }
        outcome.is_empty.unwrap_or_else(|| generically_empty(&outcome.content))
    }

    async fn result_empty_hook(&self, name: &str, content: &str) -> Option<bool> {
        let (skill, tool) = self.skills.find_tool(name)?;
        let (component, env) = skill.runtime.as_ref()?;
        match component.tool_result_empty(env, &tool.name, content).await? {
            Ok(outcome) => outcome.value,
            Err(e) => {
                tracing::warn!(tool = %name, "tool-result-empty failed: {e}");
                None
            }
        }
    }
}

/// `""`, `[]`, `{}` or `null` (as text or JSON), ignoring surrounding whitespace.
pub fn generically_empty(content: &str) -> bool {
    let trimmed = content.trim();
    trimmed.is_empty()
        || match serde_json::from_str::<Value>(trimmed) {
            Ok(Value::Null) => true,
            Ok(Value::String(s)) => s.is_empty(),
            Ok(Value::Array(a)) => a.is_empty(),
            Ok(Value::Object(o)) => o.is_empty(),
            _ => false,
        }
}

#[cfg(test)]
mod tests {
    #[test]
    fn generic_emptiness() {
        for empty in ["", "  ", "[]", "{}", "null", "\"\"", " [ ] "] {
            assert!(super::generically_empty(empty), "{empty:?}");
        }
        for full in ["0", "false", "[1]", "{\"a\":1}", "text"] {
            assert!(!super::generically_empty(full), "{full:?}");
        }
    }
}
