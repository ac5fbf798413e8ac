//! Tools declared in config (`skills.declared`), through the real binary: `skill list`,
//! `skill validate` and `call` for each type, against real HTTP servers on loopback (a REST
//! service, a JSON-RPC `/call` server, a DuckDuckGo-shaped search API), and one turn through
//! the engine with the scripted LLM.

mod support;

use axum::extract::Query;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{Value, json};
use skillhost_tests::Workspace;
use skillhost_tests::llm_server::{Answer, LlmServer};
use std::collections::BTreeMap;
use std::time::Duration;

/// The services the records point at, on one loopback port.
async fn services() -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let app = Router::new()
        .route(
            "/weather",
            get(|Query(q): Query<BTreeMap<String, String>>, headers: HeaderMap| async move {
                let key = headers.get("x-key").map(|v| v.to_str().unwrap().to_owned());
                Json(json!({"city": q.get("city"), "days": q.get("days"), "key": key}))
            }),
        )
        .route(
            "/echo",
            post(|headers: HeaderMap, Json(body): Json<Value>| async move {
                let kind = headers.get("content-type").map(|v| v.to_str().unwrap().to_owned());
                Json(json!({"got": body, "content_type": kind}))
            }),
        )
        .route("/missing", get(|| async { (StatusCode::NOT_FOUND, "no such city") }))
        .route(
            "/slow",
            get(|| async {
                tokio::time::sleep(Duration::from_secs(30)).await;
                "late"
            }),
        )
        .route("/hop", get(|| async { Redirect::temporary("/weather?city=Oslo") }))
        .route("/away", get(move || async move { Redirect::temporary(&format!("http://localhost:{port}/weather")) }))
        .route("/big", get(|| async { "x".repeat(3 << 20) }))
        .route("/rpc/call", post(rpc))
        .route("/ddg", get(ddg));
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    port
}

/// The spec's JSON-RPC `tools/call`: `echo` answers its arguments, `broken` is an `isError`
/// result, `private` needs `Authorization: Bearer s3cret` or `X-API-Key: k3y`.
async fn rpc(headers: HeaderMap, Json(body): Json<Value>) -> impl IntoResponse {
    let header = |name: &str| headers.get(name).map(|v| v.to_str().unwrap().to_owned());
    let (name, arguments) = (body["params"]["name"].as_str().unwrap_or_default(), &body["params"]["arguments"]);
    assert_eq!((body["jsonrpc"].as_str(), body["method"].as_str()), (Some("2.0"), Some("tools/call")));
    let authorized =
        header("authorization").as_deref() == Some("Bearer s3cret") || header("x-api-key").as_deref() == Some("k3y");
    let result = match name {
        "broken" => json!({"content": [{"type": "text", "text": "the backend is down"}], "isError": true}),
        "private" | "keyed" if !authorized => {
            return Json(
                json!({"jsonrpc": "2.0", "id": body["id"], "error": {"code": -32001, "message": "unauthorized"}}),
            );
        }
        _ => {
            json!({"content": [{"type": "image", "data": ""}, {"type": "text", "text": format!("{name}: {arguments}")}]})
        }
    };
    Json(json!({"jsonrpc": "2.0", "id": body["id"], "result": result}))
}

async fn ddg(Query(q): Query<BTreeMap<String, String>>) -> Json<Value> {
    assert_eq!(q.get("format").map(String::as_str), Some("json"));
    let topic =
        |n: u32| json!({"Text": format!("{} result {n}", q["q"]), "FirstURL": format!("https://example.com/{n}")});
    Json(json!({
        "AbstractText": "",
        "RelatedTopics": [topic(1), {"Name": "Group", "Topics": [topic(2), topic(3)]}, topic(4), topic(5), topic(6), topic(7)],
    }))
}

