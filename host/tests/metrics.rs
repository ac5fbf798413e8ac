//! `GET /metrics` through `skillhost run --adapter api` and the scripted LLM: the text parses
//! as Prometheus text, and the counters move as a run goes (an LLM request with its tokens,
//! a tool call, a call stopped at its deadline, an approval); the token guards it unless
//! `ui.metrics_public`; a run's token usage is in the `wait=true` answer and `run_completed`.

mod support;

use serde_json::json;
use skillhost_tests::llm_server::{Answer, LlmServer};
use skillhost_tests::{Workspace, guests};
use std::collections::BTreeMap;
use support::api::{ApiProcess, TOKEN};

/// Every sample of `/metrics`, by name and sorted labels (`name{a="1",b="2"}`).
async fn scrape(api: &ApiProcess, token: Option<&str>) -> (u16, BTreeMap<String, f64>) {
    let mut request = reqwest::Client::new().get(format!("{}/metrics", api.base()));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    if status != 200 {
        return (status, BTreeMap::new());
    }
    let kind = response.headers()["content-type"].to_str().unwrap().to_owned();
    assert!(kind.starts_with("application/openmetrics-text"), "{kind}");
    let text = response.text().await.unwrap();
    assert!(text.ends_with("# EOF\n"), "{text}");
    let lines = text.lines().map(|l| Ok(l.to_owned()));
    let scrape = prometheus_parse::Scrape::parse(lines).unwrap_or_else(|e| panic!("not Prometheus text ({e}): {text}"));
    assert!(!scrape.samples.is_empty(), "{text}");
    let mut samples = BTreeMap::new();
    for sample in scrape.samples {
        let value = match sample.value {
            prometheus_parse::Value::Counter(v)
            | prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Untyped(v) => v,
            prometheus_parse::Value::Histogram(buckets) => buckets.last().map_or(0.0, |b| b.count),
            prometheus_parse::Value::Summary(_) => continue,
        };
        let labels: BTreeMap<String, String> = sample.labels.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        let labels: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
        samples.insert(format!("{}{{{}}}", sample.metric, labels.join(",")), value);
    }
    (status, samples)
}

fn value(samples: &BTreeMap<String, f64>, key: &str) -> f64 {
    samples.get(key).copied().unwrap_or(0.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_parse_and_move_as_a_run_goes() {
    let echo = Answer::default().call("e1", "probe__echo", json!({"n": 1}));
    let spin = Answer::default().call("s1", "hostile__spin", json!({}));
    let replies = vec![echo.into(), spin.into(), Answer::text(&["Done."]).into(), Answer::text(&["Hi."]).into()];
    let llm = LlmServer::start(replies).await;
    let ws = Workspace::new();
    ws.add_skill("skills", "probe", guests::PROBE, "");
    ws.add_skill("skills", "hostile", guests::HOSTILE, "[limits]\nfuel = 50_000_000_000\ntimeout_ms = 300\n");
    let yaml = format!(
        "skills:\n  paths: [skills]\n  builtins: []\nstate:\n  filesystem: {{path: state}}\n\
         sandbox:\n  maximums: {{fuel: 50000000000}}\n\
         human:\n  overrides: {{probe__echo: approve}}\nadapter: {{type: api}}\n\
         llm:\n  provider: anthropic\n  model: test-model\n  max_tokens: 500\n  anthropic: {{api_key: test, base_url: '{}'}}\n",
        llm.url()
    );
    std::fs::write(ws.path().join("config.yaml"), yaml).unwrap();
    let api = ApiProcess::start(&ws).await;

    assert_eq!(scrape(&api, None).await.0, 401, "the token guards /metrics");
    assert_eq!(scrape(&api, Some("wrong")).await.0, 401);
    let (_, before) = scrape(&api, Some(TOKEN)).await;
    assert_eq!(value(&before, &format!("skillhost_build_info{{version=\"{}\"}}", env!("CARGO_PKG_VERSION"))), 1.0);

    let mut sse = api.stream("echo, then spin", "metrics").await;
    let asked = sse.until("approval_requested").await.last().unwrap().data.clone();
    let (_, waiting) = scrape(&api, Some(TOKEN)).await;
    assert_eq!(value(&waiting, "skillhost_approvals_pending{}"), 1.0, "{waiting:#?}");
    assert_eq!(value(&waiting, "skillhost_sse_streams_open{}"), 1.0, "{waiting:#?}");
    let id = asked["approval_id"].as_str().unwrap();
    assert_eq!(api.decide(id, &json!({"approved": true})).send().await.unwrap().status(), 200);
    let rest = sse.rest().await;
    let completed = rest.iter().find(|e| e.kind == "run_completed").unwrap_or_else(|| panic!("{rest:#?}"));
    // The scripted server reports 25 input and 42 output tokens per request (three requests).
    assert_eq!(completed.data["usage"], json!({"input_tokens": 75, "output_tokens": 126}), "{completed:?}");

    let (_, after) = scrape(&api, Some(TOKEN)).await;
    let moved = |key: &str| value(&after, key) - value(&before, key);
    assert_eq!(moved("skillhost_turns_total{agent=\"default\",outcome=\"completed\"}"), 1.0, "{after:#?}");
    assert_eq!(moved("skillhost_llm_requests_total{model=\"test-model\",outcome=\"ok\",provider=\"anthropic\"}"), 3.0);
    assert_eq!(
        moved("skillhost_llm_tokens_total{direction=\"input\",model=\"test-model\",provider=\"anthropic\"}"),
        75.0
    );
    assert_eq!(moved("skillhost_tool_calls_total{kind=\"component\",outcome=\"ok\",tool=\"probe__echo\"}"), 1.0);
    assert_eq!(moved("skillhost_tool_calls_total{kind=\"component\",outcome=\"error\",tool=\"hostile__spin\"}"), 1.0);
    assert_eq!(moved("skillhost_sandbox_failures_total{kind=\"deadline\"}"), 1.0, "{after:#?}");
    assert_eq!(moved("skillhost_approvals_total{outcome=\"approved\"}"), 1.0);
    assert_eq!(value(&after, "skillhost_approvals_pending{}"), 0.0);
    assert_eq!(value(&after, "skillhost_sse_streams_open{}"), 0.0, "the stream closed");
    assert_eq!(moved("skillhost_turn_duration_seconds_count{agent=\"default\"}"), 1.0, "{after:#?}");

    // The wait=true answer carries the run's usage too.
    let llm_again = api.trigger("wait=true", "hello", "plain").send().await.unwrap();
    let answer: serde_json::Value = llm_again.json().await.unwrap();
    assert!(answer["usage"]["input_tokens"].is_u64(), "{answer}");
}

/// `ui.metrics_public: true`: a scraper needs no token; the API still does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn public_metrics_need_no_token() {
    let ws = Workspace::new();
    let yaml = "skills:\n  paths: []\n  builtins: []\nstate:\n  filesystem: {path: state}\nui:\n  metrics_public: true\n\
         llm:\n  provider: anthropic\n  model: m\n  anthropic: {api_key: test, base_url: 'http://127.0.0.1:9'}\n";
    std::fs::write(ws.path().join("config.yaml"), yaml).unwrap();
    let api = ApiProcess::start(&ws).await;
    let (status, samples) = scrape(&api, None).await;
    assert_eq!(status, 200);
    assert!(samples.keys().any(|k| k.starts_with("skillhost_build_info")), "{samples:#?}");
    let refused = reqwest::Client::new()
        .post(format!("{}/api/trigger", api.base()))
        .json(&json!({"message": "x"}))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 401);
}

