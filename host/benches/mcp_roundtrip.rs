//! `cargo bench -p skillhost --bench mcp_roundtrip`
//!
//! Issue 11, target 3: MCP `tools/call` over stdio through the real `skillhost mcp` binary
//! (the trivial Rust tool `probe__echo`) against the official Node `server-everything`
//! (`get-sum`, unsandboxed), both driven by the same thin raw JSON-RPC client, in alternating
//! rounds of one run:
//!
//! - sequential: one request in flight, p50 / p99 of the round trip;
//! - pipelined: [`WINDOW`] requests in flight for [`throughput_for()`], calls per second.
//!
//! The client writes requests in large writes and reads answers by line without decoding
//! more than it must, so that it takes as little of the shared cores as it can.
//!
//! Then the same over streamable HTTP: `skillhost run --adapter api` serving `/mcp` against
//! the same Node server's `streamableHttp` transport, both driven by one `reqwest` client
//! (HTTP/1.1 keep-alive; [`WINDOW`] connections when pipelined), each `tools/call` a POST
//! in the session whose answer (an SSE stream or JSON) is read whole.

mod common;

use common::{Latency, header, latency_row, sample, value_row};
use skillhost_tests::{Workspace, guests};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

const WINDOW: usize = 64;

/// Rounds, warm-up calls, timed calls, and how long each pipelined run lasts (fewer under
/// `BENCH_SMOKE`).
fn rounds() -> usize {
    common::iterations(3, 1)
}
fn warmup() -> usize {
    common::iterations(200, 20)
}
fn samples() -> usize {
    common::iterations(2_000, 100)
}
fn throughput_for() -> Duration {
    common::lasting(Duration::from_secs(3), Duration::from_millis(500))
}

/// One MCP server on the other end of a pipe.
struct Server {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    /// `"name":"...","arguments":{...}` of the call to make.
    call: String,
    next_id: u64,
    line: String,
}

impl Server {
    async fn spawn(mut command: Command, call: &str) -> Server {
        command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::null()).kill_on_drop(true);
        let mut child = command.spawn().expect("the server starts");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::with_capacity(1 << 16, child.stdout.take().unwrap());
        let mut server = Server { child, stdin, stdout, call: call.to_owned(), next_id: 0, line: String::new() };
        let init = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}"#;
        server.write(&format!("{init}\n")).await;
        server.read().await;
        server.write("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n").await;
        server.wait_for_tool().await;
        server
    }

    /// Lists the tools until the one to call is there, as a client would (a server with an
    /// empty compile cache answers before its skills are compiled, and tells its clients
    /// `notifications/tools/list_changed` when they join).
    async fn wait_for_tool(&mut self) {
        let name = self.call.split(',').next().unwrap_or_default().to_owned();
        let started = Instant::now();
        loop {
            self.next_id += 1;
            let list = format!("{{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"tools/list\"}}\n", self.next_id);
            self.write(&list).await;
            self.answer().await;
            if self.line.contains(&name) {
                return;
            }
            assert!(started.elapsed() < Duration::from_secs(600), "the tool never joined: {name}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    fn request(&mut self, into: &mut String) {
        self.next_id += 1;
        let (id, call) = (self.next_id, &self.call);
        into.push_str(&format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/call\",\"params\":{{{call}}}}}\n"
        ));
    }

    async fn write(&mut self, text: &str) {
        self.stdin.write_all(text.as_bytes()).await.expect("write to the server");
        self.stdin.flush().await.expect("flush");
    }

    /// One call's answer line; panics on an error answer (the figures would mean nothing).
    async fn read(&mut self) {
        self.answer().await;
        assert!(!self.line.contains("\"error\"") && !self.line.contains("\"isError\":true"), "{}", self.line);
    }

    /// The next answer line, in `self.line` (notifications, such as `list_changed` when
    /// skills join, are skipped).
    async fn answer(&mut self) {
        loop {
            self.line.clear();
            let n = self.stdout.read_line(&mut self.line).await.expect("read from the server");
            assert!(n > 0, "the server closed its output");
            if !self.line.contains("\"method\":\"notifications/") {
                return;
            }
        }
    }

    /// One call, waited for.
    async fn call(&mut self) {
        let mut request = String::new();
        self.request(&mut request);
        self.write(&request).await;
        self.read().await;
    }

    /// Calls per second with [`WINDOW`] requests in flight: each answer read lets the next
    /// requests go, written together.
    async fn pipelined(&mut self) -> f64 {
        let mut batch = String::new();
        for _ in 0..WINDOW {
            self.request(&mut batch);
        }
        self.write(&batch).await;
        let started = Instant::now();
        let (mut answered, mut outstanding) = (0u64, WINDOW);
        while outstanding > 0 {
            self.read().await;
            answered += 1;
            outstanding -= 1;
            // Top up once the buffered answers are read, in one write.
            if self.stdout.buffer().is_empty() && started.elapsed() < throughput_for() {
                batch.clear();
                for _ in outstanding..WINDOW {
                    self.request(&mut batch);
                }
                outstanding = WINDOW;
                self.write(&batch).await;
            }
        }
        answered as f64 / started.elapsed().as_secs_f64()
    }

    async fn stop(mut self) {
        drop(self.stdin);
        let _ = tokio::time::timeout(Duration::from_secs(5), self.child.wait()).await;
        let _ = self.child.kill().await;
    }
}

