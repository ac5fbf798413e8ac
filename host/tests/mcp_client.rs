//! The MCP client (`mcp_servers`) as users meet it, through the `skillhost` binary, against a
//! server written with the official Python SDK (`tests/mcp/ask_server.py`): the revision and
//! capabilities offered, a server's elicitation reaching a person (the terminal under `call`,
//! `question_requested` in the API's approval-v1 stream) or declined where nobody can be asked,
//! and a server's `tools/list_changed` re-listed on the same session for the next turn.

mod support;

use serde_json::{Value, json};
use skillhost_tests::llm_server::{Answer, LlmServer};
use skillhost_tests::{Workspace, run_on_terminal};
use std::time::{Duration, Instant};
use support::api::ApiProcess;
use support::*;

/// A workspace whose config starts the `ask` server (stdio) for the top-level agent.
fn ask_workspace(extra: &str) -> Workspace {
    ask_workspace_with("", extra)
}

/// [`ask_workspace`], the server started with `more` (YAML list items after the script).
fn ask_workspace_with(more: &str, extra: &str) -> Workspace {
    let (server, pylib) = (repo().join("tests/mcp/ask_server.py"), repo().join("tests/mcp/pylib"));
    assert!(pylib.join("mcp").exists(), "install the Python SDK with `pip install --target tests/mcp/pylib mcp`");
    let ws = Workspace::new();
    let yaml = format!(
        "skills:\n  paths: [skills]\n  builtins: []\n  allowed: [ask]\nstate:\n  filesystem: {{path: state}}\n\
         mcp_servers:\n  ask:\n    transport: stdio\n    command: python3\n    args: ['{}'{more}]\n    env: {{PYTHONPATH: '{}'}}\n{extra}",
        server.display(),
        pylib.display()
    );
    std::fs::create_dir_all(ws.path().join("skills")).unwrap();
    std::fs::write(ws.path().join("config.yaml"), yaml).unwrap();
    ws
}

fn call(ws: &Workspace, tool: &str) -> Value {
    let out = skillhost(ws, &["call", tool], "");
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    serde_json::from_str(out.stdout.trim()).unwrap_or_else(|e| panic!("{e}: {}", out.stdout))
}

/// The JSON object the tool printed (pretty, so over lines): from the last line opening one.
fn printed(screen: &str) -> Value {
    let text = screen.replace('\r', "");
    let opening = |at: &usize| *at == 0 || text[..*at].ends_with('\n') || text[..*at].ends_with("> ");
    let start = text.match_indices("{\n").map(|(at, _)| at).filter(opening).last();
    let start = start.unwrap_or_else(|| panic!("nothing printed: {screen}"));
    serde_json::from_str(text[start..].trim()).unwrap_or_else(|e| panic!("{e}: {screen}"))
}

#[test]
fn without_a_terminal_the_client_offers_2025_11_25_and_no_elicitation_and_declines() {
    let ws = ask_workspace("");
    let me = call(&ws, "ask__whoami");
    assert_eq!(me, json!({"protocol_version": "2025-11-25", "client": "skillhost", "elicitation": false}));
    let asked = call(&ws, "ask__ask_name");
    assert_eq!(asked["action"], "decline", "nobody can be asked: {asked}");
}

#[test]
fn on_a_terminal_the_person_answers_the_servers_form() {
    let ws = ask_workspace("");
    let bin = env!("CARGO_BIN_EXE_skillhost");
    let (code, screen) = run_on_terminal(ws.path(), &format!("{bin} call ask__whoami"), "");
    assert_eq!(code, 0, "{screen}");
    assert_eq!(printed(&screen)["elicitation"], true, "{screen}");
    // Fields in the form's order: age (empty: its default), then name.
    let (code, screen) = run_on_terminal(ws.path(), &format!("{bin} call ask__ask_name"), "\nAda\n");
    assert_eq!(code, 0, "{screen}");
    assert!(screen.contains("MCP server `ask` asks: Who is there?"), "{screen}");
    assert_eq!(printed(&screen), json!({"action": "accept", "content": {"age": 30, "name": "Ada"}}));
}

fn llm_yaml(llm: &LlmServer) -> String {
    format!(
        "adapter:\n  type: api\nllm:\n  provider: anthropic\n  model: test-model\n  max_tokens: 500\n  anthropic: {{api_key: test, base_url: '{}'}}\n",
        llm.url()
    )
}

fn offered(llm: &LlmServer, n: usize) -> Vec<String> {
    let tools = llm.body(n)["tools"].as_array().cloned().unwrap_or_default();
    tools.iter().map(|t| t["name"].as_str().unwrap_or_default().to_owned()).collect()
}

