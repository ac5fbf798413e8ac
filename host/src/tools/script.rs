//! The script tools of loaded skills (SKILL.md `tools:`, Mode C), by prefixed `skill__tool`
//! name: WASI command components run in the sandbox with the skill's folder read-only.
//!
//! Script tools are destructive (they run arbitrary code), so their level is always
//! `approve`; only the operator's `human.overrides` lowers it (the gate applies it), and
//! approvals count toward auto-promotion like any approve-level tool's.

use super::skill::promotion_threshold;
use super::{CallScope, Level, ToolCall, ToolInfo, ToolOutcome, ToolSource};
use crate::llm::ToolDecl;
use crate::skills::skill::split_exposed;
use crate::skills::{ScriptError, ScriptTool, Skill, SkillSet, ToolError};
use serde_json::Value;
use std::sync::Arc;
use std::time::Instant;

/// Every loaded skill's script tools.
#[derive(Clone)]
pub struct ScriptTools {
    skills: Arc<SkillSet>,
}

impl ScriptTools {
    /// The script tools of `skills`.
    pub fn new(skills: Arc<SkillSet>) -> Self {
        ScriptTools { skills }
    }

    fn find(&self, name: &str) -> Option<(&Arc<Skill>, &ScriptTool)> {
        let (skill, tool) = split_exposed(name)?;
        let skill = self.skills.skills.get(skill)?;
        Some((skill, skill.script(tool)?))
    }
}

#[async_trait::async_trait]
impl ToolSource for ScriptTools {
    fn decls(&self) -> Vec<ToolDecl> {
        let scripts = self.skills.skills.values().flat_map(|skill| skill.scripts.iter());
        scripts
            .map(|s| ToolDecl {
                name: s.spec.full_name.clone(),
                description: s.spec.description.clone(),
                input_schema: crate::llm::Schema::from_parts(s.spec.schema.clone(), s.spec.schema_json.clone()),
            })
            .collect()
    }

    fn kind(&self, _name: &str) -> &'static str {
        "script"
    }

    fn info(&self, name: &str) -> Option<ToolInfo> {
        let (skill, _) = self.find(name)?;
        Some(ToolInfo { promotion_threshold: promotion_threshold(skill), ..ToolInfo::default() })
    }

    fn check(&self, name: &str, input: &Value) -> Result<(), ToolOutcome> {
        let Some((_, script)) = self.find(name) else { return Ok(()) };
        script.spec.validate(input).map_err(|problems| {
            let error = ScriptError::InvalidInput { tool: script.spec.full_name.clone(), problems };
            ToolOutcome::error(&error.to_model_json(), std::time::Duration::ZERO)
        })
    }

    async fn level(&self, call: ToolCall<'_>) -> Level {
        match self.find(call.name) {
            Some((skill, script)) if skill.preapproved.contains(&script.spec.name) => Level::Auto,
            _ => Level::Approve,
        }
    }

    async fn execute(&self, call: ToolCall<'_>, _scope: &dyn CallScope) -> ToolOutcome {
        let started = Instant::now();
        let Some((skill, script)) = self.find(call.name) else {
            let error = ToolError::UnknownTool(call.name.to_owned());
            return ToolOutcome::error(&error.to_model_json(), started.elapsed());
        };
        match script.run(&skill.dir, call.input).await {
            Ok(outcome) => ToolOutcome::text(outcome.value, started.elapsed()),
            Err(e) => {
                tracing::warn!(tool = %call.name, kind = e.kind(), "script tool failed");
                ToolOutcome::error(&e.to_model_json(), started.elapsed())
            }
        }
    }
}
