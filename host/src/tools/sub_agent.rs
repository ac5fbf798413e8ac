//! `sub_agent` SKILL.md skills (`skills.loading: sub_agent`, or per skill in
//! `skills.loading_overrides`), the SKILL.md format's own mode: the skill is one tool,
//! `<skill>__run {task}`, described by its frontmatter's `description`. A call is a nested
//! turn ([`CallScope::nested`]) whose only system prompt is the skill's body, with only the
//! skill's own tools, under the outer turn's deadline, approvals and tool budget; its answer
//! is the result. The skill's own tools are withheld from the outer model (a call of one is
//! refused, pointing at `<skill>__run`).
//!
//! Only turns have it (the engine adds it to each turn, as `load_skill`): `skillhost call`
//! and MCP serving offer the skill's tools directly, as they do an on-demand skill's.

use super::{CallScope, Level, NestedTarget, NestedTurn, PromotionKey, ToolCall, ToolInfo, ToolOutcome, ToolSource};
use crate::config::Loading;
use crate::llm::{Schema, ToolDecl};
use crate::skills::SkillSet;
use crate::skills::skill::split_exposed;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// The tool of a sub-agent skill: `<skill>__run`.
pub const RUN: &str = "run";

/// The sub-agent skills of one agent: name -> description.
#[derive(Debug, Clone, Default)]
pub struct SubAgents {
    skills: BTreeMap<String, String>,
}

impl SubAgents {
    /// The `SKILL.md` skills of `set` whose `loading_of` is `sub_agent`.
    pub fn new(set: &SkillSet, loading_of: impl Fn(&str) -> Loading) -> Self {
        let sub_agents =
            set.skills.values().filter(|s| s.prompt.file == "SKILL.md" && loading_of(&s.name) == Loading::SubAgent);
        SubAgents { skills: sub_agents.map(|s| (s.name.clone(), s.prompt.description.clone())).collect() }
    }

    /// Whether no skill runs as a sub-agent.
    pub fn is_empty(&self) -> bool {
        self.skills.is_empty()
    }

    /// Whether the skill called `name` runs as a sub-agent (its body is not injected).
    pub fn contains(&self, name: &str) -> bool {
        self.skills.contains_key(name)
    }

    /// The sub-agent skill `name` belongs to, and whether it is its `run` tool.
    fn owner<'a>(&self, name: &'a str) -> Option<(&'a str, bool)> {
        let (skill, tool) = split_exposed(name)?;
        self.skills.contains_key(skill).then_some((skill, tool == RUN))
    }
}

#[async_trait::async_trait]
impl ToolSource for SubAgents {
    fn decls(&self) -> Vec<ToolDecl> {
        let schema = json!({
            "type": "object",
            "properties": {"task": {"type": "string", "description": "What to do, with everything needed to do it."}},
            "required": ["task"],
            "additionalProperties": false
        });
        self.skills
            .iter()
            .map(|(skill, description)| ToolDecl {
                name: format!("{skill}__{RUN}"),
                description: description.split_whitespace().collect::<Vec<_>>().join(" "),
                input_schema: Schema::new(schema.clone()),
            })
            .collect()
    }

    fn kind(&self, _name: &str) -> &'static str {
        "sub_agent"
    }

    fn info(&self, name: &str) -> Option<ToolInfo> {
        self.owner(name).map(|(_, run)| ToolInfo { nests: run, ..ToolInfo::default() })
    }

    fn check(&self, name: &str, input: &Value) -> Result<(), ToolOutcome> {
        let refuse =
            |message: String| ToolOutcome::error(&json!({"error": message, "kind": "invalid_input"}), Duration::ZERO);
        match self.owner(name) {
            Some((skill, false)) => Err(refuse(format!(
                "`{name}` is a tool of the sub-agent skill `{skill}`: call `{skill}__{RUN}` with the task instead"
            ))),
            Some((_, true)) if !input.get("task").is_some_and(Value::is_string) => {
                Err(refuse(format!("`{name}` takes {{\"task\": \"...\"}}")))
            }
            _ => Ok(()),
        }
    }

    /// The nested turn's own calls are gated one by one; starting it asks nobody.
    async fn level(&self, _call: ToolCall<'_>) -> Level {
        Level::Auto
    }

    fn promotion_key(&self, _name: &str, _input: &Value) -> Option<PromotionKey> {
        None
    }

    async fn execute(&self, call: ToolCall<'_>, scope: &dyn CallScope) -> ToolOutcome {
        let started = Instant::now();
        let Some((skill, true)) = self.owner(call.name) else { return super::unknown_tool(call.name) };
        let task = call.input["task"].as_str().unwrap_or_default().to_owned();
        let turn = NestedTurn { target: NestedTarget::Skill(skill.to_owned()), task, call_id: call.id.to_owned() };
        match scope.nested(turn).await {
            Ok(answer) => ToolOutcome::text(answer, started.elapsed()),
            Err(why) => ToolOutcome::error(&json!({"error": why, "kind": "nested_refused"}), started.elapsed()),
        }
    }

    fn withholds(&self, name: &str) -> bool {
        self.owner(name).is_some_and(|(_, run)| !run)
    }
}
