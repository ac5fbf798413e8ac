//! A scripted LLM server: real HTTP on 127.0.0.1 speaking each provider's streaming wire
//! format, replaying scripted replies in order and recording every request.
//!
//! The path picks the format: `/v1/messages` (Anthropic Messages), `/v1/responses` (OpenAI
//! Responses), `.../chat/completions` (Chat Completions), `/model/{id}/converse` (Bedrock
//! Converse: one JSON body, not streamed). Each reply is one of: a streamed
//! [`Answer`] (reasoning, text, tool calls), an error status in the provider's error body
//! (with `retry-after`), a malformed stream, or a connection dropped mid-stream.

mod wire;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde_json::Value;
use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The wire format of a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Anthropic Messages.
    Anthropic,
    /// OpenAI Responses.
    OpenAi,
    /// OpenAI Chat Completions.
    Chat,
    /// Bedrock Converse (a whole JSON answer; errors carry `x-amzn-errortype`).
    Converse,
}

/// A tool call the model makes.
#[derive(Debug, Clone)]
pub struct Call {
    /// The call id (`tool_use.id` / `call_id` / `tool_calls[].id`).
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments; streamed as JSON text in several fragments.
    pub arguments: Value,
}

/// A successful streamed answer.
#[derive(Debug, Clone, Default)]
pub struct Answer {
    /// OpenAI only: a reasoning item with this `encrypted_content`, first in the output.
    pub reasoning: Option<String>,
    /// Text, one delta per piece.
    pub text: Vec<String>,
    /// Tool calls, after the text.
    pub calls: Vec<Call>,
}

impl Answer {
    /// An answer streaming `pieces` as text deltas.
    pub fn text(pieces: &[&str]) -> Self {
        Answer { text: pieces.iter().map(|p| p.to_string()).collect(), ..Default::default() }
    }

    /// Adds a tool call.
    pub fn call(mut self, id: &str, name: &str, arguments: Value) -> Self {
        self.calls.push(Call { id: id.into(), name: name.into(), arguments });
        self
    }

    /// Adds an (OpenAI) encrypted reasoning item.
    pub fn reasoning(mut self, encrypted: &str) -> Self {
        self.reasoning = Some(encrypted.into());
        self
    }
}

/// One scripted reply.
#[derive(Debug, Clone)]
pub enum Reply {
    /// A complete streamed answer.
    Answer(Answer),
    /// An HTTP error with the provider's error body, and `retry-after: <seconds>` if given.
    Error {
        /// The status code.
        status: u16,
        /// The error message in the body.
        message: String,
        /// `retry-after` in seconds.
        retry_after: Option<u64>,
    },
    /// A 200 stream whose second event is not JSON.
    Malformed,
    /// Streams these text deltas (none: only the opening event), then drops the connection.
    Drop(Vec<String>),
}

impl From<Answer> for Reply {
    fn from(answer: Answer) -> Self {
        Reply::Answer(answer)
    }
}

impl Reply {
    /// An error status without `retry-after`.
    pub fn error(status: u16, message: &str) -> Self {
        Reply::Error { status, message: message.into(), retry_after: None }
    }

    /// A 429 asking to retry after `seconds`.
    pub fn rate_limited(seconds: u64) -> Self {
        Reply::Error { status: 429, message: "rate limited".into(), retry_after: Some(seconds) }
    }
}

/// A request the server received.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// The request path.
    pub path: String,
    /// Headers, names lowercase.
    pub headers: BTreeMap<String, String>,
    /// The JSON body (`Null` when it was not JSON).
    pub body: Value,
}

/// Answers a request from its JSON body, once the scripted replies run out.
pub type Responder = Box<dyn Fn(&Value) -> Reply + Send + Sync>;

#[derive(Default)]
struct Shared {
    replies: Mutex<VecDeque<Reply>>,
    requests: Mutex<Vec<Recorded>>,
    responder: Option<Responder>,
    /// Record requests (off for load tests, where the log would only grow).
    unrecorded: bool,
    /// Send each event in one write, as a streaming API does, instead of two (load tests:
    /// the split that tests clients' reassembly doubles the writes and reads of both sides).
    whole_events: bool,
}

/// The running server; it stops with the test's runtime.
pub struct LlmServer {
    port: u16,
    shared: Arc<Shared>,
}

