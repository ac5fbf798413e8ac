//! The person broker through the real binary, on a throwaway PostgreSQL 15 cluster: who may
//! read and decide an entry (two agents on one database, two replicas), and approvals over
//! `/mcp` at 2026-07-28 answered on another replica than the one that asked; waits written
//! down (beside other calls, inside a nested turn) decided after their replica died.

mod support;

use serde_json::{Value, json};
use skillhost_tests::api_client::Sse;
use skillhost_tests::llm_server::{Answer, LlmServer};
use skillhost_tests::postgres::Postgres;
use skillhost_tests::telegram_server::TelegramServer;
use skillhost_tests::{Workspace, guests};
use std::time::{Duration, Instant};
use support::run::Running;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A workspace with `probe` (its memory granted, kept in `memory/`) and its state in
/// database `db` of `pg`; `extra`: more config.
fn workspace(pg: &Postgres, db: &str, extra: &str) -> Workspace {
    pg.psql("postgres", &format!("CREATE DATABASE {db}"));
    let ws = Workspace::new();
    ws.add_skill("skills", "probe", guests::PROBE, "[capabilities]\nmemory = true\n");
    let yaml = format!(
        "skills:\n  paths: [skills]\n  builtins: []\n  grants:\n    probe: {{memory: true}}\n\
         learning:\n  approval_auto_promote: 0\n  memory:\n    filesystem: {{path: memory}}\n\
         state:\n  backend: postgres\n  postgres: {{url: '{}?sslmode=disable', connect_timeout_seconds: 2}}\n{extra}",
        pg.url("postgres", db)
    );
    std::fs::write(ws.path().join("config.yaml"), yaml).unwrap();
    ws
}

/// What `memory/runs.txt` holds: one `x` per run of the gated call.
fn runs(ws: &Workspace) -> String {
    std::fs::read_to_string(ws.path().join("memory/runs.txt")).unwrap_or_default()
}

fn append() -> Value {
    json!({"path": "runs.txt", "content": "x", "mode": "append"})
}

/// One agent's API on one replica.
struct Api {
    base: String,
    token: &'static str,
}

impl Api {
    fn new(port: u16, token: &'static str) -> Self {
        Api { base: format!("http://127.0.0.1:{port}"), token }
    }

