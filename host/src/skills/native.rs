//! Skills whose tools run in the host process instead of the sandbox. Only the built-in
//! `shell` is one: spawning processes is exactly what a sandbox exists to prevent, so it is
//! native, gated by approvals instead.

use super::contract::{Asked, ToolDef, ToolResult};
use crate::sandbox::CallContext;
use serde_json::Value;

/// The tools of a native skill. Input has been checked against the tool's schema before
/// [`NativeTools::handle`] runs.
#[async_trait::async_trait]
pub trait NativeTools: Send + Sync {
    /// The tools, as a component's `list-tools` would give them.
    fn tools(&self) -> Vec<ToolDef>;

    /// Runs `tool`. Failures the model should read are `succeeded: Some(false)` results;
    /// dropping the future must stop the work (the turn deadline does that).
    async fn handle(&self, tool: &str, input: &Value, ctx: &CallContext) -> ToolResult;

    /// The level of a call of any of its tools, like a component's `resolve-human` (asked
    /// for every tool, over the static level): `None` runs it without asking.
    fn resolve_human(&self, tool: &str, input: &Value) -> Option<Asked>;

    /// What approvals of this call are counted against for auto-promotion, finer than the
    /// tool (the shell counts per command); `None` counts per tool.
    fn promotion_subject(&self, _tool: &str, _input: &Value) -> Option<String> {
        None
    }
}
