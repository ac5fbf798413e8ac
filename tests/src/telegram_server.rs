//! A scripted Telegram Bot API on loopback, for the Telegram adapter's tests: the bot calls
//! `{base_url}/bot<token>/<method>` as it would call Telegram, and the test plays the people
//! in the chats (messages, replies, button presses) and reads what the bot made of them.
//!
//! What it checks as Telegram does: the token, `getUpdates` offsets (updates below the offset
//! are confirmed and forgotten; a newer long poll ends the older with 409), message length
//! (4,096 characters after entity parsing), HTML markup (allowed tags, balanced, entities),
//! edits of unknown or unchanged messages, callback query ids. MarkdownV2 is checked only
//! roughly: a reserved character not escaped with `\` and not part of a formatting pair.

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// One request the bot made.
#[derive(Debug, Clone)]
pub struct Call {
    /// The method.
    pub method: String,
    /// Its parameters (query and JSON body merged).
    pub params: Value,
    /// When it arrived.
    pub at: Instant,
}

/// A message the bot sent, as the chat shows it now.
#[derive(Debug, Clone)]
pub struct BotMessage {
    /// Its id.
    pub message_id: i64,
    /// Its current text (as sent: markup included).
    pub text: String,
    /// Its current parse mode.
    pub parse_mode: Option<String>,
    /// Its current inline keyboard.
    pub reply_markup: Option<Value>,
    /// The message it replies to.
    pub reply_to: Option<i64>,
    /// How often it was edited.
    pub edits: u32,
}

impl BotMessage {
    /// The `callback_data` of each button of its inline keyboard, row by row.
    pub fn buttons(&self) -> Vec<String> {
        let keyboard = self.reply_markup.as_ref().and_then(|k| k["inline_keyboard"].as_array().cloned());
        keyboard
            .unwrap_or_default()
            .iter()
            .filter_map(|row| row.as_array())
            .flatten()
            .filter_map(|button| button["callback_data"].as_str().map(str::to_owned))
            .collect()
    }
}

#[derive(Default)]
struct Inner {
    updates: VecDeque<Value>,
    next_update: i64,
    next_message: i64,
    next_query: u64,
    /// The running long poll, ended (409) when a newer one starts.
    poll: u64,
    offsets: Vec<i64>,
    calls: Vec<Call>,
    chats: BTreeMap<i64, Vec<BotMessage>>,
    failures: HashMap<String, VecDeque<(u16, Value)>>,
    queries: HashSet<String>,
    answered: Vec<(String, Value)>,
}

struct Shared {
    token: String,
    inner: Mutex<Inner>,
    arrived: Notify,
}

/// The running server; it stops with the test's runtime.
pub struct TelegramServer {
    shared: Arc<Shared>,
    url: String,
}

impl TelegramServer {
    /// Serves the Bot API for `token` on a free port of 127.0.0.1.
    pub async fn start(token: &str) -> Self {
        let shared = Arc::new(Shared {
            token: token.to_owned(),
            inner: Mutex::new(Inner { next_update: 1, next_message: 100, ..Inner::default() }),
            arrived: Notify::new(),
        });
        let app = Router::new().route("/{bot}/{method}", axum::routing::any(call)).with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        TelegramServer { shared, url }
    }

    /// The `base_url` to configure.
    pub fn base_url(&self) -> String {
        self.url.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.shared.inner.lock().unwrap()
    }

    fn bot_id(&self) -> i64 {
        self.shared.token.split(':').next().and_then(|id| id.parse().ok()).unwrap_or(1)
    }

    fn push(&self, make: impl FnOnce(&mut Inner, i64) -> Value) -> i64 {
        let mut inner = self.lock();
        let id = inner.next_update;
        inner.next_update += 1;
        let mut update = make(&mut inner, id);
        if update.get("update_id").is_none() {
            update["update_id"] = json!(id);
        }
        inner.updates.push_back(update);
        drop(inner);
        self.shared.arrived.notify_waiters();
        id
    }

    /// A person's message in `chat`; the update id.
    pub fn send_text(&self, chat: i64, user: i64, text: &str) -> i64 {
        self.push(|inner, _| json!({"message": person_message(inner, chat, user, text, None)}))
    }

    /// A person's reply to message `to`; the update id.
    pub fn reply_text(&self, chat: i64, user: i64, text: &str, to: i64) -> i64 {
        let bot = self.bot_id();
        self.push(|inner, _| {
            let replied = inner.chats.get(&chat).and_then(|m| m.iter().find(|m| m.message_id == to)).map(|m| {
                json!({"message_id": m.message_id, "date": now(), "chat": chat_of(chat), "from": bot_user(bot), "text": m.text})
            });
            json!({"message": person_message(inner, chat, user, text, replied)})
        })
    }

