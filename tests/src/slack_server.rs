//! A scripted Slack on loopback, for the Slack adapter's tests: the Web API over HTTP
//! (`{api_url}<method>`, bearer tokens, Slack's `ok`/`error` answers, 429 with
//! `Retry-After`) and Socket Mode over a real WebSocket (`apps.connections.open` hands out a
//! single-use URL; `hello`, envelopes, acknowledgements, `disconnect`). The test plays the
//! people (mentions, messages, clicks, modal submissions) and reads the channels as they see
//! them.

use axum::Router;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// The bot's user id, as `auth.test` reports it.
pub const BOT_USER: &str = "U0BOT";

/// One Web API call the bot made.
#[derive(Debug, Clone)]
pub struct Call {
    /// The method.
    pub method: String,
    /// Its parameters (JSON body, form fields or query).
    pub params: Value,
    /// `bot` or `app`.
    pub token_kind: &'static str,
    /// When it arrived.
    pub at: Instant,
}

/// A message the bot posted, as the channel shows it now.
#[derive(Debug, Clone)]
pub struct SlackMessage {
    /// Its timestamp (id).
    pub ts: String,
    /// The thread it is in.
    pub thread_ts: Option<String>,
    /// Its current text.
    pub text: String,
    /// Its current blocks.
    pub blocks: Option<Value>,
    /// How often it was updated.
    pub edits: u32,
}

/// What `conversations.info` says of a channel.
#[derive(Debug, Clone, Copy, Default)]
pub struct ChannelFlags {
    /// `is_shared`.
    pub is_shared: bool,
    /// `is_ext_shared`.
    pub is_ext_shared: bool,
    /// `is_pending_ext_shared`.
    pub is_pending_ext_shared: bool,
    /// `is_org_shared`.
    pub is_org_shared: bool,
}

/// An envelope sent to the bot.
#[derive(Debug, Clone)]
pub struct Sent {
    /// Its envelope id (what the acknowledgement names).
    pub envelope_id: String,
    /// The event's id (the same on a redelivery).
    pub event_id: String,
    /// The message's timestamp.
    pub ts: String,
}

enum Command {
    Send(String),
    Drop,
}

#[derive(Default)]
struct Inner {
    calls: Vec<Call>,
    channels: BTreeMap<String, Vec<SlackMessage>>,
    counter: u64,
    ephemerals: Vec<(String, String, String)>,
    views: Vec<Value>,
    triggers: HashMap<String, Instant>,
    reactions: HashMap<(String, String), Vec<String>>,
    flags: HashMap<String, ChannelFlags>,
    info_failures: HashMap<String, usize>,
    info_lookups: HashMap<String, usize>,
    rate_limits: HashMap<String, VecDeque<u64>>,
    revoked: bool,
    failing_connections: usize,
    tickets: HashSet<String>,
    connections: usize,
    socket: Option<mpsc::UnboundedSender<Command>>,
    backlog: Vec<String>,
    acks: Vec<(String, Option<Value>, Instant)>,
    bots: HashSet<String>,
    /// Every events_api envelope by event id, for redelivery.
    events: HashMap<String, Value>,
    envelopes_sent: usize,
}

impl Inner {
    fn next(&mut self) -> u64 {
        self.counter += 1;
        self.counter
    }

    fn ts(&mut self) -> String {
        format!("1700000000.{:06}", self.next())
    }
}

struct Shared {
    inner: Mutex<Inner>,
    port: u16,
}

/// The running server; it stops with the test's runtime.
pub struct SlackServer {
    shared: Arc<Shared>,
}

impl SlackServer {
    /// The bot token it accepts.
    pub const BOT_TOKEN: &'static str = "xoxb-1-test";
    /// The app-level token it accepts.
    pub const APP_TOKEN: &'static str = "xapp-1-test";

