//! The Slack adapter: one Slack app in Socket Mode (no public URL) per agent that names it.
//!
//! - [`socket`]: `apps.connections.open`, the WebSocket, envelopes acknowledged at once,
//!   reconnects with capped, jittered backoff.
//! - [`api`]: the Web API client. [`wire`]: the payloads. [`channels`]: which channels are
//!   external (`conversations.info`), for this guard and the MCP tools that post to Slack.
//! - Here: which events start a turn (`respond`), the thread a turn answers in, approval and
//!   question prompts as Block Kit buttons, the `confirm` modal, who may decide
//!   (`approvers`, people only), and the external-channel guard
//!   (`allow_posting_in_external_channels: false`).

pub mod api;
pub mod channels;
pub mod socket;
pub mod wire;

use super::chat::text::{self, to_slack};
use super::chat::{Chat, ChatError, Decided, Decision, Incoming, Platform, Prompt};
use super::outbox::{Outbox, Registered};
use super::{Adapter, Stop};
use crate::config::{Respond, SlackSettings};
use crate::engine::Engine;
use crate::tools::{CONFIRMATION_CHALLENGE, Level};
use api::{SlackError, WebApi};
use channels::ChannelKinds;
use parking_lot::Mutex;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime};
use wire::{EventCallback, Interaction};

/// How long a handled event id is remembered (Slack retries within minutes).
const SEEN_FOR: Duration = Duration::from_secs(3600);
/// The longest text of a section block.
const SECTION_LIMIT: usize = 3000;
/// The modal's input, by block and action id.
const CHALLENGE_BLOCK: &str = "challenge";
const CHALLENGE_ACTION: &str = "value";

/// Where a turn's messages go: a channel and the thread; `source` is the message that
/// started it (the working reaction goes there).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Place {
    /// The channel id.
    pub channel: String,
    /// The thread's root timestamp.
    pub thread_ts: String,
    /// The message that started the turn.
    pub source: String,
}

/// One Slack app of one agent.
pub struct Slack {
    api: Arc<WebApi>,
    settings: SlackSettings,
    /// The bot's own user id (`auth.test`), once known.
    bot_user: OnceLock<String>,
    /// Which channels are external.
    channels: ChannelKinds,
    /// Users known to be bots (`users.info`).
    bots: Mutex<HashMap<String, bool>>,
    label: String,
}

/// The Slack adapter of one agent, made by the app and served until the process stops.
pub struct SlackAdapter {
    chat: Arc<Chat<Slack>>,
    /// Skills' messages reach this bot while it serves.
    registered: Registered,
}

impl SlackAdapter {
    /// The adapter for `engine` with `settings` (its tokens already checked); `agent` names it
    /// in logs.
    /// Skills' own messages to `slack:` destinations come through `outbox`.
    pub fn new(
        engine: Arc<Engine>,
        settings: &SlackSettings,
        agent: Option<&str>,
        outbox: &Arc<Outbox>,
        runs: &Arc<crate::adapters::runs::Runs>,
    ) -> Self {
        let label = match agent {
            Some(agent) => format!("slack (agent `{agent}`)"),
            None => "slack".to_owned(),
        };
        let api = Arc::new(WebApi::new(&settings.base_url, &settings.bot_token, &settings.app_token));
        let slack = Slack {
            channels: ChannelKinds::new(api.clone(), &label),
            api,
            settings: settings.clone(),
            bot_user: OnceLock::new(),
            bots: Mutex::default(),
            label: label.clone(),
        };
        let chat = Chat::new(Arc::new(slack), engine, label, runs.clone(), "slack");
        let registered = outbox.register(crate::config::Platform::Slack, chat.delivery());
        SlackAdapter { chat, registered }
    }
}

#[async_trait::async_trait]
impl Adapter for SlackAdapter {
    fn describe(&self) -> String {
        self.chat.platform.label.clone()
    }

    async fn serve(self: Box<Self>, stop: Stop) -> anyhow::Result<()> {
        let result = socket::run(self.chat.clone(), stop).await;
        drop(self.registered);
        self.chat.drain().await;
        result
    }
}

impl Slack {
    /// Learns the bot's user id (`auth.test`); a refused token is final.
    async fn identify(&self) -> Result<(), SlackError> {
        if self.bot_user.get().is_some() {
            return Ok(());
        }
        let answer = self.api.read("auth.test", &[]).await?;
        let user: String = api::field(&answer, "user_id", "auth.test")?;
        let _ = self.bot_user.set(user);
        Ok(())
    }

