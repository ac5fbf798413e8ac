//! What every HTTP provider shares: the client, the streaming POST, error bodies,
//! `retry-after`, endpoint URLs and tool-argument parsing.

use super::sse::SseReader;
use super::{Block, LlmError, StopReason};
use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use reqwest::header::HeaderMap;
use serde_json::Value;
use std::time::Duration;

/// The event reader over a response body.
pub(crate) type Events = SseReader<BoxStream<'static, Result<Bytes, reqwest::Error>>>;

/// The longest error body quoted in a message.
const MAX_QUOTED: usize = 500;

/// The client every provider shares. No overall timeout: a long answer streams for minutes; a
/// stalled one is caught by the read timeout, and the engine's turn deadline bounds the rest.
/// Built on first use (it reads the system's root certificates, which a start need not wait
/// for).
pub(crate) fn client() -> &'static reqwest::Client {
    static CLIENT: std::sync::LazyLock<reqwest::Client> = std::sync::LazyLock::new(|| {
        reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(20))
            .read_timeout(Duration::from_secs(300))
            .build()
            .expect("the HTTP client builds with static settings")
    });
    &CLIENT
}

/// `base` + `path`, where `path` starts with `/v1/`. A base that already ends in `/v1` (the
/// OpenAI SDKs' convention for `base_url`) does not get a second one.
pub(crate) fn endpoint(base: &str, path: &str) -> String {
    let base = base.trim_end_matches('/');
    match path.strip_prefix("/v1") {
        Some(rest) if base.ends_with("/v1") => format!("{base}{rest}"),
        _ => format!("{base}{path}"),
    }
}

/// The W3C trace context (`traceparent`, `tracestate`) of the current span, when traces are
/// on (the propagator is a no-op otherwise): a collector then joins the provider's side, if
/// it traces too, to the `chat` span.
pub(crate) fn trace_headers() -> HeaderMap {
    use tracing_opentelemetry::OpenTelemetrySpanExt as _;
    struct Headers<'a>(&'a mut HeaderMap);
    impl opentelemetry::propagation::Injector for Headers<'_> {
        fn set(&mut self, key: &str, value: String) {
            let name = reqwest::header::HeaderName::from_bytes(key.as_bytes());
            if let (Ok(name), Ok(value)) = (name, reqwest::header::HeaderValue::from_str(&value)) {
                self.0.insert(name, value);
            }
        }
    }
    let context = tracing::Span::current().context();
    let mut headers = HeaderMap::new();
    opentelemetry::global::get_text_map_propagator(|p| p.inject_context(&context, &mut Headers(&mut headers)));
    headers
}

/// POSTs `body` as JSON and returns the event stream of a 2xx answer; any other status
/// becomes [`LlmError::Status`] with the API's message and `retry-after`.
pub(crate) async fn post_events(
    provider: &'static str,
    client: &reqwest::Client,
    url: &str,
    headers: HeaderMap,
    body: &(impl serde::Serialize + Sync),
) -> Result<Events, LlmError> {
    let (mut headers, trace) = (headers, trace_headers());
    headers.extend(trace);
    let sent = client.post(url).headers(headers).header("accept", "text/event-stream").json(body).send().await;
    let response = sent.map_err(|e| LlmError::transport(provider, error_chain(&e)))?;
    let status = response.status();
    if !status.is_success() {
        let retry_after = retry_after(response.headers());
        let text = response.text().await.unwrap_or_default();
        let message = error_message(&text);
        return Err(LlmError::Status { provider, status: status.as_u16(), message, retry_after });
    }
    Ok(SseReader::new(provider, response.bytes_stream().boxed()))
}

