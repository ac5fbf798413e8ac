//! `engine.temporal_guardrails` in a turn, against the real `obs` MCP server
//! (`tests/mcp/obs_server.py`, the official Python SDK), on a fixed clock: what the person is
//! asked about, what the tool events show, what the server receives and what the model
//! reads are all the normalised arguments; unusable times are an error the model reads; the
//! policy's corrections and the prerequisite retry are normalised again.

use serde_json::{Value, json};
use skillhost::engine::*;
use skillhost::tools::temporal::{FixedClock, Guardrails, time};
use skillhost::tools::{McpTools, SkillTools, ToolSource, Tools};
use skillhost_tests::llm_server::{Answer, LlmServer};
use skillhost_tests::person::{Does, Person};
use skillhost_tests::{Workspace, guests, json as parse};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// 2026-02-09T15:00:00Z, the fixed "now".
const NOW: i64 = 1_770_649_200;

fn fixture(relative: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("mcp").join(relative);
    assert!(path.exists(), "{} is missing: install the MCP test servers as .ci/run does", path.display());
    path.display().to_string()
}

fn config(llm: &str) -> String {
    format!(
        "skills:\n  paths: [skills]\n  builtins: []\nstate:\n  filesystem: {{path: state}}\nlearning:\n  memory:\n    filesystem: {{path: memory}}\n\
         llm:\n  provider: anthropic\n  model: test-model\n  max_tokens: 500\n  anthropic: {{api_key: k, base_url: '{llm}'}}\n\
         mcp_servers:\n  obs:\n    transport: stdio\n    command: python3\n    args: ['{obs}']\n    env: {{PYTHONPATH: '{pylib}'}}\n\
         \x20   tools: [list_things, get_logs, get_log_attributes]\n\
         engine:\n  temporal_guardrails:\n    tools: [get_logs]\n    attribute_discovery_tools: [get_log_attributes]\n\
         \x20   attribute_discovery_lookback_minutes: 5\n",
        obs = fixture("obs_server.py"),
        pylib = fixture("pylib"),
    )
}

/// The app the config builds, its MCP tools rebuilt on a clock standing at [`NOW`].
async fn engine(ws: &Workspace, llm: &str) -> Engine {
    use skillhost::app::{Agents, Options};
    let options = Options { mode: skillhost::skills::LoadMode::Serve, llm: true, agents: Agents::TopLevel };
    let app = skillhost_tests::app_with(ws, &config(llm), options).await;
    let engine = app.agent().engine.clone();
    let section = &app.config.config.engine.temporal_guardrails;
    let guardrails = Guardrails::from_config(section).with_clock(Arc::new(FixedClock::at(NOW)));
    let skills = engine.skills().clone();
    let mcp = McpTools::new(app.mcp.clone(), skills.clone(), ["obs".to_owned()].into()).with_guardrails(guardrails);
    let sources: Vec<Arc<dyn ToolSource>> = vec![Arc::new(SkillTools::new(skills.clone())), Arc::new(mcp)];
    engine.reloaded(skills, Tools::new(sources))
}

/// The tool results of the second request, by call id: (content, is_error).
fn results(llm: &LlmServer) -> Vec<(String, bool)> {
    let body = llm.body(1);
    let last = body["messages"].as_array().unwrap().last().unwrap().clone();
    let blocks = last["content"].as_array().unwrap().iter().filter(|b| b["type"] == "tool_result");
    blocks.map(|b| (b["content"].as_str().unwrap().to_owned(), b["is_error"] == true)).collect()
}

/// What the server received, from a result the owner observed (`{"result": "<echo>\n\nobserved", ...}`).
fn received(result: &Value) -> Value {
    let inner = result["result"].as_str().unwrap_or_else(|| panic!("a wrapped result: {result}"));
    parse(inner.split_once("\n\nobserved").expect("observed").0)["received"].clone()
}

fn window(minutes_before_now: i64) -> Value {
    json!({"start_time_iso": time::rfc3339(NOW - minutes_before_now * 60), "end_time_iso": time::rfc3339(NOW)})
}