impl LlmServer {
    /// Starts a server on 127.0.0.1 replaying `replies` in order.
    pub async fn start(replies: Vec<Reply>) -> Self {
        Self::serve(Shared { replies: Mutex::new(replies.into()), ..Default::default() }).await
    }

    /// Starts a server answering every request with `responder(body)`, without recording
    /// requests: replies that depend on the conversation, for concurrent load.
    pub async fn responding(responder: Responder) -> Self {
        Self::serve(Shared { responder: Some(responder), unrecorded: true, ..Default::default() }).await
    }

    /// [`LlmServer::responding`] for load: each event of a streamed answer goes out in one
    /// write, 1 ms after the one before, as a streaming API sends them (the other servers
    /// split every event in two, to test that clients reassemble events across reads).
    pub async fn responding_for_load(responder: Responder) -> Self {
        let shared = Shared { responder: Some(responder), unrecorded: true, whole_events: true, ..Default::default() };
        Self::serve(shared).await
    }

    async fn serve(shared: Shared) -> Self {
        let shared = Arc::new(shared);
        let app = Router::new().fallback(handle).with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind 127.0.0.1:0");
        let port = listener.local_addr().unwrap().port();
        // TCP_NODELAY, as skillhost's own server: streamed events go out as written.
        use axum::serve::ListenerExt as _;
        let listener = listener.tap_io(|tcp| drop(tcp.set_nodelay(true)));
        tokio::spawn(async move { axum::serve(listener, app).await });
        LlmServer { port, shared }
    }

    /// `http://127.0.0.1:<port>`, the providers' `base_url`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Queues more replies.
    pub fn push(&self, reply: impl Into<Reply>) {
        self.shared.replies.lock().unwrap().push_back(reply.into());
    }

    /// Every request so far, in order.
    pub fn requests(&self) -> Vec<Recorded> {
        self.shared.requests.lock().unwrap().clone()
    }

    /// The body of request `n` (0-based).
    pub fn body(&self, n: usize) -> Value {
        let requests = self.requests();
        requests.get(n).unwrap_or_else(|| panic!("only {} requests were made", requests.len())).body.clone()
    }
}

async fn handle(State(shared): State<Arc<Shared>>, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    let path = uri.path().to_owned();
    let headers =
        headers.iter().map(|(k, v)| (k.as_str().to_owned(), v.to_str().unwrap_or_default().to_owned())).collect();
    let json = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let model = json["model"].as_str().unwrap_or("model").to_owned();
    let responded = shared.responder.as_ref().map(|r| r(&json));
    let whole = shared.whole_events;
    if !shared.unrecorded {
        shared.requests.lock().unwrap().push(Recorded { path: path.clone(), headers, body: json });
    }
    let format = match path.as_str() {
        "/v1/messages" => Format::Anthropic,
        "/v1/responses" => Format::OpenAi,
        p if p.ends_with("/chat/completions") => Format::Chat,
        p if p.starts_with("/model/") && p.ends_with("/converse") => Format::Converse,
        _ => return (StatusCode::NOT_FOUND, format!("llm_server: no API at {path}")).into_response(),
    };
    let scripted = shared.replies.lock().unwrap().pop_front();
    let Some(reply) = scripted.or(responded) else {
        // 400, not 5xx: a client must not retry its way past a test's missing script.
        return (StatusCode::BAD_REQUEST, "llm_server: no scripted reply left").into_response();
    };
    respond(format, &model, reply, whole)
}

fn respond(format: Format, model: &str, reply: Reply, whole: bool) -> Response {
    if format == Format::Converse {
        return converse(reply);
    }
    match reply {
        Reply::Answer(answer) => stream(wire::answer(format, model, &answer), false, whole),
        Reply::Error { status, message, retry_after } => {
            let status = StatusCode::from_u16(status).expect("a valid status");
            let mut response = (status, wire::error_body(format, status.as_u16(), &message)).into_response();
            response.headers_mut().insert("content-type", "application/json".parse().unwrap());
            if let Some(seconds) = retry_after {
                response.headers_mut().insert("retry-after", seconds.into());
            }
            response
        }
        Reply::Malformed => {
            let mut frames = wire::answer(format, model, &Answer::text(&["never shown"]));
            frames.truncate(1);
            frames.push(wire::Frame { text: "data: {\"type\": \"content_block_del\n\n".into(), delta: false });
            stream(frames, false, whole)
        }
        Reply::Drop(text) => {
            let pieces: Vec<&str> = text.iter().map(String::as_str).collect();
            let frames = wire::answer(format, model, &Answer::text(&pieces));
            let keep = frames.iter().rposition(|f| f.delta).unwrap_or(0) + 1;
            stream(frames.into_iter().take(keep).collect(), true, whole)
        }
    }
}

