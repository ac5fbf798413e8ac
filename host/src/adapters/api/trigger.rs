//! `POST /api/trigger`: the body, the query (`wait`, `stream`) and the four modes.

use super::Api;
use super::driver::{self, Feed, OnDrop, Spawned, TurnFuture};
use super::error::{ApiError, ApiResult};
use super::run::ApiRun;
use super::stream::Translator;
use crate::adapters::present;
use crate::adapters::runs::{Origin, Recorder};
use crate::broker::Scope;
use crate::engine::gate::new_id;
use crate::engine::{EngineError, EngineEvent, EventSink, NoEvents, NonInteractive, TurnRequest, TurnResult};
use crate::store::StateError;
use axum::Json;
use axum::body::{Body, Bytes};
use axum::extract::rejection::BytesRejection;
use axum::extract::{RawQuery, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;
use tokio::sync::mpsc;

/// The default channel of a trigger.
pub const DEFAULT_CHANNEL: &str = "trigger";
/// The default user of a trigger.
pub const DEFAULT_USER: &str = "api";
const MAX_ID: usize = 256;

/// How the caller wants the answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// 202 at once; the run goes on in the background, gated calls cancelled.
    Fire,
    /// The final answer as JSON.
    Wait,
    /// NDJSON events, ending with `done`.
    Ndjson,
    /// The interactive approval-v1 SSE stream.
    ApprovalV1,
}

/// A query string `/api/trigger` does not take (400, saying which part).
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum QueryError {
    /// `wait` is not a boolean.
    #[error("wait: `{0}` is not one of true, 1, false, 0")]
    Wait(String),
    /// `stream` is not a stream this route serves.
    #[error("stream: `{0}` is not one of true, approval-v1, false")]
    Stream(String),
    /// A parameter given twice.
    #[error("`{0}` is given more than once")]
    Repeated(String),
    /// Another parameter.
    #[error("unknown query parameter `{0}`; only wait and stream are accepted")]
    Unknown(String),
    /// A stream without waiting.
    #[error("stream requires wait=true (or wait=1)")]
    StreamWithoutWait,
}

/// Parses `wait` and `stream`; anything else, or a value they do not take, is an error.
pub fn mode(query: Option<&str>) -> Result<Mode, QueryError> {
    let (mut wait, mut stream): (Option<bool>, Option<String>) = (None, None);
    for (key, value) in url::form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
        match key.as_ref() {
            "wait" if wait.is_none() => {
                wait = Some(match value.as_ref() {
                    "true" | "1" => true,
                    "false" | "0" => false,
                    other => return Err(QueryError::Wait(other.to_owned())),
                })
            }
            "stream" if stream.is_none() => stream = Some(value.into_owned()),
            "wait" | "stream" => return Err(QueryError::Repeated(key.into_owned())),
            other => return Err(QueryError::Unknown(other.to_owned())),
        }
    }
    let wait = wait.unwrap_or(false);
    let stream = match stream.as_deref() {
        None | Some("false" | "0") => None,
        Some("true" | "1") => Some(Mode::Ndjson),
        Some("approval-v1") => Some(Mode::ApprovalV1),
        Some(other) => return Err(QueryError::Stream(other.to_owned())),
    };
    match (wait, stream) {
        (false, None) => Ok(Mode::Fire),
        (true, None) => Ok(Mode::Wait),
        (true, Some(mode)) => Ok(mode),
        (false, Some(_)) => Err(QueryError::StreamWithoutWait),
    }
}

#[derive(Deserialize)]
struct TriggerBody {
    message: String,
    #[serde(default)]
    channel_id: Option<String>,
    #[serde(default)]
    user_id: Option<String>,
    /// Route attributes for the turn (beyond the spec: the host's `IncomingMessage` route).
    #[serde(default)]
    route: std::collections::BTreeMap<String, String>,
}

