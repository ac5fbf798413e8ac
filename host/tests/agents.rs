//! Several agents served by one `skillhost run`, as a process: each on its own API port with
//! its own prompt, skills, model, memory root and histories, against the scripted LLM server
//! (Anthropic format) over real HTTP.

mod support;

use serde_json::{Value, json};
use skillhost_tests::llm_server::{Answer, LlmServer};
use skillhost_tests::{Workspace, guests};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A port free right now on 127.0.0.1.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn config(llm: &str, ops_port: u16, triage_port: u16) -> String {
    format!(
        "skills:\n  paths: [skills]\n  builtins: []\nstate:\n  filesystem: {{path: state}}\n\
         learning:\n  memory:\n    filesystem: {{path: memory}}\n\
         llm:\n  provider: anthropic\n  model: top-model\n  max_tokens: 500\n  anthropic: {{api_key: test, base_url: '{llm}'}}\n\
         agents:\n\
         \x20 ops:\n    name: Ops Agent\n    system_prompt: You are OPS.\n    skills: {{allowed: [probe]}}\n\
         \x20   adapter: {{type: api}}\n    ui: {{port: {ops_port}, auth_token: tok-ops}}\n    memory: {{path: memory/ops}}\n\
         \x20   llm: {{model: ops-model}}\n\
         \x20 triage:\n    name: Triage Agent\n    system_prompt: You are TRIAGE.\n    skills: {{allowed: [hooks_all]}}\n\
         \x20   adapter: {{type: api}}\n    ui: {{port: {triage_port}, auth_token: tok-triage}}\n    memory: {{path: memory/triage}}\n"
    )
}

