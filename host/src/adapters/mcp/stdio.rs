//! `skillhost mcp` on stdin/stdout: a line front before rmcp, so that no input ends the server.
//!
//! rmcp's stdio transport stops at the first line it cannot decode, and a session that gets a
//! notification before `initialize` ends. The front reads every line itself: what rmcp can
//! decode goes to the session; everything else is answered with the JSON-RPC error the
//! protocol prescribes (parse error, invalid request, method not found, invalid params) and
//! the server keeps serving. A batch is refused (JSON-RPC batches left MCP in 2025-06-18)
//! unless the session negotiated 2025-03-26, where its requests run and their answers come
//! back as one array. Only EOF on stdin (or a signal) ends the server.
//!
//! Once a session is initialized (its `initialize` answered, its peer known), the front
//! serves `tools/call` itself ([`call_directly`]) instead of handing it to the session: the
//! same handler with the same request context rmcp would build, its notes and its answer
//! written straight to stdout. That saves a second decode, two trips through in-memory pipes
//! and three task hops per call. Everything else (and a call that names its own protocol
//! revision in `_meta`) goes to rmcp, which also carries the elicitation requests of direct
//! calls and their answers. Cancellation reaches a direct call through its token.

use super::SkillServer;
use super::notify::Direct;
use parking_lot::Mutex;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, ClientJsonRpcMessage, ClientRequest, GetExtensions, GetMeta,
    JsonRpcRequest, JsonRpcVersion2_0, RequestId, ServerJsonRpcMessage,
};
use rmcp::service::{Peer, RequestContext, RoleServer};
use rmcp::{Service, ServiceExt};
use serde_json::{Value, json};
use std::collections::{HashMap, HashSet};
use std::os::fd::{AsFd, OwnedFd};
use std::pin::Pin;
use std::sync::Arc;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, WriteHalf};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

/// The longest message accepted, in bytes; a longer line is answered with a parse error.
pub const MAX_MESSAGE_BYTES: usize = 32 << 20;

/// The only revision whose clients may send JSON-RPC batches.
const BATCH_REVISION: &str = "2025-03-26";

/// Methods a client may send that rmcp serves: a request for one of them that does not
/// decode has bad params; any other method is not found.
const KNOWN_METHODS: &[&str] = &[
    "initialize",
    "ping",
    "server/discover",
    "subscriptions/listen",
    "tools/list",
    "tools/call",
    "prompts/list",
    "prompts/get",
    "resources/list",
    "resources/read",
    "resources/templates/list",
    "resources/subscribe",
    "resources/unsubscribe",
    "logging/setLevel",
    "completion/complete",
];

/// The first revision without a handshake: a request carries its revision in `_meta`.
pub(super) const STATELESS_REVISION: &str = "2026-07-28";
/// Where such a request carries it (`params._meta`).
pub(super) const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
/// Methods [`STATELESS_REVISION`] removed (SEP-2575): a request for one of them at that
/// revision is a method not found, however its params look.
pub(super) const REMOVED_WHEN_STATELESS: &[&str] =
    &["initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe"];

/// What the front does with one line of input.
#[derive(Debug, PartialEq)]
pub(super) enum Line {
    /// A message rmcp decodes: to the session.
    Forward(ClientMessage),
    /// Answer this (an error response) without bothering the session.
    Answer(Value),
    /// A batch: its members, each classified on its own.
    Batch(Vec<Value>),
    /// Nothing to answer (an empty line, a notification or response that does not decode).
    Ignore,
}

/// A decodable message and the facts the front needs about it.
#[derive(Debug)]
pub(super) struct ClientMessage {
    text: String,
    /// The request id (as JSON text), for requests.
    pub(super) id: Option<String>,
    /// Whether it is a request (not a notification or a response).
    is_request: bool,
    /// The method, for requests and notifications.
    pub(super) method: Option<String>,
    /// For `notifications/cancelled`: the id (as JSON text) of the request it cancels.
    cancels: Option<String>,
    /// A `tools/call` request, decoded: what the front may serve itself.
    call: Option<Box<JsonRpcRequest<ClientRequest>>>,
}

/// The decoded call is the text decoded: the rest says whether two messages are the same.
impl PartialEq for ClientMessage {
    fn eq(&self, other: &Self) -> bool {
        (&self.text, &self.id, self.is_request, &self.method, &self.cancels)
            == (&other.text, &other.id, other.is_request, &other.method, &other.cancels)
    }
}

/// The answer to a request for `method`, which [`STATELESS_REVISION`] removed, asked at it.
pub(super) fn removed(id: Value, method: &str) -> Value {
    error(id, -32601, format!("Method not found: `{method}` is not part of protocol revision {STATELESS_REVISION}"))
}

