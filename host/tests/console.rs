//! The web console in a real headless browser (Debian's Chromium over CDP) against
//! `skillhost run --adapter api` and the scripted LLM: sign-in (a bad token refused), a run
//! waiting for approval showing up live, Approve, Deny, a `confirm` call refusing a wrong
//! challenge, a question answered, a run started from the page and streamed, the skills and
//! MCP pages, a phone-width screen; no request leaves loopback. A screenshot of each page
//! goes to the test's temp dir (or `SKILLHOST_CONSOLE_SHOTS`, to refresh the README's).
//! Beside it, the read routes as a script uses them.

mod support;

use serde_json::{Value, json};
use skillhost_tests::api_client::{Sse, kinds};
use skillhost_tests::browser::Browser;
use skillhost_tests::llm_server::{Answer, LlmServer, Reply};
use skillhost_tests::{Workspace, guests};
use std::path::PathBuf;
use std::time::{Duration, Instant};
use support::api::{ApiProcess, TOKEN};

const WAIT: Duration = Duration::from_secs(15);

/// The `probe` skill (`echo` approve, `counter` confirm) and the Python SDK's MCP test
/// server `ask`.
fn workspace(llm: &str) -> Workspace {
    let ws = Workspace::new();
    ws.add_skill("skills", "probe", guests::PROBE, "");
    let yaml = format!(
        "skills:\n  paths: [skills]\n  builtins: []\n  allowed: [probe, ask]\nstate:\n  filesystem: {{path: state}}\n\
         human:\n  overrides: {{probe__echo: approve, probe__counter: confirm}}\nadapter: {{type: api}}\n\
         {}\
         llm:\n  provider: anthropic\n  model: test-model\n  max_tokens: 500\n  anthropic: {{api_key: test, base_url: '{llm}'}}\n",
        support::ask_server_yaml()
    );
    std::fs::write(ws.path().join("config.yaml"), yaml).unwrap();
    ws
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

/// Where screenshots go.
fn shots(ws: &Workspace) -> PathBuf {
    let dir = std::env::var_os("SKILLHOST_CONSOLE_SHOTS").map_or_else(|| ws.path().join("screenshots"), PathBuf::from);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn js(text: &str) -> String {
    serde_json::to_string(text).unwrap()
}

/// The data of the last event of `events`, which must be of `kind`.
fn last(events: &[skillhost_tests::api_client::Event], kind: &str) -> Value {
    let event = events.last().unwrap();
    assert_eq!(event.kind, kind, "{events:#?}");
    event.data.clone()
}

fn outcome(events: &[skillhost_tests::api_client::Event], kind: &str) -> Value {
    events.iter().find(|e| e.kind == kind).unwrap_or_else(|| panic!("no {kind}: {events:#?}")).data["outcome"].clone()
}

#[test]
fn the_console_in_a_real_browser() {
    let rt = runtime();
    let replies: Vec<Reply> = vec![
        Answer::default().call("e1", "probe__echo", json!({"n": 1})).into(),
        Answer::text(&["Echoed."]).into(),
        Answer::default().call("e2", "probe__echo", json!({"n": 2})).into(),
        Answer::text(&["Not run."]).into(),
        Answer::default().call("c1", "probe__counter", json!({})).into(),
        Answer::text(&["Counted."]).into(),
        Answer::default()
            .call("q1", "human__ask", json!({"question": "Which env?", "choices": ["staging", "prod"]}))
            .into(),
        Answer::text(&["Deploying to the chosen env."]).into(),
        Answer::text(&["Hello from the console run."]).into(),
    ];
    let llm = rt.block_on(LlmServer::start(replies));
    let ws = workspace(&llm.url());
    let api = rt.block_on(ApiProcess::start(&ws));
    let base = api.base().to_owned();
    let shots = shots(&ws);
    let mut b = Browser::launch(1280, 900);

    // Sign-in: a wrong token is refused and not kept; the right one is kept in the tab only.
    b.goto(&format!("{base}/"));
    b.wait_for("!document.getElementById('signin').hidden", WAIT);
    b.type_into("#token", "not-the-token");
    b.click("#signin-form button[type=submit]");
    b.wait_for("document.getElementById('signin-error').textContent.includes('refused')", WAIT);
    assert_eq!(b.eval("sessionStorage.length"), 0);
    b.screenshot(&shots.join("signin.png"));
    b.type_into("#token", TOKEN);
    b.press("Enter");
    b.wait_for("document.getElementById('runs-empty')", WAIT);
    assert_eq!(b.eval("sessionStorage.getItem('skillhost.token')"), TOKEN);
    assert!(!b.eval("location.href").as_str().unwrap().contains(TOKEN), "the token never goes in a URL");

    // A run asks approval: it shows in the list, live, without a reload.
    let mut sse: Sse = rt.block_on(api.stream("echo one", "ops"));
    let asked = last(&rt.block_on(sse.until("approval_requested")), "approval_requested");
    let seen = Instant::now();
    let (run_id, id) =
        (asked["run_id"].as_str().unwrap().to_owned(), asked["approval_id"].as_str().unwrap().to_owned());
    let row = format!("document.querySelector('tr[data-run=\"{run_id}\"]')");
    b.wait_for(&format!("{row} && {row}.textContent.includes('waiting')"), WAIT);
    eprintln!("the waiting run appeared in the console {:?} after approval_requested", seen.elapsed());
    b.wait_for("document.getElementById('pending').textContent === '1'", WAIT);
    b.screenshot(&shots.join("runs.png"));

    // Approve from the Waiting page, with the arguments changed: the edited call runs, the
    // model is told, and the run completes. Arguments that are not JSON are refused here.
    b.click("a[href='#/approvals']");
    let card = format!("[data-approval=\"{id}\"]");
    b.wait_for(&format!("document.querySelector({}).textContent.includes('probe__echo')", js(&card)), WAIT);
    b.screenshot(&shots.join("approvals.png"));
    b.click(&format!("{card} details.edit summary"));
    b.type_into(&format!("#arguments-{id}"), "{\"n\": ");
    b.click(&format!("{card} button.approve-edited"));
    b.wait_for(
        &format!("document.querySelector({}).textContent.includes('not JSON')", js(&format!("{card} .error"))),
        WAIT,
    );
    b.type_into(&format!("#arguments-{id}"), "{\"n\": 7}");
    b.click(&format!("{card} button.approve-edited"));
    let rest = rt.block_on(sse.rest());
    assert_eq!(outcome(&rest, "approval_resolved"), "approved", "{rest:#?}");
    let completed = rest.iter().find(|e| e.kind == "tool_completed").unwrap();
    assert_eq!(completed.data["approved"], true);
    assert_eq!(kinds(&rest).last(), Some(&"run_completed"), "{rest:#?}");
    let results = support::tool_results(&llm, 1);
    let content = results[0]["content"].to_string();
    assert!(content.contains("\\\"n\\\":7") && !content.contains("\\\"n\\\":1"), "the edited echo ran: {results:?}");
    assert!(content.contains("_edited_by_person"), "the model is told: {results:?}");
    b.wait_for("document.getElementById('no-approvals')", WAIT);

    // Deny.
    let mut sse = rt.block_on(api.stream("echo two", "ops"));
    let asked = last(&rt.block_on(sse.until("approval_requested")), "approval_requested");
    // By keyboard: Tab reaches the card's Deny button and Enter presses it.
    let denied = asked["approval_id"].as_str().unwrap().to_owned();
    let deny = format!("[data-approval=\"{denied}\"] button.deny");
    b.wait_for(&format!("document.querySelector({})", js(&deny)), WAIT);
    b.type_into(&format!("#reason-{denied}"), "not on a Friday");
    let mut tabs = 0;
    while b.eval(&format!("document.activeElement === document.querySelector({})", js(&deny))) != true {
        tabs += 1;
        assert!(tabs < 40, "Tab never reached the Deny button");
        b.press("Tab");
    }
    b.press("Enter");
    let rest = rt.block_on(sse.rest());
    assert_eq!(outcome(&rest, "approval_resolved"), "denied", "{rest:#?}");
    let denial = support::tool_results(&llm, 3)[0]["content"].to_string();
    assert!(denial.contains("denied") && denial.contains("not on a Friday"), "the model reads the reason: {denial}");

    // `confirm`: a wrong challenge is refused and the call stays waiting; CONFIRM runs it.
    let mut sse = rt.block_on(api.stream("count", "ops"));
    let asked = last(&rt.block_on(sse.until("approval_requested")), "approval_requested");
    let id = asked["approval_id"].as_str().unwrap().to_owned();
    let card = format!("[data-approval=\"{id}\"]");
    b.type_into(&format!("#confirm-{id}"), "confirm");
    b.click(&format!("{card} button.approve"));
    b.wait_for(
        &format!("document.querySelector({}).textContent.includes('confirmation')", js(&format!("{card} .error"))),
        WAIT,
    );
    let status = rt.block_on(async {
        let url = format!("{base}/api/approvals/{id}");
        reqwest::Client::new().get(url).bearer_auth(TOKEN).send().await.unwrap().json::<Value>().await.unwrap()
    });
    assert_eq!(status["outcome"], "pending", "a wrong challenge decides nothing");
    b.screenshot(&shots.join("confirm.png"));
    b.type_into(&format!("#confirm-{id}"), "CONFIRM");
    b.click(&format!("{card} button.approve"));
    let rest = rt.block_on(sse.rest());
    assert_eq!(outcome(&rest, "approval_resolved"), "approved", "{rest:#?}");
    assert_eq!(kinds(&rest).last(), Some(&"run_completed"));

    // A question: answered with one of its choices.
    let mut sse = rt.block_on(api.stream("deploy", "ops"));
    let asked = last(&rt.block_on(sse.until("question_requested")), "question_requested");
    let card = format!("[data-question=\"{}\"]", asked["question_id"].as_str().unwrap());
    b.wait_for(&format!("document.querySelector({}).textContent.includes('Which env?')", js(&card)), WAIT);
    b.screenshot(&shots.join("question.png"));
    b.click(&format!("{card} button.choice:nth-of-type(2)"));
    let rest = rt.block_on(sse.rest());
    let resolved = rest.iter().find(|e| e.kind == "question_resolved").unwrap();
    assert_eq!((resolved.data["outcome"].as_str(), resolved.data["answer"].as_str()), (Some("answered"), Some("prod")));

    // A run started from the page, streamed on its own page.
    b.click("a[href='#/new']");
    b.type_into("#message", "hello from the console");
    b.screenshot(&shots.join("new.png"));
    b.click("#new-run button[type=submit]");
    b.wait_for("location.hash.startsWith('#/run/')", WAIT);
    b.wait_for("document.getElementById('run-done')", WAIT);
    let shown = b.eval("document.getElementById('events').innerText");
    assert!(shown.as_str().unwrap().contains("Hello from the console run."), "{shown}");
    b.screenshot(&shots.join("run.png"));
    let runs = rt.block_on(async {
        let url = format!("{base}/api/runs");
        reqwest::Client::new().get(url).bearer_auth(TOKEN).send().await.unwrap().json::<Value>().await.unwrap()
    });
    let states: Vec<&str> = runs["runs"].as_array().unwrap().iter().map(|r| r["state"].as_str().unwrap()).collect();
    assert_eq!(states, ["completed"; 5], "{runs:#}");
    assert_eq!(runs["runs"][0]["channel_id"], "console");

    // Skills and MCP.
    b.click("a[href='#/skills']");
    b.wait_for("document.querySelector('[data-skill=\"probe\"]')", WAIT);
    let skill = b.eval("document.querySelector('[data-skill=\"probe\"]').innerText");
    let skill = skill.as_str().unwrap();
    for shown in ["probe__echo", "approve (override)", "confirm (override)", "Fuel", "Deadline", "Source", "folder "] {
        assert!(skill.contains(shown), "`{shown}` missing from the skill card:\n{skill}");
    }
    // Reloading from the page: this replica's skills again, said so.
    b.click("#reload");
    let reloaded = "(document.getElementById('reload-status') || {}).innerText";
    b.wait_for(&format!("({reloaded} || '').includes('Reloaded on this replica: probe')"), Duration::from_secs(60));
    b.screenshot(&shots.join("skills.png"));
    b.click("a[href='#/mcp']");
    b.wait_for("document.querySelector('[data-server=\"ask\"]')", WAIT);
    // The server is started with the process; the page shows it ready once it is.
    let deadline = Instant::now() + Duration::from_secs(60);
    while !b.eval("document.querySelector('[data-server=\"ask\"]').innerText").as_str().unwrap().contains("ready") {
        assert!(Instant::now() < deadline, "the ask server never showed ready");
        std::thread::sleep(Duration::from_millis(300));
        b.click("a[href='#/runs']");
        b.click("a[href='#/mcp']");
        b.wait_for("document.querySelector('[data-server=\"ask\"]')", WAIT);
    }
    b.screenshot(&shots.join("mcp.png"));
    // The record: the decisions taken above, newest first, under the head to keep.
    b.click("a[href='#/audit']");
    b.wait_for("/^[0-9]+:[0-9a-f]{64}$/.test((document.getElementById('audit-head') || {}).textContent || '')", WAIT);
    let record = b.eval("document.getElementById('audit').innerText");
    let record = record.as_str().unwrap();
    for shown in ["decided · approved", "decided · denied", "opened", "probe__echo"] {
        assert!(record.contains(shown), "{shown} not on the record page: {record}");
    }
    b.screenshot(&shots.join("record.png"));

    // A phone-width screen: nothing wider than the screen.
    b.resize(390, 844, true);
    b.click("a[href='#/runs']");
    b.wait_for("document.getElementById('runs')", WAIT);
    assert_eq!(b.eval("document.documentElement.scrollWidth <= window.innerWidth"), true, "the runs page overflows");
    b.screenshot(&shots.join("runs-phone.png"));
    b.resize(1280, 900, false);

    // A token that stops working sends the tab back to sign-in.
    b.eval("sessionStorage.setItem('skillhost.token', 'stale'); location.reload(); true");
    b.wait_for("document.readyState === 'complete' && !document.getElementById('signin').hidden", WAIT);
    b.wait_for("document.getElementById('signin-error').textContent.includes('refused')", WAIT);
    assert_eq!(b.eval("sessionStorage.getItem('skillhost.token')"), Value::Null);

    b.pump();
    assert!(b.requests.len() > 10, "{:?}", b.requests);
    for url in &b.requests {
        assert!(
            url.starts_with(&format!("{base}/")) || url.starts_with("data:") || url == "about:blank",
            "a request left the console's origin: {url}"
        );
    }
    let errors: Vec<&String> = b.console.iter().filter(|m| m.starts_with("exception")).collect();
    assert!(errors.is_empty(), "{errors:#?}");
    drop(b);
    drop(api);
}

/// What the page reads, as a script reads it: every mode's runs are listed, a finished run's
/// events replay and end, the routes need the token, the page is served with its policy.
#[test]
fn the_read_routes_serve_scripts() {
    let rt = runtime();
    let replies: Vec<Reply> = vec![
        Answer::default().call("e1", "probe__ctx", json!({})).into(),
        Answer::text(&["Done."]).into(),
        Answer::text(&["Fired."]).into(),
    ];
    let llm = rt.block_on(LlmServer::start(replies));
    let ws = workspace(&llm.url());
    let api = rt.block_on(ApiProcess::start(&ws));
    let base = api.base().to_owned();
    rt.block_on(async {
        let client = reqwest::Client::new();
        let get = |path: &str| client.get(format!("{base}{path}")).bearer_auth(TOKEN);

        let answer: Value = api.trigger("wait=true", "context", "scripts").send().await.unwrap().json().await.unwrap();
        let run_id = answer["run_id"].as_str().expect("the wait=true answer names its run").to_owned();
        let fired: Value = api.trigger("", "fire", "fired").send().await.unwrap().json().await.unwrap();
        let fired_id = fired["run_id"].as_str().expect("the 202 names its run").to_owned();

        // The run's events replay from the start and the stream ends with it.
        let response = get(&format!("/api/runs/{run_id}/events")).send().await.unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(response.headers()["content-type"], "text/event-stream");
        let events = Sse::new(response).rest().await;
        let kinds = kinds(&events);
        assert_eq!(kinds.first(), Some(&"run_started"), "{kinds:?}");
        assert!(kinds.contains(&"tool_started") && kinds.contains(&"tool_completed"), "{kinds:?}");
        assert_eq!(kinds.last(), Some(&"run_completed"), "{kinds:?}");
        let started = events.iter().find(|e| e.kind == "tool_started").unwrap();
        assert_eq!(started.data["tool_name"], "probe__ctx");

        let one: Value = get(&format!("/api/runs/{run_id}")).send().await.unwrap().json().await.unwrap();
        assert_eq!(
            (one["state"].as_str(), one["mode"].as_str(), one["adapter"].as_str()),
            (Some("completed"), Some("wait"), Some("api"))
        );
        assert_eq!(one["tool_calls"], 1);

        // The fired run finishes in the background and is listed too.
        let deadline = Instant::now() + WAIT;
        loop {
            let list: Value = get("/api/runs").send().await.unwrap().json().await.unwrap();
            let fired = list["runs"].as_array().unwrap().iter().find(|r| r["run_id"] == fired_id.as_str()).cloned();
            if fired.as_ref().is_some_and(|r| r["state"] == "completed") {
                assert_eq!(fired.unwrap()["mode"], "fire");
                break;
            }
            assert!(Instant::now() < deadline, "{list:#}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }

        let empty: Value = get("/api/approvals").send().await.unwrap().json().await.unwrap();
        assert_eq!(empty, json!({"approvals": []}));
        let skills: Value = get("/api/skills").send().await.unwrap().json().await.unwrap();
        let probe = skills["skills"].as_array().unwrap().iter().find(|s| s["name"] == "probe").unwrap();
        assert_eq!(probe["grants"]["http_granted"], json!([]), "deny by default");
        assert_eq!(
            (probe["grants"]["state"].as_str(), &probe["grants"]["files"]),
            (Some("conversation"), &Value::Null)
        );
        assert!(probe["limits"]["fuel"].as_u64().unwrap() > 0);
        let mcp: Value = get("/api/mcp").send().await.unwrap().json().await.unwrap();
        assert_eq!(mcp["servers"][0]["name"], "ask");
        assert_eq!(mcp["servers"][0]["transport"], "stdio");

        assert_eq!(get("/api/runs/nope").send().await.unwrap().status(), 404);
        for path in ["/api/runs", "/api/approvals", "/api/questions", "/api/skills", "/api/mcp", "/api/activity"] {
            let status = client.get(format!("{base}{path}")).send().await.unwrap().status();
            assert_eq!(status, 401, "{path} without the token");
        }

        // The page is open (it holds no data) and may only talk to its own origin.
        let page = client.get(format!("{base}/")).send().await.unwrap();
        assert_eq!(page.status(), 200);
        let policy = page.headers()["content-security-policy"].to_str().unwrap().to_owned();
        assert!(policy.contains("connect-src 'self'") && policy.contains("default-src 'none'"), "{policy}");
        assert!(page.text().await.unwrap().contains("/console.js"));
        let script = client.get(format!("{base}/console.js")).send().await.unwrap();
        assert!(script.headers()["content-type"].to_str().unwrap().starts_with("text/javascript"));
    });
}
