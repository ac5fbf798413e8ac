//! The legacy HTTP+SSE transport (protocol 2024-11-05) on the client side. rmcp dropped its
//! own in 0.11; servers still offer it, so `transport: sse` keeps working with this one.
//!
//! A GET opens the event stream; its first `endpoint` event names the URL (relative to the
//! stream's) that client messages are POSTed to; server messages arrive as `message` events.
//! There is no reconnection here: when the stream ends the session ends, and the manager's
//! supervision reconnects with backoff, as for the other transports.

use futures::StreamExt;
use futures::stream::BoxStream;
use rmcp::RoleClient;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::Transport;
use sse_stream::{Sse, SseStream};
use url::Url;

/// Why the SSE transport failed.
#[derive(Debug, thiserror::Error)]
pub enum SseError {
    /// The HTTP request failed or was answered with an error status.
    #[error("HTTP: {0}")]
    Http(#[from] reqwest::Error),
    /// The URL, or the message endpoint the server named, is not a valid URL.
    #[error("bad URL: {0}")]
    Url(#[from] url::ParseError),
    /// The server did not answer with an event stream.
    #[error("expected an event stream, got content type {0:?}")]
    NotEventStream(String),
    /// The stream broke or ended before the server named its message endpoint.
    #[error("the event stream ended before the server sent its `endpoint` event")]
    NoEndpoint,
}

/// A client connection over HTTP+SSE; see the module docs.
pub struct SseTransport {
    client: reqwest::Client,
    /// Where client messages are POSTed (the server's `endpoint` event).
    endpoint: Url,
    events: BoxStream<'static, Result<Sse, sse_stream::Error>>,
}

impl SseTransport {
    /// Opens the event stream at `url` and waits for the server's message endpoint.
    pub async fn connect(client: reqwest::Client, url: &str) -> Result<Self, SseError> {
        let url = Url::parse(url)?;
        let response = client
            .get(url.clone())
            .header(reqwest::header::ACCEPT, "text/event-stream")
            .send()
            .await?
            .error_for_status()?;
        let content_type = response.headers().get(reqwest::header::CONTENT_TYPE);
        let content_type = content_type.and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
        if !content_type.starts_with("text/event-stream") {
            return Err(SseError::NotEventStream(content_type));
        }
        let mut events = SseStream::from_bytes_stream(response.bytes_stream()).boxed();
        let endpoint = loop {
            match events.next().await {
                Some(Ok(event)) if event.event.as_deref() == Some("endpoint") => {
                    break url.join(event.data.as_deref().unwrap_or_default().trim())?;
                }
                Some(Ok(_)) => continue,
                Some(Err(_)) | None => return Err(SseError::NoEndpoint),
            }
        };
        Ok(SseTransport { client, endpoint, events })
    }
}

impl Transport<RoleClient> for SseTransport {
    type Error = SseError;

    fn send(&mut self, item: ClientJsonRpcMessage) -> impl Future<Output = Result<(), SseError>> + Send + 'static {
        let request = self.client.post(self.endpoint.clone()).json(&item);
        async move {
            request.send().await?.error_for_status()?;
            Ok(())
        }
    }

    async fn receive(&mut self) -> Option<ServerJsonRpcMessage> {
        loop {
            let event = match self.events.next().await? {
                Ok(event) => event,
                Err(e) => {
                    tracing::warn!("MCP SSE stream broke: {e}");
                    return None;
                }
            };
            if !matches!(event.event.as_deref(), None | Some("message")) {
                continue;
            }
            match serde_json::from_str(event.data.as_deref().unwrap_or_default()) {
                Ok(message) => return Some(message),
                Err(e) => tracing::warn!("MCP SSE server sent a message that is not JSON-RPC: {e}"),
            }
        }
    }

    async fn close(&mut self) -> Result<(), SseError> {
        self.events = futures::stream::empty().boxed();
        Ok(())
    }
}
