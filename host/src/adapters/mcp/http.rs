//! `/mcp`: streamable HTTP, rmcp's service behind a front that authenticates and answers
//! every refusal as a JSON-RPC error (`application/json`), so that a client reads why.
//!
//! rmcp sets the statuses the transport prescribes (403 for a foreign `Host` / `Origin`, 404
//! for an unknown or deleted session, 400 for a missing session id or an unsupported
//! `MCP-Protocol-Version`, 406, 415, 413) but with plain-text bodies, and a body it cannot
//! decode gets a plain-text 415. The front keeps rmcp's order of checks and its statuses,
//! and gives each refusal a JSON-RPC error body, with the request's id where the body has
//! one. A body that is not JSON is a parse error (400), one that is not a JSON-RPC message
//! an invalid request (400), a batch too (JSON-RPC batches are not accepted over HTTP), and
//! a request whose params do not fit its method invalid params, answered (200) once the
//! session checks pass: the same classification as the stdio front ([`super::stdio`]).
//! DELETE ends a session (202); a session it does not name is unknown (404), as after.

use super::SkillServer;
use super::stdio::{Line, META_VERSION, REMOVED_WHEN_STATELESS, STATELESS_REVISION, classify, removed};
use crate::adapters::auth::{Allowed, Tokens};
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::model::ProtocolVersion;
use rmcp::transport::StreamableHttpService;
use rmcp::transport::streamable_http_server::session::SessionManager;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use serde_json::{Value, json};
use std::sync::Arc;

/// The largest request body (rmcp's own bound, which it answers with 413).
const MAX_BODY_BYTES: usize = 4 << 20;
/// The largest refusal body of rmcp's that is read to be rewritten (they are one line).
const MAX_REFUSAL_BYTES: usize = 64 << 10;

const SESSION_HEADER: &str = "mcp-session-id";
const VERSION_HEADER: &str = "mcp-protocol-version";

/// The token an HTTP request came with, when tasks are kept per token (several tokens):
/// another token's task is not found.
#[derive(Debug, Clone)]
pub struct TaskOwner(pub String);

/// JSON-RPC's invalid request: what an HTTP-level refusal of a malformed request is.
const INVALID_REQUEST: i64 = -32600;
const PARSE_ERROR: i64 = -32700;
const INTERNAL_ERROR: i64 = -32603;
const METHOD_NOT_FOUND: i64 = -32601;
/// Implementation-defined: refused (authentication, `Host` / `Origin`).
const REFUSED: i64 = -32000;
/// Unknown or ended session: the TypeScript SDK's code, next to the 404 clients act on.
const SESSION_NOT_FOUND: i64 = -32001;
/// The protocol's code for an unsupported revision (with `requested` and `supported`).
const UNSUPPORTED_VERSION: i64 = -32022;

/// The streamable HTTP endpoint at `/mcp`, behind the API's tokens when there are some (the
/// `mcp` scope): merge it into the API's router. `Host` and `Origin` are checked as the
/// API's are ([`Allowed`]), so that a web page cannot reach it through DNS rebinding.
/// Its streams end when `stopping` is cancelled.
pub fn http_app(
    server: SkillServer,
    tokens: Tokens,
    allowed: &Allowed,
    stopping: tokio_util::sync::CancellationToken,
) -> axum::Router {
    let sessions = Arc::new(LocalSessionManager::default());
    let mut config = http_config(allowed);
    config.cancellation_token = stopping;
    let service = StreamableHttpService::new(move || Ok(server.session()), sessions.clone(), config);
    let front = Front { tokens, sessions };
    axum::Router::new().nest_service("/mcp", service).layer(axum::middleware::from_fn_with_state(front, guard))
}

/// rmcp's transport, checking `Host` and `Origin` against `allowed`.
fn http_config(allowed: &Allowed) -> rmcp::transport::StreamableHttpServerConfig {
    let mut config = rmcp::transport::StreamableHttpServerConfig::default().with_max_request_body_bytes(MAX_BODY_BYTES);
    config = match allowed.hosts() {
        None => config.disable_allowed_hosts(),
        Some(hosts) => config.with_allowed_hosts(hosts.iter().cloned()),
    };
    match allowed.origins() {
        None => config.disable_allowed_origins(),
        Some(origins) => config.with_allowed_origins(origins.iter().cloned()).enforce_origin_validation(),
    }
}

