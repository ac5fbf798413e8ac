//! `skillhost run --adapter api` as a process the tests talk to over real HTTP.

use serde_json::json;
use skillhost_tests::api_client::Sse;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The bearer token every [`ApiProcess`] is started with.
pub const TOKEN: &str = "api-token";

/// `skillhost run --adapter api` on a free port of 127.0.0.1, killed when dropped.
pub struct ApiProcess {
    child: Child,
    base: String,
    client: reqwest::Client,
    stderr: Arc<Mutex<String>>,
}

impl ApiProcess {
    /// Starts it in `ws` and waits (bounded) until `/readyz` says every skill is loaded (the
    /// server answers before, while skills missing from the compile cache compile: tests
    /// that talk to it then use [`ApiProcess::serving`]).
    pub async fn start(ws: &skillhost_tests::Workspace) -> Self {
        Self::start_with(ws, &[]).await
    }

    /// [`ApiProcess::start`] with `env` set in the process (`RUST_LOG` among them, to read
    /// its log on [`ApiProcess::stderr`]).
    pub async fn start_with(ws: &skillhost_tests::Workspace, env: &[(&str, &str)]) -> Self {
        let api = Self::serving_with(ws, env).await;
        let started = Instant::now();
        loop {
            let ready = api.client.get(format!("{}/readyz", api.base)).send().await.map(|r| r.status().as_u16());
            if ready.is_ok_and(|s| s == 200) {
                return api;
            }
            assert!(started.elapsed() < super::PROCESS_LIMIT, "never ready: {}", api.stderr());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Starts it in `ws` and waits (bounded) until `/healthz` answers.
    pub async fn serving(ws: &skillhost_tests::Workspace) -> Self {
        Self::serving_with(ws, &[]).await
    }

    async fn serving_with(ws: &skillhost_tests::Workspace, env: &[(&str, &str)]) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let mut child = Command::new(env!("CARGO_BIN_EXE_skillhost"))
            .current_dir(ws.path())
            .args(["run", "--adapter", "api"])
            .env("SKILLHOST_UI_PORT", port.to_string())
            .env("SKILLHOST_UI_TOKEN", TOKEN)
            .env_remove("RUST_LOG")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = Arc::new(Mutex::new(String::new()));
        let (sink, mut pipe) = (stderr.clone(), child.stderr.take().unwrap());
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n @ 1..) = std::io::Read::read(&mut pipe, &mut buf) {
                sink.lock().unwrap().push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        let client = reqwest::Client::builder().timeout(Duration::from_secs(30)).build().unwrap();
        let api = ApiProcess { child, base: format!("http://127.0.0.1:{port}"), client, stderr };
        let started = Instant::now();
        while api.client.get(format!("{}/healthz", api.base)).send().await.is_err() {
            assert!(started.elapsed() < super::PROCESS_LIMIT, "never listened: {}", api.stderr());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        api
    }

    /// Sends SIGTERM, as an orchestrator stopping the replica does.
    pub fn terminate(&self) {
        let sent = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status().unwrap();
        assert!(sent.success());
    }

    /// Waits (at most `within`) for the process to end: its exit code, `None` if it runs on.
    pub async fn exited(&mut self, within: Duration) -> Option<i32> {
        let started = Instant::now();
        while started.elapsed() < within {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status.code().unwrap_or(-1));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        None
    }

    /// `http://127.0.0.1:<port>`.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    pub fn trigger(&self, query: &str, message: &str, channel: &str) -> reqwest::RequestBuilder {
        let body = json!({"message": message, "channel_id": channel});
        self.client.post(format!("{}/api/trigger?{query}", self.base)).bearer_auth(TOKEN).json(&body)
    }

    /// A decision on approval `id`, to send.
    pub fn decide(&self, id: &str, decision: &serde_json::Value) -> reqwest::RequestBuilder {
        self.client.post(format!("{}/api/approvals/{id}/decision", self.base)).bearer_auth(TOKEN).json(decision)
    }

    /// Opens an approval-v1 stream of a run on `channel`.
    pub async fn stream(&self, message: &str, channel: &str) -> Sse {
        let response = self.trigger("wait=1&stream=approval-v1", message, channel).send().await.unwrap();
        assert_eq!(response.status(), 200, "{}", self.stderr());
        Sse::new(response)
    }

    /// How long `/healthz` took to answer 200.
    pub async fn healthz(&self) -> Duration {
        let asked = Instant::now();
        let response = self.client.get(format!("{}/healthz", self.base)).send().await.unwrap();
        assert_eq!(response.status(), 200);
        asked.elapsed()
    }

    /// Waits (bounded) until `/api/mcp` says the MCP server `name` is ready.
    pub async fn mcp_ready(&self, name: &str) {
        let started = Instant::now();
        loop {
            let request = self.client.get(format!("{}/api/mcp", self.base)).bearer_auth(TOKEN);
            let listed: serde_json::Value = request.send().await.unwrap().json().await.unwrap();
            let servers = listed["servers"].as_array().cloned().unwrap_or_default();
            if servers.iter().any(|s| s["name"] == name && s["status"] == "ready") {
                return;
            }
            assert!(started.elapsed() < super::PROCESS_LIMIT, "MCP server {name} never ready: {listed}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Answers the question `id` through its route.
    pub async fn answer(&self, id: &str, answer: &str) {
        let url = format!("{}/api/questions/{id}/answer", self.base);
        let response = self.client.post(url).bearer_auth(TOKEN).json(&json!({"answer": answer})).send().await.unwrap();
        assert_eq!(response.status(), 200, "answering {id}");
    }
}

impl Drop for ApiProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A `method` request to `{base}/mcp` at 2026-07-28 with `token` (no session; the revision in
/// the header and in `_meta`) from a client declaring `capabilities`: its status and its
/// JSON-RPC answer (read from the event stream when it is one).
pub async fn mcp_rpc(
    base: &str,
    token: &str,
    (id, method): (u64, &str),
    mut params: serde_json::Value,
    capabilities: serde_json::Value,
) -> (u16, serde_json::Value) {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": capabilities
    });
    let name = params["name"].as_str().or(params["taskId"].as_str()).unwrap_or_default().to_owned();
    let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    let response = reqwest::Client::new()
        .post(format!("{base}/mcp"))
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", method)
        .header("mcp-name", name)
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    let json = text.lines().find_map(|l| l.strip_prefix("data:")).unwrap_or(&text);
    (status, serde_json::from_str(json.trim()).unwrap_or_else(|e| panic!("{e}: {text}")))
}
