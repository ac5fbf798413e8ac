//! A client for the HTTP API adapter: the server started in-process on 127.0.0.1:0, bearer
//! requests, and a small SSE reader for the approval-v1 stream.

use serde_json::Value;
use skillhost::adapters::api::{self, Api, ApiConfig};
use skillhost::engine::Engine;
use std::sync::Arc;

/// The token the test servers require.
pub const TOKEN: &str = "test-token";

/// Settings for a test server: token [`TOKEN`], adapter `api`, 64 KiB bodies.
pub fn config() -> ApiConfig {
    ApiConfig {
        auth_token: Some(TOKEN.into()),
        tokens: Vec::new(),
        allowed: skillhost::adapters::auth::Allowed::of(&Default::default()),
        adapter_is_api: true,
        heartbeat: api::DEFAULT_HEARTBEAT,
        body_limit: 64 * 1024,
        name: "skillhost".into(),
        metrics_public: false,
    }
}

/// A running API server.
pub struct ApiServer {
    /// `http://127.0.0.1:<port>`.
    pub base: String,
    /// The server's state (its interactions, for assertions).
    pub api: Arc<Api>,
    /// The client.
    pub client: reqwest::Client,
}

impl ApiServer {
    /// Starts `engine` behind the API with `config`.
    pub async fn start(engine: Engine, config: ApiConfig) -> Self {
        Self::serve(Api::new(Arc::new(engine), config)).await
    }

    /// Starts `engine` behind the API with `config`, its turns run on `turns`.
    pub async fn start_with_turns(engine: Engine, config: ApiConfig, turns: tokio::runtime::Handle) -> Self {
        Self::serve(Api::with_turns(Arc::new(engine), config, turns)).await
    }

    async fn serve(api: Arc<Api>) -> Self {
        let addr = api::spawn(api.clone(), "127.0.0.1:0".parse().unwrap()).await.expect("bind");
        ApiServer { base: format!("http://{addr}"), api, client: reqwest::Client::new() }
    }

    /// A POST to `path` with the bearer token.
    pub fn post(&self, path: &str) -> reqwest::RequestBuilder {
        self.client.post(format!("{}{path}", self.base)).bearer_auth(TOKEN)
    }

    /// A GET of `path` with the bearer token.
    pub fn get(&self, path: &str) -> reqwest::RequestBuilder {
        self.client.get(format!("{}{path}", self.base)).bearer_auth(TOKEN)
    }

    /// Opens an approval-v1 stream for `body`.
    pub async fn stream(&self, body: Value) -> Sse {
        let response = self.post("/api/trigger?wait=1&stream=approval-v1").json(&body).send().await.expect("trigger");
        assert_eq!(response.status(), 200, "approval-v1 trigger");
        Sse::new(response)
    }

    /// Sends `request` and returns its status and JSON body (`Null` if not JSON).
    pub async fn call(request: reqwest::RequestBuilder) -> (u16, Value) {
        let response = request.send().await.expect("request");
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    /// Decides approval `id`.
    pub async fn decide(&self, id: &str, body: Value) -> (u16, Value) {
        Self::call(self.post(&format!("/api/approvals/{id}/decision")).json(&body)).await
    }
}

/// One SSE event.
#[derive(Debug, Clone)]
pub struct Event {
    /// The `event:` line.
    pub kind: String,
    /// The `data:` JSON.
    pub data: Value,
}

/// Reads SSE events off a response.
pub struct Sse {
    /// The response being read (its headers stay readable).
    pub response: reqwest::Response,
    buf: Vec<u8>,
}

impl Sse {
    /// A reader over `response`.
    pub fn new(response: reqwest::Response) -> Self {
        Sse { response, buf: Vec::new() }
    }

    /// The next event; `None` at the end of the stream.
    pub async fn next(&mut self) -> Option<Event> {
        loop {
            if let Some(end) = self.buf.windows(2).position(|w| w == b"\n\n") {
                let frame: Vec<u8> = self.buf.drain(..end + 2).collect();
                return Some(parse(&String::from_utf8_lossy(&frame)));
            }
            match self.response.chunk().await {
                Ok(Some(chunk)) => self.buf.extend_from_slice(&chunk),
                _ => return None,
            }
        }
    }

    /// Every event up to and including the first of `kind`; panics if the stream ends first.
    pub async fn until(&mut self, kind: &str) -> Vec<Event> {
        let mut events = Vec::new();
        while let Some(event) = self.next().await {
            let found = event.kind == kind;
            events.push(event);
            if found {
                return events;
            }
        }
        panic!("the stream ended before `{kind}`: {events:#?}");
    }

    /// Every event to the end of the stream.
    pub async fn rest(&mut self) -> Vec<Event> {
        let mut events = Vec::new();
        while let Some(event) = self.next().await {
            events.push(event);
        }
        events
    }
}

fn parse(frame: &str) -> Event {
    let (mut kind, mut data) = (String::new(), String::new());
    for line in frame.lines() {
        if let Some(k) = line.strip_prefix("event: ") {
            kind = k.to_owned();
        } else if let Some(d) = line.strip_prefix("data: ") {
            data.push_str(d);
        }
    }
    let data = serde_json::from_str(&data).unwrap_or_else(|e| panic!("event data is not JSON ({e}): {frame}"));
    Event { kind, data }
}

/// The kinds of `events`, heartbeats left out.
pub fn kinds(events: &[Event]) -> Vec<&str> {
    events.iter().map(|e| e.kind.as_str()).filter(|k| *k != "heartbeat").collect()
}
