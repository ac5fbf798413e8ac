//! SKILL.md skills load on demand (`skills.loading`), through `skillhost chat` against the
//! scripted LLM server over real HTTP: with sixteen SKILL.md skills of a few KB each, the
//! system prompt lists only their names and descriptions; `load_skill` brings a body into
//! the messages and the skill's tools into the request; the load survives the next turn, a
//! restart, and a history that no longer holds it; `always` keeps every body injected; the
//! API loads per channel, and `skillhost call` needs no load.

mod support;

use serde_json::{Value, json};
use skillhost::engine::History;
use skillhost::store::StateStore;
use skillhost_tests::llm_server::{Answer, Reply};
use skillhost_tests::{Workspace, guests};
use support::{Llm, chat, llm, llm_config, skillhost, system};

/// How many prompt-only SKILL.md skills the workspace holds (the probe is one more).
const SKILLS: usize = 15;

fn description(n: usize) -> String {
    format!("Guidance for area {n:02}: use it when the request is about subsystem {n:02} and its runbooks.")
}

/// A body of about 3.5 KB, marked so a test can tell whether it reached the model.
fn body(n: usize) -> String {
    let mut text = format!("# Area {n:02}\n\nBODY-MARKER-{n:02}\n\n");
    for step in 0..50 {
        text.push_str(&format!("{step}. Check the area {n:02} dashboard, then the logs of its service, in order.\n"));
    }
    text
}

/// Fifteen prompt-only SKILL.md skills, the `probe` component with a SKILL.md (so an
/// on-demand skill with tools), and `notes` with a prompt.md; the config ends in `extra`.
fn workspace(llm: &Llm, extra: &str) -> Workspace {
    let ws = Workspace::new();
    for n in 1..=SKILLS {
        let dir = ws.path().join(format!("skills/area_{n:02}"));
        std::fs::create_dir_all(&dir).unwrap();
        let text = format!("---\nname: area-{n:02}\ndescription: \"{}\"\n---\n{}", description(n), body(n));
        std::fs::write(dir.join("SKILL.md"), text).unwrap();
    }
    let probe = ws.add_skill("skills", "probe", guests::PROBE, "");
    std::fs::remove_file(probe.join("prompt.md")).unwrap();
    let probe_md = "---\nname: probe\ndescription: Echoes input back.\n---\nPROBE-BODY: call probe__echo.\n";
    std::fs::write(probe.join("SKILL.md"), probe_md).unwrap();
    std::fs::create_dir_all(ws.path().join("skills/notes")).unwrap();
    std::fs::write(ws.path().join("skills/notes/prompt.md"), "NOTES-PROMPT: always here.\n").unwrap();
    let yaml = format!(
        "skills:\n  paths: [skills]\n  builtins: []\nstate:\n  filesystem: {{path: state}}\n{}{extra}",
        llm_config(llm)
    );
    std::fs::write(ws.path().join("config.yaml"), yaml).unwrap();
    ws
}

fn tool_names(llm: &Llm, n: usize) -> Vec<String> {
    let body = llm.server.body(n);
    body["tools"]
        .as_array()
        .map(|t| t.iter().map(|d| d["name"].as_str().unwrap().to_owned()).collect())
        .unwrap_or_default()
}

fn messages(llm: &Llm, n: usize) -> String {
    llm.server.body(n)["messages"].to_string()
}

/// The tool results of request `n`'s last message.
fn results(llm: &Llm, n: usize) -> Vec<Value> {
    support::tool_results(&llm.server, n)
}

fn text(answer: &str) -> Reply {
    Answer::text(&[answer]).into()
}

fn call(id: &str, name: &str, input: Value) -> Reply {
    Answer::default().call(id, name, input).into()
}

