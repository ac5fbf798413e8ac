//! Every key the config loader accepts is acted on or refused. This test keeps it so as
//! sections grow:
//!
//! - every key of `config.example.yaml` and of every config block in the README and the
//!   `docs/` pages must load, and must be listed below with the file that acts on it;
//! - every listed consumer file must exist and name the key (so deleting the code that acts
//!   on a key fails here), and must not be the config loader itself;
//! - every field of the config's types (`host/src/config/sections.rs`, `temporal.rs`) must be
//!   listed, so a key cannot be added to the loader without a consumer named here.
//!
//! A key the loader refuses (`adapter.slack`, say) is not listed: the loader's own tests
//! cover the refusals.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// How a key is acted on: by code in `file` that names `needle`.
enum By {
    Code(&'static str, &'static str),
}

use By::Code;

/// Key patterns (`*`: any one key, such as a skill's or a server's name; a trailing `**`:
/// everything below belongs to someone else, such as a skill's own config) and their consumers.
/// An agent's `llm`, `skills`, `adapter` and `ui` blocks are the top-level ones' keys.
const KEYS: &[(&str, By)] = &[
    ("bot.name", Code("host/src/app/mod.rs", "bot.name")),
    ("bot.system_prompt", Code("host/src/engine/turn.rs", "system_prompt")),
    ("adapter.type", Code("host/src/app/mod.rs", "adapter.kinds()")),
    ("adapter.types", Code("host/src/app/mod.rs", "adapter.kinds()")),
    ("adapter.slack.bot_token", Code("host/src/adapters/slack/mod.rs", "settings.bot_token")),
    ("adapter.slack.app_token", Code("host/src/adapters/slack/mod.rs", "settings.app_token")),
    ("adapter.slack.respond", Code("host/src/adapters/slack/mod.rs", "settings.respond")),
    (
        "adapter.slack.allow_posting_in_external_channels",
        Code("host/src/adapters/slack/mod.rs", "settings.allow_posting_in_external_channels"),
    ),
    ("adapter.slack.approvers", Code("host/src/adapters/slack/mod.rs", "settings.approvers")),
    ("adapter.slack.base_url", Code("host/src/adapters/slack/mod.rs", "settings.base_url")),
    ("adapter.telegram.bot_token", Code("host/src/adapters/telegram/mod.rs", "settings.bot_token")),
    ("adapter.telegram.allowed_chat_ids", Code("host/src/adapters/telegram/mod.rs", "settings.allowed_chat_ids")),
    ("adapter.telegram.approvers", Code("host/src/adapters/telegram/mod.rs", "settings.approvers")),
    ("adapter.telegram.base_url", Code("host/src/adapters/telegram/mod.rs", "settings.base_url")),
    ("llm.provider", Code("host/src/llm/mod.rs", "llm.provider")),
    ("llm.model", Code("host/src/engine/turn.rs", "llm.model")),
    ("llm.max_tokens", Code("host/src/engine/turn.rs", "max_tokens")),
    ("llm.anthropic.api_key", Code("host/src/llm/mod.rs", "key(s, Some(\"ANTHROPIC_API_KEY\"))")),
    ("llm.anthropic.base_url", Code("host/src/llm/mod.rs", "anthropic::Anthropic::new")),
    ("llm.anthropic.reasoning_effort", Code("host/src/llm/anthropic.rs", "output_config")),
    ("llm.openai.api_key", Code("host/src/llm/mod.rs", "OPENAI_API_KEY")),
    ("llm.openai.base_url", Code("host/src/llm/mod.rs", "openai::OpenAi::new")),
    ("llm.openai.reasoning_effort", Code("host/src/llm/mod.rs", "llm.openai.reasoning_effort")),
    ("llm.openai_compatible.api_key", Code("host/src/llm/mod.rs", "openai_compatible::Chat::new")),
    ("llm.openai_compatible.base_url", Code("host/src/llm/mod.rs", "openai_compatible.base_url")),
    ("llm.openai_compatible.reasoning_effort", Code("host/src/llm/openai_compatible.rs", "reasoning_effort")),
    ("llm.bedrock.api", Code("host/src/llm/mod.rs", "s.api()")),
    ("llm.bedrock.access_key_id", Code("host/src/llm/bedrock.rs", "access_key_id")),
    ("llm.bedrock.secret_access_key", Code("host/src/llm/bedrock.rs", "secret_access_key")),
    ("llm.bedrock.session_token", Code("host/src/llm/bedrock.rs", "session_token")),
    ("llm.bedrock.region", Code("host/src/llm/bedrock.rs", "s.region")),
    ("llm.bedrock.api_key", Code("host/src/llm/bedrock.rs", "s.api_key")),
    ("llm.bedrock.reasoning_effort", Code("host/src/llm/bedrock.rs", "s.reasoning_effort")),
    ("llm.bedrock.base_url", Code("host/src/llm/bedrock.rs", "base_url")),
    ("skills.paths", Code("host/src/skills/loader.rs", "skills.paths")),
    ("skills.config.*.**", Code("host/src/skills/loader.rs", "skills.config")),
    ("skills.grants.*.memory", Code("host/src/skills/loader.rs", "grant.memory")),
    ("skills.grants.*.http_hosts", Code("host/src/skills/loader.rs", "http_hosts")),
    ("skills.grants.*.env", Code("host/src/skills/loader.rs", "grant.env")),
    ("skills.grants.*.notify", Code("host/src/skills/loader.rs", "grant.notify")),
    ("skills.grants.*.digest", Code("host/src/skills/oci/load.rs", "grant.digest")),
    ("skills.grants.*.source", Code("host/src/skills/oci/load.rs", "grant.source")),
    ("skills.declared", Code("host/src/skills/declared.rs", "skills.declared")),
    ("skills.oci", Code("host/src/skills/oci/load.rs", "skills.oci")),
    ("skills.honour_allowed_tools", Code("host/src/skills/loader.rs", "skills.honour_allowed_tools")),
    // The fields of one `skills.oci` entry (a list item, like a declared record).
    ("skills.oci.*.ref", Code("host/src/skills/oci/source.rs", "entry.reference")),
    ("skills.oci.*.verify", Code("host/src/skills/oci/source.rs", "entry.verify")),
    ("skills.oci.*.allow_unsigned", Code("host/src/skills/oci/source.rs", "allow_unsigned")),
    ("skills.oci.*.name", Code("host/src/skills/oci/load.rs", "entry.skill_name()")),
    ("skills.oci.*.replaces", Code("host/src/skills/oci/load.rs", "origin.replaces")),
    ("skills.oci.*.allow_tags", Code("host/src/skills/oci/source.rs", "entry.allow_tags")),
    ("skills.oci.*.insecure", Code("host/src/skills/oci/source.rs", "entry.insecure")),
    ("skills.oci.*.verify.key", Code("host/src/skills/oci/source.rs", "Verify::Key { key }")),
    // Keyless is refused by the resolver with a message saying it is not built in.
    ("skills.oci.*.verify.identity", Code("host/src/skills/oci/source.rs", "Verify::Keyless")),
    ("skills.oci.*.verify.issuer", Code("host/src/skills/oci/source.rs", "Verify::Keyless")),
    ("skills.oci.*.verify.trusted_root", Code("host/src/skills/oci/source.rs", "Verify::Keyless")),
    ("skills.oci_max_bytes", Code("host/src/skills/oci/source.rs", "skills.oci_max_bytes")),
    // The fields of one record (a list item: the shown configs reach them as `skills.declared`).
    ("skills.declared.*.name", Code("host/src/skills/declared.rs", "record.name")),
    ("skills.declared.*.skill_type", Code("host/src/skills/declared.rs", "record.skill_type")),
    ("skills.declared.*.description", Code("host/src/skills/declared.rs", "record.description")),
    ("skills.declared.*.is_active", Code("host/src/skills/declared.rs", "record.is_active")),
    ("skills.declared.*.human", Code("host/src/skills/declared.rs", "record.human")),
    ("skills.declared.*.config_json", Code("host/src/skills/declared.rs", "record.config_json")),
    ("databases.*.url", Code("host/src/skills/declared.rs", "database.parsed_url()")),
    ("databases.*.max_rows", Code("host/src/skills/declared.rs", "database.max_rows")),
    ("databases.*.statement_timeout_ms", Code("host/src/skills/declared.rs", "database.statement_timeout_ms")),
    ("skills.schedule_minimum", Code("host/src/skills/loader.rs", "skills.schedule_minimum")),
    ("skills.state_ttl_seconds", Code("host/src/skills/loader.rs", "skills.state_ttl_seconds")),
    ("skills.builtins", Code("host/src/skills/loader.rs", "skills.builtins")),
    ("skills.allowed", Code("host/src/skills/loader.rs", "skills.allowed")),
    ("skills.max_prompt_bytes", Code("host/src/skills/loader.rs", "max_prompt_bytes")),
    ("skills.loading", Code("host/src/engine/turn.rs", "skills.loading")),
    ("skills.loading_overrides.*", Code("host/src/engine/turn.rs", "skills.loading_overrides")),
    ("skills.strict", Code("host/src/app/mod.rs", "skills.strict")),
    ("human.timeout_seconds", Code("host/src/engine/turn.rs", "human.timeout_seconds")),
    ("human.overrides.*", Code("host/src/engine/gate.rs", "overrides.get(name)")),
    ("human.audit_retention_days", Code("host/src/app/mod.rs", "audit_retention()")),
    ("verifier.model", Code("host/src/engine/turn.rs", "verifier.model")),
    ("learning.enabled", Code("host/src/engine/turn.rs", "learning.enabled")),
    ("learning.reflection", Code("host/src/engine/turn.rs", "learning.reflection")),
    ("learning.approval_auto_promote", Code("host/src/engine/promote.rs", "learning.approval_auto_promote)")),
    ("learning.memory.backend", Code("host/src/store/memory/mod.rs", "memory.backend")),
    ("learning.memory.filesystem.path", Code("host/src/store/memory/mod.rs", "memory.filesystem.path")),
    // The block goes to the same reader as `state.postgres` (`Settings::from_section`).
    ("learning.memory.postgres.url", Code("host/src/store/memory/mod.rs", "&memory.postgres")),
    ("learning.memory.postgres.pool_size", Code("host/src/store/memory/mod.rs", "&memory.postgres")),
    ("learning.memory.postgres.connect_timeout_seconds", Code("host/src/store/memory/mod.rs", "&memory.postgres")),
    ("state.backend", Code("host/src/store/state/mod.rs", "match state.backend")),
    ("state.filesystem.path", Code("host/src/store/state/mod.rs", "state.directory()")),
    ("state.postgres.url", Code("host/src/store/state/postgres.rs", "p.url")),
    ("state.postgres.pool_size", Code("host/src/store/state/postgres.rs", "p.pool_size")),
    ("state.postgres.connect_timeout_seconds", Code("host/src/store/state/postgres.rs", "p.connect_timeout_seconds")),
    ("sandbox.defaults", Code("host/src/app/mod.rs", "sandbox.defaults")),
    ("sandbox.maximums", Code("host/src/app/mod.rs", "sandbox.maximums")),
    // Both blocks are laid over the built-in limits by `Limits::overlay`.
    ("sandbox.*.fuel", Code("host/src/sandbox/limits.rs", "settings.fuel")),
    ("sandbox.*.timeout_ms", Code("host/src/sandbox/limits.rs", "settings.timeout_ms")),
    ("sandbox.*.memory_mb", Code("host/src/sandbox/limits.rs", "settings.memory_mb")),
    ("sandbox.*.max_result_bytes", Code("host/src/sandbox/limits.rs", "settings.max_result_bytes")),
    ("sandbox.*.max_log_bytes", Code("host/src/sandbox/limits.rs", "settings.max_log_bytes")),
    ("sandbox.*.memory_quota_mb", Code("host/src/sandbox/limits.rs", "settings.memory_quota_mb")),
    ("sandbox.*.memory_quota_files", Code("host/src/sandbox/limits.rs", "settings.memory_quota_files")),
    ("sandbox.*.state_quota_mb", Code("host/src/sandbox/limits.rs", "settings.state_quota_mb")),
    ("sandbox.*.state_quota_keys", Code("host/src/sandbox/limits.rs", "settings.state_quota_keys")),
    ("sandbox.cache_dir", Code("host/src/app/mod.rs", "sandbox.cache_dir")),
    ("sandbox.warm_instances", Code("host/src/app/mod.rs", "sandbox.warm_instances")),
    ("sandbox.resident_mb", Code("host/src/app/mod.rs", "sandbox.resident_mb")),
    ("sandbox.resident_per_skill_mb", Code("host/src/app/mod.rs", "sandbox.resident_per_skill_mb")),
    ("mcp_servers.*.transport", Code("host/src/mcp/transport.rs", "McpServer::Stdio")),
    ("mcp_servers.*.command", Code("host/src/mcp/transport.rs", "Command::new(command)")),
    ("mcp_servers.*.args", Code("host/src/mcp/transport.rs", "cmd.args(args)")),
    ("mcp_servers.*.env.*", Code("host/src/mcp/transport.rs", ".envs(env)")),
    ("mcp_servers.*.url", Code("host/src/mcp/transport.rs", "url")),
    ("mcp_servers.*.headers.*", Code("host/src/mcp/transport.rs", "http_client(headers)")),
    ("mcp_servers.*.tools", Code("host/src/mcp/client.rs", "s.filter()")),
    ("mcp_servers.*.slack_posting_tools", Code("host/src/app/slack_guard.rs", "slack_posting_tools()")),
    ("mcp_servers.*.skills", Code("host/src/app/mod.rs", "server.serves_skills()")),
    ("mcp_servers.*.auth.client_id", Code("host/src/mcp/oauth.rs", "client_id")),
    ("mcp_servers.*.auth.client_secret", Code("host/src/mcp/oauth.rs", "client_secret")),
    ("mcp_servers.*.auth.scopes", Code("host/src/mcp/oauth.rs", "scopes")),
    ("mcp_servers.*.auth.redirect_port", Code("host/src/mcp/oauth.rs", "redirect_port")),
    ("mcp_servers.*.auth.client_metadata_url", Code("host/src/mcp/oauth.rs", "client_metadata_url")),
    ("agents.*.name", Code("host/src/app/mod.rs", "agent.name")),
    ("agents.*.system_prompt", Code("host/src/app/mod.rs", "agent.system_prompt")),
    ("agents.*.memory.path", Code("host/src/app/mod.rs", "memory.path")),
    ("agents.*.llm", Code("host/src/app/mod.rs", "agent.llm")),
    ("agents.*.skills", Code("host/src/app/mod.rs", "agent.skills")),
    ("agents.*.adapter", Code("host/src/app/mod.rs", "agent.adapter")),
    ("agents.*.ui", Code("host/src/app/mod.rs", "agent.ui")),
    ("engine.session.deadline_seconds", Code("host/src/engine/turn.rs", "deadline_seconds")),
    ("engine.session.wrapup_timeout_seconds", Code("host/src/engine/turn.rs", "wrapup_timeout_seconds")),
    ("engine.session.inflight_ttl_seconds", Code("host/src/engine/turn.rs", "inflight_ttl_seconds")),
    ("engine.session.drain_seconds", Code("host/src/app/serve.rs", "drain_seconds")),
    ("engine.session.skills_wait_seconds", Code("host/src/engine/turn.rs", "skills_wait_seconds")),
    ("engine.tool_budget.enabled", Code("host/src/engine/tool_budget.rs", "section.enabled")),
    ("engine.tool_budget.tools", Code("host/src/engine/tool_budget.rs", "section.tools")),
    ("engine.tool_budget.max_per_turn", Code("host/src/engine/tool_budget.rs", "section.max_per_turn")),
    (
        "engine.tool_budget.max_long_range_per_turn",
        Code("host/src/engine/tool_budget.rs", "section.max_long_range_per_turn"),
    ),
    (
        "engine.tool_budget.long_range_threshold_minutes",
        Code("host/src/engine/tool_budget.rs", "section.long_range_threshold_minutes"),
    ),
    (
        "engine.tool_budget.long_range_service_name_heuristic",
        Code("host/src/engine/tool_budget.rs", "section.long_range_service_name_heuristic"),
    ),
    ("engine.tool_budget.replan_enabled", Code("host/src/engine/tool_budget.rs", "section.replan_enabled")),
    ("engine.log_tool_budget.*", Code("host/src/engine/tool_budget.rs", "engine.log_tool_budget")),
    ("engine.temporal_guardrails.tools", Code("host/src/tools/temporal/mod.rs", "section.tools")),
    ("engine.temporal_guardrails.tool_profiles.*", Code("host/src/tools/temporal/mod.rs", "tool_profiles")),
    (
        "engine.temporal_guardrails.attribute_discovery_tools",
        Code("host/src/tools/temporal/mod.rs", "attribute_discovery_tools"),
    ),
    (
        "engine.temporal_guardrails.attribute_discovery_lookback_minutes",
        Code("host/src/tools/temporal/mod.rs", "attribute_lookback_minutes()"),
    ),
    ("ui.port", Code("host/src/adapters/api/mod.rs", "ui.port")),
    ("ui.auth_token", Code("host/src/adapters/api/mod.rs", "ui.auth_token")),
    ("ui.allowed_hosts", Code("host/src/adapters/auth.rs", "ui.allowed_hosts")),
    ("ui.allowed_origins", Code("host/src/adapters/auth.rs", "ui.allowed_origins")),
    ("ui.tokens", Code("host/src/adapters/api/mod.rs", "ui.tokens")),
    ("ui.tokens.*.name", Code("host/src/adapters/auth.rs", "t.name")),
    ("ui.tokens.*.token", Code("host/src/adapters/auth.rs", "t.token")),
    ("ui.tokens.*.scopes", Code("host/src/adapters/auth.rs", "t.scopes")),
    ("ui.metrics_public", Code("host/src/adapters/api/mod.rs", "metrics_public")),
    ("telemetry.otlp_endpoint", Code("host/src/cli/telemetry.rs", "config.otlp_endpoint")),
    ("telemetry.protocol", Code("host/src/cli/telemetry.rs", "config.protocol")),
    ("telemetry.service_name", Code("host/src/cli/telemetry.rs", "config.service_name")),
    ("telemetry.resource_attributes.**", Code("host/src/cli/telemetry.rs", "config.resource_attributes")),
    ("telemetry.sampler", Code("host/src/cli/telemetry.rs", "config.sampler")),
    ("telemetry.sampler_arg", Code("host/src/cli/telemetry.rs", "config.sampler_arg")),
];

