//! The sandbox's deadline under `skillhost run --adapter api`, as a process: a triggered
//! run's looping tool ends at its deadline, `/healthz` answers while two loop, and looping
//! hooks fall back (`tool-target`, `tool-result-empty`, `observe-mcp-result`) or fail closed
//! (`resolve-human`, `before-mcp-call`) without hanging the run. The MCP cases use the npm
//! `server-everything`, owned by `hooks_loop`.

mod support;

use serde_json::{Value, json};
use skillhost_tests::api_client::Sse;
use skillhost_tests::llm_server::{Answer, LlmServer, Reply};
use std::collections::HashMap;
use std::time::{Duration, Instant};
use support::api::ApiProcess;
use support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_triggered_run_gets_the_looping_tools_deadline_error() {
    let spin = Answer::default().call("s1", "hooks_loop__spin", json!({}));
    let llm = LlmServer::start(vec![spin.into(), Answer::text(&["Done."]).into()]).await;
    let ws = workspace(&llm_yaml(&llm, ""), false);
    let api = ApiProcess::start(&ws).await;
    let response = api.trigger("wait=true", "spin", "a").send().await.unwrap();
    assert_eq!(response.status(), 200, "{}", api.stderr());
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["text"], "Done.", "{body}");
    let result = &tool_results(&llm, 1)[0];
    let content: Value = serde_json::from_str(result["content"].as_str().unwrap()).unwrap();
    assert_eq!((result["is_error"].clone(), content["kind"].clone()), (json!(true), json!("deadline")), "{content}");
    assert!(api.healthz().await < Duration::from_secs(2), "the server still answers");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthz_answers_at_once_with_two_looping_calls_in_flight() {
    // Every conversation: first call `spin`, then answer once its result is in (noting the
    // kind of failure the model was told).
    let kinds = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let told = kinds.clone();
    let llm = LlmServer::responding(Box::new(move |body: &Value| {
        let last = body["messages"].as_array().unwrap().last().unwrap();
        let results = last["content"].as_array().into_iter().flatten().filter(|b| b["type"] == "tool_result");
        let answered = results.map(|r| told.lock().unwrap().push(kind(r["content"].as_str().unwrap()))).count() > 0;
        let answer = if answered {
            Answer::text(&["Done."])
        } else {
            Answer::default().call("s", "hooks_loop__spin", json!({}))
        };
        Reply::from(answer)
    }))
    .await;
    // Fuel for far longer than the deadline, whatever the machine's speed: only the deadline
    // may end the loops (50 G, `hooks_loop`'s own, ran out in 3.86 s on a fast machine).
    let sandbox = "sandbox:\n  maximums: {fuel: 1000000000000000}\n";
    let ws = workspace(&llm_yaml(&llm, &format!("adapter:\n  type: api\n{sandbox}")), false);
    // Four seconds of looping: long enough to ask /healthz while both loops surely run.
    let manifest = manifest()
        .replace("timeout_ms = 300", "timeout_ms = 4_000")
        .replace("fuel = 50_000_000_000", "fuel = 1_000_000_000_000_000");
    assert!(manifest.contains("4_000") && manifest.contains("1_000_000_000_000_000"), "{manifest}");
    std::fs::write(ws.path().join("skills/hooks_loop/skill.toml"), manifest).unwrap();
    let api = ApiProcess::start(&ws).await;
    let (mut a, mut b) = (api.stream("spin", "a").await, api.stream("spin", "b").await);
    a.until("tool_started").await;
    b.until("tool_started").await;
    // Read both streams to their end meanwhile, noting when each loop's end arrives.
    let finish = |mut stream: Sse| {
        tokio::spawn(async move {
            let events = stream.until("tool_completed").await;
            let ended = Instant::now();
            (ended, events.last().unwrap().data.clone(), stream.rest().await)
        })
    };
    let (a, b) = (finish(a), finish(b));
    let took = api.healthz().await;
    let answered = Instant::now();
    assert!(took < Duration::from_secs(2), "/healthz took {took:?} beside two looping guests");
    for run in [a, b] {
        let (ended, completed, rest) = run.await.unwrap();
        // A loop that never yields also holds back its own events until it ends: then both
        // arrive at once, before /healthz could answer.
        let later = ended.saturating_duration_since(answered);
        assert!(later > Duration::from_secs(1), "a loop ended {later:?} after /healthz answered: not in flight");
        // The reported duration starts before the deadline does (the tool's execution, then
        // the sandbox's call): a call the deadline ended reports at least the deadline.
        let ran = completed["duration"].as_f64().unwrap();
        assert!(ran >= 4.0, "ran {ran} s, but the 4 s deadline ended it");
        let done = rest.iter().find(|e| e.kind == "run_completed").expect("run_completed");
        assert_eq!(done.data["text"], "Done.");
    }
    assert_eq!(*kinds.lock().unwrap(), ["deadline", "deadline"], "the deadline ended both loops, not their fuel");
}

/// The `llm` (scripted server) and `mcp_servers` (server-everything over stdio) sections.
fn llm_yaml(llm: &LlmServer, extra: &str) -> String {
    format!(
        "llm:\n  provider: anthropic\n  model: test-model\n  max_tokens: 500\n  anthropic: {{api_key: test, base_url: '{}'}}\n{extra}",
        llm.url()
    )
}

