//! A server answers at once whatever its compile cache holds: `skillhost mcp` with a Python
//! skill still to compile answers `initialize` and lists what is ready (a skill `skill
//! validate` compiled into the cache), then the Python skill's tools join and the client is told
//! (`notifications/tools/list_changed`). Ordering, not timing: the test never rests on how
//! long a compile takes.

mod support;

use serde_json::{Value, json};
use skillhost_tests::{Workspace, guests};
use support::raw::Raw;

fn tool_names(list: &Value) -> Vec<String> {
    let tools = list["result"]["tools"].as_array().unwrap_or_else(|| panic!("{list}"));
    tools.iter().map(|t| t["name"].as_str().unwrap().to_owned()).collect()
}

#[test]
fn initialize_is_answered_while_a_python_skill_compiles_and_its_tools_join_later() {
    let ws = Workspace::new();
    ws.add_skill("skills", "probe", guests::PROBE, "");
    // A cache of its own, empty, which `skill validate` fills for `probe` (`skill build`
    // does too: host/tests/authoring.rs).
    let yaml = "skills:\n  paths: [skills]\n  builtins: []\nsandbox:\n  cache_dir: cache\nstate:\n  filesystem: {path: state}\n";
    std::fs::write(ws.path().join("config.yaml"), yaml).unwrap();
    let built = support::skillhost(&ws, &["skill", "validate"], "");
    assert_eq!(built.code, 0, "{}", built.stderr);
    ws.add_skill("skills", "word_stats", guests::WORD_STATS, "");

    let mut raw = Raw::start(&ws);
    let init = raw.initialize("2025-11-25");
    assert!(init["result"]["capabilities"]["tools"]["listChanged"] == true, "{init}");
    // `probe` is in the cache: it serves at once; the Python skill compiles meanwhile.
    let (first, _) = raw.exchange("tools/list", json!({}));
    let names = tool_names(&first);
    assert!(names.contains(&"probe__echo".to_owned()), "{names:?}");
    assert!(!names.iter().any(|n| n.starts_with("word_stats__")), "still compiling: {names:?}");
    let (echo, _) = raw.call("probe__echo", json!({"ready": true}));
    assert_eq!(echo["result"]["isError"], false, "a ready skill answers meanwhile: {echo}");

    // Then the Python skill joins, and the client is told.
    loop {
        let message = raw.next();
        if message["method"] == "notifications/tools/list_changed" {
            break;
        }
    }
    let (after, _) = raw.exchange("tools/list", json!({}));
    let names = tool_names(&after);
    assert!(names.iter().any(|n| n.starts_with("word_stats__")), "{names:?}");
    assert!(names.contains(&"probe__echo".to_owned()), "{names:?}");
    let tool = names.iter().find(|n| n.starts_with("word_stats__")).unwrap().clone();
    let (called, _) = raw.call(&tool, json!({"text": "one two two"}));
    assert!(called["result"].is_object(), "the joined skill answers: {called}");
}
