//! `skillhost chat` as a process, against the scripted LLM server (Anthropic format) over real
//! HTTP: streamed text, history across messages, tool calls and their outcome, approvals typed
//! on a pseudo-terminal, EOF, and configuration errors.

mod support;

use serde_json::json;
use skillhost_tests::llm_server::{Answer, LlmServer, Reply};
use skillhost_tests::{Workspace, guests};
use std::io::Write;
use std::process::{Command, Stdio};

/// The server runs on its own runtime: the test thread blocks on the child process meanwhile.
struct Server {
    _runtime: tokio::runtime::Runtime,
    llm: LlmServer,
}

fn server(replies: Vec<Reply>) -> Server {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let llm = runtime.block_on(LlmServer::start(replies));
    Server { _runtime: runtime, llm }
}

/// A workspace with the `probe` guest as a skill (not a `VERIFY` one, so no fact-check
/// request follows its calls) and a config pointing at `server` (`extra` is appended).
fn workspace(server: &Server, extra: &str) -> Workspace {
    let ws = Workspace::new();
    ws.add_skill("skills", "probe", guests::PROBE, "");
    let yaml = format!(
        "skills:\n  paths: [skills]\nstate:\n  filesystem: {{path: state}}\nlearning:\n  memory:\n    filesystem: {{path: memory}}\n\
         llm:\n  provider: anthropic\n  model: test-model\n  max_tokens: 500\n  anthropic: {{api_key: test, base_url: '{}'}}\n{extra}",
        server.llm.url()
    );
    std::fs::write(ws.path().join("config.yaml"), yaml).unwrap();
    ws
}

