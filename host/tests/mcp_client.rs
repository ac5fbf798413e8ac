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
    let (server, pylib) = (repo().join("tests/mcp/ask_server.py"), repo().join("tests/mcp/pylib"));
    assert!(pylib.join("mcp").exists(), "install the Python SDK with `pip install --target tests/mcp/pylib mcp`");
    let ws = Workspace::new();
    let yaml = format!(
        "skills:\n  paths: [skills]\n  builtins: []\n  allowed: [ask]\nstate:\n  filesystem: {{path: state}}\n\
         mcp_servers:\n  ask:\n    transport: stdio\n    command: python3\n    args: ['{}']\n    env: {{PYTHONPATH: '{}'}}\n{extra}",
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
    let started = Instant::now();
    loop {
        let _ = api.stream("again", "c").await.until("run_completed").await;
        let n = llm.requests().len() - 1;
        if offered(&llm, n).contains(&"ask__grown".to_owned()) {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(10), "never re-listed: {:?}", offered(&llm, n));
        llm.push(Answer::text(&["Again."]));
    }
    assert!(!api.stderr().contains("MCP server stopped"), "no reconnect: {}", api.stderr());
}
