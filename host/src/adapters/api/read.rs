//! The read routes the web console uses, open to any script with the token: the agent's
//! runs and their events (kept and live), the pending approvals and questions across runs,
//! the skills with their tools, levels, grants and limits, and the MCP servers' status.
//! Nothing here shows more of a call than approval-v1 does (the redacted, capped input).

use super::Api;
use super::error::{ApiError, ApiResult};
use crate::adapters::runs::Run;
use crate::broker::{Entry, Kind};
use crate::skills::{Skill, ToolSpec};
use axum::Json;
use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::StreamExt as _;
use serde_json::{Value, json};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::broadcast::error::RecvError;

/// How often a read stream says it is alive.
const KEEPALIVE: Duration = Duration::from_secs(15);

fn run_or_404(api: &Api, id: &str) -> ApiResult<Arc<Run>> {
    api.runs.get(id).ok_or_else(|| ApiError::new(StatusCode::NOT_FOUND, "no such run (finished runs are kept a while)"))
}

/// `GET /api/runs`: the recent runs of this replica, newest first, then the runs of the
/// agent waiting for a person on other replicas (with a shared store).
pub async fn runs(State(api): State<Arc<Api>>) -> Result<Json<Value>, ApiError> {
    let mut runs: Vec<Value> = api.runs.list().iter().map(|r| r.summary(api.runs.agent())).collect();
    if !api.broker().durable() {
        // The entries are this process's own: their runs are listed above.
        return Ok(Json(json!({ "agent": api.runs.agent(), "runs": runs })));
    }
    let (approvals, questions) =
        (waiting_entries(&api, Kind::Approval).await?, waiting_entries(&api, Kind::Question).await?);
    let mut elsewhere: Vec<(String, Vec<Entry>)> = Vec::new();
    for entry in approvals.into_iter().chain(questions).filter(|e| api.runs.get(&e.run_id).is_none()) {
        match elsewhere.iter_mut().find(|(run, _)| *run == entry.run_id) {
            Some((_, entries)) => entries.push(entry),
            None => elsewhere.push((entry.run_id.clone(), vec![entry])),
        }
    }
    runs.extend(elsewhere.iter().map(|(run_id, entries)| elsewhere_summary(&api, run_id, entries)));
    Ok(Json(json!({ "agent": api.runs.agent(), "runs": runs })))
}

/// `GET /api/runs/{id}`: one run, its kept events and what it waits on. A run this replica
/// does not hold is read from what it asked a person, on any replica: `waiting` while an
/// entry waits, `cancelled` when its entries were cancelled (its replica died holding
/// it), else `elsewhere` (another replica runs or ran it).
pub async fn run(State(api): State<Arc<Api>>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    let Some(run) = api.runs.get(&id) else {
        if !api.broker().durable() {
            return Err(ApiError::new(StatusCode::NOT_FOUND, "no such run (finished runs are kept a while)"));
        }
        let entries = api.broker().of_run(&id, api.operator(None)).await.map_err(|e| {
            tracing::warn!("cannot read run {id} from the state database: {e}");
            ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "the state database is unavailable; try again")
        })?;
        if entries.is_empty() {
            return Err(ApiError::new(StatusCode::NOT_FOUND, "no such run (finished runs are kept a while)"));
        }
        return Ok(Json(elsewhere_summary(&api, &id, &entries)));
    };
    let mut body = run.summary(api.runs.agent());
    body["events"] = run.follow().0.into();
    body["approvals"] = run.pending_approvals().into();
    body["questions"] = run.pending_questions().into();
    Ok(Json(body))
}

/// A run held by another replica (or by one that died), as its entries tell it.
fn elsewhere_summary(api: &Api, run_id: &str, entries: &[Entry]) -> Value {
    let pending =
        |kind| entries.iter().filter(|e| e.kind == kind && e.outcome.is_none()).map(listed).collect::<Vec<_>>();
    let (approvals, questions) = (pending(Kind::Approval), pending(Kind::Question));
    let state = if !approvals.is_empty() || !questions.is_empty() {
        "waiting"
    } else if entries.iter().any(|e| e.outcome.as_deref() == Some("cancelled")) {
        "cancelled"
    } else {
        "elsewhere"
    };
    let first = &entries[0];
    json!({
        "run_id": run_id,
        "agent": api.runs.agent(),
        "channel_id": first.channel_id,
        "adapter": adapter_of(first),
        "state": state,
        "replica": "another",
        "started_at": null,
        "duration": null,
        "pending_approvals": approvals.len(),
        "pending_questions": questions.len(),
        "tool_calls": null,
        "events": [],
        "approvals": approvals,
        "questions": questions,
    })
}