#[tokio::test]
async fn the_person_the_events_and_the_server_see_the_clamped_arguments() {
    let ws = Workspace::new();
    ws.add_skill("skills", "hooks_all", guests::HOOKS_ALL, "");
    let first = Answer::text(&["Reading attributes."])
        // hooks_all asks for approval when the input says `level: approve`.
        .call("day", "obs__get_log_attributes", json!({"lookback_minutes": 1440, "level": "approve"}))
        .call("bad", "obs__get_log_attributes", json!({"start_time_iso": "yesterday", "level": "approve"}))
        .call("widen", "obs__get_log_attributes", json!({"_decision": "widen", "end_time_iso": "now-1h"}));
    let llm = LlmServer::start(vec![first.into(), Answer::text(&["Done."]).into()]).await;
    let engine = engine(&ws, &llm.url()).await;
    let (counterpart, events) = (Person::new(&engine, Does::Approve), Mutex::new(Vec::new()));
    let request =
        TurnRequest { channel_id: "c".into(), user_id: None, message: "go".into(), route: Vec::new(), thread: None };
    let turn = engine.run_turn(request, &events, &counterpart).await.unwrap();

    let mut clamped = window(5);
    clamped["level"] = json!("approve");
    let asked = counterpart.shown();
    assert_eq!(asked.len(), 1, "the unusable call asks nobody");
    assert_eq!(asked[0]["tool_input"], clamped, "the person approves what will run");
    // Approved calls run in parallel: their tool events come in the order they start.
    let started: std::collections::BTreeMap<String, Value> = events
        .lock()
        .unwrap()
        .iter()
        .filter_map(|e| match e {
            EngineEvent::ToolStarted { tool_call_id, input, .. } => Some((tool_call_id.clone(), input.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(started.len(), 2, "the refused call has no tool events: {started:?}");
    assert_eq!(started["day"], clamped);
    assert_eq!(turn.tool_calls[0].input, clamped, "the record keeps the arguments that ran");

    let r = results(&llm);
    let day = parse(&r[0].0);
    assert_eq!(received(&day), window(5), "the server got the last 5 minutes, not a day");
    assert_eq!(day["_mithai_temporal"]["profile"], "attribute_discovery", "{day}");
    assert!(day["_mithai_temporal"]["changes"][0].as_str().unwrap().contains("last 5 minutes"), "{day}");

    let bad = parse(&r[1].0);
    assert!(r[1].1 && bad["kind"] == "invalid_time_arguments", "{bad}");
    assert!(bad["error"].as_str().unwrap().contains("`start_time_iso` is not a time"), "{bad}");

    // The policy replaced the prepared window (an hour ago) by a day: normalised again.
    let widened = parse(&r[2].0);
    assert_eq!(received(&widened), window(5), "{widened}");
}

#[tokio::test]
async fn the_prerequisite_retry_is_clamped_again() {
    let ws = Workspace::new();
    ws.add_skill("skills", "hooks_all", guests::HOOKS_ALL, "");
    // Within the clamp as asked; the policy's retry asks for a whole day instead.
    let (start, end) = ("2026-02-09T14:57:00Z", "2026-02-09T14:59:00Z");
    let asked = json!({"_decision": "prerequisite_widen", "start_time_iso": start, "end_time_iso": end});
    let first = Answer::text(&["Reading."]).call("pre", "obs__get_log_attributes", asked);
    let llm = LlmServer::start(vec![first.into(), Answer::text(&["Done."]).into()]).await;
    let engine = engine(&ws, &llm.url()).await;
    let request =
        TurnRequest { channel_id: "c".into(), user_id: None, message: "go".into(), route: Vec::new(), thread: None };
    let turn = engine.run_turn(request, &NoEvents, &NonInteractive).await.unwrap();
    assert!(turn.tool_calls[0].executed);
    let r = results(&llm);
    let retried = parse(&r[0].0);
    assert!(!r[0].1, "{retried}");
    assert!(retried["_mithai_prerequisite_retry"].as_str().unwrap().contains("list_things"), "{retried}");
    assert_eq!(received(&retried), window(5), "the day the retry asked for is clamped: {retried}");
    let changes = retried["_mithai_temporal"]["changes"].to_string();
    assert!(changes.contains("last 5 minutes"), "the model is told: {retried}");
}
