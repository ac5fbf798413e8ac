//! The tools of loaded skills (sandboxed components and native built-ins alike), by
//! prefixed `skill__tool` name, with every way a call can fail turned into a result the model
//! can read.

use super::coverage::{self, CoverageEntry};
use super::{CallScope, Level, PromotionKey, ToolCall, ToolInfo, ToolOutcome, ToolSource, ToolTarget};
use crate::llm::ToolDecl;
use crate::skills::content::model_text;
use crate::skills::contract::{Content, Human};
use crate::skills::{Skill, SkillSet, ToolError, ToolSpec};
use serde_json::Value;
use std::sync::Arc;
use std::time::Instant;

/// The skill config key of a skill's own auto-promotion threshold.
pub const PROMOTION_THRESHOLD_KEY: &str = "approval_auto_promote";

/// The runnable skills' tools.
#[derive(Clone)]
pub struct SkillTools {
    skills: Arc<SkillSet>,
}

impl SkillTools {
    /// The tools of `skills`.
    pub fn new(skills: Arc<SkillSet>) -> Self {
        SkillTools { skills }
    }

    /// The skills behind these tools.
    pub fn skills(&self) -> &Arc<SkillSet> {
        &self.skills
    }

    fn find(&self, name: &str) -> Option<(&Arc<Skill>, &ToolSpec)> {
        self.skills.find_tool(name).filter(|(skill, _)| skill.is_runnable())
    }
}

/// A skill's own threshold, when its config block sets one.
pub fn promotion_threshold(skill: &Skill) -> Option<u32> {
    skill.config.get(PROMOTION_THRESHOLD_KEY)?.as_u64().map(|n| u32::try_from(n).unwrap_or(u32::MAX))
}

/// The level a tool's static `human` key gives; `None` for `dynamic`.
pub fn static_level(human: Human) -> Option<Level> {
    match human {
        Human::None => Some(Level::Auto),
        Human::Approve => Some(Level::Approve),
        Human::Confirm => Some(Level::Confirm),
        Human::Dynamic => None,
    }
}

/// The level of a call by `skill`'s policy: its `resolve-human` takes precedence over the
/// static key when it exports one (spec); a hook that fails, or a `dynamic` tool with no hook
/// to ask, needs approval: failing closed is the only safe reading of "ask the skill".
pub async fn skill_level(skill: &Skill, tool: &str, human: Human, input: &Value, call: &ToolCall<'_>) -> Level {
    match skill.resolve_human(tool, input, call.ctx).await {
        Some(Ok(answer)) => answer.map_or(Level::Auto, Level::from),
        Some(Err(e)) => {
            tracing::warn!(tool = %call.name, kind = e.kind(), "resolve-human failed; asking for approval");
            Level::Approve
        }
        None => static_level(human).unwrap_or(Level::Approve),
    }
}

#[async_trait::async_trait]
impl ToolSource for SkillTools {
    fn decls(&self) -> Vec<ToolDecl> {
        let runnable = self.skills.skills.values().filter(|s| s.is_runnable());
        runnable
            .flat_map(|skill| skill.tools.iter())
            .map(|t| ToolDecl {
                name: t.full_name.clone(),
                description: t.description.clone(),
                input_schema: crate::llm::Schema::from_parts(t.schema.clone(), t.schema_json.clone()),
            })
            .collect()
    }

