//! Turns wait for their skills: a server started with an empty compile cache answers at once
//! (`/healthz`, MCP `initialize`), and a turn that starts while a skill compiles, from the API,
//! Telegram or Slack, waits for it and runs with every tool (the model's first request offers
//! the compiling skill's tool, whose approval is asked and whose call runs); past
//! `engine.session.skills_wait_seconds` it fails naming the skill; an MCP `tools/call` of the
//! compiling skill's tool waits instead of answering `unknown tool`; an on-demand skill is
//! waited for only when `load_skill` names it; and `startup` runs once per skill when the
//! compiled skills join those serving.
//!
//! Each test has a compile cache of its own, empty, so that `word_stats` (Python: tens of
//! seconds of compiling) is compiling when the turn starts. Ordering, not timing: nothing
//! rests on how long a compile takes beyond "longer than sending one request".

mod support;

use serde_json::{Value, json};
use skillhost_tests::api_client::Sse;
use skillhost_tests::llm_server::{Answer, LlmServer, Reply};
use skillhost_tests::slack_server::SlackServer;
use skillhost_tests::telegram_server::TelegramServer;
use skillhost_tests::{Workspace, guests};
use std::time::{Duration, Instant};
use support::api::ApiProcess;
use support::run::Running;

/// How long a compile may take on a loaded 2-core machine (the tests never wait this long
/// unless something is wrong).
const COMPILE: Duration = Duration::from_secs(300);
const TOOL: &str = "word_stats__count_words";

/// A workspace with `word_stats` in `skills/`, a compile cache of its own (empty) and a
/// config ending in `extra`.
fn cold(extra: &str) -> Workspace {
    cold_with("", extra)
}

/// [`cold`] with `skills_extra` in the `skills` block.
fn cold_with(skills_extra: &str, extra: &str) -> Workspace {
    let ws = Workspace::new();
    ws.add_skill("skills", "word_stats", guests::WORD_STATS, "");
    let yaml = format!(
        "skills:\n  paths: [skills]\n  builtins: []\n{skills_extra}sandbox:\n  cache_dir: cache\nstate:\n  filesystem: {{path: state}}\n{extra}"
    );
    std::fs::write(ws.path().join("config.yaml"), yaml).unwrap();
    ws
}

fn llm_yaml(llm: &LlmServer) -> String {
    format!(
        "llm:\n  provider: anthropic\n  model: test-model\n  max_tokens: 500\n  anthropic: {{api_key: test, base_url: '{}'}}\n",
        llm.url()
    )
}

const GATED: &str = "human:\n  overrides: {word_stats__count_words: approve}\n";

fn count() -> Reply {
    Answer::default().call("c1", TOOL, json!({"text": "one two two"})).into()
}

/// The tool names the model was offered in request `n`.
fn offered(llm: &LlmServer, n: usize) -> Vec<String> {
    let body = llm.body(n);
    body["tools"].as_array().into_iter().flatten().filter_map(|t| t["name"].as_str().map(str::to_owned)).collect()
}

/// An approval-v1 run's stream, read without the helpers' 30 s request timeout (the run
/// waits for a compile).
async fn stream(api: &ApiProcess, message: &str, channel: &str) -> Sse {
    let url = format!("{}/api/trigger?wait=1&stream=approval-v1", api.base());
    let body = json!({"message": message, "channel_id": channel});
    let response = reqwest::Client::new().post(url).bearer_auth(support::api::TOKEN).json(&body).send().await.unwrap();
    assert_eq!(response.status(), 200, "{}", api.stderr());
    Sse::new(response)
}

async fn readyz(api: &ApiProcess) -> u16 {
    reqwest::get(format!("{}/readyz", api.base())).await.unwrap().status().as_u16()
}

