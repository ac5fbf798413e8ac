//! The Slack Web API, as the adapter uses it: `Authorization: Bearer`, JSON bodies for the
//! methods that write and form fields for those that read (as Slack accepts them), a 429
//! honoured with its `Retry-After`, and `ok: false` logged with the method and Slack's
//! error code. A token is never logged: errors name the method, not the request.

use serde::de::DeserializeOwned;
use serde_json::Value;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// How often one call is tried when Slack says to slow down.
const ATTEMPTS: usize = 4;
/// The longest `Retry-After` honoured; past it the call fails rather than hold a turn.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum SlackError {
    /// Slack answered `ok: false`.
    #[error("{method}: {error}")]
    Api {
        /// The method.
        method: String,
        /// Slack's error code.
        error: String,
    },
    /// The token is not (or no longer) valid: the bot stops.
    #[error("{method}: the token was refused ({error}): this Slack bot stops")]
    Auth {
        /// The method.
        method: String,
        /// Slack's error code.
        error: String,
    },
    /// No answer Slack could have given (connection, status, body).
    #[error("{method}: {problem}")]
    Transport {
        /// The method.
        method: String,
        /// What went wrong.
        problem: String,
    },
}

impl SlackError {
    /// Slack's error code, for an `ok: false` answer.
    pub fn code(&self) -> Option<&str> {
        match self {
            SlackError::Api { error, .. } | SlackError::Auth { error, .. } => Some(error),
            SlackError::Transport { .. } => None,
        }
    }
}

/// Which token a call carries.
#[derive(Debug, Clone, Copy)]
enum Token {
    Bot,
    App,
}

/// One app's Web API client.
pub struct WebApi {
    http: reqwest::Client,
    base: String,
    bot_token: String,
    app_token: String,
    /// Set once a token is refused: every later call fails at once.
    refused: AtomicBool,
}

impl WebApi {
    /// A client of `base` (ending in `/`) with the app's two tokens.
    pub fn new(base: &str, bot_token: &str, app_token: &str) -> Self {
        let base = if base.ends_with('/') { base.to_owned() } else { format!("{base}/") };
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .timeout(Duration::from_secs(30))
            .build()
            .unwrap_or_default();
        WebApi { http, base, bot_token: bot_token.into(), app_token: app_token.into(), refused: AtomicBool::new(false) }
    }

    /// Whether a token was refused (`invalid_auth`, `token_revoked`, ...).
    pub fn refused(&self) -> bool {
        self.refused.load(Ordering::Relaxed)
    }

    /// A method that writes, with a JSON body, as the bot.
    pub async fn post(&self, method: &str, body: &Value) -> Result<Value, SlackError> {
        self.call(Token::Bot, method, Body::Json(body)).await
    }

    /// A method that reads, with form fields, as the bot.
    pub async fn read(&self, method: &str, fields: &[(&str, &str)]) -> Result<Value, SlackError> {
        self.call(Token::Bot, method, Body::Form(fields)).await
    }

    /// `apps.connections.open`, with the app-level token: the Socket Mode URL.
    pub async fn open_connection(&self) -> Result<String, SlackError> {
        let answer = self.call(Token::App, "apps.connections.open", Body::Form(&[])).await?;
        field(&answer, "url", "apps.connections.open")
    }

    async fn call(&self, token: Token, method: &str, body: Body<'_>) -> Result<Value, SlackError> {
        let transport = |problem: String| SlackError::Transport { method: method.into(), problem };
        if self.refused() {
            return Err(SlackError::Auth { method: method.into(), error: "token refused earlier".into() });
        }
        let token = match token {
            Token::Bot => &self.bot_token,
            Token::App => &self.app_token,
        };
        for attempt in 1..=ATTEMPTS {
            let request = self.http.post(format!("{}{method}", self.base)).bearer_auth(token);
            let request = match &body {
                Body::Json(value) => request.json(value),
                Body::Form(fields) => request.form(fields),
            };
            let response = request.send().await.map_err(|e| transport(e.without_url().to_string()))?;
            if response.status() == reqwest::StatusCode::TOO_MANY_REQUESTS {
                let wait = retry_after(&response);
                if attempt == ATTEMPTS || wait > MAX_RETRY_AFTER {
                    return Err(SlackError::Api { method: method.into(), error: "ratelimited".into() });
                }
                tracing::warn!(method, wait_s = wait.as_secs(), "Slack rate limit: retrying after Retry-After");
                tokio::time::sleep(wait).await;
                continue;
            }
            let status = response.status();
            let answer: Value =
                response.json().await.map_err(|e| transport(format!("HTTP {status}: {}", e.without_url())))?;
            if answer.get("ok").and_then(Value::as_bool) == Some(true) {
                return Ok(answer);
            }
            let error = answer.get("error").and_then(Value::as_str).unwrap_or("unknown_error").to_owned();
            if matches!(
                error.as_str(),
                "invalid_auth"
                    | "token_revoked"
                    | "not_authed"
                    | "account_inactive"
                    | "token_expired"
                    | "not_allowed_token_type"
            ) {
                self.refused.store(true, Ordering::Relaxed);
                tracing::error!(method, error, "Slack refused the token: this Slack bot stops");
                return Err(SlackError::Auth { method: method.into(), error });
            }
            tracing::warn!(method, error, "Slack API call failed");
            return Err(SlackError::Api { method: method.into(), error });
        }
        Err(SlackError::Api { method: method.into(), error: "ratelimited".into() })
    }
}

enum Body<'a> {
    Json(&'a Value),
    Form(&'a [(&'a str, &'a str)]),
}

/// `Retry-After` in seconds (1 s when absent or unreadable).
fn retry_after(response: &reqwest::Response) -> Duration {
    let secs = response
        .headers()
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(1);
    Duration::from_secs(secs.max(1))
}

/// A field of an answer, typed.
pub fn field<T: DeserializeOwned>(answer: &Value, key: &str, method: &str) -> Result<T, SlackError> {
    answer
        .get(key)
        .cloned()
        .and_then(|v| serde_json::from_value(v).ok())
        .ok_or_else(|| SlackError::Transport { method: method.into(), problem: format!("the answer has no `{key}`") })
}
