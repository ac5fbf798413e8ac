//! Traces over OTLP through the real binary: `skillhost run --adapter api` with the standard
//! OpenTelemetry environment sends its spans to a test receiver that decodes real OTLP
//! protobuf over HTTP: the turn, its LLM requests, a tool call and its approval, parented as
//! the work nests under the caller's `traceparent`, with the GenAI attributes, and nothing of
//! the prompt or the answer; the LLM requests carry the trace on; a SIGTERM loses no finished
//! span; a receiver answering 503 loses no turn; spans past the queue, or refused, are
//! dropped and counted.

mod support;

use axum::body::Bytes;
use axum::http::StatusCode;
use axum::routing::post;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, any_value};
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message as _;
use serde_json::json;
use skillhost_tests::api_client::Sse;
use skillhost_tests::llm_server::{Answer, LlmServer};
use skillhost_tests::{Workspace, guests};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the receiver got: the resource attributes and every span.
#[derive(Default)]
struct Received {
    resource: BTreeMap<String, String>,
    spans: Vec<Span>,
    posts: usize,
}

/// An OTLP/HTTP receiver on loopback answering `status`.
async fn receiver(status: StatusCode) -> (u16, Arc<Mutex<Received>>) {
    slow_receiver(status, Duration::ZERO).await
}

