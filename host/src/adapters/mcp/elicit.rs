//! Approval questions put to an MCP client by [`super::SkillServer`]: the form (a yes/no, or
//! the challenge to type), reading the answer, and the two ways of asking.
//!
//! - Up to 2025-11-25 the server sends `elicitation/create` and waits for the answer.
//! - From 2026-07-28 a server may not send requests to the client: the call is answered with
//!   an `input_required` result carrying the question and an opaque `requestState`; the
//!   client asks its user and retries the call with the answer (multi round-trip requests,
//!   SEP-2322). The approval is an entry of the person broker and the `requestState` a
//!   signed reference to it ([`super::request_state`]), so the retry may reach any replica;
//!   an answer approves only the call it was asked for, once, within the approval timeout.
//!   Up to 2025-11-25 the question is bound to the session that asked (its connection).

use super::request_state::{Claims, Keys, Refused, arguments_hash};
use crate::broker::{DecideError, Decision, Entry, Kind, Who};
use crate::engine::Engine;
use crate::tools::{CONFIRMATION_CHALLENGE, Level};
use rmcp::ErrorData;
use rmcp::model::{
    ElicitRequest, ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationSchema, InputRequest,
    InputRequests, InputRequiredResult, InputResponses, ProtocolVersion,
};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::{Value, json};
use std::time::{SystemTime, UNIX_EPOCH};

/// The key of the approval question in `inputRequests` / `inputResponses`.
const KEY: &str = "approval";
/// The surface MCP approvals record.
pub const SURFACE: &str = "mcp";

/// Whether the client can be asked: it declared form elicitation (at `initialize`, or in this
/// request's `_meta` from 2026-07-28).
pub fn can_elicit(context: &RequestContext<RoleServer>) -> bool {
    let elicitation = context.client_capabilities().and_then(|c| c.elicitation);
    elicitation.is_some_and(|e| e.form.is_some() || e.url.is_none())
}

/// Whether this request is at 2026-07-28 or later, where questions travel as `input_required`.
pub fn inline(context: &RequestContext<RoleServer>) -> bool {
    context.protocol_version().is_some_and(|v| v >= ProtocolVersion::V_2026_07_28)
}

/// The question for a gated call of `name` with `input`.
pub fn question(name: &str, input: &Value, level: Level) -> Result<ElicitRequestParams, serde_json::Error> {
    let (message, schema) = match level {
        Level::Confirm => (
            format!("Run {name} with {input}? Type {CONFIRMATION_CHALLENGE} to confirm."),
            json!({"type": "object", "properties": {"confirmation": {"type": "string", "description": format!("Type {CONFIRMATION_CHALLENGE}")}}, "required": ["confirmation"]}),
        ),
        _ => (
            format!("Approve {name} with {input}?"),
            json!({"type": "object", "properties": {"approve": {"type": "boolean", "description": "Run the tool"}}, "required": ["approve"]}),
        ),
    };
    let Value::Object(schema) = schema else { unreachable!("a literal object") };
    let requested_schema = ElicitationSchema::from_json_schema(schema)?;
    Ok(ElicitRequestParams::FormElicitationParams { meta: None, message, requested_schema })
}

/// Whether `answer` approves a call at `level`.
pub fn approves(answer: &ElicitResult, level: Level) -> bool {
    let content = answer.content.clone().unwrap_or_default();
    answer.action == ElicitationAction::Accept
        && match level {
            Level::Confirm => content["confirmation"].as_str().map(str::trim) == Some(CONFIRMATION_CHALLENGE),
            _ => content["approve"] == Value::Bool(true),
        }
}

/// The `input_required` result that asks the client's user to decide the approval `entry`
/// opened for a call of `name` with `input` at `level`: the question, and a `requestState`
/// signed for that entry, that call, until the approval's deadline.
pub async fn ask(
    keys: &Keys,
    entry: &str,
    (name, input, level): (&str, &Value, Level),
    expires_at: SystemTime,
) -> Result<InputRequiredResult, ErrorData> {
    let unavailable = |e: String| ErrorData::internal_error(format!("the approval cannot be asked: {e}"), None);
    let params = question(name, input, level).map_err(|e| unavailable(format!("elicitation schema: {e}")))?;
    let expires = expires_at.duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let arguments = arguments_hash(input);
    let claims =
        Claims { entry: entry.to_owned(), tool: name.to_owned(), arguments, expires, inquiry: false, approval: None };
    let state = keys.sign(&claims).await.map_err(|e| unavailable(e.to_string()))?;
    let requests = InputRequests::from([(KEY.to_owned(), InputRequest::Elicitation(ElicitRequest::new(params)))]);
    Ok(InputRequiredResult::new(Some(requests), Some(state)))
}

/// A retry carrying the answer to an approval asked through `input_required`: its state
/// verified (this call, unexpired, unaltered) and the answer carried to the broker as the
/// client's decision, on any replica. The approval's entry, which the engine resumes the call
/// with; `None` when the retry carries no answer (the call runs again, and asks again).
pub async fn answered(
    engine: &Engine,
    keys: &Keys,
    (state, responses): (&str, Option<&InputResponses>),
    (name, input): (&str, &Value),
) -> Result<Option<String>, Refused> {
    let claims = keys.verify(state).await?;
    if claims.inquiry || claims.tool != name || claims.arguments != arguments_hash(input) {
        return Err(Refused::OtherCall);
    }
    let Some(responses) = responses else { return Ok(None) };
    let entry = engine.broker().get(&claims.entry, Kind::Approval, client(engine)).await;
    let entry = entry.map_err(|e| Refused::Unavailable(e.to_string()))?.ok_or(Refused::Expired)?;
    let answer = responses.get(KEY).and_then(|a| serde_json::from_value::<ElicitResult>(a.clone()).ok());
    match engine.broker().decide(&claims.entry, client(engine), decision(answer.as_ref(), level_of(&entry))).await {
        // Counted now, or the same answer counted before: the engine holds the approval's
        // use, so a call that completed does not run again.
        Ok(_) => Ok(Some(claims.entry)),
        Err(DecideError::Unavailable(why)) => Err(Refused::Unavailable(why)),
        Err(DecideError::Conflict(_)) => Err(Refused::Answered),
        Err(_) => Err(Refused::Replayed),
    }
}

/// Who decides an MCP entry: the client (its user).
pub const CLIENT: &str = "mcp-client";

/// Who an MCP client is at the broker.
pub fn client(engine: &Engine) -> Who<'_> {
    Who { agent: engine.agent(), surface: Some(SURFACE), user: CLIENT, conversation: None, token: None }
}

/// The client's answer to the approval question as the broker takes it.
pub fn decision(answer: Option<&ElicitResult>, level: Level) -> Decision {
    match (answer.is_some_and(|a| approves(a, level)), level) {
        (true, Level::Confirm) => Decision::Approve(Some(CONFIRMATION_CHALLENGE.to_owned())),
        (true, _) => Decision::Approve(None),
        (false, _) => Decision::Deny(None),
    }
}

/// Why a question other than a call's approval (an MCP server's elicitation during the call)
/// is not put to the MCP client.
#[derive(Debug, thiserror::Error)]
#[error("this adapter cannot ask questions")]
pub struct NotAsked;

/// The level an approval entry was asked at.
pub fn level_of(entry: &Entry) -> Level {
    if entry.challenge.is_some() { Level::Confirm } else { Level::Approve }
}
