//! `engine.temporal_guardrails` on MCP calls: the arguments every guarded call is sent with,
//! however they arose (the model's, a policy's correction, the prerequisite retry, a
//! prerequisite read), are normalised first. Normalising is idempotent, so arguments that
//! already passed (the round prepares them before the approval) come through unchanged.

use super::{McpCall, McpTools, with_field};
use crate::sandbox::CallContext;
use crate::tools::temporal::{self, NOTE_FIELD};
use crate::tools::{Prepared, ToolOutcome};
use serde_json::{Map, Value};

/// Arguments after the guardrails, and the note for the model when they changed.
pub(super) type Guarded = (Map<String, Value>, Option<Value>);

impl McpTools {
    /// Normalises `arguments` of `call` (offered as `name`) when its tool is guarded; `Err`
    /// is what the model reads instead of a result.
    pub(super) fn guard(&self, name: &str, call: &McpCall, arguments: Map<String, Value>) -> Result<Guarded, String> {
        let Some(treatment) = self.guardrails.treatment(name, &call.server, &call.tool) else {
            return Ok((arguments, None));
        };
        match self.guardrails.normalize(treatment, &arguments) {
            Ok(normalized) => Ok((normalized.arguments, normalized.note)),
            Err(e) => Err(temporal::message(name, treatment, &e)),
        }
    }

    /// The prepared form of a call the round is about to budget and approve.
    pub(super) fn prepare_call(&self, name: &str, input: &Value) -> Result<Option<Prepared>, ToolOutcome> {
        let (Some(call), Some(arguments)) = (self.resolve(name), input.as_object()) else { return Ok(None) };
        match self.guard(name, &call, arguments.clone()) {
            Ok((_, None)) => Ok(None),
            Ok((arguments, Some(note))) => {
                Ok(Some(Prepared { input: Value::Object(arguments), note: Some((NOTE_FIELD, note)) }))
            }
            Err(message) => Err(temporal::refusal(&message)),
        }
    }

    /// The arguments of a prerequisite read of `tool` on `server`, normalised as a direct
    /// call of it would be.
    pub(super) fn guard_prerequisite(
        &self,
        server: &str,
        tool: &str,
        arguments: Map<String, Value>,
    ) -> Result<Map<String, Value>, String> {
        let call = McpCall { server: server.to_owned(), tool: tool.to_owned(), alias_of: None };
        let name = format!("{server}{}{tool}", crate::skills::skill::SEPARATOR);
        self.guard(&name, &call, arguments).map(|(arguments, _)| arguments)
    }

    /// Sends arguments a policy returned, through the guardrails again.
    pub(super) async fn send(
        &self,
        name: &str,
        call: &McpCall,
        arguments: Map<String, Value>,
        ctx: &CallContext,
    ) -> ToolOutcome {
        match self.guard(name, call, arguments) {
            Ok((arguments, note)) => with_field(self.dispatch(call, arguments, ctx).await, NOTE_FIELD, note),
            Err(why) => temporal::refusal(&why),
        }
    }
}
