//! The external-channel guard on MCP tools that post to Slack
//! (`mcp_servers.<name>.slack_posting_tools`, with `adapter.slack.allow_posting_in_external_channels:
//! false`), through the `skillhost` binary: a real MCP server (`tests/mcp/poster_server.py`,
//! official Python SDK, which records every call it receives and posts nothing) and the scripted
//! Slack Web API answering `conversations.info`. A call to an external channel, one naming no
//! channel and one whose lookup fails are refused before they reach the server; a call to an
//! internal channel, a tool not listed, and the same lookup retried go through.

mod support;

use serde_json::{Value, json};
use skillhost_tests::llm_server::{Answer, LlmServer};
use skillhost_tests::slack_server::{ChannelFlags, SlackServer};
use skillhost_tests::{Workspace, guests};
use support::api::ApiProcess;

/// `posted.jsonl` in the workspace: what the server received.
const LOG: &str = "posted.jsonl";

/// A config serving `poster` (under `server`, its two sending tools listed as posting to
/// Slack) to an agent that does not post in external channels, its `adapter.slack` block
/// ending in `slack` (the bot token and base URL, or nothing); `extra` goes at the end.
fn workspace(server: &str, slack: &str, extra: &str) -> Workspace {
    let (script, pylib) = (support::repo().join("tests/mcp/poster_server.py"), support::repo().join("tests/mcp/pylib"));
    assert!(pylib.join("mcp").exists(), "install the Python SDK with `pip install --target tests/mcp/pylib mcp`");
    let ws = Workspace::new();
    let yaml = format!(
        "state:\n  filesystem: {{path: state}}\n\
         mcp_servers:\n  {server}:\n    transport: stdio\n    command: python3\n    args: ['{}']\n\
         \x20   env: {{PYTHONPATH: '{}', POSTER_LOG: '{}'}}\n    slack_posting_tools: [post_message, send_message]\n\
         adapter:\n  type: api\n  slack: {{allow_posting_in_external_channels: false{slack}}}\n{extra}",
        script.display(),
        pylib.display(),
        ws.path().join(LOG).display(),
    );
    std::fs::write(ws.path().join("config.yaml"), yaml).unwrap();
    ws
}

/// `, bot_token: ..., base_url: ...` of the scripted Slack.
fn bot(slack: &SlackServer) -> String {
    format!(", bot_token: {}, base_url: '{}'", SlackServer::BOT_TOKEN, slack.api_url())
}

/// The calls the server received, as `(tool, channel)`.
fn received(ws: &Workspace) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(ws.path().join(LOG)).unwrap_or_default();
    let calls = text.lines().map(|line| serde_json::from_str::<Value>(line).unwrap());
    let channel = |a: &Value| a["channel_id"].as_str().or(a["channel"].as_str()).unwrap_or_default().to_owned();
    calls.map(|c| (c["tool"].as_str().unwrap().to_owned(), channel(&c["arguments"]))).collect()
}

