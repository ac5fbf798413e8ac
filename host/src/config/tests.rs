use super::*;

fn env(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
    move |name| pairs.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string())
}

/// `V` set to `value`, nothing else set.
fn v(value: &str) -> impl Fn(&str) -> Option<String> + '_ {
    move |name| (name == "V").then(|| value.to_string())
}

mod interpolation;

#[test]
fn example_config_parses() {
    let text = include_str!("../../../config.example.yaml");
    let (config, _) = parse(text, env(&[])).expect("config.example.yaml must parse");
    assert!(!config.skills.paths.is_empty());
    assert!(config.skills.grants.contains_key("http_checker"));
    assert_eq!(config.skills.loading, Loading::OnDemand);
    assert!(config.skills.loading_overrides.is_empty(), "no override names a skill the repository lacks");
    assert!(!config.skills.strict);
    assert!(config.engine.temporal_guardrails.is_on(), "the example shows the guardrails");
    let McpServer::Streamablehttp { auth: Some(auth), .. } = &config.mcp_servers["notes"] else { panic!("notes") };
    assert_eq!((auth.client_id.as_deref(), auth.redirect_port), (Some("skillhost-notes"), Some(8765)));
}

#[test]
fn mcp_auth_keys_are_checked() {
    let server = "mcp_servers:\n  a:\n    transport: streamablehttp\n    url: http://127.0.0.1:1/mcp\n    auth:\n";
    let (config, _) = parse(&format!("{server}      scopes: [x]\n"), env(&[])).unwrap();
    assert!(matches!(&config.mcp_servers["a"], McpServer::Streamablehttp { auth: Some(a), .. } if a.scopes == ["x"]));
    let err = parse(&format!("{server}      client_secret: s\n"), env(&[])).unwrap_err();
    assert!(err.contains("auth.client_secret needs auth.client_id"), "{err}");
    let err = parse(&format!("{server}      token: t\n"), env(&[])).unwrap_err();
    assert!(err.contains("token"), "{err}");
}

#[test]
fn empty_config_is_defaults() {
    let (config, warnings) = parse("", env(&[])).unwrap();
    assert_eq!(config.human.timeout_seconds, 300);
    assert_eq!(config.engine.session.deadline_seconds, 150);
    assert!(warnings.is_empty());
}

#[test]
fn unknown_key_is_named_with_its_line() {
    let err = parse("bot:\n  name: x\nskills:\n  pathz: [a]\n", env(&[])).unwrap_err();
    assert!(err.contains("pathz"), "{err}");
    assert!(err.contains("line 4"), "{err}");
}

#[test]
fn unknown_top_level_key_is_rejected() {
    let err = parse("bott:\n  name: x\n", env(&[])).unwrap_err();
    assert!(err.contains("bott") && err.contains("line 1"), "{err}");
}

#[test]
fn variables_are_substituted_and_unset_ones_warned() {
    let text = "llm:\n  anthropic:\n    api_key: ${KEY}\n    base_url: ${MISSING}\n";
    let (config, warnings) = parse(text, env(&[("KEY", "sk-1")])).unwrap();
    let anthropic = config.llm.anthropic.unwrap();
    assert_eq!(anthropic.api_key.as_deref(), Some("sk-1"));
    assert_eq!(anthropic.base_url, None);
    assert_eq!(warnings.len(), 1);
    assert!(warnings[0].contains("MISSING") && warnings[0].contains("line 4"));
}

#[test]
fn comment_lines_are_not_interpolated() {
    let (_, warnings) = parse("# uses ${NOPE}\nbot:\n  name: x\n", env(&[])).unwrap();
    assert!(warnings.is_empty());
}

#[test]
fn overrides_accept_null_approve_confirm() {
    let text = "human:\n  overrides:\n    a__b: null\n    c__d: approve\n    e__f: confirm\n";
    let (config, _) = parse(text, env(&[])).unwrap();
    assert_eq!(config.human.overrides["a__b"], None);
    assert_eq!(config.human.overrides["c__d"], Some(OverrideLevel::Approve));
    let err = parse("human:\n  overrides:\n    a__b: maybe\n", env(&[])).unwrap_err();
    assert!(err.contains("maybe") || err.contains("unknown variant"), "{err}");
    let err = parse("human:\n  overrides:\n    nounderscore: null\n", env(&[])).unwrap_err();
    assert!(err.contains("nounderscore"), "{err}");
}

#[test]
fn mcp_servers_are_tagged_by_transport() {
    let text = "mcp_servers:\n  a:\n    transport: stdio\n    command: npx\n    tools: \"*\"\n  b:\n    transport: streamablehttp\n    url: http://127.0.0.1:1/mcp\n    tools: [x, y]\n";
    let (config, _) = parse(text, env(&[])).unwrap();
    assert!(matches!(config.mcp_servers["a"], McpServer::Stdio { tools: ToolFilter::All, .. }));
    assert!(
        matches!(&config.mcp_servers["b"], McpServer::Streamablehttp { tools: ToolFilter::Only(t), .. } if t.len() == 2)
    );
    let err = parse("mcp_servers:\n  a:\n    transport: carrier-pigeon\n", env(&[])).unwrap_err();
    assert!(err.contains("carrier-pigeon"), "{err}");
    let err = parse("mcp_servers:\n  a:\n    transport: sse\n    url: not a url\n", env(&[])).unwrap_err();
    assert!(err.contains("mcp_servers.a"), "{err}");
}

