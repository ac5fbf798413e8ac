//! The decision and status routes of approvals and questions.

use super::Api;
use super::error::{ApiError, ApiResult};
use super::stream::unix_seconds;
use crate::adapters::interactions::{ApprovalInfo, DecideError, QuestionInfo, Resolution, Snapshot};
use crate::store::state::postgres::decisions::{Decided, Entry, Kind};
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

fn outcome(snapshot_outcome: &Option<Resolution>) -> &'static str {
    snapshot_outcome.as_ref().map_or("pending", Resolution::name)
}

/// An approval or question as the routes show it, from this process's table or from the
/// shared database.
struct View {
    id: String,
    run_id: String,
    channel_id: String,
    outcome: Option<Resolution>,
    expires_at: std::time::SystemTime,
    prompt: String,
    choices: Vec<String>,
}

impl View {
    fn of<I>(s: &Snapshot<I>, prompt: String, choices: Vec<String>) -> Self {
        View {
            id: s.id.clone(),
            run_id: s.owner.run_id.clone(),
            channel_id: s.owner.channel_id.clone(),
            outcome: s.outcome.clone(),
            expires_at: s.owner.expires_at,
            prompt,
            choices,
        }
    }
}

impl From<&Snapshot<ApprovalInfo>> for View {
    fn from(s: &Snapshot<ApprovalInfo>) -> Self {
        View::of(s, String::new(), Vec::new())
    }
}

impl From<&Snapshot<QuestionInfo>> for View {
    fn from(s: &Snapshot<QuestionInfo>) -> Self {
        View::of(s, s.info.prompt.clone(), s.info.choices.clone())
    }
}

impl From<Entry> for View {
    fn from(e: Entry) -> Self {
        View {
            outcome: e.outcome.as_deref().map(|o| Resolution::from_stored(o, e.answer.as_deref())),
            id: e.id,
            run_id: e.run_id,
            channel_id: e.channel_id,
            expires_at: e.expires_at,
            prompt: e.prompt.unwrap_or_default(),
            choices: e.choices,
        }
    }
}

fn approval_json(s: &View) -> Value {
    json!({
        "approval_id": s.id,
        "run_id": s.run_id,
        "channel_id": s.channel_id,
        "outcome": outcome(&s.outcome),
        "expires_at": unix_seconds(s.expires_at),
    })
}

fn question_json(s: &View) -> Value {
    json!({
        "question_id": s.id,
        "run_id": s.run_id,
        "channel_id": s.channel_id,
        "prompt": s.prompt,
        "choices": s.choices,
        "outcome": outcome(&s.outcome),
        "expires_at": unix_seconds(s.expires_at),
        "answer": s.outcome.as_ref().and_then(Resolution::answer),
    })
}

/// A decision taken in the shared database, as the routes answer it.
fn shared_outcome(decided: Decided, what: &str) -> ApiResult<View> {
    match decided {
        Decided::Won(entry) | Decided::Same(entry) => Ok(entry.into()),
        Decided::Conflict(entry) => {
            let view = View::from(entry);
            Err(ApiError::new(
                StatusCode::CONFLICT,
                format!("this {what} was already resolved as {}", outcome(&view.outcome)),
            ))
        }
        Decided::Gone => Err(ApiError::gone(what)),
        Decided::Unconfirmed => Err(ApiError::bad_request(UNCONFIRMED)),
    }
}

/// The database's failure, as the routes answer it: worth a retry.
fn unavailable(e: crate::store::StateError) -> ApiError {
    tracing::warn!("a decision route cannot reach the state database: {e}");
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
    if let Some(shared) = api.interactions.shared() {
        let decided =
            shared.decide(Kind::Approval, &id, decision.name(), None, confirmation).await.map_err(unavailable)?;
        let won = matches!(decided, Decided::Won(_));
        let view = shared_outcome(decided, "approval")?;
        // The run waits here: it is woken now rather than by the notification.
        if won
            && let Some(info) = api.interactions.approvals.deliver(&id, decision)
            && let Some(run) = info.run.upgrade()
        {
            run.decided(&id, approved);
        }
        return Ok(Json(approval_json(&view)));
    }
    let check = |info: &ApprovalInfo| match info.challenge {
        Some(challenge) if approved && confirmation != Some(challenge) => Err(UNCONFIRMED.to_owned()),
        _ => Ok(()),
    };
    let snapshot = api.interactions.approvals.decide(&id, decision, check).map_err(|e| refused(e, "approval"))?;
    // Announced here rather than when the turn resumes: on a busy server the turn may wait
    // for a worker, and the person should see their decision taken at once.
    if let Some(run) = snapshot.info.run.upgrade() {
        run.decided(&id, approved);
    }
    Ok(Json(approval_json(&View::from(&snapshot))))
}

/// `GET /api/approvals/{id}`.
pub async fn approval(State(api): State<Arc<Api>>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    api.interactive()?;
    if let Some(shared) = api.interactions.shared() {
        let entry = shared.get(Kind::Approval, &id).await.map_err(unavailable)?;
        return Ok(Json(approval_json(&entry.ok_or_else(|| ApiError::gone("approval"))?.into())));
    }
    let snapshot = api.interactions.approvals.get(&id).ok_or_else(|| ApiError::gone("approval"))?;
    Ok(Json(approval_json(&View::from(&snapshot))))
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
    if let Some(shared) = api.interactions.shared() {
        let decided = shared.decide(Kind::Question, &id, "answered", Some(&answer), None).await.map_err(unavailable)?;
        let won = matches!(decided, Decided::Won(_));
        let view = shared_outcome(decided, "question")?;
        if won
            && let Some(info) = api.interactions.questions.deliver(&id, Resolution::Answered(answer.clone()))
            && let Some(run) = info.run.upgrade()
        {
            run.answered(&id, &answer);
        }
        return Ok(Json(question_json(&view)));
    }
    let snapshot = api
        .interactions
        .questions
        .decide(&id, Resolution::Answered(answer), |_| Ok(()))
        .map_err(|e| refused(e, "question"))?;
    if let (Some(run), Some(Resolution::Answered(answer))) = (snapshot.info.run.upgrade(), &snapshot.outcome) {
        run.answered(&id, answer);
    }
    Ok(Json(question_json(&View::from(&snapshot))))
}

/// `GET /api/questions/{id}`.
pub async fn question(State(api): State<Arc<Api>>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    api.interactive()?;
    if let Some(shared) = api.interactions.shared() {
        let entry = shared.get(Kind::Question, &id).await.map_err(unavailable)?;
        return Ok(Json(question_json(&entry.ok_or_else(|| ApiError::gone("question"))?.into())));
    }
    let snapshot = api.interactions.questions.get(&id).ok_or_else(|| ApiError::gone("question"))?;
    Ok(Json(question_json(&View::from(&snapshot))))
}
