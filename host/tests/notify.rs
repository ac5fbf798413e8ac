//! Skills that speak first, through the real binary: a `[schedule]` runs the skill's
//! `scheduled` export while `skillhost run` serves, and the `notify` import posts through the
//! agent's own Slack and Telegram bots (scripted platforms over real HTTP and WebSocket) to the
//! destinations the operator granted, and nowhere else.

mod support;

use serde_json::{Value, json};
use skillhost_tests::llm_server::{Answer, LlmServer};
use skillhost_tests::slack_server::{ChannelFlags, SlackMessage, SlackServer};
use skillhost_tests::telegram_server::TelegramServer;
use skillhost_tests::{Workspace, guests};
use std::time::Duration;
use support::run::Running;

const WAIT: Duration = Duration::from_secs(40);
const TOKEN: &str = "4242000:ABCdefGHIjklMNOpqrSTUvwxyz_0123456";
const CHAT: i64 = 4242;

fn alerter_manifest() -> String {
    std::fs::read_to_string(support::repo().join("tests/guests/alerter/skill.toml")).unwrap()
}

/// `hooks_loop` (its `work` gated at `approve`) and `alerter` with `config` and `grant`,
/// schedules allowed every second, served in Slack and Telegram.
fn workspace(llm: &LlmServer, slack: &SlackServer, telegram: &TelegramServer, config: Value, grant: &str) -> Workspace {
    let yaml = format!(
        "llm:\n  provider: anthropic\n  model: test-model\n  max_tokens: 500\n  anthropic: {{api_key: test, base_url: '{}'}}\n\
         adapter:\n  types: [slack, telegram]\n  slack:\n    bot_token: ${{SLACK_BOT_TOKEN}}\n    app_token: ${{SLACK_APP_TOKEN}}\n    base_url: '{}'\n\
         \x20 telegram:\n    bot_token: ${{TELEGRAM_BOT_TOKEN}}\n    allowed_chat_ids: [{CHAT}]\n    base_url: '{}'\n\
         human:\n  overrides: {{hooks_loop__work: approve}}\n",
        llm.url(),
        slack.api_url(),
        telegram.base_url()
    );
    let ws = support::workspace(&yaml, false);
    ws.add_skill("skills", "alerter", guests::ALERTER, &alerter_manifest());
    let extra = format!(
        "  schedule_minimum: 1s\n  config:\n    alerter: {config}\n  grants:\n    alerter: {{notify: {grant}}}\n"
    );
    let path = ws.path().join("config.yaml");
    let yaml = std::fs::read_to_string(&path).unwrap().replace("  builtins: []\n", &format!("  builtins: []\n{extra}"));
    std::fs::write(path, yaml).unwrap();
    ws
}

async fn run(ws: &Workspace, slack: &SlackServer) -> Running {
    let running = Running::start(
        ws.path(),
        &[],
        &[
            ("SLACK_BOT_TOKEN", SlackServer::BOT_TOKEN),
            ("SLACK_APP_TOKEN", SlackServer::APP_TOKEN),
            ("TELEGRAM_BOT_TOKEN", TOKEN),
        ],
    );
    slack.wait_connected(1, WAIT).await;
    running
}

