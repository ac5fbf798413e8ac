//! Socket Mode: `apps.connections.open` with the app token, then the WebSocket URL it
//! returns. Every envelope is acknowledged at once (Slack redelivers after 3 s), before its
//! event is handled; a `disconnect` envelope, a dropped socket or a failed connect brings a
//! new connection, after a capped, jittered backoff for failures. A refused token stops this
//! bot (the process's other adapters keep serving).

use super::api::SlackError;
use super::wire::Envelope;
use super::{Slack, event, interaction};
use crate::adapters::chat::Chat;
use crate::adapters::{Stop, stopped};
use backon::BackoffBuilder;
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use tokio_tungstenite::tungstenite::Message;

/// Without a frame for this long (Slack pings every few seconds), the socket is taken as
/// dead and replaced.
const SILENCE: Duration = Duration::from_secs(60);

/// How one connection ended.
enum Ended {
    /// The process is stopping.
    Stop,
    /// Slack asked for a new connection, or the socket closed: connect again at once.
    Again(String),
}

/// Serves the app until `stop`, or until its token is refused.
pub async fn run(chat: Arc<Chat<Slack>>, stop: Stop) -> anyhow::Result<()> {
    let slack = &chat.platform;
    let mut backoff = backoff();
    loop {
        if *stop.borrow() {
            return Ok(());
        }
        let failure = match connect(&chat, stop.clone()).await {
            Ok(Ended::Stop) => return Ok(()),
            Ok(Ended::Again(why)) => {
                tracing::info!("{}: reconnecting ({why})", slack.label);
                backoff = self::backoff();
                continue;
            }
            Err(Failure::Refused(e)) => anyhow::bail!("{e}"),
            Err(Failure::Other(e)) => e,
        };
        let wait = backoff.next().unwrap_or(Duration::from_secs(30));
        tracing::warn!("{}: {failure}; connecting again in {} ms", slack.label, wait.as_millis());
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = stopped(stop.clone()) => return Ok(()),
        }
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

enum Failure {
    Refused(SlackError),
    Other(String),
}

impl From<SlackError> for Failure {
    fn from(e: SlackError) -> Self {
        match e {
            SlackError::Auth { .. } => Failure::Refused(e),
            other => Failure::Other(other.to_string()),
        }
    }
}

/// One connection, from `apps.connections.open` to its end.
async fn connect(chat: &Arc<Chat<Slack>>, stop: Stop) -> Result<Ended, Failure> {
    let slack = &chat.platform;
    slack.identify().await?;
    let url = slack.api.open_connection().await?;
    let (mut socket, _) = tokio_tungstenite::connect_async(url.as_str())
        .await
        .map_err(|e| Failure::Other(format!("the Socket Mode connection failed: {e}")))?;
    tracing::info!("{}: connected (Socket Mode)", slack.label);
    let stopping = stopped(stop);
    tokio::pin!(stopping);
    loop {
        let frame = tokio::select! {
            () = &mut stopping => {
                let _ = socket.close(None).await;
                return Ok(Ended::Stop);
            }
            frame = tokio::time::timeout(SILENCE, socket.next()) => frame,
        };
        let text = match frame {
            Err(_) => return Ok(Ended::Again(format!("no frame for {} s", SILENCE.as_secs()))),
            Ok(None) => return Ok(Ended::Again("the socket closed".into())),
            Ok(Some(Err(e))) => return Ok(Ended::Again(format!("the socket failed: {e}"))),
            Ok(Some(Ok(Message::Text(text)))) => text,
            Ok(Some(Ok(Message::Ping(data)))) => {
                let _ = socket.send(Message::Pong(data)).await;
                continue;
            }
            Ok(Some(Ok(Message::Close(_)))) => return Ok(Ended::Again("Slack closed the socket".into())),
            Ok(Some(Ok(_))) => continue,
        };
        let envelope: Envelope = match serde_json::from_str(text.as_str()) {
            Ok(envelope) => envelope,
            Err(e) => {
                tracing::warn!("{}: an unreadable Socket Mode frame: {e}", slack.label);
                continue;
            }
        };
        match envelope.kind.as_str() {
            "hello" => tracing::debug!("{}: hello", slack.label),
            "disconnect" => {
                return Ok(Ended::Again(format!(
                    "Slack asked: {}",
                    envelope.reason.as_deref().unwrap_or("disconnect")
                )));
            }
            "events_api" => {
                ack(&mut socket, &envelope, None).await?;
                if envelope.retry_attempt > 0 {
                    tracing::debug!(attempt = envelope.retry_attempt, "{}: a redelivered event", slack.label);
                }
                event(chat, &envelope.payload).await;
            }
            "interactive" => {
                let response = interaction(chat, &envelope.payload).await;
                ack(&mut socket, &envelope, response).await?;
            }
            // Slash commands and options are not used; acknowledged so Slack does not retry.
            _ => ack(&mut socket, &envelope, None).await?,
        }
    }
}

/// Acknowledges an envelope, with a response payload when there is one.
async fn ack<S>(socket: &mut S, envelope: &Envelope, payload: Option<Value>) -> Result<(), Failure>
where
    S: futures::Sink<Message> + Unpin,
    S::Error: std::fmt::Display,
{
    let Some(id) = envelope.envelope_id.as_deref() else { return Ok(()) };
    let mut ack = json!({ "envelope_id": id });
    if let Some(payload) = payload {
        ack["payload"] = payload;
    }
    socket
        .send(Message::Text(ack.to_string().into()))
        .await
        .map_err(|e| Failure::Other(format!("the acknowledgement failed: {e}")))
}
