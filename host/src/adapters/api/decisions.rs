//! The decision and status routes of approvals and questions: the agent's operator (its
//! token) reads and decides its own agent's entries, from any surface, through the person
//! broker; another agent's entry answers exactly as an unknown id does (410).

use super::Api;
use super::error::{ApiError, ApiResult};
use super::stream::unix_seconds;
use crate::adapters::auth::Caller;
use crate::broker::{DecideError, Decision, Entry, Kind, Outcome};
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::{Extension, Json};
use serde_json::{Value, json};
use std::sync::Arc;

/// Why an approval of a `confirm`-level call was refused.
const UNCONFIRMED: &str = "`confirmation` must repeat the confirmation_challenge of this confirm-level approval";

/// The longest answer to a question, in characters.
pub const MAX_ANSWER: usize = 4096;

fn outcome(entry: &Entry) -> &str {
    entry.outcome.as_deref().unwrap_or("pending")
}

fn approval_json(e: &Entry) -> Value {
    let mut shown = json!({
        "approval_id": e.id,
        "run_id": e.run_id,
        "channel_id": e.channel_id,
        "outcome": outcome(e),
        "expires_at": unix_seconds(e.expires_at),
        "decided_by": e.decided_by,
        "token": e.decided_token,
    });
    match Outcome::of(e) {
        Some(Outcome::Approved(Some(arguments))) => {
            shown["arguments"] = serde_json::from_str(&arguments).unwrap_or(Value::String(arguments));
        }
        Some(Outcome::Denied(Some(reason))) => shown["reason"] = reason.into(),
        _ => {}
    }
    shown
}

fn question_json(e: &Entry) -> Value {
    let answer = Outcome::of(e).as_ref().and_then(Outcome::answer).map(str::to_owned);
    let schema = crate::broker::form::schema_of(e.presentation.as_deref());
    // A form's answer is JSON text: given parsed too.
    let answer_json = schema.as_ref().and(answer.as_deref()).and_then(|a| serde_json::from_str::<Value>(a).ok());
    json!({
        "question_id": e.id,
        "run_id": e.run_id,
        "channel_id": e.channel_id,
        "prompt": e.prompt.as_deref().unwrap_or_default(),
        "choices": e.choices,
        "outcome": outcome(e),
        "expires_at": unix_seconds(e.expires_at),
        "answer": answer,
        "schema": schema,
        "answer_json": answer_json,
        "decided_by": e.decided_by,
        "token": e.decided_token,
    })
}

/// A refused decision, as the routes answer it.
fn refused(e: DecideError, what: &str) -> ApiError {
    match e {
        DecideError::Gone => ApiError::gone(what),
        DecideError::Conflict(entry) => {
            ApiError::new(StatusCode::CONFLICT, format!("this {what} was already resolved as {}", outcome(&entry)))
        }
        DecideError::Unconfirmed => ApiError::bad_request(UNCONFIRMED),
        DecideError::Invalid(why) => ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, why.to_string()),
        DecideError::Unavailable(why) => unavailable(why),
    }
}

/// The database's failure, as the routes answer it: worth a retry.
fn unavailable(why: impl std::fmt::Display) -> ApiError {
    tracing::warn!("a decision route cannot reach the state database: {why}");
    ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "the state database is unavailable; try again")
}

/// The body as a JSON object of the `known` fields: a field the route does not act on is
/// refused (400 naming it), never ignored.
fn object(body: Result<Bytes, BytesRejection>, known: &[&str]) -> ApiResult<serde_json::Map<String, Value>> {
    let bytes = body.map_err(|r| ApiError::new(r.status(), format!("cannot read the body: {}", r.body_text())))?;
    let map = match serde_json::from_slice(&bytes) {
        Ok(Value::Object(map)) => map,
        Ok(_) => return Err(ApiError::bad_request("the body must be a JSON object")),
        Err(e) => return Err(ApiError::bad_request(format!("invalid JSON body: {e}"))),
    };
    match map.keys().find(|k| !known.contains(&k.as_str())) {
        Some(unknown) => Err(ApiError::bad_request(format!(
            "unknown field `{unknown}`: this route takes only {}",
            known.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", ")
        ))),
        None => Ok(map),
    }
}

/// Entry `id` of `kind`, if the agent's operator may see it.
async fn entry(api: &Api, id: &str, kind: Kind, what: &str) -> ApiResult<Entry> {
    let found = api.broker().get(id, kind, api.operator(None)).await.map_err(unavailable)?;
    found.ok_or_else(|| ApiError::gone(what))
}