/// The tool results of request `n`, by tool call id: (text, is_error).
fn results(llm: &LlmServer, n: usize) -> std::collections::BTreeMap<String, (String, bool)> {
    let text = |content: &Value| match content {
        Value::String(text) => text.clone(),
        blocks => blocks.as_array().into_iter().flatten().filter_map(|b| b["text"].as_str()).collect(),
    };
    let results = support::tool_results(llm, n).into_iter();
    results
        .map(|r| (r["tool_use_id"].as_str().unwrap().to_owned(), (text(&r["content"]), r["is_error"] == json!(true))))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_posts_only_where_slack_says_the_channel_is_internal() {
    let slack = SlackServer::start().await;
    slack.set_channel("C0EXT", ChannelFlags { is_shared: true, is_ext_shared: true, ..ChannelFlags::default() });
    slack.set_channel("C0ORG", ChannelFlags { is_shared: true, is_org_shared: true, ..ChannelFlags::default() });
    slack.fail_info("C0FLAKY", 1);
    let post = |id: &str, channel: &str| json!({"channel_id": channel, "text": format!("hello from {id}")});
    let first = Answer::default()
        .call("ext", "poster__post_message", post("ext", "C0EXT"))
        .call("int", "poster__post_message", post("int", "C0INT"))
        .call("org", "poster__post_message", post("org", "C0ORG"))
        .call("flaky", "poster__send_message", json!({"channel": "C0FLAKY", "text": "hi"}))
        .call("nowhere", "poster__post_message", json!({"text": "no channel named"}))
        .call("read", "poster__read_history", json!({"channel_id": "C0EXT"}));
    let again = Answer::default().call("flaky2", "poster__send_message", json!({"channel": "C0FLAKY", "text": "hi"}));
    let llm = LlmServer::start(vec![first.into(), again.into(), Answer::text(&["Done."]).into()]).await;
    let extra = format!(
        "skills:\n  paths: []\n  builtins: []\n  allowed: [poster]\n\
         llm:\n  provider: anthropic\n  model: test-model\n  max_tokens: 500\n  anthropic: {{api_key: test, base_url: '{}'}}\n",
        llm.url()
    );
    let ws = workspace("poster", &bot(&slack), &extra);
    let api = ApiProcess::start_with(&ws, &[("RUST_LOG", "skillhost=info")]).await;
    let answer = api.trigger("wait=true", "post the news", "guard").send().await.unwrap();
    let answer: Value = answer.json().await.unwrap();
    assert_eq!(answer["text"], "Done.", "{answer}\n{}", api.stderr());

    let first = results(&llm, 1);
    let refused = |id: &str, words: &[&str]| {
        let (text, is_error) = &first[id];
        assert!(*is_error, "{id} refused: {text}");
        for word in words {
            assert!(text.contains(word), "{id}: {word:?} in {text}");
        }
    };
    refused("ext", &["channel C0EXT is an external", "allow_posting_in_external_channels: false", "not sent"]);
    refused("flaky", &["whether channel C0FLAKY is external could not be looked up", "channel_not_found", "not sent"]);
    refused("nowhere", &["name no channel", "not sent"]);
    for id in ["int", "org", "read"] {
        assert!(!first[id].1, "{id} went through: {}", first[id].0);
    }
    let (retried, is_error) = &results(&llm, 2)["flaky2"];
    assert!(!is_error, "a failed lookup is not kept: the next call looks again: {retried}");

    let mut got = received(&ws);
    got.sort();
    let expected =
        [("post_message", "C0INT"), ("post_message", "C0ORG"), ("read_history", "C0EXT"), ("send_message", "C0FLAKY")];
    assert_eq!(got, expected.map(|(t, c)| (t.to_owned(), c.to_owned())), "what reached the MCP server");
    assert_eq!(slack.info_lookups("C0FLAKY"), 2);
    assert_eq!(slack.info_lookups("C0EXT"), 1, "reading asks nothing; the answer is kept");
    assert!(slack.calls_to("conversations.info").iter().all(|c| c.token_kind == "bot"));
    assert!(
        api.stderr().contains("Could not resolve Slack channel info for external posting guard"),
        "{}",
        api.stderr()
    );
}

/// `skillhost call`: with no bot token nothing can be looked up, so the guard refuses (and
/// the start warns); a skill's own call through the `mcp` import passes the same guard.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_without_a_bot_token_and_a_skills_own_calls_are_guarded_too() {
    let post = r#"{"channel_id": "C0INT", "text": "hi"}"#;
    let extra = "skills:\n  paths: []\n  builtins: []\n  allowed: [poster]\n";
    let ws = workspace("poster", "", extra);
    let out = tokio::task::block_in_place(|| support::skillhost(&ws, &["call", "poster__post_message", post], ""));
    assert_ne!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("no Slack bot token (adapter.slack.bot_token)"), "{}{}", out.stdout, out.stderr);
    assert!(out.stderr.contains("allow_posting_in_external_channels is false but adapter.slack.bot_token is not set"));
    let out = tokio::task::block_in_place(|| support::skillhost(&ws, &["call", "poster__read_history", post], ""));
    assert_eq!(out.code, 0, "a tool not listed is not guarded: {}{}", out.stdout, out.stderr);
    assert_eq!(received(&ws), [("read_history".to_owned(), "C0INT".to_owned())]);

    // `mcp_user` declares a server named `obs`: here that name is the poster.
    let slack = SlackServer::start().await;
    slack.set_channel("C0EXT", ChannelFlags { is_shared: true, is_ext_shared: true, ..ChannelFlags::default() });
    let ws = workspace("obs", &bot(&slack), "skills:\n  paths: [skills]\n  builtins: []\n");
    ws.add_skill("skills", "mcp_user", guests::MCP_USER, "");
    let call = |channel: &str| {
        let input = json!({"server": "obs", "tool": "post_message", "arguments": {"channel_id": channel, "text": "x"}});
        let input = input.to_string();
        let out = tokio::task::block_in_place(|| support::skillhost(&ws, &["call", "mcp_user__call", &input], ""));
        (out.code, format!("{}{}", out.stdout, out.stderr))
    };
    let (_, external) = call("C0EXT");
    assert!(external.contains("channel C0EXT is an external"), "{external}");
    assert!(received(&ws).is_empty(), "the import's call never reached the server");
    let (code, internal) = call("C0INT");
    assert_eq!(code, 0, "{internal}");
    assert_eq!(received(&ws), [("post_message".to_owned(), "C0INT".to_owned())]);
}
