//! What the binary tests share: the `hooks_loop` workspace, processes
//! bounded in time, and the scripted LLM server.
#![allow(dead_code)] // each test binary uses its own part

pub mod api;
pub mod raw;
pub mod run;

use serde_json::Value;
use skillhost_tests::llm_server::{LlmServer, Reply};
use skillhost_tests::{Workspace, guests};
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What the panicking `resolve_human` of `hooks_loop` says (its `SECRET`).
pub const SECRET: &str = "secret-7c1e9a";

/// Longest any one process here may take: skills are compiled at start (cold cache), and a
/// loaded 2-core machine is slow, but a loop that the deadline misses runs far longer (its
/// 50 G fuel lasts 4-10 s on the machines seen here, against a 300 ms deadline) and ends in
/// `fuel_exhausted`, never `deadline`.
pub const PROCESS_LIMIT: Duration = Duration::from_secs(60);

/// Waits (bounded by [`PROCESS_LIMIT`]) until the API on `port` of 127.0.0.1 answers
/// `/readyz` with 200: listening, and every skill loaded (a server starts answering while
/// the skills missing from the compile cache compile). Plain HTTP over a socket, so that
/// tests without a runtime can use it.
pub fn wait_until_ready(port: u16) {
    let started = Instant::now();
    loop {
        let answered = std::net::TcpStream::connect(("127.0.0.1", port)).and_then(|mut stream| {
            stream.write_all(b"GET /readyz HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n")?;
            let mut head = [0u8; 12];
            stream.read_exact(&mut head)?;
            Ok(head.ends_with(b"200"))
        });
        if answered.is_ok_and(|ready| ready) {
            return;
        }
        assert!(started.elapsed() < PROCESS_LIMIT, "the API on port {port} was never ready");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The repository root.
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// The `mcp_servers` block of the Python SDK's MCP test server `ask` (stdio), as config text.
pub fn ask_server_yaml() -> String {
    let (server, pylib) = (repo().join("tests/mcp/ask_server.py"), repo().join("tests/mcp/pylib"));
    format!(
        "mcp_servers:\n  ask:\n    transport: stdio\n    command: python3\n    args: ['{}']\n    env: {{PYTHONPATH: '{}'}}\n",
        server.display(),
        pylib.display()
    )
}

/// `hooks_loop`'s own `skill.toml` (300 ms deadline, 50 G fuel).
pub fn manifest() -> String {
    std::fs::read_to_string(repo().join("tests/guests/hooks_loop/skill.toml")).unwrap()
}

/// A workspace with `hooks_loop` (and `hooks_trap`, whose every hook panics, when asked)
/// and a config ending in `extra`.
pub fn workspace(extra: &str, with_trap: bool) -> Workspace {
    let ws = Workspace::new();
    ws.add_skill("skills", "hooks_loop", guests::HOOKS_LOOP, &manifest());
    if with_trap {
        ws.add_skill("skills", "hooks_trap", guests::HOOKS_TRAP, "");
    }
    let yaml = format!("skills:\n  paths: [skills]\n  builtins: []\nstate:\n  filesystem: {{path: state}}\n{extra}");
    std::fs::write(ws.path().join("config.yaml"), yaml).unwrap();
    ws
}

/// The exit code, stdout and stderr of a finished process, how long it ran, and its peak
/// resident memory (the kernel's `ru_maxrss` of it alone, in KiB).
pub struct Finished {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
    pub peak_kib: i64,
}

/// Runs `command` with `stdin` typed in, failing the test (after killing it) if it is still
/// running after [`PROCESS_LIMIT`].
pub fn run_bounded(mut command: Command, stdin: &str) -> Finished {
    let started = Instant::now();
    #[allow(clippy::zombie_processes)] // reaped by `wait4` below
    let mut child = command
        .env_remove("RUST_LOG")
        .env_remove("ANTHROPIC_API_KEY")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    let drain = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = pipe.read_to_string(&mut text);
            text
        })
    };
    let (stdout, stderr) =
        (drain(Box::new(child.stdout.take().unwrap())), drain(Box::new(child.stderr.take().unwrap())));
    let pid = libc::pid_t::try_from(child.id()).unwrap();
    let (mut status, mut usage) = (0, unsafe { std::mem::zeroed::<libc::rusage>() });
    loop {
        // Reaped here rather than by `try_wait`: `wait4` also says what the child used.
        let reaped = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        assert!(reaped >= 0, "wait4: {}", std::io::Error::last_os_error());
        if reaped == pid {
            break;
        }
        if started.elapsed() > PROCESS_LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("still running after {PROCESS_LIMIT:?}: {}", stderr.join().unwrap());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let elapsed = started.elapsed();
    let (stdout, stderr) = (stdout.join().unwrap(), stderr.join().unwrap());
    let code = if libc::WIFEXITED(status) { libc::WEXITSTATUS(status) } else { -1 };
    Finished { code, stdout, stderr, elapsed, peak_kib: usage.ru_maxrss }
}

/// `skillhost <args>` in `ws`.
pub fn skillhost(ws: &Workspace, args: &[&str], stdin: &str) -> Finished {
    let mut command = Command::new(env!("CARGO_BIN_EXE_skillhost"));
    command.current_dir(ws.path()).args(args);
    run_bounded(command, stdin)
}

/// `skillhost chat` in `ws` with `stdin` typed in, which must succeed.
pub fn chat(ws: &Workspace, stdin: &str) -> Finished {
    let done = skillhost(ws, &["chat"], stdin);
    assert_eq!(done.code, 0, "{}{}", done.stdout, done.stderr);
    done
}

/// The system prompt of the scripted LLM's request `n`.
pub fn system(llm: &Llm, n: usize) -> String {
    llm.server.body(n)["system"].as_str().unwrap_or_default().to_owned()
}

/// The scripted LLM server, on its own runtime while the test thread waits on a process.
pub struct Llm {
    _runtime: tokio::runtime::Runtime,
    pub server: LlmServer,
}

pub fn llm(replies: Vec<Reply>) -> Llm {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let server = runtime.block_on(LlmServer::start(replies));
    Llm { _runtime: runtime, server }
}

pub fn llm_config(llm: &Llm) -> String {
    format!(
        "llm:\n  provider: anthropic\n  model: test-model\n  max_tokens: 500\n  anthropic: {{api_key: test, base_url: '{}'}}\n",
        llm.server.url()
    )
}

/// The tool results the model received in request `n`.
pub fn tool_results(llm: &LlmServer, n: usize) -> Vec<Value> {
    let body = llm.body(n);
    let last = body["messages"].as_array().unwrap().last().unwrap().clone();
    last["content"].as_array().unwrap().iter().filter(|b| b["type"] == "tool_result").cloned().collect()
}

/// The value of a scripted Slack message's button with `action` (its Block Kit `value`).
pub fn slack_button(message: &skillhost_tests::slack_server::SlackMessage, action: &str) -> Option<String> {
    let blocks = message.blocks.as_ref()?.as_array()?.clone();
    blocks
        .iter()
        .filter_map(|b| b["elements"].as_array())
        .flatten()
        .find_map(|e| (e["action_id"] == action).then(|| e["value"].as_str().unwrap_or_default().to_owned()))
}