/// Runs turns on channel `c` (each answered "Again.") until the model is offered `tool`;
/// fails after 10 s.
async fn next_turns_offer(api: &ApiProcess, llm: &LlmServer, tool: &str) {
    let started = Instant::now();
    loop {
        let _ = api.stream("again", "c").await.until("run_completed").await;
        let n = llm.requests().len() - 1;
        if offered(llm, n).contains(&tool.to_owned()) {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "never re-listed: {:?}\n{}",
            offered(llm, n),
            api.stderr()
        );
        llm.push(Answer::text(&["Again."]));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_the_api_the_form_is_asked_in_the_stream_and_a_changed_list_is_offered_next_turn() {
    let replies = vec![
        Answer::default().call("a", "ask__ask_name", json!({})).into(),
        Answer::default().call("g", "ask__grow", json!({})).into(),
        Answer::text(&["Done."]).into(),
        Answer::text(&["Again."]).into(),
    ];
    let llm = LlmServer::start(replies).await;
    let ws = ask_workspace(&llm_yaml(&llm));
    let api = ApiProcess::start(&ws).await;

    let mut stream = api.stream("who?", "c").await;
    for answer in ["-", "Ada"] {
        let asked = stream.until("question_requested").await.pop().unwrap();
        assert!(asked.data["prompt"].as_str().unwrap().contains("Who is there?"), "{asked:?}");
        api.answer(asked.data["question_id"].as_str().unwrap(), answer).await;
    }
    let done = stream.until("run_completed").await;
    assert_eq!(done.last().unwrap().data["text"], "Done.");
    let result = tool_results(&llm, 1)[0]["content"].as_str().unwrap().to_owned();
    assert_eq!(
        serde_json::from_str::<Value>(&result).unwrap(),
        json!({"action": "accept", "content": {"age": 30, "name": "Ada"}})
    );
    assert!(!offered(&llm, 0).contains(&"ask__grown".to_owned()));

    // The server said its list changed: the next turn offers the new tool, same session.
    next_turns_offer(&api, &llm, "ask__grown").await;
    assert!(!api.stderr().contains("MCP server stopped"), "no reconnect: {}", api.stderr());
}

/// A server process on a free loopback port, killed when dropped.
struct Served {
    child: std::process::Child,
    port: u16,
}

impl Served {
    /// `tests/mcp/<script> streamable-http PORT <more>` with the Python SDK, once it listens.
    fn python(script: &str, more: &[&str]) -> Served {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let child = std::process::Command::new("python3")
            .arg(repo().join("tests/mcp").join(script))
            .args(["streamable-http", &port.to_string()])
            .args(more)
            .env("PYTHONPATH", repo().join("tests/mcp/pylib"))
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let started = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(started.elapsed() < Duration::from_secs(30), "{script} never listened on {port}");
            std::thread::sleep(Duration::from_millis(50));
        }
        Served { child, port }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The user message of the LLM request `n` (which run it belongs to).
fn asked_in(llm: &LlmServer, n: usize) -> String {
    llm.body(n)["messages"][0]["content"][0]["text"].as_str().unwrap_or_default().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_runs_at_once_each_answer_their_own_calls_form() {
    // Over streamable HTTP the server's elicitation arrives on its call's response stream:
    // it must reach that run's person, not the newest call's. Run A's server waits before
    // asking, so run B's call is in flight (and newest) when A's form arrives.
    let served = Served::python("ask_server.py", &[]);
    let replies = vec![
        Answer::default().call("a", "ask__ask_name", json!({"wait": 1.5})).into(),
        Answer::default().call("b", "ask__ask_name", json!({})).into(),
        Answer::text(&["Done."]).into(),
        Answer::text(&["Done."]).into(),
    ];
    let llm = LlmServer::start(replies).await;
    let ws = Workspace::new();
    let yaml = format!(
        "skills:\n  paths: [skills]\n  builtins: []\n  allowed: [ask]\nstate:\n  filesystem: {{path: state}}\n\
         mcp_servers:\n  ask:\n    transport: streamablehttp\n    url: http://127.0.0.1:{}/mcp\n{}",
        served.port,
        llm_yaml(&llm)
    );
    std::fs::create_dir_all(ws.path().join("skills")).unwrap();
    std::fs::write(ws.path().join("config.yaml"), yaml).unwrap();
    let api = ApiProcess::start(&ws).await;

    let mut a = api.stream("run A", "a").await;
    let _ = a.until("tool_started").await;
    let mut b = api.stream("run B", "b").await;
    let limit = Duration::from_secs(20);
    async fn asked(stream: &mut skillhost_tests::api_client::Sse, limit: Duration, who: &str) -> String {
        let asked = tokio::time::timeout(limit, stream.until("question_requested"))
            .await
            .unwrap_or_else(|_| panic!("{who}'s run was never asked"))
            .pop()
            .unwrap();
        assert!(asked.data["prompt"].as_str().unwrap().contains("Who is there?"), "{asked:?}");
        asked.data["question_id"].as_str().unwrap().to_owned()
    }
    // B's form is asked first and left open, so B's call is in flight when A's form arrives.
    let b_first = asked(&mut b, limit, "B").await;
    let a_first = asked(&mut a, limit, "A").await;
    api.answer(&a_first, "-").await;
    api.answer(&asked(&mut a, limit, "A").await, "Ada").await;
    api.answer(&b_first, "-").await;
    api.answer(&asked(&mut b, limit, "B").await, "Bea").await;
    for stream in [&mut a, &mut b] {
        let done = tokio::time::timeout(limit, stream.until("run_completed")).await.expect("run completed");
        assert_eq!(done.last().unwrap().data["text"], "Done.");
    }
    // Each run's tool result holds its own person's answer.
    let mut names = Vec::new();
    for n in 2..4 {
        let result: Value = serde_json::from_str(tool_results(&llm, n)[0]["content"].as_str().unwrap()).unwrap();
        names.push((asked_in(&llm, n), result["content"]["name"].as_str().unwrap_or_default().to_owned()));
    }
    names.sort();
    assert_eq!(names, vec![("run A".to_owned(), "Ada".to_owned()), ("run B".to_owned(), "Bea".to_owned())]);
}

/// What `oauth_server.py` recorded: grant counts and every token it issued.
fn grants(stats: &std::path::Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(stats).unwrap()).unwrap()
}

/// `skillhost call <tool>` with every log on (`RUST_LOG=trace`), acting as the person when it
/// asks for authorization: the URL it shows is opened (the server grants it at once and
/// redirects to skillhost's loopback port). Returns the exit code, stdout and stderr.
async fn call_authorizing(ws: &Workspace, tool: &str) -> (i32, String, String) {
    use tokio::io::{AsyncBufReadExt, AsyncReadExt};
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_skillhost"))
        .args(["call", tool])
        .current_dir(ws.path())
        .env("RUST_LOG", "trace")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let out = tokio::spawn(async move {
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text).await;
        text
    });
    let mut lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let err = tokio::spawn(async move {
        let (mut text, mut opening) = (String::new(), false);
        while let Ok(Some(line)) = lines.next_line().await {
            if opening && line.trim().starts_with("http") {
                // The person's browser: follows the authorization server's redirect home.
                let page = reqwest::get(line.trim()).await.unwrap();
                assert_eq!(page.status(), 200, "{line}");
            }
            opening = line.contains("Open this URL in a browser");
            text.push_str(&line);
            text.push('\n');
        }
        text
    });
    let status = tokio::time::timeout(PROCESS_LIMIT, child.wait()).await.expect("skillhost call finished").unwrap();
    (status.code().unwrap_or(-1), out.await.unwrap(), err.await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oauth_tokens_are_kept_reused_after_a_restart_refreshed_and_never_logged() {
    let ws = Workspace::new();
    let stats = ws.path().join("grants.json");
    let served = Served::python("oauth_server.py", &[stats.to_str().unwrap()]);
    let port = served.port;
    let yaml = format!(
        "skills:\n  paths: [skills]\n  builtins: []\n  allowed: [secure]\nstate:\n  filesystem: {{path: state}}\n\
         mcp_servers:\n  secure:\n    transport: streamablehttp\n    url: http://127.0.0.1:{port}/mcp\n    auth: {{}}\n"
    );
    std::fs::create_dir_all(ws.path().join("skills")).unwrap();
    std::fs::write(ws.path().join("config.yaml"), yaml).unwrap();
    let mut logs = String::new();
    let mut call = async |tool: &str| {
        let (code, stdout, stderr) = call_authorizing(&ws, tool).await;
        assert_eq!(code, 0, "{stdout}\n{stderr}");
        logs += &stdout;
        logs += &stderr;
        (stdout, stderr)
    };

    // First run: the person authorizes once (dynamic registration, PKCE, code exchange).
    let (out, err) = call("secure__hello").await;
    assert!(out.contains("hello"), "{out}");
    assert!(err.contains("needs authorization"), "{err}");
    let first = grants(&stats);
    assert_eq!((first["registrations"].as_u64(), first["authorizations"].as_u64()), (Some(1), Some(1)), "{first}");

    // A new process reuses the stored tokens: nobody is asked, nothing is granted again.
    let (out, err) = call("secure__hello").await;
    assert!(out.contains("hello") && !err.contains("needs authorization"), "{out}\n{err}");
    assert_eq!(grants(&stats)["tokens"], first["tokens"], "no new tokens: {}", grants(&stats));

    // The server ends the access token early: the refused token is refreshed, nobody asked.
    let _ = call("secure__expire").await;
    let (out, err) = call("secure__hello").await;
    assert!(out.contains("hello") && !err.contains("needs authorization"), "{out}\n{err}");
    let refreshed = grants(&stats);
    assert_eq!(refreshed["authorizations"].as_u64(), Some(1), "{refreshed}");
    let refreshes = refreshed["refreshes"].as_u64().unwrap();
    assert!(refreshes >= 1, "{refreshed}");

    // A refreshed token lives six seconds, and is refreshed when half of it is gone: the next
    // run, four seconds on, refreshes it before using it.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let (out, err) = call("secure__hello").await;
    assert!(out.contains("hello") && !err.contains("needs authorization"), "{out}\n{err}");
    let last = grants(&stats);
    assert_eq!(last["authorizations"].as_u64(), Some(1), "{last}");
    assert!(last["refreshes"].as_u64().unwrap() > refreshes, "refreshed before use: {last}");

    // The tokens are kept in the state store, and no token ever reached a log or the screen.
    let newest = last["tokens"].as_array().unwrap().last().unwrap().as_str().unwrap().to_owned();
    let state = skillhost::store::StateStore::new(ws.path().join("state"));
    let key = format!("secure http://127.0.0.1:{port}/mcp");
    let stored = state.get(skillhost::mcp::oauth::NAMESPACE, &key).await.unwrap().expect("tokens stored");
    assert!(stored.contains(&newest), "the newest refresh token is stored: {stored}");
    assert!(logs.contains("MCP server authorized") && logs.contains("TRACE"), "logs were on: {logs}");
    for token in last["tokens"].as_array().unwrap() {
        assert!(!logs.contains(token.as_str().unwrap()), "a token reached the logs: {token}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2026_07_28_server_s_changed_list_is_heard_on_a_listen_stream() {
    // The server refuses `initialize`: the session is opened with `server/discover`, where
    // change notifications come only on a `subscriptions/listen` stream the client opens.
    let replies = vec![
        Answer::default().call("w", "ask__whoami", json!({})).into(),
        Answer::default().call("g", "ask__grow", json!({})).into(),
        Answer::text(&["Grown."]).into(),
        Answer::text(&["Again."]).into(),
    ];
    let llm = LlmServer::start(replies).await;
    let ws = ask_workspace_with(", '--modern'", &llm_yaml(&llm));
    let api = ApiProcess::start(&ws).await;
    let _ = api.stream("grow", "c").await.until("run_completed").await;
    let me: Value = serde_json::from_str(tool_results(&llm, 1)[0]["content"].as_str().unwrap()).unwrap();
    assert_eq!(me["protocol_version"], "2026-07-28", "{me}");
    assert!(!offered(&llm, 0).contains(&"ask__grown".to_owned()));

    next_turns_offer(&api, &llm, "ask__grown").await;
    assert!(!api.stderr().contains("MCP server stopped"), "no reconnect: {}", api.stderr());
}

/// `ask_workspace`, its server entry told which lifecycle to open with (`protocol`), the server
/// refusing `initialize` when `modern`.
fn ask_workspace_speaking(protocol: &str, modern: bool) -> Workspace {
    let ws = ask_workspace_with(if modern { ", '--modern'" } else { "" }, "");
    let config = ws.path().join("config.yaml");
    let yaml = std::fs::read_to_string(&config).unwrap();
    let yaml = yaml.replace("    env: {PYTHONPATH", &format!("    protocol: '{protocol}'\n    env: {{PYTHONPATH"));
    std::fs::write(config, yaml).unwrap();
    ws
}

#[test]
fn protocol_chooses_the_lifecycle_and_never_falls_back() {
    // The server would take the handshake: `2026-07-28` discovers all the same.
    let me = call(&ask_workspace_speaking("2026-07-28", false), "ask__whoami");
    assert_eq!(me["protocol_version"], "2026-07-28", "{me}");
    assert_eq!(call(&ask_workspace_speaking("auto", false), "ask__whoami")["protocol_version"], "2025-11-25");
    // A server refusing the handshake is not discovered behind the operator's back.
    let ws = ask_workspace_speaking("2025-11-25", true);
    let out = skillhost(&ws, &["call", "ask__whoami"], "");
    assert_ne!(out.code, 0, "{}", out.stdout);
    assert!(out.stderr.contains("ask"), "the server is named: {}", out.stderr);
    // Anything else is a config error naming the value and the ones there are.
    let ws = ask_workspace_speaking("2027-01-01", false);
    let out = skillhost(&ws, &["call", "ask__whoami"], "");
    assert_ne!(out.code, 0);
    assert!(out.stderr.contains("`2027-01-01`") && out.stderr.contains("`2026-07-28`"), "{}", out.stderr);
}