/// Runs `skillhost <args>` with `stdin` piped in.
fn chat(ws: &Workspace, args: &[&str], stdin: &str) -> (i32, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_skillhost"))
        .current_dir(ws.path())
        .args(args)
        .env_remove("RUST_LOG")
        .env_remove("ANTHROPIC_API_KEY")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

/// Runs `skillhost chat` on a pseudo-terminal (util-linux `script`), typing `typed`; returns
/// the exit code and everything the terminal showed.
fn chat_on_terminal(ws: &Workspace, typed: &str) -> (i32, String) {
    let command = format!("{} chat", env!("CARGO_BIN_EXE_skillhost"));
    skillhost_tests::run_on_terminal(ws.path(), &command, typed)
}

/// The texts of the user messages of request `n`.
fn user_texts(server: &Server, n: usize) -> Vec<String> {
    let body = server.llm.body(n);
    let messages = body["messages"].as_array().unwrap().iter().filter(|m| m["role"] == "user");
    let text = |m: &serde_json::Value| match &m["content"] {
        serde_json::Value::String(s) => s.clone(),
        blocks => blocks.as_array().unwrap().iter().filter_map(|b| b["text"].as_str()).collect(),
    };
    messages.map(text).collect()
}

#[test]
fn two_messages_stream_and_carry_history() {
    let server = server(vec![Answer::text(&["Hel", "lo ", "there."]).into(), Answer::text(&["Second."]).into()]);
    let ws = workspace(&server, "");
    let (code, stdout, stderr) = chat(&ws, &["chat"], "/usage\nhi\n\nagain\n/usage\n");
    assert_eq!(code, 0, "EOF ends the session cleanly: {stdout}{stderr}");
    // The scripted server reports 25 input and 42 output tokens per request.
    let usage = "last answer: 25 input + 42 output tokens; this session (2 answers): 50 input + 84 output tokens";
    assert_eq!(
        stdout,
        format!("no answer yet in this session: 0 tokens\nHello there.\nSecond.\n{usage}\n"),
        "{stderr}"
    );
    assert_eq!(server.llm.requests().len(), 2, "the empty line and /usage are not sent");
    assert_eq!(user_texts(&server, 1), ["hi", "again"], "the first exchange is sent again");
    let assistant = &server.llm.body(1)["messages"][1];
    assert_eq!(assistant["role"], "assistant");
    assert!(assistant.to_string().contains("Hello there."), "{assistant}");
}

#[test]
fn tool_calls_are_shown_with_their_outcome() {
    let first =
        Answer::text(&["Checking."]).call("t1", "probe__echo", json!({"x": 1})).call("t2", "probe__nope", json!({}));
    let server = server(vec![first.into(), Answer::text(&["Done."]).into()]);
    let ws = workspace(&server, "");
    let (code, stdout, stderr) = chat(&ws, &["chat"], "check\n/exit\nnever sent\n");
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert_eq!(stdout, "Checking.\nDone.\n");
    assert!(stderr.contains(r#"→ probe__echo {"x":1}"#), "{stderr}");
    assert!(stderr.contains("✓ probe__echo"), "{stderr}");
    assert_eq!(server.llm.requests().len(), 2, "/exit ends the session");
    let results = server.llm.body(1)["messages"][2]["content"].clone();
    assert_eq!(results[0]["tool_use_id"], "t1");
    assert_eq!(results[1]["is_error"], true, "the unknown tool is an error result: {results}");
}

#[test]
fn approvals_are_asked_on_the_terminal() {
    let approve = |id: &str| Answer::default().call(id, "probe__echo", json!({"n": 1}));
    let replies = vec![
        approve("a1").into(),
        Answer::text(&["Ran it."]).into(),
        approve("a2").into(),
        Answer::text(&["Did not."]).into(),
    ];
    let server = server(replies);
    let ws = workspace(&server, "human:\n  overrides: {probe__echo: approve}\n");
    let (code, out) = chat_on_terminal(&ws, "first\ny\nsecond\nn\n");
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("Approve probe__echo {\"n\":1}? [y/N]"), "{out}");
    assert!(out.contains("✓ probe__echo") && out.contains("Ran it."), "{out}");
    assert!(out.contains("✗ probe__echo: denied") && out.contains("Did not."), "{out}");
    let result = |n: usize| server.llm.body(n)["messages"].as_array().unwrap().last().unwrap()["content"][0].clone();
    assert_eq!(result(1)["is_error"], false, "{}", result(1));
    assert_eq!(result(3)["is_error"], true, "{}", result(3));
    assert!(result(3)["content"].as_str().unwrap().contains("denied"), "{}", result(3));
}

#[test]
fn confirm_needs_the_challenge() {
    let confirm = |id: &str| Answer::default().call(id, "probe__echo", json!({}));
    let replies =
        vec![confirm("c1").into(), Answer::text(&["Ok."]).into(), confirm("c2").into(), Answer::text(&["No."]).into()];
    let server = server(replies);
    let ws = workspace(&server, "human:\n  overrides: {probe__echo: confirm}\n");
    let (code, out) = chat_on_terminal(&ws, "one\nCONFIRM\ntwo\ny\n");
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("Type CONFIRM to run probe__echo:"), "{out}");
    let result = |n: usize| server.llm.body(n)["messages"].as_array().unwrap().last().unwrap()["content"][0].clone();
    assert_eq!(result(1)["is_error"], false, "{}", result(1));
    assert_eq!(result(3)["is_error"], true, "y is not the challenge: {}", result(3));
}

#[test]
fn configuration_errors_are_clear() {
    let server = server(vec![]);
    let ws = workspace(&server, "");
    std::fs::write(ws.path().join("nokey.yaml"), "llm:\n  provider: anthropic\n").unwrap();
    let (code, _, stderr) = chat(&ws, &["--config", "nokey.yaml", "chat"], "");
    assert_eq!(code, 2);
    assert!(stderr.contains("api_key") && stderr.contains("ANTHROPIC_API_KEY"), "{stderr}");
    std::fs::write(ws.path().join("local.yaml"), "llm:\n  provider: openai_compatible\n").unwrap();
    let (code, _, stderr) = chat(&ws, &["--config", "local.yaml", "chat"], "");
    assert_eq!(code, 2);
    assert!(stderr.contains("base_url"), "{stderr}");

    let (code, _, stderr) = chat(&ws, &["chat", "--agent", "ops"], "");
    assert_eq!(code, 2);
    assert!(stderr.contains("no agents configured"), "{stderr}");
    // The api adapter builds the engine (so checks the provider) before it listens.
    let (code, _, stderr) = chat(&ws, &["--config", "nokey.yaml", "run", "--adapter", "api"], "");
    assert_eq!(code, 2);
    assert!(stderr.contains("api_key"), "{stderr}");
}

#[test]
fn run_adapter_api_serves_http() {
    let server = server(vec![Answer::text(&["Served."]).into()]);
    let ws = workspace(&server, "adapter:\n  type: api\n");
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_skillhost"))
        .current_dir(ws.path())
        .args(["run"])
        .env("SKILLHOST_UI_PORT", port.to_string())
        .env("SKILLHOST_UI_TOKEN", "secret")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let body = runtime.block_on(async {
        let client = reqwest::Client::new();
        let base = format!("http://127.0.0.1:{port}");
        let ready = tokio::task::spawn_blocking(move || support::wait_until_ready(port));
        ready.await.unwrap();
        let unauthorized =
            client.post(format!("{base}/api/trigger")).json(&json!({"message": "hi"})).send().await.unwrap();
        assert_eq!(unauthorized.status(), 401);
        let response = client
            .post(format!("{base}/api/trigger?wait=true"))
            .bearer_auth("secret")
            .json(&json!({"message": "hi", "channel_id": "hook"}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        let body = response.json::<serde_json::Value>().await.unwrap();
        // The skills as an MCP server at /mcp, behind the same token.
        let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "0"}}});
        let mcp = |token: Option<&str>| {
            let request = client
                .post(format!("{base}/mcp"))
                .header("accept", "application/json, text/event-stream")
                .json(&initialize);
            match token {
                Some(t) => request.bearer_auth(t),
                None => request,
            }
        };
        assert_eq!(mcp(None).send().await.unwrap().status(), 401);
        let served = mcp(Some("secret")).send().await.unwrap();
        assert_eq!(served.status(), 200);
        let text = served.text().await.unwrap();
        assert!(text.contains("serverInfo") && text.contains("\"tools\""), "{text}");
        body
    });
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!((body["text"].clone(), body["channel_id"].clone()), (json!("Served."), json!("hook")));
    assert_eq!(body["coverage"]["status"], "not_applicable");
}