#[test]
fn skill_md_skills_are_listed_until_loaded_then_stay_loaded() {
    let llm = llm(vec![
        call("t1", "probe__echo", json!({"x": 1})),
        call("t2", "load_skill", json!({"skill": "probe"})),
        call("t3", "probe__echo", json!({"x": 2})),
        text("Done."),
        text("Second."),
        text("After the restart."),
    ]);
    let ws = workspace(&llm, "");
    chat(&ws, "first\nsecond\n");

    let prompt = system(&llm, 0);
    let bodies: usize = (1..=SKILLS).map(|n| body(n).len()).sum();
    for n in 1..=SKILLS {
        assert!(prompt.contains(&format!("- `area_{n:02}`: {}", description(n))), "{prompt}");
        assert!(!prompt.contains(&format!("BODY-MARKER-{n:02}")), "no body before a load: {prompt}");
    }
    assert!(prompt.contains("- `probe`: Echoes input back.") && prompt.contains("NOTES-PROMPT"), "{prompt}");
    assert!(prompt.contains(&ws.path().join("skills/probe").display().to_string()), "the folder: {prompt}");
    eprintln!("system prompt: {} bytes; the bodies: {bodies} bytes", prompt.len());
    assert!(bodies > 50_000, "realistic bodies: {bodies} bytes");
    assert!(prompt.len() < 5_500, "names and descriptions only: {} bytes of {bodies}", prompt.len());
    assert!(!prompt.contains("PROBE-BODY"));
    assert_eq!(tool_names(&llm, 0), ["load_skill"], "the probe's tools wait for its load");
    let enum_ = &llm.server.body(0)["tools"][0]["input_schema"]["properties"]["skill"]["enum"];
    assert_eq!(enum_.as_array().unwrap().len(), SKILLS + 1, "{enum_}");

    let refused = &results(&llm, 1)[0];
    assert_eq!(refused["is_error"], true, "{refused}");
    let refusal = refused["content"].to_string();
    assert!(refusal.contains("skill_not_loaded") && refusal.contains("load_skill"), "{refusal}");

    assert!(messages(&llm, 2).contains("PROBE-BODY: call probe__echo."), "the body is in the messages");
    assert!(tool_names(&llm, 2).contains(&"probe__echo".to_owned()), "{:?}", tool_names(&llm, 2));
    assert_eq!(system(&llm, 2), prompt, "the system prompt does not change");
    let echoed = &results(&llm, 3)[0];
    assert!(echoed["is_error"] != true && echoed["content"].to_string().contains("\\\"x\\\":2"), "{echoed}");

    assert!(tool_names(&llm, 4).contains(&"probe__echo".to_owned()), "loaded in the next turn");
    assert_eq!(system(&llm, 4), prompt);

    chat(&ws, "again\n");
    assert!(tool_names(&llm, 5).contains(&"probe__echo".to_owned()), "loaded after a restart");
    assert!(messages(&llm, 5).contains("PROBE-BODY") && !system(&llm, 5).contains("PROBE-BODY"));
    assert_eq!(llm.server.requests().len(), 6);
}

#[test]
fn a_load_the_history_no_longer_holds_is_carried_in_the_system_prompt() {
    let llm = llm(vec![text("Carried.")]);
    let ws = workspace(&llm, "");
    // As after the history's oldest exchanges, the load among them, were trimmed.
    let history = History::new(StateStore::new(ws.path().join("state")));
    futures::executor::block_on(history.save_loaded_skills("cli", &["area_03".to_owned()].into())).unwrap();
    chat(&ws, "hello\n");
    let prompt = system(&llm, 0);
    assert!(prompt.contains("# Skill `area_03` (loaded earlier in this conversation)"), "{prompt}");
    assert!(prompt.contains("BODY-MARKER-03") && !prompt.contains("BODY-MARKER-04"), "{prompt}");
}