    fn bot_user(&self) -> &str {
        self.bot_user.get().map(String::as_str).unwrap_or_default()
    }

    /// Whether text may be posted in `channel`: always, unless the guard is on and the
    /// channel is external (or cannot be looked up: fail closed, not cached).
    async fn may_post(&self, channel: &str) -> bool {
        self.settings.allow_posting_in_external_channels
            || self.channels.external(channel).await.is_ok_and(|external| !external)
    }

    /// Whether `user` may decide: a person, among `approvers` when that is set.
    async fn may_decide(&self, user: &str) -> Result<(), Refusal> {
        let known = self.bots.lock().get(user).copied();
        let is_bot = match known {
            Some(is_bot) => is_bot,
            None => match self.api.read("users.info", &[("user", user)]).await {
                Ok(answer) => {
                    let is_bot = answer.pointer("/user/is_bot").and_then(Value::as_bool).unwrap_or(false);
                    self.bots.lock().insert(user.to_owned(), is_bot);
                    is_bot
                }
                Err(e) => return Err(Refusal::Unverified(e)),
            },
        };
        if is_bot || user == self.bot_user() {
            return Err(Refusal::NotAPerson);
        }
        let approvers = &self.settings.approvers;
        if !approvers.is_empty() && !approvers.iter().any(|a| a == user) {
            return Err(Refusal::NotAnApprover);
        }
        Ok(())
    }

    /// Tells `user` (only them) why their click did nothing.
    async fn refuse(&self, channel: &str, user: &str, thread_ts: Option<&str>, why: &str) {
        if !self.may_post(channel).await {
            return;
        }
        let mut body = json!({"channel": channel, "user": user, "text": format!("🚫 {why}")});
        if let Some(ts) = thread_ts {
            body["thread_ts"] = json!(ts);
        }
        let _ = self.api.post("chat.postEphemeral", &body).await;
    }

    /// Replaces message `ts` (buttons and all) with `mrkdwn`, written by the adapter (a user
    /// mention such as `<@U123>` is kept).
    async fn update(&self, channel: &str, ts: &str, mrkdwn: &str) {
        if !self.may_post(channel).await {
            return;
        }
        let text = mrkdwn.to_owned();
        let blocks = json!([section(&text)]);
        let _ =
            self.api.post("chat.update", &json!({"channel": channel, "ts": ts, "text": text, "blocks": blocks})).await;
    }
}

/// A section block, its text cut to what Slack accepts (an open code block closed).
fn section(mrkdwn: &str) -> Value {
    let mut text: String = mrkdwn.chars().take(SECTION_LIMIT - 8).collect();
    if text.len() < mrkdwn.len() {
        text.push('…');
        if text.matches("```").count() % 2 == 1 {
            text.push_str("\n```");
        }
    }
    json!({"type": "section", "text": {"type": "mrkdwn", "text": text}})
}

fn button(action: &str, label: &str, value: &str, style: Option<&str>) -> Value {
    let mut button =
        json!({"type": "button", "action_id": action, "text": {"type": "plain_text", "text": label}, "value": value});
    if let Some(style) = style {
        button["style"] = json!(style);
    }
    button
}

#[async_trait::async_trait]
impl Platform for Slack {
    type Place = Place;
    const LIMIT: usize = 3900;
    const EDIT_EVERY: Duration = Duration::from_millis(1200);
    const WORKING_EVERY: Option<Duration> = None;

    fn scope(&self) -> String {
        use sha2::Digest as _;
        format!("slack {}", hex::encode(&sha2::Sha256::digest(self.settings.app_token.as_bytes())[..8]))
    }

    fn key(place: &Place) -> String {
        format!("{}/{}", place.channel, place.thread_ts)
    }

    fn approvers(&self) -> Vec<String> {
        self.settings.approvers.clone()
    }

    async fn post(&self, place: &Place, markdown: &str) -> Option<String> {
        if !self.may_post(&place.channel).await {
            return None;
        }
        let body = json!({"channel": place.channel, "thread_ts": place.thread_ts, "text": to_slack(markdown)});
        let answer = self.api.post("chat.postMessage", &body).await.ok()?;
        answer.get("ts").and_then(Value::as_str).map(str::to_owned)
    }

