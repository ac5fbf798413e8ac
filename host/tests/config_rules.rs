//! Nothing the operator writes is silently ignored, tried through the binary: a key is acted
//! on, or `skill validate` / `call` / `run` names it (and the file and line where the loader
//! knows them).

mod support;

use serde_json::{Value, json};
use skillhost_tests::llm_server::Answer;
use skillhost_tests::{Workspace, guests};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Instant;
use support::api::ApiProcess;
use support::{Finished, run_bounded, skillhost};

/// A workspace with the `probe` skill and `config.yaml` = `yaml`.
fn workspace(yaml: &str) -> Workspace {
    let ws = Workspace::new();
    ws.add_skill("skills", "probe", guests::PROBE, "");
    let base = "skills:\n  paths: [skills]\n  builtins: [shell]\nstate:\n  filesystem: {path: state}\n";
    std::fs::write(ws.path().join("config.yaml"), format!("{base}{yaml}")).unwrap();
    ws
}

/// `skillhost <args>` in `ws` with `env` set and the UI variables unset.
fn skillhost_env(ws: &Workspace, args: &[&str], env: &[(&str, &str)]) -> Finished {
    let mut command = Command::new(env!("CARGO_BIN_EXE_skillhost"));
    command.current_dir(ws.path()).args(args);
    for name in ["SKILLHOST_UI_PORT", "SKILLHOST_UI_TOKEN", "MITHAI_UI_PORT", "MITHAI_UI_TOKEN"] {
        command.env_remove(name);
    }
    command.envs(env.iter().copied());
    run_bounded(command, "")
}

/// The config with every kind of name that matches nothing (the skills block is merged into
/// [`workspace`]'s).
fn typos_config(strict: bool) -> String {
    format!(
        "skills:\n  paths: [skills]\n  builtins: [shell]\n  strict: {strict}\n  config: {{prob: {{}}}}\n  grants: {{ghost: {{}}}}\n\
         \x20 loading_overrides: {{pdf_tools: always}}\nstate:\n  filesystem: {{path: state}}\n\
         human:\n  overrides: {{shel__run_command: confirm, probe__echo: approve}}\n\
         engine:\n  tool_budget: {{tools: [ech0]}}\n  temporal_guardrails: {{tools: [get_logs]}}\n"
    )
}

const EXPECTED: &[&str] = &[
    "engine.temporal_guardrails.tools names `get_logs`, which is not an MCP tool here: the guardrails apply to MCP tools only",
    "engine.tool_budget.tools names `ech0`, which is not a tool here (did you mean `echo`?): it is never budgeted",
    "human.overrides names `shel__run_command`, which is not a tool here (did you mean `shell__run_command`?): its level applies to nothing",
    "skills.config names `prob`, which is not a skill here (did you mean `probe`?)",
    "skills.grants names `ghost`, which is not a skill here",
    "skills.loading_overrides names `pdf_tools`, which is not a skill here",
];