/// `GET /api/runs/{id}/events`: the run's events as SSE (the approval-v1 event types, plus
/// `run_cancelled`): those kept, then the live ones; the stream ends with the run. A reader
/// that falls too far behind gets `lagged` and the end, and reads the run again.
pub async fn run_events(State(api): State<Arc<Api>>, Path(id): Path<String>) -> ApiResult<Response> {
    let run = run_or_404(&api, &id)?;
    let (kept, live) = run.follow();
    let frames = futures::stream::iter(kept.into_iter().map(|e| frame(&e)));
    let live = futures::stream::unfold(live, |live| async move {
        let mut rx = live?;
        match tokio::time::timeout(KEEPALIVE, rx.recv()).await {
            Err(_) => Some((": keep-alive\n\n".to_owned(), Some(rx))),
            Ok(Ok(event)) => {
                let end = matches!(event["type"].as_str(), Some("run_completed" | "run_failed" | "run_cancelled"));
                Some((frame(&event), (!end).then_some(rx)))
            }
            Ok(Err(RecvError::Lagged(n))) => Some((format!("event: lagged\ndata: {}\n\n", json!({"missed": n})), None)),
            Ok(Err(RecvError::Closed)) => None,
        }
    });
    Ok(sse(frames.chain(live)))
}

/// `GET /api/activity`: `changed` whenever a run starts, changes state or its pending
/// approvals and questions change (at once, then on each change; bursts coalesce), so a
/// page reads the lists again instead of polling.
pub async fn activity(State(api): State<Arc<Api>>) -> Response {
    let mut rx = api.runs.watch();
    rx.mark_changed();
    // The stream ends when the server stops taking runs, so that it does not hold the stop.
    let stopping = api.engine.draining().clone().cancelled_owned();
    let changes = futures::stream::unfold(rx, |mut rx| async move {
        match tokio::time::timeout(KEEPALIVE, rx.changed()).await {
            Err(_) => Some((": keep-alive\n\n".to_owned(), rx)),
            Ok(Ok(())) => {
                let version = *rx.borrow_and_update();
                Some((format!("event: changed\ndata: {}\n\n", json!({"version": version})), rx))
            }
            Ok(Err(_)) => None,
        }
    });
    sse(changes.take_until(stopping))
}

fn frame(event: &Value) -> String {
    format!("event: {}\ndata: {event}\n\n", event["type"].as_str().unwrap_or("event"))
}

fn sse(frames: impl futures::Stream<Item = String> + Send + 'static) -> Response {
    let body = Body::from_stream(frames.map(|f| Ok::<_, Infallible>(Bytes::from(f))));
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, header::HeaderValue::from_static("text/event-stream"));
    headers.insert(header::CACHE_CONTROL, header::HeaderValue::from_static("no-cache"));
    headers.insert("x-accel-buffering", header::HeaderValue::from_static("no"));
    response
}

/// Every entry of `kind` of the agent waiting for a person, on every replica with a shared
/// store, as it was presented when asked, with the run, its conversation and the adapter
/// that asked; the console (the agent's token) may decide each, chat ones included.
async fn waiting(api: &Api, kind: Kind) -> Result<Vec<Value>, ApiError> {
    Ok(waiting_entries(api, kind).await?.iter().map(listed).collect())
}

async fn waiting_entries(api: &Api, kind: Kind) -> Result<Vec<Entry>, ApiError> {
    api.broker().waiting(kind, api.operator(None)).await.map_err(|e| {
        tracing::warn!("cannot list what waits on a person: {e}");
        ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "the state database is unavailable; try again")
    })
}

/// The adapter of the surface that asked `entry`.
fn adapter_of(entry: &Entry) -> &str {
    entry.surface.split_once(':').map_or(entry.surface.as_str(), |(adapter, _)| adapter)
}

fn listed(entry: &Entry) -> Value {
    let mut shown: Value = entry.presentation.as_deref().and_then(|p| serde_json::from_str(p).ok()).unwrap_or_default();
    if !shown.is_object() {
        shown = json!({});
    }
    let adapter = adapter_of(entry);
    shown["run_id"] = entry.run_id.clone().into();
    shown["channel_id"] = entry.channel_id.clone().into();
    shown["adapter"] = adapter.into();
    // An MCP approval is answered only by its client's retry.
    shown["decidable"] = (entry.surface != "mcp").into();
    shown
}

/// `GET /api/approvals`: every approval of the agent waiting for a person.
pub async fn approvals(State(api): State<Arc<Api>>) -> Result<Json<Value>, ApiError> {
    Ok(Json(json!({ "approvals": waiting(&api, Kind::Approval).await? })))
}

/// `GET /api/questions`: every question of the agent waiting for an answer.
pub async fn questions(State(api): State<Arc<Api>>) -> Result<Json<Value>, ApiError> {
    Ok(Json(json!({ "questions": waiting(&api, Kind::Question).await? })))
}

