//! `http`: outbound requests to hosts both the manifest and the operator allow.

use crate::sandbox::bindings::skillhost::skill::http::{Error, Host, Request, Response};
use crate::sandbox::host_state::HostState;
use futures::StreamExt;
use std::time::{Duration, Instant};

/// The largest response body handed to a guest.
pub const MAX_BODY_BYTES: usize = 16 << 20;

impl Host for HostState {
    async fn fetch(&mut self, request: Request) -> Result<Response, Error> {
        let url = url::Url::parse(&request.url).map_err(|e| Error::InvalidUrl(format!("{}: {e}", request.url)))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(Error::InvalidUrl(format!("scheme `{}` is not http or https", url.scheme())));
        }
        let host = url.host_str().unwrap_or_default().trim_matches(['[', ']']).to_ascii_lowercase();
        let port = url.port_or_known_default().unwrap_or(0);
        if !self.caps.http_allowed(&host, port) {
            return Err(Error::Denied(format!(
                "{host}:{port} is not allowed for skill `{}`: a host must be listed in the skill's \
                 skill.toml ([capabilities] http_hosts) and granted in config.yaml \
                 (skills.grants.{}.http_hosts)",
                self.caps.skill, self.caps.skill
            )));
        }
        let timeout = self.request_timeout(request.timeout_ms).ok_or(Error::Timeout)?;
        let method = reqwest::Method::from_bytes(request.method.as_bytes())
            .map_err(|_| Error::Other(format!("invalid method `{}`", request.method)))?;
        let mut builder = super::super::capabilities::http_client().request(method, url).timeout(timeout);
        for (name, value) in request.headers {
            builder = builder.header(name, value);
        }
        if let Some(body) = request.body {
            builder = builder.body(body);
        }
        let started = Instant::now();
        let response = builder.send().await.map_err(convert)?;
        let status = response.status().as_u16();
        let headers = response
            .headers()
            .iter()
            .map(|(k, v)| (k.to_string(), String::from_utf8_lossy(v.as_bytes()).into_owned()))
            .collect();
        let remaining = timeout.saturating_sub(started.elapsed());
        let body = tokio::time::timeout(remaining, read_body(response)).await.map_err(|_| Error::Timeout)??;
        Ok(Response { status, headers, body })
    }
}

impl HostState {
    /// The guest's timeout, never past the call's own deadline; `None` if that has passed.
    fn request_timeout(&self, asked_ms: Option<u32>) -> Option<Duration> {
        let remaining = Some(self.deadline.remaining()).filter(|d| !d.is_zero())?;
        let asked = asked_ms.map(|ms| Duration::from_millis(ms.into())).unwrap_or(remaining);
        Some(asked.min(remaining)).filter(|d| !d.is_zero())
    }
}

async fn read_body(response: reqwest::Response) -> Result<Vec<u8>, Error> {
    if response.content_length().is_some_and(|n| n as usize > MAX_BODY_BYTES) {
        return Err(Error::TooLarge);
    }
    let mut body = Vec::new();
    let mut stream = response.bytes_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(convert)?;
        if body.len() + chunk.len() > MAX_BODY_BYTES {
            let buffered = body.capacity();
            drop(body);
            if buffered as u64 >= crate::sandbox::component::RELEASE_AFTER_BYTES {
                crate::sandbox::release_freed_memory();
            }
            return Err(Error::TooLarge);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

fn convert(e: reqwest::Error) -> Error {
    if e.is_timeout() {
        Error::Timeout
    } else if e.is_connect() {
        Error::Connection(format!("{:#}", anyhow::Error::new(e)))
    } else if e.is_builder() {
        Error::Other(format!("invalid request: {e}"))
    } else {
        Error::Connection(format!("{:#}", anyhow::Error::new(e)))
    }
}