fn error(id: Value, code: i64, message: impl Into<String>) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message.into()}})
}

/// Classifies one line of input (also a `/mcp` POST body: [`super::http`]).
pub(super) fn classify(line: &[u8]) -> Line {
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    if line.iter().all(u8::is_ascii_whitespace) {
        return Line::Ignore;
    }
    if let Some(request) = classify_request(line) {
        return Line::Forward(request);
    }
    match serde_json::from_slice::<Value>(line) {
        Err(e) => Line::Answer(error(Value::Null, -32700, format!("Parse error: {e}"))),
        Ok(Value::Array(items)) if items.is_empty() => {
            Line::Answer(error(Value::Null, -32600, "Invalid Request: an empty batch"))
        }
        Ok(Value::Array(items)) => Line::Batch(items),
        Ok(message) => classify_message(message),
    }
}

/// The common case in one decode: a request for a method rmcp serves, forwarded as the
/// client wrote it. `None` sends the line the long way ([`classify_message`]), which also
/// answers what this does not take.
fn classify_request(line: &[u8]) -> Option<ClientMessage> {
    let request = match decode_call(line) {
        Some(call) => call,
        None => match serde_json::from_slice(line) {
            Ok(ClientJsonRpcMessage::Request(request)) => request,
            _ => return None,
        },
    };
    // A removed method may be asked at the revision that removed it: the long way checks.
    if matches!(request.request, ClientRequest::CustomRequest(_))
        || REMOVED_WHEN_STATELESS.contains(&request.request.method())
    {
        return None;
    }
    let text = std::str::from_utf8(line).ok()?.to_owned();
    // The id as JSON text, as the session's answer will spell it.
    let id = serde_json::to_string(&request.id).ok()?;
    let method = Some(request.request.method().to_owned());
    let call = matches!(request.request, ClientRequest::CallToolRequest(_)).then(|| Box::new(request));
    Some(ClientMessage { text, id: Some(id), is_request: true, method, cancels: None, call })
}

/// A `tools/call` request's members, and nothing else: what [`decode_call`] takes.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct CallEnvelope<'a> {
    #[allow(dead_code, reason = "checked by decoding")]
    jsonrpc: JsonRpcVersion2_0,
    id: RequestId,
    #[serde(borrow)]
    method: std::borrow::Cow<'a, str>,
    #[serde(borrow)]
    params: Option<&'a serde_json::value::RawValue>,
}

/// The common `tools/call` decoded straight into its types: rmcp's message types are
/// untagged and flattened, so serde buffers the whole message and decodes it again for each
/// candidate (about six times the work of this, measured). The result is what rmcp's
/// decoding gives (`_meta` moved into the request's extensions, as rmcp's `Request` does);
/// `None` for anything else, which then takes rmcp's way.
fn decode_call(line: &[u8]) -> Option<JsonRpcRequest<ClientRequest>> {
    let envelope: CallEnvelope = serde_json::from_slice(line).ok()?;
    if envelope.method != "tools/call" {
        return None;
    }
    let mut params: CallToolRequestParams = serde_json::from_str(envelope.params?.get()).ok()?;
    let meta = params.meta.take();
    let mut call = CallToolRequest::new(params);
    if let Some(meta) = meta {
        call.extensions.insert(meta);
    }
    Some(JsonRpcRequest::new(envelope.id, ClientRequest::CallToolRequest(call)))
}