#[test]
fn zero_limits_are_refused() {
    let err = parse("sandbox:\n  defaults:\n    fuel: 0\n", env(&[])).unwrap_err();
    assert!(err.contains("sandbox.defaults") && err.contains("fuel"), "{err}");
}

#[test]
fn the_documented_multi_agent_config_parses_with_its_blocks_merged() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/configuration.md")).unwrap();
    let block = readme.split("<!-- multi-agent config: parsed by a test -->\n```yaml\n").nth(1).unwrap();
    let yaml = block.split("```").next().unwrap();
    let (config, _) = super::parse(yaml, |_| Some("token".into())).unwrap();
    let triage = &config.agents["triage"];
    let llm = triage.llm.as_ref().unwrap();
    assert_eq!((llm.model.as_str(), llm.provider), ("claude-haiku-4-5", super::Provider::Anthropic));
    assert_eq!(llm.anthropic.as_ref().unwrap().api_key.as_deref(), Some("token"), "the top-level key is kept");
    let skills = triage.skills.as_ref().unwrap();
    assert_eq!(skills.allowed.as_deref(), Some(&["services".to_string(), "memory".to_string()][..]));
    assert_eq!(skills.paths, vec![std::path::PathBuf::from("./skills")], "the top-level paths are kept");
    assert_eq!(config.agents["devops"].ui.as_ref().unwrap().port, Some(8081));
}

#[test]
fn mcp_server_names_follow_the_name_rule() {
    let err = parse("mcp_servers:\n  cx_:\n    transport: stdio\n    command: x\n", env(&[])).unwrap_err();
    assert!(err.contains("mcp_servers: key `cx_`") && err.contains("ends with `_`"), "{err}");
    let err = parse("mcp_servers:\n  My-Server:\n    transport: stdio\n    command: x\n", env(&[])).unwrap_err();
    assert!(err.contains("`My-Server`") && err.contains("snake_case"), "{err}");
}

#[test]
fn chat_blocks_are_typed_and_a_malformed_token_is_refused_unshown() {
    let yaml = "adapter:\n  types: [slack, telegram]\n  slack:\n    bot_token: ${B}\n    app_token: ${A}\n    respond: all\n\
        \x20   allow_posting_in_external_channels: false\n    approvers: [U1]\n  telegram:\n    bot_token: ${T}\n\
        \x20   allowed_chat_ids: [${CHAT}, -100200]\n";
    const GOOD: &[(&str, &str)] =
        &[("B", "xoxb-1-abc"), ("A", "xapp-1-def"), ("T", "123:ABCdefGHIjklMNOpqrSTUvwxyz"), ("CHAT", "42")];
    let (config, _) = parse(yaml, env(GOOD)).unwrap();
    let slack = config.adapter.slack.as_ref().unwrap();
    assert_eq!((slack.respond, slack.allow_posting_in_external_channels), (crate::config::Respond::All, false));
    assert_eq!(slack.base_url, crate::config::SLACK_API);
    let telegram = config.adapter.telegram.as_ref().unwrap();
    assert_eq!(telegram.allowed_chat_ids, [crate::config::ChatId(42), crate::config::ChatId(-100200)]);
    assert!(config.adapter.ready(crate::config::AdapterKind::Slack).is_ok());

    const BAD: &[(&str, &str)] =
        &[("B", "xoxp-user-SECRET"), ("A", "xapp-1-def"), ("T", "123:ABCdefGHIjklMNOpqrSTUvwxyz"), ("CHAT", "42")];
    let err = parse(yaml, env(BAD)).unwrap_err();
    assert!(err.contains("adapter: slack.bot_token is not a Slack xoxb-") && !err.contains("SECRET"), "{err}");
    let err = parse("agents:\n  a:\n    adapter:\n      telegram: {token: x}\n", env(&[])).unwrap_err();
    assert!(err.contains("unknown field `token`"), "{err}");
}

/// The spec's own example of `engine.temporal_guardrails`.
const TEMPORAL: &str = "engine:\n  temporal_guardrails:\n    tools:\n      - get_logs\n      - get_traces\n\
    \x20   tool_profiles:\n      get_alerts: alerts_window\n      get_alert_rule_state: epoch_range\n\
    \x20     prometheus_instant_query: instant_time_iso\n    attribute_discovery_tools:\n\
    \x20     - get_log_attributes\n      - get_log_attributes_for_pipeline\n    attribute_discovery_lookback_minutes: 5\n";