/// The turn request in a body, checked.
fn request(body: Result<Bytes, BytesRejection>) -> ApiResult<TurnRequest> {
    let bytes = body.map_err(|r| ApiError::new(r.status(), format!("cannot read the body: {}", r.body_text())))?;
    let body: TriggerBody =
        serde_json::from_slice(&bytes).map_err(|e| ApiError::bad_request(format!("invalid JSON body: {e}")))?;
    if body.message.trim().is_empty() {
        return Err(ApiError::bad_request("`message` must not be empty"));
    }
    let id = |field: &str, value: Option<String>, default: &str| match value {
        None => Ok(default.to_owned()),
        Some(v) if !v.is_empty() && v.chars().count() <= MAX_ID => Ok(v),
        Some(_) => Err(ApiError::bad_request(format!("`{field}` must be a string of 1 to {MAX_ID} characters"))),
    };
    let channel_id = id("channel_id", body.channel_id, DEFAULT_CHANNEL)?;
    let user_id = id("user_id", body.user_id, DEFAULT_USER)?;
    let route: Vec<(String, String)> = body.route.into_iter().collect();
    crate::sandbox::RouteAttributes::check(&route).map_err(|e| ApiError::bad_request(format!("`route`: {e}")))?;
    Ok(TurnRequest { channel_id, thread: None, user_id: Some(user_id), message: body.message, route })
}

/// `POST /api/trigger`.
pub async fn trigger(
    State(api): State<Arc<Api>>,
    RawQuery(query): RawQuery,
    headers: axum::http::HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    use tracing::Instrument as _;
    let span = tracing::info_span!("trigger", otel.name = "POST /api/trigger", otel.kind = "server");
    continue_trace(&span, &headers);
    match handle(api, query, body).instrument(span).await {
        Ok(response) => response,
        Err(e) => e.into_response(),
    }
}

/// Makes `span` a child of the caller's trace when the request carries a W3C `traceparent`
/// (and traces are on; the propagator is a no-op otherwise).
fn continue_trace(span: &tracing::Span, headers: &axum::http::HeaderMap) {
    use tracing_opentelemetry::OpenTelemetrySpanExt as _;
    struct Headers<'a>(&'a axum::http::HeaderMap);
    impl opentelemetry::propagation::Extractor for Headers<'_> {
        fn get(&self, key: &str) -> Option<&str> {
            self.0.get(key).and_then(|v| v.to_str().ok())
        }
        fn keys(&self) -> Vec<&str> {
            self.0.keys().map(|k| k.as_str()).collect()
        }
    }
    if headers.contains_key("traceparent") {
        let context = opentelemetry::global::get_text_map_propagator(|p| p.extract(&Headers(headers)));
        let _ = span.set_parent(context);
    }
}

async fn handle(api: Arc<Api>, query: Option<String>, body: Result<Bytes, BytesRejection>) -> ApiResult<Response> {
    let mode = mode(query.as_deref()).map_err(|e| ApiError::bad_request(e.to_string()))?;
    if api.engine.draining().is_cancelled() {
        let stopping = "this server is stopping and takes no new runs; send the run to another replica";
        return Err(ApiError::new(StatusCode::SERVICE_UNAVAILABLE, stopping));
    }
    if mode == Mode::ApprovalV1 {
        api.interactive()?;
    }
    let request = request(body)?;
    Ok(match mode {
        Mode::Fire => fire(api, request),
        Mode::Wait => wait(api, request).await,
        Mode::Ndjson => ndjson(api, request),
        Mode::ApprovalV1 => approval_v1(api, request),
    })
}

/// A run id for a mode that needs none to be secret (nobody decides anything by it): the
/// OS random source, else a process-local counter.
fn run_id() -> String {
    static LOCAL: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    new_id().unwrap_or_else(|_| format!("local-{}", LOCAL.fetch_add(1, std::sync::atomic::Ordering::Relaxed)))
}

/// A run of the API, as the console lists it.
fn origin(run_id: &str, channel_id: &str, mode: &'static str) -> Origin {
    Origin { run_id: run_id.into(), channel_id: channel_id.into(), adapter: "api", mode }
}

