//! A skill's state through the binary (`skillhost call`, `skillhost mcp`): per conversation
//! by default, so two channels, two agents on one channel, or two MCP sessions (up to
//! revision 2026-07-28, where the agent is the one conversation) do not see each other's keys,
//! and a key untouched for `skills.state_ttl_seconds` is gone; the skill's own, shared by
//! every conversation and never expiring, with `[capabilities] state = "skill"`.

mod support;

use serde_json::{Value, json};
use skillhost_tests::{Workspace, guests};
use std::time::{Duration, Instant};
use support::raw::Raw;

/// The `probe` guest twice: `probe` (state per conversation, the default) and `shared`
/// (`state = "skill"`), two agents, and `skills` config lines `extra`.
fn workspace(extra: &str) -> Workspace {
    let ws = Workspace::new();
    ws.add_skill("skills", "probe", guests::PROBE, "");
    ws.add_skill("skills", "shared", guests::PROBE, "[capabilities]\nstate = \"skill\"\n");
    let yaml = format!(
        "skills:\n  paths: [skills]\n  builtins: []\n{extra}state:\n  filesystem: {{path: state}}\n\
         agents:\n  ops: {{}}\n  triage: {{}}\n"
    );
    std::fs::write(ws.path().join("config.yaml"), yaml).unwrap();
    ws
}

/// `skillhost call TOOL INPUT --channel CHANNEL [--agent AGENT]`: its JSON result.
fn call(ws: &Workspace, tool: &str, input: Value, channel: &str, agent: Option<&str>) -> Value {
    let input = input.to_string();
    let mut args = vec!["call", tool, &input, "--channel", channel];
    if let Some(agent) = agent {
        args.extend(["--agent", agent]);
    }
    let out = support::skillhost(ws, &args, "");
    assert_eq!(out.code, 0, "{tool} on {channel}: {}{}", out.stdout, out.stderr);
    serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{tool}: not JSON ({e}): {}", out.stdout))
}

fn set(ws: &Workspace, skill: &str, value: &str, channel: &str, agent: Option<&str>) {
    let out = call(ws, &format!("{skill}__state_set"), json!({"key": "k", "value": value}), channel, agent);
    assert_eq!(out, json!({"ok": true}));
}

fn get(ws: &Workspace, skill: &str, channel: &str, agent: Option<&str>) -> Value {
    call(ws, &format!("{skill}__state_get"), json!({"key": "k"}), channel, agent)["value"].clone()
}

#[test]
fn each_conversation_keeps_its_own_keys_and_a_skill_scope_shares_them() {
    let ws = workspace("");
    set(&ws, "probe", "from a", "a", None);
    assert_eq!(get(&ws, "probe", "b", None), Value::Null, "channel b sees nothing of channel a's");
    assert_eq!(get(&ws, "probe", "a", None), "from a", "another process, the same conversation");
    set(&ws, "probe", "from b", "b", None);
    assert_eq!(get(&ws, "probe", "a", None), "from a");
    // An agent's channel `a` is a conversation of its own.
    assert_eq!(get(&ws, "probe", "a", Some("ops")), Value::Null, "agent ops sees nothing of the top-level agent's");
    set(&ws, "probe", "ops in a", "a", Some("ops"));
    assert_eq!(get(&ws, "probe", "a", Some("triage")), Value::Null, "nor agent triage of ops'");
    assert_eq!(get(&ws, "probe", "a", Some("ops")), "ops in a");

    set(&ws, "shared", "one for all", "a", None);
    assert_eq!(get(&ws, "shared", "b", None), "one for all", "state = \"skill\": every channel shares it");
    assert_eq!(get(&ws, "shared", "z", Some("triage")), "one for all", "and every agent");
}

#[test]
fn a_key_untouched_for_the_ttl_is_gone_and_the_skills_own_stays() {
    let ws = workspace("  state_ttl_seconds: 1\n");
    set(&ws, "probe", "short-lived", "a", None);
    set(&ws, "shared", "kept", "a", None);
    // Listing keys does not touch them (a get would keep the key alive).
    let started = Instant::now();
    loop {
        let keys = call(&ws, "probe__state_keys", json!({}), "a", None);
        if keys["keys"] == json!([]) {
            break;
        }
        assert_eq!(keys["keys"], json!(["k"]), "{keys}");
        assert!(started.elapsed() < Duration::from_secs(60), "the key never expired");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(get(&ws, "probe", "a", None), Value::Null);
    assert_eq!(get(&ws, "shared", "a", None), "kept", "a skill's own namespace never expires");
}

#[test]
fn a_ttl_of_zero_is_refused_by_name() {
    let ws = workspace("  state_ttl_seconds: 0\n");
    let out = support::skillhost(&ws, &["call", "probe__state_keys", "{}"], "");
    assert_eq!(out.code, 2, "{}{}", out.stdout, out.stderr);
    assert!(out.stderr.contains("skills.state_ttl_seconds"), "{}", out.stderr);
}

/// The `_meta` of a 2026-07-28 request (no session: each request names its revision).
fn revision_2026() -> Value {
    json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}})
}

/// `skillhost mcp` in `ws`, initialized at 2025-11-25 (`Some`) or speaking 2026-07-28 per
/// request (`None`), once it lists the probe's tools (it answers before its skills compile).
fn mcp(ws: &Workspace, session: bool) -> Raw {
    let mut raw = Raw::start(ws);
    let meta = if session {
        raw.initialize("2025-11-25");
        json!({})
    } else {
        revision_2026()
    };
    let started = Instant::now();
    loop {
        let listed = raw.request("tools/list", json!({"_meta": meta}));
        let names = listed["result"]["tools"].as_array().map(|t| t.iter().map(|t| t["name"].clone()).collect());
        if names.is_some_and(|n: Vec<Value>| n.contains(&json!("probe__state_get"))) {
            return raw;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "the probe was never listed: {listed}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A `tools/call` over `raw`: the tool's JSON result.
fn mcp_call(raw: &mut Raw, session: bool, tool: &str, arguments: Value) -> Value {
    let mut params = json!({"name": tool, "arguments": arguments});
    if !session {
        params["_meta"] = revision_2026();
    }
    let answer = raw.request("tools/call", params);
    let text = answer["result"]["content"][0]["text"].as_str().unwrap_or_else(|| panic!("{tool}: {answer}"));
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{tool}: not JSON ({e}): {text}"))
}

#[test]
fn mcp_sessions_are_conversations_up_to_2025_11_25_and_the_agent_is_one_at_2026_07_28() {
    let ws = workspace("");
    let set = |raw: &mut Raw, session: bool, value: &str| {
        let out = mcp_call(raw, session, "probe__state_set", json!({"key": "k", "value": value}));
        assert_eq!(out, json!({"ok": true}));
    };
    let get =
        |raw: &mut Raw, session: bool| mcp_call(raw, session, "probe__state_get", json!({"key": "k"}))["value"].clone();
    let (mut first, mut second) = (mcp(&ws, true), mcp(&ws, true));
    set(&mut first, true, "first session");
    assert_eq!(get(&mut second, true), Value::Null, "another session is another conversation");
    assert_eq!(get(&mut first, true), "first session");

    let (mut one, mut other) = (mcp(&ws, false), mcp(&ws, false));
    assert_eq!(get(&mut one, false), Value::Null, "not a session's keys");
    set(&mut one, false, "the agent's");
    assert_eq!(get(&mut other, false), "the agent's", "every 2026-07-28 request of the agent shares them");
    assert_eq!(get(&mut first, true), "first session", "and sessions keep theirs");
}