    /// A press on a button of message `message_id` with `data`; the update and query ids.
    pub fn click(&self, chat: i64, user: i64, message_id: i64, data: &str) -> (i64, String) {
        let bot = self.bot_id();
        let mut query = String::new();
        let update = self.push(|inner, _| {
            inner.next_query += 1;
            query = format!("cq{}", inner.next_query);
            inner.queries.insert(query.clone());
            let text = inner
                .chats
                .get(&chat)
                .and_then(|m| m.iter().find(|m| m.message_id == message_id))
                .map(|m| m.text.clone())
                .unwrap_or_default();
            json!({"callback_query": {
                "id": query,
                "from": {"id": user, "is_bot": false, "first_name": "Ada"},
                "message": {"message_id": message_id, "date": now(), "chat": chat_of(chat), "from": bot_user(bot), "text": text},
                "chat_instance": "ci",
                "data": data,
            }})
        });
        (update, query)
    }

    /// Queues `update` as written (its `update_id` set unless it has one); the update id.
    pub fn raw_update(&self, update: Value) -> i64 {
        self.push(|_, id| {
            let mut update = update;
            if update.get("update_id").is_none() {
                update["update_id"] = json!(id);
            }
            update
        })
    }

    /// How many updates are queued (not yet confirmed by an offset).
    pub fn pending_updates(&self) -> usize {
        self.lock().updates.len()
    }

    /// Makes the next call of `method` answer `status` with `body`.
    pub fn fail_next(&self, method: &str, status: u16, body: Value) {
        self.lock().failures.entry(method.to_owned()).or_default().push_back((status, body));
    }

    /// Every call so far.
    pub fn calls(&self) -> Vec<Call> {
        self.lock().calls.clone()
    }

    /// The calls of `method`.
    pub fn calls_to(&self, method: &str) -> Vec<Call> {
        self.calls().into_iter().filter(|c| c.method == method).collect()
    }

    /// The offset of every `getUpdates`.
    pub fn offsets(&self) -> Vec<i64> {
        self.lock().offsets.clone()
    }

    /// The callback queries answered, with their parameters.
    pub fn answered_callbacks(&self) -> Vec<(String, Value)> {
        self.lock().answered.clone()
    }