    async fn edit(&self, place: &Place, id: &str, markdown: &str) {
        if !self.may_post(&place.channel).await {
            return;
        }
        let body = json!({"channel": place.channel, "ts": id, "text": to_slack(markdown)});
        let _ = self.api.post("chat.update", &body).await;
    }

    async fn working(&self, place: &Place, done: Option<bool>) {
        let react = |method: &'static str, name: &'static str| {
            let body = json!({"channel": place.channel, "timestamp": place.source, "name": name});
            async move {
                if let Err(e) = self.api.post(method, &body).await
                    && !matches!(e.code(), Some("already_reacted" | "no_reaction"))
                {
                    tracing::debug!("{}: {method}: {e}", self.label);
                }
            }
        };
        match done {
            None => react("reactions.add", "eyes").await,
            Some(ok) => {
                react("reactions.remove", "eyes").await;
                react("reactions.add", if ok { "white_check_mark" } else { "warning" }).await;
            }
        }
    }

    async fn notify(&self, id: &str, markdown: &str) -> Result<Incoming<Place>, ChatError> {
        if !self.may_post(id).await {
            return Err(ChatError::NotHere(format!(
                "channel {id} is external (or its info could not be looked up) and this bot does not post there \
                 (allow_posting_in_external_channels: false)"
            )));
        }
        let mut parts = text::split(markdown, Self::LIMIT).into_iter();
        let first = parts.next().unwrap_or_default();
        let answer = self.api.post("chat.postMessage", &json!({"channel": id, "text": to_slack(&first)})).await?;
        let ts: String = api::field(&answer, "ts", "chat.postMessage")?;
        // The rest of a long message goes in its thread.
        for part in parts {
            let body = json!({"channel": id, "thread_ts": ts, "text": to_slack(&part)});
            self.api.post("chat.postMessage", &body).await?;
        }
        Ok(Incoming {
            place: Place { channel: id.to_owned(), thread_ts: ts.clone(), source: ts.clone() },
            channel_id: id.to_owned(),
            thread: Some(ts.clone()),
            user_id: None,
            text: markdown.to_owned(),
            route: vec![("slack.thread_ts".into(), ts)],
        })
    }

    async fn ask(&self, place: &Place, prompt: &Prompt<'_>) -> Result<String, ChatError> {
        if !self.may_post(&place.channel).await {
            return Err(ChatError::NotHere(
                "the conversation is in an external Slack channel, where this bot does not post \
                (allow_posting_in_external_channels: false), so nobody can be asked there"
                    .into(),
            ));
        }
        let text = to_slack(&prompt.markdown());
        let actions = match prompt {
            Prompt::Approval { id, level, .. } => {
                let first = match level {
                    Level::Confirm => {
                        button("confirm", &format!("Type {CONFIRMATION_CHALLENGE}…"), id, Some("primary"))
                    }
                    _ => button("approve", "Approve", id, Some("primary")),
                };
                vec![first, button("deny", "Deny", id, Some("danger"))]
            }
            Prompt::Question { id, choices, .. } => choices
                .iter()
                .take(25)
                .enumerate()
                .map(|(n, choice)| {
                    let label: String = choice.chars().take(75).collect();
                    button("answer", &label, &format!("{id}:{n}"), None)
                })
                .collect(),
        };
        let mut blocks = vec![section(&text)];
        if let Prompt::Question { .. } = prompt {
            blocks.push(
                json!({"type": "context", "elements": [{"type": "mrkdwn", "text": "Reply in this thread to answer."}]}),
            );
        }
        if !actions.is_empty() {
            blocks.push(json!({"type": "actions", "block_id": "prompt", "elements": actions}));
        }
        let body = json!({"channel": place.channel, "thread_ts": place.thread_ts, "text": text, "blocks": blocks});
        let answer = self.api.post("chat.postMessage", &body).await?;
        Ok(api::field(&answer, "ts", "chat.postMessage")?)
    }

    async fn settle(&self, place: &Place, id: &str, markdown: &str) {
        self.update(&place.channel, id, &to_slack(markdown)).await;
    }
}

/// Why a click decides nothing (said to the one who clicked).
#[derive(Debug, thiserror::Error)]
enum Refusal {
    /// Who clicked could not be looked up.
    #[error("could not check who you are ({0}); try again")]
    Unverified(SlackError),
    /// A bot (this one included) clicked.
    #[error("only a person can decide this")]
    NotAPerson,
    /// Someone outside the bot's `approvers`.
    #[error("only the approvers configured for this bot can decide this")]
    NotAnApprover,
}

