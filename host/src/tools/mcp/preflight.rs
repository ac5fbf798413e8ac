//! The owning skill's policy before an MCP call (`before-mcp-call`), its prerequisite reads
//! (checked against the skill's `mcp-prerequisites` and the server's offered tools, run once
//! per batch), and the one retry after them.

use super::{McpCall, McpTools, refused, with_field};
use crate::mcp::client::result_text;
use crate::sandbox::CallContext;
use crate::skills::contract::PreflightKind;
use crate::tools::temporal::NOTE_FIELD;
use crate::tools::{CallScope, ToolCall, ToolOutcome};
use serde_json::{Map, Value};
use std::time::Instant;

/// What the policy decided, parsed.
pub(super) enum Ruling {
    /// Send the call with these arguments.
    Proceed { arguments: Map<String, Value>, context: Option<Value> },
    /// Refuse it; the model reads `correction`.
    Deny { correction: String, context: Option<Value> },
    /// Read `tool` first; on success retry with `retry`.
    Prerequisite {
        tool: String,
        arguments: Map<String, Value>,
        retry: Map<String, Value>,
        correction: String,
        context: Option<Value>,
    },
}

impl McpTools {
    /// The owner's decision on a call: proceed when the server has no owner or the owner no
    /// hook; deny when the hook fails (a policy that cannot answer fails closed).
    pub(super) async fn preflight(&self, call: &McpCall, arguments: &Map<String, Value>, ctx: &CallContext) -> Ruling {
        let proceed = Ruling::Proceed { arguments: arguments.clone(), context: None };
        let Some(skill) = self.owner(&call.server) else { return proceed };
        let args = Value::Object(arguments.clone()).to_string();
        let decision = match skill.before_mcp_call(&call.server, &call.tool, &args, ctx).await {
            None => return proceed,
            Some(Ok(decision)) => decision,
            Some(Err(e)) => {
                tracing::warn!(server = %call.server, tool = %call.tool, kind = e.kind(), "before-mcp-call failed; the call is refused");
                tracing::debug!(server = %call.server, tool = %call.tool, "before-mcp-call failed: {e}");
                let correction = format!("the policy of skill `{}` could not check this call", skill.name);
                return Ruling::Deny { correction, context: None };
            }
        };
        let context =
            decision.context.as_deref().and_then(|c| serde_json::from_str::<Value>(c).ok()).filter(Value::is_object);
        let corrected = match decision.corrected_arguments.as_deref().map(serde_json::from_str::<Value>) {
            None => None,
            Some(Ok(Value::Object(map))) => Some(map),
            Some(_) => {
                let correction = format!(
                    "the policy of skill `{}` returned corrected arguments that are not a JSON object",
                    skill.name
                );
                return Ruling::Deny { correction, context };
            }
        };
        let correction =
            decision.correction.unwrap_or_else(|| format!("the policy of skill `{}` refused this call", skill.name));
        match decision.kind {
            PreflightKind::Proceed => {
                Ruling::Proceed { arguments: corrected.unwrap_or_else(|| arguments.clone()), context }
            }
            PreflightKind::Deny => Ruling::Deny { correction, context },
            PreflightKind::Prerequisite { tool, arguments: pre } => match serde_json::from_str::<Value>(&pre) {
                Ok(Value::Object(pre)) => {
                    let retry = corrected.unwrap_or_else(|| arguments.clone());
                    Ruling::Prerequisite { tool, arguments: pre, retry, correction, context }
                }
                _ => Ruling::Deny { correction, context },
            },
        }
    }

    /// A prerequisite must be listed in the owner's `mcp-prerequisites` and offered by the
    /// same server.
    pub(super) fn check_prerequisite(&self, call: &McpCall, tool: &str) -> Result<(), String> {
        let owner = self.owner(&call.server).ok_or("the server has no owning skill")?;
        if !owner.facts.mcp_prerequisites.iter().any(|p| p == tool) {
            return Err(format!("`{tool}` is not in the mcp-prerequisites of skill `{}`", owner.name));
        }
        self.manager
            .tool(&call.server, tool)
            .map(|_| ())
            .ok_or_else(|| format!("`{tool}` is not offered by server `{}`", call.server))
    }

    /// Runs a prerequisite read once per batch for the same server, tool and arguments (as
    /// the policy gave them: normalised inside, so reads a second apart still share).
    pub(super) async fn prerequisite(
        &self,
        channel: &str,
        server: &str,
        tool: &str,
        arguments: Map<String, Value>,
    ) -> Result<String, String> {
        let key = format!("{server}\u{0}{tool}\u{0}{}", Value::Object(arguments.clone()));
        let cell = {
            let mut batches = self.batches.lock();
            batches.entry(channel.to_owned()).or_default().entry(key).or_default().clone()
        };
        cell.get_or_init(|| async {
            let arguments = self.guard_prerequisite(server, tool, arguments)?;
            self.slack.check(server, tool, &arguments).await.map_err(|refused| refused.to_string())?;
            let result = self.manager.call(server, tool, arguments).await?;
            let text = result_text(&result);
            if result.is_error == Some(true) { Err(text) } else { Ok(text) }
        })
        .await
        .clone()
    }

    /// Runs a call whose prerequisite succeeded: the retry passes the temporal guardrails,
    /// the owner's policy, the approval and the tool budget again (through `scope`). `Err`
    /// is a refusal (the new correction, or the budget's or the person's answer), and no
    /// second prerequisite runs.
    pub(super) async fn retry(
        &self,
        call: &McpCall,
        original: ToolCall<'_>,
        retry: Map<String, Value>,
        scope: &dyn CallScope,
        started: Instant,
    ) -> Result<ToolOutcome, ToolOutcome> {
        let refuse = |why: &str| Err(refused(why, "mcp_retry_refused", None, started));
        let (retry, first_note) = match self.guard(original.name, call, retry) {
            Ok(guarded) => guarded,
            Err(why) => return refuse(&why),
        };
        let retry = match self.preflight(call, &retry, original.ctx).await {
            Ruling::Proceed { arguments, .. } => arguments,
            Ruling::Deny { correction, context } | Ruling::Prerequisite { correction, context, .. } => {
                return Err(refused(&correction, "mcp_retry_refused", context, started));
            }
        };
        // The policy may have corrected the arguments again.
        let (retry, note) = match self.guard(original.name, call, retry) {
            Ok((retry, note)) => (retry, note.or(first_note)),
            Err(why) => return refuse(&why),
        };
        scope.admit_again(original, &Value::Object(retry.clone())).await?;
        Ok(with_field(self.dispatch(call, retry, original.ctx).await, NOTE_FIELD, note))
    }
}
