//! The Telegram adapter through the real binary: `skillhost run` against a scripted Bot API
//! (long polling over real HTTP) and a scripted LLM.

mod support;

use serde_json::json;
use skillhost_tests::Workspace;
use skillhost_tests::llm_server::{Answer, LlmServer, Reply};
use skillhost_tests::telegram_server::{BotMessage, TelegramServer};
use std::time::Duration;
use support::run::Running;

const WAIT: Duration = Duration::from_secs(30);
const TOKEN: &str = "4242000:ABCdefGHIjklMNOpqrSTUvwxyz_0123456";
const CHAT: i64 = 4242;
const ADA: i64 = 7;

fn workspace(llm: &LlmServer, telegram: &TelegramServer, level: &str, extra: &str) -> Workspace {
    let yaml = format!(
        "llm:\n  provider: anthropic\n  model: test-model\n  max_tokens: 500\n  anthropic: {{api_key: test, base_url: '{}'}}\n\
         adapter:\n  type: telegram\n  telegram:\n    bot_token: ${{TELEGRAM_BOT_TOKEN}}\n    allowed_chat_ids: [${{TELEGRAM_CHAT_ID}}]\n\
         \x20   base_url: '{}'\n{extra}human:\n  overrides: {{hooks_loop__work: {level}}}\n",
        llm.url(),
        telegram.base_url()
    );
    support::workspace(&yaml, false)
}

fn run(ws: &Workspace) -> Running {
    Running::start(ws.path(), &[], &[("TELEGRAM_BOT_TOKEN", TOKEN), ("TELEGRAM_CHAT_ID", &CHAT.to_string())])
}