    async fn ready(&self, replica: &Running) {
        let started = Instant::now();
        loop {
            let ready = reqwest::get(format!("{}/readyz", self.base)).await.map(|r| r.status().as_u16());
            if ready.is_ok_and(|s| s == 200) {
                return;
            }
            assert!(started.elapsed() < support::PROCESS_LIMIT, "never ready: {}", replica.stderr());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn get(&self, path: &str) -> (u16, Value) {
        let response =
            reqwest::Client::new().get(format!("{}{path}", self.base)).bearer_auth(self.token).send().await.unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        let url = format!("{}{path}", self.base);
        let response = reqwest::Client::new().post(url).bearer_auth(self.token).json(&body).send().await.unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    async fn stream(&self, message: &str, channel: &str) -> Sse {
        let url = format!("{}/api/trigger?wait=1&stream=approval-v1", self.base);
        let body = json!({"message": message, "channel_id": channel});
        let response = reqwest::Client::new().post(url).bearer_auth(self.token).json(&body).send().await.unwrap();
        assert_eq!(response.status(), 200);
        Sse::new(response)
    }
}

/// Two agents (`a`, `b`), each with its API and its own token, on one database, served by two
/// replicas: b's API and token, on either replica, can neither read nor decide a's approval
/// (410 with the body of an unknown id), nor list it; a's own API on the other replica lists
/// it and decides it, and the call runs once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn another_agent_can_neither_see_nor_decide_and_the_owner_decides_on_any_replica() {
    let pg = Postgres::start();
    let llm = LlmServer::start(vec![
        Answer::default().call("w1", "probe__memory_write", append()).into(),
        Answer::text(&["Written."]).into(),
    ])
    .await;
    let agents = format!(
        "human:\n  overrides: {{probe__memory_write: approve}}\n\
         llm:\n  provider: anthropic\n  model: m\n  max_tokens: 100\n  anthropic: {{api_key: k, base_url: '{}'}}\n\
         agents:\n\
         \x20 a:\n    adapter: {{type: api}}\n    ui: {{port: ${{A_PORT}}, auth_token: token-a}}\n\
         \x20 b:\n    adapter: {{type: api}}\n    ui: {{port: ${{B_PORT}}, auth_token: token-b}}\n",
        llm.url()
    );
    let ws = workspace(&pg, "agents", &agents);
    let ports = [(free_port(), free_port()), (free_port(), free_port())];
    let replica =
        |(a, b): (u16, u16)| Running::start(ws.path(), &[], &[("A_PORT", &a.to_string()), ("B_PORT", &b.to_string())]);
    let (one, two) = (replica(ports[0]), replica(ports[1]));
    let (a1, b1) = (Api::new(ports[0].0, "token-a"), Api::new(ports[0].1, "token-b"));
    let (a2, b2) = (Api::new(ports[1].0, "token-a"), Api::new(ports[1].1, "token-b"));
    for (api, replica) in [(&a1, &one), (&b1, &one), (&a2, &two), (&b2, &two)] {
        api.ready(replica).await;
    }

    let mut sse = a1.stream("append please", "c1").await;
    let asked = sse.until("approval_requested").await.last().unwrap().data.clone();
    let id = asked["approval_id"].as_str().unwrap().to_owned();

    let unknown = b2.get("/api/approvals/0123456789abcdef0123456789abcdef").await;
    assert_eq!(unknown.0, 410, "{unknown:?}");
    for b in [&b1, &b2] {
        assert_eq!(b.get(&format!("/api/approvals/{id}")).await, unknown, "b reads a's approval as unknown");
        let decided = b.post(&format!("/api/approvals/{id}/decision"), json!({"approved": true})).await;
        assert_eq!(
            decided,
            b.post("/api/approvals/0123456789abcdef0123456789abcdef/decision", json!({"approved": true})).await
        );
        assert_eq!(decided.0, 410, "{decided:?}");
        let (_, listed) = b.get("/api/approvals").await;
        assert_eq!(listed, json!({"approvals": []}), "b lists none of a's");
    }
    // Fleet-wide: a's API on the other replica lists what replica one asked.
    let (_, listed) = a2.get("/api/approvals").await;
    let entry = &listed["approvals"][0];
    assert_eq!(
        (entry["approval_id"].as_str(), entry["tool_name"].as_str()),
        (Some(id.as_str()), Some("probe__memory_write")),
        "{listed}"
    );
    assert_eq!((entry["adapter"].as_str(), entry["decidable"].as_bool()), (Some("api"), Some(true)), "{listed}");
    assert_eq!(runs(&ws), "", "nothing ran while b tried");

    let (status, decided) = a2.post(&format!("/api/approvals/{id}/decision"), json!({"approved": true})).await;
    assert_eq!((status, decided["outcome"].clone()), (200, json!("approved")), "{decided}");
    let rest = sse.rest().await;
    let kinds: Vec<&str> = rest.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(kinds.iter().filter(|k| **k == "tool_completed").count(), 1, "{kinds:?} {}", one.stderr());
    assert!(kinds.contains(&"approval_resolved") && kinds.last() == Some(&"run_completed"), "{kinds:?}");
    assert_eq!(runs(&ws), "x", "the call ran exactly once");
    let (_, seen) = a1.get(&format!("/api/approvals/{id}")).await;
    assert_eq!((seen["outcome"].as_str(), seen["decided_by"].as_str()), (Some("approved"), Some("api")), "{seen}");
    assert_eq!(b1.get(&format!("/api/approvals/{id}")).await.0, 410, "still not b's once decided");
}

/// An approval decided with the person's changed arguments on the other replica: arguments
/// that do not fit the tool's schema are 422 saying where and decide nothing; fitting ones run
/// the edited call once, the model is told, and the approval shows them. A denial's reason
/// reaches the model.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_edited_approval_runs_the_edited_call_once_and_a_denials_reason_reaches_the_model() {
    let pg = Postgres::start();
    let llm = LlmServer::start(vec![
        Answer::default().call("w1", "probe__memory_write", append()).into(),
        Answer::text(&["Written."]).into(),
        Answer::default().call("w2", "probe__memory_write", append()).into(),
        Answer::text(&["Not written."]).into(),
    ])
    .await;
    let extra = format!(
        "human:\n  overrides: {{probe__memory_write: approve}}\n\
         llm:\n  provider: anthropic\n  model: m\n  max_tokens: 100\n  anthropic: {{api_key: k, base_url: '{}'}}\n",
        llm.url()
    );
    let ws = workspace(&pg, "edits", &extra);
    let (one, two) = (support::api::ApiProcess::start(&ws).await, support::api::ApiProcess::start(&ws).await);
    let (a1, a2) = (
        Api { base: one.base().to_owned(), token: support::api::TOKEN },
        Api { base: two.base().to_owned(), token: support::api::TOKEN },
    );

    let mut sse = a1.stream("append please", "c1").await;
    let asked = sse.until("approval_requested").await.last().unwrap().data.clone();
    let path = format!("/api/approvals/{}/decision", asked["approval_id"].as_str().unwrap());
    let unfit = json!({"approved": true, "arguments": {"path": 5, "content": "y"}});
    let (status, refused) = a2.post(&path, unfit).await;
    assert_eq!(status, 422, "{refused}");
    assert!(refused["error"].as_str().unwrap().contains("path"), "says where: {refused}");
    let edited = json!({"path": "runs.txt", "content": "edited", "mode": "append"});
    let (status, decided) = a2.post(&path, json!({"approved": true, "arguments": edited})).await;
    assert_eq!((status, decided["arguments"].clone()), (200, edited.clone()), "{decided}");
    let by = (decided["decided_by"].clone(), decided["token"].clone());
    assert_eq!(by, (json!("api"), json!("default")), "the record names the token (ui.auth_token): {decided}");
    let kinds: Vec<String> = sse.rest().await.into_iter().map(|e| e.kind).collect();
    assert_eq!(kinds.iter().filter(|k| *k == "tool_completed").count(), 1, "{kinds:?} {}", one.stderr());
    assert_eq!(runs(&ws), "edited", "the edited call ran, once");
    let told = support::tool_results(&llm, 1);
    assert_eq!(told[0]["is_error"], false, "{told:?}");
    let result: Value = serde_json::from_str(told[0]["content"].as_str().unwrap()).unwrap();
    assert_eq!(result["_edited_by_person"]["arguments"], edited, "the model is told: {result}");

    let mut sse = a2.stream("append again", "c2").await;
    let asked = sse.until("approval_requested").await.last().unwrap().data.clone();
    let path = format!("/api/approvals/{}/decision", asked["approval_id"].as_str().unwrap());
    let (status, decided) = a1.post(&path, json!({"approved": false, "reason": "not on a Friday"})).await;
    assert_eq!((status, decided["reason"].clone()), (200, json!("not on a Friday")), "{decided}");
    sse.rest().await;
    let told = support::tool_results(&llm, 3);
    let refusal: Value = serde_json::from_str(told[0]["content"].as_str().unwrap()).unwrap();
    assert_eq!((refusal["kind"].clone(), refusal["reason"].clone()), (json!("denied"), json!("not on a Friday")));
    assert_eq!(runs(&ws), "edited", "nothing more ran");
}

/// A JSON-RPC request to `/mcp` at 2026-07-28 (no session; the revision in the header and in
/// `_meta`, the client able to answer forms): its response.
async fn mcp(base: &str, id: u64, params: Value) -> Value {
    rpc(base, id, "tools/call", params, json!({"elicitation": {"form": {}}})).await
}

/// A `method` request to `/mcp` at 2026-07-28 from a client declaring `capabilities`: its
/// response.
async fn rpc(base: &str, id: u64, method: &str, params: Value, capabilities: Value) -> Value {
    support::api::mcp_rpc(base, support::api::TOKEN, (id, method), params, capabilities).await.1
}

fn approve(yes: bool) -> Value {
    json!({"approval": {"action": "accept", "content": {"approve": yes}}})
}

/// Asks `probe__memory_write` on `base`: its `requestState`.
async fn asked(base: &str, arguments: &Value) -> String {
    let first = mcp(base, 1, json!({"name": "probe__memory_write", "arguments": arguments})).await;
    assert_eq!(first["result"]["resultType"], "input_required", "{first}");
    assert!(first["result"]["inputRequests"]["approval"].is_object(), "{first}");
    first["result"]["requestState"].as_str().unwrap().to_owned()
}

async fn retry(base: &str, arguments: &Value, state: &str, answer: Value) -> Value {
    let params =
        json!({"name": "probe__memory_write", "arguments": arguments, "requestState": state, "inputResponses": answer});
    mcp(base, 2, params).await
}

fn refused_because(answer: &Value, why: &str) {
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    assert!(answer["error"]["message"].as_str().unwrap().contains(why), "{answer}");
}

/// Two replicas over database `db` of `pg`, `probe__memory_write` asking for approval (and
/// the LLM server they are configured with, never asked).
async fn gated_replicas(
    pg: &Postgres,
    db: &str,
) -> (Workspace, support::api::ApiProcess, support::api::ApiProcess, LlmServer) {
    let llm = LlmServer::start(Vec::new()).await;
    let extra = format!(
        "human:\n  overrides: {{probe__memory_write: approve}}\n\
         llm:\n  provider: anthropic\n  model: m\n  max_tokens: 100\n  anthropic: {{api_key: k, base_url: '{}'}}\n",
        llm.url()
    );
    let ws = workspace(pg, db, &extra);
    let one = support::api::ApiProcess::start(&ws).await;
    let two = support::api::ApiProcess::start(&ws).await;
    (ws, one, two, llm)
}

/// `/mcp` at 2026-07-28 behind two replicas: asked on one, answered on the other, the call
/// runs once; a tampered state, a replay, an expired one and a retry with other arguments
/// are each refused with -32602 saying which, and run nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_mcp_approval_asked_on_one_replica_is_answered_on_the_other_once() {
    let pg = Postgres::start();
    let (ws, one, two, _llm) = gated_replicas(&pg, "mcp").await;
    let arguments = append();

