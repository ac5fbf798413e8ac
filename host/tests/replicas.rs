//! `state.backend: postgres` through the real binary, on a throwaway PostgreSQL 15 cluster:
//! processes and API replicas share what the state store holds, `/readyz` follows the
//! database, and a database that goes away and comes back is served again without a restart.

mod support;

use serde_json::{Value, json};
use skillhost_tests::llm_server::{Answer, LlmServer};
use skillhost_tests::postgres::Postgres;
use skillhost_tests::{Workspace, guests};
use std::time::{Duration, Instant};
use support::api::ApiProcess;

/// A workspace with `probe`, its state in database `db` of `pg`, and `extra` config.
fn workspace(pg: &Postgres, db: &str, extra: &str) -> Workspace {
    pg.psql("postgres", &format!("CREATE DATABASE {db}"));
    let ws = Workspace::new();
    ws.add_skill("skills", "probe", guests::PROBE, "");
    let yaml = format!(
        "skills:\n  paths: [skills]\n  builtins: []\n\
         state:\n  backend: postgres\n  postgres: {{url: '{}?sslmode=disable', connect_timeout_seconds: 2}}\n{extra}",
        pg.url("postgres", db)
    );
    std::fs::write(ws.path().join("config.yaml"), yaml).unwrap();
    ws
}

#[test]
fn a_skills_state_is_shared_by_processes_on_one_database_and_nothing_is_written_to_disk() {
    let pg = Postgres::start();
    let ws = workspace(&pg, "calls", "");
    let set = support::skillhost(&ws, &["call", "probe__state_set", r#"{"key": "k", "value": "from one"}"#], "");
    assert_eq!(set.code, 0, "{}", set.stderr);
    let get = support::skillhost(&ws, &["call", "probe__state_get", r#"{"key": "k"}"#], "");
    assert_eq!(get.code, 0, "{}", get.stderr);
    assert!(get.stdout.contains("from one"), "another process reads it: {}", get.stdout);
    let stored = pg.psql("calls", "SELECT convert_from(value, 'UTF8') FROM skillhost_state WHERE ns = 'skill-probe'");
    assert_eq!(stored.trim(), "from one");
    assert!(!ws.path().join(".skillhost/state").exists() && !ws.path().join("state").exists(), "no SQLite file");
}

#[test]
fn a_bad_postgres_config_is_refused_with_its_key() {
    let ws = Workspace::new();
    ws.add_skill("skills", "probe", guests::PROBE, "");
    let write = |state: &str| {
        let yaml = format!("skills:\n  paths: [skills]\n  builtins: []\nstate:\n{state}");
        std::fs::write(ws.path().join("config.yaml"), yaml).unwrap();
    };
    write("  postgres: {url: 'postgres://h/d'}\n");
    let out = support::skillhost(&ws, &["skill", "validate"], "");
    assert_ne!(out.code, 0);
    assert!(out.stderr.contains("state.postgres is set but state.backend is filesystem"), "{}", out.stderr);
    write("  backend: postgres\n  postgres: {url: 'mysql://h/d'}\n");
    let out = support::skillhost(&ws, &["call", "probe__echo", "{}"], "");
    assert_ne!(out.code, 0);
    assert!(out.stderr.contains("state.postgres.url: the scheme is `mysql`"), "{}", out.stderr);
    write("  backend: postgres\n  postgres: {url: 'postgres://h/d?sslmode=sometimes'}\n");
    let out = support::skillhost(&ws, &["call", "probe__echo", "{}"], "");
    assert!(out.stderr.contains("sslmode `sometimes`"), "{}", out.stderr);
    write("  backend: postgres\n  postgres: {pool_size: 0}\n");
    let out = support::skillhost(&ws, &["skill", "validate"], "");
    assert!(out.stderr.contains("state.postgres.pool_size must be at least 1"), "{}", out.stderr);
}

async fn ready(api: &ApiProcess) -> (u16, Value) {
    let response = reqwest::get(format!("{}/readyz", api.base())).await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

async fn run(api: &ApiProcess, message: &str, channel: &str) -> (u16, Value) {
    let response = api.trigger("wait=true", message, channel).send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_share_a_conversation_and_serve_again_when_the_database_returns() {
    let pg = Postgres::start();
    let replies =
        vec![Answer::text(&["One."]).into(), Answer::text(&["Two."]).into(), Answer::text(&["Three."]).into()];
    let llm = LlmServer::start(replies).await;
    let llm_yaml = format!(
        "llm:\n  provider: anthropic\n  model: m\n  max_tokens: 100\n  anthropic: {{api_key: k, base_url: '{}'}}\n",
        llm.url()
    );
    let ws = workspace(&pg, "replicas", &llm_yaml);
    let (a, b) = (ApiProcess::start(&ws).await, ApiProcess::start(&ws).await);

    // A conversation started on A goes on on B: the history is in the database.
    assert_eq!(run(&a, "first question", "shared").await.0, 200, "{}", a.stderr());
    let (status, second) = run(&b, "second question", "shared").await;
    assert_eq!(status, 200, "{second} {}", b.stderr());
    let sent = llm.body(1).to_string();
    assert!(sent.contains("first question") && sent.contains("One."), "B sent A's exchange: {sent}");
    assert_eq!(ready(&a).await, (200, json!({"status": "ready"})));

    // The database goes away: the load balancer is told, and a run fails saying why.
    pg.stop();
    assert_eq!(ready(&a).await, (503, json!({"status": "database_unavailable"})));
    let (status, failed) = run(&a, "third question", "other").await;
    assert_eq!(status, 503, "{failed}");
    assert!(failed.to_string().contains("state database"), "{failed}");
    assert_eq!(llm.requests().len(), 2, "no model request without the state");

    // It comes back: both replicas serve again, without a restart.
    pg.resume();
    let started = Instant::now();
    while ready(&a).await.0 != 200 || ready(&b).await.0 != 200 {
        assert!(started.elapsed() < support::PROCESS_LIMIT, "never ready again: {}", a.stderr());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (status, third) = run(&b, "third question", "other").await;
    assert_eq!(status, 200, "{third} {}", b.stderr());
    assert!(third.to_string().contains("Three."), "{third}");
    assert!(!a.stderr().contains("panicked") && !b.stderr().contains("panicked"));
}
