//! `${VAR}` in config values: hostile values stay one scalar, typing of whole references,
//! keys and comments untouched, warnings and errors still naming lines.

use super::*;
use crate::config::env::Plain;

/// Values that would change the config's structure if they were substituted into the text.
const HOSTILE: &[&str] = &[
    "x # not a comment",
    "a, b",
    "}",
    "]",
    "{",
    "[",
    "key: value",
    "x\nskills: {paths: [evil]}",
    "x\r\nbot: {}",
    "!!int 5",
    "!!binary aGk=",
    "!!map {a: 1}",
    "&anchor x",
    "*alias",
    "- item",
    "'",
    "\"",
    "${OTHER}",
    "",
    " leading and trailing ",
    "8080",
    "null",
    "true",
];

#[test]
fn hostile_values_stay_one_string_in_every_position() {
    let block = "bot:\n  name: ${V}\n  system_prompt: kept\n";
    let flow = "bot: {name: ${V}, system_prompt: kept}\n";
    let quoted = "bot:\n  name: \"${V}\"\n  system_prompt: 'kept'\n";
    let single = "bot:\n  name: '${V}'\n  system_prompt: kept\n";
    for value in HOSTILE {
        for text in [block, flow, quoted, single] {
            let (config, warnings) = parse(text, v(value)).unwrap_or_else(|e| panic!("{value:?} in {text:?}: {e}"));
            assert_eq!(config.bot.name, *value, "in {text:?}");
            assert_eq!(config.bot.system_prompt, "kept", "{value:?} in {text:?}");
            assert_eq!(config.skills.paths, Config::default().skills.paths, "{value:?} in {text:?}");
            assert!(warnings.is_empty(), "a value is never expanded again: {warnings:?}");
        }
        let (config, _) = parse("bot:\n  name: pre ${V} post\n", v(value)).unwrap();
        assert_eq!(config.bot.name, format!("pre {value} post"));
    }
}

#[test]
fn hostile_values_stay_one_item_in_lists() {
    for value in HOSTILE {
        for text in ["skills:\n  paths: [${V}, b]\n", "skills:\n  paths:\n    - ${V}\n    - b\n"] {
            let (config, _) = parse(text, v(value)).unwrap_or_else(|e| panic!("{value:?} in {text:?}: {e}"));
            let paths: Vec<_> = config.skills.paths.iter().map(|p| p.to_string_lossy().into_owned()).collect();
            assert_eq!(paths, [value.to_string(), "b".into()], "in {text:?}");
        }
    }
}

#[test]
fn a_plain_whole_reference_is_typed_like_a_plain_scalar() {
    let port = |text: &'static str, value: &'static str| parse(text, v(value)).map(|(c, _)| c.ui.port);
    for text in ["ui: {port: ${V}}\n", "ui:\n  port: ${V}\n"] {
        assert_eq!(port(text, "8080").unwrap(), Some(8080));
        assert_eq!(port(text, "0x1F90").unwrap(), Some(8080));
        assert_eq!(port(text, "").unwrap(), None, "empty is null: the optional port is absent");
        assert_eq!(port(text, "~").unwrap(), None);
        let err = port(text, "80 # x").unwrap_err();
        assert!(err.contains("u16") && (err.contains("line 1") || err.contains("line 2")), "{err}");
        assert!(port(text, "80\nhuman: {}").is_err(), "text, not a number");
        assert!(port(text, "70000").is_err(), "out of range");
    }
    assert!(port("ui: {port: \"${V}\"}\n", "8080").is_err(), "quoted: a string, as YAML makes it");
    assert_eq!(port("ui: {port: ${V}}\n", "8080").unwrap(), Some(8080));
    let (config, _) = parse("human:\n  timeout_seconds: ${V}\n", v("60")).unwrap();
    assert_eq!(config.human.timeout_seconds, 60);
    assert!(parse("learning: {enabled: ${V}}\n", v("60")).unwrap_err().contains("bool"));
    let (config, _) = parse("learning: {enabled: ${V}, reflection: ${V}}\n", v("true")).unwrap();
    assert!(config.learning.enabled && config.learning.reflection);
    let (config, _) = parse("llm:\n  provider: ${V}\n", v("openai")).unwrap();
    assert_eq!(config.llm.provider, Provider::Openai, "an enum's variant is a value too");
}