    /// Serves on a free port of 127.0.0.1.
    pub async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let shared = Arc::new(Shared { inner: Mutex::default(), port });
        let app = Router::new()
            .route("/api/{method}", axum::routing::any(web_api))
            .route("/link/", axum::routing::get(link))
            .with_state(shared.clone());
        tokio::spawn(async move { axum::serve(listener, app).await });
        SlackServer { shared }
    }

    /// The Web API base to configure (`base_url`).
    pub fn api_url(&self) -> String {
        format!("http://127.0.0.1:{}/api/", self.shared.port)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.shared.inner.lock().unwrap()
    }

    /// Sends a frame on the open socket (or keeps it for the next one).
    fn send(&self, frame: Value) {
        let text = frame.to_string();
        let mut inner = self.lock();
        inner.envelopes_sent += 1;
        match &inner.socket {
            Some(socket) if socket.send(Command::Send(text.clone())).is_ok() => {}
            _ => inner.backlog.push(text),
        }
    }

    fn event(&self, event: Value) -> Sent {
        let (envelope_id, event_id) = {
            let mut inner = self.lock();
            (format!("env-{}", inner.next()), format!("Ev{:08}", inner.next()))
        };
        let ts = event["ts"].as_str().unwrap_or_default().to_owned();
        let envelope = json!({
            "envelope_id": envelope_id,
            "type": "events_api",
            "accepts_response_payload": false,
            "retry_attempt": 0,
            "retry_reason": "",
            "payload": {
                "token": "verif",
                "team_id": "T0TEAM",
                "api_app_id": "A0APP",
                "type": "event_callback",
                "event_id": event_id,
                "event_time": 1_700_000_000,
                "authorizations": [{"team_id": "T0TEAM", "user_id": BOT_USER, "is_bot": true}],
                "event": event,
            }
        });
        self.lock().events.insert(event_id.clone(), envelope.clone());
        self.send(envelope);
        Sent { envelope_id, event_id, ts }
    }

    fn new_ts(&self) -> String {
        self.lock().ts()
    }

    /// `@bot text` in `channel` by `user` (an `app_mention` event).
    pub fn mention(&self, channel: &str, user: &str, text: &str) -> Sent {
        let ts = self.new_ts();
        self.event(json!({"type": "app_mention", "user": user, "text": format!("<@{BOT_USER}> {text}"), "ts": ts,
            "channel": channel, "event_ts": ts, "team": "T0TEAM"}))
    }

    /// A mention as Slack delivers it in a channel: `app_mention` and `message`, two events.
    pub fn mention_with_message(&self, channel: &str, user: &str, text: &str) -> (Sent, Sent) {
        let ts = self.new_ts();
        let text = format!("<@{BOT_USER}> {text}");
        let mention = self
            .event(json!({"type": "app_mention", "user": user, "text": text, "ts": ts, "channel": channel,
            "event_ts": ts}));
        let message = self.event(json!({"type": "message", "user": user, "text": text, "ts": ts, "channel": channel,
            "channel_type": channel_type(channel), "event_ts": ts}));
        (mention, message)
    }

    /// A plain message by `user`, in a thread when `thread_ts` is given.
    pub fn message(&self, channel: &str, user: &str, text: &str, thread_ts: Option<&str>) -> Sent {
        let ts = self.new_ts();
        let mut event = json!({"type": "message", "user": user, "text": text, "ts": ts, "channel": channel,
            "channel_type": channel_type(channel), "event_ts": ts});
        if let Some(thread) = thread_ts {
            event["thread_ts"] = json!(thread);
        }
        self.event(event)
    }

    /// A message by another bot.
    pub fn bot_message(&self, channel: &str, bot_id: &str, text: &str) -> Sent {
        let ts = self.new_ts();
        self.event(json!({"type": "message", "subtype": "bot_message", "bot_id": bot_id, "text": text, "ts": ts,
            "channel": channel, "channel_type": channel_type(channel)}))
    }

    /// A message by the bot itself.
    pub fn own_message(&self, channel: &str, text: &str) -> Sent {
        let ts = self.new_ts();
        self.event(json!({"type": "message", "user": BOT_USER, "bot_id": "B0BOT", "text": text, "ts": ts,
            "channel": channel, "channel_type": channel_type(channel)}))
    }

    /// An edit of message `ts`.
    pub fn edit(&self, channel: &str, ts: &str, text: &str) -> Sent {
        let now = self.new_ts();
        self.event(json!({"type": "message", "subtype": "message_changed", "ts": now, "channel": channel,
            "channel_type": channel_type(channel), "message": {"type": "message", "user": "U1", "text": text, "ts": ts}}))
    }

    /// A deletion of message `ts`.
    pub fn delete(&self, channel: &str, ts: &str) -> Sent {
        let now = self.new_ts();
        self.event(json!({"type": "message", "subtype": "message_deleted", "ts": now, "deleted_ts": ts,
            "channel": channel, "channel_type": channel_type(channel)}))
    }

    /// The event of `sent` again, as Slack redelivers it; the new envelope id.
    pub fn redeliver(&self, sent: &Sent, attempt: u32) -> String {
        let mut envelope = self.lock().events.get(&sent.event_id).cloned().expect("an event this server sent");
        let envelope_id = format!("env-{}", self.lock().next());
        envelope["envelope_id"] = json!(envelope_id);
        envelope["retry_attempt"] = json!(attempt);
        envelope["retry_reason"] = json!("timeout");
        self.send(envelope);
        envelope_id
    }

    fn interactive(&self, payload: Value, accepts_response: bool) -> String {
        let envelope_id = format!("env-{}", self.lock().next());
        self.send(
            json!({"envelope_id": envelope_id, "type": "interactive", "accepts_response_payload": accepts_response,
            "payload": payload}),
        );
        envelope_id
    }

    /// A click by `user` on button `action_id` (carrying `value`) of message `message_ts`.
    pub fn click(&self, channel: &str, user: &str, message_ts: &str, action_id: &str, value: &str) -> String {
        let (trigger, message) = {
            let mut inner = self.lock();
            let trigger = format!("{}.{}.trigger", inner.next(), inner.next());
            inner.triggers.insert(trigger.clone(), Instant::now());
            let message = inner.channels.get(channel).and_then(|m| m.iter().find(|m| m.ts == message_ts)).cloned();
            (trigger, message)
        };
        let block_id = message
            .as_ref()
            .and_then(|m| m.blocks.as_ref())
            .and_then(Value::as_array)
            .and_then(|blocks| {
                blocks
                    .iter()
                    .find(|b| b["elements"].as_array().is_some_and(|e| e.iter().any(|e| e["action_id"] == action_id)))
            })
            .and_then(|b| b["block_id"].as_str())
            .unwrap_or("b")
            .to_owned();
        let message = message.map_or(json!({"ts": message_ts}), |m| {
            json!({"type": "message", "user": BOT_USER, "ts": m.ts, "thread_ts": m.thread_ts, "text": m.text, "blocks": m.blocks})
        });
        self.interactive(
            json!({
                "type": "block_actions",
                "user": {"id": user, "username": "ada", "name": "ada", "team_id": "T0TEAM"},
                "api_app_id": "A0APP",
                "token": "verif",
                "trigger_id": trigger,
                "team": {"id": "T0TEAM"},
                "container": {"type": "message", "message_ts": message_ts, "channel_id": channel, "is_ephemeral": false},
                "channel": {"id": channel, "name": "c"},
                "message": message,
                "response_url": format!("http://127.0.0.1:{}/response/1", self.shared.port),
                "actions": [{"type": "button", "action_id": action_id, "block_id": block_id, "value": value,
                    "action_ts": "1700000000.1"}],
            }),
            false,
        )
    }

    /// A click by a bot user (one `users.info` reports as a bot: see [`Self::add_bot_user`]).
    pub fn click_as_bot(
        &self,
        channel: &str,
        bot_user: &str,
        message_ts: &str,
        action_id: &str,
        value: &str,
    ) -> String {
        self.add_bot_user(bot_user);
        self.click(channel, bot_user, message_ts, action_id, value)
    }

    /// Makes `users.info` report `id` as a bot.
    pub fn add_bot_user(&self, id: &str) {
        self.lock().bots.insert(id.to_owned());
    }

    /// Submits opened view `view_id` with `value` typed into each text input.
    pub fn submit_view(&self, view_id: &str, user: &str, value: &str) -> String {
        let view = self.lock().views.iter().find(|v| v["id"] == view_id).cloned().expect("a view the bot opened");
        let mut values = serde_json::Map::new();
        for (n, block) in view["blocks"].as_array().cloned().unwrap_or_default().iter().enumerate() {
            if block["type"] != "input" || block["element"]["type"] != "plain_text_input" {
                continue;
            }
            let block_id = block["block_id"].as_str().map_or_else(|| format!("blk{n}"), str::to_owned);
            let action_id = block["element"]["action_id"].as_str().map_or_else(|| format!("act{n}"), str::to_owned);
            values.insert(block_id, json!({ action_id: {"type": "plain_text_input", "value": value} }));
        }
        let mut submitted = view.clone();
        submitted["state"] = json!({ "values": values });
        self.interactive(
            json!({"type": "view_submission", "team": {"id": "T0TEAM"}, "user": {"id": user, "username": "ada"},
                "api_app_id": "A0APP", "token": "verif", "trigger_id": "1.2.submit", "view": submitted}),
            true,
        )
    }

    /// Sends `text` as one frame, as written (malformed frames, unknown envelopes).
    pub fn send_raw(&self, text: &str) {
        let mut inner = self.lock();
        match &inner.socket {
            Some(socket) if socket.send(Command::Send(text.to_owned())).is_ok() => {}
            _ => inner.backlog.push(text.to_owned()),
        }
    }

    /// Sends `disconnect` with `reason` on the open socket.
    pub fn disconnect(&self, reason: &str) {
        self.send(json!({"type": "disconnect", "reason": reason, "debug_info": {"host": "applink-test"}}));
    }

    /// Drops the open socket without a close frame.
    pub fn drop_socket(&self) {
        if let Some(socket) = self.lock().socket.take() {
            let _ = socket.send(Command::Drop);
        }
    }

    /// Sockets accepted so far.
    pub fn connections(&self) -> usize {
        self.lock().connections
    }

    /// Whether a socket is open now.
    pub fn connected(&self) -> bool {
        self.lock().socket.as_ref().is_some_and(|s| !s.is_closed())
    }

    /// Waits until `total` sockets were accepted and one is open.
    pub async fn wait_connected(&self, total: usize, timeout: Duration) {
        let started = Instant::now();
        while self.connections() < total || !self.connected() {
            assert!(
                started.elapsed() < timeout,
                "{} connections, wanted {total}; calls: {:#?}",
                self.connections(),
                self.calls()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Every acknowledgement: envelope id, payload, when.
    pub fn acks(&self) -> Vec<(String, Option<Value>, Instant)> {
        self.lock().acks.clone()
    }

    /// Waits for the acknowledgement of `envelope_id`; its payload.
    pub async fn wait_for_ack(&self, envelope_id: &str, timeout: Duration) -> Option<Value> {
        let started = Instant::now();
        loop {
            if let Some((_, payload, _)) = self.acks().into_iter().find(|(id, _, _)| id == envelope_id) {
                return payload;
            }
            assert!(started.elapsed() < timeout, "no ack of {envelope_id}; acks: {:?}", self.acks());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Envelopes and frames sent so far.
    pub fn events_sent(&self) -> usize {
        self.lock().envelopes_sent
    }

    /// Sets what `conversations.info` says of `channel`.
    pub fn set_channel(&self, channel: &str, flags: ChannelFlags) {
        self.lock().flags.insert(channel.to_owned(), flags);
    }

    /// Makes the next `n` lookups of `channel` fail (`channel_not_found`).
    pub fn fail_info(&self, channel: &str, n: usize) {
        self.lock().info_failures.insert(channel.to_owned(), n);
    }

    /// How often `channel` was looked up.
    pub fn info_lookups(&self, channel: &str) -> usize {
        self.lock().info_lookups.get(channel).copied().unwrap_or(0)
    }

    /// Makes the next call of `method` answer 429 with `Retry-After: secs`.
    pub fn rate_limit_next(&self, method: &str, secs: u64) {
        self.lock().rate_limits.entry(method.to_owned()).or_default().push_back(secs);
    }

    /// Makes the next `n` `apps.connections.open` fail.
    pub fn fail_connections(&self, n: usize) {
        self.lock().failing_connections = n;
    }

    /// From now on every call answers `token_revoked`.
    pub fn revoke(&self) {
        self.lock().revoked = true;
    }

    /// Every Web API call so far.
    pub fn calls(&self) -> Vec<Call> {
        self.lock().calls.clone()
    }

    /// The calls of `method`.
    pub fn calls_to(&self, method: &str) -> Vec<Call> {
        self.calls().into_iter().filter(|c| c.method == method).collect()
    }

    /// Waits for a call of `method` whose parameters satisfy `pred`.
    pub async fn wait_for_call(&self, method: &str, pred: impl Fn(&Value) -> bool, timeout: Duration) -> Call {
        let started = Instant::now();
        loop {
            if let Some(call) = self.calls_to(method).into_iter().find(|c| pred(&c.params)) {
                return call;
            }
            assert!(started.elapsed() < timeout, "no matching {method} call; calls: {:#?}", self.calls());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The bot's messages in `channel`, as they stand.
    pub fn messages(&self, channel: &str) -> Vec<SlackMessage> {
        self.lock().channels.get(channel).cloned().unwrap_or_default()
    }

    /// Waits for a bot message in `channel` that satisfies `pred`.
    pub async fn wait_for_message(
        &self,
        channel: &str,
        pred: impl Fn(&SlackMessage) -> bool,
        timeout: Duration,
    ) -> SlackMessage {
        let started = Instant::now();
        loop {
            if let Some(message) = self.messages(channel).into_iter().find(|m| pred(m)) {
                return message;
            }
            assert!(started.elapsed() < timeout, "no matching message in {channel}: {:#?}", self.messages(channel));
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The ephemeral messages: channel, user, text.
    pub fn ephemerals(&self) -> Vec<(String, String, String)> {
        self.lock().ephemerals.clone()
    }

    /// The views the bot opened (with their ids).
    pub fn views(&self) -> Vec<Value> {
        self.lock().views.clone()
    }

    /// The reactions on message `ts` now.
    pub fn reactions(&self, channel: &str, ts: &str) -> Vec<String> {
        self.lock().reactions.get(&(channel.to_owned(), ts.to_owned())).cloned().unwrap_or_default()
    }
}

fn channel_type(channel: &str) -> &'static str {
    match channel.chars().next() {
        Some('D') => "im",
        Some('G') => "group",
        _ => "channel",
    }
}

fn answer(value: Value) -> Response {
    (StatusCode::OK, axum::Json(value)).into_response()
}

fn error(code: &str) -> Response {
    answer(json!({"ok": false, "error": code}))
}

/// The request's parameters: a JSON body, form fields, or the query.
fn params(headers: &HeaderMap, uri: &Uri, body: &[u8]) -> Value {
    let mut params = json!({});
    let json = headers.get("content-type").and_then(|v| v.to_str().ok()).is_some_and(|t| t.contains("json"));
    if json {
        if let Ok(Value::Object(map)) = serde_json::from_slice::<Value>(body) {
            params = Value::Object(map);
        }
    } else if let Ok(text) = std::str::from_utf8(body)
        && let Ok(uri) = format!("/?{text}").parse::<Uri>()
        && let Ok(Query(form)) = Query::<HashMap<String, String>>::try_from_uri(&uri)
    {
        params = json!(form);
    }
    if let Ok(Query(query)) = Query::<HashMap<String, String>>::try_from_uri(uri) {
        for (key, value) in query {
            params[key] = json!(value);
        }
    }
    // Form fields carry JSON as text (`blocks`, `view`).
    for key in ["blocks", "view"] {
        if let Some(text) = params[key].as_str().map(str::to_owned)
            && let Ok(value) = serde_json::from_str::<Value>(&text)
        {
            params[key] = value;
        }
    }
    params
}

async fn web_api(
    State(shared): State<Arc<Shared>>,
    Path(method): Path<String>,
    headers: HeaderMap,
    uri: Uri,
    body: axum::body::Bytes,
) -> Response {
    let params = params(&headers, &uri, &body);
    let token = headers.get("authorization").and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer "));
    let token_kind = match token {
        Some(SlackServer::BOT_TOKEN) => "bot",
        Some(SlackServer::APP_TOKEN) => "app",
        Some(_) => return error("invalid_auth"),
        None => return error("not_authed"),
    };
    let mut inner = shared.inner.lock().unwrap();
    inner.calls.push(Call { method: method.clone(), params: params.clone(), token_kind, at: Instant::now() });
    if inner.revoked {
        return error("token_revoked");
    }
    if let Some(secs) = inner.rate_limits.get_mut(&method).and_then(VecDeque::pop_front) {
        let mut response = answer(json!({"ok": false, "error": "ratelimited"}));
        *response.status_mut() = StatusCode::TOO_MANY_REQUESTS;
        response.headers_mut().insert("retry-after", secs.to_string().parse().unwrap());
        return response;
    }
    let app_method = method == "apps.connections.open";
    if app_method != (token_kind == "app") {
        return error("not_allowed_token_type");
    }
    let text = |key: &str| params[key].as_str().unwrap_or_default().to_owned();
    match method.as_str() {
        "auth.test" => answer(json!({"ok": true, "url": "https://test.slack.com/", "team": "Test", "user": "skillbot",
            "team_id": "T0TEAM", "user_id": BOT_USER, "bot_id": "B0BOT"})),
        "apps.connections.open" => {
            if inner.failing_connections > 0 {
                inner.failing_connections -= 1;
                return error("internal_error");
            }
            let ticket = format!("t{}", inner.next());
            inner.tickets.insert(ticket.clone());
            answer(
                json!({"ok": true, "url": format!("ws://127.0.0.1:{}/link/?ticket={ticket}&app_id=A0APP", shared.port)}),
            )
        }
        "chat.postMessage" => {
            if let Err(e) = check_message(&params) {
                return error(e);
            }
            let ts = inner.ts();
            let channel = text("channel");
            let thread_ts = params["thread_ts"].as_str().map(str::to_owned);
            let message = SlackMessage {
                ts: ts.clone(),
                thread_ts: thread_ts.clone(),
                text: text("text"),
                blocks: params.get("blocks").cloned(),
                edits: 0,
            };
            inner.channels.entry(channel.clone()).or_default().push(message);
            answer(json!({"ok": true, "channel": channel, "ts": ts, "message": {"type": "message", "user": BOT_USER,
                "bot_id": "B0BOT", "text": text("text"), "ts": ts, "thread_ts": thread_ts}}))
        }
        "chat.update" => {
            if let Err(e) = check_message(&params) {
                return error(e);
            }
            let (channel, ts) = (text("channel"), text("ts"));
            let Some(message) = inner.channels.get_mut(&channel).and_then(|m| m.iter_mut().find(|m| m.ts == ts)) else {
                return error("message_not_found");
            };
            message.text = text("text");
            if let Some(blocks) = params.get("blocks") {
                message.blocks = Some(blocks.clone());
            }
            message.edits += 1;
            answer(json!({"ok": true, "channel": channel, "ts": ts, "text": message.text}))
        }
        "chat.postEphemeral" => {
            let entry = (text("channel"), text("user"), text("text"));
            inner.ephemerals.push(entry);
            let ts = inner.ts();
            answer(json!({"ok": true, "message_ts": ts}))
        }
        "views.open" => {
            let trigger = text("trigger_id");
            let fresh = inner.triggers.get(&trigger).is_some_and(|at| at.elapsed() < Duration::from_secs(3));
            if !fresh {
                return error("expired_trigger_id");
            }
            let mut view = params["view"].clone();
            view["id"] = json!(format!("V{}", inner.next()));
            inner.views.push(view.clone());
            answer(json!({"ok": true, "view": view}))
        }
        "reactions.add" | "reactions.remove" => {
            let key = (text("channel"), text("timestamp"));
            let name = text("name");
            let reactions = inner.reactions.entry(key).or_default();
            let present = reactions.contains(&name);
            match (method.as_str(), present) {
                ("reactions.add", true) => error("already_reacted"),
                ("reactions.add", false) => {
                    reactions.push(name);
                    answer(json!({"ok": true}))
                }
                (_, false) => error("no_reaction"),
                (_, true) => {
                    reactions.retain(|r| *r != name);
                    answer(json!({"ok": true}))
                }
            }
        }
        "conversations.info" => {
            let channel = text("channel");
            *inner.info_lookups.entry(channel.clone()).or_default() += 1;
            if let Some(left) = inner.info_failures.get_mut(&channel).filter(|n| **n > 0) {
                *left -= 1;
                return error("channel_not_found");
            }
            let flags = inner.flags.get(&channel).copied().unwrap_or_default();
            answer(json!({"ok": true, "channel": {"id": channel, "name": "c", "is_channel": true,
                "is_shared": flags.is_shared, "is_ext_shared": flags.is_ext_shared,
                "is_pending_ext_shared": flags.is_pending_ext_shared, "is_org_shared": flags.is_org_shared}}))
        }
        "users.info" => {
            let user = text("user");
            let is_bot = inner.bots.contains(&user) || user == BOT_USER;
            answer(json!({"ok": true, "user": {"id": user, "name": "someone", "is_bot": is_bot, "deleted": false}}))
        }
        _ => error("unknown_method"),
    }
}

/// Slack's limits on a message: text or blocks, 40,000 characters, 50 blocks, 3,000 per section.
fn check_message(params: &Value) -> Result<(), &'static str> {
    let text = params["text"].as_str().unwrap_or_default();
    let blocks = params.get("blocks").and_then(Value::as_array);
    if text.is_empty() && blocks.is_none_or(Vec::is_empty) {
        return Err("no_text");
    }
    if text.chars().count() > 40_000 {
        return Err("msg_too_long");
    }
    if let Some(blocks) = blocks {
        let long = blocks.iter().any(|b| b["text"]["text"].as_str().is_some_and(|t| t.chars().count() > 3000));
        if blocks.len() > 50 || long {
            return Err("invalid_blocks");
        }
    }
    Ok(())
}

async fn link(
    State(shared): State<Arc<Shared>>,
    Query(query): Query<HashMap<String, String>>,
    upgrade: WebSocketUpgrade,
) -> Response {
    let ticket = query.get("ticket").cloned().unwrap_or_default();
    if !shared.inner.lock().unwrap().tickets.remove(&ticket) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    upgrade.on_upgrade(move |socket| serve_socket(shared, socket))
}

async fn serve_socket(shared: Arc<Shared>, socket: WebSocket) {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let backlog = {
        let mut inner = shared.inner.lock().unwrap();
        inner.connections += 1;
        inner.socket = Some(tx);
        std::mem::take(&mut inner.backlog)
    };
    let (mut sink, mut stream) = socket.split();
    let hello = json!({"type": "hello", "num_connections": 1, "debug_info": {"host": "applink-test", "build_number": 1,
        "approximate_connection_time": 18060}, "connection_info": {"app_id": "A0APP"}});
    if sink.send(Message::Text(hello.to_string().into())).await.is_err() {
        return;
    }
    for frame in backlog {
        if sink.send(Message::Text(frame.into())).await.is_err() {
            return;
        }
    }
    loop {
        tokio::select! {
            command = rx.recv() => match command {
                Some(Command::Send(text)) => {
                    if sink.send(Message::Text(text.into())).await.is_err() {
                        return;
                    }
                }
                // Dropping both halves closes the connection without a close frame.
                Some(Command::Drop) | None => return,
            },
            frame = stream.next() => match frame {
                Some(Ok(Message::Text(text))) => {
                    if let Ok(ack) = serde_json::from_str::<Value>(text.as_str())
                        && let Some(id) = ack["envelope_id"].as_str()
                    {
                        let entry = (id.to_owned(), ack.get("payload").cloned(), Instant::now());
                        shared.inner.lock().unwrap().acks.push(entry);
                    }
                }
                Some(Ok(Message::Close(_))) | Some(Err(_)) | None => return,
                Some(Ok(_)) => {}
            },
        }
    }
}