/// The blocks of an agent that are top-level blocks merged over (`agents.<name>.llm` ...).
const AGENT_BLOCKS: &[&str] = &["llm", "skills", "adapter", "ui"];

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// Whether `pattern` matches `path` (both dotted).
fn matches(pattern: &str, path: &str) -> bool {
    let (p, k): (Vec<&str>, Vec<&str>) = (pattern.split('.').collect(), path.split('.').collect());
    if p.last() == Some(&"**") {
        return k.len() >= p.len() - 1 && p[..p.len() - 1].iter().zip(&k).all(|(p, k)| *p == "*" || p == k);
    }
    p.len() == k.len() && p.iter().zip(&k).all(|(p, k)| *p == "*" || p == k)
}

/// The listed pattern `path` falls under, if any; an agent's block is read as the top level's.
fn pattern_of(path: &str) -> Option<&'static str> {
    let parts: Vec<&str> = path.split('.').collect();
    if parts.len() > 3 && parts[0] == "agents" && AGENT_BLOCKS.contains(&parts[2]) {
        let block = format!("agents.*.{}", parts[2]);
        KEYS.iter().find(|(p, _)| *p == block)?;
        return pattern_of(&parts[2..].join("."));
    }
    KEYS.iter().map(|(p, _)| *p).find(|p| matches(p, path))
}

