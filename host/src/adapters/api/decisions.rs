//! The decision and status routes of approvals and questions: the agent's operator (its
//! token) reads and decides its own agent's entries, from any surface, through the person
//! broker; another agent's entry answers exactly as an unknown id does (410).

use super::Api;
use super::error::{ApiError, ApiResult};
use super::stream::unix_seconds;
use crate::broker::{DecideError, Decision, Entry, Kind, Outcome};
use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
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
    json!({
        "approval_id": e.id,
        "run_id": e.run_id,
        "channel_id": e.channel_id,
        "outcome": outcome(e),
        "expires_at": unix_seconds(e.expires_at),
        "decided_by": e.decided_by,
    })
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

/// The body as a JSON object.
fn object(body: Result<Bytes, BytesRejection>) -> ApiResult<serde_json::Map<String, Value>> {
    let bytes = body.map_err(|r| ApiError::new(r.status(), format!("cannot read the body: {}", r.body_text())))?;
    match serde_json::from_slice(&bytes) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(ApiError::bad_request("the body must be a JSON object")),
        Err(e) => Err(ApiError::bad_request(format!("invalid JSON body: {e}"))),
    }
}

/// Entry `id` of `kind`, if the agent's operator may see it.
async fn entry(api: &Api, id: &str, kind: Kind, what: &str) -> ApiResult<Entry> {
    let found = api.broker().get(id, kind, api.operator()).await.map_err(unavailable)?;
    found.ok_or_else(|| ApiError::gone(what))
}

/// `POST /api/approvals/{id}/decision` with `{"approved": bool, "confirmation": string}`.
pub async fn decide_approval(
    State(api): State<Arc<Api>>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Json<Value>> {
    api.interactive()?;
    let body = object(body)?;
    let approved = body
        .get("approved")
        .and_then(Value::as_bool)
        .ok_or_else(|| ApiError::bad_request("`approved` is required and must be a boolean"))?;
    let confirmation = match body.get("confirmation") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err(ApiError::bad_request("`confirmation` must be a string")),
    };
    let decision = if approved { Decision::Approve(confirmation) } else { Decision::Deny };
    let (decided, _) = api.broker().decide(&id, api.operator(), decision).await.map_err(|e| refused(e, "approval"))?;
    Ok(Json(approval_json(&decided)))
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
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Json<Value>> {
    api.interactive()?;
    let body = object(body)?;
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
    let (decided, _) = api.broker().decide(&id, api.operator(), decision).await.map_err(|e| refused(e, "question"))?;
    Ok(Json(question_json(&decided)))
}

/// `GET /api/questions/{id}`.
pub async fn question(State(api): State<Arc<Api>>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    api.interactive()?;
    Ok(Json(question_json(&entry(&api, &id, Kind::Question, "question").await?)))
}
