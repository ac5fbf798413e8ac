//! The record of approvals and questions, through the binary, on SQLite and on PostgreSQL:
//! `skillhost run --adapter api` records each approval opened, decided (who, with which
//! token) and used up by the call it covers, and each call approved by promotion;
//! `GET /api/audit` pages it, `skillhost audit head` prints the head to keep, and `skillhost
//! audit verify` names the first record edited, swapped or removed in the middle, and, against
//! the kept head (`--expect`), records removed at the tail with the head rewritten to match.

mod support;

use serde_json::{Value, json};
use skillhost_tests::api_client::Sse;
use skillhost_tests::llm_server::{Answer, LlmServer};
use skillhost_tests::postgres::Postgres;
use skillhost_tests::{Workspace, guests};
use std::process::Command;
use support::api::ApiProcess;

/// Where the state lives, and how a test reaches under the host to change its rows.
enum Backend {
    Sqlite,
    Postgres(Postgres),
}

impl Backend {
    fn state_yaml(&self) -> String {
        match self {
            Backend::Sqlite => "state:\n  filesystem: {path: state}\n".into(),
            Backend::Postgres(pg) => {
                pg.psql("postgres", "CREATE DATABASE audit");
                format!(
                    "state:\n  backend: postgres\n  postgres: {{url: '{}?sslmode=disable'}}\n",
                    pg.url("postgres", "audit")
                )
            }
        }
    }

    /// The stored text of record key `key`, as the host wrote it.
    fn get(&self, ws: &Workspace, key: &str) -> String {
        match self {
            Backend::Sqlite => sqlite(
                ws,
                "print(db.execute('SELECT value FROM entries WHERE ns=? AND key=?', (NS, K)).fetchone()[0])",
                key,
                "",
            ),
            Backend::Postgres(pg) => pg
                .psql(
                    "audit",
                    &format!("SELECT convert_from(value, 'UTF8') FROM skillhost_state WHERE {}", pg_where(key)),
                )
                .trim()
                .to_owned(),
        }
    }

    /// Writes `value` as the text of `key` (put back if it was removed), or removes it
    /// (`None`), under the host.
    fn put(&self, ws: &Workspace, key: &str, value: Option<&str>) {
        match (self, value) {
            (Backend::Sqlite, Some(value)) => {
                let upsert = "db.execute('INSERT INTO entries (ns, key, value, bytes) VALUES (?, ?, ?, ?) \
                              ON CONFLICT (ns, key) DO UPDATE SET value = excluded.value', \
                              (NS, K, V, len(K) + len(V))); db.commit()";
                sqlite(ws, upsert, key, value);
            }
            (Backend::Sqlite, None) => {
                sqlite(ws, "db.execute('DELETE FROM entries WHERE ns=? AND key=?', (NS, K)); db.commit()", key, "");
            }
            (Backend::Postgres(pg), Some(value)) => {
                let sql = format!(
                    "INSERT INTO skillhost_state (ns, key, value, bytes) VALUES ('{NS}', convert_to('{key}', 'UTF8'), \
                     convert_to($v${value}$v$, 'UTF8'), {}) ON CONFLICT (ns, key) DO UPDATE SET value = excluded.value",
                    key.len() + value.len()
                );
                pg.psql("audit", &sql);
            }
            (Backend::Postgres(pg), None) => {
                pg.psql("audit", &format!("DELETE FROM skillhost_state WHERE {}", pg_where(key)));
            }
        }
    }
}

/// The record's namespace (the single top-level agent's).
const NS: &str = "skillhost.audit";

fn pg_where(key: &str) -> String {
    format!("ns = '{NS}' AND key = convert_to('{key}', 'UTF8')")
}