impl Api {
    /// Starts recording a run of this API's for the console.
    fn recorder(&self, run_id: &str, channel_id: &str, mode: &'static str) -> Recorder {
        Recorder::new(&self.runs, origin(run_id, channel_id, mode), self.descriptions.clone())
    }
}

fn fire(api: Arc<Api>, request: TurnRequest) -> Response {
    let (run_id, channel_id) = (run_id(), request.channel_id.clone());
    let recorder = api.recorder(&run_id, &channel_id, "fire");
    let engine = api.engine.clone();
    api.spawn(async move {
        if let Err(e) = recorder.turn(&engine, request, &NoEvents, &NonInteractive).await {
            tracing::warn!("triggered run failed: {e}");
        }
    });
    let body = json!({ "status": "accepted", "channel_id": channel_id, "run_id": run_id });
    (StatusCode::ACCEPTED, Json(body)).into_response()
}

/// The `wait=true` body (and the NDJSON `done` event's fields).
fn summary(api: &Api, channel_id: &str, result: &TurnResult) -> Value {
    let skills = api.engine.skills();
    json!({
        "status": "completed",
        "channel_id": channel_id,
        "text": result.text,
        "time_boxed": result.time_boxed,
        "usage": result.usage,
        "tool_results": present::tool_results(&skills, &result.tool_calls),
        "coverage": present::coverage(&skills, &result.tool_calls),
    })
}

fn failure(e: &EngineError) -> ApiError {
    let status = match e {
        EngineError::Llm(_) => StatusCode::BAD_GATEWAY,
        // The state database is away (a restart, a failover): worth a retry, maybe elsewhere.
        EngineError::History(StateError::Other(_)) | EngineError::InFlight(StateError::Other(_)) => {
            StatusCode::SERVICE_UNAVAILABLE
        }
        // Skills still compiling past `skills_wait_seconds`: ready soon, here or elsewhere.
        EngineError::NotReady(_) => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    ApiError::new(status, format!("the run failed: {e}"))
}

async fn wait(api: Arc<Api>, request: TurnRequest) -> Response {
    let (run_id, channel_id) = (run_id(), request.channel_id.clone());
    let recorder = api.recorder(&run_id, &channel_id, "wait");
    let engine = api.engine.clone();
    let turn = Spawned(api.spawn(async move { recorder.turn(&engine, request, &NoEvents, &NonInteractive).await }));
    match turn.await {
        Ok(result) => {
            let mut body = summary(&api, &channel_id, &result);
            body["run_id"] = run_id.into();
            Json(body).into_response()
        }
        Err(e) => failure(&e).into_response(),
    }
}

/// The NDJSON mode's sink and feed: one JSON object per line.
struct Ndjson {
    api: Arc<Api>,
    channel_id: String,
    out: mpsc::UnboundedSender<Bytes>,
}

impl Ndjson {
    fn line(&self, value: Value) {
        let _ = self.out.send(Bytes::from(format!("{value}\n")));
    }
}

impl EventSink for Ndjson {
    fn emit(&self, event: EngineEvent) {
        match event {
            EngineEvent::TextDelta(text) => self.line(json!({"type": "text", "text": text})),
            EngineEvent::ToolStarted { tool_call_id, tool_name, input, .. } => self.line(json!({
                "type": "tool_started", "tool_name": tool_name, "tool_call_id": tool_call_id,
                "tool_input": present::tool_input(&input),
            })),
            EngineEvent::ToolCompleted { tool_call_id, tool_name, duration, approved, is_empty, .. } => {
                self.line(json!({
                    "type": "tool_completed", "tool_name": tool_name, "tool_call_id": tool_call_id,
                    "duration": duration.as_secs_f64(), "approved": approved, "is_empty": is_empty,
                }))
            }
            _ => {}
        }
    }
}

impl Feed for Ndjson {
    fn heartbeat(&self) {}

    fn finish(&self, result: &Result<TurnResult, EngineError>) {
        match result {
            Ok(result) => {
                let mut done = summary(&self.api, &self.channel_id, result);
                done["type"] = "done".into();
                self.line(done);
            }
            Err(e) => self.line(json!({"type": "error", "error": failure(e).message})),
        }
    }
}

fn ndjson(api: Arc<Api>, request: TurnRequest) -> Response {
    let (out, queued) = mpsc::unbounded_channel();
    let recorder = api.recorder(&run_id(), &request.channel_id, "ndjson");
    let sink = Arc::new(Ndjson { api: api.clone(), channel_id: request.channel_id.clone(), out });
    let turn: TurnFuture = {
        let (engine, sink) = (api.engine.clone(), sink.clone());
        let turn = async move { recorder.turn(&engine, request, &*sink, &NonInteractive).await };
        Box::pin(Spawned(api.spawn(turn)))
    };
    let body = driver::body(turn, sink, queued, None, Box::new(()));
    streamed("application/x-ndjson", body, false)
}

fn approval_v1(api: Arc<Api>, request: TurnRequest) -> Response {
    let Ok(run_id) = new_id() else {
        let error = ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "cannot make a run id: the OS random source failed");
        return error.into_response();
    };
    let (out, queued) = mpsc::unbounded_channel();
    let translator = Translator::new(&run_id, &request.channel_id, api.descriptions.clone());
    let recording = api.runs.start(origin(&run_id, &request.channel_id, "approval-v1"));
    let scope = Scope {
        agent: api.engine.agent().to_owned(),
        surface: "api".into(),
        conversation: request.channel_id.clone(),
        run_id: run_id.clone(),
        deciders: Vec::new(),
    };
    let run = ApiRun::new(scope, translator, out, api.broker.clone(), recording);
    run.send(|t| vec![t.started()]);
    let turn: TurnFuture = {
        let (engine, run) = (api.engine.clone(), run.clone());
        Box::pin(Spawned(api.spawn(async move { engine.run_turn(request, &*run, &*run).await })))
    };
    let broker = api.broker.clone();
    let guard = OnDrop(move || broker.cancel_run(&run_id));
    let body = driver::body(turn, run, queued, Some(api.config.heartbeat), Box::new(guard));
    streamed("text/event-stream", body, true)
}

