//! Outbound HTTP to the hosts that both `skill.toml` (`http_hosts`) and the operator allow.
//!
//! The host sends the request and returns the whole response; it does not follow redirects
//! across hosts.
//!
//! ```no_run
//! use skill_sdk::http::{self, Request};
//! use std::time::Duration;
//! # fn run() -> Result<(), skill_sdk::Error> {
//! let page = http::get("https://example.com/health")?;
//! let created = http::fetch(
//!     Request::post("https://example.com/api/items")
//!         .json(&skill_sdk::json!({ "name": "x" }))
//!         .timeout(Duration::from_secs(5)),
//! )?;
//! if !created.is_success() {
//!     return Err(skill_sdk::Error::msg(format!("status {}", created.status)));
//! }
//! # Ok(()) }
//! ```

use std::fmt;
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::Error;
use crate::bindings::skillhost::skill::http as wit;

/// Why a request failed before a response arrived.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum HttpError {
    /// The host is not in both the manifest's and the operator's allow lists.
    Denied(String),
    /// The URL could not be parsed or its scheme is not http or https.
    InvalidUrl(String),
    /// No response within the timeout.
    Timeout,
    /// The connection failed (refused, reset, DNS, TLS), described.
    Connection(String),
    /// The response body is larger than the host allows.
    TooLarge,
    /// Any other failure, described.
    Other(String),
}

impl HttpError {
    /// The WIT name of the case (`denied`, `invalid-url`, `timeout`, ...).
    pub fn kind(&self) -> &'static str {
        match self {
            HttpError::Denied(_) => "denied",
            HttpError::InvalidUrl(_) => "invalid-url",
            HttpError::Timeout => "timeout",
            HttpError::Connection(_) => "connection",
            HttpError::TooLarge => "too-large",
            HttpError::Other(_) => "other",
        }
    }
}

impl fmt::Display for HttpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HttpError::Denied(host) => write!(f, "host not allowed: {host}"),
            HttpError::InvalidUrl(d) => write!(f, "invalid URL: {d}"),
            HttpError::Timeout => f.write_str("timed out"),
            HttpError::Connection(d) => write!(f, "connection failed: {d}"),
            HttpError::TooLarge => f.write_str("response too large"),
            HttpError::Other(d) => f.write_str(d),
        }
    }
}

impl std::error::Error for HttpError {}

impl From<wit::Error> for HttpError {
    fn from(e: wit::Error) -> Self {
        match e {
            wit::Error::Denied(d) => HttpError::Denied(d),
            wit::Error::InvalidUrl(d) => HttpError::InvalidUrl(d),
            wit::Error::Timeout => HttpError::Timeout,
            wit::Error::Connection(d) => HttpError::Connection(d),
            wit::Error::TooLarge => HttpError::TooLarge,
            wit::Error::Other(d) => HttpError::Other(d),
        }
    }
}

/// A request to send with [`fetch`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    method: String,
    url: String,
    headers: Vec<(String, String)>,
    body: Option<Vec<u8>>,
    timeout: Option<Duration>,
}

impl Request {
    /// A request with any method (`GET`, `POST`, `PUT`, ...).
    pub fn new(method: impl Into<String>, url: impl Into<String>) -> Self {
        Request { method: method.into(), url: url.into(), headers: Vec::new(), body: None, timeout: None }
    }

    /// A `GET` request.
    pub fn get(url: impl Into<String>) -> Self {
        Self::new("GET", url)
    }

    /// A `POST` request; add a body with [`Request::body`] or [`Request::json`].
    pub fn post(url: impl Into<String>) -> Self {
        Self::new("POST", url)
    }

    /// Adds a header.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Sets the body.
    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Self {
        self.body = Some(body.into());
        self
    }

    /// Sets a JSON body and its `content-type`.
    pub fn json<T: Serialize + ?Sized>(self, value: &T) -> Self {
        // Serialising a `Serialize` value to a Vec fails only for maps with non-string keys.
        let body = serde_json::to_vec(value).expect("request body serialises to JSON");
        self.header("content-type", "application/json").body(body)
    }

    /// Gives up after `timeout` (capped by the call's own deadline).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }
}

/// A response received. Any status counts as a response, 404 and 500 included.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// The HTTP status code.
    pub status: u16,
    /// Header names and values.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
}

impl Response {
    /// Whether the status is 2xx.
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// The first header called `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    /// The body as text, with invalid UTF-8 replaced.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body decoded from JSON.
    pub fn json<T: DeserializeOwned>(&self) -> Result<T, Error> {
        serde_json::from_slice(&self.body)
            .map_err(|e| Error::msg(format!("response body is not the expected JSON: {e}")))
    }
}

/// Sends `GET url` and waits for the whole response.
pub fn get(url: &str) -> Result<Response, HttpError> {
    fetch(Request::get(url))
}

/// Sends a request and waits for the whole response.
pub fn fetch(request: Request) -> Result<Response, HttpError> {
    let timeout_ms = request.timeout.map(|t| u32::try_from(t.as_millis()).unwrap_or(u32::MAX));
    let request = wit::Request {
        method: request.method,
        url: request.url,
        headers: request.headers,
        body: request.body,
        timeout_ms,
    };
    let response = wit::fetch(&request)?;
    Ok(Response { status: response.status, headers: response.headers, body: response.body })
}
