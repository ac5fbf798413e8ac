//! The Telegram adapter: one bot per agent that names it, through the Bot API's long polling.
//!
//! `getUpdates` with the offset kept in the state store (an update is handled once, across
//! restarts too); `allowed_chat_ids` is a whitelist; answers stream by editing one message,
//! in Telegram's HTML parse mode (resent as plain text if Telegram refuses the markup);
//! approvals are inline keyboards (`confirm`: a reply `CONFIRM` to the prompt); questions
//! offer their choices as buttons, and any reply answers them. A 429 is honoured with its
//! `retry_after`; a second poller of the same token (409) is retried with backoff; a refused
//! token stops this bot, and the process's other adapters keep serving. The token is part of
//! every URL, so no URL is ever logged.

mod wire;

use super::chat::text::{self, to_telegram};
use super::chat::{Chat, ChatError, Decided, Decision, Incoming, Platform, Prompt};
use super::outbox::{Outbox, Registered};
use super::{Adapter, Stop, stopped};
use crate::config::{ChatId, TelegramSettings};
use crate::engine::Engine;
use crate::tools::{CONFIRMATION_CHALLENGE, Level};
use backon::BackoffBuilder;
use parking_lot::Mutex;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use wire::{CallbackQuery, Reply, TgMessage, Update};

/// How long one `getUpdates` waits for an update.
const POLL_SECONDS: u64 = 25;
/// How often one call is tried when Telegram says to slow down.
const ATTEMPTS: usize = 4;
/// The longest `retry_after` honoured.
const MAX_RETRY_AFTER: u64 = 60;

/// A chat, and the person's message the first answer replies to.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Place {
    /// The chat id.
    pub chat: i64,
    /// The message that started the turn.
    pub source: i64,
}

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum TelegramError {
    /// The Bot API answered `ok: false`.
    #[error("{method}: {code} {description}")]
    Api {
        /// The method.
        method: String,
        /// `error_code`.
        code: i64,
        /// `description`.
        description: String,
    },
    /// No answer the Bot API could have given.
    #[error("{method}: {problem}")]
    Transport {
        /// The method.
        method: String,
        /// What went wrong.
        problem: String,
    },
}

impl TelegramError {
    fn code(&self) -> Option<i64> {
        match self {
            TelegramError::Api { code, .. } => Some(*code),
            TelegramError::Transport { .. } => None,
        }
    }
}

/// One Telegram bot of one agent.
pub struct Telegram {
    http: reqwest::Client,
    /// `{base_url}/bot<token>/`: never logged.
    base: String,
    settings: TelegramSettings,
    /// Prompts of `confirm` calls, by chat and message id: a reply `CONFIRM` to one decides it.
    confirms: Mutex<HashMap<(i64, i64), String>>,
    label: String,
}

/// The Telegram adapter of one agent.
pub struct TelegramAdapter {
    chat: Arc<Chat<Telegram>>,
    /// Skills' messages reach this bot while it serves.
    registered: Registered,
}

impl TelegramAdapter {
    /// The adapter for `engine` with `settings` (its token already checked).
    /// Skills' own messages to `telegram:` destinations come through `outbox`.
    pub fn new(
        engine: Arc<Engine>,
        settings: &TelegramSettings,
        agent: Option<&str>,
        outbox: &Arc<Outbox>,
        runs: &Arc<crate::adapters::runs::Runs>,
    ) -> Self {
        let label = match agent {
            Some(agent) => format!("telegram (agent `{agent}`)"),
            None => "telegram".to_owned(),
        };
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .timeout(Duration::from_secs(POLL_SECONDS + 15))
            .build()
            .unwrap_or_default();
        let base = format!("{}/bot{}/", settings.base_url.trim_end_matches('/'), settings.bot_token);
        let telegram =
            Telegram { http, base, settings: settings.clone(), confirms: Mutex::default(), label: label.clone() };
        let chat = Chat::new(Arc::new(telegram), engine, label, runs.clone(), "telegram");
        let registered = outbox.register(crate::config::Platform::Telegram, chat.delivery());
        TelegramAdapter { chat, registered }
    }
}