fn work() -> Reply {
    Answer::default().call("w1", "hooks_loop__work", json!({"n": 1})).into()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_asks_with_a_keyboard_and_the_approved_call_runs() {
    let answer = "Done: _*[]()~ `x` **bold** <tag> & [link](https://example.com)";
    let llm = LlmServer::start(vec![work(), Answer::text(&["Done: ", &answer["Done: ".len()..]]).into()]).await;
    let telegram = TelegramServer::start(TOKEN).await;
    let ws = workspace(&llm, &telegram, "approve", "");
    let running = run(&ws);

    telegram.send_text(CHAT, ADA, "please work");
    let prompt = telegram.wait_for_message(CHAT, |m| !m.buttons().is_empty(), WAIT).await;
    assert!(prompt.text.contains("hooks_loop__work"), "{}", prompt.text);
    let approve = prompt.buttons().into_iter().find(|d| d.starts_with("a:")).unwrap();
    telegram.wait_for_call("sendChatAction", |p| p["action"] == "typing", WAIT).await;

    let (_, query) = telegram.click(CHAT, ADA, prompt.message_id, &approve);
    // The answer streams: the first delta may be shown alone before the message is edited.
    let whole = |m: &BotMessage| m.text.starts_with("Done:") && m.text.contains("example.com");
    let sent = telegram.wait_for_message(CHAT, whole, WAIT).await;
    assert_eq!(sent.parse_mode.as_deref(), Some("HTML"), "formatted, and Telegram accepted it");
    assert!(sent.text.contains("<b>bold</b>") && sent.text.contains("&lt;tag&gt;"), "{}", sent.text);
    let settled = telegram
        .wait_for_message(CHAT, |m| m.message_id == prompt.message_id && m.text.contains("Approved"), WAIT)
        .await;
    assert!(settled.buttons().is_empty(), "the keyboard is gone");
    assert!(telegram.answered_callbacks().iter().any(|(id, _)| *id == query));
    assert_eq!(support::tool_results(&llm, 1)[0]["is_error"], json!(false));
    assert!(!running.stderr().contains(TOKEN), "the token is never logged");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_offset_survives_a_restart_so_nothing_is_handled_twice() {
    let replies: Vec<Reply> = (0..3).map(|n| Answer::text(&[&format!("reply {n}")]).into()).collect();
    let llm = LlmServer::start(replies).await;
    let telegram = TelegramServer::start(TOKEN).await;
    let ws = workspace(&llm, &telegram, "approve", "");
    let mut running = run(&ws);
    telegram.send_text(CHAT, ADA, "first");
    telegram.wait_for_message(CHAT, |m| m.text == "reply 0", WAIT).await;
    running.kill();
    let before = telegram.offsets().len();

    let second = telegram.send_text(CHAT, ADA, "second");
    let _running = run(&ws);
    telegram.wait_for_message(CHAT, |m| m.text == "reply 1", WAIT).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(llm.requests().len(), 2, "the first message was not handled again");
    // The restarted bot asks from the kept offset, not from the start.
    let offsets = telegram.offsets();
    assert_eq!(offsets[before], second, "{offsets:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chats_and_people_outside_the_lists_are_refused() {
    let llm = LlmServer::start(vec![work(), Answer::text(&["Denied, then."]).into()]).await;
    let telegram = TelegramServer::start(TOKEN).await;
    let ws = workspace(&llm, &telegram, "approve", "    approvers: [7]\n");
    let running = run(&ws);

    telegram.send_text(999, ADA, "let me in");
    running.wait_for_log("not in allowed_chat_ids").await;
    assert!(telegram.messages(999).is_empty());
    telegram.send_text(CHAT, ADA, "please work");
    let prompt = telegram.wait_for_message(CHAT, |m| !m.buttons().is_empty(), WAIT).await;
    let data = prompt.buttons();
    let (approve, deny) =
        (data.iter().find(|d| d.starts_with("a:")).unwrap(), data.iter().find(|d| d.starts_with("d:")).unwrap());
    // Someone outside `approvers`: refused, the call still waits.
    let (_, refused) = telegram.click(CHAT, 8, prompt.message_id, approve);
    let started = std::time::Instant::now();
    while !telegram.answered_callbacks().iter().any(|(id, _)| *id == refused) {
        assert!(started.elapsed() < WAIT, "{}", running.stderr());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (_, params) = telegram.answered_callbacks().into_iter().find(|(id, _)| *id == refused).unwrap();
    assert!(params["text"].as_str().unwrap().contains("approvers"), "{params}");
    assert_eq!(llm.requests().len(), 1);
    telegram.click(CHAT, ADA, prompt.message_id, deny);
    telegram.wait_for_message(CHAT, |m| m.text == "Denied, then.", WAIT).await;
    assert_eq!(support::tool_results(&llm, 1)[0]["is_error"], json!(true));
}

/// Callback data names an approval, not a chat, and a client can forge it: a press carrying
/// the approval's id from another allowed chat of the same bot (no `approvers` set) is
/// refused and decides nothing; the press in the chat where it was asked decides it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_press_from_another_chat_of_the_bot_decides_nothing() {
    const OTHER: i64 = 4343;
    let llm = LlmServer::start(vec![work(), Answer::text(&["Worked."]).into()]).await;
    let telegram = TelegramServer::start(TOKEN).await;
    let yaml = format!(
        "llm:\n  provider: anthropic\n  model: test-model\n  max_tokens: 500\n  anthropic: {{api_key: test, base_url: '{}'}}\n\
         adapter:\n  type: telegram\n  telegram:\n    bot_token: ${{TELEGRAM_BOT_TOKEN}}\n    allowed_chat_ids: [{CHAT}, {OTHER}]\n\
         \x20   base_url: '{}'\nhuman:\n  overrides: {{hooks_loop__work: approve}}\n",
        llm.url(),
        telegram.base_url()
    );
    let ws = support::workspace(&yaml, false);
    let running = run(&ws);

    telegram.send_text(CHAT, ADA, "please work");
    let prompt = telegram.wait_for_message(CHAT, |m| !m.buttons().is_empty(), WAIT).await;
    let approve = prompt.buttons().into_iter().find(|d| d.starts_with("a:")).unwrap();
    let (_, forged) = telegram.click(OTHER, 9, prompt.message_id, &approve);
    let started = std::time::Instant::now();
    let refusal = loop {
        if let Some((_, answer)) = telegram.answered_callbacks().into_iter().find(|(id, _)| *id == forged) {
            break answer;
        }
        assert!(started.elapsed() < WAIT, "the forged press was never answered: {}", running.stderr());
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(refusal["text"].as_str().unwrap_or_default().contains("no longer waiting"), "{refusal}");
    assert_eq!(llm.requests().len(), 1, "nothing ran");
    let unchanged = telegram.messages(CHAT).into_iter().find(|m| m.message_id == prompt.message_id).unwrap();
    assert_eq!((unchanged.edits, unchanged.reply_markup.is_some()), (0, true), "the prompt still waits");

    telegram.click(CHAT, ADA, prompt.message_id, &approve);
    telegram.wait_for_message(CHAT, |m| m.text == "Worked.", WAIT).await;
    assert_eq!(support::tool_results(&llm, 1)[0]["is_error"], json!(false), "it ran once decided in its chat");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn confirm_is_a_reply_and_a_question_is_a_button() {
    let ask =
        Answer::default().call("q1", "human__ask", json!({"question": "Which env?", "choices": ["staging", "prod"]}));
    let llm =
        LlmServer::start(vec![work(), Answer::text(&["Ran."]).into(), ask.into(), Answer::text(&["Asked."]).into()])
            .await;
    let telegram = TelegramServer::start(TOKEN).await;
    let ws = workspace(&llm, &telegram, "confirm", "");
    let _running = run(&ws);

    telegram.send_text(CHAT, ADA, "please work");
    let prompt = telegram.wait_for_message(CHAT, |m| m.text.contains("CONFIRM"), WAIT).await;
    telegram.reply_text(CHAT, ADA, "confirm", prompt.message_id);
    telegram.wait_for_message(CHAT, |m| m.text.contains("that is not CONFIRM"), WAIT).await;
    telegram.reply_text(CHAT, ADA, "CONFIRM", prompt.message_id);
    telegram.wait_for_message(CHAT, |m| m.text == "Ran.", WAIT).await;
    assert_eq!(support::tool_results(&llm, 1)[0]["is_error"], json!(false));

    telegram.send_text(CHAT, ADA, "deploy");
    let question = telegram.wait_for_message(CHAT, |m| m.text.contains("Which env?"), WAIT).await;
    let prod = question.buttons().into_iter().find(|d| d.ends_with(":1")).unwrap();
    telegram.click(CHAT, ADA, question.message_id, &prod);
    telegram.wait_for_message(CHAT, |m| m.text == "Asked.", WAIT).await;
    assert!(support::tool_results(&llm, 3)[0]["content"].to_string().contains("prod"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limit_and_a_second_poller_are_waited_out() {
    let llm = LlmServer::start(vec![Answer::text(&["Still here."]).into()]).await;
    let telegram = TelegramServer::start(TOKEN).await;
    let ws = workspace(&llm, &telegram, "approve", "");
    let conflict =
        json!({"ok": false, "error_code": 409, "description": "Conflict: terminated by other getUpdates request"});
    telegram.fail_next("getUpdates", 409, conflict);
    telegram.fail_next(
        "sendMessage",
        429,
        json!({"ok": false, "error_code": 429, "description": "Too Many Requests: retry after 1", "parameters": {"retry_after": 1}}),
    );
    let running = run(&ws);
    running.wait_for_log("another process polls this bot token").await;
    telegram.send_text(CHAT, ADA, "hello");
    telegram.wait_for_message(CHAT, |m| m.text == "Still here.", WAIT).await;
    let sends = telegram.calls_to("sendMessage");
    assert!(sends.len() >= 2 && sends[1].at.duration_since(sends[0].at) >= Duration::from_millis(900), "{sends:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreadable_updates_are_skipped_one_by_one_and_the_bot_goes_on() {
    let llm = LlmServer::start(vec![Answer::text(&["Still fine."]).into()]).await;
    let telegram = TelegramServer::start(TOKEN).await;
    let ws = workspace(&llm, &telegram, "approve", "");
    let running = run(&ws);
    telegram.raw_update(json!({"message": {"message_id": "not a number"}}));
    telegram.raw_update(json!({"message": {"message_id": 5, "chat": {"id": CHAT}, "text": "no sender"}}));
    telegram.raw_update(json!({"edited_message": {"message_id": 6, "chat": {"id": CHAT}, "text": "edited"}}));
    let (_, stray) = telegram.click(CHAT, ADA, 1, "zz:unknown");
    telegram.send_text(CHAT, ADA, "are you there?");
    telegram.wait_for_message(CHAT, |m| m.text == "Still fine.", WAIT).await;
    assert!(running.stderr().contains("is not one the adapter reads"), "{}", running.stderr());
    let answered = telegram.answered_callbacks();
    assert!(answered.iter().any(|(id, p)| *id == stray && p["show_alert"] == true), "{answered:?}");
    assert_eq!(llm.requests().len(), 1, "only the real message started a turn");
}

/// A tool sees Telegram's own ids: the chat and the person.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_see_telegrams_chat_and_user() {
    let call = Answer::default().call("c1", "probe__ctx", json!({}));
    let llm = LlmServer::start(vec![call.into(), Answer::text(&["seen"]).into()]).await;
    let telegram = TelegramServer::start(TOKEN).await;
    let ws = workspace(&llm, &telegram, "approve", "");
    ws.add_skill("skills", "probe", skillhost_tests::guests::PROBE, "");
    let _running = run(&ws);

    telegram.send_text(CHAT, ADA, "who am I?");
    telegram.wait_for_message(CHAT, |m| m.text == "seen", WAIT).await;
    let result = &support::tool_results(&llm, 1)[0];
    let ctx: serde_json::Value = serde_json::from_str(result["content"].as_str().unwrap()).unwrap();
    assert_eq!(ctx["channel_id"], CHAT.to_string(), "{ctx}");
    assert_eq!(ctx["user_id"], ADA.to_string(), "{ctx}");
}
