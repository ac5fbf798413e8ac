//! Routes the model's tool calls, by prefixed `skill__tool` name, to the loaded skills, and
//! turns every way a call can fail into a result the model can read.

use crate::llm::ToolDecl;
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
}

impl ToolOutcome {
    /// An error result built from a structured JSON value (`{"error", "kind", ...}`).
    pub fn error(json: &Value, duration: Duration) -> Self {
        let kind = json.get("kind").and_then(Value::as_str).map(str::to_owned);
        ToolOutcome { content: json.to_string(), is_error: true, duration, succeeded: None, error_kind: kind }
    }
}

/// The tools of a [`SkillSet`], as the model sees them and as calls reach them.
#[derive(Clone)]
pub struct ToolRouter {
    skills: Arc<SkillSet>,
}

impl ToolRouter {
    /// A router over `skills`.
    pub fn new(skills: Arc<SkillSet>) -> Self {
        ToolRouter { skills }
    }

    /// The skills routed to.
    pub fn skills(&self) -> &SkillSet {
        &self.skills
    }

    /// Every tool of every skill that has a runtime, by skill name then in the skill's order.
    pub fn decls(&self) -> Vec<ToolDecl> {
        let runnable = self.skills.skills.values().filter(|s| s.runtime.is_some());
        runnable
            .flat_map(|skill| skill.tools.iter())
            .map(|t| ToolDecl { name: t.full_name.clone(), description: t.description.clone(), input_schema: t.schema.clone() })
            .collect()
    }

    /// Runs the tool `name` (prefixed) with `input`. Never fails: every problem becomes an
    /// error result, because the model must receive an answer for every call it made.
    pub async fn execute(&self, name: &str, input: &Value, ctx: &CallContext) -> ToolOutcome {
        let started = Instant::now();
        let Some((skill, tool)) = self.skills.find_tool(name) else {
            return ToolOutcome::error(&ToolError::UnknownTool(name.to_owned()).to_model_json(), started.elapsed());
        };
        match skill.call(&tool.name, input, ctx).await {
            Ok(outcome) => {
                let result = outcome.value;
                ToolOutcome {
                    is_error: result.succeeded == Some(false),
                    content: result.content,
                    duration: started.elapsed(),
                    succeeded: result.succeeded,
                    error_kind: None,
                }
            }
            Err(e) => {
                tracing::warn!(tool = %name, "tool call failed: {e}");
                ToolOutcome::error(&e.to_model_json(), started.elapsed())
            }
        }
    }
}
