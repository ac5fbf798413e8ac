//! The Bot API's payloads as the adapter reads them; unknown fields are ignored.

use serde::Deserialize;
use serde_json::Value;

/// Every Bot API answer.
#[derive(Debug, Deserialize)]
pub struct Reply {
    /// Whether the call succeeded.
    pub ok: bool,
    /// Its result.
    pub result: Option<Value>,
    /// The error's code (HTTP-like).
    pub error_code: Option<i64>,
    /// The error, in words.
    pub description: Option<String>,
    /// `retry_after` on 429.
    pub parameters: Option<Parameters>,
}

/// `ResponseParameters`.
#[derive(Debug, Deserialize)]
pub struct Parameters {
    /// Seconds to wait before the next call (429).
    pub retry_after: Option<u64>,
}

/// One update from `getUpdates` (its `update_id` is read before it is parsed: an update the
/// adapter cannot read still moves the offset on).
#[derive(Debug, Deserialize)]
pub struct Update {
    /// A new message.
    pub message: Option<TgMessage>,
    /// A button press.
    pub callback_query: Option<CallbackQuery>,
}

/// A message.
#[derive(Debug, Deserialize)]
pub struct TgMessage {
    /// Its id within the chat.
    pub message_id: i64,
    /// Its author (absent in channels).
    pub from: Option<TgUser>,
    /// Its chat.
    pub chat: TgChat,
    /// Its text.
    pub text: Option<String>,
    /// The message it replies to.
    pub reply_to_message: Option<Box<TgMessage>>,
}

/// A chat.
#[derive(Debug, Deserialize)]
pub struct TgChat {
    /// Its id (negative for groups).
    pub id: i64,
}

/// A user or bot.
#[derive(Debug, Deserialize)]
pub struct TgUser {
    /// Their id.
    pub id: i64,
    /// Whether it is a bot.
    #[serde(default)]
    pub is_bot: bool,
    /// Their first name.
    #[serde(default)]
    pub first_name: String,
    /// Their username, if any.
    pub username: Option<String>,
}

impl TgUser {
    /// How an outcome line names them.
    pub fn name(&self) -> String {
        match &self.username {
            Some(username) => format!("@{username}"),
            None => self.first_name.clone(),
        }
    }
}

/// A press on an inline keyboard button.
#[derive(Debug, Deserialize)]
pub struct CallbackQuery {
    /// What `answerCallbackQuery` names.
    pub id: String,
    /// Who pressed.
    pub from: TgUser,
    /// The message the keyboard is on.
    pub message: Option<TgMessage>,
    /// The button's `callback_data`.
    pub data: Option<String>,
}