/// Whether some pattern lies below `path` (or is it, or covers it with `**`).
fn is_prefix(path: &str) -> bool {
    let depth = path.split('.').count();
    KEYS.iter().any(|(p, _)| {
        let head: Vec<&str> = p.split('.').take(depth).collect();
        matches(&head.join("."), path) || (p.ends_with("**") && matches(p, path))
    }) || path.starts_with("agents.")
}

/// Every key path of a config document, leaves and empty mappings.
fn paths(value: &serde_json::Value, at: &str, out: &mut Vec<String>) {
    match value {
        serde_json::Value::Object(map) if !map.is_empty() => {
            for (key, value) in map {
                let path = if at.is_empty() { key.clone() } else { format!("{at}.{key}") };
                // Below a `**` pattern, what the keys mean is not the host's.
                if pattern_of(&path).is_some_and(|p| p.ends_with("**")) {
                    out.push(path);
                    continue;
                }
                paths(value, &path, out);
            }
        }
        _ => out.push(at.to_owned()),
    }
}

/// The config documents the project shows: the example file and every ```yaml block of the
/// README and the docs whose top-level keys are all config sections.
fn documents() -> Vec<(String, String)> {
    let sections = [
        "bot",
        "adapter",
        "llm",
        "skills",
        "human",
        "verifier",
        "learning",
        "state",
        "mcp_servers",
        "agents",
        "engine",
        "ui",
        "sandbox",
        "databases",
    ];
    let mut docs =
        vec![("config.example.yaml".to_owned(), std::fs::read_to_string(repo().join("config.example.yaml")).unwrap())];
    let mut pages = vec![repo().join("README.md")];
    let mut dir: Vec<PathBuf> = std::fs::read_dir(repo().join("docs")).unwrap().map(|e| e.unwrap().path()).collect();
    dir.sort();
    pages.extend(dir.into_iter().filter(|p| p.extension().is_some_and(|e| e == "md")));
    for page in pages {
        let text = std::fs::read_to_string(&page).unwrap();
        let name = page.strip_prefix(repo()).unwrap().display().to_string();
        for (i, block) in text.split("```yaml\n").skip(1).enumerate() {
            let yaml = block.split("```").next().unwrap().to_owned();
            let Ok(value) = serde_yaml_ng::from_str::<serde_json::Value>(&yaml) else { continue };
            let Some(map) = value.as_object() else { continue };
            if !map.is_empty() && map.keys().all(|k| sections.contains(&k.as_str())) {
                docs.push((format!("{name} (yaml block {})", i + 1), yaml));
            }
        }
    }
    docs
}