fn everything_yaml() -> String {
    let index = repo().join("tests/mcp/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    assert!(
        index.exists(),
        "install the MCP test servers with `npm ci --prefix tests/mcp` (as .ci/run does): {} is missing",
        index.display()
    );
    format!(
        "adapter:\n  type: api\nmcp_servers:\n  everything:\n    transport: stdio\n    command: node\n    args: ['{}', stdio]\n",
        index.display()
    )
}

/// A call's result the model read in request `n`, by call id: (content, is_error).
fn results_by_id(llm: &LlmServer, n: usize) -> HashMap<String, (String, bool)> {
    let pairs = tool_results(llm, n).into_iter().map(|r| {
        let id = r["tool_use_id"].as_str().unwrap().to_owned();
        (id, (r["content"].as_str().unwrap().to_owned(), r["is_error"] == true))
    });
    pairs.collect()
}

fn kind(content: &str) -> String {
    serde_json::from_str::<Value>(content)
        .map(|v| v["kind"].as_str().unwrap_or_default().to_owned())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn looping_hooks_fall_back_or_fail_closed_and_the_run_completes() {
    let looping = |hook: &str| json!({"loop_in": hook});
    let echo_of = |hook: &str| json!({"message": format!("{{\"loop_in\":\"{hook}\"}}")});
    let round = Answer::default()
        .call("w0", "hooks_loop__work", json!({}))
        .call("w1", "hooks_loop__work", looping("tool_target"))
        .call("w2", "hooks_loop__work", looping("tool_result_empty"))
        .call("m0", "everything__echo", json!({"message": "plain"}))
        .call("m1", "everything__echo", json!({"message": "m", "loop_in": "before_mcp_call"}))
        .call("m2", "everything__echo", echo_of("observe_mcp_result"))
        .call("m3", "everything__echo", echo_of("tool_result_empty"))
        .call("m4", "everything__echo", json!({"message": "t", "loop_in": "tool_target"}));
    let gated = Answer::default()
        .call("r0", "hooks_loop__work", looping("resolve_human"))
        .call("r1", "everything__echo", json!({"message": "r", "loop_in": "resolve_human"}))
        .call("r2", "hooks_loop__work", json!({}));
    let replies = vec![round.into(), Answer::text(&["Done."]).into(), gated.into(), Answer::text(&["Gated."]).into()];
    let llm = LlmServer::start(replies).await;
    let ws = workspace(&llm_yaml(&llm, &everything_yaml()), false);
    let api = ApiProcess::start(&ws).await;

    let events = api.stream("go", "hooks").await.rest().await;
    let offered = llm.body(0)["tools"].to_string();
    assert!(offered.contains("\"everything__echo\""), "server-everything is not offered: {}", api.stderr());
    let by_id = |kind: &str| -> HashMap<String, Value> {
        let matching = events.iter().filter(|e| e.kind == kind);
        matching.map(|e| (e.data["tool_call_id"].as_str().unwrap().to_owned(), e.data.clone())).collect()
    };
    let (started, completed) = (by_id("tool_started"), by_id("tool_completed"));
    let done = events.iter().find(|e| e.kind == "run_completed").unwrap_or_else(|| panic!("{events:#?}"));
    assert_eq!(done.data["text"], "Done.");
    // tool-target: the hook's answer, or no target when it loops.
    let target = |id: &str| started[id].get("target").cloned();
    assert_eq!([target("w0"), target("m0")], [Some(json!("steady")), Some(json!("steady"))]);
    assert_eq!([target("w1"), target("m4")], [None, None], "{started:?}");
    // tool-result-empty: the hook's `true`, or generic emptiness (false) when it loops.
    let empty = |id: &str| completed[id]["is_empty"].clone();
    assert_eq!(
        [empty("w0"), empty("m0"), empty("w2"), empty("m3")],
        [json!(true), json!(true), json!(false), json!(false)]
    );
    let results = results_by_id(&llm, 1);
    assert_eq!(results["m0"], ("Echo: plain\n\nobserved".to_owned(), false));
    // observe-mcp-result looping: the server's result, unchanged.
    assert_eq!(results["m2"], ("Echo: {\"loop_in\":\"observe_mcp_result\"}".to_owned(), false));
    // before-mcp-call looping: the call is refused, not sent.
    assert!(results["m1"].1 && kind(&results["m1"].0) == "mcp_preflight_denied", "{:?}", results["m1"]);
    assert!(!results["w1"].1 && !results["w2"].1 && !results["m4"].1, "{results:?}");

    // resolve-human looping: the call needs approval; a run with nobody to ask cancels it.
    let response = api.trigger("wait=true", "gated", "gated").send().await.unwrap();
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["text"], "Gated.", "{body}");
    let results = results_by_id(&llm, 3);
    assert_eq!([kind(&results["r0"].0), kind(&results["r1"].0)], ["cancelled", "cancelled"], "{results:?}");
    assert!(!results["r2"].1, "{results:?}");
}
