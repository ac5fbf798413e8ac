//! Slack's payloads as the adapter reads them: Socket Mode envelopes, Events API events,
//! interactive payloads (button clicks, modal submissions). Fields the adapter does not use
//! are left out; unknown ones are ignored, as Slack adds fields freely.

use serde::Deserialize;
use serde_json::Value;

/// One Socket Mode frame.
#[derive(Debug, Deserialize)]
pub struct Envelope {
    /// `hello`, `disconnect`, `events_api`, `interactive`, `slash_commands`.
    #[serde(rename = "type")]
    pub kind: String,
    /// What the acknowledgement names (absent on `hello` and `disconnect`).
    pub envelope_id: Option<String>,
    /// The event or interaction.
    #[serde(default)]
    pub payload: Value,
    /// Above 0 when Slack delivers the same event again.
    #[serde(default)]
    pub retry_attempt: u32,
    /// Why a `disconnect` came (`refresh_requested`, `link_disabled`, `warning`).
    pub reason: Option<String>,
}

/// An `events_api` payload.
#[derive(Debug, Deserialize)]
pub struct EventCallback {
    /// Unique per event, the same on every delivery of it.
    pub event_id: String,
    /// The event.
    pub event: Event,
}

/// A message or mention event.
#[derive(Debug, Deserialize)]
pub struct Event {
    /// `app_mention`, `message`, ...
    #[serde(rename = "type")]
    pub kind: String,
    /// `bot_message`, `message_changed`, `message_deleted`, ...: never a turn.
    pub subtype: Option<String>,
    /// The author (a person's or the bot's user id).
    pub user: Option<String>,
    /// Set when a bot (or an app) wrote it.
    pub bot_id: Option<String>,
    /// The text (mentions as `<@U...>`).
    #[serde(default)]
    pub text: String,
    /// The message's timestamp (its id).
    #[serde(default)]
    pub ts: String,
    /// The thread it is in, when it is a reply.
    pub thread_ts: Option<String>,
    /// The channel.
    #[serde(default)]
    pub channel: String,
    /// `channel`, `group`, `im`, `mpim`.
    pub channel_type: Option<String>,
}

/// A `block_actions` or `view_submission` payload.
#[derive(Debug, Deserialize)]
pub struct Interaction {
    /// `block_actions`, `view_submission`, ...
    #[serde(rename = "type")]
    pub kind: String,
    /// Who clicked or submitted.
    pub user: User,
    /// For opening a modal from a click (valid a few seconds).
    pub trigger_id: Option<String>,
    /// The message the buttons are on.
    pub container: Option<Container>,
    /// The buttons clicked.
    #[serde(default)]
    pub actions: Vec<Action>,
    /// The submitted modal.
    pub view: Option<View>,
}

/// The person behind an interaction.
#[derive(Debug, Deserialize)]
pub struct User {
    /// Their user id.
    pub id: String,
}

/// Where the clicked message is.
#[derive(Debug, Deserialize)]
pub struct Container {
    /// The message's timestamp.
    pub message_ts: Option<String>,
    /// Its channel.
    pub channel_id: Option<String>,
}

/// One clicked element.
#[derive(Debug, Deserialize)]
pub struct Action {
    /// Which button.
    pub action_id: String,
    /// What the button carries.
    #[serde(default)]
    pub value: String,
}

/// A submitted modal.
#[derive(Debug, Deserialize)]
pub struct View {
    /// What the adapter stored when it opened the modal.
    #[serde(default)]
    pub private_metadata: String,
    /// The inputs' values, by block and action id.
    #[serde(default)]
    pub state: Value,
}

impl View {
    /// The text typed into input `block` / `action`.
    pub fn input(&self, block: &str, action: &str) -> Option<&str> {
        self.state.get("values")?.get(block)?.get(action)?.get("value")?.as_str()
    }
}