/// [`receiver`], answering each export after `delay`.
async fn slow_receiver(status: StatusCode, delay: Duration) -> (u16, Arc<Mutex<Received>>) {
    let received = Arc::new(Mutex::new(Received::default()));
    let shared = received.clone();
    let app = axum::Router::new().route(
        "/v1/traces",
        post(move |body: Bytes| {
            let shared = shared.clone();
            async move {
                tokio::time::sleep(delay).await;
                record(&shared, ExportTraceServiceRequest::decode(body).expect("OTLP protobuf"));
                (status, Vec::<u8>::new())
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (port, received)
}

/// Keeps what one export sent.
fn record(received: &Mutex<Received>, request: ExportTraceServiceRequest) {
    let mut got = received.lock().unwrap();
    got.posts += 1;
    for resource_spans in request.resource_spans {
        for attribute in resource_spans.resource.map(|r| r.attributes).unwrap_or_default() {
            got.resource.insert(attribute.key, text(attribute.value.as_ref()));
        }
        for scope in resource_spans.scope_spans {
            got.spans.extend(scope.spans);
        }
    }
}

/// An OTLP/gRPC receiver on loopback (tonic, the collector's own service definition).
async fn grpc_receiver() -> (u16, Arc<Mutex<Received>>) {
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceResponse;
    use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{TraceService, TraceServiceServer};
    struct Collector(Arc<Mutex<Received>>);
    #[tonic::async_trait]
    impl TraceService for Collector {
        async fn export(
            &self,
            request: tonic::Request<ExportTraceServiceRequest>,
        ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
            record(&self.0, request.into_inner());
            Ok(tonic::Response::new(ExportTraceServiceResponse { partial_success: None }))
        }
    }
    let received = Arc::new(Mutex::new(Received::default()));
    let port = free_port();
    let service = TraceServiceServer::new(Collector(received.clone()));
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    tokio::spawn(tonic::transport::Server::builder().add_service(service).serve(addr));
    (port, received)
}

/// An attribute value as text.
fn text(value: Option<&AnyValue>) -> String {
    match value.and_then(|v| v.value.as_ref()) {
        Some(any_value::Value::StringValue(s)) => s.clone(),
        Some(any_value::Value::IntValue(i)) => i.to_string(),
        Some(any_value::Value::BoolValue(b)) => b.to_string(),
        Some(any_value::Value::DoubleValue(d)) => d.to_string(),
        other => format!("{other:?}"),
    }
}

/// The caller's trace and span (a `traceparent` on the trigger request).
const CALLER_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn attributes(span: &Span) -> BTreeMap<String, String> {
    span.attributes.iter().map(|a| (a.key.clone(), text(a.value.as_ref()))).collect()
}

/// The `probe` skill (its `echo` gated) and the Python SDK's MCP test server `ask` (stdio).
fn workspace(llm: &str) -> Workspace {
    let ws = Workspace::new();
    ws.add_skill("skills", "probe", guests::PROBE, "");
    let yaml = format!(
        "skills:\n  paths: [skills]\n  builtins: []\n  allowed: [probe, ask]\nstate:\n  filesystem: {{path: state}}\n\
         human:\n  overrides: {{probe__echo: approve}}\nadapter: {{type: api}}\n\
         {}\
         llm:\n  provider: anthropic\n  model: test-model\n  max_tokens: 500\n  anthropic: {{api_key: test, base_url: '{llm}'}}\n",
        support::ask_server_yaml()
    );
    std::fs::write(ws.path().join("config.yaml"), yaml).unwrap();
    ws
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// `skillhost run --adapter api` exporting to `otlp`, once it listens.
async fn run(ws: &Workspace, otlp: u16, port: u16) -> support::run::Running {
    run_with(ws, otlp, port, &[]).await
}

/// [`run`] with more variables.
async fn run_with(ws: &Workspace, otlp: u16, port: u16, more: &[(&str, &str)]) -> support::run::Running {
    let endpoint = format!("http://127.0.0.1:{otlp}");
    let port = port.to_string();
    let mut env = vec![
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
        ("OTEL_BSP_SCHEDULE_DELAY", "200"),
        ("OTEL_BSP_EXPORT_TIMEOUT", "2000"),
        ("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=test"),
        ("SKILLHOST_UI_PORT", port.as_str()),
        ("SKILLHOST_UI_TOKEN", "tok"),
    ];
    env.extend_from_slice(more);
    let running = support::run::Running::start(ws.path(), &["--adapter", "api"], &env);
    running.wait_for_log("listening on").await;
    running.wait_for_log("MCP server ready").await;
    running
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_with_a_tool_call_and_an_approval_is_one_trace() {
    let (otlp, received) = receiver(StatusCode::OK).await;
    let call = Answer::default().call("e1", "probe__echo", json!({"n": 1})).call("w1", "ask__trace", json!({}));
    let ask = Answer::default().call("q1", "human__ask", json!({"question": "Go on?", "choices": ["yes", "no"]}));
    let llm = LlmServer::start(vec![call.into(), ask.into(), Answer::text(&["Echoed SECRET-ANSWER."]).into()]).await;
    let ws = workspace(&llm.url());
    let port = free_port();
    let mut running = run(&ws, otlp, port).await;
    let client = reqwest::Client::builder().timeout(Duration::from_secs(60)).build().unwrap();
    let response = client
        .post(format!("http://127.0.0.1:{port}/api/trigger?wait=1&stream=approval-v1"))
        .bearer_auth("tok")
        .header("traceparent", format!("00-{CALLER_TRACE}-{CALLER_SPAN}-01"))
        .json(&json!({"message": "echo SECRET-PROMPT please", "channel_id": "ops"}))
        .send()
        .await
        .unwrap();
    let mut sse = Sse::new(response);
    let asked = sse.until("approval_requested").await.last().unwrap().data.clone();
    let id = asked["approval_id"].as_str().unwrap();
    let decided = client
        .post(format!("http://127.0.0.1:{port}/api/approvals/{id}/decision"))
        .bearer_auth("tok")
        .json(&json!({"approved": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(decided.status(), 200);
    let asked = sse.until("question_requested").await.last().unwrap().data.clone();
    let question = asked["question_id"].as_str().unwrap();
    let answered = client
        .post(format!("http://127.0.0.1:{port}/api/questions/{question}/answer"))
        .bearer_auth("tok")
        .json(&json!({"answer": "yes"}))
        .send()
        .await
        .unwrap();
    assert_eq!(answered.status(), 200);
    assert!(sse.rest().await.iter().any(|e| e.kind == "run_completed"));
    // SIGTERM: the finished spans are flushed before the process exits.
    assert_eq!(running.terminate(), Some(0), "{}", running.stderr());

    let got = received.lock().unwrap();
    assert_eq!(got.resource.get("service.name").map(String::as_str), Some("skillhost"), "{:?}", got.resource);
    assert_eq!(got.resource.get("deployment.environment").map(String::as_str), Some("test"));
    let named = |prefix: &str| -> Vec<&Span> { got.spans.iter().filter(|s| s.name.starts_with(prefix)).collect() };
    let turn = named("invoke_agent");
    assert_eq!(turn.len(), 1, "{:#?}", got.spans.iter().map(|s| &s.name).collect::<Vec<_>>());
    let turn = turn[0];
    // The caller's trace goes on: its span -> the request -> the turn.
    let request = named("POST /api/trigger");
    assert_eq!(request.len(), 1);
    assert_eq!(hex(&request[0].trace_id), CALLER_TRACE, "the caller's traceparent is continued");
    assert_eq!(hex(&request[0].parent_span_id), CALLER_SPAN);
    assert_eq!(turn.parent_span_id, request[0].span_id, "the turn runs under the request");
    assert_eq!(turn.trace_id, request[0].trace_id);
    let attrs = attributes(turn);
    assert_eq!(
        (attrs["gen_ai.operation.name"].as_str(), attrs["skillhost.outcome"].as_str()),
        ("invoke_agent", "completed")
    );
    assert_eq!(attrs["skillhost.channel"], "ops");
    assert_eq!(attrs["skillhost.adapter"], "api");

    let chats = named("chat test-model");
    assert_eq!(chats.len(), 3, "three LLM requests");
    for chat in &chats {
        assert_eq!((chat.trace_id.clone(), chat.parent_span_id.clone()), (turn.trace_id.clone(), turn.span_id.clone()));
        let a = attributes(chat);
        assert_eq!(a["gen_ai.system"], "anthropic");
        assert_eq!(a["gen_ai.request.model"], "test-model");
        assert_eq!((a["gen_ai.usage.input_tokens"].as_str(), a["gen_ai.usage.output_tokens"].as_str()), ("25", "42"));
    }
    // The LLM requests carry the trace on, from their `chat` span.
    for (n, recorded) in llm.requests().iter().enumerate() {
        let parent =
            recorded.headers.get("traceparent").unwrap_or_else(|| panic!("request {n}: {:?}", recorded.headers));
        assert!(parent.starts_with(&format!("00-{CALLER_TRACE}-")), "{parent}");
        let span = parent.split('-').nth(2).unwrap();
        assert!(chats.iter().any(|c| hex(&c.span_id) == span), "{parent}");
    }
    let finishes: Vec<String> = chats.iter().map(|c| attributes(c)["gen_ai.response.finish_reasons"].clone()).collect();
    assert!(finishes.contains(&"tool_use".to_owned()) && finishes.contains(&"end_turn".to_owned()), "{finishes:?}");

    let tool = named("execute_tool probe__echo");
    assert_eq!(tool.len(), 1);
    assert_eq!(tool[0].parent_span_id, turn.span_id, "the call is the turn's child");
    let a = attributes(tool[0]);
    assert_eq!((a["gen_ai.tool.name"].as_str(), a["gen_ai.tool.call.id"].as_str()), ("probe__echo", "e1"));
    assert_eq!(
        (a["skillhost.skill"].as_str(), a["skillhost.tool.kind"].as_str(), a["skillhost.outcome"].as_str()),
        ("probe", "component", "ok")
    );

    assert!(a["skillhost.sandbox.fuel_used"].parse::<u64>().unwrap() > 0, "{a:?}");
    assert!(a.contains_key("skillhost.sandbox.wall_ms"), "{a:?}");
    assert!(a["skillhost.sandbox.memory_bytes"].parse::<u64>().unwrap() > 0, "{a:?}");

    // The MCP call, under its tool call.
    let mcp_tool = named("execute_tool ask__trace");
    assert_eq!(mcp_tool.len(), 1);
    assert_eq!(attributes(mcp_tool[0])["skillhost.tool.kind"], "mcp");
    let mcp = named("tools/call trace");
    assert_eq!(mcp.len(), 1, "{:#?}", got.spans.iter().map(|s| &s.name).collect::<Vec<_>>());
    assert_eq!(mcp[0].parent_span_id, mcp_tool[0].span_id, "the MCP request is its tool call's child");
    let a = attributes(mcp[0]);
    assert_eq!(
        (a["mcp.server"].as_str(), a["mcp.method.name"].as_str(), a["skillhost.outcome"].as_str()),
        ("ask", "tools/call", "ok")
    );
    // The server got the trace on, in the request's `_meta`, from the MCP call's span.
    let results = support::tool_results(&llm, 1);
    let sent = results.iter().find(|r| r["tool_use_id"] == "w1").unwrap()["content"].to_string();
    let expected = format!("00-{CALLER_TRACE}-{}-01", hex(&mcp[0].span_id));
    assert!(sent.contains(&expected), "{sent} lacks {expected}");

    // Loading the skills at start is a trace of its own.
    let load = named("load_skills");
    assert!(!load.is_empty() && attributes(load[0])["skillhost.skills"] == "1", "{load:?}");

    let approval = named("approval probe__echo");
    assert_eq!(approval.len(), 1);
    assert_eq!(approval[0].parent_span_id, turn.span_id);
    let a = attributes(approval[0]);
    assert_eq!(
        (a["skillhost.approval.level"].as_str(), a["skillhost.approval.outcome"].as_str()),
        ("approve", "approved")
    );
    assert_eq!(a["skillhost.adapter"], "api");
    assert!(a["skillhost.approval.wait_ms"].parse::<u64>().is_ok(), "{a:?}");

    // The question's wait (`human__ask` is the person's, not a tool call with a span).
    let question = named("question");
    assert_eq!(question.len(), 1, "{:#?}", got.spans.iter().map(|s| &s.name).collect::<Vec<_>>());
    assert_eq!(question[0].parent_span_id, turn.span_id);
    let a = attributes(question[0]);
    assert_eq!(
        (
            a["skillhost.adapter"].as_str(),
            a["skillhost.question.outcome"].as_str(),
            a["skillhost.question.choices"].as_str()
        ),
        ("api", "answered", "2")
    );
    assert!(a["skillhost.question.wait_ms"].parse::<u64>().is_ok(), "{a:?}");

    // Never the prompt or the answer, in any span.
    for span in &got.spans {
        let all = format!("{:?}", span.attributes);
        assert!(!all.contains("SECRET-PROMPT") && !all.contains("SECRET-ANSWER"), "{all}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receiver_answering_503_loses_no_turn() {
    let (otlp, received) = receiver(StatusCode::SERVICE_UNAVAILABLE).await;
    let llm = LlmServer::start(vec![Answer::text(&["One."]).into(), Answer::text(&["Two."]).into()]).await;
    let ws = workspace(&llm.url());
    let port = free_port();
    let mut running = run(&ws, otlp, port).await;
    let client = reqwest::Client::builder().timeout(Duration::from_secs(60)).build().unwrap();
    for expected in ["One.", "Two."] {
        let answer = ask(&client, port).await;
        assert_eq!(answer["text"], expected, "{answer}");
        // Wait for an export attempt before the next turn (the batch goes every 200 ms).
        let started = std::time::Instant::now();
        while received.lock().unwrap().posts == 0 && started.elapsed() < Duration::from_secs(20) {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    assert!(received.lock().unwrap().posts > 0, "the exporter tried");
    let health = client.get(format!("http://127.0.0.1:{port}/healthz")).send().await.unwrap();
    assert_eq!(health.status(), 200, "the process stays healthy");
    assert!(running.running());
    // The refused spans are counted.
    assert!(dropped(&client, port, "export_failed").await > 0.0, "{}", running.stderr());
    assert_eq!(running.terminate(), Some(0), "{}", running.stderr());
}

/// A `wait=true` run saying hi, its answer.
async fn ask(client: &reqwest::Client, port: u16) -> serde_json::Value {
    let url = format!("http://127.0.0.1:{port}/api/trigger?wait=true");
    let response = client.post(url).bearer_auth("tok").json(&json!({"message": "hi"})).send().await.unwrap();
    response.json().await.unwrap()
}

/// `skillhost_trace_spans_dropped_total{reason}` once it is above zero (at most 20 s).
async fn dropped(client: &reqwest::Client, port: u16, reason: &str) -> f64 {
    let line = format!("skillhost_trace_spans_dropped_total{{reason=\"{reason}\"}} ");
    let started = std::time::Instant::now();
    loop {
        let text = client
            .get(format!("http://127.0.0.1:{port}/metrics"))
            .bearer_auth("tok")
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let value = text.lines().find_map(|l| l.strip_prefix(&line)).map_or(0.0, |v| v.trim().parse().unwrap());
        if value > 0.0 || started.elapsed() > Duration::from_secs(20) {
            return value;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A queue of one span, held by a receiver that answers slowly: the turn's other spans are
/// dropped and counted, and the turn is not held up by it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spans_past_the_queue_are_dropped_and_counted() {
    let (otlp, received) = slow_receiver(StatusCode::OK, Duration::from_secs(1)).await;
    let llm = LlmServer::start(vec![Answer::text(&["One."]).into()]).await;
    let ws = workspace(&llm.url());
    let port = free_port();
    let mut running = run_with(&ws, otlp, port, &[("OTEL_BSP_MAX_QUEUE_SIZE", "1")]).await;
    let client = reqwest::Client::builder().timeout(Duration::from_secs(60)).build().unwrap();
    let answer = ask(&client, port).await;
    assert_eq!(answer["text"], "One.", "{answer}");
    assert!(dropped(&client, port, "queue_full").await >= 1.0, "{}", running.stderr());
    assert_eq!(running.terminate(), Some(0), "{}", running.stderr());
    assert!(received.lock().unwrap().posts >= 1, "what fit in the queue went out");
}

/// The config's `telemetry` block turns traces on with no `OTEL_*` variable: its endpoint,
/// service name and resource attributes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_config_block_says_the_same() {
    let (otlp, received) = receiver(StatusCode::OK).await;
    let llm = LlmServer::start(vec![Answer::text(&["Hi."]).into()]).await;
    let ws = workspace(&llm.url());
    let path = ws.path().join("config.yaml");
    let mut yaml = std::fs::read_to_string(&path).unwrap();
    yaml.push_str(&format!(
        "telemetry:\n  otlp_endpoint: http://127.0.0.1:{otlp}/\n  service_name: ops-bot\n  \
         resource_attributes: {{deployment.environment: staging}}\n  sampler: parentbased_always_on\n"
    ));
    std::fs::write(&path, yaml).unwrap();
    let port = free_port();
    let port_text = port.to_string();
    let env = [("SKILLHOST_UI_PORT", port_text.as_str()), ("SKILLHOST_UI_TOKEN", "tok")];
    let mut running = support::run::Running::start(ws.path(), &["--adapter", "api"], &env);
    running.wait_for_log("listening on").await;
    let client = reqwest::Client::new();
    let answer = client
        .post(format!("http://127.0.0.1:{port}/api/trigger?wait=true"))
        .bearer_auth("tok")
        .json(&json!({"message": "hi"}))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    assert_eq!(running.terminate(), Some(0), "{}", running.stderr());
    let got = received.lock().unwrap();
    assert_eq!(got.resource.get("service.name").map(String::as_str), Some("ops-bot"), "{:?}", got.resource);
    assert_eq!(got.resource.get("deployment.environment").map(String::as_str), Some("staging"));
    assert!(got.spans.iter().any(|s| s.name.starts_with("invoke_agent")), "{:?}", got.spans.len());
}

/// `OTEL_EXPORTER_OTLP_PROTOCOL=grpc`: the same spans reach a gRPC collector, parented the
/// same way, and the config's `protocol: grpc` says the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_export_reaches_a_grpc_collector() {
    let (otlp, received) = grpc_receiver().await;
    let call = Answer::default().call("e1", "probe__ctx", json!({}));
    let llm = LlmServer::start(vec![call.into(), Answer::text(&["Done."]).into()]).await;
    let ws = workspace(&llm.url());
    let port = free_port();
    let mut running = run_with(&ws, otlp, port, &[("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")]).await;
    let client = reqwest::Client::builder().timeout(Duration::from_secs(60)).build().unwrap();
    assert_eq!(ask(&client, port).await["text"], "Done.");
    assert_eq!(running.terminate(), Some(0), "{}", running.stderr());
    {
        let got = received.lock().unwrap();
        let turn = got.spans.iter().find(|s| s.name.starts_with("invoke_agent")).unwrap_or_else(|| {
            panic!("{:#?}\n{}", got.spans.iter().map(|s| &s.name).collect::<Vec<_>>(), running.stderr())
        });
        let tool = got.spans.iter().find(|s| s.name == "execute_tool probe__ctx").expect("the tool call's span");
        assert_eq!(tool.parent_span_id, turn.span_id);
        assert_eq!(got.resource.get("service.name").map(String::as_str), Some("skillhost"));
    }

    // The config block, with no OTEL_* variable.
    let (otlp, received) = grpc_receiver().await;
    let path = ws.path().join("config.yaml");
    let mut yaml = std::fs::read_to_string(&path).unwrap();
    yaml.push_str(&format!("telemetry:\n  otlp_endpoint: http://127.0.0.1:{otlp}\n  protocol: grpc\n"));
    std::fs::write(&path, yaml).unwrap();
    llm.push(Answer::text(&["Again."]));
    let port = free_port();
    let port_text = port.to_string();
    let env = [("SKILLHOST_UI_PORT", port_text.as_str()), ("SKILLHOST_UI_TOKEN", "tok")];
    let mut running = support::run::Running::start(ws.path(), &["--adapter", "api"], &env);
    running.wait_for_log("listening on").await;
    assert_eq!(ask(&client, port).await["text"], "Again.");
    assert_eq!(running.terminate(), Some(0), "{}", running.stderr());
    assert!(received.lock().unwrap().spans.iter().any(|s| s.name.starts_with("invoke_agent")), "{}", running.stderr());
}