/// What the front needs: the token, and rmcp's sessions (to check one before answering a
/// request rmcp could not decode).
#[derive(Clone)]
struct Front {
    tokens: Tokens,
    sessions: Arc<LocalSessionManager>,
}

/// A JSON-RPC error response with `status`.
fn refusal(status: StatusCode, id: &Value, code: i64, message: &str, data: Option<Value>) -> Response {
    let mut error = json!({"code": code, "message": message});
    if let Some(data) = data {
        error["data"] = data;
    }
    let body = json!({"jsonrpc": "2.0", "id": id, "error": error});
    (status, [(header::CONTENT_TYPE, "application/json")], body.to_string()).into_response()
}

/// The middleware: authenticates, reads a JSON body (to answer what rmcp cannot decode),
/// and rewrites rmcp's plain-text refusals.
async fn guard(State(front): State<Front>, mut request: Request, next: Next) -> Response {
    match front.tokens.admit(request.headers(), crate::config::TokenScope::Mcp) {
        // Its name keys its tasks when there are several tokens.
        Ok(caller) => {
            let owner = caller.filter(|_| front.tokens.several()).map(|c| TaskOwner(c.name));
            request.extensions_mut().insert(owner);
        }
        Err(e) => {
            let mut response = refusal(e.status, &Value::Null, REFUSED, &e.message, None);
            if e.status == StatusCode::UNAUTHORIZED {
                response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            }
            return response;
        }
    }
    let headers = request.headers().clone();
    let ends_unknown_session = request.method() == Method::DELETE && !session_exists(&front, &headers).await;
    let (request, body) = match read_json_body(request).await {
        Ok(read) => read,
        Err(response) => return response,
    };
    let id = match &body {
        Some((Line::Forward(message), _)) => message.id.as_deref().and_then(|id| serde_json::from_str(id).ok()),
        Some((Line::Answer(answer), _)) => answer.get("id").cloned(),
        _ => None,
    }
    .unwrap_or(Value::Null);
    let calls_tool = matches!(&body, Some((Line::Forward(m), _)) if m.method.as_deref() == Some("tools/call"));
    let mut response = next.run(request).await;
    if calls_tool {
        response = task_handles(response);
    }
    // rmcp answers 415 to a JSON body only when it cannot decode it, after its `Host`,
    // `Origin`, `Accept` and `Content-Type` checks passed.
    if response.status() == StatusCode::UNSUPPORTED_MEDIA_TYPE
        && let Some((line, bytes)) = body
        && !matches!(line, Line::Forward(_))
    {
        return undecodable(&front, &headers, line, &bytes).await;
    }
    // rmcp accepts the DELETE of a session it does not have (after its own checks).
    if ends_unknown_session && response.status().is_success() {
        return refusal(StatusCode::NOT_FOUND, &Value::Null, SESSION_NOT_FOUND, "Not Found: Session not found", None);
    }
    rewrite(response, &id, &headers).await
}

/// A buffered JSON body and how the stdio front classifies it.
type Classified = (Line, Bytes);

/// For a POST with a JSON `Content-Type`: the request rebuilt around its buffered body, and
/// that body classified. Other requests pass as they are.
async fn read_json_body(request: Request) -> Result<(Request, Option<Classified>), Response> {
    if request.method() != Method::POST || !is_json(request.headers()) {
        return Ok((request, None));
    }
    let (parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_BODY_BYTES).await else {
        let message = format!("Payload Too Large: the body exceeds {MAX_BODY_BYTES} bytes (or could not be read)");
        return Err(refusal(StatusCode::PAYLOAD_TOO_LARGE, &Value::Null, INVALID_REQUEST, &message, None));
    };
    let line = removed_by_header(classify_body(&bytes), &parts.headers);
    // What the front answers itself still goes to rmcp, as an empty body: rmcp makes its
    // `Host`, `Origin`, `Accept` and `Content-Type` checks first and then refuses it (415).
    let forwarded = if matches!(line, Line::Forward(_)) { Body::from(bytes.clone()) } else { Body::empty() };
    Ok((Request::from_parts(parts, forwarded), Some((line, bytes))))
}