#[async_trait::async_trait]
impl Adapter for TelegramAdapter {
    fn describe(&self) -> String {
        self.chat.platform.label.clone()
    }

    async fn serve(self: Box<Self>, stop: Stop) -> anyhow::Result<()> {
        let result = poll(&self.chat, stop).await;
        drop(self.registered);
        self.chat.drain().await;
        result
    }
}

impl Telegram {
    /// Calls `method` with a JSON body; honours 429 `retry_after`.
    async fn call(&self, method: &str, body: &Value) -> Result<Value, TelegramError> {
        let transport = |problem: String| TelegramError::Transport { method: method.into(), problem };
        for attempt in 1..=ATTEMPTS {
            let response = self
                .http
                .post(format!("{}{method}", self.base))
                .json(body)
                .send()
                .await
                .map_err(|e| transport(e.without_url().to_string()))?;
            let status = response.status();
            let answer: Reply =
                response.json().await.map_err(|e| transport(format!("HTTP {status}: {}", e.without_url())))?;
            if answer.ok {
                return Ok(answer.result.unwrap_or(Value::Null));
            }
            let code = answer.error_code.unwrap_or(i64::from(status.as_u16()));
            let retry_after = answer.parameters.and_then(|p| p.retry_after);
            if code == 429 && attempt < ATTEMPTS {
                let wait = retry_after.unwrap_or(1).clamp(1, MAX_RETRY_AFTER);
                tracing::warn!(method, wait_s = wait, "Telegram rate limit: retrying after retry_after");
                tokio::time::sleep(Duration::from_secs(wait)).await;
                continue;
            }
            let description = answer.description.unwrap_or_default();
            if code != 409 {
                tracing::warn!(method, code, description, "Telegram API call failed");
            }
            return Err(TelegramError::Api { method: method.into(), code, description });
        }
        Err(transport("rate limited on every attempt".into()))
    }

    /// Sends `markdown` as HTML; as plain text when Telegram refuses the markup.
    async fn send(&self, chat: i64, markdown: &str, extra: Value) -> Result<i64, TelegramError> {
        let mut body = json!({"chat_id": chat, "text": to_telegram(markdown), "parse_mode": "HTML"});
        merge(&mut body, &extra);
        let sent = match self.call("sendMessage", &body).await {
            Err(e) if entities(&e) => {
                let mut body = json!({"chat_id": chat, "text": markdown});
                merge(&mut body, &extra);
                self.call("sendMessage", &body).await
            }
            other => other,
        };
        let no_id = || TelegramError::Transport { method: "sendMessage".into(), problem: "no message_id".into() };
        sent?.get("message_id").and_then(Value::as_i64).ok_or_else(no_id)
    }

    /// Replaces a message's text (and removes its keyboard unless `extra` sets one).
    async fn replace(&self, chat: i64, id: i64, markdown: &str, extra: Value) {
        let mut body = json!({"chat_id": chat, "message_id": id, "text": to_telegram(markdown), "parse_mode": "HTML"});
        merge(&mut body, &extra);
        if let Err(e) = self.call("editMessageText", &body).await
            && entities(&e)
        {
            let mut body = json!({"chat_id": chat, "message_id": id, "text": markdown});
            merge(&mut body, &extra);
            let _ = self.call("editMessageText", &body).await;
        }
    }

    fn allowed_chat(&self, chat: i64) -> bool {
        self.settings.allowed_chat_ids.contains(&ChatId(chat))
    }

    fn may_decide(&self, user: &wire::TgUser) -> Result<(), &'static str> {
        if user.is_bot {
            return Err("Only a person can decide this.");
        }
        let approvers = &self.settings.approvers;
        if !approvers.is_empty() && !approvers.contains(&ChatId(user.id)) {
            return Err("Only the approvers configured for this bot can decide this.");
        }
        Ok(())
    }
}

impl From<TelegramError> for ChatError {
    fn from(e: TelegramError) -> Self {
        ChatError::Platform(Box::new(e))
    }
}