/// An error and its causes: reqwest's own message ("error sending request") hides the one
/// that matters ("connection refused").
pub(crate) fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// The wait an error response asks for: `retry-after-ms` (OpenAI), else `retry-after` in
/// seconds. The HTTP-date form is not used by these APIs and falls back to our backoff.
pub(crate) fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let number = |name: &str| headers.get(name)?.to_str().ok()?.trim().parse::<f64>().ok();
    let seconds = number("retry-after-ms").map(|ms| ms / 1000.0).or_else(|| number("retry-after"))?;
    Duration::try_from_secs_f64(seconds).ok()
}

/// The message of an error body: `{"error": {"type", "message"}}` (Anthropic, OpenAI),
/// `{"error": "..."}` (Ollama) or `{"message": "..."}`; otherwise the body's start.
pub(crate) fn error_message(body: &str) -> String {
    let Ok(json) = serde_json::from_str::<Value>(body) else { return quote(body) };
    let error = json.get("error").unwrap_or(&json);
    if let Some(text) = error.as_str() {
        return text.to_owned();
    }
    let kind = error.get("type").or_else(|| error.get("code")).and_then(Value::as_str);
    match (kind, error.get("message").and_then(Value::as_str)) {
        (Some(kind), Some(message)) => format!("{kind}: {message}"),
        (None, Some(message)) => message.to_owned(),
        _ => quote(body),
    }
}

fn quote(body: &str) -> String {
    let body = body.trim();
    if body.is_empty() {
        return "(empty body)".into();
    }
    match body.char_indices().nth(MAX_QUOTED) {
        Some((cut, _)) => format!("{}…", &body[..cut]),
        None => body.to_owned(),
    }
}

/// Parses an event's data as JSON.
pub(crate) fn json(provider: &'static str, data: &str) -> Result<Value, LlmError> {
    serde_json::from_str(data)
        .map_err(|e| LlmError::protocol(provider, format!("event is not JSON ({e}): {}", quote(data))))
}

/// A finished tool call from its streamed argument text (empty means no arguments).
///
/// Arguments that do not parse are a protocol error, except when the output budget ran out:
/// the model was cut off mid-call, so the call is dropped and the stop reason says why.
pub(crate) fn tool_use(
    provider: &'static str,
    id: String,
    name: String,
    arguments: &str,
    stop: &StopReason,
) -> Result<Option<Block>, LlmError> {
    if arguments.trim().is_empty() {
        return Ok(Some(Block::ToolUse { id, name, input: Value::Object(Default::default()) }));
    }
    match serde_json::from_str(arguments) {
        Ok(input) => Ok(Some(Block::ToolUse { id, name, input })),
        Err(_) if *stop == StopReason::MaxTokens => Ok(None),
        Err(e) => Err(LlmError::protocol(provider, format!("arguments of tool call {name} are not JSON ({e})"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_does_not_double_v1() {
        assert_eq!(endpoint("https://api.openai.com", "/v1/responses"), "https://api.openai.com/v1/responses");
        assert_eq!(endpoint("https://gw.example/v1/", "/v1/responses"), "https://gw.example/v1/responses");
        assert_eq!(endpoint("http://h/v1", "/chat/completions"), "http://h/v1/chat/completions");
    }

    #[test]
    fn error_messages_are_extracted() {
        let anthropic = r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#;
        assert_eq!(error_message(anthropic), "authentication_error: invalid x-api-key");
        assert_eq!(error_message(r#"{"error":"model not found"}"#), "model not found");
        assert_eq!(error_message("<html>bad gateway</html>"), "<html>bad gateway</html>");
        assert_eq!(error_message(""), "(empty body)");
    }

    #[test]
    fn retry_after_prefers_milliseconds() {
        let mut headers = HeaderMap::new();
        headers.insert("retry-after", "2".parse().unwrap());
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(2)));
        headers.insert("retry-after-ms", "150".parse().unwrap());
        assert_eq!(retry_after(&headers), Some(Duration::from_millis(150)));
        headers.clear();
        headers.insert("retry-after", "Wed, 21 Oct 2015 07:28:00 GMT".parse().unwrap());
        assert_eq!(retry_after(&headers), None);
    }
}