/// `POST /api/approvals/{id}/decision` with `{"approved": bool, "confirmation": string}`; an
/// approval may carry the person's changed `arguments` (checked against the tool's input
/// schema: 422 saying where), a denial their `reason` (the model reads it).
pub async fn decide_approval(
    State(api): State<Arc<Api>>,
    caller: Option<Extension<Caller>>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Json<Value>> {
    api.interactive()?;
    let body = object(body, &["approved", "confirmation", "arguments", "reason"])?;
    let approved = body
        .get("approved")
        .and_then(Value::as_bool)
        .ok_or_else(|| ApiError::bad_request("`approved` is required and must be a boolean"))?;
    let text = |field: &str, max: usize| match body.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.chars().count() <= max => Ok(Some(s.clone())),
        Some(_) => Err(ApiError::bad_request(format!("`{field}` must be a string of at most {max} characters"))),
    };
    let (confirmation, reason) = (text("confirmation", MAX_ANSWER)?, text("reason", MAX_REASON)?);
    let decision = match (approved, body.get("arguments"), reason) {
        (true, _, Some(_)) => return Err(ApiError::bad_request("`reason` goes with a denial (`approved: false`)")),
        (false, Some(_), _) => return Err(ApiError::bad_request("`arguments` go with an approval (`approved: true`)")),
        (false, None, reason) => Decision::Deny(reason),
        (true, None, None) => Decision::Approve(confirmation),
        (true, Some(arguments), None) => {
            let entry = entry(&api, &id, Kind::Approval, "approval").await?;
            fits(&api, &entry, arguments)?;
            Decision::Edit { arguments: arguments.to_string(), confirmation }
        }
    };
    let who = api.operator(caller.as_deref());
    let (decided, _) = api.broker().decide(&id, who, decision).await.map_err(|e| refused(e, "approval"))?;
    Ok(Json(approval_json(&decided)))
}

/// The longest reason given with a denial, in characters.
pub const MAX_REASON: usize = 1000;

/// `Ok` when `arguments` fit the input schema of the tool `entry` asks about (422 naming
/// where they do not).
fn fits(api: &Api, entry: &Entry, arguments: &Value) -> ApiResult<()> {
    let unfit = |why: String| ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, why);
    if !arguments.is_object() {
        return Err(unfit("`arguments` must be a JSON object: the tool's whole input".into()));
    }
    let (tool, ..) = crate::broker::present::covered(entry.presentation.as_deref())
        .ok_or_else(|| unfit("this approval's call cannot be edited".into()))?;
    let tools = api.engine.tools();
    let (source, _) = tools.find(&tool).ok_or_else(|| unfit(format!("tool `{tool}` is no longer loaded")))?;
    match source.check(&tool, arguments) {
        Ok(()) => Ok(()),
        Err(refused) => {
            let said: Value = serde_json::from_str(&refused.content).unwrap_or_default();
            let why = said["error"].as_str().map_or(refused.content.clone(), str::to_owned);
            Err(unfit(format!("`arguments` do not fit {tool}'s input schema: {why}")))
        }
    }
}

/// `GET /api/approvals/{id}`.
pub async fn approval(State(api): State<Arc<Api>>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    api.interactive()?;
    Ok(Json(approval_json(&entry(&api, &id, Kind::Approval, "approval").await?)))
}

/// `POST /api/questions/{id}/answer` with `{"answer": string}` or, for a question with a
/// schema, `{"answer_json": <any JSON>}`; the broker checks either against the schema.
pub async fn answer_question(
    State(api): State<Arc<Api>>,
    caller: Option<Extension<Caller>>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Json<Value>> {
    api.interactive()?;
    let body = object(body, &["answer", "answer_json"])?;
    let answer = match (body.get("answer"), body.get("answer_json")) {
        (Some(_), Some(_)) => return Err(ApiError::bad_request("give `answer` or `answer_json`, not both")),
        (None, Some(json)) if json.to_string().chars().count() <= MAX_ANSWER => json.to_string(),
        (None, Some(_)) => {
            return Err(ApiError::bad_request(format!(
                "`answer_json` is at most {MAX_ANSWER} characters as JSON text"
            )));
        }
        (Some(Value::String(a)), None) if !a.trim().is_empty() && a.chars().count() <= MAX_ANSWER => a.clone(),
        _ => {
            return Err(ApiError::bad_request(format!(
                "`answer` is required: a string of 1 to {MAX_ANSWER} characters (or `answer_json`, JSON fitting the question's schema)"
            )));
        }
    };
    let decision = Decision::Answer(answer);
    let who = api.operator(caller.as_deref());
    let (decided, _) = api.broker().decide(&id, who, decision).await.map_err(|e| refused(e, "question"))?;
    Ok(Json(question_json(&decided)))
}

/// `GET /api/questions/{id}`.
pub async fn question(State(api): State<Arc<Api>>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    api.interactive()?;
    Ok(Json(question_json(&entry(&api, &id, Kind::Question, "question").await?)))
}
