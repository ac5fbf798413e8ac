//! Approval questions put to an MCP client by [`super::SkillServer`]: the form (a yes/no, or
//! the challenge to type), reading the answer, and the two ways of asking.
//!
//! - Up to 2025-11-25 the server sends `elicitation/create` and waits for the answer.
//! - From 2026-07-28 a server may not send requests to the client: the call is answered with
//!   an `input_required` result carrying the question and an opaque `requestState`; the
//!   client asks its user and retries the call with the answer (multi round-trip requests,
//!   SEP-2322). [`Pending`] keeps what each `requestState` asked about, so an answer approves
//!   only the call it was asked for, once, within the approval timeout.

use crate::engine::ApprovalOutcome;
use crate::tools::{CONFIRMATION_CHALLENGE, Level};
use rmcp::model::{
    CallToolRequestParams, ElicitRequest, ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationSchema,
    InputRequest, InputRequests, InputRequiredResult, ProtocolVersion,
};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The key of the approval question in `inputRequests` / `inputResponses`.
const KEY: &str = "approval";
/// At most this many unanswered questions are kept; beyond it new gated calls are refused.
const MAX_PENDING: usize = 1024;

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
pub fn question(name: &str, input: &Value, level: Level) -> Result<ElicitRequestParams, String> {
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
    let requested_schema =
        ElicitationSchema::from_json_schema(schema).map_err(|e| format!("elicitation schema: {e}"))?;
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
    /// The answer arrived (or cannot count): the decision the engine's gate receives.
    Decided(ApprovalOutcome),
}

struct Asked {
    name: String,
    input: Value,
    level: Level,
    at: Instant,
}

/// Questions asked through `input_required` and not answered yet, by `requestState`.
#[derive(Default)]
pub struct Pending(Mutex<HashMap<String, Asked>>);

impl Pending {
    /// The next round of the gated call `request` (whose arguments are `input`): ask, or read
    /// the answer its retry carries. Questions older than `timeout` are forgotten.
    pub fn round(&self, request: &CallToolRequestParams, input: &Value, level: Level, timeout: Duration) -> Round {
        let name = request.name.as_ref();
        let mut pending = self.0.lock().unwrap_or_else(|p| p.into_inner());
        pending.retain(|_, asked| asked.at.elapsed() <= timeout);
        let (Some(state), Some(responses)) = (&request.request_state, &request.input_responses) else {
            if pending.len() >= MAX_PENDING {
                return Round::Decided(ApprovalOutcome::Unavailable("too many approvals are waiting".into()));
            }
            let params = match question(name, input, level) {
                Ok(params) => params,
                Err(e) => return Round::Decided(ApprovalOutcome::Unavailable(e)),
            };
            // An unguessable `requestState`: whoever holds it answers the question.
            let Ok(state) = crate::store::random_id() else {
                return Round::Decided(ApprovalOutcome::Unavailable("the OS random source failed".into()));
            };
            let asked = Asked { name: name.to_owned(), input: input.clone(), level, at: Instant::now() };
            pending.insert(state.clone(), asked);
            let requests =
                InputRequests::from([(KEY.to_owned(), InputRequest::Elicitation(ElicitRequest::new(params)))]);
            return Round::Ask(InputRequiredResult::new(Some(requests), Some(state)));
        };
        let Some(asked) = pending.remove(state) else {
            let secs = timeout.as_secs();
            return Round::Decided(ApprovalOutcome::Unavailable(format!(
                "no approval of `{name}` is waiting (unknown, or older than {secs} s)"
            )));
        };
        if asked.name != name || asked.input != *input || asked.level != level {
            return Round::Decided(ApprovalOutcome::Unavailable(
                "the approval answered was asked for another call".into(),
            ));
        }
        let answer = responses.get(KEY).and_then(|a| serde_json::from_value::<ElicitResult>(a.clone()).ok());
        let approved = answer.is_some_and(|a| approves(&a, level));
        Round::Decided(if approved { ApprovalOutcome::Approved } else { ApprovalOutcome::Denied(None) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LONG: Duration = Duration::from_secs(60);

    fn call(input: &Value) -> CallToolRequestParams {
        CallToolRequestParams::new("probe__echo").with_arguments(input.as_object().cloned().unwrap_or_default())
    }

    /// Asks about `input` (a first call) and returns the `requestState` of the question.
    fn asked(pending: &Pending, input: &Value, level: Level) -> String {
        match pending.round(&call(input), input, level, LONG) {
            Round::Ask(result) => result.request_state.expect("a requestState"),
            Round::Decided(d) => panic!("asked nothing: {d:?}"),
        }
    }

    fn retry(state: &str, input: &Value, answer: Value) -> CallToolRequestParams {
        call(input).with_request_state(state).with_input_responses([(KEY.to_owned(), answer)].into())
    }

    fn decided(round: Round) -> ApprovalOutcome {
        match round {
            Round::Decided(d) => d,
            Round::Ask(_) => panic!("asked again"),
        }
    }

    /// The reason a decision did not count, or a panic if it did.
    fn unavailable(outcome: ApprovalOutcome) -> String {
        match outcome {
            ApprovalOutcome::Unavailable(why) => why,
            other => panic!("decided: {other:?}"),
        }
    }

    #[test]
    fn an_answer_approves_only_the_call_it_was_asked_for_once() {
        let pending = Pending::default();
        let (input, other) = (json!({"x": 1}), json!({"x": 2}));
        let yes = json!({"action": "accept", "content": {"approve": true}});
        let state = asked(&pending, &input, Level::Approve);
        let first = decided(pending.round(&retry(&state, &input, yes.clone()), &input, Level::Approve, LONG));
        assert_eq!(first, ApprovalOutcome::Approved);
        let again = decided(pending.round(&retry(&state, &input, yes.clone()), &input, Level::Approve, LONG));
        assert!(unavailable(again).contains("no approval"), "an answer is used once");

        let state = asked(&pending, &input, Level::Approve);
        let swapped = decided(pending.round(&retry(&state, &other, yes.clone()), &other, Level::Approve, LONG));
        assert!(unavailable(swapped).contains("another call"), "other arguments are not approved");
        let forged = decided(pending.round(&retry("0000", &input, yes.clone()), &input, Level::Approve, LONG));
        assert!(unavailable(forged).contains("no approval"));

        let state = asked(&pending, &input, Level::Approve);
        std::thread::sleep(Duration::from_millis(5));
        let timeout = Duration::from_millis(1);
        let late = decided(pending.round(&retry(&state, &input, yes), &input, Level::Approve, timeout));
        assert!(unavailable(late).contains("older than"), "an answer after the timeout is refused");
    }

    #[test]
    fn a_confirmation_needs_the_challenge_and_a_decline_denies() {
        let pending = Pending::default();
        let input = json!({});
        for (answer, approved) in [
            (json!({"action": "accept", "content": {"confirmation": " CONFIRM "}}), true),
            (json!({"action": "accept", "content": {"confirmation": "yes"}}), false),
            (json!({"action": "accept", "content": {"approve": true}}), false),
            (json!({"action": "decline"}), false),
        ] {
            let state = asked(&pending, &input, Level::Confirm);
            let verdict = decided(pending.round(&retry(&state, &input, answer.clone()), &input, Level::Confirm, LONG));
            let expected = if approved { ApprovalOutcome::Approved } else { ApprovalOutcome::Denied(None) };
            assert_eq!(verdict, expected, "{answer}");
        }
    }
}