/// Starts `skillhost run --adapter api` with `env` set (and every UI variable otherwise unset);
/// returns the child once `/healthz` answers on `port`, or `None` if it never does.
fn spawn_api(ws: &Workspace, port: u16, env: &[(&str, String)]) -> Option<std::process::Child> {
    let mut command = Command::new(env!("CARGO_BIN_EXE_skillhost"));
    command.current_dir(ws.path()).args(["run", "--adapter", "api"]).env_remove("RUST_LOG");
    for name in ["SKILLHOST_UI_PORT", "SKILLHOST_UI_TOKEN", "MITHAI_UI_PORT", "MITHAI_UI_TOKEN"] {
        command.env_remove(name);
    }
    command.envs(env.iter().cloned()).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
    let mut child = command.spawn().unwrap();
    for _ in 0..200 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Some(child);
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

/// The status of `GET /api/approvals/none` with `token` (401 when the token is wrong, 410 when
/// it is right: there is no such approval).
fn approval_status(port: u16, token: &str) -> u16 {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let url = format!("http://127.0.0.1:{port}/api/approvals/none");
        reqwest::Client::new().get(url).bearer_auth(token).send().await.unwrap().status().as_u16()
    })
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

#[test]
fn spec_ui_variables_are_accepted_and_ours_win() {
    let server = server(vec![]);
    let ws = workspace(&server, "adapter:\n  type: api\n");
    let port = free_port();
    let spec_only = [("MITHAI_UI_PORT", port.to_string()), ("MITHAI_UI_TOKEN", "spec".to_string())];
    let mut child = spawn_api(&ws, port, &spec_only).expect("listens on MITHAI_UI_PORT");
    let (right, wrong) = (approval_status(port, "spec"), approval_status(port, "other"));
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!((right, wrong), (410, 401), "MITHAI_UI_TOKEN is the token");

    let (ours, theirs) = (free_port(), free_port());
    let both = [
        ("SKILLHOST_UI_PORT", ours.to_string()),
        ("MITHAI_UI_PORT", theirs.to_string()),
        ("SKILLHOST_UI_TOKEN", "ours".to_string()),
        ("MITHAI_UI_TOKEN", "theirs".to_string()),
    ];
    let mut child = spawn_api(&ws, ours, &both).expect("listens on SKILLHOST_UI_PORT");
    let statuses = (approval_status(ours, "ours"), approval_status(ours, "theirs"));
    let theirs_open = std::net::TcpStream::connect(("127.0.0.1", theirs)).is_ok();
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(statuses, (410, 401), "SKILLHOST_UI_TOKEN wins over MITHAI_UI_TOKEN");
    assert!(!theirs_open, "nothing listens on MITHAI_UI_PORT when SKILLHOST_UI_PORT is set");
}