#[test]
fn string_fields_get_the_text_and_free_form_values_the_type() {
    let text = "llm:\n  anthropic: {api_key: ${V}}\nskills:\n  config:\n    x:\n      port: ${V}\n      name: \"${V}\"\n      list: [${V}, a${V}]\n";
    let (config, _) = parse(text, v("0123")).unwrap();
    assert_eq!(config.llm.anthropic.unwrap().api_key.as_deref(), Some("0123"), "a string field keeps the text");
    let x = &config.skills.config["x"];
    assert_eq!(
        *x,
        serde_json::json!({"port": "0123", "name": "0123", "list": ["0123", "a0123"]}),
        "0123 is text in YAML 1.2"
    );
    let (config, _) = parse(text, v("8080")).unwrap();
    assert_eq!(config.skills.config["x"], serde_json::json!({"port": 8080, "name": "8080", "list": [8080, "a8080"]}));
    let (config, _) = parse("llm:\n  anthropic: {base_url: \"${V}\"}\n", v("")).unwrap();
    assert_eq!(config.llm.anthropic.unwrap().base_url.as_deref(), Some(""), "quoted: an empty string, not absent");
}

#[test]
fn mcp_server_values_are_interpolated_and_quoting_keeps_text() {
    let text =
        "mcp_servers:\n  a:\n    transport: stdio\n    command: ${V}\n    args: [${V}]\n    env: {TOKEN: \"${V}\"}\n";
    let (config, _) = parse(text, v("npx -y x # y")).unwrap();
    let McpServer::Stdio { command, args, env, .. } = &config.mcp_servers["a"] else { panic!("stdio") };
    assert_eq!((command.as_str(), args.as_slice()), ("npx -y x # y", ["npx -y x # y".to_string()].as_slice()));
    assert_eq!(env["TOKEN"], "npx -y x # y");
    // The transport tag makes serde buffer the entry untyped, so a plain `${V}` of `123` is a
    // number there, as a literal `123` is; quoted, it is text.
    assert!(parse(text, v("123")).unwrap_err().contains("expected a string"));
    let quoted = "mcp_servers:\n  a:\n    transport: stdio\n    command: \"${V}\"\n    env: {TOKEN: \"${V}\"}\n";
    let (config, _) = parse(quoted, v("123")).unwrap();
    let McpServer::Stdio { command, env, .. } = &config.mcp_servers["a"] else { panic!("stdio") };
    assert_eq!((command.as_str(), env["TOKEN"].as_str()), ("123", "123"));
}

#[test]
fn keys_and_comments_are_never_interpolated() {
    let text = "# ${NOPE}\nskills:\n  config:\n    ${V}:\n      a: 1 # ${NOPE2}\n";
    let (config, warnings) = parse(text, v("expanded")).unwrap();
    assert!(config.skills.config.contains_key("${V}"), "{:?}", config.skills.config.keys());
    assert!(warnings.is_empty(), "{warnings:?}");
    let err = parse("bot:\n  name: x\n  ${V}: y\n", v("name")).unwrap_err();
    assert!(err.contains("${V}") && err.contains("line 3"), "the key as written, with its line: {err}");
}

#[test]
fn unset_variables_warn_once_with_their_lines() {
    let text = "bot:\n  name: ${GONE}\n  system_prompt: a ${GONE} b\nllm:\n  model: ${ALSO}\n";
    let (config, warnings) = parse(text, env(&[])).unwrap();
    assert_eq!((config.bot.name.as_str(), config.bot.system_prompt.as_str()), ("", "a  b"));
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(warnings[0].contains("GONE") && warnings[0].contains("lines 2, 3"), "{warnings:?}");
    assert!(warnings[1].contains("ALSO") && warnings[1].contains("line 5"), "{warnings:?}");
}

#[test]
fn placeholder_characters_in_the_text_are_refused() {
    let err = parse("bot:\n  name: \u{E000}V\u{E001}\n", v("x")).unwrap_err();
    assert!(err.contains("line 2") && err.contains("U+E000"), "{err}");
}

#[test]
fn plain_scalar_typing_follows_yaml() {
    let cases = [
        ("", Plain::Null),
        ("~", Plain::Null),
        ("NULL", Plain::Null),
        ("True", Plain::Bool(true)),
        ("false", Plain::Bool(false)),
        ("8080", Plain::Unsigned(8080)),
        ("+5", Plain::Unsigned(5)),
        ("0x1f", Plain::Unsigned(31)),
        ("0o17", Plain::Unsigned(15)),
        ("-3", Plain::Signed(-3)),
        ("1.5", Plain::Float(1.5)),
        ("1e3", Plain::Float(1000.0)),
        ("-.inf", Plain::Float(f64::NEG_INFINITY)),
        ("0123", Plain::Text),
        ("inf", Plain::Text),
        ("NaN", Plain::Text),
        ("yes", Plain::Text),
        ("++5", Plain::Text),
        ("0x+5", Plain::Text),
        ("1_000", Plain::Text),
        ("8080 # x", Plain::Text),
        ("{a: 1}", Plain::Text),
        ("!!int 5", Plain::Text),
    ];
    for (text, plain) in cases {
        assert_eq!(Plain::of(text), plain, "{text:?}");
    }
}
