//! `adapter.slack` and `adapter.telegram`: the chat platforms' settings, and the checks that
//! stop `run` before anything loads when a bot's token is missing or malformed. A token never
//! appears in an error: only the setting's name does.

use serde::{Deserialize, Deserializer};

/// The Slack Web API's default base.
pub const SLACK_API: &str = "https://slack.com/api/";
/// The Telegram Bot API's default base.
pub const TELEGRAM_API: &str = "https://api.telegram.org";

/// `adapter.slack`: one Slack app in Socket Mode.
#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SlackSettings {
    /// The Bot User OAuth Token (`xoxb-...`): the Web API.
    #[serde(deserialize_with = "unset_is_empty")]
    pub bot_token: String,
    /// The App-Level Token (`xapp-...`, `connections:write`): Socket Mode.
    #[serde(deserialize_with = "unset_is_empty")]
    pub app_token: String,
    /// Which messages start a turn.
    pub respond: Respond,
    /// `false`: never post text in a Slack Connect / externally shared channel.
    pub allow_posting_in_external_channels: bool,
    /// Slack user ids allowed to decide approvals; empty: any person in the conversation.
    pub approvers: Vec<String>,
    /// The Web API base (a proxy, a gateway, a test server).
    pub base_url: String,
}

impl Default for SlackSettings {
    fn default() -> Self {
        SlackSettings {
            bot_token: String::new(),
            app_token: String::new(),
            respond: Respond::Mentions,
            allow_posting_in_external_channels: true,
            approvers: Vec::new(),
            base_url: SLACK_API.into(),
        }
    }
}

impl std::fmt::Debug for SlackSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlackSettings")
            .field("respond", &self.respond)
            .field("allow_posting_in_external_channels", &self.allow_posting_in_external_channels)
            .field("approvers", &self.approvers)
            .field("base_url", &self.base_url)
            .finish_non_exhaustive()
    }
}

/// `adapter.slack.respond`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Respond {
    /// `app_mention` events and direct messages (the default).
    Mentions,
    /// Every message in the channels the bot is in.
    All,
}

/// `adapter.telegram`: one Telegram bot, long polling.
#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TelegramSettings {
    /// The bot's token (`<digits>:<secret>`, from @BotFather).
    #[serde(deserialize_with = "unset_is_empty")]
    pub bot_token: String,
    /// The chats the bot answers; empty refuses every chat.
    pub allowed_chat_ids: Vec<ChatId>,
    /// Telegram user ids allowed to decide approvals; empty: anyone in an allowed chat.
    pub approvers: Vec<ChatId>,
    /// The Bot API base; requests go to `{base_url}/bot<token>/<method>`.
    pub base_url: String,
}

impl Default for TelegramSettings {
    fn default() -> Self {
        TelegramSettings {
            bot_token: String::new(),
            allowed_chat_ids: Vec::new(),
            approvers: Vec::new(),
            base_url: TELEGRAM_API.into(),
        }
    }
}

impl std::fmt::Debug for TelegramSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TelegramSettings")
            .field("allowed_chat_ids", &self.allowed_chat_ids)
            .field("approvers", &self.approvers)
            .field("base_url", &self.base_url)
            .finish_non_exhaustive()
    }
}

/// A Telegram chat or user id: a number, written as one or as text (`${TELEGRAM_CHAT_ID}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ChatId(pub i64);

impl<'de> Deserialize<'de> for ChatId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Number(i64),
            Text(String),
        }
        match Raw::deserialize(d)? {
            Raw::Number(n) => Ok(ChatId(n)),
            Raw::Text(t) => t.trim().parse().map(ChatId).map_err(|_| {
                serde::de::Error::custom(format!(
                    "`{t}` is not a Telegram id (an integer, e.g. 4242 or -1001234567890)"
                ))
            }),
        }
    }
}

/// A token written as an unset `${VAR}` (which an agent's merged block carries as null) is
/// empty, so that it is reported as not set, by name.
fn unset_is_empty<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(Option::<String>::deserialize(d)?.unwrap_or_default())
}

