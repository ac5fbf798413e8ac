//! The session's standalone stream, waited for. Over streamable HTTP with a session, rmcp
//! opens the `GET` stream on which a server sends what belongs to no request (an
//! `elicitation/create` sent with no related request, `list_changed`) in a task of its own
//! after the handshake, so a first call can reach the server before it: then a request the
//! server sends meanwhile has nowhere to go, and the server waits on it until its own timeout
//! (the suite's `elicitation-sep1034-client-defaults` lost a minute so, about one run in five
//! on two busy cores). [`Listening`] wraps the HTTP client and tells when that stream was
//! answered (opened, or refused: a server without one); [`Opened::wait`] waits for it,
//! bounded, before the session is reported ready.

use futures::stream::BoxStream;
use reqwest::header::{HeaderName, HeaderValue};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse, StreamableHttpResponseLimits,
};
use sse_stream::{Error as SseError, Sse};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::sync::watch;

/// How long a new session waits for its standalone stream at most.
pub const WAIT: Duration = Duration::from_secs(2);

/// An HTTP client whose standalone `GET` stream's answer is told to [`Opened`].
#[derive(Clone)]
pub struct Listening<C> {
    inner: C,
    opened: Arc<watch::Sender<bool>>,
    /// Whether the server gave a session id (only a session has a standalone stream).
    session: Arc<AtomicBool>,
}

/// Tells when the session's standalone stream was answered.
pub struct Opened {
    answered: watch::Receiver<bool>,
    session: Arc<AtomicBool>,
}

impl<C> Listening<C> {
    /// Wraps `inner`.
    pub fn new(inner: C) -> (Listening<C>, Opened) {
        let (tx, answered) = watch::channel(false);
        let session = Arc::new(AtomicBool::new(false));
        (Listening { inner, opened: Arc::new(tx), session: session.clone() }, Opened { answered, session })
    }
}

impl Opened {
    /// Waits until the standalone stream was answered, at most `within`; at once when the
    /// server gave no session (it has no such stream).
    pub async fn wait(mut self, within: Duration) {
        if self.session.load(Ordering::Relaxed) {
            let _ = tokio::time::timeout(within, self.answered.wait_for(|answered| *answered)).await;
        }
    }
}

impl<C: StreamableHttpClient + Sync> StreamableHttpClient for Listening<C> {
    type Error = C::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        self.noted(self.inner.post_message(uri, message, session_id, auth_header, custom_headers).await)
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let inner = &self.inner;
        let posted = inner.post_message_with_max_sse_event_size(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            max_sse_event_size,
        );
        self.noted(posted.await)
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let inner = &self.inner;
        let posted =
            inner.post_message_with_response_limits(uri, message, session_id, auth_header, custom_headers, limits);
        self.noted(posted.await)
    }

    fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> impl Future<Output = Result<(), StreamableHttpError<Self::Error>>> + Send + '_ {
        self.inner.delete_session(uri, session_id, auth_header, custom_headers)
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<Self::Error>> {
        let standalone = session_id.is_some() && last_event_id.is_none();
        let answer = self.inner.get_stream(uri, session_id, last_event_id, auth_header, custom_headers).await;
        self.answered(standalone);
        answer
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<Self::Error>> {
        // The standalone stream: a session's, not a resumption of a response.
        let standalone = session_id.is_some() && last_event_id.is_none();
        let answer = self
            .inner
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await;
        self.answered(standalone);
        answer
    }
}

impl<C> Listening<C> {
    /// `posted`, its session id (if any) noted.
    fn noted<E>(&self, posted: Result<StreamableHttpPostResponse, E>) -> Result<StreamableHttpPostResponse, E> {
        if let Ok(StreamableHttpPostResponse::Json(_, Some(_)) | StreamableHttpPostResponse::Sse(_, Some(_))) = &posted
        {
            self.session.store(true, Ordering::Relaxed);
        }
        posted
    }

    /// A `GET` was answered: when it was the standalone stream's, the session may go on.
    fn answered(&self, standalone: bool) {
        if standalone {
            self.opened.send_replace(true);
        }
    }
}