async fn bounded<T>(what: &str, future: impl Future<Output = T>) -> T {
    tokio::time::timeout(COMPILE, future).await.unwrap_or_else(|_| panic!("{what}: no end in {COMPILE:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_api_run_started_while_its_skill_compiles_waits_and_asks_that_skills_approval() {
    let llm = LlmServer::start(vec![count(), Answer::text(&["Counted."]).into()]).await;
    let ws = cold(&format!("{}{GATED}", llm_yaml(&llm)));
    let api = ApiProcess::serving(&ws).await;
    assert_eq!(readyz(&api).await, 503, "word_stats compiles");

    let mut stream = stream(&api, "count these words", "c").await;
    let first = stream.next().await.expect("an event at once");
    assert_eq!(first.kind, "run_started", "{first:?}");
    // The server answers meanwhile; the model is not asked before the skill is there.
    api.healthz().await;
    assert!(llm.requests().is_empty(), "the turn waits for its skills");
    let asked = bounded("approval", stream.until("approval_requested")).await;
    let asked = &asked.last().unwrap().data;
    assert_eq!(asked["tool_name"], TOOL, "{asked}");
    assert!(offered(&llm, 0).contains(&TOOL.to_owned()), "offered from the first request: {:?}", offered(&llm, 0));
    assert_eq!(readyz(&api).await, 200);

    let decided = api.decide(asked["approval_id"].as_str().unwrap(), &json!({"approved": true})).send().await.unwrap();
    assert_eq!(decided.status(), 200);
    let events = bounded("completion", stream.until("run_completed")).await;
    assert_eq!(events.last().unwrap().data["text"], "Counted.", "{events:?}");
    let result = &support::tool_results(&llm, 1)[0];
    assert_eq!(result["is_error"], false, "{result}");
    assert!(result["content"].to_string().contains("two"), "{result}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_wait_a_run_fails_naming_the_skill_still_compiling() {
    let llm = LlmServer::start(vec![Answer::text(&["never"]).into()]).await;
    let ws = cold(&format!("{}engine:\n  session: {{skills_wait_seconds: 0}}\n", llm_yaml(&llm)));
    let api = ApiProcess::serving(&ws).await;
    assert_eq!(readyz(&api).await, 503, "word_stats compiles");

    let waited = api.trigger("wait=true", "count", "w").send().await.unwrap();
    assert_eq!(waited.status(), 503);
    let body: Value = waited.json().await.unwrap();
    let error = body["error"].as_str().unwrap();
    assert!(error.contains("`word_stats` is still compiling") && error.contains("skills_wait_seconds"), "{error}");

    let mut stream = stream(&api, "count", "s").await;
    let events = stream.rest().await;
    let kinds: Vec<&str> = events.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(kinds, ["run_started", "run_failed"], "{events:?}");
    assert!(events[1].data["error"].as_str().unwrap().contains("`word_stats` is still compiling"), "{events:?}");
    assert!(llm.requests().is_empty(), "no partial tool set was offered");
}

#[test]
fn an_mcp_call_of_a_compiling_skills_tool_waits_and_answers() {
    let ws = cold("");
    let mut raw = support::raw::Raw::start(&ws);
    raw.initialize("2025-11-25");
    let call = json!({"name": TOOL, "arguments": {"text": "one two two"}});
    raw.send(json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": call}));
    let answer = loop {
        let message = raw.next_within(COMPILE);
        if message["id"] == 9 {
            break message;
        }
    };
    assert_eq!(answer["result"]["isError"], false, "not `unknown tool`: {answer}");
    assert!(answer["result"]["content"].to_string().contains("two"), "{answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_telegram_message_during_the_compile_waits_typing_and_asks_in_the_chat() {
    const TOKEN: &str = "4242000:ABCdefGHIjklMNOpqrSTUvwxyz_0123456";
    const CHAT: i64 = 4242;
    let llm = LlmServer::start(vec![count(), Answer::text(&["Counted."]).into()]).await;
    let telegram = TelegramServer::start(TOKEN).await;
    let adapter = format!(
        "adapter:\n  type: telegram\n  telegram:\n    bot_token: '{TOKEN}'\n    allowed_chat_ids: [{CHAT}]\n    base_url: '{}'\n",
        telegram.base_url()
    );
    let ws = cold(&format!("{}{adapter}{GATED}", llm_yaml(&llm)));
    let running = Running::start(ws.path(), &[], &[]);

    telegram.send_text(CHAT, 7, "count these words");
    telegram.wait_for_call("sendChatAction", |p| p["action"] == "typing", COMPILE).await;
    let prompt = telegram.wait_for_message(CHAT, |m| !m.buttons().is_empty(), COMPILE).await;
    assert!(prompt.text.contains(TOOL), "{}", prompt.text);
    assert!(running.stderr().contains("compiling in the background: word_stats"), "{}", running.stderr());
    assert!(offered(&llm, 0).contains(&TOOL.to_owned()), "{:?}", offered(&llm, 0));
    let approve = prompt.buttons().into_iter().find(|d| d.starts_with("a:")).unwrap();
    telegram.click(CHAT, 7, prompt.message_id, &approve);
    telegram.wait_for_message(CHAT, |m| m.text == "Counted.", COMPILE).await;
    assert_eq!(support::tool_results(&llm, 1)[0]["is_error"], false);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slack_mention_during_the_compile_waits_and_asks_in_its_thread() {
    let llm = LlmServer::start(vec![count(), Answer::text(&["Counted."]).into()]).await;
    let slack = SlackServer::start().await;
    let adapter = format!(
        "adapter:\n  type: slack\n  slack:\n    bot_token: '{}'\n    app_token: '{}'\n    base_url: '{}'\n",
        SlackServer::BOT_TOKEN,
        SlackServer::APP_TOKEN,
        slack.api_url()
    );
    let ws = cold(&format!("{}{adapter}{GATED}", llm_yaml(&llm)));
    let running = Running::start(ws.path(), &[], &[]);
    slack.wait_connected(1, COMPILE).await;

    let sent = slack.mention("C1", "U1", "count these words");
    let has_approve = |m: &skillhost_tests::slack_server::SlackMessage| support::slack_button(m, "approve").is_some();
    let prompt = slack.wait_for_message("C1", has_approve, COMPILE).await;
    assert!(prompt.text.contains(TOOL), "{}", prompt.text);
    assert!(slack.reactions("C1", &sent.ts).contains(&"eyes".to_owned()), "working meanwhile");
    assert!(running.stderr().contains("compiling in the background: word_stats"), "{}", running.stderr());
    assert!(offered(&llm, 0).contains(&TOOL.to_owned()), "{:?}", offered(&llm, 0));
    let value = support::slack_button(&prompt, "approve").unwrap();
    slack.click("C1", "U1", &prompt.ts, "approve", &value);
    slack.wait_for_message("C1", |m| m.text.contains("Counted."), COMPILE).await;
    assert_eq!(support::tool_results(&llm, 1)[0]["is_error"], false);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_on_demand_skill_is_waited_for_only_when_load_skill_names_it() {
    let load = Answer::default().call("l1", "load_skill", json!({"skill": "word_stats"}));
    let llm = LlmServer::start(vec![load.into(), count(), Answer::text(&["Counted."]).into()]).await;
    let ws = cold_with("  loading: on_demand\n", &llm_yaml(&llm));
    // A SKILL.md skill, so that it can load on demand.
    let dir = ws.path().join("skills/word_stats");
    std::fs::remove_file(dir.join("prompt.md")).unwrap();
    let skill_md =
        "---\nname: word_stats\ndescription: Counts the words of a text.\n---\nUse count_words for word counts.\n";
    std::fs::write(dir.join("SKILL.md"), skill_md).unwrap();
    let api = ApiProcess::serving(&ws).await;

    let mut stream = stream(&api, "count these words", "o").await;
    // The turn did not wait: the model was asked while the skill still compiled, with the
    // skill listed to load and its tool not offered yet.
    let started = Instant::now();
    while llm.requests().is_empty() {
        assert!(started.elapsed() < COMPILE, "{}", api.stderr());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(readyz(&api).await, 503, "still compiling when the model was first asked");
    let system = llm.body(0)["system"].to_string();
    assert!(system.contains("word_stats") && system.contains("Counts the words"), "{system}");
    assert!(!offered(&llm, 0).contains(&TOOL.to_owned()), "{:?}", offered(&llm, 0));

    let events = bounded("completion", stream.until("run_completed")).await;
    assert_eq!(events.last().unwrap().data["text"], "Counted.", "{events:?}");
    let loaded = &support::tool_results(&llm, 1)[0];
    assert_eq!(loaded["is_error"], false, "{loaded}");
    assert!(loaded["content"].to_string().contains(TOOL), "its tools, once joined: {loaded}");
    assert!(offered(&llm, 1).contains(&TOOL.to_owned()), "offered from the next step on: {:?}", offered(&llm, 1));
    let counted = &support::tool_results(&llm, 2)[0];
    assert_eq!(counted["is_error"], false, "{counted}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn startup_runs_once_per_skill_when_the_compiled_skills_join() {
    let ws = cold(
        "adapter:\n  type: api\nllm:\n  provider: anthropic\n  model: m\n  anthropic: {api_key: k, base_url: 'http://127.0.0.1:9'}\n",
    );
    // `hooks_all` (it exports `startup`) is in the cache before the start; word_stats is not.
    std::fs::remove_dir_all(ws.path().join("skills/word_stats")).unwrap();
    ws.add_skill("skills", "hooks_all", guests::HOOKS_ALL, "");
    let validated = support::skillhost(&ws, &["skill", "validate"], "");
    assert_eq!(validated.code, 0, "{}", validated.stderr);
    ws.add_skill("skills", "word_stats", guests::WORD_STATS, "");
    let running =
        Running::start(ws.path(), &["--adapter", "api"], &[("SKILLHOST_UI_TOKEN", "t"), ("SKILLHOST_UI_PORT", "0")]);
    let started = Instant::now();
    while !running.stderr().contains("every skill is ready") {
        assert!(started.elapsed() < COMPILE, "{}", running.stderr());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(running.stderr().contains("compiling in the background: word_stats"), "{}", running.stderr());
    let ran = running.stderr().matches("skill `hooks_all`: startup ran").count();
    assert_eq!(ran, 1, "{}", running.stderr());
}