    let state = asked(one.base(), &arguments).await;
    let answered = retry(two.base(), &arguments, &state, approve(true)).await;
    assert_eq!(answered["result"]["isError"], false, "{answered} {}", two.stderr());
    assert_eq!(runs(&ws), "x", "ran once, on the replica the answer reached");
    refused_because(&retry(one.base(), &arguments, &state, approve(true)).await, "already counted");
    refused_because(&retry(two.base(), &arguments, &state, approve(true)).await, "already counted");

    let state = asked(two.base(), &arguments).await;
    let mut tampered = state.clone().into_bytes();
    let at = tampered.len() - 3;
    tampered[at] = if tampered[at] == b'A' { b'B' } else { b'A' };
    let tampered = String::from_utf8(tampered).unwrap();
    refused_because(&retry(one.base(), &arguments, &tampered, approve(true)).await, "altered");
    let other = json!({"path": "runs.txt", "content": "y", "mode": "append"});
    refused_because(&retry(one.base(), &other, &state, approve(true)).await, "another call");
    // A denial counts once too, and runs nothing.
    let denied = retry(one.base(), &arguments, &state, approve(false)).await;
    assert_eq!(denied["result"]["isError"], true, "{denied}");
    assert!(denied["result"]["content"][0]["text"].as_str().unwrap().contains("denied"), "{denied}");
    assert_eq!(runs(&ws), "x", "nothing more ran");

    // An approval past `human.timeout_seconds` (a replica whose timeout is one second asked
    // it; the keys are the shared ones): refused as expired, on any replica.
    let short = Workspace::new();
    short.add_skill("skills", "probe", guests::PROBE, "[capabilities]\nmemory = true\n");
    let config = std::fs::read_to_string(ws.path().join("config.yaml")).unwrap();
    std::fs::write(short.path().join("config.yaml"), config.replace("human:\n", "human:\n  timeout_seconds: 1\n"))
        .unwrap();
    let hasty = support::api::ApiProcess::start(&short).await;
    let state = asked(hasty.base(), &arguments).await;
    tokio::time::sleep(Duration::from_millis(2100)).await;
    refused_because(&retry(one.base(), &arguments, &state, approve(true)).await, "expired");
    assert_eq!(runs(&ws), "x", "nothing more ran");
}

/// A skill's own rounds over `/mcp` at 2026-07-28 behind two replicas sharing the broker:
/// asked on one, each retry answered on the other in turn, the call completes with both
/// answers; another answer to a round already answered is refused on either replica.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_skills_rounds_over_mcp_are_answered_on_any_replica() {
    let pg = Postgres::start();
    let llm = LlmServer::start(Vec::new()).await;
    let extra = format!(
        "llm:\n  provider: anthropic\n  model: m\n  max_tokens: 100\n  anthropic: {{api_key: k, base_url: '{}'}}\n",
        llm.url()
    );
    let ws = workspace(&pg, "rounds", &extra);
    let one = support::api::ApiProcess::start(&ws).await;
    let two = support::api::ApiProcess::start(&ws).await;
    let form = json!({"form": {"message": "Name?", "schema": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}}});
    let arguments = json!({"requests": {"name": form}, "rounds": 2});
    let call = |state: Option<&str>, responses: Value| {
        let mut params = json!({"name": "probe__ask", "arguments": arguments.clone()});
        if let Some(state) = state {
            params["requestState"] = json!(state);
            params["inputResponses"] = responses;
        }
        params
    };
    let accept = |key: &str, name: &str| json!({key: {"action": "accept", "content": {"name": name}}});

    let first = mcp(one.base(), 1, call(None, Value::Null)).await;
    assert_eq!(first["result"]["resultType"], "input_required", "{first} {}", one.stderr());
    let round_one = first["result"]["requestState"].as_str().unwrap().to_owned();
    let second = mcp(two.base(), 2, call(Some(&round_one), accept("name", "Ada"))).await;
    assert!(second["result"]["inputRequests"]["name_2"].is_object(), "{second} {}", two.stderr());
    let round_two = second["result"]["requestState"].as_str().unwrap().to_owned();
    let last = mcp(one.base(), 3, call(Some(&round_two), accept("name_2", "Bea"))).await;
    assert_eq!(last["result"]["resultType"], "complete", "{last}");
    let answers: Value = serde_json::from_str(last["result"]["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(answers["name"]["form"]["content"]["name"], "Ada", "recorded on the other replica: {answers}");
    assert_eq!(answers["name_2"]["form"]["content"]["name"], "Bea", "{answers}");
    for (id, base) in [(4, one.base()), (5, two.base())] {
        refused_because(&mcp(base, id, call(Some(&round_one), accept("name", "Bob"))).await, "answered differently");
    }
}

/// `/mcp` at 2026-07-28 behind two replicas, a gated tool that also asks its caller: the
/// approval is listed on the other replica (not decidable there), one approval runs the call
/// to completion once, and afterwards no state of it runs anything, on either replica, with
/// or without answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_mcp_approval_completes_its_call_once_on_any_replica_however_it_is_replayed() {
    let pg = Postgres::start();
    let llm = LlmServer::start(Vec::new()).await;
    let extra = format!(
        "human:\n  overrides: {{probe__ask: approve}}\n\
         llm:\n  provider: anthropic\n  model: m\n  max_tokens: 100\n  anthropic: {{api_key: k, base_url: '{}'}}\n",
        llm.url()
    );
    let ws = workspace(&pg, "replayed", &extra);
    let one = support::api::ApiProcess::start(&ws).await;
    let two = support::api::ApiProcess::start(&ws).await;
    let form = json!({"form": {"message": "Name?", "schema": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}}});
    let arguments = json!({"requests": {"name": form}, "rounds": 1});
    let call = |state: &str, responses: Option<Value>| {
        let mut params = json!({"name": "probe__ask", "arguments": arguments.clone()});
        if !state.is_empty() {
            params["requestState"] = json!(state);
        }
        if let Some(responses) = responses {
            params["inputResponses"] = responses;
        }
        params
    };
    let name = json!({"name": {"action": "accept", "content": {"name": "Ada"}}});
    let counted = |base: String| async move {
        let read =
            rpc(&base, 9, "tools/call", json!({"name": "probe__state_get", "arguments": {"key": "asked"}}), json!({}));
        let read = read.await;
        let read: Value = serde_json::from_str(read["result"]["content"][0]["text"].as_str().unwrap()).unwrap();
        read["value"].clone()
    };

    let first = mcp(one.base(), 1, call("", None)).await;
    let approval = first["result"]["requestState"].as_str().unwrap_or_else(|| panic!("{first}")).to_owned();
    let listed = Api { base: two.base().to_owned(), token: support::api::TOKEN }.get("/api/approvals").await.1;
    let entry = &listed["approvals"][0];
    assert_eq!(entry["tool_name"], "probe__ask", "{listed}");
    assert_eq!((entry["adapter"].as_str(), entry["decidable"].as_bool()), (Some("mcp"), Some(false)), "{listed}");
    let second = mcp(two.base(), 2, call(&approval, Some(approve(true)))).await;
    let round = second["result"]["requestState"].as_str().unwrap_or_else(|| panic!("{second}")).to_owned();
    let done = mcp(one.base(), 3, call(&round, Some(name.clone()))).await;
    assert_eq!(done["result"]["resultType"], "complete", "{done}");
    assert_eq!(counted(one.base().to_owned()).await, "2", "one run to the question, one to the end");

    let mut id = 10;
    for base in [one.base(), two.base(), one.base()] {
        for params in [call(&round, Some(name.clone())), call(&round, None), call(&approval, Some(approve(true)))] {
            id += 1;
            refused_because(&mcp(base, id, params).await, "already counted");
        }
    }
    assert_eq!(counted(two.base().to_owned()).await, "2", "nothing ran again");
    // On the record once: opened, decided by the client, used up by the run that completed.
    let record = Api { base: two.base().to_owned(), token: support::api::TOKEN }.get("/api/audit").await.1;
    let events: Vec<&str> = record["records"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["kind"] == "approval")
        .map(|r| r["event"].as_str().unwrap())
        .collect();
    assert_eq!(events, ["opened", "decided", "consumed"], "{record}");
}