impl Feed for ApiRun {
    fn heartbeat(&self) {
        self.send(|t| vec![t.heartbeat()]);
    }

    fn finish(&self, result: &Result<TurnResult, EngineError>) {
        match result {
            Ok(result) => self.send(|t| t.completed_with(&result.text, result.time_boxed, Some(&result.usage))),
            Err(e) => self.send(|t| t.failed(&format!("the run failed: {e}"))),
        }
    }
}

fn streamed(
    content_type: &'static str,
    body: impl futures::Stream<Item = Result<Bytes, std::convert::Infallible>> + Send + 'static,
    capability: bool,
) -> Response {
    let mut response = Body::from_stream(body).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, header::HeaderValue::from_static(content_type));
    headers.insert(header::CACHE_CONTROL, header::HeaderValue::from_static("no-cache"));
    headers.insert("x-accel-buffering", header::HeaderValue::from_static("no"));
    if capability {
        headers.insert("x-mithai-capability", header::HeaderValue::from_static("human-interaction-v1"));
    }
    response
}

#[cfg(test)]
mod tests {
    use super::{Mode, mode};

    #[test]
    fn modes() {
        assert_eq!(mode(None), Ok(Mode::Fire));
        assert_eq!(mode(Some("wait=true")), Ok(Mode::Wait));
        assert_eq!(mode(Some("wait=1")), Ok(Mode::Wait));
        assert_eq!(mode(Some("wait=true&stream=true")), Ok(Mode::Ndjson));
        assert_eq!(mode(Some("wait=1&stream=approval-v1")), Ok(Mode::ApprovalV1));
        assert_eq!(mode(Some("wait=false")), Ok(Mode::Fire));
        assert!(mode(Some("wait=yes")).is_err());
        assert!(mode(Some("stream=approval-v1")).is_err());
        assert!(mode(Some("wait=1&stream=sse")).is_err());
        assert!(mode(Some("wait=1&verbose=1")).is_err());
        assert!(mode(Some("wait=1&wait=0")).is_err());
    }
}
