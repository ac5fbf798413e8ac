//! The tools of skills that join while a turn runs: on-demand skills still compiling when
//! the turn began (the turn did not wait for them), offered once they are there and loaded.
//!
//! A turn keeps the tools it began with; [`Joining`] looks at the agent's tools as they are
//! now for the names of the skills it stands for, so a skill that `load_skill` waited for is
//! callable from the turn's next step on.

use super::{CallScope, Level, PromotionKey, ToolCall, ToolInfo, ToolOutcome, ToolSource, ToolTarget, Tools};
use crate::llm::ToolDecl;
use crate::skills::skill::split_exposed;
use serde_json::Value;
use std::sync::Arc;

/// The tools of `skills` as the agent offers them now.
pub struct Joining {
    now: Arc<dyn Fn() -> Tools + Send + Sync>,
    skills: Vec<String>,
}

impl Joining {
    /// A source for the tools of `skills`, found in what `now` returns at each question.
    pub fn new(now: Arc<dyn Fn() -> Tools + Send + Sync>, skills: Vec<String>) -> Self {
        Joining { now, skills }
    }

    fn covers(&self, name: &str) -> bool {
        split_exposed(name).is_some_and(|(skill, _)| self.skills.iter().any(|s| s == skill))
    }

    /// The agent's tools now, if `name` is one this source stands for.
    fn current(&self, name: &str) -> Option<Tools> {
        self.covers(name).then(|| (self.now)())
    }
}

#[async_trait::async_trait]
impl ToolSource for Joining {
    fn decls(&self) -> Vec<ToolDecl> {
        (self.now)().decls().into_iter().filter(|d| self.covers(&d.name)).collect()
    }

    fn kind(&self, name: &str) -> &'static str {
        self.current(name).and_then(|tools| tools.find(name).map(|(s, _)| s.kind(name))).unwrap_or("other")
    }

    fn info(&self, name: &str) -> Option<ToolInfo> {
        self.current(name)?.find(name).map(|(_, info)| info)
    }

    fn prepare(&self, name: &str, input: &Value) -> Result<Option<super::Prepared>, ToolOutcome> {
        match self.current(name) {
            Some(tools) => tools.find(name).map_or(Ok(None), |(s, _)| s.prepare(name, input)),
            None => Ok(None),
        }
    }

    fn check(&self, name: &str, input: &Value) -> Result<(), ToolOutcome> {
        match self.current(name) {
            Some(tools) => tools.find(name).map_or(Err(super::unknown_tool(name)), |(s, _)| s.check(name, input)),
            None => Err(super::unknown_tool(name)),
        }
    }

    async fn level(&self, call: ToolCall<'_>) -> Level {
        let Some(tools) = self.current(call.name) else { return Level::Approve };
        match tools.find(call.name) {
            Some((source, _)) => source.level(call).await,
            None => Level::Approve, // gone since: fail closed
        }
    }

    fn promotion_key(&self, name: &str, input: &Value) -> Option<PromotionKey> {
        self.current(name)?.find(name).and_then(|(s, _)| s.promotion_key(name, input))
    }

    async fn target(&self, call: ToolCall<'_>) -> Option<ToolTarget> {
        let tools = self.current(call.name)?;
        let (source, _) = tools.find(call.name)?;
        source.target(call).await
    }

    async fn execute(&self, call: ToolCall<'_>, scope: &dyn CallScope) -> ToolOutcome {
        let Some(tools) = self.current(call.name) else { return super::unknown_tool(call.name) };
        match tools.find(call.name) {
            Some((source, _)) => source.execute(call, scope).await,
            None => super::unknown_tool(call.name),
        }
    }

    async fn is_empty(&self, call: ToolCall<'_>, outcome: &ToolOutcome) -> bool {
        match self.current(call.name) {
            Some(tools) => match tools.find(call.name) {
                Some((source, _)) => source.is_empty(call, outcome).await,
                None => false,
            },
            None => false,
        }
    }

    fn begin_round(&self, channel: &str) {
        (self.now)().begin_round(channel);
    }
}