fn texts(messages: &[SlackMessage]) -> Vec<String> {
    messages.iter().map(|m| m.text.clone()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scheduled_alerts_reach_the_granted_chats_only_and_a_looping_run_does_not_stop_the_next() {
    let llm = LlmServer::start(vec![]).await;
    let (slack, telegram) = (SlackServer::start().await, TelegramServer::start(TOKEN).await);
    let config = json!({"to": ["slack:C0ALERTS", "telegram:4242", "slack:C0OTHER"], "loop_on": [2]});
    let ws = workspace(&llm, &slack, &telegram, config, "[slack:C0ALERTS, telegram:4242]");
    let running = run(&ws, &slack).await;

    // Run 2 loops until its deadline; run 3 still comes.
    slack.wait_for_message("C0ALERTS", |m| m.text == "alert 3", WAIT).await;
    telegram.wait_for_message(CHAT, |m| m.text == "alert 3", WAIT).await;
    let alerts = texts(&slack.messages("C0ALERTS"));
    assert_eq!(alerts[..2], ["alert 1", "alert 3"], "run 2 sent nothing: {alerts:?}");
    assert!(slack.messages("C0ALERTS").iter().all(|m| m.thread_ts.is_none()), "top-level posts");
    let sent: Vec<String> = telegram.messages(CHAT).iter().map(|m| m.text.clone()).collect();
    assert_eq!(sent[..2], ["alert 1", "alert 3"], "{sent:?}");
    assert!(slack.messages("C0OTHER").is_empty(), "an ungranted channel gets nothing");
    assert!(slack.calls_to("chat.postMessage").iter().all(|c| c.params["channel"] != "C0OTHER"));

    let log = running.stderr();
    assert!(log.contains("slack:C0OTHER is not granted to skill `alerter` (skills.grants.alerter.notify)"), "{log}");
    assert!(log.contains("skill `alerter`: scheduled run 2 failed (1 of 2 so far)"), "{log}");
    assert!(log.contains("deadline"), "the loop ended at its deadline: {log}");
    assert!(!log.contains("scheduled run 1 failed") && !log.contains("scheduled run 3 failed"), "{log}");
    assert!(llm.requests().is_empty(), "no turn: nothing woke the agent");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_woken_agent_looks_into_the_alert_in_its_thread_with_an_approval() {
    let work = Answer::default().call("w1", "hooks_loop__work", json!({"disk": "db-1"}));
    let llm = LlmServer::start(vec![work.into(), Answer::text(&["Disk on db-1 ", "cleaned."]).into()]).await;
    let (slack, telegram) = (SlackServer::start().await, TelegramServer::start(TOKEN).await);
    let config = json!({"wake_on": 1, "wake_to": "slack:C0ALERTS", "wake_text": "disk full on db-1"});
    let ws = workspace(&llm, &slack, &telegram, config, "[slack:C0ALERTS]");
    let running = run(&ws, &slack).await;

    let alert = slack.wait_for_message("C0ALERTS", |m| m.text == "alert 1: disk full on db-1", WAIT).await;
    let in_thread = |m: &SlackMessage| m.thread_ts.as_deref() == Some(alert.ts.as_str());
    let prompt = slack
        .wait_for_message("C0ALERTS", |m| in_thread(m) && support::slack_button(m, "approve").is_some(), WAIT)
        .await;
    assert!(prompt.text.contains("hooks_loop__work"), "{}", prompt.text);
    slack.click("C0ALERTS", "U1", &prompt.ts, "approve", &support::slack_button(&prompt, "approve").unwrap());
    slack.wait_for_message("C0ALERTS", |m| in_thread(m) && m.text.contains("cleaned"), WAIT).await;

    let asked = llm.body(0);
    let last = asked["messages"].as_array().unwrap().last().unwrap().to_string();
    assert!(last.contains("alert 1: disk full on db-1"), "the alert is the incoming message: {last}");
    assert_eq!(support::tool_results(&llm, 1)[0]["is_error"], json!(false), "the approved call ran");
    assert!(!running.stderr().contains("panicked"), "{}", running.stderr());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_external_channel_guard_holds_for_a_skills_message() {
    let llm = LlmServer::start(vec![]).await;
    let (slack, telegram) = (SlackServer::start().await, TelegramServer::start(TOKEN).await);
    slack.set_channel("C0EXT", ChannelFlags { is_ext_shared: true, ..Default::default() });
    let config = json!({"to": ["slack:C0EXT", "telegram:4242"]});
    let ws = workspace(&llm, &slack, &telegram, config, "[slack:C0EXT, telegram:4242]");
    let path = ws.path().join("config.yaml");
    let yaml = std::fs::read_to_string(&path).unwrap().replacen(
        "    base_url: 'http",
        "    allow_posting_in_external_channels: false\n    base_url: 'http",
        1,
    );
    std::fs::write(path, yaml).unwrap();
    let running = run(&ws, &slack).await;

    telegram.wait_for_message(CHAT, |m| m.text == "alert 2", WAIT).await;
    assert!(slack.messages("C0EXT").is_empty(), "nothing posted in the external channel");
    let log = running.stderr();
    assert!(log.contains("channel C0EXT is external"), "the skill hears why: {log}");
}

/// `skillhost call` runs no chat adapter: a granted destination is unavailable there, an
/// ungranted one denied, and a skill whose manifest does not ask for notify is denied first.
#[test]
fn outside_run_a_message_is_refused_with_the_reason() {
    let ws = Workspace::new();
    ws.add_skill("skills", "alerter", guests::ALERTER, &alerter_manifest());
    let asks_nothing = alerter_manifest().replace("notify = true", "");
    ws.add_skill("skills", "quiet", guests::ALERTER, &asks_nothing);
    let yaml = "skills:\n  paths: [skills]\n  builtins: []\n  grants:\n    alerter: {notify: ['slack:C0ALERTS']}\n    \
                quiet: {notify: ['slack:C0ALERTS']}\nstate:\n  filesystem: {path: state}\n";
    std::fs::write(ws.path().join("config.yaml"), yaml).unwrap();
    let call = |tool: &str, input: Value| {
        let out = support::skillhost(&ws, &["call", tool, &input.to_string()], "");
        assert_eq!(out.code, 1, "the tool failed: {}{}", out.stdout, out.stderr);
        out.stdout
    };
    let granted = call("alerter__send", json!({"destination": "slack:C0ALERTS", "text": "hi"}));
    assert!(granted.contains("unavailable: no slack adapter serves this agent in this process"), "{granted}");
    let other = call("alerter__send", json!({"destination": "telegram:99", "text": "hi"}));
    assert!(other.contains("denied: telegram:99 is not granted to skill `alerter`"), "{other}");
    let bad = call("alerter__send", json!({"destination": "mail:ops@example.com", "text": "hi"}));
    assert!(bad.contains("invalid: `mail:ops@example.com`: unknown platform `mail`"), "{bad}");
    let empty = call("alerter__send", json!({"destination": "slack:C0ALERTS", "text": " "}));
    assert!(empty.contains("invalid: the text is empty"), "{empty}");
    let quiet = call("quiet__send", json!({"destination": "slack:C0ALERTS", "text": "hi"}));
    assert!(quiet.contains("denied: skill `quiet` does not ask for notify"), "{quiet}");
}

/// A `[schedule]` on a skill that does not export `scheduled` is a load problem; a bad
/// interval or grant is a config error naming the key.
#[test]
fn schedules_and_grants_are_checked_where_they_are_written() {
    let ws = support::workspace("", false);
    let manifest = format!("{}\n[schedule]\nevery = \"1m\"\n", support::manifest());
    ws.add_skill("skills", "hooks_loop", guests::HOOKS_LOOP, &manifest);
    let out = support::skillhost(&ws, &["skill", "validate"], "");
    assert_ne!(out.code, 0);
    let said = format!("{}{}", out.stdout, out.stderr);
    assert!(said.contains("skill.toml has [schedule], but the component does not export `scheduled`"), "{said}");

    let ws = support::workspace("", false);
    let path = ws.path().join("config.yaml");
    let base = std::fs::read_to_string(&path).unwrap();
    for (extra, expected) in [
        ("  schedule_minimum: soon\n", "skills.schedule_minimum"),
        ("  grants:\n    hooks_loop: {notify: ['C0ALERTS']}\n", "not a destination"),
        ("  grants:\n    hooks_loop: {notify: ['slack:general']}\n", "is not a Slack channel id"),
    ] {
        std::fs::write(&path, base.replace("  builtins: []\n", &format!("  builtins: []\n{extra}"))).unwrap();
        let out = support::skillhost(&ws, &["skill", "list"], "");
        assert_eq!(out.code, 2, "{extra}: {}{}", out.stdout, out.stderr);
        assert!(out.stderr.contains(expected), "{extra}: {}", out.stderr);
    }
}

/// The Python SDK, the JavaScript SDK and the mithai shim each expose the schedule and
/// `notify`: three skills built from source by `skill build`, each posting its alert in the
/// channel granted to it (the mithai one through `bind`'s `adapter.send`, naming the channel
/// by its bare id).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_sdk_schedules_and_notifies() {
    let package = support::repo().join("sdk-js/node_modules/@bytecodealliance/componentize-js/package.json");
    assert!(package.is_file(), "componentize-js is missing: run `npm ci --prefix sdk-js` (as .ci/run does)");
    let llm = LlmServer::start(vec![]).await;
    let slack = SlackServer::start().await;
    let ws = Workspace::new();
    let manifest = "[capabilities]\nnotify = true\n[schedule]\nevery = \"1s\"\n";
    let skills: [(&str, &str, &str); 3] = [
        (
            "py_watch",
            "app.py",
            "from skillhost import notify, tool\n\n\n@tool\ndef ping() -> str:\n    \"\"\"Say pong.\"\"\"\n    return \"pong\"\n\n\n\
             def scheduled(config):\n    notify.send(config[\"to\"], \"python alert\")\n",
        ),
        (
            "js_watch",
            "app.js",
            "import { notify, tool } from \"./skillhost.js\";\n\
             export const tools = [tool({ name: \"ping\", description: \"Say pong.\", input: {}, run() { return \"pong\"; } })];\n\
             export function scheduled(config) { notify.send(config.to, \"js alert\"); }\n",
        ),
        (
            "mithai_watch",
            "tools.py",
            "TOOLS = [{\"name\": \"ping\", \"description\": \"Say pong.\", \"input_schema\": {\"type\": \"object\", \"properties\": {}}}]\n\
             _adapter = None\n\n\ndef bind(engine, adapter):\n    global _adapter\n    _adapter = adapter\n\n\n\
             def handle(name, input, ctx):\n    return \"pong\"\n\n\n\
             def scheduled(config):\n    _adapter.send(config[\"to\"], \"mithai alert\")\n",
        ),
    ];
    for (name, file, source) in skills {
        let dir = ws.path().join("skills").join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(file), source).unwrap();
        std::fs::write(dir.join("skill.toml"), manifest).unwrap();
        std::fs::write(dir.join("prompt.md"), format!("{name}: alerts.\n")).unwrap();
        // componentize-js as `.ci/run` installs it (`npm ci --prefix sdk-js`); a build is not
        // bounded by a test limit: a first componentize-py or -js run on a slow machine is slow.
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_skillhost"))
            .current_dir(ws.path())
            .args(["skill", "build", &format!("skills/{name}")])
            .env("SKILLHOST_COMPONENTIZE_JS", support::repo().join("sdk-js"))
            .output()
            .unwrap();
        let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "{name}: {said}");
    }
    let out = support::skillhost(&ws, &["skill", "list"], "");
    assert_eq!(out.stdout.matches("hooks: scheduled").count(), 3, "{}{}", out.stdout, out.stderr);
    // Below the default minimum (10s): raised to it, and said so.
    assert_eq!(out.stdout.matches("schedule: every 10s (under `skillhost run`)").count(), 3, "{}", out.stdout);
    assert!(
        out.stderr.contains("[schedule] every = \"1s\" is below skills.schedule_minimum; it runs every 10s"),
        "{}",
        out.stderr
    );
    let yaml = format!(
        "llm:\n  provider: anthropic\n  model: test-model\n  max_tokens: 500\n  anthropic: {{api_key: test, base_url: '{}'}}\n\
         adapter:\n  type: slack\n  slack:\n    bot_token: ${{SLACK_BOT_TOKEN}}\n    app_token: ${{SLACK_APP_TOKEN}}\n    base_url: '{}'\n\
         skills:\n  paths: [skills]\n  builtins: []\n  schedule_minimum: 1s\n\
         \x20 config:\n    py_watch: {{to: 'slack:C0PY'}}\n    js_watch: {{to: 'slack:C0JS'}}\n    mithai_watch: {{to: C0MITHAI}}\n\
         \x20 grants:\n    py_watch: {{notify: ['slack:C0PY']}}\n    js_watch: {{notify: ['slack:C0JS']}}\n    \
         mithai_watch: {{notify: ['slack:C0MITHAI']}}\nstate:\n  filesystem: {{path: state}}\n",
        llm.url(),
        slack.api_url()
    );
    std::fs::write(ws.path().join("config.yaml"), yaml).unwrap();
    let running = run(&ws, &slack).await;
    for (channel, text) in [("C0PY", "python alert"), ("C0JS", "js alert"), ("C0MITHAI", "mithai alert")] {
        slack.wait_for_message(channel, |m| m.text == text, WAIT).await;
    }
    assert!(!running.stderr().contains("not sent"), "{}", running.stderr());
}