/// Classifies one decoded JSON value (a line, or a member of a batch).
fn classify_message(message: Value) -> Line {
    let id = match message.get("id") {
        Some(id @ (Value::String(_) | Value::Number(_))) => id.clone(),
        _ => Value::Null,
    };
    let Value::Object(object) = &message else {
        return Line::Answer(error(Value::Null, -32600, "Invalid Request: a message is a JSON object"));
    };
    let method = object.get("method").and_then(Value::as_str).map(str::to_owned);
    if let Some(m) = method.as_deref()
        && REMOVED_WHEN_STATELESS.contains(&m)
        && object.contains_key("id")
        && message["params"]["_meta"][META_VERSION] == STATELESS_REVISION
    {
        return Line::Answer(removed(id, m));
    }
    let decoded = serde_json::from_value::<ClientJsonRpcMessage>(message.clone());
    if let Ok(decoded) = &decoded {
        // rmcp takes a known method whose params do not fit for an unknown one.
        if let ClientJsonRpcMessage::Request(request) = &decoded
            && let ClientRequest::CustomRequest(custom) = &request.request
            && KNOWN_METHODS.contains(&custom.method.as_str())
        {
            let m = &custom.method;
            return Line::Answer(error(id, -32602, format!("Invalid params for `{m}`: they do not fit the method")));
        }
        let is_request = matches!(decoded, ClientJsonRpcMessage::Request(_));
        let id = is_request.then(|| id.to_string());
        let cancelled = &message["params"]["requestId"];
        let cancels = (method.as_deref() == Some("notifications/cancelled")
            && (cancelled.is_string() || cancelled.is_number()))
        .then(|| cancelled.to_string());
        let text = message.to_string();
        return Line::Forward(ClientMessage { text, id, is_request, method, cancels, call: None });
    }
    let is_response = object.contains_key("result") || object.contains_key("error");
    if object.get("jsonrpc") != Some(&json!("2.0")) {
        return Line::Answer(error(id, -32600, "Invalid Request: `jsonrpc` must be \"2.0\""));
    }
    match method {
        // A response the client sent that does not decode: there is nobody to answer.
        None if is_response => Line::Ignore,
        None => Line::Answer(error(id, -32600, "Invalid Request: no `method`")),
        // A notification is never answered, not even with an error.
        Some(_) if !object.contains_key("id") => Line::Ignore,
        Some(_) if id.is_null() => Line::Answer(error(id, -32600, "Invalid Request: `id` must be a string or number")),
        Some(m) if KNOWN_METHODS.contains(&m.as_str()) => {
            let why = decoded.err().map(|e| e.to_string()).unwrap_or_default();
            Line::Answer(error(id, -32602, format!("Invalid params for `{m}`: {why}")))
        }
        Some(m) => Line::Answer(error(id, -32601, format!("Method not found: `{m}`"))),
    }
}

/// A batch waiting for the answers of its requests.
struct Batch {
    waiting: HashSet<String>,
    answers: Vec<Value>,
}

/// What the front and the session's output share.
#[derive(Default)]
struct Shared {
    batches: Vec<Batch>,
    /// Requests handed to the session and not answered yet (ids as JSON text).
    open: HashSet<String>,
    /// Open requests the client cancelled: their answers are not sent.
    cancelled: HashSet<String>,
    /// The revision the session's `initialize` answer named.
    revision: Option<String>,
    /// Open requests the front serves itself, by id (as JSON text): cancelled through these.
    direct: HashMap<String, CancellationToken>,
}

impl Shared {
    /// Request `id` (as JSON text) has its answer: whether to send it (not when the client
    /// cancelled the request).
    fn answered(&mut self, id: &str) -> bool {
        self.open.remove(id);
        self.direct.remove(id);
        !self.cancelled.remove(id)
    }

    /// Request `id` (as JSON text), handed to the session, will not be answered: it is no
    /// longer open, and a batch waiting only for it is answered with what it has.
    fn forget(&mut self, id: &str, out: &mpsc::UnboundedSender<String>) {
        self.open.remove(id);
        self.settle_batch(id, || None, out);
    }

    /// Whether request `id` (as JSON text) belongs to a batch still waiting. If so, it is
    /// taken off that batch with its answer (`None`: it has none), and the batch's answers go
    /// out as one array once nothing more is awaited.
    fn settle_batch(
        &mut self,
        id: &str,
        answer: impl FnOnce() -> Option<Value>,
        out: &mpsc::UnboundedSender<String>,
    ) -> bool {
        let Some(i) = self.batches.iter().position(|b| b.waiting.contains(id)) else { return false };
        let batch = &mut self.batches[i];
        batch.waiting.remove(id);
        batch.answers.extend(answer());
        if batch.waiting.is_empty() {
            let done = self.batches.remove(i);
            if !done.answers.is_empty() {
                let _ = out.send(Value::Array(done.answers).to_string());
            }
        }
        true
    }
}

type SharedState = Arc<Mutex<Shared>>;

fn lock(shared: &SharedState) -> parking_lot::MutexGuard<'_, Shared> {
    shared.lock()
}

/// One rmcp session behind an in-memory pipe.
struct Session {
    input: WriteHalf<DuplexStream>,
    /// Whether the session has left its pre-initialization state (an `initialize` or a
    /// 2026-07-28 request went to it): before, notifications and responses would end it.
    started: bool,
    /// Whether `notifications/initialized` went to the session: rmcp's handshake then ends
    /// and the session's peer is (about to be) known.
    initialized: bool,
    /// This session's handler (its channel, tool budget and logging level).
    server: SkillServer,
    /// The session's peer once rmcp has started it; the sender goes when the session ends.
    peer: watch::Receiver<Option<Peer<RoleServer>>>,
    task: tokio::task::JoinHandle<()>,
    pump: tokio::task::JoinHandle<()>,
}

