//! Nested turns, through the real binary and the scripted LLM: a `delegate_to_agent` record
//! hands a task to another agent of `skillhost run` (its prompt and tools, its gated call put
//! to the outer run's person over the approval-v1 stream, a delegation back refused as a
//! loop), and a `sub_agent` SKILL.md skill answers a task with its body as its only system
//! prompt and only its own tools.

mod support;

use serde_json::{Value, json};
use skillhost_tests::api_client::{Sse, kinds};
use skillhost_tests::llm_server::{Answer, LlmServer};
use skillhost_tests::{Workspace, guests};
use std::time::Duration;
use support::{llm, llm_config, skillhost};

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Agents `a` (delegates to anyone) and `b` (a gated `shout` function, and a way back to `a`).
fn agents_config(llm: &str, a: u16, b: u16) -> String {
    format!(
        "skills:\n  paths: []\n  builtins: []\nstate:\n  filesystem: {{path: state}}\n\
         llm:\n  provider: anthropic\n  model: test-model\n  max_tokens: 500\n  anthropic: {{api_key: test, base_url: '{llm}'}}\n\
         agents:\n\
         \x20 a:\n    system_prompt: You are AGENT-A.\n    adapter: {{type: api}}\n    ui: {{port: {a}, auth_token: tok-a}}\n\
         \x20   skills:\n      builtins: []\n      declared:\n\
         \x20       - {{name: ask, skill_type: builtin, config_json: {{function_name: delegate_to_agent}}}}\n\
         \x20 b:\n    system_prompt: You are AGENT-B.\n    adapter: {{type: api}}\n    ui: {{port: {b}, auth_token: tok-b}}\n\
         \x20   skills:\n      builtins: []\n      declared:\n\
         \x20       - {{name: shout, skill_type: function, human: approve, config_json: {{language: python, code: \"def run(args):\\n    return args['text'].upper()\\n\"}}}}\n\
         \x20       - {{name: back, skill_type: builtin, config_json: {{function_name: delegate_to_agent, to_agent_id: a}}}}\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_delegates_to_another_and_its_approvals_reach_the_outer_person() {
    let replies = vec![
        // a: hand the task to b.
        Answer::default()
            .call("d1", "declared__ask", json!({"to_agent_slug": "b", "task": "Shout hello.", "context": "Be loud."}))
            .into(),
        // b (nested): a gated call, then a delegation back to a, then its answer.
        Answer::default().call("s1", "declared__shout", json!({"text": "hello"})).into(),
        Answer::default().call("b1", "declared__back", json!({"task": "help me"})).into(),
        Answer::text(&["B says HELLO."]).into(),
        // a: a delegation to nobody, then the answer.
        Answer::default().call("d2", "declared__ask", json!({"to_agent_slug": "zed", "task": "x"})).into(),
        Answer::text(&["A heard: B says HELLO."]).into(),
    ];
    let llm = LlmServer::start(replies).await;
    let ws = Workspace::new();
    let (a, b) = (free_port(), free_port());
    std::fs::write(ws.path().join("config.yaml"), agents_config(&llm.url(), a, b)).unwrap();
    let mut run = support::run::Running::start(ws.path(), &[], &[]);
    run.wait_for_log(&format!(":{b} (agent `b`)")).await;
    run.wait_for_log(&format!(":{a} (agent `a`)")).await;

    let client = reqwest::Client::builder().timeout(Duration::from_secs(60)).build().unwrap();
    let response = client
        .post(format!("http://127.0.0.1:{a}/api/trigger?wait=1&stream=approval-v1"))
        .bearer_auth("tok-a")
        .json(&json!({"message": "get b to shout", "channel_id": "ops"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "{}", run.stderr());
    let mut sse = Sse::new(response);
    let events = sse.until("approval_requested").await;
    let asked = &events.last().unwrap().data;
    assert_eq!(asked["tool_name"], json!("declared__shout"), "b's gated call asks a's person: {asked}");
    let id = asked["approval_id"].as_str().unwrap();
    let decided = client
        .post(format!("http://127.0.0.1:{a}/api/approvals/{id}/decision"))
        .bearer_auth("tok-a")
        .json(&json!({"approved": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(decided.status(), 200);
    let rest = sse.rest().await;
    let completed = rest.iter().find(|e| e.kind == "run_completed").unwrap_or_else(|| panic!("{rest:#?}"));
    assert_eq!(completed.data["text"], json!("A heard: B says HELLO."), "{completed:?}");
    let seen = kinds(&rest);
    assert!(seen.contains(&"approval_resolved") && seen.contains(&"tool_completed"), "{seen:?}");
    let text: String = events
        .iter()
        .chain(&rest)
        .filter(|e| e.kind == "assistant_text")
        .map(|e| e.data["text"].as_str().unwrap())
        .collect();
    assert_eq!(text, "A heard: B says HELLO.", "the nested turn's text is not streamed as a's answer");

    let bodies: Vec<Value> = llm.requests().into_iter().map(|r| r.body).collect();
    assert_eq!(bodies.len(), 6, "{bodies:#?}");
    let system = |n: usize| bodies[n]["system"].to_string();
    let names = |n: usize| bodies[n]["tools"].to_string();
    assert!(system(0).contains("AGENT-A") && names(0).contains("declared__ask"), "{}", bodies[0]);
    // b's turn: its own prompt and tools, the task (with its context) as the only message.
    assert!(system(1).contains("AGENT-B") && !system(1).contains("AGENT-A"), "{}", bodies[1]);
    assert!(names(1).contains("declared__shout") && !names(1).contains("declared__ask"), "{}", bodies[1]);
    let first = bodies[1]["messages"].as_array().unwrap();
    assert_eq!(first.len(), 1, "{first:?}");
    let task = first[0].to_string();
    assert!(task.contains("Shout hello.") && task.contains("Be loud.") && !task.contains("get b to shout"), "{task}");
    assert_eq!(support::tool_results(&llm, 2)[0]["content"], json!("HELLO"), "the approved call ran");
    let back = support::tool_results(&llm, 3)[0].to_string();
    assert!(back.contains("a delegation loop is refused: a -> b -> a"), "{back}");
    assert_eq!(support::tool_results(&llm, 4)[0]["content"], json!("B says HELLO."), "b's answer is the result");
    let nobody = support::tool_results(&llm, 5)[0].to_string();
    assert!(nobody.contains("no agent `zed` runs in this process") && nobody.contains("a, b"), "{nobody}");
    run.kill();
}

/// A `to_agent_id` naming no agent stops the start, naming the record.
#[test]
fn a_delegation_to_an_unknown_agent_is_a_config_error() {
    let ws = Workspace::new();
    let yaml =
        agents_config("http://127.0.0.1:9", free_port(), free_port()).replace("to_agent_id: a", "to_agent_id: nobody");
    std::fs::write(ws.path().join("config.yaml"), yaml).unwrap();
    let out = skillhost(&ws, &["run"], "");
    assert_ne!(out.code, 0);
    assert!(
        out.stderr.contains("agent `b`: skills.declared `declared__back`: config_json.to_agent_id: no agent `nobody` in `agents` (configured: a, b)"),
        "{}",
        out.stderr
    );
}

/// A workspace with the `probe` component as a SKILL.md skill (`probe__echo`) run as a
/// sub-agent, beside a prompt.md skill.
fn sub_agent_workspace(llm: &support::Llm, extra: &str) -> Workspace {
    let ws = Workspace::new();
    let probe = ws.add_skill("skills", "probe", guests::PROBE, "");
    std::fs::remove_file(probe.join("prompt.md")).unwrap();
    let md =
        "---\nname: probe\ndescription: Echoes things back, carefully.\n---\nPROBE-BODY: you echo; call probe__echo.\n";
    std::fs::write(probe.join("SKILL.md"), md).unwrap();
    std::fs::create_dir_all(ws.path().join("skills/notes")).unwrap();
    std::fs::write(ws.path().join("skills/notes/prompt.md"), "NOTES-PROMPT: always here.\n").unwrap();
    let yaml = format!(
        "bot:\n  system_prompt: OUTER-PERSONA\nskills:\n  paths: [skills]\n  builtins: []\n  loading_overrides: {{probe: sub_agent}}\n\
         state:\n  filesystem: {{path: state}}\n{}{extra}",
        llm_config(llm)
    );
    std::fs::write(ws.path().join("config.yaml"), yaml).unwrap();
    ws
}

#[test]
fn a_sub_agent_skill_answers_with_its_body_as_its_only_prompt() {
    let llm = llm(vec![
        // Outer: a call of the withheld tool, and the sub-agent's tool.
        Answer::default()
            .call("e0", "probe__echo", json!({"x": 1}))
            .call("r1", "probe__run", json!({"task": "Echo the word kiwi."}))
            .into(),
        // The sub-agent: its own tool, then its answer.
        Answer::default().call("e1", "probe__echo", json!({"word": "kiwi"})).into(),
        Answer::text(&["kiwi, echoed"]).into(),
        Answer::text(&["Done: kiwi, echoed."]).into(),
    ]);
    let ws = sub_agent_workspace(&llm, "");
    let out = skillhost(&ws, &["chat"], "echo kiwi please\n");
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("Done: kiwi, echoed."), "{}", out.stdout);
    let bodies: Vec<Value> = llm.server.requests().into_iter().map(|r| r.body).collect();
    assert_eq!(bodies.len(), 4, "{bodies:#?}");
    let tools = |n: usize| -> Vec<String> {
        bodies[n]["tools"]
            .as_array()
            .map(|t| t.iter().map(|d| d["name"].as_str().unwrap().to_owned()).collect())
            .unwrap_or_default()
    };
    // Outer: the persona and the prompt.md skill, not the body; `probe__run` instead of its tools.
    let outer = bodies[0]["system"].to_string();
    assert!(
        outer.contains("OUTER-PERSONA") && outer.contains("NOTES-PROMPT") && !outer.contains("PROBE-BODY"),
        "{outer}"
    );
    assert_eq!(tools(0), ["probe__run"], "{}", bodies[0]);
    let run = bodies[0]["tools"][0].clone();
    assert_eq!(run["description"], json!("Echoes things back, carefully."));
    // The sub-agent: exactly the body, only the skill's tools, the task as its one message.
    assert_eq!(bodies[1]["system"], json!("PROBE-BODY: you echo; call probe__echo."), "{}", bodies[1]);
    let inner = tools(1);
    assert!(!inner.is_empty() && inner.iter().all(|t| t.starts_with("probe__") && t != "probe__run"), "{inner:?}");
    assert_eq!(
        bodies[1]["messages"],
        json!([{"role": "user", "content": [{"type": "text", "text": "Echo the word kiwi."}]}])
    );
    assert!(support::tool_results(&llm.server, 2)[0]["content"].to_string().contains("kiwi"));
    // The outer turn: the withheld tool refused, the sub-agent's answer as the result.
    let results = support::tool_results(&llm.server, 3);
    assert!(results[0]["content"].to_string().contains("call `probe__run` with the task instead"), "{results:?}");
    assert_eq!(results[1]["content"], json!("kiwi, echoed"), "{results:?}");
}

#[test]
fn sub_agent_needs_a_skill_md() {
    let llm = llm(vec![]);
    let ws = sub_agent_workspace(&llm, "");
    let path = ws.path().join("config.yaml");
    let text = std::fs::read_to_string(&path).unwrap().replace("{probe: sub_agent}", "{notes: sub_agent}");
    std::fs::write(&path, text).unwrap();
    let out = skillhost(&ws, &["chat"], "hi\n");
    assert_ne!(out.code, 0);
    assert!(out.stderr.contains("skills.loading_overrides.notes: `sub_agent` needs a SKILL.md"), "{}", out.stderr);
}