#[test]
fn ui_port_from_a_variable_in_a_flow_mapping() {
    let server = server(vec![]);
    let ws = workspace(&server, "adapter:\n  type: api\nui: {port: ${API_PORT}, auth_token: \"${API_TOKEN}\"}\n");
    let port = free_port();
    let env = [("API_PORT", port.to_string()), ("API_TOKEN", "12345".to_string())];
    let mut child = spawn_api(&ws, port, &env).expect("listens on the port from API_PORT");
    let statuses = (approval_status(port, "12345"), approval_status(port, "other"));
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(statuses, (410, 401), "the quoted token stays the text 12345");
}

#[test]
fn agents_bring_their_prompt_and_skills() {
    let server = server(vec![Answer::text(&["Hi."]).into(), Answer::text(&["Hi."]).into()]);
    let agents = "agents:\n  ops:\n    system_prompt: You are ops.\n    skills: {allowed: [memory]}\n  dev:\n    system_prompt: You are dev.\n    skills: {allowed: [probe]}\n";
    let ws = workspace(&server, agents);
    let (code, _, stderr) = chat(&ws, &["chat", "--agent", "qa"], "");
    assert_eq!(code, 2);
    assert!(stderr.contains("dev, ops"), "names the known agents: {stderr}");
    let (code, _, stderr) = chat(&ws, &["run", "--adapter", "cli", "--agent", "ops"], "hello\n");
    assert_eq!(code, 0, "{stderr}");
    let body = server.llm.body(0);
    assert!(body["system"].to_string().contains("You are ops."), "{body}");
    assert!(!body.to_string().contains("probe__"), "probe is not allowed for ops: {body}");
    let (code, _, stderr) = chat(&ws, &["chat", "--agent", "dev"], "hello\n");
    assert_eq!(code, 0, "{stderr}");
    assert!(server.llm.body(1).to_string().contains("probe__echo"));
}

/// `skillhost chat` on a pseudo-terminal driven step by step: type, then wait for output.
struct Session {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    output: std::sync::Arc<std::sync::Mutex<String>>,
}

impl Session {
    fn start(ws: &Workspace) -> Self {
        let command = format!("{} chat", env!("CARGO_BIN_EXE_skillhost"));
        let mut child = skillhost_tests::spawn_on_terminal(ws.path(), &command);
        let (stdin, mut stdout) = (child.stdin.take().unwrap(), child.stdout.take().unwrap());
        let output = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let sink = output.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n @ 1..) = std::io::Read::read(&mut stdout, &mut buf) {
                sink.lock().unwrap().push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        Session { child, stdin, output }
    }

    fn type_text(&mut self, text: &str) {
        self.stdin.write_all(text.as_bytes()).unwrap();
        self.stdin.flush().unwrap();
    }

    /// Waits until `needle` has appeared `count` times on the terminal.
    fn wait_for(&self, needle: &str, count: usize) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while self.output.lock().unwrap().matches(needle).count() < count {
            assert!(std::time::Instant::now() < deadline, "no {needle:?} in: {}", self.output.lock().unwrap());
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

#[test]
fn ctrl_c_cancels_the_turn_then_ends_the_session() {
    let gated = Answer::text(&["Let me look."]).call("g1", "probe__echo", json!({}));
    let server = server(vec![gated.into(), Answer::text(&["After."]).into()]);
    let ws = workspace(&server, "human:\n  overrides: {probe__echo: approve}\n");
    let mut session = Session::start(&ws);
    session.wait_for("> ", 1);
    session.type_text("first\n");
    session.wait_for("[y/N]", 1);
    session.type_text("\x03"); // the terminal turns it into SIGINT
    session.wait_for("(cancelled)", 1);
    session.wait_for("> ", 2);
    session.type_text("second\n");
    session.wait_for("After.", 1);
    session.wait_for("> ", 3);
    // A Ctrl-C in the instant between the turn's end and the next prompt's wait is dropped
    // (never kills the session); give the prompt a moment to start watching.
    std::thread::sleep(std::time::Duration::from_millis(300));
    session.type_text("\x03");
    let status = session.child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{}", session.output.lock().unwrap());
    assert_eq!(user_texts(&server, 1), ["second"], "the cancelled turn left no history");
}