    fn kind(&self, name: &str) -> &'static str {
        self.find(name).map_or("component", |(skill, _)| skill.kind())
    }

    fn info(&self, name: &str) -> Option<ToolInfo> {
        let (skill, tool) = self.find(name)?;
        Some(ToolInfo {
            declares_coverage: tool.declares_coverage,
            verify: skill.facts.verify,
            promotion_threshold: promotion_threshold(skill),
            ..ToolInfo::default()
        })
    }

    fn check(&self, name: &str, input: &Value) -> Result<(), ToolOutcome> {
        let Some((_, tool)) = self.find(name) else { return Ok(()) };
        tool.validate(input).map_err(|problems| {
            let error = ToolError::InvalidInput { tool: tool.full_name.clone(), problems };
            ToolOutcome::error(&error.to_model_json(), std::time::Duration::ZERO)
        })
    }

    async fn level(&self, call: ToolCall<'_>) -> Level {
        match self.find(call.name) {
            Some((skill, tool)) if skill.preapproved.contains(&tool.name) => Level::Auto,
            Some((skill, tool)) => skill_level(skill, &tool.name, tool.human, call.input, &call).await,
            None => Level::Approve,
        }
    }

    fn promotion_key(&self, name: &str, input: &Value) -> Option<PromotionKey> {
        let (skill, tool) = self.find(name)?;
        Some(PromotionKey { tool: name.to_owned(), subject: skill.promotion_subject(&tool.name, input) })
    }

    async fn target(&self, call: ToolCall<'_>) -> Option<ToolTarget> {
        let (skill, tool) = self.find(call.name)?;
        match skill.tool_target(&tool.name, call.input, call.ctx).await? {
            Ok(answer) => answer.and_then(|t| ToolTarget::checked(t.target, t.query_kind)),
            Err(e) => {
                tracing::warn!(tool = %call.name, kind = e.kind(), "tool-target failed; no target");
                None
            }
        }
    }

    /// The call, its `ask` rounds answered by `scope` meanwhile.
    async fn execute(&self, call: ToolCall<'_>, scope: &dyn CallScope) -> ToolOutcome {
        let started = Instant::now();
        let Some((skill, tool)) = self.find(call.name) else {
            return ToolOutcome::error(
                &ToolError::UnknownTool(call.name.to_owned()).to_model_json(),
                started.elapsed(),
            );
        };
        let (inquirer, inquiries) = crate::sandbox::Inquirer::pair();
        let ctx = crate::sandbox::CallContext { inquirer: Some(inquirer), ..call.ctx.clone() };
        let run = skill.call(&tool.name, call.input, &ctx);
        let called = inquiries.answering(run, |round| scope.inquire(&skill.name, round)).await;
        match called {
            Ok(outcome) => {
                // The sandbox's figures, on the call's span (`execute_tool`) when traced.
                let span = tracing::Span::current();
                span.record("skillhost.sandbox.fuel_used", outcome.fuel_used);
                span.record("skillhost.sandbox.wall_ms", outcome.elapsed.as_millis() as u64);
                span.record("skillhost.sandbox.memory_bytes", outcome.memory_bytes);
                let result = outcome.value;
                let coverage = result.coverage.as_ref().map(|c| match coverage::observe(c) {
                    Some(observation) => CoverageEntry::Verified(observation),
                    None => CoverageEntry::Unverified,
                });
                let (content, blocks) = typed(result.content, result.blocks);
                ToolOutcome {
                    is_error: result.succeeded == Some(false),
                    content,
                    duration: started.elapsed(),
                    succeeded: result.succeeded,
                    error_kind: None,
                    is_empty: result.is_empty,
                    coverage,
                    blocks,
                }
            }
            Err(e @ ToolError::Call(crate::sandbox::CallError::Suspended)) => {
                ToolOutcome::error(&e.to_model_json(), started.elapsed())
            }
            Err(e) => {
                tracing::warn!(tool = %call.name, kind = e.kind(), "tool call failed");
                tracing::debug!(tool = %call.name, "tool call failed: {e}");
                ToolOutcome::error(&e.to_model_json(), started.elapsed())
            }
        }
    }

    /// The skill's `tool-result-empty` answer, else the handler's flag, else generic emptiness.
    async fn is_empty(&self, call: ToolCall<'_>, outcome: &ToolOutcome) -> bool {
        if outcome.is_error {
            return false;
        }
        if let Some((skill, tool)) = self.find(call.name) {
            match skill.tool_result_empty(&tool.name, &outcome.content, call.ctx).await {
                Some(Ok(Some(answer))) => return answer,
                Some(Err(e)) => {
                    tracing::warn!(tool = %call.name, kind = e.kind(), "tool-result-empty failed; falling back")
                }
                _ => {}
            }
        }
        outcome.is_empty.unwrap_or_else(|| super::generically_empty(&outcome.content))
    }
}

/// The model's text and the client's blocks of a result: without typed blocks, the text
/// alone; with them, the text and their renderings for the model, and the text (when not
/// empty) then the blocks for the client.
fn typed(content: String, blocks: Vec<Content>) -> (String, Vec<Content>) {
    if blocks.is_empty() {
        return (content, blocks);
    }
    let text = model_text(&content, &blocks);
    let lead = (!content.is_empty()).then_some(Content::Text(content));
    (text, lead.into_iter().chain(blocks).collect())
}
