//! `state.backend: postgres` through the real binary, on a throwaway PostgreSQL 15 cluster:
//! processes and API replicas share what the state store holds, `/readyz` follows the
//! database, and a database that goes away and comes back is served again without a restart.

mod support;

use serde_json::{Value, json};
use skillhost::store::state::{Conversation, Namespace};
use skillhost_tests::llm_server::{Answer, LlmServer};
use skillhost_tests::postgres::{CutProxy, Postgres};
use skillhost_tests::{Workspace, guests};
use std::time::{Duration, Instant};
use support::api::ApiProcess;

/// A workspace with `probe`, its state in database `db` of `pg`, and `extra` config.
/// Waits (bounded) until `sql` on `db` answers `expected`. What a chat turn writes as it
/// ends (its checkpoint's row going) can lag what the person sees: the answer streams into
/// the conversation before the turn's last write.
async fn settles(pg: &Postgres, db: &str, sql: &str, expected: &str) {
    let started = Instant::now();
    loop {
        let got = pg.psql(db, sql);
        if got.trim() == expected {
            return;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "{sql}: {got}, not {expected}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

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

/// Config serving Telegram bot `token` (chat `chat`) through the scripted `telegram`, with
/// the scripted LLM at `llm`.
fn telegram_config(
    token: &str,
    chat: i64,
    telegram: &skillhost_tests::telegram_server::TelegramServer,
    llm: &str,
) -> String {
    format!(
        "adapter:\n  type: telegram\n  telegram:\n    bot_token: '{token}'\n    allowed_chat_ids: [{chat}]\n    base_url: '{}'\n\
         llm:\n  provider: anthropic\n  model: m\n  max_tokens: 100\n  anthropic: {{api_key: k, base_url: '{llm}'}}\n",
        telegram.base_url()
    )
}

/// Two replicas serving the Telegram bot of `ws`: A (started with `a_args`) polls it, B
/// stands by.
async fn poller_and_standby(ws: &Workspace, a_args: &[&str]) -> (support::run::Running, support::run::Running) {
    let a = support::run::Running::start(ws.path(), a_args, &[]);
    a.wait_for_log("polling for updates").await;
    let b = support::run::Running::start(ws.path(), &[], &[]);
    b.wait_for_log("another replica polls this bot; standing by").await;
    (a, b)
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
    // `call`'s conversation is its channel (`cli`, the default) of the top-level agent.
    let conversation = Conversation { agent: None, channel: Some("cli".into()) };
    let ns = Namespace::conversation("probe", &conversation, Duration::from_secs(1)).name;
    let stored =
        pg.psql("calls", &format!("SELECT convert_from(value, 'UTF8') FROM skillhost_state WHERE ns = '{ns}'"));
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
    write("  backend: postgres\n  filesystem: {path: state}\n");
    let out = support::skillhost(&ws, &["skill", "validate"], "");
    assert_ne!(out.code, 0);
    assert!(out.stderr.contains("state.filesystem is set but state.backend is postgres"), "{}", out.stderr);
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

async fn get(api: &ApiProcess, path: &str) -> (u16, Value) {
    let response = reqwest::Client::new()
        .get(format!("{}{path}", api.base()))
        .bearer_auth(support::api::TOKEN)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

async fn decide(api: &ApiProcess, id: &str, approved: bool) -> (u16, Value) {
    let response = api.decide(id, &json!({"approved": approved})).send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// Approvals and questions of a run on replica A, decided on replica B: the run on A goes on
/// (woken by the database's notification), both replicas show the outcome, of two
/// concurrent decisions on A and B exactly one wins, and when A dies (kill -9) its pending
/// approval reads `cancelled` on B and B takes the channel over.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn approvals_and_questions_are_decided_on_any_replica_and_outlive_nothing() {
    let pg = Postgres::start();
    let echo = |id: &str, n: u64| Answer::default().call(id, "probe__echo", json!({"n": n})).into();
    let ask =
        Answer::default().call("q1", "human__ask", json!({"question": "Which colour?", "choices": ["red", "blue"]}));
    let llm = LlmServer::start(Vec::new()).await;
    // Each scenario's replies are queued when it starts, once the ones before are used.
    let queued = std::cell::Cell::new(0);
    let script = |llm: &LlmServer, replies: Vec<skillhost_tests::llm_server::Reply>| {
        assert_eq!(llm.requests().len(), queued.get(), "the scenario before made the requests it was scripted for");
        queued.set(queued.get() + replies.len());
        replies.into_iter().for_each(|r| llm.push(r));
    };
    let extra = format!(
        "human:\n  overrides: {{probe__echo: approve}}\nlearning: {{approval_auto_promote: 0}}\nengine:\n  session: {{inflight_ttl_seconds: 5}}\n\
         llm:\n  provider: anthropic\n  model: m\n  max_tokens: 100\n  anthropic: {{api_key: k, base_url: '{}'}}\n",
        llm.url()
    );
    let ws = workspace(&pg, "decisions", &extra);
    let (a, b) = (ApiProcess::start(&ws).await, ApiProcess::start(&ws).await);

    // An approval asked on A, decided on B.
    script(&llm, vec![echo("e1", 1), Answer::text(&["Echoed."]).into()]);
    let mut sse = a.stream("echo it", "c1").await;
    let asked = sse.until("approval_requested").await.last().unwrap().data.clone();
    let id = asked["approval_id"].as_str().unwrap().to_owned();
    let sent = Instant::now();
    let (status, body) = decide(&b, &id, true).await;
    assert_eq!((status, body["outcome"].clone()), (200, json!("approved")), "{body}");
    let resolved = sse.until("approval_resolved").await.last().unwrap().data.clone();
    println!("decision on B -> approval_resolved on A's stream: {:?}", sent.elapsed());
    assert_eq!(resolved["outcome"], "approved");
    let rest = sse.rest().await;
    let done = rest.iter().find(|e| e.kind == "run_completed").unwrap_or_else(|| panic!("{rest:#?}"));
    assert_eq!(done.data["text"], "Echoed.", "{done:?}");
    for replica in [&a, &b] {
        let (status, seen) = get(replica, &format!("/api/approvals/{id}")).await;
        assert_eq!((status, seen["outcome"].clone()), (200, json!("approved")), "{seen}");
    }
    assert_eq!(decide(&a, &id, true).await.0, 200, "the same decision again");
    assert_eq!(decide(&a, &id, false).await.0, 409, "another decision");

    // A question asked on A, answered on B.
    script(&llm, vec![ask.into(), Answer::text(&["Blue it is."]).into()]);
    let mut sse = a.stream("ask me", "c2").await;
    let asked = sse.until("question_requested").await.last().unwrap().data.clone();
    let qid = asked["question_id"].as_str().unwrap().to_owned();
    let (status, seen) = get(&b, &format!("/api/questions/{qid}")).await;
    assert_eq!(
        (status, seen["prompt"].clone(), seen["outcome"].clone()),
        (200, json!("Which colour?"), json!("pending"))
    );
    b.answer(&qid, "blue").await;
    let resolved = sse.until("question_resolved").await.last().unwrap().data.clone();
    assert_eq!((resolved["outcome"].clone(), resolved["answer"].clone()), (json!("answered"), json!("blue")));
    let rest = sse.rest().await;
    assert!(rest.iter().any(|e| e.kind == "run_completed" && e.data["text"] == "Blue it is."), "{rest:#?}");
    let (_, seen) = get(&a, &format!("/api/questions/{qid}")).await;
    assert_eq!((seen["outcome"].clone(), seen["answer"].clone()), (json!("answered"), json!("blue")));

    // Two people decide at once, one on each replica: exactly one wins.
    script(&llm, vec![echo("e2", 2), Answer::text(&["Raced."]).into()]);
    let mut sse = a.stream("echo again", "c3").await;
    let asked = sse.until("approval_requested").await.last().unwrap().data.clone();
    let id = asked["approval_id"].as_str().unwrap().to_owned();
    let (on_a, on_b) = tokio::join!(decide(&a, &id, true), decide(&b, &id, false));
    let mut statuses = [on_a.0, on_b.0];
    statuses.sort();
    assert_eq!(statuses, [200, 409], "{on_a:?} {on_b:?}");
    let winner = if on_a.0 == 200 { "approved" } else { "denied" };
    let resolved = sse.until("approval_resolved").await.last().unwrap().data.clone();
    assert_eq!(resolved["outcome"], winner);
    sse.rest().await;

    // The connections listening for notifications are cut: the decision still arrives.
    script(&llm, vec![echo("e4", 4), Answer::text(&["Polled."]).into()]);
    let mut sse = a.stream("echo while deaf", "c5").await;
    let asked = sse.until("approval_requested").await.last().unwrap().data.clone();
    let id = asked["approval_id"].as_str().unwrap().to_owned();
    let cut =
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE query = 'LISTEN skillhost_decisions'";
    assert_eq!(pg.psql("decisions", cut).trim(), "2", "one listener per replica");
    assert_eq!(decide(&b, &id, true).await.0, 200);
    let resolved = sse.until("approval_resolved").await.last().unwrap().data.clone();
    assert_eq!(resolved["outcome"], "approved");
    assert!(sse.rest().await.iter().any(|e| e.kind == "run_completed" && e.data["text"] == "Polled."));

    // A dies while its run waits for a person: the approval stops being pending on B, and
    // B takes the channel.
    script(&llm, vec![echo("e3", 3), Answer::text(&["B took over."]).into()]);
    let mut sse = a.stream("echo once more", "c4").await;
    let asked = sse.until("approval_requested").await.last().unwrap().data.clone();
    let id = asked["approval_id"].as_str().unwrap().to_owned();
    assert_eq!(get(&b, &format!("/api/approvals/{id}")).await.1["outcome"], "pending");
    let killed = std::process::Command::new("kill").args(["-9", &a.pid().to_string()]).status().unwrap();
    assert!(killed.success());
    drop(sse);
    let started = Instant::now();
    loop {
        let (_, seen) = get(&b, &format!("/api/approvals/{id}")).await;
        if seen["outcome"] == "cancelled" {
            break;
        }
        assert_eq!(seen["outcome"], "pending", "{seen}");
        assert!(started.elapsed() < support::PROCESS_LIMIT, "still pending after A died");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    println!("A's approval read cancelled {:?} after A died", started.elapsed());
    assert_eq!(decide(&b, &id, true).await.0, 410, "nobody waits for it");
    let (status, took) = run(&b, "take over", "c4").await;
    assert_eq!(status, 200, "{took} {}", b.stderr());
    assert_eq!(took["text"], "B took over.");
}

/// Two replicas serving one Telegram bot: one polls (Telegram allows one `getUpdates` at a
/// time), the other stands by; when the poller dies (kill -9), the other takes over from the
/// offset it left and answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_replica_polls_a_telegram_bot_and_another_takes_over_when_it_dies() {
    const TOKEN: &str = "4242000:ABCdefGHIjklMNOpqrSTUvwxyz_0123456";
    const CHAT: i64 = 4242;
    let pg = Postgres::start();
    let llm =
        LlmServer::start(vec![Answer::text(&["First."]).into(), Answer::text(&["From the survivor."]).into()]).await;
    let telegram = skillhost_tests::telegram_server::TelegramServer::start(TOKEN).await;
    let extra = telegram_config(TOKEN, CHAT, &telegram, &llm.url());
    let ws = workspace(&pg, "telegram", &extra);
    let (mut a, b) = poller_and_standby(&ws, &[]).await;

    let wait = Duration::from_secs(30);
    telegram.send_text(CHAT, 7, "one");
    telegram.wait_for_message(CHAT, |m| m.text.contains("First."), wait).await;
    a.kill();
    b.wait_for_log("polling for updates").await;
    telegram.send_text(CHAT, 7, "two");
    telegram.wait_for_message(CHAT, |m| m.text.contains("From the survivor."), wait).await;
    assert_eq!(llm.requests().len(), 2, "each message handled once");
    let conflict = "Telegram answered 409";
    assert!(!a.stderr().contains(conflict) && !b.stderr().contains(conflict), "{}\n{}", a.stderr(), b.stderr());
}

/// A Telegram turn waiting on an approval outlives its replica: A asks, dies (kill -9);
/// the Approve click reaches B (the poller now), which resumes the turn from the checkpoint
/// A wrote: the call runs once, and the answer is posted in the chat. A's in-flight marker
/// (the TTL is the default 400 s) goes once A's heartbeat is old, so B waits no longer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chat_turn_waiting_for_approval_is_resumed_on_another_replica_when_its_own_dies() {
    chat_turn_outlives_its_replica(Stop::Kill).await;
}

/// The same with SIGTERM (a deploy) and a `confirm` call: A stops the turn once
/// `drain_seconds` pass, says in the chat that the request still waits, leaves the
/// checkpoint and its heartbeat goes with it; the challenge typed as a reply to A's prompt
/// reaches B, which finds the approval by its prompt and resumes the turn at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chat_turn_waiting_for_approval_is_left_to_another_replica_on_sigterm() {
    chat_turn_outlives_its_replica(Stop::Term).await;
}

/// The same when A is cut off from PostgreSQL (a proxy between them drops every connection)
/// right after the click it took was decided, as it goes to take the turn's lease: the lease
/// fails closed, so A runs nothing; B, seeing A's heartbeat gone, resumes the turn and the
/// call runs exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_cut_off_from_the_database_after_a_decision_runs_nothing() {
    chat_turn_outlives_its_replica(Stop::Cut).await;
}

enum Stop {
    Kill,
    Term,
    Cut,
}

async fn chat_turn_outlives_its_replica(stop: Stop) {
    let level = match stop {
        Stop::Kill | Stop::Cut => "approve",
        Stop::Term => "confirm",
    };
    const TOKEN: &str = "4343000:ABCdefGHIjklMNOpqrSTUvwxyz_0123456";
    const CHAT: i64 = 4343;
    let pg = Postgres::start();
    let append = json!({"path": "ran.txt", "content": "x", "mode": "append"});
    let llm = LlmServer::start(vec![
        Answer::default().call("w1", "probe__memory_write", append).into(),
        Answer::text(&["Resumed and done."]).into(),
    ])
    .await;
    let telegram = skillhost_tests::telegram_server::TelegramServer::start(TOKEN).await;
    let extra = telegram_config(TOKEN, CHAT, &telegram, &llm.url())
        + &format!(
            "human:\n  overrides: {{probe__memory_write: {level}}}\n\
             learning:\n  approval_auto_promote: 0\n  memory:\n    filesystem: {{path: memory}}\n\
             engine:\n  session: {{drain_seconds: 1}}\n"
        );
    let ws = workspace(&pg, "resume", &extra);
    ws.add_skill("skills", "probe", guests::PROBE, "[capabilities]\nmemory = true\n");
    let config = std::fs::read_to_string(ws.path().join("config.yaml")).unwrap();
    let config = config.replace("builtins: []\n", "builtins: []\n  grants:\n    probe: {memory: true}\n");
    std::fs::write(ws.path().join("config.yaml"), &config).unwrap();
    // Cut off, A reaches the database through a proxy that drops it as A sends the lease's
    // statement (which never arrives).
    let proxy = match stop {
        Stop::Cut => Some(CutProxy::start(pg.port(), b"SELECT leased_by IS NULL OR leased_by").await),
        Stop::Kill | Stop::Term => None,
    };
    if let Some(proxy) = &proxy {
        let direct = format!("127.0.0.1:{}/", pg.port());
        let proxied = config.replace(&direct, &format!("127.0.0.1:{}/", proxy.port()));
        assert_ne!(proxied, config);
        std::fs::write(ws.path().join("config-a.yaml"), proxied).unwrap();
    }
    let a_args: &[&str] = if proxy.is_some() { &["--config", "config-a.yaml"] } else { &[] };
    let (mut a, b) = poller_and_standby(&ws, a_args).await;

    let wait = Duration::from_secs(60);
    telegram.send_text(CHAT, 7, "append please");
    let prompt = telegram.wait_for_message(CHAT, |m| m.text.contains("probe__memory_write"), wait).await;
    let approve = prompt.buttons().into_iter().find(|d| d.starts_with("a:"));
    match stop {
        Stop::Kill => a.kill(),
        Stop::Term => {
            assert_eq!(a.terminate(), Some(0), "{}", a.stderr());
            telegram.wait_for_message(CHAT, |m| m.text.contains("another replica finishes this"), wait).await;
            let replicas = pg.psql("resume", "SELECT count(*) FROM skillhost_replicas");
            assert_eq!(replicas.trim(), "1", "A took its heartbeat away: only B's is left");
            let left = pg.psql("resume", "SELECT outcome IS NULL FROM skillhost_interactions");
            assert_eq!(left.trim(), "t", "the approval still waits");
        }
        // A polls the click and decides; then, as it takes the turn's lease, it is cut off.
        Stop::Cut => {
            telegram.click(CHAT, 7, prompt.message_id, approve.as_deref().unwrap());
            let started = Instant::now();
            while !proxy.as_ref().unwrap().is_cut() {
                assert!(started.elapsed() < wait, "A never took the lease:\n{}", a.stderr());
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            a.wait_for_log("cannot confirm the turn's lease, so it does not run here").await;
            let outcome = pg.psql("resume", "SELECT outcome FROM skillhost_interactions WHERE kind = 'approval'");
            assert_eq!(outcome.trim(), "approved", "the decision was taken before the cut");
        }
    }
    b.wait_for_log("polling for updates").await;

    match stop {
        Stop::Kill => {
            let (_, query) = telegram.click(CHAT, 7, prompt.message_id, &approve.unwrap());
            telegram.wait_for_message(CHAT, |m| m.text.contains("Resumed and done."), wait).await;
            let (_, answered) = telegram.answered_callbacks().into_iter().find(|(id, _)| *id == query).unwrap();
            assert_eq!(answered["text"], "Approved", "{answered}");
        }
        // A `confirm` call: the challenge typed as a reply to the prompt A posted, which B
        // finds in the database.
        Stop::Term => {
            telegram.reply_text(CHAT, 7, "CONFIRM", prompt.message_id);
            telegram.wait_for_message(CHAT, |m| m.text.contains("Resumed and done."), wait).await;
            let confirmed = |m: &skillhost_tests::telegram_server::BotMessage| {
                m.message_id == prompt.message_id && m.text.contains("Confirmed by")
            };
            telegram.wait_for_message(CHAT, confirmed, wait).await;
        }
        // B resumes the turn once A's heartbeat is old.
        Stop::Cut => {
            telegram.wait_for_message(CHAT, |m| m.text.contains("Resumed and done."), wait).await;
        }
    }
    assert!(b.stderr().contains("resuming a turn its replica left waiting"), "{}", b.stderr());
    let ran = std::fs::read_to_string(ws.path().join("memory/ran.txt")).unwrap();
    assert_eq!(ran, "x", "the approved call ran exactly once");
    let requests = llm.requests();
    assert_eq!(requests.len(), 2, "one request before the approval, one after; none repeated");
    let results = support::tool_results(&llm, 1);
    assert_eq!(results.len(), 1);
    assert_eq!(results[0]["tool_use_id"], "w1");
    assert_eq!(results[0]["is_error"], json!(false), "{}", results[0]);

    // Nothing waits any more: the checkpoint is gone, and the conversation (the call, its
    // result and the answer) is B's history now.
    settles(&pg, "resume", "SELECT count(*) FROM skillhost_waiting_turns", "0").await;
    let outcome = pg.psql("resume", "SELECT outcome FROM skillhost_interactions WHERE kind = 'approval'");
    assert_eq!(outcome.trim(), "approved");
    // The record says the approval was used up, once, by the replica that resumed the turn.
    let id = pg.psql("resume", "SELECT id FROM skillhost_interactions WHERE kind = 'approval'");
    let consumed = pg.psql(
        "resume",
        "SELECT convert_from(value, 'UTF8') FROM skillhost_state WHERE ns = 'skillhost.audit' \
         AND convert_from(value, 'UTF8') LIKE '%\"event\":\"consumed\"%'",
    );
    let consumed: Vec<Value> = consumed.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(consumed.len(), 1, "{consumed:?}");
    assert_eq!((consumed[0]["entry"].as_str(), consumed[0]["outcome"].as_str()), (Some(id.trim()), Some("completed")));
}

/// SIGTERM on a replica: it takes no new runs, a turn decided during the drain finishes,
/// a turn still waiting when `engine.session.drain_seconds` pass is stopped and recorded so
/// (its stream's `run_failed`, its approval `cancelled` on the other replica at once), its
/// channel is free for the other replica at once, and the process exits 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sigterm_drains_running_turns_then_stops_and_records_the_rest() {
    let pg = Postgres::start();
    let echo = |id: &str| Answer::default().call(id, "probe__echo", json!({"id": id})).into();
    let llm = LlmServer::start(vec![echo("e1"), echo("e2"), Answer::text(&["Finished in the drain."]).into()]).await;
    let extra = format!(
        "human:\n  overrides: {{probe__echo: approve}}\nlearning: {{approval_auto_promote: 0}}\n\
         engine:\n  session: {{drain_seconds: 3}}\n\
         llm:\n  provider: anthropic\n  model: m\n  max_tokens: 100\n  anthropic: {{api_key: k, base_url: '{}'}}\n",
        llm.url()
    );
    let ws = workspace(&pg, "drain", &extra);
    let (mut a, b) = (ApiProcess::start(&ws).await, ApiProcess::start(&ws).await);
    let mut one = a.stream("one", "d1").await;
    let first = one.until("approval_requested").await.last().unwrap().data["approval_id"].as_str().unwrap().to_owned();
    let mut two = a.stream("two", "d2").await;
    let second = two.until("approval_requested").await.last().unwrap().data["approval_id"].as_str().unwrap().to_owned();

    a.terminate();
    let started = Instant::now();
    // No new runs: the listener closes (or, on a connection still open, 503).
    loop {
        let ready = reqwest::get(format!("{}/readyz", a.base())).await.map(|r| r.status().as_u16());
        if ready.is_err() || ready.as_ref().is_ok_and(|s| *s == 503) {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(5), "still ready after SIGTERM: {ready:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Decided during the drain (on B): the turn finishes on A.
    assert_eq!(decide(&b, &first, true).await.0, 200);
    let rest = one.rest().await;
    assert!(rest.iter().any(|e| e.kind == "run_completed" && e.data["text"] == "Finished in the drain."), "{rest:#?}");
    // Never decided: stopped once the drain bound passed, and recorded.
    let rest = two.rest().await;
    let failed = rest.iter().find(|e| e.kind == "run_failed").unwrap_or_else(|| panic!("{rest:#?}\n{}", a.stderr()));
    assert!(failed.data["error"].as_str().unwrap().contains("shutting down"), "{failed:?}");
    assert_eq!(a.exited(Duration::from_secs(15)).await, Some(0), "{}", a.stderr());
    assert!(started.elapsed() >= Duration::from_secs(3), "the drain bound was kept");
    assert!(a.stderr().contains("are stopped"), "{}", a.stderr());
    let (status, seen) = get(&b, &format!("/api/approvals/{second}")).await;
    assert_eq!((status, seen["outcome"].clone()), (200, json!("cancelled")), "{seen}");
    assert_eq!(decide(&b, &second, true).await.0, 410, "nothing to decide any more");
    assert_eq!(llm.requests().len(), 3, "the stopped turn made no further request");

    // A's in-flight marker on d2 went with its turn: B takes the channel at once (the TTL
    // is the default 400 s).
    llm.push(Answer::text(&["B on d2."]));
    let (status, body) = run(&b, "again", "d2").await;
    assert_eq!((status, body["text"].clone()), (200, json!("B on d2.")), "{body}");
}

/// A Telegram turn waiting on the answer to its question (`human__ask`) outlives its
/// replica too: A asks and is killed with -9; the answer, typed in the chat, reaches B,
/// which finds the question in the database and resumes the turn with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chat_turn_waiting_for_an_answer_is_resumed_on_another_replica_when_its_own_dies() {
    const TOKEN: &str = "4545000:ABCdefGHIjklMNOpqrSTUvwxyz_0123456";
    const CHAT: i64 = 4545;
    let pg = Postgres::start();
    let ask = json!({"question": "Which colour?", "choices": ["red", "blue"]});
    let llm = LlmServer::start(vec![
        Answer::default().call("q1", "human__ask", ask).into(),
        Answer::text(&["Blue, resumed."]).into(),
    ])
    .await;
    let telegram = skillhost_tests::telegram_server::TelegramServer::start(TOKEN).await;
    let extra = telegram_config(TOKEN, CHAT, &telegram, &llm.url());
    let ws = workspace(&pg, "answer", &extra);
    let (mut a, b) = poller_and_standby(&ws, &[]).await;

    let wait = Duration::from_secs(60);
    telegram.send_text(CHAT, 7, "pick one");
    telegram.wait_for_message(CHAT, |m| m.text.contains("Which colour?"), wait).await;
    a.kill();
    b.wait_for_log("polling for updates").await;
    telegram.send_text(CHAT, 7, "blue");
    telegram.wait_for_message(CHAT, |m| m.text.contains("Blue, resumed."), wait).await;
    assert!(b.stderr().contains("resuming a turn its replica left waiting"), "{}", b.stderr());
    assert_eq!(llm.requests().len(), 2, "the answer started no turn of its own, and nothing was asked twice");
    let results = support::tool_results(&llm, 1);
    assert_eq!(results[0]["tool_use_id"], "q1");
    assert!(results[0]["content"].to_string().contains("blue"), "{}", results[0]);
    settles(&pg, "answer", "SELECT count(*) FROM skillhost_waiting_turns", "0").await;
}

/// Two replicas with a scheduled skill: one runs the schedules (each alert sent once, its
/// count in the shared state going up by one), the other stands by and takes over when the
/// first dies, counting on from where it stopped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_replica_runs_the_schedules_and_another_takes_over_when_it_dies() {
    const TOKEN: &str = "4444000:ABCdefGHIjklMNOpqrSTUvwxyz_0123456";
    const CHAT: i64 = 4444;
    let pg = Postgres::start();
    let telegram = skillhost_tests::telegram_server::TelegramServer::start(TOKEN).await;
    // No turn runs: the LLM's address is never reached.
    let extra = telegram_config(TOKEN, CHAT, &telegram, "http://127.0.0.1:9");
    let ws = workspace(&pg, "schedules", &extra);
    let manifest = std::fs::read_to_string(support::repo().join("tests/guests/alerter/skill.toml")).unwrap();
    ws.add_skill("skills", "alerter", guests::ALERTER, &manifest);
    let config = std::fs::read_to_string(ws.path().join("config.yaml")).unwrap().replace(
        "builtins: []\n",
        &format!(
            "builtins: []\n  schedule_minimum: 1s\n  config:\n    alerter: {{to: ['telegram:{CHAT}']}}\n  \
             grants:\n    alerter: {{notify: ['telegram:{CHAT}']}}\n"
        ),
    );
    std::fs::write(ws.path().join("config.yaml"), config).unwrap();

    let mut a = support::run::Running::start(ws.path(), &[], &[]);
    a.wait_for_log("this replica runs the schedules").await;
    let b = support::run::Running::start(ws.path(), &[], &[]);
    b.wait_for_log("another replica runs the schedules; standing by").await;
    let wait = Duration::from_secs(30);
    let alerts = || -> Vec<u64> {
        telegram.messages(CHAT).iter().filter_map(|m| m.text.strip_prefix("alert ")?.parse().ok()).collect()
    };
    let seen = alerts().len();
    telegram.wait_for_message(CHAT, |_| alerts().len() >= seen + 3, wait).await;
    a.kill();
    b.wait_for_log("this replica runs the schedules").await;
    let before = alerts();
    let last = *before.last().unwrap();
    telegram.wait_for_message(CHAT, |m| m.text == format!("alert {}", last + 2), wait).await;
    let sent = alerts();
    assert!(sent.windows(2).all(|w| w[1] == w[0] + 1), "each alert once, counted on by B: {sent:?}");
    let runs_of_b = b.stderr().matches("this replica runs the schedules").count();
    assert_eq!(runs_of_b, 1, "B ran the schedules only once A was gone: {}", b.stderr());
}

/// Slack spreads an app's events over its open sockets: a turn running on A asks for an
/// approval, the click arrives on B's socket, B decides in the database, and A's turn goes
/// on and answers in the thread.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slack_click_reaching_another_replica_decides_the_turn_where_it_runs() {
    use skillhost_tests::slack_server::SlackServer;
    let pg = Postgres::start();
    let echo = Answer::default().call("e1", "probe__echo", json!({"n": 1}));
    let llm = LlmServer::start(vec![echo.into(), Answer::text(&["Echoed in Slack."]).into()]).await;
    let slack = SlackServer::start().await;
    let extra = format!(
        "adapter:\n  type: slack\n  slack:\n    bot_token: '{}'\n    app_token: '{}'\n    base_url: '{}'\n\
         llm:\n  provider: anthropic\n  model: m\n  max_tokens: 100\n  anthropic: {{api_key: k, base_url: '{}'}}\n\
         human:\n  overrides: {{probe__echo: approve}}\nlearning: {{approval_auto_promote: 0}}\n",
        SlackServer::BOT_TOKEN,
        SlackServer::APP_TOKEN,
        slack.api_url(),
        llm.url()
    );
    let ws = workspace(&pg, "slack", &extra);
    let wait = Duration::from_secs(30);
    let a = support::run::Running::start(ws.path(), &[], &[]);
    slack.wait_connected(1, wait).await;
    let sent = slack.mention("C1", "U1", "echo please");
    let asks = |m: &skillhost_tests::slack_server::SlackMessage| support::slack_button(m, "approve").is_some();
    let prompt = slack.wait_for_message("C1", asks, wait).await;
    let value = support::slack_button(&prompt, "approve").unwrap();
    // B connects: the scripted Slack sends the next events on B's socket.
    let b = support::run::Running::start(ws.path(), &[], &[]);
    slack.wait_connected(2, wait).await;
    slack.click("C1", "U1", &prompt.ts, "approve", &value);
    let answer = slack.wait_for_message("C1", |m| m.text.contains("Echoed in Slack."), wait).await;
    assert_eq!(answer.thread_ts.as_deref(), Some(sent.ts.as_str()), "answered in the thread");
    slack.wait_for_message("C1", |m| m.ts == prompt.ts && m.text.contains("Approved by <@U1>"), wait).await;
    assert_eq!(support::tool_results(&llm, 1)[0]["is_error"], json!(false));
    assert_eq!(llm.requests().len(), 2);
    let decided = pg.psql("slack", "SELECT outcome FROM skillhost_interactions WHERE kind = 'approval'");
    assert_eq!(decided.trim(), "approved");
    assert!(!a.stderr().contains("panicked") && !b.stderr().contains("panicked"));
}

/// PostgreSQL restarted while two replicas serve a stream of runs: every run either
/// completes or fails with a 503 naming the state database, nothing panics, and once the
/// database is back every run completes, without restarting a replica.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_database_restart_under_load_fails_runs_clearly_and_the_replicas_recover() {
    let pg = Postgres::start();
    let llm = LlmServer::responding(Box::new(|_| Answer::text(&["ok"]).into())).await;
    let llm_yaml = format!(
        "llm:\n  provider: anthropic\n  model: m\n  max_tokens: 100\n  anthropic: {{api_key: k, base_url: '{}'}}\n",
        llm.url()
    );
    let ws = workspace(&pg, "restart", &llm_yaml);
    let replicas = std::sync::Arc::new([ApiProcess::start(&ws).await, ApiProcess::start(&ws).await]);
    let load = |round: usize| {
        let replicas = replicas.clone();
        tokio::spawn(async move {
            let mut seen = Vec::new();
            for i in 0..40 {
                let api = &replicas[i % 2];
                let (status, body) = run(api, "hi", &format!("load-{round}-{i}")).await;
                seen.push((status, body));
            }
            seen
        })
    };
    let during = load(0);
    pg.stop();
    pg.resume();
    let seen = during.await.unwrap();
    for (status, body) in &seen {
        match status {
            200 => assert_eq!(body["text"], "ok", "{body}"),
            503 => assert!(body.to_string().contains("state database"), "{body}"),
            other => panic!("{other}: {body}"),
        }
    }
    let failed = seen.iter().filter(|(s, _)| *s == 503).count();
    println!("{failed} of {} runs failed with 503 while PostgreSQL restarted", seen.len());
    let started = Instant::now();
    while ready(&replicas[0]).await.0 != 200 || ready(&replicas[1]).await.0 != 200 {
        assert!(started.elapsed() < support::PROCESS_LIMIT, "never ready again");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let after = load(1).await.unwrap();
    assert!(after.iter().all(|(s, _)| *s == 200), "{after:?}");
    for api in replicas.iter() {
        assert!(!api.stderr().contains("panicked"), "{}", api.stderr());
    }
}