    /// The bot's messages in `chat`, as they stand.
    pub fn messages(&self, chat: i64) -> Vec<BotMessage> {
        self.lock().chats.get(&chat).cloned().unwrap_or_default()
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

    /// Waits for a bot message in `chat` that satisfies `pred`.
    pub async fn wait_for_message(
        &self,
        chat: i64,
        pred: impl Fn(&BotMessage) -> bool,
        timeout: Duration,
    ) -> BotMessage {
        let started = Instant::now();
        loop {
            if let Some(message) = self.messages(chat).into_iter().find(|m| pred(m)) {
                return message;
            }
            assert!(started.elapsed() < timeout, "no matching message in {chat}: {:#?}", self.messages(chat));
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

fn now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_secs()
}

fn chat_of(chat: i64) -> Value {
    json!({"id": chat, "type": if chat > 0 { "private" } else { "supergroup" }})
}

fn bot_user(id: i64) -> Value {
    json!({"id": id, "is_bot": true, "first_name": "skillbot", "username": "skill_bot"})
}

fn person_message(inner: &mut Inner, chat: i64, user: i64, text: &str, replied: Option<Value>) -> Value {
    inner.next_message += 1;
    let mut message = json!({
        "message_id": inner.next_message,
        "date": now(),
        "chat": chat_of(chat),
        "from": {"id": user, "is_bot": false, "first_name": "Ada"},
        "text": text,
    });
    if let Some(replied) = replied {
        message["reply_to_message"] = replied;
    }
    message
}

fn ok(result: Value) -> Response {
    (StatusCode::OK, axum::Json(json!({"ok": true, "result": result}))).into_response()
}

fn fail(status: u16, description: &str) -> Response {
    let code = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST);
    (code, axum::Json(json!({"ok": false, "error_code": status, "description": description}))).into_response()
}

async fn call(
    State(shared): State<Arc<Shared>>,
    Path((bot, method)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
    body: axum::body::Bytes,
) -> Response {
    if bot.strip_prefix("bot") != Some(shared.token.as_str()) {
        return fail(401, "Unauthorized");
    }
    let mut params = serde_json::from_slice::<Value>(&body).ok().filter(Value::is_object).unwrap_or_else(|| json!({}));
    for (key, value) in query {
        params[key] = serde_json::from_str(&value).unwrap_or(Value::String(value));
    }
    let failure = {
        let mut inner = shared.inner.lock().unwrap();
        inner.calls.push(Call { method: method.clone(), params: params.clone(), at: Instant::now() });
        inner.failures.get_mut(&method).and_then(VecDeque::pop_front)
    };
    if let Some((status, body)) = failure {
        let code = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST);
        return (code, axum::Json(body)).into_response();
    }
    if method == "getUpdates" {
        return get_updates(&shared, &params).await;
    }
    respond(&shared, &method, &params)
}

/// Every method but `getUpdates`.
fn respond(shared: &Shared, method: &str, params: &Value) -> Response {
    let params = params.clone();
    let mut inner = shared.inner.lock().unwrap();
    let bot_id = shared.token.split(':').next().and_then(|id| id.parse().ok()).unwrap_or(1);
    match method {
        "getMe" => ok(bot_user(bot_id)),
        "sendMessage" => {
            let Some(chat) = params["chat_id"].as_i64() else { return fail(400, "Bad Request: chat not found") };
            let (text, mode) = match checked(&params) {
                Ok(checked) => checked,
                Err(e) => return fail(400, &e),
            };
            inner.next_message += 1;
            let id = inner.next_message;
            let reply_to = params["reply_to_message_id"].as_i64().or(params["reply_parameters"]["message_id"].as_i64());
            let markup = params.get("reply_markup").cloned();
            let message = BotMessage {
                message_id: id,
                text: text.clone(),
                parse_mode: mode,
                reply_markup: markup,
                reply_to,
                edits: 0,
            };
            inner.chats.entry(chat).or_default().push(message);
            ok(json!({"message_id": id, "date": now(), "chat": chat_of(chat), "from": bot_user(bot_id), "text": text}))
        }
        "editMessageText" => {
            let (Some(chat), Some(id)) = (params["chat_id"].as_i64(), params["message_id"].as_i64()) else {
                return fail(400, "Bad Request: message to edit not found");
            };
            let (text, mode) = match checked(&params) {
                Ok(checked) => checked,
                Err(e) => return fail(400, &e),
            };
            let markup = params.get("reply_markup").cloned();
            let Some(message) = inner.chats.get_mut(&chat).and_then(|m| m.iter_mut().find(|m| m.message_id == id))
            else {
                return fail(400, "Bad Request: message to edit not found");
            };
            if message.text == text && message.reply_markup == markup {
                return fail(
                    400,
                    "Bad Request: message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message",
                );
            }
            (message.text, message.parse_mode, message.reply_markup) = (text.clone(), mode, markup);
            message.edits += 1;
            ok(json!({"message_id": id, "date": now(), "chat": chat_of(chat), "from": bot_user(bot_id), "text": text}))
        }
        "answerCallbackQuery" => {
            let id = params["callback_query_id"].as_str().unwrap_or_default().to_owned();
            if !inner.queries.remove(&id) {
                return fail(400, "Bad Request: query is too old and response timeout expired or query ID is invalid");
            }
            inner.answered.push((id, params.clone()));
            ok(json!(true))
        }
        "sendChatAction" | "deleteMessage" | "editMessageReplyMarkup" => ok(json!(true)),
        _ => fail(404, "Not Found"),
    }
}

/// Long polling: the updates at or above the offset, waiting up to `timeout` seconds for one.
async fn get_updates(shared: &Arc<Shared>, params: &Value) -> Response {
    let offset = params["offset"].as_i64().unwrap_or(0);
    let timeout = Duration::from_secs(params["timeout"].as_u64().unwrap_or(0));
    let limit = params["limit"].as_u64().unwrap_or(100) as usize;
    let poll = {
        let mut inner = shared.inner.lock().unwrap();
        inner.offsets.push(offset);
        inner.updates.retain(|u| u["update_id"].as_i64().unwrap_or(0) >= offset);
        inner.poll += 1;
        inner.poll
    };
    // A newer poll ends this one, as Telegram does.
    shared.arrived.notify_waiters();
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let notified = shared.arrived.notified();
        {
            let inner = shared.inner.lock().unwrap();
            if inner.poll != poll {
                return fail(
                    409,
                    "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running",
                );
            }
            let ready: Vec<Value> = inner.updates.iter().take(limit).cloned().collect();
            if !ready.is_empty() || tokio::time::Instant::now() >= deadline {
                return ok(Value::Array(ready));
            }
        }
        let _ = tokio::time::timeout_at(deadline, notified).await;
    }
}

/// The text to store and its parse mode, checked as Telegram checks them.
fn checked(params: &Value) -> Result<(String, Option<String>), String> {
    let text = params["text"].as_str().unwrap_or_default().to_owned();
    let mode = params["parse_mode"].as_str().map(str::to_owned);
    let visible = match mode.as_deref() {
        Some("HTML") => html(&text).map_err(|e| format!("Bad Request: can't parse entities: {e}"))?,
        Some("MarkdownV2") => markdown_v2(&text).map_err(|e| format!("Bad Request: can't parse entities: {e}"))?,
        _ => text.clone(),
    };
    if visible.trim().is_empty() {
        return Err("Bad Request: message text is empty".into());
    }
    if visible.encode_utf16().count() > 4096 {
        return Err("Bad Request: message is too long".into());
    }
    Ok((text, mode))
}

/// The visible text of HTML markup, or why Telegram would refuse it.
fn html(text: &str) -> Result<String, String> {
    const TAGS: &[&str] = &[
        "b",
        "strong",
        "i",
        "em",
        "u",
        "ins",
        "s",
        "strike",
        "del",
        "code",
        "pre",
        "a",
        "tg-spoiler",
        "blockquote",
        "span",
    ];
    let mut visible = String::new();
    let mut open: Vec<String> = Vec::new();
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        match c {
            '<' => {
                let end = rest.find('>').ok_or("Unclosed start tag")?;
                let tag = &rest[1..end];
                if let Some(name) = tag.strip_prefix('/') {
                    if open.pop().as_deref() != Some(name.trim()) {
                        return Err(format!("Unmatched end tag \"{name}\""));
                    }
                } else {
                    let name = tag.split_whitespace().next().unwrap_or_default();
                    if !TAGS.contains(&name) {
                        return Err(format!("Unsupported start tag \"{name}\""));
                    }
                    open.push(name.to_owned());
                }
                rest = &rest[end + 1..];
            }
            '&' => {
                let end = rest.find(';').filter(|&e| e <= 10).ok_or("Unsupported entity")?;
                let entity = &rest[1..end];
                let known = ["lt", "gt", "amp", "quot"].contains(&entity)
                    || entity
                        .strip_prefix("#x")
                        .is_some_and(|h| !h.is_empty() && h.chars().all(|c| c.is_ascii_hexdigit()))
                    || entity.strip_prefix('#').is_some_and(|d| !d.is_empty() && d.chars().all(|c| c.is_ascii_digit()));
                if !known {
                    return Err(format!("Unsupported entity \"&{entity};\""));
                }
                visible.push('x');
                rest = &rest[end + 1..];
            }
            _ => {
                visible.push(c);
                rest = &rest[c.len_utf8()..];
            }
        }
    }
    match open.pop() {
        Some(tag) => Err(format!("Can't find end tag corresponding to start tag \"{tag}\"")),
        None => Ok(visible),
    }
}