impl Session {
    fn start(server: &SkillServer, out: mpsc::UnboundedSender<String>, shared: SharedState) -> Session {
        let (front, back) = tokio::io::duplex(1 << 16);
        let (back_read, back_write) = tokio::io::split(back);
        let session = server.session();
        let (started, peer) = watch::channel(None);
        let handler = session.clone();
        let task = tokio::spawn(async move {
            match handler.serve((back_read, back_write)).await {
                Ok(running) => {
                    started.send_replace(Some(running.peer().clone()));
                    let _ = running.waiting().await;
                }
                Err(e) => tracing::debug!("an MCP session ended before it started: {e}"),
            }
        });
        let (front_read, input) = tokio::io::split(front);
        let pump = tokio::spawn(pump(BufReader::new(front_read), out, shared));
        Session { input, started: false, initialized: false, server: session, peer, task, pump }
    }

    /// The session's peer when the front may serve `call` itself: the session answered
    /// `initialize` (`negotiated`) and was told `initialized`, and the call does not name a
    /// revision of its own (rmcp keeps such a request's revision for what the handler sends
    /// while serving it). Waits the moment rmcp takes to finish its handshake, so that every
    /// call after it is served the same way.
    async fn direct(&mut self, call: &JsonRpcRequest<ClientRequest>, negotiated: bool) -> Option<Peer<RoleServer>> {
        if !negotiated || !self.initialized || call.request.get_meta().protocol_version().is_some() {
            return None;
        }
        self.peer.wait_for(Option::is_some).await.ok()?.clone()
    }

    /// Hands `message` to the session; `false` when the session is gone.
    async fn send(&mut self, message: &ClientMessage) -> bool {
        let mut text = Vec::with_capacity(message.text.len() + 1);
        text.extend_from_slice(message.text.as_bytes());
        text.push(b'\n');
        let sent = self.input.write_all(&text).await.is_ok() && self.input.flush().await.is_ok();
        if sent && message.is_request && message.method.as_deref() != Some("ping") {
            self.started = true;
        }
        if sent && !message.is_request && message.method.as_deref() == Some("notifications/initialized") {
            self.initialized = true;
        }
        sent
    }

    /// Closes the session's input and waits until every answer it owes is written.
    async fn finish(mut self) {
        let _ = self.input.shutdown().await;
        let _ = self.task.await;
        let _ = self.pump.await;
    }
}

/// Copies the session's output to stdout, line by line, gathering batch answers, noting
/// the negotiated revision, and putting task handles on the wire ([`super::tasks::on_wire`]).
async fn pump(mut from: impl AsyncBufRead + Unpin, out: mpsc::UnboundedSender<String>, shared: SharedState) {
    let mut line = String::new();
    loop {
        line.clear();
        match from.read_line(&mut line).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let rewritten = super::tasks::on_wire_text(line.trim_end());
        let text = rewritten.as_deref().unwrap_or(line.trim_end());
        let peek: Option<Peek> = serde_json::from_str(text).ok();
        let mut shared = lock(&shared);
        // Only the `initialize` answer names the revision: once it is known, no line is
        // searched for it or decoded whole.
        if shared.revision.is_none()
            && let Some(version) = text.contains("\"protocolVersion\"").then(|| revision_of(text)).flatten()
        {
            shared.revision = Some(version);
        }
        let id = peek.filter(|p| p.method.is_none()).map(|p| p.id.unwrap_or(Value::Null).to_string());
        if let Some(id) = &id
            && !shared.answered(id)
        {
            continue;
        }
        let in_batch = id.is_some_and(|id| shared.settle_batch(&id, || serde_json::from_str(text).ok(), &out));
        if !in_batch {
            let _ = out.send(text.to_owned());
        }
    }
}

/// What the output pump needs of a line the session wrote: its id, and whether it is a
/// request or notification of the server's (which has a `method`) rather than an answer.
#[derive(serde::Deserialize)]
struct Peek {
    #[serde(default)]
    id: Option<Value>,
    #[serde(default)]
    method: Option<serde::de::IgnoredAny>,
}

/// The revision an `initialize` answer names.
fn revision_of(text: &str) -> Option<String> {
    let value: Value = serde_json::from_str(text).ok()?;
    value["result"]["protocolVersion"].as_str().map(str::to_owned)
}

