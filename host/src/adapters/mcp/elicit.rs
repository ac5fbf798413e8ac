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
use crate::broker::{DecideError, Decision, Kind, Opening, Scope, Who};
use crate::engine::{ApprovalOutcome, Engine};
use crate::tools::{CONFIRMATION_CHALLENGE, Level};
use rmcp::model::{
    CallToolRequestParams, ElicitRequest, ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationSchema,
    InputRequest, InputRequests, InputRequiredResult, InputResponses, ProtocolVersion,
};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::{Value, json};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The key of the approval question in `inputRequests` / `inputResponses`.
const KEY: &str = "approval";
/// The surface MCP approvals record.
const SURFACE: &str = "mcp";

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

/// One round of an approval asked through `input_required`.
pub enum Round {
    /// Answer the call with this; the client retries with the user's answer.
    Ask(InputRequiredResult),
    /// The answer arrived: the decision the engine's gate receives.
    Decided(ApprovalOutcome),
    /// The retry's `requestState` is not accepted (JSON-RPC -32602, nothing runs).
    Refused(Refused),
}

/// A gated call at 2026-07-28, as the person broker keeps it between rounds.
pub struct Gated<'a> {
    /// The agent's engine (its broker, its state store for the keys).
    pub engine: &'a Engine,
    /// The signing keys.
    pub keys: &'a Keys,
    /// The call.
    pub request: &'a CallToolRequestParams,
    /// Its arguments.
    pub input: &'a Value,
    /// Its level.
    pub level: Level,
}

impl Gated<'_> {
    /// The next round: ask (the approval opened at the broker, its reference signed into
    /// the `requestState`), or count the answer the retry carries, once, on any replica.
    pub async fn round(&self) -> Round {
        match (&self.request.request_state, &self.request.input_responses) {
            (Some(state), Some(responses)) => self.answered(state, responses).await,
            _ => self.ask().await,
        }
    }

    async fn ask(&self) -> Round {
        let name = self.request.name.as_ref();
        let params = match question(name, self.input, self.level) {
            Ok(params) => params,
            Err(e) => return Round::Decided(ApprovalOutcome::Unavailable(format!("elicitation schema: {e}"))),
        };
        let timeout = Duration::from_secs(self.engine.settings().human.timeout_seconds);
        let expires_at = SystemTime::now() + timeout;
        let presentation = crate::broker::present::Approval {
            tool_name: name,
            tool_call_id: "",
            input: self.input,
            level: self.level,
            safe_description: crate::broker::present::safe_description(&self.engine.tools().decls(), name),
            expires_at,
        };
        let opening = Opening {
            kind: Kind::Approval,
            scope: Scope {
                agent: self.engine.agent().to_owned(),
                surface: SURFACE.into(),
                conversation: SURFACE.into(),
                run_id: SURFACE.into(),
                deciders: Vec::new(),
            },
            expires_at,
            challenge: (self.level == Level::Confirm).then(|| CONFIRMATION_CHALLENGE.to_owned()),
            prompt: None,
            choices: Vec::new(),
            presentation: presentation.json(""),
            resumable: None,
            watch: None,
        };
        let entry = match self.engine.broker().post(opening).await {
            Ok(entry) => entry,
            Err(e) => return Round::Decided(ApprovalOutcome::Unavailable(e.to_string())),
        };
        let expires = expires_at.duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
        let arguments = arguments_hash(self.input);
        let claims =
            Claims { entry: entry.id, tool: name.to_owned(), arguments, expires, inquiry: false, approved: false };
        let state = match self.keys.sign(&claims).await {
            Ok(state) => state,
            Err(e) => return Round::Decided(ApprovalOutcome::Unavailable(e.to_string())),
        };
        let requests = InputRequests::from([(KEY.to_owned(), InputRequest::Elicitation(ElicitRequest::new(params)))]);
        Round::Ask(InputRequiredResult::new(Some(requests), Some(state)))
    }

    async fn answered(&self, state: &str, responses: &InputResponses) -> Round {
        let claims = match self.keys.verify(state).await {
            Ok(claims) => claims,
            Err(refused) => return Round::Refused(refused),
        };
        if claims.inquiry || claims.tool != self.request.name.as_ref() || claims.arguments != arguments_hash(self.input)
        {
            return Round::Refused(Refused::OtherCall);
        }
        let answer = responses.get(KEY).and_then(|a| serde_json::from_value::<ElicitResult>(a.clone()).ok());
        let approved = answer.is_some_and(|a| approves(&a, self.level));
        let decision = match (approved, self.level) {
            (true, Level::Confirm) => Decision::Approve(Some(CONFIRMATION_CHALLENGE.to_owned())),
            (true, _) => Decision::Approve(None),
            (false, _) => Decision::Deny,
        };
        let client = Who { agent: self.engine.agent(), surface: Some(SURFACE), user: "mcp-client" };
        match self.engine.broker().decide(&claims.entry, client, decision).await {
            // The same answer counted before: a replay, which runs nothing.
            Ok((_, false)) => Round::Refused(Refused::Replayed),
            Ok(_) if approved => Round::Decided(ApprovalOutcome::Approved),
            Ok(_) => Round::Decided(ApprovalOutcome::Denied(None)),
            Err(DecideError::Unavailable(why)) => Round::Refused(Refused::Unavailable(why)),
            Err(_) => Round::Refused(Refused::Replayed),
        }
    }
}