/// `skillhost run` in `ws`, once both agents listen.
fn run(ws: &Workspace) -> Child {
    let mut child = Command::new(env!("CARGO_BIN_EXE_skillhost"))
        .current_dir(ws.path())
        .arg("run")
        .env_remove("RUST_LOG")
        .env_remove("SKILLHOST_UI_PORT")
        .env_remove("SKILLHOST_UI_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut listening = 0;
    let mut seen = String::new();
    while listening < 2 {
        let mut line = String::new();
        if stderr.read_line(&mut line).unwrap() == 0 {
            panic!("skillhost run ended before listening: {seen}");
        }
        listening += usize::from(line.contains("listening on"));
        seen.push_str(&line);
    }
    // Each agent's API answers once listening; its skills are loaded once `/readyz` says so.
    for line in seen.lines().filter(|l| l.contains("listening on")) {
        let address = line.split("listening on http://").nth(1).unwrap().split(' ').next().unwrap();
        support::wait_until_ready(address.rsplit(':').next().unwrap().parse().unwrap());
    }
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    child
}

async fn trigger(port: u16, token: &str, message: &str) -> (reqwest::header::HeaderMap, Value) {
    let response = reqwest::Client::new()
        .post(format!("http://127.0.0.1:{port}/api/trigger?wait=true"))
        .bearer_auth(token)
        .json(&json!({"message": message, "channel_id": "shared-channel"}))
        .timeout(Duration::from_secs(60))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let headers = response.headers().clone();
    (headers, response.json().await.unwrap())
}

fn tool_names(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .map(|t| t.iter().map(|t| t["name"].as_str().unwrap().to_owned()).collect())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_process_serves_every_agent_with_its_own_parts() {
    let replies = vec![
        Answer::text(&["ops one"]).into(),
        Answer::text(&["triage one"]).into(),
        Answer::text(&["ops two"]).into(),
    ];
    let llm = LlmServer::start(replies).await;
    let ws = Workspace::new();
    ws.add_skill("skills", "probe", guests::PROBE, "");
    ws.add_skill("skills", "hooks_all", guests::HOOKS_ALL, "");
    for (agent, memory) in [("ops", "ops remembers the runbook"), ("triage", "triage remembers the pager")] {
        std::fs::create_dir_all(ws.path().join("memory").join(agent)).unwrap();
        std::fs::write(ws.path().join("memory").join(agent).join("MEMORY.md"), memory).unwrap();
    }
    let (ops, triage) = (free_port(), free_port());
    std::fs::write(ws.path().join("config.yaml"), config(&llm.url(), ops, triage)).unwrap();
    let mut child = run(&ws);

    let (headers, first) = trigger(ops, "tok-ops", "hello ops").await;
    assert_eq!(first["text"], "ops one", "{first}");
    assert_eq!(headers["x-skillhost-agent"], "Ops Agent", "the agent's name is on its answers");
    let (headers, second) = trigger(triage, "tok-triage", "hello triage").await;
    assert_eq!(second["text"], "triage one", "{second}");
    assert_eq!(headers["x-skillhost-agent"], "Triage Agent");
    let wrong = reqwest::Client::new()
        .post(format!("http://127.0.0.1:{triage}/api/trigger?wait=true"))
        .bearer_auth("tok-ops")
        .json(&json!({"message": "x"}))
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401, "each agent has its own token");
    trigger(ops, "tok-ops", "ops again").await;

    let bodies: Vec<Value> = llm.requests().into_iter().map(|r| r.body).collect();
    assert_eq!(bodies.len(), 3, "{bodies:?}");
    let (ops1, triage1, ops2) = (&bodies[0], &bodies[1], &bodies[2]);
    // A model-only `llm` override keeps the top-level provider and its key (the requests
    // reach the same Anthropic-format server); an agent without one uses the top-level model.
    assert_eq!((ops1["model"].as_str(), triage1["model"].as_str()), (Some("ops-model"), Some("top-model")));
    let system = |b: &Value| b["system"].to_string();
    assert!(system(ops1).contains("You are OPS.") && system(ops1).contains("ops remembers the runbook"), "{ops1}");
    assert!(!system(ops1).contains("TRIAGE") && !system(ops1).contains("pager"), "{ops1}");
    assert!(system(triage1).contains("You are TRIAGE.") && system(triage1).contains("triage remembers the pager"));
    assert!(tool_names(ops1).iter().all(|t| t.starts_with("probe__")) && !tool_names(ops1).is_empty(), "{ops1}");
    assert!(tool_names(triage1).iter().all(|t| t.starts_with("hooks_all__")) && !tool_names(triage1).is_empty());
    // Same channel id, separate histories: the second ops turn sees its own first exchange
    // and nothing of triage's.
    let history = ops2["messages"].to_string();
    assert!(history.contains("hello ops") && history.contains("ops one"), "{history}");
    assert!(!history.contains("triage"), "{history}");
    assert!(!triage1["messages"].to_string().contains("ops"), "{triage1}");

    // One agent's token reloads that agent and says nothing of the other's skills.
    let reloaded = reqwest::Client::new()
        .post(format!("http://127.0.0.1:{ops}/api/skills/reload"))
        .bearer_auth("tok-ops")
        .send()
        .await
        .unwrap();
    assert_eq!(reloaded.status(), 200);
    let reloaded: Value = reloaded.json().await.unwrap();
    assert_eq!(reloaded["skills"].as_array().map(Vec::len), Some(1), "{reloaded}");
    assert_eq!(reloaded["skills"][0]["agent"], "ops", "{reloaded}");
    assert!(!reloaded.to_string().contains("hooks_all"), "nothing of triage's: {reloaded}");

    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn two_agents_on_one_port_are_refused_before_anything_listens() {
    let ws = Workspace::new();
    let config = "llm:\n  provider: anthropic\n  anthropic: {api_key: test}\nskills:\n  builtins: []\n\
                  agents:\n  a:\n    adapter: {type: api}\n  b:\n    adapter: {type: api}\n";
    std::fs::write(ws.path().join("config.yaml"), config).unwrap();
    let stderr = run_refused(&ws);
    assert!(stderr.contains("both serve the API on port") && stderr.contains("ui.port"), "{stderr}");
}

/// `skillhost run` in `ws`, which must stop at start with exit code 2; its stderr.
fn run_refused(ws: &Workspace) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_skillhost"))
        .current_dir(ws.path())
        .arg("run")
        .env_remove("SKILLHOST_UI_PORT")
        .env_remove("SKILLHOST_UI_TOKEN")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    stderr
}

#[test]
fn an_adapter_that_cannot_start_stops_the_run_before_any_serves() {
    // Agent `b`'s port is taken: every adapter is made before any serves, and the error names
    // the agent and the address.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let (a_port, b_port) = (free_port(), taken.local_addr().unwrap().port());
    let ws = Workspace::new();
    let config = format!(
        "llm:\n  provider: anthropic\n  anthropic: {{api_key: test}}\nskills:\n  builtins: []\n\
         agents:\n  a:\n    adapter: {{type: api}}\n    ui: {{port: {a_port}}}\n  b:\n    adapter: {{type: api}}\n    ui: {{port: {b_port}}}\n"
    );
    std::fs::write(ws.path().join("config.yaml"), config).unwrap();
    let stderr = run_refused(&ws);
    assert!(stderr.contains(&format!("cannot listen on 127.0.0.1:{b_port} (agent `b`)")), "{stderr}");
    drop(taken);
}