fn skillhost(ws: &Path) -> Command {
    let config = ws.join("config.yaml");
    let yaml = "skills:\n  paths: [skills]\n  builtins: []\nstate:\n  filesystem: {path: state}\n";
    std::fs::write(&config, yaml).unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_skillhost"));
    command.arg("--config").arg(&config).arg("mcp").current_dir(ws);
    command
}

fn everything() -> Option<Command> {
    let mut command = Command::new("node");
    command.arg(everything_script()?).arg("stdio");
    Some(command)
}

/// Node `server-everything`'s entry point, when it is installed.
fn everything_script() -> Option<PathBuf> {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/mcp/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    if !script.exists() {
        eprintln!(
            "{} is missing (npm install --prefix tests/mcp @modelcontextprotocol/server-everything)",
            script.display()
        );
        return None;
    }
    Some(script)
}

/// An MCP server on streamable HTTP.
struct Http {
    child: Child,
    client: reqwest::Client,
    url: String,
    session: String,
    /// `"name":"...","arguments":{...}` of the call to make.
    call: String,
    next_id: std::sync::atomic::AtomicU64,
}

const TOKEN: &str = "bench-token";

impl Http {
    /// Starts `command`, waits for it to say it listens, opens a session.
    async fn spawn(mut command: Command, port: u16, call: &str) -> Http {
        command.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped()).kill_on_drop(true);
        let mut child = command.spawn().expect("the server starts");
        let mut stderr = BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        loop {
            line.clear();
            let read = tokio::time::timeout(Duration::from_secs(60), stderr.read_line(&mut line)).await;
            assert!(matches!(read, Ok(Ok(n)) if n > 0), "the server never listened");
            if line.to_lowercase().contains("listening on") {
                break;
            }
        }
        // The rest of stderr is drained, so that the server never blocks on a full pipe.
        tokio::spawn(async move { tokio::io::copy(&mut stderr, &mut tokio::io::sink()).await });
        let client = reqwest::Client::builder().pool_max_idle_per_host(WINDOW).build().unwrap();
        wait_until_ready(&client, port).await;
        let url = format!("http://127.0.0.1:{port}/mcp");
        let init = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}"#;
        let response = Http::request(&client, &url, None).body(init).send().await.expect("initialize");
        let session = response.headers()["mcp-session-id"].to_str().unwrap().to_owned();
        response.text().await.unwrap();
        let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
        let response = Http::request(&client, &url, Some(&session)).body(initialized).send().await.unwrap();
        assert_eq!(response.status(), 202, "notifications/initialized");
        Http { child, client, url, session, call: call.to_owned(), next_id: 0.into() }
    }

    fn request(client: &reqwest::Client, url: &str, session: Option<&str>) -> reqwest::RequestBuilder {
        let request = client
            .post(url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-06-18")
            .bearer_auth(TOKEN);
        match session {
            Some(session) => request.header("mcp-session-id", session),
            None => request,
        }
    }

    /// One call, waited for; panics on an error answer.
    async fn call(&self) {
        let id = self.next_id.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        let body =
            format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/call\",\"params\":{{{}}}}}", self.call);
        let response = Http::request(&self.client, &self.url, Some(&self.session)).body(body).send().await.unwrap();
        let text = response.text().await.unwrap();
        assert!(text.contains("\"result\"") && !text.contains("\"isError\":true"), "{text}");
    }

    /// Calls per second with [`WINDOW`] callers, each calling again once answered.
    async fn pipelined(self: &std::sync::Arc<Self>) -> f64 {
        let started = Instant::now();
        let callers: Vec<_> = (0..WINDOW)
            .map(|_| {
                let http = self.clone();
                tokio::spawn(async move {
                    let mut calls = 0u64;
                    while started.elapsed() < throughput_for() {
                        http.call().await;
                        calls += 1;
                    }
                    calls
                })
            })
            .collect();
        let mut total = 0;
        for caller in callers {
            total += caller.await.unwrap();
        }
        total as f64 / started.elapsed().as_secs_f64()
    }
}