/// Runs `script` against the workspace's SQLite state with `NS`, `K` (the key) and `V` set.
fn sqlite(ws: &Workspace, script: &str, key: &str, value: &str) -> String {
    let program = format!(
        "import sqlite3, sys\nNS, K, V = sys.argv[2], sys.argv[3], sys.argv[4]\ndb = sqlite3.connect(sys.argv[1])\n{script}\n"
    );
    let db = ws.path().join("state/state.sqlite3");
    let out = Command::new("python3").arg("-c").arg(program).arg(db).args([NS, key, value]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// A record's key.
fn key(seq: u64) -> String {
    format!("r.{seq:020}")
}

/// `probe__memory_write` asks for approval; `oncall` may decide, `ci` only read.
fn workspace(llm: &LlmServer, backend: &Backend, promote: u32) -> Workspace {
    let ws = Workspace::new();
    ws.add_skill("skills", "probe", guests::PROBE, "[capabilities]\nmemory = true\n");
    let config = format!(
        "skills:\n  paths: [skills]\n  builtins: []\n  grants:\n    probe: {{memory: true}}\n\
         learning:\n  approval_auto_promote: {promote}\n  memory:\n    filesystem: {{path: memory}}\n{}\
         human:\n  overrides:\n    probe__memory_write: approve\n\
         llm:\n  provider: anthropic\n  model: m\n  max_tokens: 100\n  anthropic: {{api_key: k, base_url: '{}'}}\n\
         ui:\n  tokens:\n\
         \x20   - {{name: ci, token: ci-token-0001, scopes: [trigger, read]}}\n\
         \x20   - {{name: oncall, token: oncall-token-01, scopes: [read, decide]}}\n",
        backend.state_yaml(),
        llm.url()
    );
    std::fs::write(ws.path().join("config.yaml"), config).unwrap();
    ws
}

/// Starts a run that asks for one approval and decides it with `token` as `decision` says.
async fn run_and_decide(api: &ApiProcess, channel: &str, token: &str, decision: Value) {
    let url = format!("{}/api/trigger?wait=1&stream=approval-v1", api.base());
    let body = json!({"message": "append", "channel_id": channel});
    let response = reqwest::Client::new().post(url).bearer_auth("ci-token-0001").json(&body).send().await.unwrap();
    assert_eq!(response.status(), 200, "{}", api.stderr());
    let mut sse = Sse::new(response);
    let asked = sse.until("approval_requested").await.last().unwrap().data.clone();
    let id = asked["approval_id"].as_str().unwrap();
    let decided = reqwest::Client::new()
        .post(format!("{}/api/approvals/{id}/decision", api.base()))
        .bearer_auth(token)
        .json(&decision)
        .send()
        .await
        .unwrap();
    assert_eq!(decided.status(), 200, "{}", decided.text().await.unwrap());
    sse.rest().await;
}

/// `GET path` with the `ci` token (read only): the status and the JSON body.
async fn read(api: &ApiProcess, path: &str) -> (u16, Value) {
    let response = reqwest::Client::new().get(format!("{}{path}", api.base())).bearer_auth("ci-token-0001").send();
    let response = response.await.unwrap();
    (response.status().as_u16(), response.json().await.unwrap_or(Value::Null))
}

/// `skillhost audit ARGS` in `ws`: exit code and output (stdout then stderr).
fn audit(ws: &Workspace, args: &[&str]) -> (i32, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_skillhost"));
    command.current_dir(ws.path()).arg("audit").args(args);
    let out = support::run_bounded(command, "");
    (out.code, format!("{}{}", out.stdout, out.stderr))
}

async fn record_then_catch_every_change(backend: Backend) {
    let append = json!({"path": "runs.txt", "content": "x", "mode": "append"});
    let llm = LlmServer::start(vec![
        Answer::default().call("w1", "probe__memory_write", append.clone()).into(),
        Answer::text(&["Written."]).into(),
        Answer::default().call("w2", "probe__memory_write", append).into(),
        Answer::text(&["Not written."]).into(),
    ])
    .await;
    let ws = workspace(&llm, &backend, 0);
    let api = ApiProcess::start(&ws).await;
    run_and_decide(&api, "c1", "oncall-token-01", json!({"approved": true})).await;
    run_and_decide(&api, "c2", support::api::TOKEN, json!({"approved": false, "reason": "not today"})).await;

    // What the record holds, to anyone who may read.
    let (_, page) = read(&api, "/api/audit?limit=3").await;
    let records = page["records"].as_array().unwrap();
    let mut shown: Vec<(&str, &str, &str)> = records
        .iter()
        .map(|r| (r["event"].as_str().unwrap(), r["outcome"].as_str().unwrap_or(""), r["token"].as_str().unwrap_or("")))
        .collect();
    // The decision, and the run it lets go, are recorded as they happen: either may be first.
    shown[1..].sort_unstable();
    assert_eq!(shown, [("opened", "", ""), ("consumed", "completed", ""), ("decided", "approved", "oncall")], "{page}");
    let decided = records.iter().find(|r| r["event"] == "decided").unwrap();
    let consumed = records.iter().find(|r| r["event"] == "consumed").unwrap();
    assert_eq!((decided["by"].as_str(), decided["tool"].as_str()), (Some("api"), Some("probe__memory_write")));
    assert_eq!(consumed["entry"], records[0]["entry"]);
    assert_eq!(consumed["arguments_sha256"], records[0]["arguments_sha256"], "the call approved ran");
    assert_eq!(records[1]["prev"], records[0]["hash"]);
    assert_eq!((page["head"]["seq"].clone(), page["next"].clone()), (json!(5), json!(3)), "{page}");
    let rest: Value = read(&api, "/api/audit?after=3").await.1;
    assert_eq!(rest["records"].as_array().unwrap().len(), 2, "a denied call is not consumed: {rest}");
    assert_eq!(
        (rest["records"][1]["outcome"].clone(), rest["records"][1]["token"].clone()),
        (json!("denied"), json!("default"))
    );
    let (status, unknown) = read(&api, "/api/audit?from=1").await;
    assert_eq!(status, 400, "a parameter it does not act on is refused: {unknown}");
    drop(api);

    let (code, head) = audit(&ws, &["head"]);
    assert_eq!(code, 0, "{head}");
    let head = head.trim().to_owned();
    assert!(head.starts_with("5:") && head.len() == 66, "{head}");
    let (code, out) = audit(&ws, &["verify", "--expect", &head]);
    assert_eq!((code, out.trim()), (0, format!("intact: {head}").as_str()));

    // An edited record, two records swapped, one removed in the middle: each named.
    let two = backend.get(&ws, &key(2));
    backend.put(&ws, &key(2), Some(&two.replace("\"surface\":\"api\"", "\"surface\":\"cli\"")));
    let (code, out) = audit(&ws, &["verify"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("record 2 was changed"), "{out}");
    let three = backend.get(&ws, &key(3));
    backend.put(&ws, &key(2), Some(&three));
    backend.put(&ws, &key(3), Some(&two));
    let (code, out) = audit(&ws, &["verify"]);
    assert!(code == 1 && out.contains("record 2 is out of place"), "{out}");
    backend.put(&ws, &key(2), Some(&two));
    backend.put(&ws, &key(3), Some(&three));
    assert_eq!(audit(&ws, &["verify"]).0, 0, "restored");
    backend.put(&ws, &key(3), None);
    let (code, out) = audit(&ws, &["verify"]);
    assert!(code == 1 && out.contains("record 3 was removed"), "{out}");
    backend.put(&ws, &key(3), Some(&three));

    // The last record removed and the head rewritten to the one before: whole by itself,
    // caught against the head kept elsewhere.
    let four: Value = serde_json::from_str(&backend.get(&ws, &key(4))).unwrap();
    backend.put(&ws, &key(5), None);
    backend.put(&ws, "head", Some(&json!({"seq": 4, "hash": four["hash"]}).to_string()));
    let (code, out) = audit(&ws, &["verify"]);
    assert_eq!(code, 0, "{out}");
    let (code, out) = audit(&ws, &["verify", "--expect", &head]);
    assert!(code == 1 && out.contains(&format!("not the expected {head}")), "{out}");
    let (code, out) = audit(&ws, &["verify", "--expect", "nonsense"]);
    assert!(code != 0 && out.contains("is not <seq>:<hash>"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_record_on_sqlite_names_every_change() {
    record_then_catch_every_change(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_record_on_postgres_names_every_change() {
    record_then_catch_every_change(Backend::Postgres(Postgres::start())).await;
}

/// A call approved by auto-promotion asks nobody and opens no entry, and is on the record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_promoted_call_is_on_the_record() {
    let append = json!({"path": "runs.txt", "content": "x", "mode": "append"});
    let llm = LlmServer::start(vec![
        Answer::default().call("w1", "probe__memory_write", append.clone()).into(),
        Answer::text(&["Written."]).into(),
        Answer::default().call("w2", "probe__memory_write", append).into(),
        Answer::text(&["Written again."]).into(),
    ])
    .await;
    let ws = workspace(&llm, &Backend::Sqlite, 1);
    let api = ApiProcess::start(&ws).await;
    run_and_decide(&api, "c1", "oncall-token-01", json!({"approved": true})).await;
    let url = format!("{}/api/trigger?wait=1&stream=approval-v1", api.base());
    let body = json!({"message": "append", "channel_id": "c2"});
    let response = reqwest::Client::new().post(url).bearer_auth("ci-token-0001").json(&body).send().await.unwrap();
    let events = Sse::new(response).rest().await;
    assert!(
        events.iter().any(|e| e.kind == "run_completed"),
        "{:?}",
        events.iter().map(|e| &e.kind).collect::<Vec<_>>()
    );
    assert!(!events.iter().any(|e| e.kind == "approval_requested"), "promoted: nobody asked");
    assert_eq!(std::fs::read_to_string(ws.path().join("memory/runs.txt")).unwrap(), "xx");
    let page: Value = read(&api, "/api/audit").await.1;
    let mut events: Vec<&str> =
        page["records"].as_array().unwrap().iter().map(|r| r["event"].as_str().unwrap()).collect();
    events[1..3].sort_unstable();
    assert_eq!(events, ["opened", "consumed", "decided", "promoted"], "{page}");
    let promoted = &page["records"][3];
    assert_eq!((promoted["by"].clone(), promoted["tool"].clone()), (json!("promotion"), json!("probe__memory_write")));
    assert_eq!(promoted["arguments_sha256"], page["records"][0]["arguments_sha256"], "the same call");
}