#[test]
fn always_injects_every_body_and_overrides_pick_skills() {
    let llm = llm(vec![text("One."), text("Two.")]);
    let ws = workspace(&llm, "");
    let config = ws.path().join("config.yaml");
    let base = std::fs::read_to_string(&config).unwrap();
    std::fs::write(&config, base.replace("  builtins: []\n", "  builtins: []\n  loading: always\n")).unwrap();
    chat(&ws, "hi\n");
    let prompt = system(&llm, 0);
    assert!((1..=SKILLS).all(|n| prompt.contains(&format!("BODY-MARKER-{n:02}"))), "every body");
    assert!(prompt.contains("PROBE-BODY") && !prompt.contains("# Skills to load"), "{prompt}");
    assert!(prompt.len() > 50_000);
    let tools = tool_names(&llm, 0);
    assert!(tools.contains(&"probe__echo".to_owned()) && !tools.contains(&"load_skill".to_owned()), "{tools:?}");

    let overridden = "  loading: always\n  loading_overrides: {area_07: on_demand}\n";
    std::fs::write(&config, base.replace("  builtins: []\n", &format!("  builtins: []\n{overridden}"))).unwrap();
    std::fs::remove_dir_all(ws.path().join("state")).unwrap();
    chat(&ws, "hi\n");
    let prompt = system(&llm, 1);
    assert!(prompt.contains("- `area_07`") && !prompt.contains("BODY-MARKER-07"), "{prompt}");
    assert!(prompt.contains("BODY-MARKER-06") && prompt.contains("PROBE-BODY"), "{prompt}");
    let enum_ = &llm.server.body(1)["tools"][0]["input_schema"]["properties"]["skill"]["enum"];
    assert_eq!(enum_, &json!(["area_07"]));
}

#[test]
fn loading_settings_that_cannot_apply_are_clear_errors() {
    let llm = llm(vec![]);
    for (extra, expected) in [
        ("  loading: lazy\n", "unknown variant `lazy`, expected one of `always`, `on_demand`, `sub_agent`"),
        ("  loading_overrides: {notes: on_demand}\n", "skills.loading_overrides.notes: `on_demand` needs a SKILL.md"),
    ] {
        let ws = workspace(&llm, "");
        let config = ws.path().join("config.yaml");
        let base = std::fs::read_to_string(&config).unwrap();
        std::fs::write(&config, base.replace("  builtins: []\n", &format!("  builtins: []\n{extra}"))).unwrap();
        let done = skillhost(&ws, &["chat"], "hi\n");
        assert_ne!(done.code, 0, "{extra}");
        assert!(done.stderr.contains(expected), "{extra}: {}", done.stderr);
    }
    assert!(llm.server.requests().is_empty());
}

/// Starts `skillhost run --adapter api` on `port`, waiting up to [`support::PROCESS_LIMIT`]
/// for it to listen (it compiles the probe first).
fn serve_api(ws: &Workspace, port: u16) -> std::process::Child {
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_skillhost"))
        .current_dir(ws.path())
        .args(["run", "--adapter", "api"])
        .env_remove("RUST_LOG")
        .env("SKILLHOST_UI_PORT", port.to_string())
        .env("SKILLHOST_UI_TOKEN", "secret")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    support::wait_until_ready(port);
    child
}

#[test]
fn the_api_loads_skills_per_channel_and_direct_calls_need_no_load() {
    let llm = llm(vec![call("t1", "load_skill", json!({"skill": "probe"})), text("Loaded."), text("Other channel.")]);
    let ws = workspace(&llm, "");
    // `skillhost call` is no conversation: the tool is called directly, nothing to load.
    let called = skillhost(&ws, &["call", "probe__echo", r#"{"x": 7}"#], "");
    assert_eq!(called.code, 0, "{}{}", called.stdout, called.stderr);
    assert!(called.stdout.contains("\"x\"") && called.stdout.contains('7'), "{}", called.stdout);

    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut child = serve_api(&ws, port);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let answers: Vec<Value> = runtime.block_on(async {
        let client = reqwest::Client::new();
        let mut answers = Vec::new();
        for channel in ["one", "two"] {
            let response = client
                .post(format!("http://127.0.0.1:{port}/api/trigger?wait=true"))
                .bearer_auth("secret")
                .json(&json!({"message": "go", "channel_id": channel}))
                .send()
                .await
                .unwrap();
            answers.push(response.json().await.unwrap());
        }
        answers
    });
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!((answers[0]["text"].clone(), answers[1]["text"].clone()), (json!("Loaded."), json!("Other channel.")));
    assert!(tool_names(&llm, 1).contains(&"probe__echo".to_owned()), "loaded on channel `one`");
    assert_eq!(tool_names(&llm, 2), ["load_skill"], "channel `two` is another conversation");
}