/// Roughly MarkdownV2: every reserved character escaped, but for balanced `*`, `_`, `~`
/// and backtick pairs.
fn markdown_v2(text: &str) -> Result<String, String> {
    const RESERVED: &str = "_*[]()~`>#+-=|{}.!";
    let mut visible = String::new();
    let mut counts: HashMap<char, usize> = HashMap::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            visible.extend(chars.next());
        } else if ['*', '_', '~', '`'].contains(&c) {
            *counts.entry(c).or_default() += 1;
        } else if RESERVED.contains(c) {
            return Err(format!("Character '{c}' is reserved and must be escaped with the preceding '\\'"));
        } else {
            visible.push(c);
        }
    }
    match counts.iter().find(|(_, n)| **n % 2 == 1) {
        Some((c, _)) => Err(format!("Can't find end of the entity starting with '{c}'")),
        None => Ok(visible),
    }
}

#[cfg(test)]
mod tests {
    use super::{html, markdown_v2};

    #[test]
    fn html_is_checked_as_telegram_does() {
        assert_eq!(html("<b>a</b> &lt; x").unwrap(), "a x x");
        assert!(html("a < b").is_err());
        assert!(html("<b>x").is_err());
        assert!(html("&foo;").is_err());
        assert!(html("<script>x</script>").is_err());
        assert!(markdown_v2("a.b").is_err());
        assert_eq!(markdown_v2("*b* a\\.b").unwrap(), "b a.b");
    }
}
