//! The decision and status routes of approvals and questions.

use super::Api;
use super::error::{ApiError, ApiResult};
use super::stream::unix_seconds;
use crate::adapters::interactions::{ApprovalInfo, DecideError, QuestionInfo, Resolution, Snapshot};
use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde_json::{Value, json};
use std::sync::Arc;

/// The longest answer to a question, in characters.
pub const MAX_ANSWER: usize = 4096;

fn outcome(snapshot_outcome: &Option<Resolution>) -> &'static str {
    snapshot_outcome.as_ref().map_or("pending", Resolution::name)
}

fn approval_json(s: &Snapshot<ApprovalInfo>) -> Value {
    json!({
        "approval_id": s.id,
        "run_id": s.owner.run_id,
        "channel_id": s.owner.channel_id,
        "outcome": outcome(&s.outcome),
        "expires_at": unix_seconds(s.owner.expires_at),
    })
}

fn question_json(s: &Snapshot<QuestionInfo>) -> Value {
    let answer = match &s.outcome {
        Some(Resolution::Answered(a)) => Some(a.as_str()),
        _ => None,
    };
    json!({
        "question_id": s.id,
        "run_id": s.owner.run_id,
        "channel_id": s.owner.channel_id,
        "prompt": s.info.prompt,
        "choices": s.info.choices,
        "outcome": outcome(&s.outcome),
        "expires_at": unix_seconds(s.owner.expires_at),
        "answer": answer,
    })
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

fn refused<I>(e: DecideError<I>, what: &str) -> ApiError {
    match e {
        DecideError::Gone => ApiError::gone(what),
        DecideError::Conflict(s) => {
            ApiError::new(StatusCode::CONFLICT, format!("this {what} was already resolved as {}", outcome(&s.outcome)))
        }
        DecideError::Invalid(message) => ApiError::bad_request(message),
    }
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
        Some(Value::String(s)) => Some(s.as_str()),
        Some(_) => return Err(ApiError::bad_request("`confirmation` must be a string")),
    };
    let decision = if approved { Resolution::Approved } else { Resolution::Denied };
    let check = |info: &ApprovalInfo| match info.challenge {
        Some(challenge) if approved && confirmation != Some(challenge) => {
            Err("`confirmation` must repeat the confirmation_challenge of this confirm-level approval".to_owned())
        }
        _ => Ok(()),
    };
    let snapshot = api.interactions.approvals.decide(&id, decision, check).map_err(|e| refused(e, "approval"))?;
    // Announced here rather than when the turn resumes: on a busy server the turn may wait
    // for a worker, and the person should see their decision taken at once.
    if let Some(run) = snapshot.info.run.upgrade() {
        run.decided(&id, approved);
    }
    Ok(Json(approval_json(&snapshot)))
}

/// `GET /api/approvals/{id}`.
pub async fn approval(State(api): State<Arc<Api>>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    api.interactive()?;
    let snapshot = api.interactions.approvals.get(&id).ok_or_else(|| ApiError::gone("approval"))?;
    Ok(Json(approval_json(&snapshot)))
}

/// `POST /api/questions/{id}/answer` with `{"answer": string}`.
pub async fn answer_question(
    State(api): State<Arc<Api>>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Json<Value>> {
    api.interactive()?;
    let body = object(body)?;
    let answer = match body.get("answer") {
        Some(Value::String(a)) if !a.trim().is_empty() && a.chars().count() <= MAX_ANSWER => a.clone(),
        _ => {
            return Err(ApiError::bad_request(format!(
                "`answer` is required: a string of 1 to {MAX_ANSWER} characters"
            )));
        }
    };
    let snapshot = api
        .interactions
        .questions
        .decide(&id, Resolution::Answered(answer), |_| Ok(()))
        .map_err(|e| refused(e, "question"))?;
    if let (Some(run), Some(Resolution::Answered(answer))) = (snapshot.info.run.upgrade(), &snapshot.outcome) {
        run.answered(&id, answer);
    }
    Ok(Json(question_json(&snapshot)))
}

/// `GET /api/questions/{id}`.
pub async fn question(State(api): State<Arc<Api>>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    api.interactive()?;
    let snapshot = api.interactions.questions.get(&id).ok_or_else(|| ApiError::gone("question"))?;
    Ok(Json(question_json(&snapshot)))
}