/// A request for a method 2026-07-28 removed, asked at that revision by its header alone
/// (its `_meta` is [`classify`]'s): a method not found.
fn removed_by_header(line: Line, headers: &HeaderMap) -> Line {
    let stateless = headers.get(VERSION_HEADER).is_some_and(|v| v == STATELESS_REVISION);
    match &line {
        Line::Forward(message) if stateless => {
            let Some(method) = message.method.as_deref().filter(|m| REMOVED_WHEN_STATELESS.contains(m)) else {
                return line;
            };
            let Some(id) = message.id.as_deref().and_then(|id| serde_json::from_str::<Value>(id).ok()) else {
                return line;
            };
            Line::Answer(removed(id, method))
        }
        _ => line,
    }
}

/// [`classify`], except that an empty body is a parse error (stdio skips empty lines).
fn classify_body(bytes: &Bytes) -> Line {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        let error = json!({"code": PARSE_ERROR, "message": "Parse error: the body is empty"});
        return Line::Answer(json!({"jsonrpc": "2.0", "id": null, "error": error}));
    }
    classify(bytes)
}

/// `Content-Type: application/json` (parameters aside), as rmcp requires.
fn is_json(headers: &HeaderMap) -> bool {
    let value = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default();
    value.split(';').next().unwrap_or_default().trim().eq_ignore_ascii_case("application/json")
}

/// The answer to a body rmcp could not decode: 400 for what is not a request (a parse error,
/// an invalid request, a batch, a notification that does not decode); for a request whose
/// params do not fit, the error in a 200 once the checks rmcp would have made pass.
async fn undecodable(front: &Front, headers: &HeaderMap, line: Line, body: &Bytes) -> Response {
    let answer = match line {
        Line::Answer(answer) => answer,
        Line::Batch(_) => {
            let message = "Invalid Request: JSON-RPC batches are not accepted over HTTP; send one message per POST";
            return refusal(StatusCode::BAD_REQUEST, &Value::Null, INVALID_REQUEST, message, None);
        }
        Line::Ignore | Line::Forward(_) => {
            let message = "Invalid Request: the notification or response does not decode";
            return refusal(StatusCode::BAD_REQUEST, &Value::Null, INVALID_REQUEST, message, None);
        }
    };
    let code = answer["error"]["code"].as_i64().unwrap_or(INVALID_REQUEST);
    if code == PARSE_ERROR || code == INVALID_REQUEST || answer["id"].is_null() {
        return (StatusCode::BAD_REQUEST, [(header::CONTENT_TYPE, "application/json")], answer.to_string())
            .into_response();
    }
    if let Some(refused) = unsupported_version(headers, &answer["id"]) {
        return refused;
    }
    // From 2026-07-28 a method not found is also the transport's 404 (SEP-2575).
    if code == METHOD_NOT_FOUND && is_stateless(headers, body) {
        return (StatusCode::NOT_FOUND, [(header::CONTENT_TYPE, "application/json")], answer.to_string())
            .into_response();
    }
    if let Some(refused) = session_refusal(front, headers, body, &answer["id"]).await {
        return refused;
    }
    (StatusCode::OK, [(header::CONTENT_TYPE, "application/json")], answer.to_string()).into_response()
}

/// 400 when `MCP-Protocol-Version` names a revision the server does not support.
fn unsupported_version(headers: &HeaderMap, id: &Value) -> Option<Response> {
    let asked = headers.get(VERSION_HEADER)?;
    let asked = String::from_utf8_lossy(asked.as_bytes());
    if ProtocolVersion::KNOWN_VERSIONS.iter().any(|v| v.as_str() == asked) {
        return None;
    }
    let message = format!("Bad Request: unsupported MCP-Protocol-Version `{asked}`");
    Some(refusal(StatusCode::BAD_REQUEST, id, UNSUPPORTED_VERSION, &message, Some(versions(&asked))))
}