/// A Converse reply: JSON, an error with `x-amzn-errortype`, a body that is not JSON, or
/// half a body and then a dropped connection.
fn converse(reply: Reply) -> Response {
    let json_response = |status: StatusCode, body: Body| {
        let mut response = (status, body).into_response();
        response.headers_mut().insert("content-type", "application/json".parse().unwrap());
        response
    };
    match reply {
        Reply::Answer(answer) => json_response(StatusCode::OK, wire::converse(&answer).to_string().into()),
        Reply::Error { status, message, retry_after } => {
            let status = StatusCode::from_u16(status).expect("a valid status");
            let body = wire::error_body(Format::Converse, status.as_u16(), &message);
            let mut response = json_response(status, body.into());
            let kind = wire::converse_error_type(status.as_u16());
            response.headers_mut().insert("x-amzn-errortype", kind.parse().unwrap());
            if let Some(seconds) = retry_after {
                response.headers_mut().insert("retry-after", seconds.into());
            }
            response
        }
        Reply::Malformed => json_response(StatusCode::OK, "{\"output\": {\"mess".into()),
        Reply::Drop(_) => {
            let half = Bytes::from_static(b"{\"output\": {\"message\": ");
            let body = futures::stream::iter([Ok(half), Err(std::io::Error::other("scripted drop"))]);
            json_response(StatusCode::OK, Body::from_stream(body))
        }
    }
}

/// A `text/event-stream` body sending each frame in two chunks (so clients reassemble events
/// split across reads), or with `whole` in one, then, with `drop`, failing the body so the
/// connection is cut without the final chunk.
fn stream(frames: Vec<wire::Frame>, drop: bool, whole: bool) -> Response {
    let chunks: Vec<Bytes> = match whole {
        true => frames.into_iter().map(|f| Bytes::from(f.text)).collect(),
        false => frames.into_iter().flat_map(|f| split(f.text)).collect(),
    };
    let body = futures::stream::iter(chunks).then(|chunk| async move {
        tokio::time::sleep(Duration::from_millis(1)).await;
        Ok::<_, std::io::Error>(chunk)
    });
    let tail = futures::stream::iter(drop.then_some(())).then(|()| async {
        // Let what was sent reach the client first.
        tokio::time::sleep(Duration::from_millis(50)).await;
        Err(std::io::Error::new(std::io::ErrorKind::ConnectionReset, "scripted drop"))
    });
    let mut response = Body::from_stream(body.chain(tail)).into_response();
    response.headers_mut().insert("content-type", "text/event-stream".parse().unwrap());
    response
}

fn split(text: String) -> [Bytes; 2] {
    let mut cut = text.len() / 2;
    while !text.is_char_boundary(cut) {
        cut += 1;
    }
    let bytes = Bytes::from(text);
    [bytes.slice(..cut), bytes.slice(cut..)]
}

/// A request offering one tool (`http_checker__check_url`) with the system prompt
/// "Be brief.", as the provider tests send it.
pub fn sample_request(model: &str, messages: Vec<skillhost::llm::Message>) -> skillhost::llm::Request {
    let schema = serde_json::json!({"type": "object", "properties": {"url": {"type": "string"}}, "required": ["url"]});
    let tool = skillhost::llm::ToolDecl {
        name: "http_checker__check_url".into(),
        description: "Check a URL.".into(),
        input_schema: schema.into(),
    };
    skillhost::llm::Request {
        model: model.into(),
        system: "Be brief.".into(),
        messages,
        tools: vec![tool],
        tool_choice: Default::default(),
        max_tokens: 1000,
    }
}

/// Runs one completion, collecting the streamed deltas.
pub async fn complete(
    provider: &dyn skillhost::llm::Provider,
    req: &skillhost::llm::Request,
) -> (Result<skillhost::llm::Response, skillhost::llm::LlmError>, Vec<String>) {
    let mut deltas = Vec::new();
    let result = provider.complete(req, &mut |skillhost::llm::Delta::Text(t)| deltas.push(t)).await;
    (result, deltas)
}