fn workspace(port: u16, extra: &str) -> Workspace {
    let ws = Workspace::new();
    let yaml = format!(
        "skills:\n  paths: []\n  builtins: []\n  declared:\n\
         \x20   - {{name: weather, skill_type: http, description: Current weather for a city., config_json: {{url: 'http://127.0.0.1:{port}/weather', method: GET, headers: {{X-Key: '${{WEATHER_KEY}}'}}, input_schema: {{type: object, properties: {{city: {{type: string}}, days: {{type: integer}}}}, required: [city]}}}}}}\n\
         \x20   - {{name: echo, skill_type: http, human: approve, config_json: '{{\"url\": \"http://127.0.0.1:{port}/echo\"}}'}}\n\
         \x20   - {{name: missing, skill_type: http, config_json: {{url: 'http://127.0.0.1:{port}/missing', method: GET}}}}\n\
         \x20   - {{name: slow, skill_type: http, config_json: {{url: 'http://127.0.0.1:{port}/slow', method: GET, timeout_seconds: 1}}}}\n\
         \x20   - {{name: hop, skill_type: http, config_json: {{url: 'http://127.0.0.1:{port}/hop', method: GET}}}}\n\
         \x20   - {{name: away, skill_type: http, config_json: {{url: 'http://127.0.0.1:{port}/away', method: GET}}}}\n\
         \x20   - {{name: big, skill_type: http, config_json: {{url: 'http://127.0.0.1:{port}/big', method: GET}}}}\n\
         \x20   - {{name: ungranted, skill_type: http, config_json: {{url: 'http://127.0.0.1:{port}/weather', method: GET}}}}\n\
         \x20   - {{name: echo_rpc, skill_type: mcp, config_json: {{url: 'http://127.0.0.1:{port}/rpc'}}}}\n\
         \x20   - {{name: broken, skill_type: mcp, config_json: {{url: 'http://127.0.0.1:{port}/rpc/call'}}}}\n\
         \x20   - {{name: private, skill_type: mcp, config_json: {{url: 'http://127.0.0.1:{port}/rpc', auth_type: bearer, auth_value: s3cret}}}}\n\
         \x20   - {{name: keyed, skill_type: mcp, config_json: {{url: 'http://127.0.0.1:{port}/rpc', auth_type: api_key, auth_value: k3y}}}}\n\
         \x20   - {{name: search, skill_type: builtin, description: Search the web., config_json: {{function_name: web_search, base_url: 'http://127.0.0.1:{port}/ddg'}}}}\n\
         \x20   - {{name: journal_write, skill_type: builtin}}\n\
         \x20   - {{name: chart, skill_type: builtin, config_json: {{function_name: text_to_chart}}}}\n\
         \x20   - {{name: dormant, skill_type: http, is_active: false, config_json: {{url: 'http://127.0.0.1:{port}/weather'}}}}\n\
         \x20 grants:\n\
         \x20   declared__weather: {{http_hosts: ['127.0.0.1']}}\n\
         \x20   declared__echo: {{http_hosts: ['127.0.0.1:{port}']}}\n\
         \x20   declared__missing: {{http_hosts: ['127.0.0.1']}}\n\
         \x20   declared__slow: {{http_hosts: ['127.0.0.1']}}\n\
         \x20   declared__hop: {{http_hosts: ['127.0.0.1']}}\n\
         \x20   declared__away: {{http_hosts: ['127.0.0.1', localhost]}}\n\
         \x20   declared__big: {{http_hosts: ['127.0.0.1']}}\n\
         learning:\n  memory:\n    filesystem: {{path: memory}}\nstate:\n  filesystem: {{path: state}}\n{extra}"
    );
    std::fs::write(ws.path().join("config.yaml"), yaml).unwrap();
    ws
}