#[test]
fn every_key_in_the_shown_configs_loads_and_has_a_consumer() {
    let docs = documents();
    assert!(
        docs.len() > 3,
        "the example and the docs' config blocks: {:?}",
        docs.iter().map(|d| &d.0).collect::<Vec<_>>()
    );
    let mut failures = Vec::new();
    let mut seen = BTreeSet::new();
    for (name, yaml) in &docs {
        if let Err(e) = skillhost::config::parse(yaml, |_| Some("value-0".into())) {
            failures.push(format!("{name}: does not load: {e}"));
        }
        let value: serde_json::Value = serde_yaml_ng::from_str(yaml).unwrap();
        let mut keys = Vec::new();
        paths(&value, "", &mut keys);
        for key in keys {
            match pattern_of(&key) {
                Some(pattern) => {
                    seen.insert(pattern);
                }
                // An empty mapping where a listed key begins (`overrides: {}`) holds no key.
                None if is_prefix(&key) => {}
                None => failures.push(format!("{name}: `{key}` is accepted, but no consumer is listed in {}", file!())),
            }
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
    assert!(seen.len() > 40, "the shown configs cover most keys: {seen:?}");
}

#[test]
fn every_listed_consumer_names_its_key_outside_the_loader() {
    let mut failures = Vec::new();
    for (pattern, Code(file, needle)) in KEYS {
        if file.starts_with("host/src/config/") {
            failures.push(format!("{pattern}: the loader is not a consumer ({file})"));
            continue;
        }
        match std::fs::read_to_string(repo().join(file)) {
            Ok(text) if text.contains(needle) => {}
            Ok(_) => failures.push(format!("{pattern}: {file} no longer has `{needle}`")),
            Err(e) => failures.push(format!("{pattern}: {file}: {e}")),
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

#[test]
fn every_field_of_the_config_types_is_listed() {
    let mut failures = Vec::new();
    let segments: BTreeSet<&str> = KEYS.iter().flat_map(|(p, _)| p.split('.')).collect();
    for file in [
        "host/src/config/sections.rs",
        "host/src/config/temporal.rs",
        "host/src/config/chat.rs",
        "host/src/config/declared.rs",
        "host/src/config/oci.rs",
    ] {
        let text = std::fs::read_to_string(repo().join(file)).unwrap();
        let mut rename: Option<String> = None;
        for line in text.lines().map(str::trim) {
            if let Some(rest) = line.strip_prefix("#[serde(rename = \"") {
                rename = rest.split('"').next().map(str::to_owned);
                continue;
            }
            let Some(field) = line.strip_prefix("pub ").and_then(|l| l.split_once(':')).map(|(f, _)| f) else {
                if !line.starts_with("///") && !line.starts_with("#[") {
                    rename = None;
                }
                continue;
            };
            if field.contains(' ') || field.contains('(') {
                continue; // `pub fn`, `pub struct`, `pub const`, ...
            }
            let key = rename.take().unwrap_or_else(|| field.to_owned());
            if !segments.contains(key.as_str()) {
                failures.push(format!("{file}: field `{key}` is a config key no consumer is listed for"));
            }
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

#[test]
fn the_key_matcher_itself_can_fail() {
    assert_eq!(pattern_of("skills.config.services.services.checkout.url"), Some("skills.config.*.**"));
    assert_eq!(pattern_of("agents.a.llm.model"), Some("llm.model"));
    assert_eq!(pattern_of("llm.anthropic.no_such_key"), None);
    assert_eq!(pattern_of("agents.a.llm.nope"), None);
    assert!(!is_prefix("nothing.here"));
}