/// The `data` of an unsupported-revision error.
fn versions(asked: &str) -> Value {
    let supported: Vec<&str> = ProtocolVersion::KNOWN_VERSIONS.iter().map(ProtocolVersion::as_str).collect();
    json!({"requested": asked, "supported": supported})
}

/// The session checks rmcp makes of a request (400 without an id, 404 for an unknown one),
/// except for `initialize` and for 2026-07-28 requests (which carry their revision in
/// `_meta`, or discover it, and have no session).
async fn session_refusal(front: &Front, headers: &HeaderMap, body: &Bytes, id: &Value) -> Option<Response> {
    let request: Value = serde_json::from_slice(body).ok()?;
    let method = request["method"].as_str().unwrap_or_default();
    let modern = request["params"]["_meta"][META_VERSION].is_string() || method == "server/discover";
    if method == "initialize" || modern {
        return None;
    }
    if !headers.contains_key(SESSION_HEADER) {
        let message = "Bad Request: Session ID is required (the Mcp-Session-Id header)";
        return Some(refusal(StatusCode::BAD_REQUEST, id, INVALID_REQUEST, message, None));
    }
    if session_exists(front, headers).await {
        return None;
    }
    Some(refusal(StatusCode::NOT_FOUND, id, SESSION_NOT_FOUND, "Not Found: Session not found", None))
}

/// Whether a request is at the stateless revision, by its header or its `_meta`.
fn is_stateless(headers: &HeaderMap, body: &Bytes) -> bool {
    headers.get(VERSION_HEADER).is_some_and(|v| v == STATELESS_REVISION)
        || serde_json::from_slice::<Value>(body)
            .is_ok_and(|request| request["params"]["_meta"][META_VERSION] == STATELESS_REVISION)
}

/// Whether the request names (`Mcp-Session-Id`) a session rmcp has.
async fn session_exists(front: &Front, headers: &HeaderMap) -> bool {
    let Some(session) = headers.get(SESSION_HEADER) else { return false };
    let session = String::from_utf8_lossy(session.as_bytes()).into_owned();
    front.sessions.has_session(&session.into()).await.unwrap_or(false)
}

/// rmcp's refusals (plain text) as JSON-RPC errors with the same status and headers;
/// everything else as it is.
async fn rewrite(response: Response, id: &Value, headers: &HeaderMap) -> Response {
    let status = response.status();
    let is_json = is_json(response.headers());
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let text = axum::body::to_bytes(body, MAX_REFUSAL_BYTES).await.unwrap_or_default();
    let message = String::from_utf8_lossy(&text).trim().to_owned();
    let fallback = status.canonical_reason().unwrap_or("refused").to_owned();
    let message = if message.is_empty() { fallback } else { message };
    let refused = match status {
        StatusCode::BAD_REQUEST => unsupported_version(headers, id),
        _ => None,
    };
    let mut rewritten = refused.unwrap_or_else(|| refusal(status, id, code_for(status), &message, None));
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.remove(header::CONTENT_TYPE);
    for (name, value) in &parts.headers {
        rewritten.headers_mut().insert(name, value.clone());
    }
    rewritten
}

/// A `tools/call`'s response with each task handle in it put on the wire as
/// [`super::tasks::on_wire`] says (a JSON body, or the events of an SSE stream).
fn task_handles(response: Response) -> Response {
    use futures::StreamExt as _;
    let (mut parts, body) = response.into_parts();
    parts.headers.remove(header::CONTENT_LENGTH);
    let chunks = body.into_data_stream().map(|chunk| {
        chunk.map(|bytes| match super::tasks::on_wire_chunk(&bytes) {
            Some(rewritten) => Bytes::from(rewritten),
            None => bytes,
        })
    });
    Response::from_parts(parts, Body::from_stream(chunks))
}

/// The JSON-RPC code of a refusal with `status`.
fn code_for(status: StatusCode) -> i64 {
    match status {
        StatusCode::NOT_FOUND => SESSION_NOT_FOUND,
        StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => REFUSED,
        s if s.is_server_error() => INTERNAL_ERROR,
        _ => INVALID_REQUEST,
    }
}