/// `skillhost call <tool> <input>` with `--yes`: (exit code, the result as JSON).
fn call(ws: &Workspace, tool: &str, input: Value) -> (i32, Value) {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_skillhost"));
    command.current_dir(ws.path()).args(["call", "--yes", tool, &input.to_string()]).env("WEATHER_KEY", "k-123");
    let out = support::run_bounded(command, "");
    let value = serde_json::from_str(&out.stdout).unwrap_or_else(|_| Value::String(out.stdout.clone()));
    assert!(!out.stderr.contains("panicked"), "{}", out.stderr);
    (out.code, value)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_records_reach_only_their_granted_url() {
    let port = services().await;
    let ws = workspace(port, "");
    let ws = &ws;
    let run = |tool: &'static str, input: Value| tokio::task::block_in_place(|| call(ws, tool, input));

    let (code, out) = run("declared__weather", json!({"city": "Oslo", "days": 3}));
    assert_eq!(code, 0, "{out}");
    let body: Value = serde_json::from_str(out["body"].as_str().unwrap()).unwrap();
    assert_eq!(body, json!({"city": "Oslo", "days": "3", "key": "k-123"}), "query parameters and the header");
    assert_eq!(out["status"], 200);
    let (code, out) = run("declared__weather", json!({"days": 3}));
    assert_eq!(code, 1, "the schema requires city: {out}");
    assert!(out.to_string().contains("city"), "{out}");

    let (code, out) = run("declared__echo", json!({"a": "b"}));
    assert_eq!(code, 0, "{out}");
    let body: Value = serde_json::from_str(out["body"].as_str().unwrap()).unwrap();
    assert_eq!(body, json!({"got": {"a": "b"}, "content_type": "application/json"}), "POST sends a JSON body");

    let (code, out) = run("declared__missing", json!({}));
    assert_eq!((code, out["kind"].as_str()), (1, Some("http_status")), "{out}");
    assert!(out["error"].as_str().unwrap().contains("no such city"), "{out}");
    let (code, out) = run("declared__slow", json!({}));
    assert_eq!((code, out["kind"].as_str()), (1, Some("timeout")), "{out}");
    let (code, out) = run("declared__hop", json!({}));
    assert_eq!(code, 0, "a redirect on the same host is followed: {out}");
    assert!(out["body"].as_str().unwrap().contains("Oslo"), "{out}");
    let (code, out) = run("declared__away", json!({}));
    assert_eq!((code, out["kind"].as_str()), (1, Some("connection")), "{out}");
    assert!(out["error"].as_str().unwrap().contains("redirect to another host (localhost) is refused"), "{out}");
    let (code, out) = run("declared__big", json!({}));
    assert_eq!((code, out["kind"].as_str()), (1, Some("result_too_large")), "{out}");
    let (code, out) = run("declared__ungranted", json!({}));
    assert_eq!((code, out["kind"].as_str()), (1, Some("denied")), "{out}");
    assert!(out["error"].as_str().unwrap().contains("skills.grants.declared__ungranted.http_hosts"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_records_call_the_spec_endpoint_with_their_auth() {
    let port = services().await;
    let ws = workspace(port, "");
    let ws = &ws;
    let run = |tool: &'static str, input: Value| tokio::task::block_in_place(|| call(ws, tool, input));
    let (code, out) = run("declared__echo_rpc", json!({"x": "1"}));
    assert_eq!(
        (code, out.as_str().map(str::trim)),
        (0, Some("echo_rpc: {\"x\":\"1\"}")),
        "the first text content: {out}"
    );
    let (code, out) = run("declared__broken", json!({}));
    assert_eq!(
        (code, out["kind"].as_str(), out["error"].as_str()),
        (1, Some("tool_failed"), Some("the backend is down"))
    );
    let (code, out) = run("declared__private", json!({}));
    assert_eq!(code, 0, "bearer: {out}");
    let (code, out) = run("declared__keyed", json!({}));
    assert_eq!(code, 0, "api_key: {out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn builtins_search_write_the_journal_and_draw_a_chart() {
    let port = services().await;
    let ws = workspace(port, "");
    let ws = &ws;
    let run = |tool: &'static str, input: Value| tokio::task::block_in_place(|| call(ws, tool, input));
    let (code, out) = run("declared__search", json!({"query": "rust"}));
    assert_eq!(code, 0, "{out}");
    let texts: Vec<&str> = out["results"].as_array().unwrap().iter().map(|r| r["text"].as_str().unwrap()).collect();
    assert_eq!(texts, ["rust result 1", "rust result 2", "rust result 3", "rust result 4", "rust result 5"]);

    let (code, out) = run("declared__journal_write", json!({"entry": "Deployed **v2**."}));
    assert_eq!(code, 0, "{out}");
    let path = out["written"].as_str().unwrap();
    assert!(path.starts_with("journal/cli/") && path.ends_with(".md"), "{path}");
    let text = std::fs::read_to_string(ws.path().join("memory").join(path)).unwrap();
    assert!(text.contains("Deployed **v2**."), "{text}");

    let chart =
        json!({"kind": "bar", "title": "Q <1>", "labels": ["a", "b"], "series": [{"name": "s", "values": [1, -2]}]});
    let (code, out) = run("declared__chart", chart);
    assert_eq!(code, 0, "{out}");
    let svg = std::fs::read_to_string(ws.path().join("memory").join(out["path"].as_str().unwrap())).unwrap();
    assert!(
        svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\"") && svg.trim_end().ends_with("</svg>"),
        "{svg}"
    );
    assert!(svg.contains("Q &lt;1&gt;") && svg.matches("<rect").count() >= 3, "{svg}");
    // Well-formed: every opened element is closed (a minimal XML check).
    let opened = svg.matches('<').count();
    assert_eq!(opened, svg.matches('>').count());
    let pie = json!({"kind": "pie", "labels": ["a", "b"], "series": [{"name": "s", "values": [1, 2]}, {"name": "t", "values": [1, 2]}]});
    let (code, out) = run("declared__chart", pie);
    assert_eq!((code, out["kind"].as_str()), (1, Some("invalid_input")), "{out}");
}

#[test]
fn list_validate_and_bad_records() {
    let ws = workspace(9, "");
    let out = support::skillhost(&ws, &["skill", "list"], "");
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(!out.stderr.contains("declared__"), "every record loads: {}", out.stderr);
    assert!(
        out.stdout.contains("- declared__weather  [http, approval: none, active]  Current weather for a city."),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("- declared__echo  [http, approval: approve, active]"), "{}", out.stdout);
    assert!(out.stdout.contains("- declared__dormant  [http, approval: none, inactive]"), "{}", out.stdout);
    let out = support::skillhost(&ws, &["skill", "validate"], "");
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("ok: 0 skills, 16 tools"), "{}", out.stdout);
    // An inactive record is not offered.
    let (code, out) = call(&ws, "declared__dormant", json!({}));
    assert_eq!(code, 2, "{out}");

    let path = ws.path().join("config.yaml");
    let good = std::fs::read_to_string(&path).unwrap();
    let bad = good.replace(
        "  grants:\n",
        "    - {name: weather, skill_type: builtin}\n    - {name: typo, skill_type: http, config_json: {url: 'http://x', mehtod: GET}}\n\
         \x20   - {name: 'Bad-Name', skill_type: http, config_json: {url: 'http://x'}}\n\
         \x20   - {name: insta, skill_type: builtin, config_json: {function_name: instagram_post}}\n\
         \x20   - {name: nourl, skill_type: mcp, config_json: {url: 'ftp://x'}}\n  grants:\n",
    );
    std::fs::write(&path, bad).unwrap();
    let out = support::skillhost(&ws, &["skill", "validate"], "");
    assert_eq!(out.code, 1, "{}{}", out.stdout, out.stderr);
    for expected in [
        "skill `declared__weather`: skills.declared[16]: a second record with this name",
        "skill `declared__typo`: skills.declared[17]: config_json.mehtod: unknown field `mehtod`",
        "skill `declared__Bad-Name`: skills.declared[18]: name `Bad-Name` does not start with a lowercase letter",
        "skill `declared__insta`: skills.declared[19]: config_json.access_token: needed by instagram_post",
        "skill `declared__nourl`: skills.declared[20]: config_json.url: `ftp://x/call` is not an http(s) URL",
    ] {
        assert!(out.stderr.contains(expected), "{expected}:\n{}", out.stderr);
    }
    assert!(out.stdout.contains("5 problem(s)"), "the others still load: {}", out.stdout);
}

/// Through the engine: the model calls a declared tool, which runs under the gate like any
/// tool (its `human: approve` asks; `--yes` is `call`'s; here the API's run approves).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_uses_declared_tools() {
    let port = services().await;
    let chart = json!({"kind": "bar", "labels": ["a"], "series": [{"name": "n", "values": [1]}]});
    let search = Answer::default()
        .call("s1", "declared__search", json!({"query": "wasm"}))
        .call("m1", "declared__echo_rpc", json!({"text": "over rpc"}))
        .call("c1", "declared__chart", chart)
        .call("j1", "declared__journal_write", json!({"entry": "checked the weather"}));
    let weather = Answer::default().call("w1", "declared__weather", json!({"city": "Bergen"}));
    let llm = LlmServer::start(vec![search.into(), weather.into(), Answer::text(&["Rainy."]).into()]).await;
    let extra = format!(
        "llm:\n  provider: anthropic\n  model: test-model\n  max_tokens: 500\n  anthropic: {{api_key: test, base_url: '{}'}}\n",
        llm.url()
    );
    let ws = workspace(port, &extra);
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_skillhost"));
    command.current_dir(ws.path()).args(["chat"]).env("WEATHER_KEY", "k-9");
    let out = tokio::task::block_in_place(|| support::run_bounded(command, "what is the weather?\n"));
    assert!(out.stdout.contains("Rainy."), "{}{}", out.stdout, out.stderr);
    let first = support::tool_results(&llm, 1);
    assert!(first[0]["content"].to_string().contains("wasm result 1"), "{first:?}");
    assert!(first[1]["content"].to_string().contains("over rpc"), "the mcp record: {first:?}");
    assert!(first[2]["content"].to_string().contains(".svg"), "the chart: {first:?}");
    assert_eq!(first[3]["is_error"], json!(false), "the journal: {first:?}");
    assert!(std::fs::read_dir(ws.path().join("memory/journal")).is_ok(), "the journal was written");
    let second = support::tool_results(&llm, 2);
    assert!(
        second[0]["content"].to_string().contains("Bergen") && second[0]["content"].to_string().contains("k-9"),
        "{second:?}"
    );
    let offered = llm.body(0)["tools"].to_string();
    assert!(offered.contains("declared__weather") && !offered.contains("declared__dormant"), "{offered}");
}

/// A workspace with one `database` record on `url` (rows capped at 3, 800 ms per query).
fn database_workspace(url: &str) -> Workspace {
    database_workspace_with(url, "")
}

/// [`database_workspace`], the config ending in `extra`.
fn database_workspace_with(url: &str, extra: &str) -> Workspace {
    let ws = Workspace::new();
    let yaml = format!(
        "skills:\n  paths: []\n  builtins: []\n  declared:\n\
         \x20   - {{name: sales, skill_type: database, description: the sales database, config_json: {{db_id: sales}}}}\n\
         databases:\n  sales: {{url: '{url}', max_rows: 3, statement_timeout_ms: 800}}\n\
         state:\n  filesystem: {{path: state}}\n{extra}"
    );
    std::fs::write(ws.path().join("config.yaml"), yaml).unwrap();
    ws
}

/// Statements that write, each refused (the kind says by whom); the table is unchanged after.
fn refused_everywhere(ws: &Workspace, writes: &[&str]) {
    for sql in writes {
        let (code, out) = call(ws, "declared__sales", json!({"sql": sql}));
        assert_eq!(code, 1, "{sql}: {out}");
        assert!(matches!(out["kind"].as_str(), Some("refused" | "invalid_sql" | "sql_error")), "{sql}: {out}");
    }
}

#[test]
fn sqlite_records_read_and_never_write() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sales.db");
    let db = rusqlite::Connection::open(&path).unwrap();
    db.execute_batch(
        "CREATE TABLE orders (id INTEGER PRIMARY KEY, -- the order number\n customer TEXT, total REAL);\n\
         INSERT INTO orders (customer, total) VALUES ('ada', 12.5), ('bo', 3), ('cy', 7), ('di', 1), ('ed', 2);",
    )
    .unwrap();
    drop(db);
    let ws = database_workspace(&format!("sqlite://{}", path.display()));

    let (code, schema) = call(&ws, "declared__sales_schema", json!({}));
    assert_eq!(code, 0, "{schema}");
    assert_eq!(schema["tables"][0]["name"], "orders", "{schema}");
    assert!(schema["tables"][0]["definition"].as_str().unwrap().contains("the order number"), "comments: {schema}");
    let (code, out) = call(&ws, "declared__sales", json!({"sql": "SELECT customer, total FROM orders ORDER BY id;"}));
    assert_eq!(code, 0, "{out}");
    assert_eq!(out["columns"], json!(["customer", "total"]));
    assert_eq!(out["rows"][0], json!({"customer": "ada", "total": 12.5}));
    assert_eq!((out["row_count"].as_u64(), out["truncated"].as_bool()), (Some(3), Some(true)), "capped at max_rows");
    let (code, out) = call(
        &ws,
        "declared__sales",
        json!({"sql": "WITH big AS (SELECT * FROM orders WHERE total > 5) SELECT count(*) AS n FROM big"}),
    );
    assert_eq!((code, &out["rows"]), (0, &json!([{"n": 2}])), "{out}");

    refused_everywhere(
        &ws,
        &[
            "DELETE FROM orders",
            "SELECT 1; DROP TABLE orders",
            "WITH gone AS (DELETE FROM orders RETURNING *) SELECT * FROM gone",
            "PRAGMA writable_schema = ON",
            "ATTACH DATABASE 'other.db' AS other",
            "CREATE TABLE x (a)",
            "SELECT * FROM nowhere",
        ],
    );
    let db = rusqlite::Connection::open(&path).unwrap();
    let n: i64 = db.query_row("SELECT count(*) FROM orders", [], |r| r.get(0)).unwrap();
    assert_eq!(n, 5, "nothing was written");
}

#[test]
fn postgres_records_read_and_never_write_even_past_the_parser() {
    let pg = skillhost_tests::postgres::Postgres::start();
    pg.psql("postgres", "CREATE DATABASE sales");
    pg.psql(
        "sales",
        "CREATE TABLE orders (id serial PRIMARY KEY, customer text, total numeric);\n\
         COMMENT ON TABLE orders IS 'one row per order';\n\
         COMMENT ON COLUMN orders.total IS 'in euros';\n\
         INSERT INTO orders (customer, total) VALUES ('ada', 12.5), ('bo', 3), ('cy', 7), ('di', 1);\n\
         CREATE FUNCTION sneaky() RETURNS int LANGUAGE plpgsql AS $$ BEGIN DELETE FROM orders; RETURN 1; END $$;",
    );
    let ws = database_workspace(&pg.url("postgres", "sales"));

    let (code, schema) = call(&ws, "declared__sales_schema", json!({}));
    assert_eq!(code, 0, "{schema}");
    let table = &schema["tables"][0];
    assert_eq!((table["name"].as_str(), table["comment"].as_str()), (Some("public.orders"), Some("one row per order")));
    assert!(table["columns"].to_string().contains("in euros"), "{schema}");
    let (code, out) = call(&ws, "declared__sales", json!({"sql": "SELECT customer, total FROM orders ORDER BY id"}));
    assert_eq!(code, 0, "{out}");
    assert_eq!(out["rows"][0], json!({"customer": "ada", "total": "12.5"}));
    assert_eq!((out["row_count"].as_u64(), out["truncated"].as_bool()), (Some(3), Some(true)));

    refused_everywhere(
        &ws,
        &[
            "DELETE FROM orders",
            "SELECT 1; DROP TABLE orders",
            "WITH gone AS (DELETE FROM orders RETURNING *) SELECT * FROM gone",
            "COPY orders TO '/tmp/orders.csv'",
            "SELECT * INTO stolen FROM orders",
        ],
    );
    // The parser cannot see inside a function: the read-only transaction refuses it.
    let (code, out) = call(&ws, "declared__sales", json!({"sql": "SELECT sneaky()"}));
    assert_eq!((code, out["kind"].as_str()), (1, Some("sql_error")), "{out}");
    assert!(out["error"].as_str().unwrap().contains("read-only transaction"), "{out}");
    let (code, out) = call(&ws, "declared__sales", json!({"sql": "SELECT pg_sleep(5)"}));
    assert_eq!((code, out["kind"].as_str()), (1, Some("timeout")), "statement_timeout: {out}");
    assert_eq!(pg.psql("sales", "SELECT count(*) FROM orders").trim(), "4", "nothing was written");
}

/// An MCP client sees the active declared tools in `tools/list` and calls them like any tool;
/// a gated one is refused there, since this client cannot be asked (no elicitation).
#[test]
fn an_mcp_client_lists_and_calls_declared_tools() {
    let ws = workspace(9, "");
    let mut raw = support::raw::Raw::start(&ws);
    raw.initialize("2025-11-25");
    let listed = raw.request("tools/list", json!({}));
    let names: Vec<&str> =
        listed["result"]["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert!(names.contains(&"declared__chart") && names.contains(&"declared__weather"), "{names:?}");
    assert!(!names.contains(&"declared__dormant"), "an inactive record is not offered: {names:?}");
    let chart = json!({"kind": "line", "labels": ["mon", "tue"], "series": [{"name": "load", "values": [0.5, 0.7]}]});
    let (answer, _) = raw.call("declared__chart", chart);
    assert_eq!(answer["result"]["isError"], json!(false), "{answer}");
    let text = answer["result"]["content"][0]["text"].as_str().unwrap();
    let path = serde_json::from_str::<Value>(text).unwrap()["path"].as_str().unwrap().to_owned();
    assert!(ws.path().join("memory").join(&path).is_file(), "{path}");
    let (answer, _) = raw.call("declared__echo", json!({"a": "b"}));
    assert_eq!(answer["result"]["isError"], json!(true), "approve-level, nobody to ask: {answer}");
}

/// A workspace with `function` records and `code_execution`, run by the function runtime.
fn function_workspace(extra: &str) -> Workspace {
    let ws = Workspace::new();
    let yaml = format!(
        "skills:\n  paths: []\n  builtins: []\n  declared:\n\
         \x20   - name: stats\n\
         \x20     skill_type: function\n\
         \x20     description: Mean and spread of numbers.\n\
         \x20     config_json:\n\
         \x20       language: python\n\
         \x20       input_schema: {{type: object, properties: {{values: {{type: array, items: {{type: number}}}}}}, required: [values]}}\n\
         \x20       code: |\n\
         \x20         import statistics\n\
         \x20         def run(args):\n\
         \x20             values = args[\"values\"]\n\
         \x20             return {{\"mean\": statistics.mean(values), \"spread\": max(values) - min(values)}}\n\
         \x20   - {{name: fails, skill_type: function, config_json: {{language: python, code: \"def run(args):\\n    total = 0\\n    return total / int(args['n'])\\n\"}}}}\n\
         \x20   - {{name: shout, skill_type: function, config_json: '{{\"language\": \"python\", \"code\": \"def run(args):\\n    return args[\\\"text\\\"].upper()\"}}'}}\n\
         \x20   - {{name: code_execution, skill_type: builtin}}\n\
         state:\n  filesystem: {{path: state}}\n{extra}"
    );
    std::fs::write(ws.path().join("config.yaml"), yaml).unwrap();
    ws
}

/// `function` records and `code_execution` run in the sandbox: results, an exception with
/// its line, and every way out refused (files, sockets, environment, state); a loop and a
/// sleeper are stopped at the 5 s deadline, a memory bomb at the cap, and the same server
/// answers the next call.
#[test]
fn functions_run_sandboxed_and_runaways_are_stopped() {
    let ws = function_workspace("");
    let (code, out) = call(&ws, "declared__stats", json!({"values": [1, 2, 3, 6]}));
    assert_eq!((code, out), (0, json!({"mean": 3, "spread": 5})));
    let (code, out) = call(&ws, "declared__shout", json!({"text": "hi"}));
    assert_eq!((code, out), (0, Value::String("HI\n".into())));
    let (code, out) = call(&ws, "declared__stats", json!({"values": "no"}));
    assert_eq!(code, 1, "the input schema holds: {out}");
    let (code, out) = call(&ws, "declared__fails", json!({"n": "0"}));
    assert_eq!(code, 1, "{out}");
    assert_eq!(out["error"], json!("ZeroDivisionError: division by zero (line 3)"), "{out}");
    assert_eq!((out["kind"].as_str(), out["line"].as_u64()), (Some("exception"), Some(3)), "{out}");

    let run = |source: &str| call(&ws, "declared__code_execution", json!({"code": source}));
    let (code, out) = run("import json\nprint('rows:', 2)\njson.dumps({'a': [1, 2]})");
    assert_eq!((code, out), (0, Value::String("rows: 2\n{\"a\": [1, 2]}\n".into())));
    let (_, out) = run("open('/etc/hostname').read()");
    assert!(out["error"].as_str().unwrap().starts_with("FileNotFoundError"), "{out}");
    let (_, out) = run("import socket\nsocket.create_connection(('127.0.0.1', 22))");
    assert!(out["error"].as_str().unwrap().starts_with("ModuleNotFoundError"), "{out}");
    let (_, out) = run("import urllib.request\nurllib.request.urlopen('http://127.0.0.1:9/')");
    assert_eq!(out["kind"], json!("exception"), "no network: {out}");
    let (_, out) = run("import os\nprint(sorted(os.environ))\nos.listdir('/')");
    assert_eq!(out["output"], json!("[]\n"), "no environment: {out}");
    assert!(out["error"].as_str().unwrap().starts_with("FileNotFoundError"), "no file system at all: {out}");
    let (_, out) = run("from skillhost import state\nstate.set('k', 'v')");
    assert!(out["error"].as_str().unwrap().contains("no state store"), "{out}");

    // The runaways, in one long-lived server that goes on answering.
    let mut raw = support::raw::Raw::start(&ws);
    raw.initialize("2025-11-25");
    let (answer, _) = raw.call("declared__code_execution", json!({"code": "while True:\n    pass"}));
    assert!(answer["result"]["content"][0]["text"].as_str().unwrap().contains("\"deadline\""), "{answer}");
    let started = std::time::Instant::now();
    let (answer, _) = raw.call("declared__code_execution", json!({"code": "import time\ntime.sleep(60)"}));
    let text = answer["result"]["content"][0]["text"].as_str().unwrap().to_owned();
    assert!(text.contains("\"deadline\"") && text.contains("5s"), "{answer}");
    assert!(started.elapsed() < Duration::from_secs(60), "stopped long before the sleep ends");
    let (answer, _) = raw.call(
        "declared__code_execution",
        json!({"code": "chunks = []\nwhile True:\n    chunks.append(bytearray(8 << 20))"}),
    );
    let text = answer["result"]["content"][0]["text"].as_str().unwrap().to_owned();
    assert!(text.contains("MemoryError") || text.contains("memory"), "{answer}");
    let (answer, _) = raw.call("declared__stats", json!({"values": [2, 4]}));
    assert_eq!(answer["result"]["isError"], json!(false), "the server is healthy: {answer}");
    assert!(answer["result"]["content"][0]["text"].as_str().unwrap().contains("\"mean\": 3"), "{answer}");
}

/// The spec's 5 seconds: a function computing for about a second (far past the fuel of
/// `sandbox.defaults`) returns its result; one looping forever is stopped at the deadline
/// (kind `deadline`, not fuel), and calls sent beside it are answered while it runs, by the
/// same `skillhost mcp`, which answers after it too.
#[test]
fn functions_compute_until_their_deadline_and_the_server_serves_meanwhile() {
    let records = "    - {name: second, skill_type: function, config_json: {language: python, \
        code: \"def run(args):\\n    t = 0\\n    for i in range(3000000): t += i % 7\\n    return t\\n\"}}\n\
        \x20   - {name: forever, skill_type: function, config_json: {language: python, \
        code: \"def run(args):\\n    while True:\\n        pass\\n\"}}\n";
    let ws = function_workspace("");
    let path = ws.path().join("config.yaml");
    let yaml = std::fs::read_to_string(&path).unwrap().replace("state:\n", &format!("{records}state:\n"));
    std::fs::write(&path, yaml).unwrap();
    let (code, out) = call(&ws, "declared__second", json!({}));
    assert_eq!((code, out), (0, json!(8999994)), "3,000,000 rounds of i % 7");

    let mut raw = support::raw::Raw::start(&ws);
    raw.initialize("2025-11-25");
    let calls = [
        ("declared__forever", json!({})),
        ("declared__stats", json!({"values": [1, 3]})),
        ("declared__shout", json!({"text": "meanwhile"})),
    ];
    let (answers, order) = raw.mixed_at_once_in_order(&calls);
    let text = |i: usize| answers[i]["result"]["content"][0]["text"].as_str().unwrap().to_owned();
    assert_eq!(answers[0]["result"]["isError"], json!(true), "{:?}", answers[0]);
    let stopped: Value = serde_json::from_str(&text(0)).unwrap();
    assert_eq!(stopped["kind"], json!("deadline"), "the deadline stops it, not fuel: {stopped}");
    assert!(text(1).contains("\"mean\": 2") && text(2).contains("MEANWHILE"), "{answers:?}");
    assert_eq!(order.last(), Some(&0), "the others were answered while the loop ran: {order:?}");
    let (answer, _) = raw.call("declared__shout", json!({"text": "after"}));
    assert!(answer["result"]["content"][0]["text"].as_str().unwrap().contains("AFTER"), "{answer}");
}

/// Code that does not compile, or has no `run`, is a load problem with its line; the other
/// records still load.
#[test]
fn function_code_is_checked_at_load() {
    let ws = function_workspace("");
    let path = ws.path().join("config.yaml");
    let good = std::fs::read_to_string(&path).unwrap();
    let bad = good.replace(
        "state:\n",
        "    - {name: syntax, skill_type: function, config_json: {language: python, code: \"def run(args):\\n    x = [1,\\n    return x\\n\"}}\n\
         \x20   - {name: norun, skill_type: function, config_json: {language: python, code: \"def go(args):\\n    return 1\\n\"}}\n\
         \x20   - {name: js, skill_type: function, config_json: {language: javascript, code: 'function run() {}'}}\n\
         state:\n",
    );
    std::fs::write(&path, bad).unwrap();
    let out = support::skillhost(&ws, &["skill", "validate"], "");
    assert_eq!(out.code, 1, "{}{}", out.stdout, out.stderr);
    for expected in [
        "skill `declared__syntax`: skills.declared[4]: config_json.code: SyntaxError: '[' was never closed (line 2)",
        "skill `declared__norun`: skills.declared[5]: config_json.code: the code defines no top-level `def run(args)`",
        "skill `declared__js`: skills.declared[6]: config_json.language: `javascript` is not supported (python)",
    ] {
        assert!(out.stderr.contains(expected), "{expected}:\n{}", out.stderr);
    }
    assert!(out.stdout.contains("3 problem(s)"), "{}", out.stdout);
    let out = support::skillhost(&ws, &["skill", "list"], "");
    assert!(
        out.stdout.contains("- declared__stats  [function, approval: none, active]  Mean and spread"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("- declared__code_execution  [builtin, approval: none, active]"), "{}", out.stdout);
}

/// Through the engine: the model runs code and a function, and reads their results.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_runs_declared_code() {
    let code = Answer::default().call("c1", "declared__code_execution", json!({"code": "sum(range(101))"}));
    let stats = Answer::default().call("s1", "declared__stats", json!({"values": [10, 20]}));
    let llm = LlmServer::start(vec![code.into(), stats.into(), Answer::text(&["Done."]).into()]).await;
    let extra = format!(
        "llm:\n  provider: anthropic\n  model: test-model\n  max_tokens: 500\n  anthropic: {{api_key: test, base_url: '{}'}}\n",
        llm.url()
    );
    let ws = function_workspace(&extra);
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_skillhost"));
    command.current_dir(ws.path()).args(["chat"]);
    let out = tokio::task::block_in_place(|| support::run_bounded(command, "add them up\n"));
    assert!(out.stdout.contains("Done."), "{}{}", out.stdout, out.stderr);
    assert_eq!(support::tool_results(&llm, 1)[0]["content"], json!("5050"));
    let stats = support::tool_results(&llm, 2)[0]["content"].to_string();
    assert!(stats.contains("mean") && stats.contains("15"), "{stats}");
}

/// Through the engine: the model reads the schema, then queries; a write it tries is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_queries_a_database() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sales.db");
    let db = rusqlite::Connection::open(&path).unwrap();
    db.execute_batch(
        "CREATE TABLE orders (id INTEGER PRIMARY KEY, customer TEXT); INSERT INTO orders (customer) VALUES ('ada');",
    )
    .unwrap();
    drop(db);
    let schema = Answer::default().call("q0", "declared__sales_schema", json!({}));
    let query = Answer::default().call("q1", "declared__sales", json!({"sql": "SELECT customer FROM orders"})).call(
        "q2",
        "declared__sales",
        json!({"sql": "DELETE FROM orders"}),
    );
    let llm = LlmServer::start(vec![schema.into(), query.into(), Answer::text(&["ada ordered."]).into()]).await;
    let extra = format!(
        "llm:\n  provider: anthropic\n  model: test-model\n  max_tokens: 500\n  anthropic: {{api_key: test, base_url: '{}'}}\n",
        llm.url()
    );
    let ws = database_workspace_with(&format!("sqlite://{}", path.display()), &extra);
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_skillhost"));
    command.current_dir(ws.path()).args(["chat"]);
    let out = tokio::task::block_in_place(|| support::run_bounded(command, "who ordered?\n"));
    assert!(out.stdout.contains("ada ordered."), "{}{}", out.stdout, out.stderr);
    assert!(support::tool_results(&llm, 1)[0]["content"].to_string().contains("orders"));
    let results = support::tool_results(&llm, 2);
    assert!(results[0]["content"].to_string().contains("ada"), "{results:?}");
    assert_eq!(results[1]["is_error"], json!(true), "the write is refused: {results:?}");
    let db = rusqlite::Connection::open(&path).unwrap();
    assert_eq!(db.query_row("SELECT count(*) FROM orders", [], |r| r.get::<_, i64>(0)).unwrap(), 1);
}