impl SlackSettings {
    /// Malformed tokens, wherever the block is written (a set token must have its prefix).
    pub(super) fn check(&self) -> Result<(), String> {
        for (key, token, prefix) in [("bot_token", &self.bot_token, "xoxb-"), ("app_token", &self.app_token, "xapp-")] {
            if !token.is_empty() && !well_formed(token, prefix) {
                return Err(format!("slack.{key} is not a Slack {prefix}... token"));
            }
        }
        url(&self.base_url).map_err(|e| format!("slack.base_url: {e}"))
    }

    /// What the bot needs to serve: both tokens.
    pub fn ready(&self) -> Result<(), String> {
        self.check()?;
        for (key, token, var) in
            [("bot_token", &self.bot_token, "SLACK_BOT_TOKEN"), ("app_token", &self.app_token, "SLACK_APP_TOKEN")]
        {
            if token.is_empty() {
                return Err(format!("slack.{key} is not set (e.g. `{key}: ${{{var}}}` with {var} in the environment)"));
            }
        }
        Ok(())
    }
}

impl TelegramSettings {
    /// A malformed token, wherever the block is written.
    pub(super) fn check(&self) -> Result<(), String> {
        if !self.bot_token.is_empty() && !telegram_token(&self.bot_token) {
            return Err("telegram.bot_token is not a Telegram bot token (<digits>:<secret>, from @BotFather)".into());
        }
        url(&self.base_url).map_err(|e| format!("telegram.base_url: {e}"))
    }

    /// What the bot needs to serve: its token.
    pub fn ready(&self) -> Result<(), String> {
        self.check()?;
        if self.bot_token.is_empty() {
            return Err("telegram.bot_token is not set (e.g. `bot_token: ${TELEGRAM_BOT_TOKEN}`)".into());
        }
        Ok(())
    }
}

/// `prefix` then token characters only (no spaces, no quotes pasted with it).
fn well_formed(token: &str, prefix: &str) -> bool {
    token.len() > prefix.len()
        && token.starts_with(prefix)
        && token.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// `<digits>:<secret>`.
fn telegram_token(token: &str) -> bool {
    let Some((id, secret)) = token.split_once(':') else { return false };
    !id.is_empty()
        && id.bytes().all(|b| b.is_ascii_digit())
        && secret.len() >= 20
        && secret.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

fn url(text: &str) -> Result<(), String> {
    match url::Url::parse(text) {
        Ok(u) if matches!(u.scheme(), "http" | "https") => Ok(()),
        Ok(u) => Err(format!("`{text}` is not http(s) (scheme `{}`)", u.scheme())),
        Err(e) => Err(format!("`{text}` is not a URL: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_checked_without_being_shown() {
        let secret = "xoxb-1234-SECRET";
        let slack =
            SlackSettings { bot_token: secret.into(), app_token: "xoxb-wrong-kind".into(), ..Default::default() };
        let err = slack.ready().unwrap_err();
        assert!(err.contains("slack.app_token") && !err.contains("wrong-kind"), "{err}");
        let slack = SlackSettings { bot_token: secret.into(), ..Default::default() };
        assert!(slack.check().is_ok());
        assert!(slack.ready().unwrap_err().contains("slack.app_token is not set"));
        let slack = SlackSettings { bot_token: format!("{secret} "), ..Default::default() };
        assert!(!slack.check().unwrap_err().contains("SECRET"));

        let good = "123456:ABCdefGHIjklMNOpqrSTUvwxyz-_0123";
        assert!(TelegramSettings { bot_token: good.into(), ..Default::default() }.ready().is_ok());
        for bad in ["123456", "abc:ABCdefGHIjklMNOpqrSTUvwxyz", "1:short", ":ABCdefGHIjklMNOpqrSTUvwxyz"] {
            let err = TelegramSettings { bot_token: bad.into(), ..Default::default() }.ready().unwrap_err();
            assert!(err.contains("telegram.bot_token") && !err.contains(bad), "{err}");
        }
        assert!(TelegramSettings::default().ready().unwrap_err().contains("not set"));
    }

    #[test]
    fn chat_ids_are_numbers_or_their_text() {
        let ids: Vec<ChatId> = serde_json::from_value(serde_json::json!([42, "-1001", " 7 "])).unwrap();
        assert_eq!(ids, [ChatId(42), ChatId(-1001), ChatId(7)]);
        let err = serde_json::from_value::<Vec<ChatId>>(serde_json::json!([""])).unwrap_err().to_string();
        assert!(err.contains("not a Telegram id"), "{err}");
    }
}
