//! The Slack adapter through the real binary: `skillhost run` against a scripted Slack (the
//! Web API over HTTP, Socket Mode envelopes over a real WebSocket) and a scripted LLM, driven
//! through whole conversations as a person in Slack would.

mod support;

use serde_json::{Value, json};
use skillhost_tests::Workspace;
use skillhost_tests::llm_server::{Answer, LlmServer, Reply};
use skillhost_tests::slack_server::{ChannelFlags, SlackMessage, SlackServer};
use std::time::Duration;
use support::run::Running;

const WAIT: Duration = Duration::from_secs(30);

/// A workspace with `hooks_loop` (its `work` tool gated at `level`), served in Slack.
fn workspace(llm: &LlmServer, slack: &SlackServer, level: &str, slack_extra: &str, extra: &str) -> Workspace {
    let yaml = format!(
        "llm:\n  provider: anthropic\n  model: test-model\n  max_tokens: 500\n  anthropic: {{api_key: test, base_url: '{}'}}\n\
         adapter:\n  type: slack\n  slack:\n    bot_token: ${{SLACK_BOT_TOKEN}}\n    app_token: ${{SLACK_APP_TOKEN}}\n    base_url: '{}'\n{slack_extra}\
         human:\n  overrides: {{hooks_loop__work: {level}}}\n{extra}",
        llm.url(),
        slack.api_url()
    );
    support::workspace(&yaml, false)
}

/// `skillhost run` in `ws`, connected to `slack` (bounded wait).
async fn run(ws: &Workspace, slack: &SlackServer) -> Running {
    let running = Running::start(
        ws.path(),
        &[],
        &[("SLACK_BOT_TOKEN", SlackServer::BOT_TOKEN), ("SLACK_APP_TOKEN", SlackServer::APP_TOKEN)],
    );
    slack.wait_connected(1, WAIT).await;
    running
}

/// The message in `channel` that has a button with `action`, and that button's value.
async fn prompt(slack: &SlackServer, channel: &str, action: &str) -> (SlackMessage, String) {
    let has = |m: &SlackMessage| support::slack_button(m, action).is_some();
    let message = slack.wait_for_message(channel, has, WAIT).await;
    let value = support::slack_button(&message, action).unwrap();
    (message, value)
}