/// Reads one line of at most `max` bytes into `buf` (without the newline). `Ok(None)` at
/// EOF; `Ok(Some(false))` for a line that was too long (read to its end and dropped).
async fn read_line(
    from: &mut (impl AsyncBufRead + Unpin),
    buf: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<Option<bool>> {
    buf.clear();
    let mut too_long = false;
    loop {
        let chunk = from.fill_buf().await?;
        if chunk.is_empty() {
            return Ok((!buf.is_empty() || too_long).then_some(!too_long));
        }
        let (take, end) = match chunk.iter().position(|b| *b == b'\n') {
            Some(i) => (i, true),
            None => (chunk.len(), false),
        };
        if buf.len() + take > max {
            too_long = true;
            buf.clear();
        } else if !too_long {
            buf.extend_from_slice(&chunk[..take]);
        }
        from.consume(if end { take + 1 } else { take });
        if end {
            return Ok(Some(!too_long));
        }
    }
}

/// stdin as an async reader. A pipe (how MCP clients start servers) is read without
/// blocking, on the runtime's own threads: tokio's `stdin` hands every read to a blocking
/// thread and back, a thread wake-up each way for every message. Anything else (a file, a
/// terminal) is read through tokio's `stdin`.
fn stdin() -> Pin<Box<dyn tokio::io::AsyncRead + Send>> {
    let pipe = duplicate(&std::io::stdin()).filter(|(_, meta)| is_pipe(meta));
    match pipe.and_then(|(fd, _)| tokio::net::unix::pipe::Receiver::from_owned_fd(fd).ok()) {
        Some(pipe) => Box::pin(pipe),
        None => Box::pin(tokio::io::stdin()),
    }
}

/// stdout as an async writer: a pipe written without blocking, as [`stdin`] reads, unless
/// stderr is the same pipe (making the pipe non-blocking would reach the log writer too).
fn stdout() -> Pin<Box<dyn tokio::io::AsyncWrite + Send>> {
    use std::os::unix::fs::MetadataExt;
    // Unknown counts as shared: blocking is the safe side.
    let shared_with_stderr = |out: &std::fs::Metadata| {
        duplicate(&std::io::stderr()).is_none_or(|(_, err)| (out.dev(), out.ino()) == (err.dev(), err.ino()))
    };
    let pipe = duplicate(&std::io::stdout()).filter(|(_, meta)| is_pipe(meta) && !shared_with_stderr(meta));
    match pipe.and_then(|(fd, _)| tokio::net::unix::pipe::Sender::from_owned_fd(fd).ok()) {
        Some(pipe) => Box::pin(pipe),
        None => Box::pin(tokio::io::stdout()),
    }
}

/// A duplicate of `fd` (tokio's pipe ends make theirs non-blocking), and what it is.
fn duplicate(fd: &dyn AsFd) -> Option<(OwnedFd, std::fs::Metadata)> {
    let file = std::fs::File::from(fd.as_fd().try_clone_to_owned().ok()?);
    let meta = file.metadata().ok()?;
    Some((file.into(), meta))
}

fn is_pipe(meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::FileTypeExt;
    meta.file_type().is_fifo()
}

/// Serves one `tools/call` as rmcp's session would: the handler with the request context rmcp
/// builds (id, `_meta`, extensions, peer, a cancellation token), its notes written straight
/// out ([`Direct`]), then its answer, unless the client cancelled the request.
async fn call_directly(
    server: SkillServer,
    peer: Peer<RoleServer>,
    call: JsonRpcRequest<ClientRequest>,
    ct: CancellationToken,
    out: mpsc::UnboundedSender<String>,
    shared: SharedState,
) {
    let JsonRpcRequest { id, mut request, .. } = call;
    let meta = std::mem::take(request.get_meta_mut());
    let mut extensions = std::mem::take(request.extensions_mut());
    extensions.insert(Direct(out.clone()));
    let mut context = RequestContext::new(id.clone(), peer);
    (context.ct, context.meta, context.extensions) = (ct, meta, extensions);
    let answer = match server.handle_request(request, context).await {
        Ok(result) => ServerJsonRpcMessage::response(super::tasks::on_wire(result), id.clone()),
        Err(error) => ServerJsonRpcMessage::error(error, Some(id.clone())),
    };
    let text = serde_json::to_string(&answer).unwrap_or_else(|e| {
        error(serde_json::to_value(&id).unwrap_or_default(), -32603, format!("Internal error: {e}")).to_string()
    });
    let key = serde_json::to_string(&id).unwrap_or_default();
    if lock(&shared).answered(&key) {
        let _ = out.send(text);
    }
}

/// Serves `server` on stdin/stdout until stdin ends.
pub async fn serve(server: SkillServer) -> anyhow::Result<()> {
    let (out, lines) = mpsc::unbounded_channel::<String>();
    let writer = tokio::spawn(write_out(lines));
    let shared = SharedState::default();
    let mut session = Session::start(&server, out.clone(), shared.clone());
    let mut stdin = BufReader::with_capacity(1 << 16, stdin());
    let mut buf = Vec::new();
    // The calls the front serves itself; every one answers before the server ends.
    let mut direct = JoinSet::new();
    while let Some(fits) = read_line(&mut stdin, &mut buf, MAX_MESSAGE_BYTES).await? {
        while direct.try_join_next().is_some() {}
        let line = if fits {
            classify(&buf)
        } else {
            Line::Answer(error(Value::Null, -32700, format!("Parse error: a message over {MAX_MESSAGE_BYTES} bytes")))
        };
        let Some(messages) = forwarded(line, &mut session, &shared, &out, &mut direct).await else { continue };
        for message in messages {
            if !noted(&message, &shared, &out) {
                continue;
            }
            if !session.started && !message.is_request {
                // Before initialization a notification or response would end the session.
                continue;
            }
            if !session.send(&message).await {
                // The session ended (a failed `initialize`): start another for what follows.
                session.finish().await;
                session = Session::start(&server, out.clone(), shared.clone());
                session.send(&message).await;
            }
        }
    }
    tokio::join!(session.finish(), direct.join_all());
    drop(out);
    let _ = writer.await;
    Ok(())
}

/// Writes the answers to stdout, those that finished together in one write.
async fn write_out(mut lines: mpsc::UnboundedReceiver<String>) {
    let mut stdout = stdout();
    while let Some(first) = lines.recv().await {
        let text = gather(first, &mut lines);
        if stdout.write_all(text.as_bytes()).await.is_err() || stdout.flush().await.is_err() {
            return;
        }
    }
}

/// What of `line` goes on to the session (`None`: nothing, it was answered or served here):
/// an id in use is refused, a direct call is served by the front.
async fn forwarded(
    line: Line,
    session: &mut Session,
    shared: &SharedState,
    out: &mpsc::UnboundedSender<String>,
    direct: &mut JoinSet<()>,
) -> Option<Vec<ClientMessage>> {
    let mut message = match line {
        Line::Ignore => return None,
        Line::Answer(answer) => {
            let _ = out.send(answer.to_string());
            return None;
        }
        Line::Batch(items) => return batch(items, shared, out),
        Line::Forward(message) => message,
    };
    if let Some(id) = &message.id
        && lock(shared).open.contains(id)
    {
        let _ = out.send(in_use(id).to_string());
        return None;
    }
    if let Some(call) = message.call.take()
        && let Some(id) = message.id.clone()
    {
        let negotiated = lock(shared).revision.is_some();
        if let Some(peer) = session.direct(&call, negotiated).await {
            let ct = CancellationToken::new();
            {
                let mut shared = lock(shared);
                shared.open.insert(id.clone());
                shared.direct.insert(id, ct.clone());
            }
            let (server, out, shared) = (session.server.clone(), out.clone(), shared.clone());
            direct.spawn(call_directly(server, peer, *call, ct, out, shared));
            return None;
        }
    }
    Some(vec![message])
}

/// Notes `message`'s id as open, and a cancellation of an open request: `false` when the
/// front handled it (a call it serves itself is cancelled here, not in the session).
fn noted(message: &ClientMessage, shared: &SharedState, out: &mpsc::UnboundedSender<String>) -> bool {
    let mut shared = lock(shared);
    if let Some(id) = &message.id {
        shared.open.insert(id.clone());
    }
    if let Some(id) = &message.cancels
        && shared.open.contains(id)
    {
        if let Some(call) = shared.direct.get(id).cloned() {
            // It still ends in `call_directly`, which then sends nothing.
            shared.cancelled.insert(id.clone());
            call.cancel();
            return false;
        }
        // rmcp drops the answer of a request cancelled before it answered, so nothing more
        // is awaited for it (an answer already on its way still goes out: the client
        // ignores it, as the protocol says).
        shared.forget(id, out);
    }
    true
}

/// The answer to a request whose id (as JSON text) names a request still in flight: ids are
/// unique among a client's open requests, and two answers with one id could not be told apart.
fn in_use(id: &str) -> Value {
    let value = serde_json::from_str(id).unwrap_or_default();
    error(value, -32600, format!("Invalid Request: request id {id} is already in flight"))
}

/// At most this much output is gathered into one write.
const MAX_WRITE: usize = 1 << 20;

/// `first` and the lines queued behind it (up to [`MAX_WRITE`] bytes), each ending in a
/// newline; a line alone is not copied.
fn gather(mut first: String, lines: &mut mpsc::UnboundedReceiver<String>) -> String {
    first.push('\n');
    while first.len() < MAX_WRITE {
        let Ok(line) = lines.try_recv() else { break };
        first.push_str(&line);
        first.push('\n');
    }
    first
}

/// The members of a batch to hand to the session, after answering what cannot run; `None`
/// when nothing is left to send. Refused whole outside revision 2025-03-26.
fn batch(items: Vec<Value>, shared: &SharedState, out: &mpsc::UnboundedSender<String>) -> Option<Vec<ClientMessage>> {
    let mut shared = lock(shared);
    let revision = shared.revision.clone();
    if revision.as_deref() != Some(BATCH_REVISION) {
        let named = revision.map_or("before initialization".to_owned(), |r| format!("in protocol revision {r}"));
        let refusal =
            error(Value::Null, -32600, format!("Invalid Request: JSON-RPC batches are not supported {named}"));
        let _ = out.send(refusal.to_string());
        return None;
    }
    let mut answers = Vec::new();
    let mut messages = Vec::new();
    let mut waiting = HashSet::new();
    for item in items {
        match classify_message(item) {
            Line::Forward(message) => match &message.id {
                Some(id) if shared.open.contains(id) || !waiting.insert(id.clone()) => answers.push(in_use(id)),
                _ => messages.push(message),
            },
            Line::Answer(answer) => answers.push(answer),
            Line::Batch(_) | Line::Ignore => {}
        }
    }
    if waiting.is_empty() {
        if !answers.is_empty() {
            let _ = out.send(Value::Array(answers).to_string());
        }
    } else {
        shared.batches.push(Batch { waiting, answers });
    }
    (!messages.is_empty()).then_some(messages)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(line: &str) -> Value {
        match classify(line.as_bytes()) {
            Line::Answer(answer) => answer,
            other => panic!("{line}: {other:?}"),
        }
    }

    #[test]
    fn every_undecodable_message_gets_the_error_the_protocol_prescribes() {
        for (line, id, code) in [
            ("not json", Value::Null, -32700),
            ("{\"jsonrpc\":\"2.0\",\"id\":1", Value::Null, -32700),
            ("[]", Value::Null, -32600),
            ("42", Value::Null, -32600),
            (r#"{"id":3,"method":"ping"}"#, json!(3), -32600),
            (r#"{"jsonrpc":"2.0","id":4}"#, json!(4), -32600),
            (r#"{"jsonrpc":"2.0","id":{"x":1},"method":"ping"}"#, Value::Null, -32600),
            (r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{}}"#, json!(7), -32602),
            (
                r#"{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"x","arguments":[1]}}"#,
                json!(8),
                -32602,
            ),
        ] {
            let answer = answer(line);
            assert_eq!(answer["id"], id, "{line}: {answer}");
            assert_eq!(answer["error"]["code"], code, "{line}: {answer}");
        }
    }

    #[test]
    fn a_method_2026_07_28_removed_is_not_found_at_that_revision_only() {
        let at = |method: &str, revision: &str| {
            let meta = json!({META_VERSION: revision, "io.modelcontextprotocol/clientCapabilities": {}});
            json!({"jsonrpc": "2.0", "id": 5, "method": method, "params": {"_meta": meta}}).to_string()
        };
        for method in REMOVED_WHEN_STATELESS {
            let answer = answer(&at(method, STATELESS_REVISION));
            assert_eq!((answer["id"].clone(), answer["error"]["code"].clone()), (json!(5), json!(-32601)), "{answer}");
        }
        // Before it, `ping` is served (and a notification is never answered).
        assert!(matches!(classify(at("ping", "2025-11-25").as_bytes()), Line::Forward(_)));
        let note = json!({"jsonrpc": "2.0", "method": "ping", "params": {"_meta": {META_VERSION: STATELESS_REVISION}}});
        assert!(!matches!(classify(note.to_string().as_bytes()), Line::Answer(_)), "a notification is never answered");
    }

    #[test]
    fn good_messages_go_to_the_session_and_silent_ones_are_ignored() {
        let Line::Forward(ping) = classify(br#"{"jsonrpc":"2.0","id":9,"method":"ping"}"#) else { panic!() };
        assert!(ping.is_request && ping.id.as_deref() == Some("9"));
        let Line::Forward(note) = classify(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#) else {
            panic!()
        };
        assert!(!note.is_request && note.id.is_none());
        for line in ["", "  \t", r#"{"jsonrpc":"2.0","method":"no/such/notification","params":1}"#] {
            assert_eq!(classify(line.as_bytes()), Line::Ignore, "{line:?}");
        }
        assert!(matches!(classify(b"[1, 2]"), Line::Batch(items) if items.len() == 2));
    }

    #[test]
    fn a_request_decoded_once_carries_the_facts_the_long_way_finds() {
        for line in [
            r#"{"jsonrpc":"2.0","id":"a\"b","method":"tools/call","params":{"name":"x","arguments":{"k":1}}}"#,
            r#"{"jsonrpc":"2.0","id":12,"method":"tools/list"}"#,
        ] {
            let fast = classify_request(line.as_bytes()).expect("a well-formed request");
            let Line::Forward(slow) = classify_message(serde_json::from_str(line).unwrap()) else { panic!("{line}") };
            assert_eq!((&fast.id, &fast.method, fast.is_request), (&slow.id, &slow.method, slow.is_request));
            assert_eq!(fast.text, line, "forwarded as written");
        }
        // A known method whose params do not fit goes the long way, which answers it.
        assert!(classify_request(br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{}}"#).is_none());
    }

    #[test]
    fn a_call_decoded_straight_is_what_rmcp_decodes() {
        let rmcp = |line: &str| match serde_json::from_str::<ClientJsonRpcMessage>(line) {
            Ok(ClientJsonRpcMessage::Request(request)) => Some(request),
            _ => None,
        };
        let facts = |request: &JsonRpcRequest<ClientRequest>| {
            let ClientRequest::CallToolRequest(call) = &request.request else { panic!("not a call") };
            let params = serde_json::to_value(&call.params).unwrap();
            (request.id.clone(), params, request.request.get_meta().clone(), call.extensions.len())
        };
        for line in [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"e","arguments":{"a":[1,{"b":null}]}}}"#,
            r#"{"jsonrpc":"2.0","id":"x\"y","method":"tools\/call","params":{"name":"e"}}"#,
            r#"{"params":{"_meta":{"progressToken":7,"k":"v"},"name":"e","arguments":{}},"method":"tools/call","id":2,"jsonrpc":"2.0"}"#,
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"e","_meta":null,"requestState":"s"}}"#,
        ] {
            let straight = decode_call(line.as_bytes()).unwrap_or_else(|| panic!("decoded straight: {line}"));
            let theirs = rmcp(line).unwrap_or_else(|| panic!("rmcp decodes {line}"));
            assert_eq!(facts(&straight), facts(&theirs), "{line}");
        }
        // Anything else takes rmcp's way: other methods, other members, ids and versions
        // rmcp refuses, params that do not fit, a `_meta` that is not an object.
        for line in [
            r#"{"jsonrpc":"2.0","id":4,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"e"},"extra":1}"#,
            r#"{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"e"}}"#,
            r#"{"jsonrpc":"1.0","id":6,"method":"tools/call","params":{"name":"e"}}"#,
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call"}"#,
            r#"{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"arguments":{}}}"#,
            r#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"e","_meta":5}}"#,
            r#"{"jsonrpc":"2.0","id":10,"id":11,"method":"tools/call","params":{"name":"e"}}"#,
        ] {
            assert!(decode_call(line.as_bytes()).is_none(), "{line}");
        }
        // And the front classifies a call the same either way.
        let line = r#"{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"e","arguments":{"k":1}}}"#;
        let Line::Forward(message) = classify(line.as_bytes()) else { panic!("forwarded") };
        assert_eq!((message.id.as_deref(), message.method.as_deref()), (Some("12"), Some("tools/call")));
        assert!(message.call.is_some());
    }

    #[test]
    fn answers_finished_together_are_written_together() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        tx.send("b".to_owned()).unwrap();
        tx.send("c".to_owned()).unwrap();
        assert_eq!(gather("a".to_owned(), &mut rx), "a\nb\nc\n");
        assert!(rx.try_recv().is_err());
    }

    #[tokio::test]
    async fn an_overlong_line_is_dropped_and_the_next_one_read() {
        let input = format!("{}\nshort\nlast", "x".repeat(100));
        let mut from = BufReader::with_capacity(8, input.as_bytes());
        let mut buf = Vec::new();
        assert_eq!(read_line(&mut from, &mut buf, 10).await.unwrap(), Some(false));
        assert_eq!(read_line(&mut from, &mut buf, 10).await.unwrap(), Some(true));
        assert_eq!(buf, b"short");
        assert_eq!(read_line(&mut from, &mut buf, 10).await.unwrap(), Some(true));
        assert_eq!(buf, b"last");
        assert_eq!(read_line(&mut from, &mut buf, 10).await.unwrap(), None);
    }
}
