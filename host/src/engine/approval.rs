//! Which approval a call needs: the tool's static level, then `resolve-human` for `dynamic`
//! tools, then the operator's `human.overrides` as the final word.

use crate::config::OverrideLevel;
use crate::sandbox::CallContext;
use crate::sandbox::bindings::types::{Approval, HumanLevel};
use crate::skills::{Skill, ToolSpec};
use std::collections::BTreeMap;

/// The approval a call needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// Run without asking.
    Auto,
    /// Ask for approve/deny.
    Approve,
    /// Ask for the confirmation challenge.
    Confirm,
}

impl Level {
    /// The spec's name of the level (`none` for auto).
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Auto => "none",
            Level::Approve => "approve",
            Level::Confirm => "confirm",
        }
    }
}

/// The challenge a person types to confirm a `confirm`-level call.
pub const CONFIRMATION_CHALLENGE: &str = "CONFIRM";

/// Resolves the level of one call of `tool` with `input`.
///
/// A `dynamic` tool whose skill lacks `resolve-human`, or whose hook fails, needs approval:
/// failing closed is the only safe reading of "ask the skill" when the skill cannot answer.
pub async fn resolve(
    skill: &Skill,
    tool: &ToolSpec,
    input: &serde_json::Value,
    caller: &CallContext,
    overrides: &BTreeMap<String, Option<OverrideLevel>>,
) -> Level {
    if let Some(level) = overrides.get(&tool.full_name) {
        return match level {
            None => Level::Auto,
            Some(OverrideLevel::Approve) => Level::Approve,
            Some(OverrideLevel::Confirm) => Level::Confirm,
        };
    }
    match tool.approval {
        Approval::None => Level::Auto,
        Approval::Approve => Level::Approve,
        Approval::Confirm => Level::Confirm,
        Approval::Dynamic => dynamic(skill, tool, input, caller).await,
    }
}

async fn dynamic(skill: &Skill, tool: &ToolSpec, input: &serde_json::Value, caller: &CallContext) -> Level {
    if let Some(native) = &skill.native {
        return match native.resolve_human(&tool.name, input) {
            None => Level::Auto,
            Some(HumanLevel::Approve) => Level::Approve,
            Some(HumanLevel::Confirm) => Level::Confirm,
        };
    }
    let Some((component, env)) = &skill.runtime else { return Level::Approve };
    let ctx = CallContext { config: skill.config.clone(), ..caller.clone() };
    match component.resolve_human(env, &tool.name, &input.to_string(), &ctx).await {
        Some(Ok(outcome)) => match outcome.value {
            None => Level::Auto,
            Some(HumanLevel::Approve) => Level::Approve,
            Some(HumanLevel::Confirm) => Level::Confirm,
        },
        Some(Err(e)) => {
            tracing::warn!(tool = %tool.full_name, "resolve-human failed ({e}); asking for approval");
            Level::Approve
        }
        None => Level::Approve,
    }
}
