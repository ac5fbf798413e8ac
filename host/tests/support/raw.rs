//! `skillhost mcp` as a child process, spoken to in raw JSON-RPC lines on its stdio: for
//! the tests that need exact messages (malformed ones, notifications in order, `_meta`).

use serde_json::{Value, json};
use skillhost_tests::Workspace;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// A running `skillhost mcp` and the lines it writes; killed when dropped.
pub struct Raw {
    child: std::process::Child,
    lines: mpsc::Receiver<String>,
    next_id: u64,
}

impl Raw {
    /// Starts `skillhost --config <ws>/config.yaml mcp` (no handshake yet).
    pub fn start(ws: &Workspace) -> Raw {
        let mut child = Command::new(env!("CARGO_BIN_EXE_skillhost"))
            .args(["--config", ws.path().join("config.yaml").to_str().unwrap(), "mcp"])
            .current_dir(ws.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || stdout.lines().map_while(Result::ok).try_for_each(|l| tx.send(l)));
        Raw { child, lines, next_id: 0 }
    }

    /// Sends one message.
    pub fn send(&mut self, message: Value) {
        self.send_line(&message.to_string());
    }

    /// Sends one raw line.
    pub fn send_line(&mut self, line: &str) {
        let stdin = self.child.stdin.as_mut().unwrap();
        writeln!(stdin, "{line}").unwrap();
    }

    /// The next message the server writes.
    pub fn next(&mut self) -> Value {
        self.next_within(Duration::from_secs(60))
    }

    /// The next message the server writes, waited for at most `within`.
    pub fn next_within(&mut self, within: Duration) -> Value {
        let line = self.lines.recv_timeout(within).unwrap_or_else(|_| panic!("no message within {within:?}"));
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"))
    }

    /// `initialize` at `revision` and `notifications/initialized`; returns the answer.
    pub fn initialize(&mut self, revision: &str) -> Value {
        let client = json!({"name": "raw", "version": "0"});
        let init =
            self.request("initialize", json!({"protocolVersion": revision, "capabilities": {}, "clientInfo": client}));
        self.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        init
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the server writes nothing but notifications for `time` (a skill joining may
    /// announce changed lists meanwhile).
    pub fn quiet_for(&self, time: Duration) -> bool {
        let until = std::time::Instant::now() + time;
        while let Some(left) = until.checked_duration_since(std::time::Instant::now()) {
            match self.lines.recv_timeout(left) {
                Ok(line) if serde_json::from_str::<Value>(&line).is_ok_and(|m| m.get("id").is_none()) => continue,
                Ok(_) => return false,
                Err(_) => return true,
            }
        }
        true
    }

    /// Whether the server is still alive: the child runs and answers a ping.
    pub fn answers_a_ping(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none() && self.request("ping", json!({}))["result"].is_object()
    }

    /// Sends a request and waits for its response (skipping notifications).
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        self.exchange(method, params).0
    }

    /// Sends a request; returns its response and the notifications sent before it.
    pub fn exchange(&mut self, method: &str, params: Value) -> (Value, Vec<Value>) {
        self.next_id += 1;
        let id = self.next_id;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let mut notes = Vec::new();
        loop {
            let message = self.next();
            if message["id"] == id {
                return (message, notes);
            }
            notes.push(message);
        }
    }

    /// `count` calls of `name` sent at once; their responses.
    pub fn calls_at_once(&mut self, count: usize, name: &str, arguments: Value) -> Vec<Value> {
        let calls: Vec<(&str, Value)> = (0..count).map(|_| (name, arguments.clone())).collect();
        self.mixed_at_once(&calls)
    }

    /// `calls` (tool name, arguments) sent at once; their responses, in the calls' order.
    pub fn mixed_at_once(&mut self, calls: &[(&str, Value)]) -> Vec<Value> {
        self.mixed_at_once_in_order(calls).0
    }

    /// [`Raw::mixed_at_once`], and the indices of the calls in the order they were answered.
    pub fn mixed_at_once_in_order(&mut self, calls: &[(&str, Value)]) -> (Vec<Value>, Vec<usize>) {
        let first = self.next_id + 1;
        for (name, arguments) in calls {
            self.next_id += 1;
            let params = json!({"name": name, "arguments": arguments});
            self.send(json!({"jsonrpc": "2.0", "id": self.next_id, "method": "tools/call", "params": params}));
        }
        let mut answers = vec![Value::Null; calls.len()];
        let mut order = Vec::new();
        while order.len() < calls.len() {
            let message = self.next();
            if let Some(id) = message["id"].as_u64().filter(|id| (first..=self.next_id).contains(id)) {
                answers[(id - first) as usize] = message;
                order.push((id - first) as usize);
            }
        }
        (answers, order)
    }

    /// `tools/call` of `name`; its response and the notifications sent before it.
    pub fn call(&mut self, name: &str, arguments: Value) -> (Value, Vec<Value>) {
        self.exchange("tools/call", json!({"name": name, "arguments": arguments}))
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