fn work() -> Reply {
    Answer::default().call("w1", "hooks_loop__work", json!({"n": 1})).into()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mention_asks_in_its_thread_and_the_approved_call_runs() {
    let llm = LlmServer::start(vec![work(), Answer::text(&["All ", "**done**."]).into()]).await;
    let slack = SlackServer::start().await;
    let ws = workspace(&llm, &slack, "approve", "", "");
    let running = run(&ws, &slack).await;

    let sent = slack.mention("C1", "U1", "please work");
    assert!(slack.wait_for_ack(&sent.envelope_id, WAIT).await.is_none(), "a plain acknowledgement");
    let (prompt, id) = prompt(&slack, "C1", "approve").await;
    assert_eq!(prompt.thread_ts.as_deref(), Some(sent.ts.as_str()), "asked in the mention's thread");
    assert!(prompt.text.contains("hooks_loop__work") && prompt.text.contains("\"n\": 1"), "{}", prompt.text);
    assert!(slack.reactions("C1", &sent.ts).contains(&"eyes".to_owned()), "working");

    slack.click("C1", "U1", &prompt.ts, "approve", &id);
    let answer = slack.wait_for_message("C1", |m| m.text.contains("All *done*."), WAIT).await;
    assert_eq!(answer.thread_ts.as_deref(), Some(sent.ts.as_str()), "answered in the thread");
    let settled =
        slack.wait_for_message("C1", |m| m.ts == prompt.ts && m.text.contains("Approved by <@U1>"), WAIT).await;
    assert!(support::slack_button(&settled, "approve").is_none(), "the buttons are gone: {settled:?}");
    slack.wait_for_message("C1", |m| m.text.contains("✓ `hooks_loop__work`"), WAIT).await;
    let results = support::tool_results(&llm, 1);
    assert_eq!(results[0]["is_error"], json!(false), "the approved call ran: {results:?}");
    let started = std::time::Instant::now();
    while !slack.reactions("C1", &sent.ts).contains(&"white_check_mark".to_owned()) {
        assert!(started.elapsed() < WAIT, "never marked done: {}", running.stderr());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The turn's history is the thread's: the model saw the thread's channel in context.
    assert!(!running.stderr().contains(SlackServer::BOT_TOKEN), "no token in a log line");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_an_approver_decides_and_a_denial_reaches_the_model() {
    let llm = LlmServer::start(vec![work(), Answer::text(&["Not run."]).into()]).await;
    let slack = SlackServer::start().await;
    slack.add_bot_user("U0OTHERBOT");
    let ws = workspace(&llm, &slack, "approve", "    approvers: [U1]\n", "");
    let _running = run(&ws, &slack).await;

    let sent = slack.mention("C1", "U1", "please work");
    let (prompt, id) = prompt(&slack, "C1", "approve").await;
    // Someone outside `approvers`, and a bot: refused where only they see it, still pending.
    slack.click("C1", "U2", &prompt.ts, "approve", &id);
    slack.click_as_bot("C1", "U0OTHERBOT", &prompt.ts, "approve", &id);
    let started = std::time::Instant::now();
    while slack.ephemerals().len() < 2 {
        assert!(started.elapsed() < WAIT, "no refusal: {:?}", slack.ephemerals());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let ephemerals = slack.ephemerals();
    assert!(ephemerals.iter().any(|(_, user, text)| user == "U2" && text.contains("approvers")), "{ephemerals:?}");
    assert!(ephemerals.iter().any(|(_, user, text)| user == "U0OTHERBOT" && text.contains("person")), "{ephemerals:?}");
    assert_eq!(llm.requests().len(), 1, "the call still waits");

    slack.click("C1", "U1", &prompt.ts, "deny", &id);
    slack.wait_for_message("C1", |m| m.text.contains("Not run."), WAIT).await;
    slack.wait_for_message("C1", |m| m.ts == prompt.ts && m.text.contains("Denied by <@U1>"), WAIT).await;
    let results = support::tool_results(&llm, 1);
    assert_eq!(results[0]["is_error"], json!(true), "{results:?}");
    assert!(results[0]["content"].to_string().contains("denied"), "{results:?}");
    let _ = sent;
}

/// An action carrying an approval's id from another channel of the same bot (no
/// `approvers` set, so anyone may decide where it was asked) is refused and decides nothing;
/// the click in the approval's own thread decides it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_action_from_another_channel_of_the_bot_decides_nothing() {
    let llm = LlmServer::start(vec![work(), Answer::text(&["Worked."]).into()]).await;
    let slack = SlackServer::start().await;
    let ws = workspace(&llm, &slack, "approve", "", "");
    let _running = run(&ws, &slack).await;

    slack.mention("C1", "U1", "please work");
    let (prompt, id) = prompt(&slack, "C1", "approve").await;
    slack.click("C2", "U2", &prompt.ts, "approve", &id);
    let started = std::time::Instant::now();
    while slack.ephemerals().is_empty() {
        assert!(started.elapsed() < WAIT, "no refusal: {:?}", slack.ephemerals());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let ephemerals = slack.ephemerals();
    assert!(
        ephemerals
            .iter()
            .any(|(channel, user, text)| channel == "C2" && user == "U2" && text.contains("no longer waiting")),
        "{ephemerals:?}"
    );
    assert_eq!(llm.requests().len(), 1, "the call still waits");

    slack.click("C1", "U1", &prompt.ts, "approve", &id);
    slack.wait_for_message("C1", |m| m.text.contains("Worked."), WAIT).await;
    assert_eq!(support::tool_results(&llm, 1)[0]["is_error"], json!(false), "it ran once decided in its channel");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn confirm_goes_through_the_modal_and_a_wrong_challenge_is_refused() {
    let llm = LlmServer::start(vec![work(), Answer::text(&["Confirmed and done."]).into()]).await;
    let slack = SlackServer::start().await;
    let ws = workspace(&llm, &slack, "confirm", "", "");
    let _running = run(&ws, &slack).await;

    slack.mention("C1", "U1", "please work");
    let (prompt, id) = prompt(&slack, "C1", "confirm").await;
    assert!(support::slack_button(&prompt, "approve").is_none(), "no one-click approval for confirm");
    slack.click("C1", "U1", &prompt.ts, "confirm", &id);
    slack.wait_for_call("views.open", |_| true, WAIT).await;
    let view = slack.views().last().cloned().unwrap();
    let view_id = view["id"].as_str().unwrap().to_owned();

    let refused = slack.submit_view(&view_id, "U1", "confirm");
    let ack = slack.wait_for_ack(&refused, WAIT).await.expect("an error under the input");
    assert_eq!(ack["response_action"], "errors", "{ack}");
    assert_eq!(llm.requests().len(), 1, "still waiting after a wrong challenge");

    let taken = slack.submit_view(&view_id, "U1", "CONFIRM");
    assert!(slack.wait_for_ack(&taken, WAIT).await.is_none(), "the modal closes");
    slack.wait_for_message("C1", |m| m.text.contains("Confirmed and done."), WAIT).await;
    slack.wait_for_message("C1", |m| m.ts == prompt.ts && m.text.contains("Confirmed by <@U1>"), WAIT).await;
    assert_eq!(support::tool_results(&llm, 1)[0]["is_error"], json!(false));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_decision_in_time_is_shown_and_the_call_does_not_run() {
    let llm = LlmServer::start(vec![work(), Answer::text(&["Timed out."]).into()]).await;
    let slack = SlackServer::start().await;
    let ws = workspace(&llm, &slack, "approve", "", "");
    let config = std::fs::read_to_string(ws.path().join("config.yaml")).unwrap();
    let config = config.replace("human:\n", "human:\n  timeout_seconds: 1\n");
    std::fs::write(ws.path().join("config.yaml"), config).unwrap();
    let _running = run(&ws, &slack).await;

    slack.mention("C1", "U1", "please work");
    let (prompt, _) = prompt(&slack, "C1", "approve").await;
    slack.wait_for_message("C1", |m| m.ts == prompt.ts && m.text.contains("No decision in time"), WAIT).await;
    slack.wait_for_message("C1", |m| m.text.contains("Timed out."), WAIT).await;
    assert_eq!(support::tool_results(&llm, 1)[0]["is_error"], json!(true));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_is_answered_by_a_button() {
    let ask =
        Answer::default().call("q1", "human__ask", json!({"question": "Which env?", "choices": ["staging", "prod"]}));
    let llm = LlmServer::start(vec![ask.into(), Answer::text(&["Going with it."]).into()]).await;
    let slack = SlackServer::start().await;
    let ws = workspace(&llm, &slack, "approve", "", "");
    let _running = run(&ws, &slack).await;

    slack.mention("C1", "U1", "deploy");
    let (question, value) = prompt(&slack, "C1", "answer").await;
    assert!(question.text.contains("Which env?"), "{}", question.text);
    // The second choice's button.
    let prod = value.replace(":0", ":1");
    slack.click("C1", "U1", &question.ts, "answer", &prod);
    slack.wait_for_message("C1", |m| m.text.contains("Going with it."), WAIT).await;
    let results = support::tool_results(&llm, 1);
    assert!(results[0]["content"].to_string().contains("prod"), "{results:?}");
}

/// A question without choices is answered by a reply in the thread (no mention needed), and
/// that reply starts no turn of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_free_question_is_answered_by_a_reply_in_the_thread() {
    let ask = Answer::default().call("q1", "human__ask", json!({"question": "Which ticket?"}));
    let llm = LlmServer::start(vec![ask.into(), Answer::text(&["Looking at it."]).into()]).await;
    let slack = SlackServer::start().await;
    let ws = workspace(&llm, &slack, "approve", "", "");
    let _running = run(&ws, &slack).await;

    let sent = slack.mention("C1", "U1", "triage");
    let question = slack.wait_for_message("C1", |m| m.text.contains("Which ticket?"), WAIT).await;
    slack.message("C1", "U1", "OPS-42", Some(&sent.ts));
    slack.wait_for_message("C1", |m| m.text.contains("Looking at it."), WAIT).await;
    let results = support::tool_results(&llm, 1);
    assert!(results[0]["content"].to_string().contains("OPS-42"), "{results:?}");
    let settled = slack.wait_for_message("C1", |m| m.ts == question.ts && m.text.contains("OPS-42"), WAIT).await;
    assert_eq!(settled.thread_ts.as_deref(), Some(sent.ts.as_str()));
    assert_eq!(llm.requests().len(), 2, "the reply answered; it started no turn");
}

/// A skill's form (the `ask` import) is asked in the conversation's thread like any question,
/// and the reply there is the field's answer the tool receives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_skills_form_is_asked_in_the_thread_and_answered_by_a_reply() {
    let form = json!({"form": {"message": "Who is on call?", "schema": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}}});
    let ask = Answer::default().call("a1", "probe__ask", json!({"requests": {"oncall": form}}));
    let llm = LlmServer::start(vec![ask.into(), Answer::text(&["Paging them."]).into()]).await;
    let slack = SlackServer::start().await;
    let ws = workspace(&llm, &slack, "approve", "", "");
    ws.add_skill("skills", "probe", skillhost_tests::guests::PROBE, "");
    let _running = run(&ws, &slack).await;

    let sent = slack.mention("C1", "U1", "who is on call?");
    let question = slack.wait_for_message("C1", |m| m.text.contains("Who is on call?"), WAIT).await;
    assert!(question.text.contains("Skill `probe` asks"), "{}", question.text);
    assert_eq!(question.thread_ts.as_deref(), Some(sent.ts.as_str()), "asked in the conversation's thread");
    slack.message("C1", "U1", "Ada", Some(&sent.ts));
    slack.wait_for_message("C1", |m| m.text.contains("Paging them."), WAIT).await;
    let result: Value = serde_json::from_str(support::tool_results(&llm, 1)[0]["content"].as_str().unwrap()).unwrap();
    assert_eq!(result["oncall"], json!({"form": {"action": "accept", "content": {"name": "Ada"}}}), "{result}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_event_is_handled_once_and_a_dropped_socket_is_replaced() {
    let llm = LlmServer::start(vec![work(), Answer::text(&["Once."]).into()]).await;
    let slack = SlackServer::start().await;
    let ws = workspace(&llm, &slack, "approve", "", "");
    let running = run(&ws, &slack).await;

    let sent = slack.mention("C1", "U1", "please work");
    slack.wait_for_ack(&sent.envelope_id, WAIT).await;
    let redelivered = slack.redeliver(&sent, 1);
    slack.wait_for_ack(&redelivered, WAIT).await;
    let (prompt, id) = prompt(&slack, "C1", "approve").await;
    // The socket dies while the turn waits: a new one is opened, and the turn goes on.
    slack.drop_socket();
    slack.wait_connected(2, WAIT).await;
    slack.click("C1", "U1", &prompt.ts, "approve", &id);
    slack.wait_for_message("C1", |m| m.text.contains("Once."), WAIT).await;
    assert_eq!(llm.requests().len(), 2, "one turn, not two: {}", running.stderr());
    let answers = slack.messages("C1").into_iter().filter(|m| m.text.contains("Once.")).count();
    assert_eq!(answers, 1);
    // Slack asks for a refresh: the adapter connects again.
    slack.disconnect("refresh_requested");
    slack.wait_connected(3, WAIT).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limited_post_is_sent_after_retry_after() {
    let llm = LlmServer::start(vec![Answer::text(&["After the limit."]).into()]).await;
    let slack = SlackServer::start().await;
    let ws = workspace(&llm, &slack, "approve", "", "");
    let running = run(&ws, &slack).await;
    slack.rate_limit_next("chat.postMessage", 1);
    slack.mention("C1", "U1", "hello");
    slack.wait_for_message("C1", |m| m.text.contains("After the limit."), WAIT).await;
    let posts = slack.calls_to("chat.postMessage");
    assert!(posts.len() >= 2, "tried again: {posts:?}");
    let gap = posts[1].at.duration_since(posts[0].at);
    assert!(gap >= Duration::from_millis(900), "waited for Retry-After: {gap:?}");
    assert!(running.stderr().contains("rate limit"), "{}", running.stderr());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_external_channel_guard_suppresses_text_but_not_reactions() {
    let replies: Vec<Reply> = (0..5).map(|n| Answer::text(&[&format!("answer {n}")]).into()).collect();
    let gated = Answer::default().call("w9", "hooks_loop__work", json!({}));
    let llm =
        LlmServer::start(replies.into_iter().chain([gated.into(), Answer::text(&["gated end"]).into()]).collect())
            .await;
    let slack = SlackServer::start().await;
    let ext = ChannelFlags { is_shared: true, is_ext_shared: true, ..Default::default() };
    slack.set_channel("CEXT", ext);
    slack.set_channel("CORG", ChannelFlags { is_shared: true, is_org_shared: true, ..Default::default() });
    slack.fail_info("CFAIL", 1000);
    let ws = workspace(&llm, &slack, "approve", "    allow_posting_in_external_channels: false\n", "");
    let running = run(&ws, &slack).await;

    let answered = |channel: &'static str| {
        let slack = &slack;
        async move { slack.wait_for_message(channel, |m| m.text.starts_with("answer"), WAIT).await }
    };
    let external = slack.mention("CEXT", "U1", "one");
    let started = std::time::Instant::now();
    while !slack.reactions("CEXT", &external.ts).contains(&"white_check_mark".to_owned()) {
        assert!(started.elapsed() < WAIT, "reactions still work there: {}", running.stderr());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(slack.messages("CEXT").is_empty(), "nothing posted in an external channel");
    slack.mention("CINT", "U1", "two");
    answered("CINT").await;
    slack.mention("CORG", "U1", "three");
    answered("CORG").await;
    // A failed lookup fails closed, and is not cached: the next message looks again.
    let failed = slack.mention("CFAIL", "U1", "four");
    let started = std::time::Instant::now();
    while !slack.reactions("CFAIL", &failed.ts).contains(&"white_check_mark".to_owned()) {
        assert!(started.elapsed() < WAIT, "{}", running.stderr());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(slack.messages("CFAIL").is_empty());
    assert!(running.stderr().contains("Could not resolve Slack channel info for external posting guard"));
    slack.fail_info("CFAIL", 0);
    slack.mention("CFAIL", "U1", "five");
    answered("CFAIL").await;
    assert!(slack.info_lookups("CFAIL") >= 2, "not cached");
    // An approval cannot be asked in an external channel: the call is refused, not run.
    slack.mention("CEXT", "U1", "gated");
    let started = std::time::Instant::now();
    while llm.requests().len() < 7 {
        assert!(started.elapsed() < WAIT, "{}", running.stderr());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let results = support::tool_results(&llm, 6);
    assert_eq!(results[0]["is_error"], json!(true), "{results:?}");
    assert!(slack.messages("CEXT").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn its_own_and_other_bots_messages_edits_and_deletions_start_nothing() {
    let llm = LlmServer::start(vec![Answer::text(&["Only this."]).into()]).await;
    let slack = SlackServer::start().await;
    let ws = workspace(&llm, &slack, "approve", "    respond: all\n", "");
    let _running = run(&ws, &slack).await;
    let own = slack.own_message("C1", "from the bot itself");
    let bot = slack.bot_message("C1", "B0OTHER", "from another bot");
    slack.wait_for_ack(&own.envelope_id, WAIT).await;
    slack.wait_for_ack(&bot.envelope_id, WAIT).await;
    let edited = slack.edit("C1", &own.ts, "edited");
    let deleted = slack.delete("C1", &own.ts);
    slack.wait_for_ack(&edited.envelope_id, WAIT).await;
    slack.wait_for_ack(&deleted.envelope_id, WAIT).await;
    // With `respond: all`, a person's plain message is answered; a mention of the bot with
    // it (Slack sends both events) only once.
    slack.mention_with_message("C1", "U1", "hello");
    slack.wait_for_message("C1", |m| m.text.contains("Only this."), WAIT).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(llm.requests().len(), 1, "one turn");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_token_stops_the_bot_with_a_clear_line_and_the_api_keeps_serving() {
    let llm = LlmServer::start(vec![]).await;
    let slack = SlackServer::start().await;
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let ws = workspace(&llm, &slack, "approve", "", &format!("ui: {{port: {port}, auth_token: tok}}\n"));
    let config = std::fs::read_to_string(ws.path().join("config.yaml")).unwrap();
    std::fs::write(ws.path().join("config.yaml"), config.replace("type: slack", "types: [slack, api]")).unwrap();
    slack.revoke();
    let mut running = Running::start(
        ws.path(),
        &[],
        &[("SLACK_BOT_TOKEN", SlackServer::BOT_TOKEN), ("SLACK_APP_TOKEN", SlackServer::APP_TOKEN)],
    );
    running.wait_for_log("token_revoked").await;
    running.wait_for_log("stopped with an error").await;
    assert!(running.running(), "the process keeps serving the API");
    let health = reqwest::get(format!("http://127.0.0.1:{port}/healthz")).await.unwrap();
    assert_eq!(health.status(), 200);
    assert!(!running.stderr().contains(SlackServer::BOT_TOKEN));
    let _: Value = json!(null);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slack_telegram_and_the_api_serve_two_agents_each_approval_on_its_own_platform() {
    use skillhost_tests::telegram_server::TelegramServer;
    const TELEGRAM_TOKEN: &str = "4242000:ABCdefGHIjklMNOpqrSTUvwxyz_0123456";
    let replies = vec![
        work(),
        Answer::text(&["slack done"]).into(),
        work(),
        Answer::text(&["telegram done"]).into(),
        Answer::text(&["api done"]).into(),
    ];
    let llm = LlmServer::start(replies).await;
    let slack = SlackServer::start().await;
    let telegram = TelegramServer::start(TELEGRAM_TOKEN).await;
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let yaml = format!(
        "llm:\n  provider: anthropic\n  model: test-model\n  max_tokens: 500\n  anthropic: {{api_key: test, base_url: '{}'}}\n\
         human:\n  overrides: {{hooks_loop__work: approve}}\nagents:\n\
         \x20 ops:\n    adapter:\n      types: [slack, api]\n      slack: {{bot_token: '${{SLACK_BOT_TOKEN}}', app_token: '${{SLACK_APP_TOKEN}}', base_url: '{}'}}\n\
         \x20   ui: {{port: {port}, auth_token: tok}}\n\
         \x20 triage:\n    adapter:\n      type: telegram\n      telegram: {{bot_token: '{TELEGRAM_TOKEN}', allowed_chat_ids: [4242], base_url: '{}'}}\n",
        llm.url(),
        slack.api_url(),
        telegram.base_url()
    );
    let ws = support::workspace(&yaml, false);
    let running = run(&ws, &slack).await;

    // Slack (agent ops): asked and decided in Slack.
    slack.mention("C1", "U1", "please work");
    let (slack_prompt, slack_id) = prompt(&slack, "C1", "approve").await;
    // The agent's console sees the Slack run waiting, and may decide it (by design: the
    // agent's token is the operator's credential).
    let read = |path: &str| {
        let url = format!("http://127.0.0.1:{port}{path}");
        async move {
            reqwest::Client::new().get(url).bearer_auth("tok").send().await.unwrap().json::<Value>().await.unwrap()
        }
    };
    let waiting = read("/api/approvals").await;
    let approval = &waiting["approvals"][0];
    assert_eq!(approval["tool_name"], "hooks_loop__work", "{waiting:#}");
    assert_eq!((approval["adapter"].as_str(), approval["decidable"].as_bool()), (Some("slack"), Some(true)));
    // The same id pressed in Telegram is not Telegram's to decide.
    let (_, query) = {
        let started = std::time::Instant::now();
        while telegram.calls_to("getUpdates").is_empty() {
            assert!(started.elapsed() < WAIT, "{}", running.stderr());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        telegram.click(4242, 7, 1, &format!("a:{slack_id}"))
    };
    let refusal = telegram.wait_for_call("answerCallbackQuery", |p| p["callback_query_id"] == query, WAIT).await;
    assert!(refusal.params["text"].as_str().unwrap().contains("no longer waiting"), "{:?}", refusal.params);
    slack.click("C1", "U1", &slack_prompt.ts, "approve", &slack_id);
    slack.wait_for_message("C1", |m| m.text.contains("slack done"), WAIT).await;

    // Telegram (agent triage): asked and decided in Telegram.
    telegram.send_text(4242, 7, "please work");
    let prompt = telegram.wait_for_message(4242, |m| !m.buttons().is_empty(), WAIT).await;
    let approve = prompt.buttons().into_iter().find(|d| d.starts_with("a:")).unwrap();
    telegram.click(4242, 7, prompt.message_id, &approve);
    telegram.wait_for_message(4242, |m| m.text == "telegram done", WAIT).await;

    // The API of agent ops, beside both.
    let answer: Value = reqwest::Client::new()
        .post(format!("http://127.0.0.1:{port}/api/trigger?wait=true"))
        .bearer_auth("tok")
        .json(&json!({"message": "hi", "channel_id": "api-1"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(answer["text"], "api done", "{answer}");
    let runs = read("/api/runs").await;
    let shown: Vec<(&str, &str, &str)> = runs["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["adapter"].as_str().unwrap(), r["mode"].as_str().unwrap(), r["state"].as_str().unwrap()))
        .collect();
    assert_eq!(shown, [("api", "wait", "completed"), ("slack", "chat", "completed")], "agent ops' runs only: {runs:#}");
    assert_eq!(support::tool_results(&llm, 1)[0]["is_error"], json!(false));
    assert_eq!(support::tool_results(&llm, 3)[0]["is_error"], json!(false));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_handled_before_a_restart_is_not_handled_again() {
    let llm = LlmServer::start(vec![Answer::text(&["First."]).into(), Answer::text(&["Second."]).into()]).await;
    let slack = SlackServer::start().await;
    let ws = workspace(&llm, &slack, "approve", "", "");
    let mut running = run(&ws, &slack).await;
    let sent = slack.mention("C1", "U1", "hello");
    slack.wait_for_message("C1", |m| m.text.contains("First."), WAIT).await;
    running.kill();

    let _running = Running::start(
        ws.path(),
        &[],
        &[("SLACK_BOT_TOKEN", SlackServer::BOT_TOKEN), ("SLACK_APP_TOKEN", SlackServer::APP_TOKEN)],
    );
    slack.wait_connected(2, WAIT).await;
    let again = slack.redeliver(&sent, 3);
    slack.wait_for_ack(&again, WAIT).await;
    let next = slack.mention("C1", "U1", "next");
    // Had the redelivery started a turn, it would have taken "Second.", in the first thread.
    let answer = slack.wait_for_message("C1", |m| m.text.contains("Second."), WAIT).await;
    assert_eq!(answer.thread_ts.as_deref(), Some(next.ts.as_str()), "the redelivered event started nothing");
    assert_eq!(llm.requests().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_streamed_answer_is_edited_at_a_bounded_rate_and_split_cleanly() {
    // 60 deltas, 6,000 characters in all, with a code block in the middle.
    let mut pieces: Vec<String> = (0..30).map(|n| format!("Paragraph {n} {}\n\n", "word ".repeat(19))).collect();
    pieces.push(format!("```\n{}\n```\n\n", "let x = 1;\n".repeat(40)));
    pieces.extend((30..59).map(|n| format!("Paragraph {n} {}\n\n", "word ".repeat(19))));
    let refs: Vec<&str> = pieces.iter().map(String::as_str).collect();
    let llm = LlmServer::start(vec![Answer::text(&refs).into()]).await;
    let slack = SlackServer::start().await;
    let ws = workspace(&llm, &slack, "approve", "", "");
    let _running = run(&ws, &slack).await;
    slack.mention("C1", "U1", "write a lot");
    slack.wait_for_message("C1", |m| m.text.contains("Paragraph 58"), WAIT).await;
    let messages = slack.messages("C1");
    assert!(messages.len() >= 2, "split: {}", messages.len());
    for message in &messages {
        assert!(message.text.chars().count() <= 3900, "{}", message.text.len());
        assert_eq!(message.text.matches("```").count() % 2, 0, "code blocks closed: {}", message.text);
    }
    let writes = slack.calls_to("chat.postMessage").len() + slack.calls_to("chat.update").len();
    assert!(writes < 20, "not one write per delta: {writes}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_frames_and_stray_clicks_change_nothing_and_the_bot_goes_on() {
    let llm = LlmServer::start(vec![Answer::text(&["Still fine."]).into()]).await;
    let slack = SlackServer::start().await;
    let ws = workspace(&llm, &slack, "approve", "", "");
    let running = run(&ws, &slack).await;
    slack.send_raw("not json");
    slack.send_raw(r#"{"type": "events_api"}"#);
    slack.send_raw(r#"{"type": "events_api", "envelope_id": "e1", "payload": {"event": {"type": "app_mention"}}}"#);
    slack.send_raw(r#"{"type": "interactive", "envelope_id": "e2", "payload": {"type": "block_actions"}}"#);
    slack.send_raw(
        r#"{"type": "interactive", "envelope_id": "e3", "payload": {"type": "view_submission", "user": {"id": "U1"}, "view": {"private_metadata": "not json"}}}"#,
    );
    slack.send_raw(r#"{"type": "slash_commands", "envelope_id": "e4", "payload": {}}"#);
    for id in ["e1", "e2", "e3", "e4"] {
        slack.wait_for_ack(id, WAIT).await;
    }
    // A click on an approval that does not exist: refused to that person only.
    slack.click("C1", "U1", "1700000000.999999", "approve", "no-such-approval");
    let started = std::time::Instant::now();
    while slack.ephemerals().is_empty() {
        assert!(started.elapsed() < WAIT, "{}", running.stderr());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(slack.ephemerals()[0].2.contains("no longer waiting"), "{:?}", slack.ephemerals());
    slack.mention("C1", "U1", "are you there?");
    slack.wait_for_message("C1", |m| m.text.contains("Still fine."), WAIT).await;
    assert!(running.stderr().contains("unreadable Socket Mode frame"), "{}", running.stderr());
    assert_eq!(slack.connections(), 1, "the socket was never dropped");
}

/// A tool sees Slack's own ids: the channel, the person, and the thread as a route attribute.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_see_slacks_channel_user_and_thread() {
    let call = Answer::default().call("c1", "probe__ctx", json!({}));
    let llm = LlmServer::start(vec![call.into(), Answer::text(&["seen"]).into()]).await;
    let slack = SlackServer::start().await;
    let ws = workspace(&llm, &slack, "approve", "", "");
    ws.add_skill("skills", "probe", skillhost_tests::guests::PROBE, "");
    let _running = run(&ws, &slack).await;

    let sent = slack.mention("C7", "U42", "who am I?");
    slack.wait_for_message("C7", |m| m.text == "seen", WAIT).await;
    let result = &support::tool_results(&llm, 1)[0];
    let ctx: Value = serde_json::from_str(result["content"].as_str().unwrap()).unwrap();
    assert_eq!(ctx["channel_id"], "C7", "{ctx}");
    assert_eq!(ctx["user_id"], "U42", "{ctx}");
    assert_eq!(ctx["route"], json!([["slack.thread_ts", sent.ts]]), "{ctx}");
}