#[test]
fn names_that_match_nothing_are_warned_of_and_refused_when_strict() {
    let ws = Workspace::new();
    ws.add_skill("skills", "probe", guests::PROBE, "");
    let write = |strict: bool| std::fs::write(ws.path().join("config.yaml"), typos_config(strict)).unwrap();
    write(false);
    // validate: warnings, and still ok.
    let out = skillhost(&ws, &["skill", "validate"], "");
    assert_eq!(out.code, 0, "{}", out.stderr);
    for line in EXPECTED {
        assert!(out.stderr.contains(&format!("warning: {line}")), "missing `{line}` in:\n{}", out.stderr);
    }
    assert!(!out.stderr.contains("probe__echo"), "a name that matches is not reported: {}", out.stderr);
    // --strict and skills.strict: every one is an error, and validate fails.
    for (strict_key, args) in [(false, &["--strict", "skill", "validate"][..]), (true, &["skill", "validate"][..])] {
        write(strict_key);
        let out = skillhost(&ws, args, "");
        assert_eq!(out.code, 1, "{args:?}: {}", out.stderr);
        for line in EXPECTED {
            assert!(out.stderr.contains(&format!("error: {line}")), "{args:?}: missing `{line}` in:\n{}", out.stderr);
        }
        assert!(out.stdout.contains("6 problem(s)"), "{}", out.stdout);
    }
    // call builds the app: warned of, the call runs; strict, the call never runs.
    write(false);
    let out = skillhost(&ws, &["call", "--yes", "probe__echo", r#"{"n": 1}"#], "");
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stderr.contains(&format!("warning: {}", EXPECTED[2])), "{}", out.stderr);
    assert!(out.stdout.contains("\"n\": 1") || out.stdout.contains("\"n\":1"), "{}", out.stdout);
    let out = skillhost(&ws, &["--strict", "call", "--yes", "probe__echo", r#"{"n": 1}"#], "");
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("skills.strict: 6 name(s) in config match nothing here"), "{}", out.stderr);
    assert!(out.stdout.is_empty(), "the call did not run: {}", out.stdout);
    // run, strict: stops before serving.
    std::fs::write(
        ws.path().join("config.yaml"),
        format!("{}llm:\n  anthropic: {{api_key: k}}\nadapter: {{type: api}}\n", typos_config(true)),
    )
    .unwrap();
    let out = skillhost_env(&ws, &["run"], &[("SKILLHOST_UI_PORT", "1")]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("skills.strict: 6 name(s)"), "{}", out.stderr);
    assert!(!out.stderr.contains("listening"), "{}", out.stderr);
    // chat and mcp build the same app: refused before the first prompt or message.
    for args in [&["chat"][..], &["mcp"][..]] {
        let out = skillhost_env(&ws, args, &[]);
        assert_eq!(out.code, 2, "{args:?}: {}", out.stderr);
        assert!(out.stderr.contains("skills.strict: 6 name(s)"), "{args:?}: {}", out.stderr);
        assert!(out.stdout.is_empty(), "{args:?} served nothing: {}", out.stdout);
    }
}

/// `engine.tool_budget` caps without `enabled: true` are off (only the legacy key is on by
/// default): every command that loads the config says so, and refuses it under `--strict` /
/// `skills.strict`; `enabled: true`, or an explicit `enabled: false`, is quiet.
#[test]
fn budget_caps_without_enabled_are_warned_of_and_refused_when_strict() {
    const WARNING: &str = "engine.tool_budget sets caps without enabled: true: the budget is off";
    let ws = workspace("engine:\n  tool_budget: {tools: [echo], max_per_turn: 2}\n");
    let commands: [&[&str]; 4] =
        [&["skill", "validate"], &["skill", "list"], &["call", "--yes", "probe__echo", r#"{"n": 1}"#], &["mcp"]];
    for args in commands {
        let out = skillhost(&ws, args, "");
        assert_eq!(out.code, 0, "{args:?}: {}", out.stderr);
        assert!(out.stderr.contains(&format!("warning: {WARNING}")), "{args:?}: {}", out.stderr);
    }
    let out = skillhost(&ws, &["--strict", "call", "--yes", "probe__echo", r#"{"n": 1}"#], "");
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains(&format!("error: {WARNING}")), "{}", out.stderr);
    assert!(out.stdout.is_empty(), "the call did not run: {}", out.stdout);
    let strict = "skills:\n  paths: [skills]\n  builtins: []\n  strict: true\nstate:\n  filesystem: {path: state}\n\
        engine:\n  tool_budget: {tools: [echo], max_long_range_per_turn: 1}\n";
    std::fs::write(ws.path().join("config.yaml"), strict).unwrap();
    let out = skillhost(&ws, &["skill", "validate"], "");
    assert_eq!(out.code, 2, "skills.strict: {}", out.stderr);
    for enabled in ["true", "false"] {
        let ws =
            workspace(&format!("engine:\n  tool_budget: {{enabled: {enabled}, tools: [echo], max_per_turn: 2}}\n"));
        let out = skillhost(&ws, &["--strict", "skill", "validate"], "");
        assert_eq!(out.code, 0, "enabled: {enabled}: {}", out.stderr);
        assert!(!out.stderr.contains("tool_budget"), "{}", out.stderr);
    }
}

#[test]
fn an_agents_allowed_names_are_checked_and_a_matching_config_is_quiet() {
    let ws = workspace("agents:\n  a:\n    skills: {allowed: [prob, shell]}\n");
    let out = skillhost(&ws, &["skill", "validate"], "");
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr.contains(
            "warning: agents.a.skills.allowed names `prob`, which is neither a skill nor an MCP server here (did you mean `probe`?)"
        ),
        "{}",
        out.stderr
    );
    // Every name matching: nothing is said.
    let ws = workspace(
        "human:\n  overrides: {shell__run_command: confirm}\nagents:\n  a:\n    skills: {allowed: [probe], grants: {shell: {}}}\n",
    );
    let out = skillhost(&ws, &["--strict", "skill", "validate"], "");
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(!out.stderr.contains("warning") && !out.stderr.contains("error"), "{}", out.stderr);
}

#[test]
fn the_ui_variables_are_refused_by_name_when_several_agents_serve_the_api() {
    let yaml = "llm:\n  anthropic: {api_key: k}\nagents:\n\
        \x20 a:\n    adapter: {type: api}\n    ui: {port: 1, auth_token: tok-a}\n\
        \x20 b:\n    adapter: {type: api}\n    ui: {port: 2, auth_token: tok-b}\n";
    let ws = workspace(yaml);
    for name in ["SKILLHOST_UI_TOKEN", "MITHAI_UI_TOKEN", "SKILLHOST_UI_PORT"] {
        let out = skillhost_env(&ws, &["run"], &[(name, "9")]);
        assert_eq!(out.code, 2, "{name}: {}", out.stderr);
        assert!(out.stderr.contains(&format!("{name} is set, but 2 agents serve the API")), "{name}: {}", out.stderr);
    }
}

/// Starts `skillhost run` and returns the stderr lines up to and including the listening
/// line, or all of them if the process ends first (it is killed either way).
fn run_until_listening(ws: &Workspace, env: &[(&str, &str)]) -> String {
    let mut child = Command::new(env!("CARGO_BIN_EXE_skillhost"))
        .current_dir(ws.path())
        .arg("run")
        .env_remove("RUST_LOG")
        .env_remove("SKILLHOST_UI_PORT")
        .env_remove("SKILLHOST_UI_TOKEN")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let (mut seen, started) = (String::new(), Instant::now());
    loop {
        let mut line = String::new();
        if stderr.read_line(&mut line).unwrap() == 0 || started.elapsed() > support::PROCESS_LIMIT {
            break;
        }
        seen.push_str(&line);
        if line.contains("skillhost api listening on") {
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    seen
}

#[test]
fn an_agents_adapter_types_replace_the_top_level_type() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let yaml = format!(
        "llm:\n  anthropic: {{api_key: k}}\nadapter:\n  type: cli\nagents:\n  a:\n    adapter: {{types: [api]}}\n    ui: {{port: {port}}}\n"
    );
    let ws = workspace(&yaml);
    let stderr = run_until_listening(&ws, &[]);
    assert!(stderr.contains(&format!("listening on http://127.0.0.1:{port} (agent `a`)")), "{stderr}");
    // `type` and `types` in one block: refused, naming the block.
    let ws = workspace("agents:\n  a:\n    adapter: {type: cli, types: [api]}\n");
    let out = skillhost(&ws, &["skill", "validate"], "");
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("agents.a.adapter: `type` and `types` are both set"), "{}", out.stderr);
}

#[test]
fn a_chat_adapter_without_its_token_stops_run_before_any_skill_loads() {
    let secret = "xoxb-1-SECRETVALUE";
    let cases = [
        ("adapter: {type: slack}\n".to_owned(), "adapter: the slack adapter needs an `adapter.slack` block"),
        (format!("adapter:\n  type: slack\n  slack: {{bot_token: {secret}}}\n"), "adapter: slack.app_token is not set"),
        (
            format!(
                "adapter:\n  slack: {{bot_token: {secret}}}\nagents:\n  a:\n    adapter: {{types: [api, telegram]}}\n"
            ),
            "agents.a.adapter: the telegram adapter needs an `adapter.telegram` block",
        ),
        (
            "agents:\n  a:\n    adapter:\n      type: telegram\n      telegram: {bot_token: ${UNSET_TOKEN}}\n"
                .to_owned(),
            "agents.a.adapter: telegram.bot_token is not set",
        ),
    ];
    for (yaml, expected) in cases {
        let ws = workspace(&format!("llm:\n  anthropic: {{api_key: k}}\n{yaml}"));
        // A broken skill: had anything loaded, its problem would be reported.
        let broken = ws.path().join("skills/broken");
        std::fs::create_dir_all(&broken).unwrap();
        std::fs::write(broken.join("prompt.md"), "Broken.\n").unwrap();
        std::fs::write(broken.join("skill.wasm"), b"not wasm").unwrap();
        let out = skillhost_env(&ws, &["run"], &[]);
        assert_eq!(out.code, 2, "{yaml}: {}", out.stderr);
        assert!(out.stderr.contains(expected), "{yaml}: {}", out.stderr);
        assert!(!out.stderr.contains("broken") && !out.stderr.contains("SECRETVALUE"), "{}", out.stderr);
    }
    // A malformed token is refused by every command, when the config loads.
    let ws = workspace("adapter:\n  slack: {bot_token: xoxp-SECRETVALUE}\n");
    let out = skillhost_env(&ws, &["skill", "validate"], &[]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("slack.bot_token is not a Slack xoxb-"), "{}", out.stderr);
    assert!(!out.stderr.contains("SECRETVALUE"), "{}", out.stderr);
}

#[test]
fn keys_a_provider_or_section_would_ignore_are_refused() {
    let cases = [
        (
            "llm:\n  provider: bedrock\n  bedrock: {api_key: k, region: us-east-1}\n",
            "llm.bedrock.api_key is a setting of api: responses, and api is converse (the default)",
        ),
        (
            "llm:\n  provider: bedrock\n  bedrock: {api: converse, reasoning_effort: high}\n",
            "llm.bedrock.reasoning_effort is a setting of api: responses, and api is converse",
        ),
        (
            "llm:\n  provider: bedrock\n  bedrock: {api: responses, api_key: k, access_key_id: a}\n",
            "llm.bedrock.access_key_id is a setting of api: converse, and api is responses",
        ),
        (
            "agents:\n  x:\n    llm: {bedrock: {session_token: t, api: responses}}\n",
            "agents.x.llm.bedrock.session_token is a setting of api: converse",
        ),
        (
            "engine:\n  tool_budget: {tools: [a]}\n  log_tool_budget: {tools: [b]}\n",
            "engine.tool_budget and engine.log_tool_budget are both set",
        ),
        (
            "engine:\n  tool_budget: {tools: [a], long_range_threshold_minutes: 30}\n",
            "engine.tool_budget.long_range_threshold_minutes needs max_long_range_per_turn",
        ),
    ];
    for (yaml, expected) in cases {
        let ws = workspace(yaml);
        let out = skillhost(&ws, &["skill", "validate"], "");
        assert_eq!(out.code, 2, "{yaml}: {}", out.stderr);
        assert!(out.stderr.contains(expected), "{yaml}: {}", out.stderr);
    }
}

#[test]
fn a_malformed_env_line_is_named_by_file_and_line_and_loads_nothing() {
    let ws = workspace("ui:\n  auth_token: ${LATER_TOKEN}\n");
    std::fs::write(ws.path().join(".env"), "# secrets\nGOOD=1\nnot a line sk-secret-value\nLATER_TOKEN=x\n").unwrap();
    let out = skillhost(&ws, &["skill", "validate"], "");
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains(".env: line 3 is not NAME=value"), "{}", out.stderr);
    assert!(!out.stderr.contains("sk-secret-value"), "the line is not repeated: {}", out.stderr);
    // Mended, it loads and the later variable is set (no warning that it is unset).
    std::fs::write(ws.path().join(".env"), "# secrets\nGOOD=1\nLATER_TOKEN=x\n").unwrap();
    let out = skillhost(&ws, &["skill", "validate"], "");
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(!out.stderr.contains("LATER_TOKEN"), "{}", out.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reasoning_effort_reaches_anthropic_and_openai_compatible_servers() {
    for (provider, expect) in [
        ("provider: anthropic\n  anthropic: {api_key: test, base_url: 'URL', reasoning_effort: high}", "anthropic"),
        ("provider: openai_compatible\n  openai_compatible: {base_url: 'URL/v1', reasoning_effort: low}", "compatible"),
    ] {
        let llm = skillhost_tests::llm_server::LlmServer::start(vec![Answer::text(&["Fine."]).into()]).await;
        let yaml = format!("llm:\n  model: m\n  {}\n", provider.replace("URL", &llm.url()));
        let ws = workspace(&yaml);
        let api = ApiProcess::start(&ws).await;
        let response = api.trigger("wait=true", "hi", "c").send().await.unwrap();
        assert_eq!(response.status(), 200, "{}", api.stderr());
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["text"], "Fine.", "{body}");
        let sent = llm.body(0);
        match expect {
            "anthropic" => assert_eq!(sent["output_config"], json!({"effort": "high"}), "{sent}"),
            _ => assert_eq!(sent["reasoning_effort"], "low", "{sent}"),
        }
    }
    // A value the Messages API does not take stops the start, naming the key.
    let ws = workspace("llm:\n  anthropic: {api_key: k, reasoning_effort: extreme}\n");
    let out = skillhost_env(&ws, &["run", "--adapter", "api"], &[]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains("llm.anthropic.reasoning_effort: \"extreme\" is not one of low, medium, high"),
        "{}",
        out.stderr
    );
}

/// `telemetry.protocol` takes the two OTLP protocols this build exports over, and names
/// anything else with the key.
#[test]
fn the_telemetry_protocol_is_checked() {
    for (protocol, accepted) in [("grpc", true), ("http/protobuf", true), ("http/json", false), ("thrift", false)] {
        let ws = workspace(&format!("telemetry:\n  otlp_endpoint: http://127.0.0.1:4317\n  protocol: {protocol}\n"));
        let done = skillhost(&ws, &["skill", "validate"], "");
        if accepted {
            assert_eq!(done.code, 0, "{protocol}: {}{}", done.stdout, done.stderr);
        } else {
            assert_ne!(done.code, 0, "{protocol}");
            let said = format!("telemetry.protocol: `{protocol}` is not supported (http/protobuf or grpc)");
            assert!(done.stderr.contains(&said), "{protocol}: {}", done.stderr);
        }
    }
}