#[test]
fn temporal_guardrails_parse_as_the_spec_writes_them() {
    let (config, _) = parse(TEMPORAL, env(&[])).unwrap();
    let g = &config.engine.temporal_guardrails;
    assert!(g.is_on());
    assert_eq!(g.tool_profiles["get_alert_rule_state"], TemporalProfile::EpochRange);
    assert_eq!(g.attribute_lookback_minutes(), 5);
    let (config, _) =
        parse("engine:\n  temporal_guardrails:\n    tools: [a]\n    attribute_discovery_tools: [b]\n", env(&[]))
            .unwrap();
    assert_eq!(config.engine.temporal_guardrails.attribute_lookback_minutes(), DEFAULT_ATTRIBUTE_LOOKBACK_MINUTES);
    assert!(parse("engine:\n  temporal_guardrails:\n    tools: []\n", env(&[])).is_ok(), "empty is off");
}

#[test]
fn temporal_guardrails_refuse_what_they_would_ignore_or_misread() {
    let g = "engine:\n  temporal_guardrails:\n";
    let cases = [
        (
            "    tool_profiles: {get_alerts: alerts_window}\n",
            "tool_profiles is set but engine.temporal_guardrails.tools is empty",
        ),
        ("    attribute_discovery_tools: [get_log_attributes]\n", "attribute_discovery_tools is set but"),
        ("    tools: [a]\n    tool_profiles: {b: hourly}\n", "unknown variant `hourly`, expected one of `iso_window`"),
        (
            "    tools: [a]\n    attribute_discovery_tools: [b]\n    attribute_discovery_lookback_minutes: 0\n",
            "attribute_discovery_lookback_minutes must be greater than 0",
        ),
        ("    tools: [a]\n    attribute_discovery_lookback_minutes: 9\n", "attribute_discovery_tools is empty"),
        ("    tools: [a]\n    attribute_discovery_lookback_minutes: -1\n", "attribute_discovery_lookback_minutes"),
        ("    tools: [a, b]\n    attribute_discovery_tools: [b]\n", "`b` is also listed in tools or tool_profiles"),
        ("    tools: ['get logs']\n", "engine.temporal_guardrails.tools: `get logs` is not a tool name"),
        ("    tools: [a]\n    tool_profiles: {'': epoch_range}\n", "tool_profiles: `` is empty"),
        ("    tools: [a]\n    lookback: 5\n", "unknown field `lookback`"),
    ];
    for (yaml, expected) in cases {
        let err = parse(&format!("{g}{yaml}"), env(&[])).unwrap_err();
        assert!(err.contains(expected), "{yaml}: {err}");
        assert!(!err.contains('\n'), "one line: {err}");
    }
}

#[test]
fn the_service_name_heuristic_needs_the_long_range_cap() {
    let budget = "engine:\n  tool_budget:\n    enabled: true\n    tools: [get_logs]\n    long_range_service_name_heuristic: true\n";
    let err = parse(budget, env(&[])).unwrap_err();
    assert!(
        err.contains("engine.tool_budget.long_range_service_name_heuristic needs max_long_range_per_turn"),
        "{err}"
    );
    let legacy = budget.replace("tool_budget", "log_tool_budget");
    assert!(parse(&legacy, env(&[])).unwrap_err().contains("engine.log_tool_budget.long_range"), "the legacy key too");
    let (config, _) = parse(&format!("{budget}    max_long_range_per_turn: 1\n"), env(&[])).unwrap();
    assert!(config.engine.tool_budget.unwrap().long_range_service_name_heuristic);
}

#[test]
fn skill_loading_defaults_to_on_demand_and_bad_values_or_keys_are_errors() {
    let (config, _) = parse("", env(&[])).unwrap();
    assert_eq!(config.skills.loading, Loading::OnDemand);
    let text = "skills:\n  loading: always\n  loading_overrides:\n    pdf_tools: on_demand\n";
    let (config, _) = parse(text, env(&[])).unwrap();
    assert_eq!(config.skills.loading, Loading::Always);
    assert_eq!(config.skills.loading_overrides["pdf_tools"], Loading::OnDemand);
    let err = parse("skills:\n  loading: lazy\n", env(&[])).unwrap_err();
    assert!(err.contains("unknown variant `lazy`, expected one of `always`, `on_demand`, `sub_agent`"), "{err}");
    assert!(err.contains("line 2"), "{err}");
    let err = parse("skills:\n  loading_overrides:\n    pdf: sometimes\n", env(&[])).unwrap_err();
    assert!(err.contains("sometimes") && err.contains("line 3"), "{err}");
    let err = parse("skills:\n  loading_overrides:\n    PDF-Tools: always\n", env(&[])).unwrap_err();
    assert!(err.contains("skills.loading_overrides: key `PDF-Tools`"), "{err}");
    let err = parse("agents:\n  a:\n    skills:\n      loading_overrides: {x_: always}\n", env(&[])).unwrap_err();
    assert!(err.contains("agents.a.skills.loading_overrides: key `x_`"), "{err}");
}
