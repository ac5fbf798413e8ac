//! `cargo bench -p skillhost --bench mcp_roundtrip`
//!
//! Issue 11, target 3: MCP `tools/call` over stdio through the real `skillhost mcp` binary
//! (the trivial Rust tool `probe__echo`) against the official Node `server-everything`
//! (`get-sum`, unsandboxed), both driven by the same thin raw JSON-RPC client, in alternating
//! rounds of one run:
//!
//! - sequential: one request in flight, p50 / p99 of the round trip;
//! - pipelined: [`WINDOW`] requests in flight for [`THROUGHPUT_FOR`], calls per second.
//!
//! The client writes requests in large writes and reads answers by line without decoding
//! more than it must, so that it takes as little of the shared cores as it can.

mod common;

use common::{Latency, header, latency_row, value_row};
use skillhost_tests::{Workspace, guests};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

const ROUNDS: usize = 3;
const WARMUP: usize = 200;
const SAMPLES: usize = 2_000;
const WINDOW: usize = 64;
const THROUGHPUT_FOR: Duration = Duration::from_secs(3);

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
        server
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

    /// One answer line; panics on an error answer (the figures would mean nothing).
    async fn read(&mut self) {
        self.line.clear();
        let n = self.stdout.read_line(&mut self.line).await.expect("read from the server");
        assert!(n > 0, "the server closed its output");
        assert!(!self.line.contains("\"error\"") && !self.line.contains("\"isError\":true"), "{}", self.line);
    }

    /// One call, waited for.
    async fn call(&mut self) {
        let mut request = String::new();
        self.request(&mut request);
        self.write(&request).await;
        self.read().await;
    }

    async fn sequential(&mut self) -> Latency {
        for _ in 0..WARMUP {
            self.call().await;
        }
        let mut times = Vec::with_capacity(SAMPLES);
        for _ in 0..SAMPLES {
            let started = Instant::now();
            self.call().await;
            times.push(started.elapsed());
        }
        Latency::of(times)
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
            if self.stdout.buffer().is_empty() && started.elapsed() < THROUGHPUT_FOR {
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
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/mcp/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    if !script.exists() {
        eprintln!(
            "{} is missing (npm install --prefix tests/mcp @modelcontextprotocol/server-everything)",
            script.display()
        );
        return None;
    }
    let mut command = Command::new("node");
    command.arg(script).arg("stdio");
    Some(command)
}

#[derive(Default)]
struct Figures {
    sequential: Vec<Latency>,
    pipelined: Vec<f64>,
}

async fn round(command: Command, call: &str, figures: &mut Figures) {
    let mut server = Server::spawn(command, call).await;
    figures.sequential.push(server.sequential().await);
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
    for _ in 0..ROUNDS {
        round(skillhost(ws.path()), ours_call, &mut ours).await;
        if let Some(command) = everything() {
            round(command, node_call, &mut node).await;
        }
    }
    header("skillhost mcp over stdio");
    let rounds = |f: &Figures| f.sequential.iter().map(|l| common::human(l.p50)).collect::<Vec<_>>().join(", ");
    let ours_seq = median_latency(&ours.sequential);
    let ours_rate = median(&ours.pipelined);
    let label = format!("`skillhost mcp` stdio, `probe__echo` sequential (median round; rounds: {})", rounds(&ours));
    if node.sequential.is_empty() {
        latency_row("3", &label, &ours_seq, None, "< Node `get-sum`");
        value_row(
            "3",
            &format!("`skillhost mcp` stdio pipelined, {WINDOW} in flight"),
            &rate(ours_rate),
            None,
            ">= 20k/s",
        );
        return;
    }
    let node_seq = median_latency(&node.sequential);
    let node_rate = median(&node.pipelined);
    let label_node = format!("Node `server-everything` stdio, `get-sum` sequential (rounds: {})", rounds(&node));
    latency_row("3", &label_node, &node_seq, None, "");
    latency_row("3", &label, &ours_seq, Some(ours_seq.ratio(&node_seq)), "< 1x Node");
    let all = |v: &[f64]| v.iter().map(|r| rate(*r)).collect::<Vec<_>>().join(", ");
    let label_node = format!("Node `get-sum` pipelined, {WINDOW} in flight (rounds: {})", all(&node.pipelined));
    value_row("3", &label_node, &rate(node_rate), None, "");
    let label = format!("`skillhost mcp` pipelined, {WINDOW} in flight (rounds: {})", all(&ours.pipelined));
    value_row("3", &label, &rate(ours_rate), Some(ours_rate / node_rate), ">= 20k/s");
}

fn rate(per_second: f64) -> String {
    format!("{per_second:.0}/s")
}
