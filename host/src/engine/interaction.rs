//! Tools an adapter adds to one turn, answered by the adapter rather than a skill: the
//! approval-v1 stream's `human__ask`. The engine declares them to the model and routes their
//! calls here before the skill router; they need no approval and emit no tool events (the
//! adapter reports them its own way).

use super::tools::ToolOutcome;
use crate::llm::ToolDecl;
use serde_json::Value;
use std::time::Duration;

/// A call of one of the adapter's tools.
#[derive(Debug, Clone)]
pub struct InteractionCall {
    /// The model's call id.
    pub tool_call_id: String,
    /// The tool's name, as declared.
    pub tool_name: String,
    /// The call's arguments (not validated against the schema: the adapter checks them).
    pub input: Value,
    /// How long a person has to answer (`human.timeout_seconds`).
    pub timeout: Duration,
}

/// The adapter side of per-turn extra tools.
#[async_trait::async_trait]
pub trait Interaction: Send + Sync {
    /// The tools to declare for this turn, in addition to the skills' tools.
    fn tools(&self) -> Vec<ToolDecl>;

    /// Answers one call of a tool from [`Interaction::tools`]. Called from the turn's task;
    /// it may wait for a person, and must itself give up at `call.timeout`. Dropping the
    /// future (the turn was cancelled or ran out of time) must leave nothing waiting.
    async fn call(&self, call: InteractionCall) -> ToolOutcome;

    /// Whether `name` is one of this adapter's tools.
    fn handles(&self, name: &str) -> bool {
        self.tools().iter().any(|t| t.name == name)
    }
}