/// Telegram refused the message's markup.
fn entities(e: &TelegramError) -> bool {
    matches!(e, TelegramError::Api { code: 400, description, .. } if description.contains("can't parse entities"))
}

fn merge(body: &mut Value, extra: &Value) {
    if let (Some(body), Some(extra)) = (body.as_object_mut(), extra.as_object()) {
        body.extend(extra.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
}

#[async_trait::async_trait]
impl Platform for Telegram {
    type Place = Place;
    const LIMIT: usize = 4000;
    const EDIT_EVERY: Duration = Duration::from_millis(1000);
    const WORKING_EVERY: Option<Duration> = Some(Duration::from_secs(4));

    fn scope(&self) -> String {
        use sha2::Digest as _;
        format!("telegram {}", hex::encode(&sha2::Sha256::digest(self.settings.bot_token.as_bytes())[..8]))
    }

    fn key(place: &Place) -> String {
        place.chat.to_string()
    }

    fn approvers(&self) -> Vec<String> {
        self.settings.approvers.iter().map(|id| id.0.to_string()).collect()
    }

    async fn post(&self, place: &Place, markdown: &str) -> Option<String> {
        let extra = json!({"reply_parameters": {"message_id": place.source, "allow_sending_without_reply": true}});
        self.send(place.chat, markdown, extra).await.ok().map(|id| id.to_string())
    }

    async fn edit(&self, place: &Place, id: &str, markdown: &str) {
        if let Ok(id) = id.parse() {
            self.replace(place.chat, id, markdown, json!({})).await;
        }
    }

    async fn working(&self, place: &Place, done: Option<bool>) {
        if done.is_none() {
            let _ = self.call("sendChatAction", &json!({"chat_id": place.chat, "action": "typing"})).await;
        }
    }

    async fn notify(&self, id: &str, markdown: &str) -> Result<Incoming<Place>, ChatError> {
        let chat: i64 = id.parse().map_err(|_| ChatError::NotHere(format!("`{id}` is not a Telegram chat id")))?;
        if !self.allowed_chat(chat) {
            return Err(ChatError::NotHere(format!("chat {chat} is not in adapter.telegram.allowed_chat_ids")));
        }
        let mut first = None;
        for part in text::split(markdown, Self::LIMIT) {
            let id = self.send(chat, &part, json!({})).await?;
            first.get_or_insert(id);
        }
        let source = first.ok_or(ChatError::Empty)?;
        Ok(Incoming {
            place: Place { chat, source },
            channel_id: chat.to_string(),
            thread: None,
            user_id: None,
            text: markdown.to_owned(),
            route: Vec::new(),
        })
    }

    async fn ask(&self, place: &Place, prompt: &Prompt<'_>) -> Result<String, ChatError> {
        let (markdown, keyboard, confirm) = match prompt {
            Prompt::Approval { id, level: Level::Confirm, .. } => {
                let text =
                    format!("{}\nReply `{CONFIRMATION_CHALLENGE}` to this message to run it.", prompt.markdown());
                (text, vec![vec![json!({"text": "Deny", "callback_data": format!("d:{id}")})]], Some(id.to_string()))
            }
            Prompt::Approval { id, .. } => {
                let buttons = vec![
                    json!({"text": "Approve", "callback_data": format!("a:{id}")}),
                    json!({"text": "Deny", "callback_data": format!("d:{id}")}),
                ];
                (prompt.markdown(), vec![buttons], None)
            }
            Prompt::Question { id, choices, .. } => {
                let rows = choices
                    .iter()
                    .enumerate()
                    .map(|(n, choice)| vec![json!({"text": choice, "callback_data": format!("q:{id}:{n}")})])
                    .collect();
                (format!("{}\n_Reply to answer._", prompt.markdown()), rows, None)
            }
        };
        let extra = json!({"reply_markup": {"inline_keyboard": keyboard}});
        let id = self.send(place.chat, &markdown, extra).await?;
        if let Some(approval) = confirm {
            self.confirms.lock().insert((place.chat, id), approval);
        }
        Ok(id.to_string())
    }

    async fn settle(&self, place: &Place, id: &str, markdown: &str) {
        if let Ok(id) = id.parse::<i64>() {
            self.confirms.lock().remove(&(place.chat, id));
            self.replace(place.chat, id, markdown, json!({})).await;
        }
    }
}

/// How a replica's polling ended.
enum Polled {
    /// Asked to stop.
    Stopped,
    /// The database connection that made it the poller was lost: stand again.
    Lost,
}

/// Long polling until `stop`; a refused token ends this bot. With the state in PostgreSQL,
/// one replica polls each bot (Telegram allows one `getUpdates` at a time): the one holding
/// the bot's advisory lock; the others stand by and take over when it goes.
async fn poll(chat: &Arc<Chat<Telegram>>, stop: Stop) -> anyhow::Result<()> {
    let telegram = &chat.platform;
    if telegram.settings.allowed_chat_ids.is_empty() {
        tracing::warn!("{}: telegram.allowed_chat_ids is empty: every chat is refused", telegram.label);
    }
    let state = chat.engine().history().state().clone();
    let Some(pg) = state.postgres() else {
        return poll_as_leader(chat, &state, &stop, std::future::pending()).await.map(drop);
    };
    use sha2::Digest as _;
    let role = format!("telegram {}", hex::encode(&sha2::Sha256::digest(telegram.settings.bot_token.as_bytes())[..8]));
    let label = format!("{}: ", telegram.label);
    while let Some(mut leadership) = pg.elect(&role, (&label, "polls this bot"), stopped(stop.clone())).await {
        match poll_as_leader(chat, &state, &stop, leadership.lost()).await? {
            Polled::Stopped => return Ok(()),
            Polled::Lost => tracing::warn!(
                "{}: the database connection that made this replica the bot's poller was lost; standing again",
                telegram.label
            ),
        }
    }
    Ok(())
}

/// [`poll`] while `lost` has not returned.
async fn poll_as_leader(
    chat: &Arc<Chat<Telegram>>,
    state: &crate::store::StateStore,
    stop: &Stop,
    lost: impl std::future::Future<Output = ()>,
) -> anyhow::Result<Polled> {
    let telegram = &chat.platform;
    tokio::pin!(lost);
    // Read again at every election: the replica that polled before moved it on.
    let mut offset: Option<(String, i64)> = None;
    let mut backoff = backoff();
    loop {
        if *stop.borrow() {
            return Ok(Polled::Stopped);
        }
        // The bot's id (`getMe`) names where the offset is kept; learnt once.
        let (_, from) = match &offset {
            Some(known) => known.clone(),
            None => match telegram.call("getMe", &json!({})).await {
                Ok(me) => {
                    let ns = format!("adapter.telegram.{}", me.get("id").and_then(Value::as_i64).unwrap_or_default());
                    let from = state.get(&ns, "offset").await.ok().flatten().and_then(|v| v.parse().ok()).unwrap_or(0);
                    tracing::info!("{}: polling for updates", telegram.label);
                    offset.insert((ns, from)).clone()
                }
                Err(e) if matches!(e.code(), Some(401 | 404)) => {
                    anyhow::bail!("{}: Telegram refused the bot token ({e}): this bot stops", telegram.label)
                }
                Err(e) => {
                    wait(&telegram.label, &e.to_string(), &mut backoff, stop).await;
                    continue;
                }
            },
        };
        let body = json!({"offset": from, "timeout": POLL_SECONDS, "allowed_updates": ["message", "callback_query"]});
        let updates = tokio::select! {
            updates = telegram.call("getUpdates", &body) => updates,
            () = stopped(stop.clone()) => return Ok(Polled::Stopped),
            () = &mut lost => return Ok(Polled::Lost),
        };
        let updates: Vec<Value> = match updates {
            Ok(updates) => {
                backoff = self::backoff();
                match updates {
                    Value::Array(updates) => updates,
                    _ => Vec::new(),
                }
            }
            Err(e) if e.code() == Some(409) => {
                let why = "another process polls this bot token (Telegram answered 409 Conflict); \
                    only one skillhost may serve a Telegram bot";
                wait(&telegram.label, why, &mut backoff, stop).await;
                continue;
            }
            Err(e) if matches!(e.code(), Some(401 | 404)) => {
                anyhow::bail!("{}: Telegram refused the bot token ({e}): this bot stops", telegram.label)
            }
            Err(e) => {
                wait(&telegram.label, &e.to_string(), &mut backoff, stop).await;
                continue;
            }
        };
        if let Some((ns, from)) = offset.as_mut() {
            take(chat, state, ns, from, updates).await;
        }
    }
}

/// Handles `updates` in order, keeping the offset (in `ns`, and in `from`) past each one
/// before it is handled: a crash loses at most this one update, never handles it twice.
/// One unreadable update is skipped (and its offset passed), never the batch.
async fn take(
    chat: &Arc<Chat<Telegram>>,
    state: &crate::store::StateStore,
    ns: &str,
    from: &mut i64,
    updates: Vec<Value>,
) {
    let telegram = &chat.platform;
    for raw in updates {
        // One unreadable update is skipped (and its offset passed), never the batch.
        let Some(id) = raw.get("update_id").and_then(Value::as_i64) else {
            tracing::warn!("{}: an update without an update_id: skipped", telegram.label);
            continue;
        };
        let next = id + 1;
        // Kept before the update is handled: a crash loses at most this one update,
        // never handles it twice.
        if let Err(e) = state.set(ns, "offset", &next.to_string()).await {
            tracing::warn!("{}: cannot keep the update offset: {e}", telegram.label);
        }
        *from = next;
        match serde_json::from_value::<Update>(raw) {
            Ok(update) => handle(chat, update).await,
            Err(e) => tracing::warn!("{}: update {id} is not one the adapter reads ({e}): skipped", telegram.label),
        }
    }
}

async fn wait(label: &str, why: &str, backoff: &mut impl Iterator<Item = Duration>, stop: &Stop) {
    let delay = backoff.next().unwrap_or(Duration::from_secs(30));
    tracing::warn!("{label}: {why}; trying again in {} ms", delay.as_millis());
    tokio::select! {
        () = tokio::time::sleep(delay) => {}
        () = stopped(stop.clone()) => {}
    }
}

/// Capped (30 s), jittered, exponential delays from 1 s, without end.
fn backoff() -> impl Iterator<Item = Duration> {
    backon::ExponentialBuilder::default()
        .with_min_delay(Duration::from_secs(1))
        .with_max_delay(Duration::from_secs(30))
        .with_jitter()
        .without_max_times()
        .build()
}

async fn handle(chat: &Arc<Chat<Telegram>>, update: Update) {
    if let Some(message) = update.message {
        message_from(chat, message).await;
    } else if let Some(query) = update.callback_query {
        callback(chat, query).await;
    }
}

async fn message_from(chat: &Arc<Chat<Telegram>>, message: TgMessage) {
    let telegram = &chat.platform;
    let Some(from) = message.from.as_ref() else { return };
    if from.is_bot {
        return;
    }
    if !telegram.allowed_chat(message.chat.id) {
        tracing::warn!(
            chat_id = message.chat.id,
            "{}: a message from a chat not in allowed_chat_ids: ignored",
            telegram.label
        );
        return;
    }
    let Some(text) = message.text.as_deref().map(str::trim).filter(|t| !t.is_empty()) else { return };
    // A reply to a `confirm` prompt is its decision.
    if let Some(replied) = message.reply_to_message.as_ref() {
        let here = telegram.confirms.lock().get(&(message.chat.id, replied.message_id)).cloned();
        // Asked by another replica (which may be gone): the shared database knows its prompt.
        let approval = match here {
            Some(id) => Some(id),
            None => {
                let (key, prompt) = (message.chat.id.to_string(), replied.message_id.to_string());
                chat.approval_prompted_elsewhere(&key, &prompt).await
            }
        };
        if let Some(id) = approval {
            let result = match telegram.may_decide(from) {
                Err(why) => Decided::Refused(why.into()),
                Ok(()) => {
                    let key = message.chat.id.to_string();
                    chat.decide(&id, Decision::Approve(Some(text.to_owned())), &from.id.to_string(), &key).await
                }
            };
            let (chat_id, prompt) = (message.chat.id, replied.message_id);
            match result {
                Decided::Taken(_) => {
                    let line = format!("✅ Confirmed by {}", from.name());
                    telegram.replace(chat_id, prompt, &line, json!({})).await;
                    telegram.confirms.lock().remove(&(chat_id, prompt));
                }
                Decided::Refused(why) => {
                    let extra = json!({"reply_parameters": {"message_id": message.message_id}});
                    let _ = telegram.send(chat_id, &format!("🚫 {why}"), extra).await;
                }
            }
            return;
        }
    }
    let place = Place { chat: message.chat.id, source: message.message_id };
    chat.incoming(Incoming {
        place,
        channel_id: message.chat.id.to_string(),
        thread: None,
        user_id: Some(from.id.to_string()),
        text: text.to_owned(),
        route: Vec::new(),
    });
}

async fn callback(chat: &Arc<Chat<Telegram>>, query: CallbackQuery) {
    let telegram = &chat.platform;
    let answer = |text: &str, alert: bool| json!({"callback_query_id": query.id, "text": text, "show_alert": alert});
    let Some(message) = query.message.as_ref() else {
        let _ = telegram.call("answerCallbackQuery", &answer("This message is too old.", true)).await;
        return;
    };
    let chat_id = message.chat.id;
    if !telegram.allowed_chat(chat_id) {
        tracing::warn!(chat_id, "{}: a button press from a chat not in allowed_chat_ids: refused", telegram.label);
        let _ = telegram.call("answerCallbackQuery", &answer("This chat is not allowed to use this bot.", true)).await;
        return;
    }
    if let Err(why) = telegram.may_decide(&query.from) {
        let _ = telegram.call("answerCallbackQuery", &answer(why, true)).await;
        return;
    }
    let data = query.data.as_deref().unwrap_or_default();
    let (reply, line) = match data.split_once(':') {
        Some(("a" | "d", id)) => {
            let decision = if data.starts_with('a') { Decision::Approve(None) } else { Decision::Deny(None) };
            match chat.decide(id, decision, &query.from.id.to_string(), &chat_id.to_string()).await {
                Decided::Taken(true) => ("Approved".to_owned(), Some(format!("✅ Approved by {}", query.from.name()))),
                Decided::Taken(false) => ("Denied".to_owned(), Some(format!("❌ Denied by {}", query.from.name()))),
                Decided::Refused(why) => (why, None),
            }
        }
        Some(("q", rest)) => {
            let chosen = match rest.rsplit_once(':') {
                Some((id, n)) => {
                    let from = query.from.id.to_string();
                    let choices = chat.choices(id, &from, &chat_id.to_string()).await.unwrap_or_default();
                    n.parse::<usize>().ok().and_then(|n| choices.get(n).cloned()).map(|c| (id.to_owned(), c))
                }
                None => None,
            };
            match chosen {
                Some((id, choice)) => {
                    match chat.answer(&id, &choice, &query.from.id.to_string(), &chat_id.to_string()).await {
                        Ok(()) => (
                            format!("Answered: {choice}"),
                            Some(format!("❓ answered by {}: {choice}", query.from.name())),
                        ),
                        Err(why) => (why.to_string(), None),
                    }
                }
                None => ("This question is no longer waiting.".to_owned(), None),
            }
        }
        _ => ("This button is not one of this bot's.".to_owned(), None),
    };
    let alert = line.is_none();
    let _ = telegram.call("answerCallbackQuery", &answer(&reply, alert)).await;
    if let Some(line) = line {
        telegram.replace(chat_id, message.message_id, &line, json!({})).await;
    }
}