/// A client that answers forms and polls tasks.
fn tasking() -> Value {
    json!({"elicitation": {"form": {}}, "extensions": {"io.modelcontextprotocol/tasks": {}}})
}

/// Polls task `task` on `base` until its status is `status` (or a final one).
async fn until(base: &str, task: &str, status: &str) -> Value {
    let started = Instant::now();
    loop {
        let got = rpc(base, 9, "tasks/get", json!({"taskId": task}), tasking()).await;
        let now = got["result"]["status"].as_str().unwrap_or_default().to_owned();
        if now == status || ["completed", "failed", "cancelled"].contains(&now.as_str()) {
            return got;
        }
        assert!(started.elapsed() < support::PROCESS_LIMIT, "task {task} never got to {status}: {got}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Tasks of the MCP Tasks extension over `/mcp` behind two replicas sharing PostgreSQL: a
/// gated call made a task on one is read and answered (its approval) on the other, which
/// wakes the first, where it runs once; a task cancelled on the other replica stops on the
/// one running it (told by `NOTIFY`), before the tool would have finished.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_task_runs_on_one_replica_and_is_answered_and_cancelled_on_the_other() {
    let pg = Postgres::start();
    let (ws, one, two, _llm) = gated_replicas(&pg, "tasks").await;

    let params = json!({"name": "probe__memory_write", "arguments": append()});
    let created = rpc(one.base(), 1, "tools/call", params, tasking()).await;
    assert_eq!(created["result"]["resultType"], "task", "{created} {}", one.stderr());
    let task = created["result"]["taskId"].as_str().unwrap().to_owned();
    let asked = until(two.base(), &task, "input_required").await;
    assert_eq!(asked["result"]["inputRequests"]["approval"]["method"], "elicitation/create", "{asked}");
    // The task's approval is a broker entry like any other: listed on the other replica, the
    // client's to answer.
    let api = Api { base: two.base().to_owned(), token: support::api::TOKEN };
    let listed = api.get("/api/approvals").await.1;
    let entry = &listed["approvals"][0];
    assert_eq!(entry["tool_name"], "probe__memory_write", "{listed}");
    assert_eq!((entry["adapter"].as_str(), entry["decidable"].as_bool()), (Some("mcp"), Some(false)), "{listed}");
    let id = entry["approval_id"].as_str().unwrap().to_owned();
    let answer = json!({"taskId": task, "inputResponses": approve(true)});
    let ack = rpc(two.base(), 2, "tasks/update", answer, tasking()).await;
    assert_eq!(ack["result"], json!({"resultType": "complete"}), "{ack}");
    let done = until(two.base(), &task, "completed").await;
    assert_eq!(done["result"]["result"]["isError"], false, "{done} {}", one.stderr());
    assert_eq!(runs(&ws), "x", "ran once, on the replica that took the call");
    let (_, decided) = api.get(&format!("/api/approvals/{id}")).await;
    assert_eq!((decided["outcome"].as_str(), decided["decided_by"].as_str()), (Some("approved"), Some("mcp-client")));

    let slow = json!({"name": "probe__task", "arguments": {"ms": 4000, "mark": "late"}});
    let created = rpc(one.base(), 3, "tools/call", slow, tasking()).await;
    let task = created["result"]["taskId"].as_str().unwrap().to_owned();
    let ack = rpc(two.base(), 4, "tasks/cancel", json!({"taskId": task}), tasking()).await;
    assert_eq!(ack["result"], json!({"resultType": "complete"}), "{ack}");
    assert_eq!(until(one.base(), &task, "cancelled").await["result"]["status"], "cancelled");
    tokio::time::sleep(Duration::from_millis(4500)).await;
    let tasks = std::fs::read_to_string(ws.path().join("memory/tasks.txt")).unwrap_or_default();
    assert_eq!(tasks, "", "the call stopped on the replica running it");
    let unknown = rpc(two.base(), 5, "tasks/get", json!({"taskId": "nobody-made-this"}), tasking()).await;
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
}

/// Two agents, each with its Telegram bot, on one database: a press on b's bot carrying the
/// approval id a's bot asked is refused (answered "no longer waiting", as an unknown id) and
/// changes nothing; the press on a's own prompt decides it and the call runs once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_press_on_another_bot_carrying_an_approval_id_is_refused_and_changes_nothing() {
    const TOKEN_A: &str = "4848000:ABCdefGHIjklMNOpqrSTUvwxyz_0123456";
    const TOKEN_B: &str = "4949000:ABCdefGHIjklMNOpqrSTUvwxyz_0123456";
    const CHAT: i64 = 4848;
    let pg = Postgres::start();
    let llm = LlmServer::start(vec![
        Answer::default().call("w1", "probe__memory_write", append()).into(),
        Answer::text(&["Written."]).into(),
    ])
    .await;
    let (bot_a, bot_b) = (TelegramServer::start(TOKEN_A).await, TelegramServer::start(TOKEN_B).await);
    let bot = |token: &str, server: &TelegramServer| {
        format!(
            "    adapter:\n      type: telegram\n      telegram: {{bot_token: '{token}', allowed_chat_ids: [{CHAT}], base_url: '{}'}}\n",
            server.base_url()
        )
    };
    let agents = format!(
        "human:\n  overrides: {{probe__memory_write: approve}}\n\
         llm:\n  provider: anthropic\n  model: m\n  max_tokens: 100\n  anthropic: {{api_key: k, base_url: '{}'}}\n\
         agents:\n  a:\n{}  b:\n{}",
        llm.url(),
        bot(TOKEN_A, &bot_a),
        bot(TOKEN_B, &bot_b)
    );
    let ws = workspace(&pg, "twobots", &agents);
    let run = Running::start(ws.path(), &[], &[]);
    let wait = Duration::from_secs(60);
    for server in [&bot_a, &bot_b] {
        server.wait_for_call("getUpdates", |_| true, wait).await;
    }

    bot_a.send_text(CHAT, 7, "write it");
    let prompt = bot_a.wait_for_message(CHAT, |m| m.text.contains("probe__memory_write"), wait).await;
    let approve = prompt.buttons().into_iter().find(|d| d.starts_with("a:")).unwrap();
    let (_, query) = bot_b.click(CHAT, 7, prompt.message_id, &approve);
    let started = Instant::now();
    let refusal = loop {
        if let Some((_, answer)) = bot_b.answered_callbacks().into_iter().find(|(id, _)| *id == query) {
            break answer;
        }
        assert!(started.elapsed() < wait, "b's bot never answered the press: {}", run.stderr());
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(refusal["text"].as_str().unwrap_or_default().contains("no longer waiting"), "{refusal}");
    assert_eq!(runs(&ws), "", "nothing ran on b's press");
    let unchanged = bot_a.messages(CHAT).into_iter().find(|m| m.message_id == prompt.message_id).unwrap();
    assert_eq!((unchanged.edits, unchanged.reply_markup.is_some()), (0, true), "a's prompt still waits");

    bot_a.click(CHAT, 7, prompt.message_id, &approve);
    bot_a.wait_for_message(CHAT, |m| m.text.contains("Written."), wait).await;
    assert_eq!(runs(&ws), "x", "the call ran once, on a's press");
}

/// Slack and the API on one agent: the console (the agent's token), on another replica with
/// PostgreSQL or in the one process with SQLite, lists the Slack turn's approval and decides
/// it; the Slack prompt says it was approved in the console, and the turn goes on where it
/// runs.
async fn the_console_decides_a_slack_approval(shared: bool) {
    use skillhost_tests::slack_server::SlackServer;
    let pg = shared.then(Postgres::start);
    let echo = Answer::default().call("e1", "probe__echo", json!({"n": 1}));
    let llm = LlmServer::start(vec![echo.into(), Answer::text(&["Echoed in Slack."]).into()]).await;
    let slack = SlackServer::start().await;
    let extra = format!(
        "adapter:\n  types: [slack, api]\n  slack:\n    bot_token: '{}'\n    app_token: '{}'\n    base_url: '{}'\n\
         ui: {{port: ${{UI_PORT}}, auth_token: console-token}}\n\
         llm:\n  provider: anthropic\n  model: m\n  max_tokens: 100\n  anthropic: {{api_key: k, base_url: '{}'}}\n\
         human:\n  overrides: {{probe__echo: approve}}\n",
        SlackServer::BOT_TOKEN,
        SlackServer::APP_TOKEN,
        slack.api_url(),
        llm.url()
    );
    let ws = match &pg {
        Some(pg) => workspace(pg, "console", &extra),
        None => {
            let ws = Workspace::new();
            ws.add_skill("skills", "probe", guests::PROBE, "");
            let yaml =
                format!("skills:\n  paths: [skills]\n  builtins: []\nlearning: {{approval_auto_promote: 0}}\n{extra}");
            std::fs::write(ws.path().join("config.yaml"), yaml).unwrap();
            ws
        }
    };
    let wait = Duration::from_secs(30);
    let (port_a, port_b) = (free_port(), free_port());
    let a = Running::start(ws.path(), &[], &[("UI_PORT", &port_a.to_string())]);
    slack.wait_connected(1, wait).await;
    slack.mention("C1", "U1", "echo please");
    let asks = |m: &skillhost_tests::slack_server::SlackMessage| support::slack_button(m, "approve").is_some();
    let prompt = slack.wait_for_message("C1", asks, wait).await;
    let id = support::slack_button(&prompt, "approve").unwrap();
    // With PostgreSQL the console of another replica decides; with SQLite, the process's own.
    let b = shared.then(|| Running::start(ws.path(), &[], &[("UI_PORT", &port_b.to_string())]));
    let console = Api::new(if shared { port_b } else { port_a }, "console-token");
    console.ready(b.as_ref().unwrap_or(&a)).await;
    let (_, listed) = console.get("/api/approvals").await;
    let entry = &listed["approvals"][0];
    assert_eq!(entry["approval_id"].as_str(), Some(id.as_str()), "{listed}");
    assert_eq!((entry["adapter"].as_str(), entry["decidable"].as_bool()), (Some("slack"), Some(true)), "{listed}");
    let (status, decided) = console.post(&format!("/api/approvals/{id}/decision"), json!({"approved": true})).await;
    assert_eq!((status, decided["decided_by"].as_str()), (200, Some("console")), "{decided}");
    slack.wait_for_message("C1", |m| m.text.contains("Echoed in Slack."), wait).await;
    let approved_there = |m: &skillhost_tests::slack_server::SlackMessage| {
        m.ts == prompt.ts && m.text.contains("Approved in the console")
    };
    slack.wait_for_message("C1", approved_there, wait).await;
    assert_eq!(support::tool_results(&llm, 1)[0]["is_error"], json!(false));
    assert_eq!(llm.requests().len(), 2, "the turn went on once");
    // A press in Slack now changes nothing.
    slack.click("C1", "U1", &prompt.ts, "approve", &id);
    let started = Instant::now();
    while !slack.ephemerals().iter().any(|(_, user, text)| user == "U1" && text.contains("already decided")) {
        assert!(started.elapsed() < wait, "{:?}", slack.ephemerals());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!a.stderr().contains("panicked"), "{}", a.stderr());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_console_of_another_replica_decides_a_slack_approval() {
    the_console_decides_a_slack_approval(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_console_decides_a_slack_approval_on_sqlite() {
    the_console_decides_a_slack_approval(false).await;
}

/// A loopback HTTP server that takes requests and never answers them: how many arrived.
async fn silent_server() -> (u16, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = seen.clone();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = listener.accept().await {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            held.push(stream);
        }
    });
    (port, seen)
}

/// A Telegram bot (`token`, chat `chat` allowed) on the scripted `llm`, with `human` (YAML
/// under `human:`), served by two replicas on database `db`: `a` polls, `b` stands by.
/// `prepare` changes the workspace before they start.
async fn telegram_pair(
    pg: &Postgres,
    db: &str,
    (token, chat): (&str, i64),
    llm: &LlmServer,
    human: &str,
    prepare: impl FnOnce(&Workspace),
) -> (Workspace, TelegramServer, Running, Running) {
    let telegram = TelegramServer::start(token).await;
    let extra = format!(
        "adapter:\n  type: telegram\n  telegram:\n    bot_token: '{token}'\n    allowed_chat_ids: [{chat}]\n    base_url: '{}'\n\
         llm:\n  provider: anthropic\n  model: m\n  max_tokens: 100\n  anthropic: {{api_key: k, base_url: '{}'}}\n\
         human:\n  {human}\n",
        telegram.base_url(),
        llm.url()
    );
    let ws = workspace(pg, db, &extra);
    prepare(&ws);
    let a = Running::start(ws.path(), &[], &[]);
    a.wait_for_log("polling for updates").await;
    let b = Running::start(ws.path(), &[], &[]);
    b.wait_for_log("another replica polls this bot; standing by").await;
    (ws, telegram, a, b)
}

/// A Telegram turn whose approved call was running when its replica died (kill -9): the
/// other replica takes the turn over and tells the model the call was interrupted; the call
/// is not run again.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_call_cut_off_by_its_replica_dying_is_reported_interrupted_not_run_again() {
    const TOKEN: &str = "4444000:ABCdefGHIjklMNOpqrSTUvwxyz_0123456";
    const CHAT: i64 = 4444;
    let pg = Postgres::start();
    let (port, seen) = silent_server().await;
    let url = format!("http://127.0.0.1:{port}/slow");
    let llm = LlmServer::start(vec![
        Answer::default().call("h1", "probe__http_get", json!({"url": url})).into(),
        Answer::text(&["It was interrupted; I did not retry."]).into(),
    ])
    .await;
    let (_ws, telegram, mut a, b) = telegram_pair(
        &pg,
        "interrupted",
        (TOKEN, CHAT),
        &llm,
        "overrides: {probe__http_get: approve}",
        |ws: &Workspace| {
            let config = std::fs::read_to_string(ws.path().join("config.yaml")).unwrap();
            let granted = config.replace("probe: {memory: true}", "probe: {memory: true, http_hosts: ['127.0.0.1']}");
            std::fs::write(ws.path().join("config.yaml"), granted).unwrap();
            let manifest = "[capabilities]\nmemory = true\nhttp_hosts = [\"127.0.0.1\"]\n";
            std::fs::write(ws.path().join("skills/probe/skill.toml"), manifest).unwrap();
        },
    )
    .await;

    let wait = Duration::from_secs(60);
    telegram.send_text(CHAT, 7, "fetch it");
    let prompt = telegram.wait_for_message(CHAT, |m| m.text.contains("probe__http_get"), wait).await;
    let approve = prompt.buttons().into_iter().find(|d| d.starts_with("a:")).unwrap();
    telegram.click(CHAT, 7, prompt.message_id, &approve);
    let started = Instant::now();
    while seen.load(std::sync::atomic::Ordering::SeqCst) == 0 {
        assert!(started.elapsed() < wait, "the approved call never ran: {}", a.stderr());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    a.kill();
    telegram.wait_for_message(CHAT, |m| m.text.contains("It was interrupted"), wait).await;
    assert!(b.stderr().contains("resuming a turn its replica left waiting"), "{}", b.stderr());
    let results = support::tool_results(&llm, 1);
    assert_eq!(results.len(), 1, "{results:?}");
    assert_eq!(results[0]["is_error"], json!(true), "{}", results[0]);
    assert!(results[0].to_string().contains("interrupted"), "{}", results[0]);
    assert_eq!(seen.load(std::sync::atomic::Ordering::SeqCst), 1, "the call was not run again");
    assert_eq!(llm.requests().len(), 2);
}

/// Forms on two replicas: a question with a schema asked on one is listed with its schema on
/// the other, which refuses an answer that does not fit (422, the question still open) and
/// takes one that fits; the turn on the first replica gets the answer as JSON.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_form_asked_on_one_replica_is_answered_on_the_other_only_with_what_fits() {
    let pg = Postgres::start();
    let schema = json!({"type": "object", "properties": {"replicas": {"type": "integer", "minimum": 1}}, "required": ["replicas"]});
    let llm = LlmServer::start(vec![
        Answer::default().call("q1", "human__ask", json!({"question": "How many replicas?", "schema": schema})).into(),
        Answer::text(&["Scaled."]).into(),
    ])
    .await;
    let extra = format!(
        "adapter: {{type: api}}\nui: {{port: ${{PORT}}, auth_token: t}}\n\
         llm:\n  provider: anthropic\n  model: m\n  max_tokens: 100\n  anthropic: {{api_key: k, base_url: '{}'}}\n",
        llm.url()
    );
    let ws = workspace(&pg, "forms", &extra);
    let (p1, p2) = (free_port(), free_port());
    let one = Running::start(ws.path(), &[], &[("PORT", &p1.to_string())]);
    let two = Running::start(ws.path(), &[], &[("PORT", &p2.to_string())]);
    let (api1, api2) = (Api::new(p1, "t"), Api::new(p2, "t"));
    api1.ready(&one).await;
    api2.ready(&two).await;

    let mut sse = api1.stream("scale it", "ops").await;
    let asked = sse.until("question_requested").await;
    let question = asked.last().unwrap().data.clone();
    assert_eq!(question["schema"], schema);
    let id = question["question_id"].as_str().unwrap().to_owned();
    let (_, listed) = api2.get("/api/questions").await;
    let listed = listed["questions"].as_array().unwrap().iter().find(|q| q["question_id"] == id.as_str()).cloned();
    assert_eq!(listed.expect("listed on the other replica")["schema"], schema);
    let path = format!("/api/questions/{id}/answer");
    let (status, refused) = api2.post(&path, json!({"answer_json": {"replicas": 0}})).await;
    assert_eq!(status, 422, "{refused}");
    assert!(refused["error"].as_str().unwrap().contains("/replicas"), "{refused}");
    assert_eq!(api2.get(&format!("/api/questions/{id}")).await.1["outcome"], "pending");
    let (status, answered) = api2.post(&path, json!({"answer_json": {"replicas": 3}})).await;
    assert_eq!((status, answered["answer_json"].clone()), (200, json!({"replicas": 3})), "{answered}");
    let rest = sse.rest().await;
    assert_eq!(rest.last().map(|e| e.kind.as_str()), Some("run_completed"), "{rest:#?}");
    let results = support::tool_results(&llm, 1);
    assert_eq!(
        results[0]["content"].as_str().map(serde_json::from_str::<Value>).and_then(Result::ok),
        Some(json!({"answer": {"replicas": 3}})),
        "{results:?}"
    );
    drop((one, two));
}

/// An API run waiting for a person is listed, with its approval, on the other replica's
/// `/api/runs`; when its replica dies (kill -9), `/api/runs/{id}` on the other one says it
/// was cancelled.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_waiting_api_run_is_seen_on_the_other_replica_and_reads_cancelled_when_its_replica_dies() {
    let pg = Postgres::start();
    let llm = LlmServer::start(vec![Answer::default().call("w1", "probe__memory_write", append()).into()]).await;
    let extra = format!(
        "adapter: {{type: api}}\nui: {{port: ${{PORT}}, auth_token: t}}\nhuman:\n  overrides: {{probe__memory_write: approve}}\n\
         llm:\n  provider: anthropic\n  model: m\n  max_tokens: 100\n  anthropic: {{api_key: k, base_url: '{}'}}\n",
        llm.url()
    );
    let ws = workspace(&pg, "runs", &extra);
    let (p1, p2) = (free_port(), free_port());
    let mut one = Running::start(ws.path(), &[], &[("PORT", &p1.to_string())]);
    let two = Running::start(ws.path(), &[], &[("PORT", &p2.to_string())]);
    let (api1, api2) = (Api::new(p1, "t"), Api::new(p2, "t"));
    api1.ready(&one).await;
    api2.ready(&two).await;

    let mut sse = api1.stream("write it", "ops").await;
    let asked = sse.until("approval_requested").await;
    let approval_id = asked.last().unwrap().data["approval_id"].as_str().unwrap().to_owned();
    let run_id = asked.iter().find(|e| e.kind == "run_started").unwrap().data["run_id"].as_str().unwrap().to_owned();
    let (status, listed) = api2.get("/api/runs").await;
    let elsewhere = listed["runs"].as_array().unwrap().iter().find(|r| r["run_id"] == run_id.as_str()).cloned();
    let elsewhere = elsewhere.unwrap_or_else(|| panic!("{status} {listed}"));
    assert_eq!((elsewhere["state"].clone(), elsewhere["replica"].clone()), (json!("waiting"), json!("another")));
    assert_eq!(elsewhere["pending_approvals"], 1);
    let (status, run) = api2.get(&format!("/api/runs/{run_id}")).await;
    assert_eq!((status, run["approvals"][0]["approval_id"].clone()), (200, json!(approval_id)), "{run}");
    assert_eq!(api2.get("/api/runs/no-such-run").await.0, 404);

    one.kill();
    let started = Instant::now();
    loop {
        let (_, run) = api2.get(&format!("/api/runs/{run_id}")).await;
        if run["state"] == "cancelled" {
            break;
        }
        assert_eq!(run["state"], "waiting", "{run}");
        assert!(started.elapsed() < Duration::from_secs(60), "never read cancelled: {run}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert_eq!(runs(&ws), "", "the call never ran");
    drop(two);
}

/// A question asked beside another call in its round survives its replica's kill -9: the
/// call that ran before is kept in the written-down turn and not run again when the other
/// replica resumes the turn with the answer typed there.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_question_beside_another_call_is_resumed_elsewhere_without_running_the_call_twice() {
    const TOKEN: &str = "4646000:ABCdefGHIjklMNOpqrSTUvwxyz_0123456";
    const CHAT: i64 = 4646;
    let pg = Postgres::start();
    let ask = json!({"question": "Which colour?", "choices": ["red", "blue"]});
    let llm = LlmServer::start(vec![
        Answer::default().call("w1", "probe__memory_write", append()).call("q1", "human__ask", ask).into(),
        Answer::text(&["Blue, and written once."]).into(),
    ])
    .await;
    let (ws, telegram, mut a, b) =
        telegram_pair(&pg, "beside", (TOKEN, CHAT), &llm, "overrides: {probe__memory_write: null}", |_: &Workspace| {})
            .await;

    let wait = Duration::from_secs(60);
    telegram.send_text(CHAT, 7, "write and ask");
    telegram.wait_for_message(CHAT, |m| m.text.contains("Which colour?"), wait).await;
    // The call beside the question ran, and its result was written down with the turn.
    let started = Instant::now();
    loop {
        let kept =
            pg.psql("beside", "SELECT count(*) FROM skillhost_waiting_turns WHERE checkpoint LIKE '%\"results\"%'");
        if runs(&ws) == "x" && kept.trim() == "1" {
            break;
        }
        if started.elapsed() >= wait {
            let rows = pg.psql("beside", "SELECT run_id, leased_by, checkpoint FROM skillhost_waiting_turns");
            panic!("the call's result was never written down: {:?} {kept} {rows}", runs(&ws));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    a.kill();
    b.wait_for_log("polling for updates").await;
    telegram.send_text(CHAT, 7, "blue");
    telegram.wait_for_message(CHAT, |m| m.text.contains("Blue, and written once."), wait).await;
    assert!(b.stderr().contains("resuming a turn its replica left waiting"), "{}", b.stderr());
    assert_eq!(runs(&ws), "x", "the call beside the question ran once");
    assert_eq!(llm.requests().len(), 2);
    let results = support::tool_results(&llm, 1);
    let ids: Vec<&str> = results.iter().map(|r| r["tool_use_id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["w1", "q1"], "{results:?}");
    assert_ne!(results[0]["is_error"], json!(true), "the kept result, not an interruption: {}", results[0]);
    assert!(!results[0].to_string().contains("interrupted"), "{}", results[0]);
    assert!(results[1]["content"].to_string().contains("blue"), "{}", results[1]);
}

/// A sub-agent's approval in a Telegram turn, its replica killed (kill -9) while it waits:
/// the other replica takes the press, resumes the outer turn, and the sub-agent goes on from
/// where it stopped (its model is not asked again for the call it made): the approved call
/// runs once, and the outer turn answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_nested_turns_approval_survives_its_replica_and_is_decided_on_the_other() {
    const TOKEN: &str = "4747000:ABCdefGHIjklMNOpqrSTUvwxyz_0123456";
    const CHAT: i64 = 4747;
    let pg = Postgres::start();
    let llm = LlmServer::start(vec![
        Answer::default().call("r1", "probe__run", json!({"task": "Write it down."})).into(),
        Answer::default().call("w1", "probe__memory_write", append()).into(),
        Answer::text(&["written"]).into(),
        Answer::text(&["Done: written once."]).into(),
    ])
    .await;
    let (ws, telegram, mut a, b) = telegram_pair(
        &pg,
        "nested",
        (TOKEN, CHAT),
        &llm,
        "overrides: {probe__memory_write: approve}",
        |ws: &Workspace| {
            // `probe` as a sub-agent skill: `probe__run` runs its own turn with its tools.
            let probe = ws.path().join("skills/probe");
            std::fs::remove_file(probe.join("prompt.md")).unwrap();
            std::fs::write(probe.join("SKILL.md"), "---\nname: probe\ndescription: Writes things.\n---\nYou write.\n")
                .unwrap();
            let config = std::fs::read_to_string(ws.path().join("config.yaml")).unwrap();
            let config =
                config.replace("  builtins: []\n", "  builtins: []\n  loading_overrides: {probe: sub_agent}\n");
            std::fs::write(ws.path().join("config.yaml"), config).unwrap();
        },
    )
    .await;

    let wait = Duration::from_secs(60);
    telegram.send_text(CHAT, 7, "write it");
    let prompt = telegram.wait_for_message(CHAT, |m| m.text.contains("probe__memory_write"), wait).await;
    let written =
        pg.psql("nested", "SELECT count(*) FROM skillhost_waiting_turns WHERE checkpoint LIKE '%\"nested\"%'");
    assert_eq!(written.trim(), "1", "the outer turn is written down with the nested one inside");
    a.kill();
    b.wait_for_log("polling for updates").await;
    let approve = prompt.buttons().into_iter().find(|d| d.starts_with("a:")).unwrap();
    telegram.click(CHAT, 7, prompt.message_id, &approve);
    telegram.wait_for_message(CHAT, |m| m.text.contains("Done: written once."), wait).await;
    assert!(b.stderr().contains("resuming a turn its replica left waiting"), "{}", b.stderr());
    assert_eq!(runs(&ws), "x", "the approved call ran once");
    let requests = llm.requests();
    assert_eq!(
        requests.len(),
        4,
        "nothing asked of the model twice: {:#?}",
        requests.iter().map(|r| &r.body).collect::<Vec<_>>()
    );
    assert_eq!(requests[2].body["system"], json!("You write."), "the sub-agent went on: {}", requests[2].body);
    let results = support::tool_results(&llm, 3);
    assert_eq!(results[0]["content"], json!("written"), "{results:?}");
}

/// An MCP server's elicitation (the Python SDK's `ask` server, over stdio, asked during an
/// API run on one replica) is a broker entry like any question: listed and answered on the
/// other replica, delivered to the connection that asked; when that replica dies, what it
/// still asks reads `cancelled` on the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_mcp_servers_elicitation_is_answered_on_another_replica_and_cancelled_with_its_own() {
    let pg = Postgres::start();
    let llm = LlmServer::start(vec![Answer::default().call("a", "ask__ask_name", json!({})).into()]).await;
    let extra = format!(
        "adapter: {{type: api}}\nui: {{port: ${{PORT}}, auth_token: t}}\n{}\
         llm:\n  provider: anthropic\n  model: m\n  max_tokens: 100\n  anthropic: {{api_key: k, base_url: '{}'}}\n",
        support::ask_server_yaml(),
        llm.url()
    );
    let ws = workspace(&pg, "elicit", &extra);
    let config = std::fs::read_to_string(ws.path().join("config.yaml")).unwrap();
    let allowed = config.replacen("  builtins: []\n", "  builtins: []\n  allowed: [probe, ask]\n", 1);
    std::fs::write(ws.path().join("config.yaml"), allowed).unwrap();
    let (p1, p2) = (free_port(), free_port());
    let mut one = Running::start(ws.path(), &[], &[("PORT", &p1.to_string())]);
    let two = Running::start(ws.path(), &[], &[("PORT", &p2.to_string())]);
    let (api1, api2) = (Api::new(p1, "t"), Api::new(p2, "t"));
    api1.ready(&one).await;
    api2.ready(&two).await;

    let mut sse = api1.stream("who?", "c").await;
    let first = sse.until("question_requested").await.pop().unwrap().data;
    assert!(first["prompt"].as_str().unwrap().contains("Who is there?"), "{first}");
    let id = first["question_id"].as_str().unwrap().to_owned();
    let (_, listed) = api2.get("/api/questions").await;
    assert!(listed["questions"].as_array().unwrap().iter().any(|q| q["question_id"] == id.as_str()), "{listed}");
    let (status, answered) = api2.post(&format!("/api/questions/{id}/answer"), json!({"answer": "-"})).await;
    assert_eq!(status, 200, "{answered}");
    // The answer reached the form on the first replica: it asks the next field.
    let second = sse.until("question_requested").await.pop().unwrap().data;
    let second = second["question_id"].as_str().unwrap().to_owned();
    assert_ne!(second, id);

    one.kill();
    let started = Instant::now();
    loop {
        let (status, seen) = api2.get(&format!("/api/questions/{second}")).await;
        if seen["outcome"] == "cancelled" {
            break;
        }
        assert_eq!((status, seen["outcome"].clone()), (200, json!("pending")), "{seen}");
        assert!(started.elapsed() < Duration::from_secs(60), "never cancelled: {seen}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let (status, _) = api2.post(&format!("/api/questions/{second}/answer"), json!({"answer": "Ada"})).await;
    assert_eq!(status, 410, "nothing to answer any more");
    drop(two);
}