/// `GET /api/skills`: each skill's tools with their approval levels (and the operator's
/// overrides), hooks, the capabilities the operator granted, and its limits; then the
/// declared tools. Environment variables by name only.
pub async fn skills(State(api): State<Arc<Api>>) -> Json<Value> {
    let gate = api.engine.gate();
    let tool = |spec: &ToolSpec, script: Option<&str>| {
        let overridden = gate.override_of(&spec.full_name).map(|l| l.as_str());
        json!({
        "name": spec.full_name,
        "description": spec.description.lines().next().unwrap_or_default(),
        "level": spec.approval_name(),
        "override": overridden,
        "script": script,
                })
    };
    let set = api.engine.skills();
    let skills: Vec<Value> = set
        .skills
        .values()
        .map(|skill| {
            let scripts = skill.scripts.iter().map(|s| tool(&s.spec, Some(&s.decl.script)));
            let tools: Vec<Value> = skill.tools.iter().map(|t| tool(t, None)).chain(scripts).collect();
            json!({
                "name": skill.name,
                "kind": skill.kind(),
                "about": skill.prompt.description,
                "hooks": skill.hook_names(),
                "schedule_seconds": skill.schedule.map(|s| s.as_secs()),
                "tools": tools,
                "mcp_servers": skill.facts.mcp_servers,
                "mcp_tools": skill.facts.mcp_tools.iter().map(|(s, t)| json!({"server": s, "tools": t})).collect::<Vec<_>>(),
                "grants": grants(skill),
                "source": set.origins.get(&skill.name).map_or_else(|| json!({"folder": skill.dir}), |o| json!(o)),
                "limits": limits(skill),
            })
        })
        .collect();
    let declared: Vec<Value> = set
        .declared
        .tools
        .iter()
        .map(|d| {
            let mut entry = tool(&d.spec, None);
            entry["skill_type"] = d.skill_type.as_str().into();
            entry["active"] = d.active.into();
            entry
        })
        .collect();
    let problems: Vec<String> = set.problems.iter().map(ToString::to_string).collect();
    Json(json!({ "skills": skills, "declared": declared, "problems": problems }))
}

/// What a component skill may reach (what its manifest asks and the operator grants).
fn grants(skill: &Skill) -> Value {
    let Some((_, env)) = skill.component() else { return Value::Null };
    let caps = &env.caps;
    let notify = caps.notify.asked.then(|| caps.notify.granted.iter().map(ToString::to_string).collect::<Vec<_>>());
    json!({
        "http_requested": caps.http_requested.patterns(),
        "http_granted": caps.http_granted.patterns(),
        "env": caps.env.iter().map(|(name, _)| name).collect::<Vec<_>>(),
        "memory": caps.memory.is_some(),
        // Whose keys its state import sees: "conversation" or "skill".
        "state": caps.state.is_some().then(|| caps.state_scope.as_str()),
        "state_ttl_seconds": caps.state.is_some().then(|| caps.state_ttl.as_secs()),
        // Its own files, read-only at /skill (`files = "self"`).
        "files": caps.files.as_ref().map(|f| json!({"path": crate::sandbox::SKILL_FOLDER, "files": f.files, "bytes": f.bytes})),
        "mcp": caps.mcp.is_some(),
        "notify": notify,
    })
}

/// A component skill's per-call limits.
fn limits(skill: &Skill) -> Value {
    let Some((_, env)) = skill.component() else { return Value::Null };
    let l = &env.limits;
    json!({
        "fuel": l.fuel,
        "timeout_ms": l.timeout.as_millis() as u64,
        "memory_bytes": l.memory_bytes,
        "max_result_bytes": l.max_result_bytes,
        "max_log_bytes": l.max_log_bytes,
        "state_quota_bytes": l.state_quota_bytes,
        "state_quota_keys": l.state_quota_keys,
        "memory_quota_bytes": l.memory_quota_bytes,
        "memory_quota_files": l.memory_quota_files,
    })
}

/// `GET /api/mcp`: each configured MCP server, its transport, status and tools offered.
pub async fn mcp(State(api): State<Arc<Api>>) -> Json<Value> {
    let servers: Vec<Value> = match &api.mcp {
        Some(manager) => manager
            .overview()
            .into_iter()
            .map(|s| {
                let (status, error) = match &s.status {
                    crate::mcp::Status::Idle => ("idle", None),
                    crate::mcp::Status::Starting => ("starting", None),
                    crate::mcp::Status::Ready => ("ready", None),
                    crate::mcp::Status::Down(why) => ("down", Some(why.clone())),
                };
                json!({
                    "name": s.name,
                    "transport": s.transport,
                    "status": status,
                    "error": error,
                    "connections": s.attempts,
                    "tools": s.tools,
                })
            })
            .collect(),
        None => Vec::new(),
    };
    Json(json!({ "servers": servers }))
}