/// Waits until `/readyz` answers 200, as a load balancer would (skillhost answers 503 while
/// skills compile), or 404 (a server without the route).
async fn wait_until_ready(client: &reqwest::Client, port: u16) {
    let started = Instant::now();
    loop {
        let status = client.get(format!("http://127.0.0.1:{port}/readyz")).send().await.map(|r| r.status().as_u16());
        if matches!(status, Ok(200 | 404)) {
            return;
        }
        assert!(started.elapsed() < Duration::from_secs(600), "never ready: {status:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn skillhost_http(ws: &Path, port: u16) -> Command {
    let config = ws.join("config-http.yaml");
    let yaml = "llm:\n  provider: anthropic\n  model: bench\n  anthropic: {api_key: bench, base_url: 'http://127.0.0.1:9'}\n\
                skills:\n  paths: [skills]\n  builtins: []\nstate:\n  filesystem: {path: state}\n";
    std::fs::write(&config, yaml).unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_skillhost"));
    command
        .arg("--config")
        .arg(&config)
        .args(["run", "--adapter", "api"])
        .env("SKILLHOST_UI_PORT", port.to_string())
        .env("SKILLHOST_UI_TOKEN", TOKEN)
        .env_remove("RUST_LOG")
        .current_dir(ws);
    command
}

fn everything_http(port: u16) -> Option<Command> {
    let mut command = Command::new("node");
    command.arg(everything_script()?).arg("streamableHttp").env("PORT", port.to_string());
    Some(command)
}

async fn http_round(command: impl FnOnce(u16) -> Option<Command>, call: &str, figures: &mut Figures) {
    let port = free_port();
    let Some(command) = command(port) else { return };
    let http = std::sync::Arc::new(Http::spawn(command, port, call).await);
    figures.sequential.push(sample(warmup(), samples(), async || http.call().await).await);
    figures.pipelined.push(http.pipelined().await);
    if let Ok(mut http) = std::sync::Arc::try_unwrap(http) {
        let _ = http.child.kill().await;
    }
}

#[derive(Default)]
struct Figures {
    sequential: Vec<Latency>,
    pipelined: Vec<f64>,
}

async fn round(command: Command, call: &str, figures: &mut Figures) {
    let mut server = Server::spawn(command, call).await;
    figures.sequential.push(sample(warmup(), samples(), async || server.call().await).await);
    figures.pipelined.push(server.pipelined().await);
    server.stop().await;
}

fn median_latency(rounds: &[Latency]) -> Latency {
    let mut sorted = rounds.to_vec();
    sorted.sort_by_key(|l| l.p50);
    sorted[sorted.len() / 2]
}

fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted[sorted.len() / 2]
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let ws = Workspace::new();
    ws.add_skill("skills", "probe", guests::PROBE, "");
    let ours_call = r#""name":"probe__echo","arguments":{"a":1,"b":2}"#;
    let node_call = r#""name":"get-sum","arguments":{"a":1,"b":2}"#;
    let (mut ours, mut node) = (Figures::default(), Figures::default());
    for _ in 0..rounds() {
        round(skillhost(ws.path()), ours_call, &mut ours).await;
        if let Some(command) = everything() {
            round(command, node_call, &mut node).await;
        }
    }
    header("skillhost mcp over stdio");
    report("stdio", &ours, &node);

    let (mut ours, mut node) = (Figures::default(), Figures::default());
    for _ in 0..rounds() {
        http_round(|port| Some(skillhost_http(ws.path(), port)), ours_call, &mut ours).await;
        http_round(everything_http, node_call, &mut node).await;
    }
    header("skillhost /mcp over streamable HTTP");
    report("`/mcp`", &ours, &node);
}

/// The rows of one transport: ours against Node's, sequential and pipelined.
fn report(transport: &str, ours: &Figures, node: &Figures) {
    let rounds = |f: &Figures| f.sequential.iter().map(|l| common::human(l.p50)).collect::<Vec<_>>().join(", ");
    let ours_seq = median_latency(&ours.sequential);
    let ours_rate = median(&ours.pipelined);
    let label = format!("`skillhost` {transport}, `probe__echo` sequential (median round; rounds: {})", rounds(ours));
    if node.sequential.is_empty() {
        latency_row("3", &label, &ours_seq, None, "< Node `get-sum`");
        let label = format!("`skillhost` {transport} pipelined, {WINDOW} in flight");
        value_row("3", &label, &rate(ours_rate), None, ">= 20k/s");
        return;
    }
    let node_seq = median_latency(&node.sequential);
    let node_rate = median(&node.pipelined);
    let label_node = format!("Node `server-everything` {transport}, `get-sum` sequential (rounds: {})", rounds(node));
    latency_row("3", &label_node, &node_seq, None, "");
    latency_row("3", &label, &ours_seq, Some(ours_seq.ratio(&node_seq)), "< 1x Node");
    let all = |v: &[f64]| v.iter().map(|r| rate(*r)).collect::<Vec<_>>().join(", ");
    let label_node =
        format!("Node {transport} `get-sum` pipelined, {WINDOW} in flight (rounds: {})", all(&node.pipelined));
    value_row("3", &label_node, &rate(node_rate), None, "");
    let label = format!("`skillhost` {transport} pipelined, {WINDOW} in flight (rounds: {})", all(&ours.pipelined));
    value_row("3", &label, &rate(ours_rate), Some(ours_rate / node_rate), ">= 20k/s");
}

fn rate(per_second: f64) -> String {
    format!("{per_second:.0}/s")
}