impl From<SlackError> for ChatError {
    fn from(e: SlackError) -> Self {
        ChatError::Platform(Box::new(e))
    }
}

/// Handles one `events_api` payload: dedupes it, decides whether it starts a turn.
pub(crate) async fn event(chat: &Arc<Chat<Slack>>, payload: &Value) {
    let Ok(callback) = serde_json::from_value::<EventCallback>(payload.clone()) else {
        tracing::debug!("slack: an event the adapter does not read");
        return;
    };
    if !first_time(chat, &callback.event_id).await {
        tracing::debug!(event_id = callback.event_id, "slack: event already handled");
        return;
    }
    let slack = &chat.platform;
    let event = callback.event;
    let bot = slack.bot_user();
    let mention = format!("<@{bot}>");
    let own = event.user.as_deref() == Some(bot) || event.bot_id.is_some();
    if own || event.subtype.is_some() || event.user.is_none() || event.channel.is_empty() {
        return; // its own and other bots' messages, edits, deletions, joins
    }
    let thread_ts = event.thread_ts.clone().unwrap_or_else(|| event.ts.clone());
    let place = Place { channel: event.channel.clone(), thread_ts: thread_ts.clone(), source: event.ts.clone() };
    let direct = event.channel_type.as_deref() == Some("im");
    let starts = match event.kind.as_str() {
        "app_mention" => true,
        // A mention in a channel also arrives as `app_mention`: answered once, there.
        "message" if direct => true,
        "message" => slack.settings.respond == Respond::All && !event.text.contains(&mention),
        _ => false,
    };
    // A reply in a thread where a question waits answers it, whatever `respond` says.
    let answers = event.kind == "message" && chat.asking(&<Slack as Platform>::key(&place));
    if !starts && !answers {
        return;
    }
    let text = event.text.replace(&mention, "").trim().to_owned();
    let incoming = Incoming {
        place,
        channel_id: event.channel.clone(),
        thread: Some(thread_ts.clone()),
        user_id: event.user.clone(),
        text,
        route: vec![("slack.thread_ts".into(), thread_ts)],
    };
    chat.incoming(incoming);
}

/// Records `event_id` in the state store; `false` when it was handled before (a retry, also
/// across a restart). Ids older than [`SEEN_FOR`] are forgotten now and then.
async fn first_time(chat: &Chat<Slack>, event_id: &str) -> bool {
    let state = chat.engine().history().state();
    let ns = format!("adapter.slack.{}.events", chat.platform.bot_user());
    let now = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default().as_secs();
    match state.create(&ns, event_id, &now.to_string()).await {
        Ok(created) => {
            if created && now.is_multiple_of(64) {
                forget_old(state, &ns, now).await;
            }
            created
        }
        Err(e) => {
            tracing::warn!("slack: cannot record event {event_id}: {e}");
            true
        }
    }
}

async fn forget_old(state: &crate::store::StateStore, ns: &str, now: u64) {
    for key in state.keys(ns).await.unwrap_or_default() {
        let at = state.get(ns, &key).await.ok().flatten().and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        if now.saturating_sub(at) > SEEN_FOR.as_secs() {
            let _ = state.delete(ns, &key).await;
        }
    }
}

/// Handles an `interactive` payload; the acknowledgement's payload when Slack waits for one
/// (a modal submission refused with an error under its input).
pub(crate) async fn interaction(chat: &Arc<Chat<Slack>>, payload: &Value) -> Option<Value> {
    let Ok(interaction) = serde_json::from_value::<Interaction>(payload.clone()) else {
        tracing::debug!("slack: an interaction the adapter does not read");
        return None;
    };
    match interaction.kind.as_str() {
        "block_actions" => {
            let chat = chat.clone();
            // Clicks run beside the socket: a `users.info` lookup must not hold the next envelope.
            tokio::spawn(async move { click(&chat, interaction).await });
            None
        }
        "view_submission" => submit(chat, &interaction).await,
        _ => None,
    }
}