/// The tool budget's three counters (the spec's `mithai.tool_budget.*`) through the binary.
/// `get_logs` of `obs` (owned by `hooks_all`, whose policy asks for the `list_things`
/// prerequisite first) is budgeted to one call a turn: the call runs its prerequisite, and its
/// retry passes the budget again, over the cap (`blocked_calls`, and `suppressed_retries`
/// as it is a retry). The turn then answers from the evidence (`recoveries{synthesized}`),
/// or, when that wrap-up gives no text, with the fixed sentence (`recoveries{fallback}`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tool_budget_counters_move() {
    let llm = LlmServer::responding(Box::new(|body: &serde_json::Value| {
        let text = body.to_string();
        if text.contains("You are a fact checker") {
            Answer::text(&["OK"]).into()
        } else if text.contains("The tool budget for this request is spent") {
            // The wrap-up: nothing at all for the `fallback` run.
            if text.contains("fallback run") { Answer::default() } else { Answer::text(&["Partial: no logs."]) }.into()
        } else {
            Answer::default().call("g1", "obs__get_logs", json!({"_decision": "prerequisite", "service": "api"})).into()
        }
    }))
    .await;
    let ws = Workspace::new();
    ws.add_skill("skills", "hooks_all", guests::HOOKS_ALL, "");
    let mcp = support::repo().join("tests/mcp");
    assert!(mcp.join("pylib/mcp").is_dir(), "install the MCP test servers as .ci/run does");
    let yaml = format!(
        "skills:\n  paths: [skills]\n  builtins: []\nstate:\n  filesystem: {{path: state}}\nadapter: {{type: api}}\n\
         mcp_servers:\n  obs:\n    transport: stdio\n    command: python3\n    args: ['{}']\n    env: {{PYTHONPATH: '{}'}}\n\
         engine:\n  tool_budget:\n    enabled: true\n    tools: [get_logs]\n    max_per_turn: 1\n\
         llm:\n  provider: anthropic\n  model: test-model\n  max_tokens: 500\n  anthropic: {{api_key: test, base_url: '{}'}}\n",
        mcp.join("obs_server.py").display(),
        mcp.join("pylib").display(),
        llm.url()
    );
    std::fs::write(ws.path().join("config.yaml"), yaml).unwrap();
    let api = ApiProcess::start(&ws).await;
    api.mcp_ready("obs").await;
    let (_, before) = scrape(&api, Some(TOKEN)).await;

    let running = &api;
    let answer = |message: &'static str, channel: &'static str| async move {
        let response = running.trigger("wait=true", message, channel).send().await.unwrap();
        assert_eq!(response.status(), 200, "{}", running.stderr());
        response.json::<serde_json::Value>().await.unwrap()
    };
    let synthesized = answer("synthesize run", "a").await;
    assert_eq!(synthesized["text"], "Partial: no logs.", "{synthesized}");
    let fallback = answer("fallback run", "b").await;
    let text = fallback["text"].as_str().unwrap();
    assert!(text.starts_with("I could not finish this request: its tool budget was spent"), "{fallback}");

    let (_, after) = scrape(&api, Some(TOKEN)).await;
    let moved = |key: &str| value(&after, key) - value(&before, key);
    assert_eq!(moved("mithai_tool_budget_blocked_calls_total{}"), 2.0, "{after:#?}");
    assert_eq!(moved("mithai_tool_budget_suppressed_retries_total{}"), 2.0, "{after:#?}");
    assert_eq!(moved("mithai_tool_budget_recoveries_total{disposition=\"synthesized\"}"), 1.0, "{after:#?}");
    assert_eq!(moved("mithai_tool_budget_recoveries_total{disposition=\"fallback\"}"), 1.0, "{after:#?}");
}