async fn click(chat: &Arc<Chat<Slack>>, interaction: Interaction) {
    let slack = &chat.platform;
    let user = interaction.user.id.as_str();
    let Some(container) = interaction.container.as_ref() else { return };
    let (Some(channel), Some(ts)) = (container.channel_id.as_deref(), container.message_ts.as_deref()) else { return };
    for action in &interaction.actions {
        if let Err(why) = slack.may_decide(user).await {
            slack.refuse(channel, user, None, &why.to_string()).await;
            return;
        }
        match action.action_id.as_str() {
            "approve" | "deny" => {
                let decision =
                    if action.action_id == "approve" { Decision::Approve(None) } else { Decision::Deny(None) };
                match chat.decide(&action.value, decision, user, channel).await {
                    Decided::Taken(approved) => {
                        let line = if approved {
                            format!("✅ Approved by <@{user}>")
                        } else {
                            format!("❌ Denied by <@{user}>")
                        };
                        slack.update(channel, ts, &line).await;
                    }
                    Decided::Refused(why) => slack.refuse(channel, user, None, &why).await,
                }
            }
            "confirm" => match chat.needs_challenge(&action.value, user, channel).await {
                Some(true) => {
                    let Some(trigger) = interaction.trigger_id.as_deref() else { return };
                    let view = confirm_view(&action.value, channel, ts);
                    if let Err(e) = slack.api.post("views.open", &json!({"trigger_id": trigger, "view": view})).await {
                        slack.refuse(channel, user, None, &format!("could not open the confirmation ({e})")).await;
                    }
                }
                _ => slack.refuse(channel, user, None, "this request is no longer waiting").await,
            },
            "answer" => {
                let Some((id, n)) = action.value.rsplit_once(':') else { return };
                let choice = chat
                    .choices(id, user, channel)
                    .await
                    .and_then(|c| n.parse::<usize>().ok().and_then(|n| c.get(n).cloned()));
                let Some(choice) = choice else {
                    slack.refuse(channel, user, None, "this question is no longer waiting").await;
                    return;
                };
                match chat.answer(id, &choice, user, channel).await {
                    Ok(()) => {
                        let line = format!("❓ answered by <@{user}>: {}", text::slack_escape(&choice));
                        slack.update(channel, ts, &line).await
                    }
                    Err(why) => slack.refuse(channel, user, None, &why.to_string()).await,
                }
            }
            other => tracing::debug!("slack: a click on `{other}`, which the adapter did not post"),
        }
    }
}

/// The modal that asks for the challenge of a `confirm` call.
fn confirm_view(id: &str, channel: &str, ts: &str) -> Value {
    json!({
        "type": "modal",
        "callback_id": "skillhost_confirm",
        "private_metadata": json!({"id": id, "channel": channel, "ts": ts}).to_string(),
        "title": {"type": "plain_text", "text": "Confirm"},
        "submit": {"type": "plain_text", "text": "Run"},
        "close": {"type": "plain_text", "text": "Cancel"},
        "blocks": [
            {"type": "section", "text": {"type": "mrkdwn", "text": format!("Type *{CONFIRMATION_CHALLENGE}* to run the call.")}},
            {"type": "input", "block_id": CHALLENGE_BLOCK, "label": {"type": "plain_text", "text": CONFIRMATION_CHALLENGE},
             "element": {"type": "plain_text_input", "action_id": CHALLENGE_ACTION}}
        ]
    })
}

/// A submitted confirmation: taken, or refused with the reason under the input.
async fn submit(chat: &Arc<Chat<Slack>>, interaction: &Interaction) -> Option<Value> {
    let slack = &chat.platform;
    let view = interaction.view.as_ref()?;
    let meta: Value = serde_json::from_str(&view.private_metadata).ok()?;
    let field = |key: &str| meta.get(key).and_then(Value::as_str).unwrap_or_default().to_owned();
    let (id, channel, ts) = (field("id"), field("channel"), field("ts"));
    let user = interaction.user.id.as_str();
    let error = |why: String| Some(json!({"response_action": "errors", "errors": {CHALLENGE_BLOCK: why}}));
    if let Err(why) = slack.may_decide(user).await {
        return error(why.to_string());
    }
    let typed = view.input(CHALLENGE_BLOCK, CHALLENGE_ACTION).unwrap_or_default().to_owned();
    match chat.decide(&id, Decision::Approve(Some(typed)), user, &channel).await {
        Decided::Taken(_) => {
            let chat = chat.clone();
            let line = format!("✅ Confirmed by <@{user}>");
            tokio::spawn(async move { chat.platform.update(&channel, &ts, &line).await });
            None
        }
        Decided::Refused(why) => error(why),
    }
}
