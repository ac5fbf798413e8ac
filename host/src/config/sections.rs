//! One struct per `config.yaml` section. Every struct rejects unknown keys.

use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// The whole `config.yaml`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// The agent's name and system prompt.
    pub bot: Bot,
    /// Which adapters receive messages.
    pub adapter: Adapter,
    /// The LLM provider.
    pub llm: Llm,
    /// Where skills are found, their config, and what they are granted.
    pub skills: Skills,
    /// Human approval settings.
    pub human: Human,
    /// The post-turn fact checker.
    pub verifier: Verifier,
    /// Memory and self-learning.
    pub learning: Learning,
    /// The persistent key-value store.
    pub state: State,
    /// External MCP servers, by name (snake_case: it prefixes their tools).
    pub mcp_servers: BTreeMap<String, McpServer>,
    /// Independent agents in one process, by name.
    pub agents: BTreeMap<String, Agent>,
    /// Engine guardrails.
    pub engine: Engine,
    /// The embedded HTTP server (API adapter).
    pub ui: Ui,
    /// Sandbox defaults and operator maximums (beyond the spec).
    pub sandbox: Sandbox,
    /// Databases that `database` records of `skills.declared` query, by id.
    pub databases: BTreeMap<String, super::Database>,
    /// Traces over OpenTelemetry (the standard `OTEL_*` environment wins).
    pub telemetry: Telemetry,
}

/// `telemetry`: what the standard OpenTelemetry environment says, written in the config.
/// Each `OTEL_*` variable that is set wins over its key here.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Telemetry {
    /// The collector's OTLP/HTTP base URL (spans go to `{endpoint}/v1/traces`), as
    /// `OTEL_EXPORTER_OTLP_ENDPOINT`; unset: traces are off.
    pub otlp_endpoint: Option<String>,
    /// `http/protobuf` (the default) or `grpc` (as `OTEL_EXPORTER_OTLP_PROTOCOL`).
    pub protocol: Option<String>,
    /// The service's name (default `skillhost`), as `OTEL_SERVICE_NAME`.
    pub service_name: Option<String>,
    /// More resource attributes, as `OTEL_RESOURCE_ATTRIBUTES`.
    pub resource_attributes: BTreeMap<String, String>,
    /// Which traces are kept: `always_on`, `always_off`, `traceidratio`,
    /// `parentbased_always_on` (the default), `parentbased_always_off`,
    /// `parentbased_traceidratio`, as `OTEL_TRACES_SAMPLER`.
    pub sampler: Option<String>,
    /// The ratio of the `*traceidratio` samplers (0 to 1), as `OTEL_TRACES_SAMPLER_ARG`.
    pub sampler_arg: Option<f64>,
}

impl Telemetry {
    fn check(&self) -> Result<(), String> {
        if let Some(endpoint) = &self.otlp_endpoint {
            let url =
                url::Url::parse(endpoint).map_err(|e| format!("otlp_endpoint: `{endpoint}` is not a URL: {e}"))?;
            if !matches!(url.scheme(), "http" | "https") {
                return Err(format!("otlp_endpoint: `{endpoint}` is not an http(s) URL"));
            }
        }
        if let Some(protocol) = self.protocol.as_deref().filter(|p| !matches!(*p, "http/protobuf" | "grpc")) {
            return Err(format!("protocol: `{protocol}` is not supported (http/protobuf or grpc)"));
        }
        const SAMPLERS: [&str; 6] = [
            "always_on",
            "always_off",
            "traceidratio",
            "parentbased_always_on",
            "parentbased_always_off",
            "parentbased_traceidratio",
        ];
        if let Some(sampler) = self.sampler.as_deref().filter(|s| !SAMPLERS.contains(s)) {
            return Err(format!("sampler: `{sampler}` is not one of {}", SAMPLERS.join(", ")));
        }
        if let Some(arg) = self.sampler_arg.filter(|a| !(0.0..=1.0).contains(a)) {
            return Err(format!("sampler_arg: {arg} is not between 0 and 1"));
        }
        Ok(())
    }
}

impl Config {
    /// Checks rules that the types alone cannot express.
    pub(crate) fn check(&self) -> Result<(), String> {
        for key in self.human.overrides.keys() {
            if !key.contains("__") {
                return Err(format!("human.overrides: key `{key}` is not of the form skillname__toolname"));
            }
        }
        for (at, skills) in self.blocks("skills", &self.skills, |a| a.skills.as_ref()) {
            for key in skills.loading_overrides.keys() {
                super::check_name(key).map_err(|e| format!("{at}.loading_overrides: key `{key}` {e}"))?;
            }
            let mut names = std::collections::BTreeMap::new();
            for entry in &skills.oci {
                entry.check().map_err(|e| format!("{at}.oci: {e}"))?;
                if let Some(other) = names.insert(entry.skill_name(), &entry.reference) {
                    return Err(format!(
                        "{at}.oci: `{other}` and `{}` both serve skill `{}`; give one a `name:`",
                        entry.reference,
                        entry.skill_name()
                    ));
                }
            }
            if skills.oci_max_bytes == 0 {
                return Err(format!("{at}.oci_max_bytes: 0 would refuse every layer; at least 1"));
            }
            if skills.state_ttl_seconds == 0 {
                return Err(format!("{at}.state_ttl_seconds: 0 would expire every entry at once; at least 1"));
            }
        }
        self.state.check()?;
        self.learning.memory.check()?;
        for (id, database) in &self.databases {
            database.check().map_err(|e| format!("databases.{id}.{e}"))?;
        }
        for (name, server) in &self.mcp_servers {
            // The name prefixes the server's tools (`<server>__<tool>`), like a skill's name.
            super::check_name(name).map_err(|e| format!("mcp_servers: key `{name}` {e}"))?;
            server.check().map_err(|e| format!("mcp_servers.{name}: {e}"))?;
        }
        let agent_grants = self.agents.values().filter_map(|a| a.skills.as_ref()).flat_map(|s| &s.grants);
        for (skill, grant) in self.skills.grants.iter().chain(agent_grants) {
            grant.check().map_err(|e| format!("skills.grants.{skill}.{e}"))?;
        }
        for (at, llm) in self.blocks("llm", &self.llm, |a| a.llm.as_ref()) {
            llm.check().map_err(|e| format!("{at}.{e}"))?;
        }
        for (at, adapter) in self.blocks("adapter", &self.adapter, |a| a.adapter.as_ref()) {
            adapter.check().map_err(|e| format!("{at}: {e}"))?;
        }
        if self.engine.tool_budget.is_some() && self.engine.log_tool_budget.is_some() {
            return Err("engine.tool_budget and engine.log_tool_budget are both set: log_tool_budget is the legacy \
                name of tool_budget, and only one of them can apply; keep tool_budget"
                .into());
        }
        for (at, ui) in self.blocks("ui", &self.ui, |a| a.ui.as_ref()) {
            ui.check().map_err(|e| format!("{at}: {e}"))?;
        }
        self.engine.temporal_guardrails.check()?;
        self.telemetry.check().map_err(|e| format!("telemetry.{e}"))?;
        for (key, budget) in
            [("tool_budget", &self.engine.tool_budget), ("log_tool_budget", &self.engine.log_tool_budget)]
        {
            if let Some(budget) = budget {
                budget.check().map_err(|e| format!("engine.{key}.{e}"))?;
            }
        }
        self.sandbox.defaults.check().map_err(|e| format!("sandbox.defaults: {e}"))?;
        self.sandbox.maximums.check().map_err(|e| format!("sandbox.maximums: {e}"))?;
        Ok(())
    }

    /// The top-level block `key` and every agent's own (merged over it), each with where it
    /// is written (`adapter`, `agents.<name>.adapter`).
    fn blocks<'a, T>(
        &'a self,
        key: &'static str,
        top: &'a T,
        of: impl Fn(&'a Agent) -> Option<&'a T> + 'a,
    ) -> impl Iterator<Item = (String, &'a T)> + 'a {
        let agents = self.agents.iter().filter_map(move |(name, a)| Some((format!("agents.{name}.{key}"), of(a)?)));
        std::iter::once((key.to_owned(), top)).chain(agents)
    }
}

impl Adapter {
    /// The adapters this block names: `type`, else `types`, else none (the caller's default).
    pub fn kinds(&self) -> Vec<AdapterKind> {
        match (self.kind, self.types.as_slice()) {
            (Some(kind), _) => vec![kind],
            (None, kinds) => kinds.to_vec(),
        }
    }

    /// Refuses `type` with `types`, and malformed chat tokens (a missing one is refused when
    /// the adapter is served: [`Adapter::ready`]).
    fn check(&self) -> Result<(), String> {
        if self.kind.is_some() && !self.types.is_empty() {
            return Err("`type` and `types` are both set: name one adapter with `type` or several with `types`".into());
        }
        if let Some(slack) = &self.slack {
            slack.check()?;
        }
        if let Some(telegram) = &self.telegram {
            telegram.check()?;
        }
        Ok(())
    }

    /// Whether `kind` can be served from this block: Slack and Telegram need their block with
    /// a token (tokens are never shown, only the setting's name).
    pub fn ready(&self, kind: AdapterKind) -> Result<(), String> {
        match kind {
            AdapterKind::Slack => self
                .slack
                .as_ref()
                .ok_or("the slack adapter needs an `adapter.slack` block (bot_token, app_token)")?
                .ready(),
            AdapterKind::Telegram => self
                .telegram
                .as_ref()
                .ok_or("the telegram adapter needs an `adapter.telegram` block (bot_token)")?
                .ready(),
            AdapterKind::Cli | AdapterKind::Api => Ok(()),
        }
    }
}

impl Llm {
    /// Keys a provider block accepts that the provider would not act on.
    fn check(&self) -> Result<(), String> {
        if let Some(bedrock) = &self.bedrock {
            bedrock.check().map_err(|e| format!("bedrock.{e}"))?;
        }
        Ok(())
    }
}

/// Which Bedrock API `llm.bedrock.api` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BedrockApi {
    /// The Converse API (the default).
    Converse,
    /// OpenAI Responses through the Mantle gateway.
    Responses,
}

impl BedrockSettings {
    /// `api` (unset or empty means `converse`).
    pub fn api(&self) -> Result<BedrockApi, String> {
        match self.api.as_deref().unwrap_or_default() {
            "" | "converse" => Ok(BedrockApi::Converse),
            "responses" => Ok(BedrockApi::Responses),
            other => Err(format!("api: {other:?} is not one of converse, responses")),
        }
    }

    /// `api: converse` signs with IAM credentials; `api: responses` sends a bearer key. A key
    /// of the other API would be accepted and never used.
    fn check(&self) -> Result<(), String> {
        let (unused, api, other) = if self.api()? == BedrockApi::Responses {
            let sigv4 = vec![
                ("access_key_id", self.access_key_id.is_some()),
                ("secret_access_key", self.secret_access_key.is_some()),
                ("session_token", self.session_token.is_some()),
            ];
            (sigv4, "responses", "converse")
        } else {
            let bearer =
                vec![("api_key", self.api_key.is_some()), ("reasoning_effort", self.reasoning_effort.is_some())];
            (bearer, "converse", "responses")
        };
        match unused.iter().find(|(_, set)| *set) {
            Some((key, _)) => Err(format!(
                "{key} is a setting of api: {other}, and api is {api}{}: it would never be used; remove it or set api: {other}",
                if self.api.is_none() { " (the default)" } else { "" }
            )),
            None => Ok(()),
        }
    }
}

/// `bot`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Bot {
    /// The agent's name.
    pub name: String,
    /// Prepended to every conversation, before skill prompts and memory.
    pub system_prompt: String,
}

impl Default for Bot {
    fn default() -> Self {
        Bot { name: "skillhost".into(), system_prompt: String::new() }
    }
}

/// `adapter`: one (`type`) or several (`types`) adapters with their blocks.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Adapter {
    /// A single adapter.
    #[serde(rename = "type")]
    pub kind: Option<AdapterKind>,
    /// Several adapters.
    pub types: Vec<AdapterKind>,
    /// The Slack app (Socket Mode).
    pub slack: Option<super::SlackSettings>,
    /// The Telegram bot (long polling).
    pub telegram: Option<super::TelegramSettings>,
}

/// An adapter name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AdapterKind {
    /// The terminal.
    Cli,
    /// The HTTP API.
    Api,
    /// Slack, Socket Mode.
    Slack,
    /// Telegram, long polling.
    Telegram,
}

/// `llm`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Llm {
    /// Which provider block to use.
    pub provider: Provider,
    /// The model id.
    pub model: String,
    /// Maximum output tokens per response.
    pub max_tokens: u32,
    /// Anthropic Messages API.
    pub anthropic: Option<ProviderSettings>,
    /// OpenAI Responses API.
    pub openai: Option<ProviderSettings>,
    /// AWS Bedrock (Converse, or Responses through Mantle).
    pub bedrock: Option<BedrockSettings>,
    /// Any Chat Completions server (Ollama, vLLM, llama.cpp).
    pub openai_compatible: Option<ProviderSettings>,
}

impl Default for Llm {
    fn default() -> Self {
        Llm {
            provider: Provider::Anthropic,
            model: "claude-sonnet-4-6".into(),
            max_tokens: 4096,
            anthropic: None,
            openai: None,
            bedrock: None,
            openai_compatible: None,
        }
    }
}

/// An LLM provider name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Provider {
    /// Anthropic.
    Anthropic,
    /// OpenAI.
    Openai,
    /// AWS Bedrock.
    Bedrock,
    /// An OpenAI-compatible Chat Completions server.
    OpenaiCompatible,
}

/// Settings shared by the HTTP providers.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ProviderSettings {
    /// The API key (from `${ENV}` in practice).
    pub api_key: Option<String>,
    /// Overrides the provider's endpoint (gateways, proxies, local servers).
    pub base_url: Option<String>,
    /// Reasoning effort for reasoning models.
    pub reasoning_effort: Option<String>,
}

/// `llm.bedrock`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BedrockSettings {
    /// `converse` (default) or `responses`.
    pub api: Option<String>,
    /// IAM access key id (Converse).
    pub access_key_id: Option<String>,
    /// IAM secret (Converse).
    pub secret_access_key: Option<String>,
    /// STS session token, for temporary credentials.
    pub session_token: Option<String>,
    /// The AWS region.
    pub region: Option<String>,
    /// Bedrock API key (bearer), for `api: responses`.
    pub api_key: Option<String>,
    /// Reasoning effort for `api: responses`.
    pub reasoning_effort: Option<String>,
    /// Overrides the endpoint.
    pub base_url: Option<String>,
}

/// `skills`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Skills {
    /// Directories scanned in order; a later skill of the same name wins.
    pub paths: Vec<PathBuf>,
    /// Skill name -> its config block, passed to the skill as `call-context.config`.
    pub config: BTreeMap<String, serde_json::Value>,
    /// Skill name -> the capabilities the operator grants it (beyond the spec).
    pub grants: BTreeMap<String, Grant>,
    /// The built-in skills to load (beyond the spec: there they always load). Default: all
    /// of them; `[]` loads none. A skill folder of the same name replaces a built-in.
    pub builtins: Vec<Builtin>,
    /// The skills (or MCP servers) an agent may use; absent: all that load. Set per agent in
    /// `agents.<name>.skills.allowed`, or here for the single agent.
    pub allowed: Option<Vec<String>>,
    /// The largest `prompt.md` / `SKILL.md` accepted, in bytes (it goes into every system
    /// prompt); a larger one is a load error for that skill. Default 256 KiB.
    pub max_prompt_bytes: u64,
    /// How `SKILL.md` skills reach the model (`on_demand` by default). `prompt.md` skills are
    /// always injected.
    pub loading: Loading,
    /// Skill name -> its own [`Loading`], over `loading`.
    pub loading_overrides: BTreeMap<String, Loading>,
    /// A name in config that names nothing loaded (a skill in `config`, `grants`, `allowed`,
    /// `loading_overrides`; a tool in `human.overrides`, `engine.tool_budget.tools`,
    /// `engine.temporal_guardrails`) stops the start instead of being a warning. `--strict`
    /// sets it.
    pub strict: bool,
    /// The shortest `[schedule] every` a skill may run at (a manifest asking for less runs
    /// at this, with a warning). Default 10 s.
    pub schedule_minimum: super::Interval,
    /// Tools declared by a record, no code (`declared__<name>`).
    pub declared: Vec<super::DeclaredRecord>,
    /// How long an entry of a skill's per-conversation state lives after its last get or set
    /// (`[capabilities] state = "conversation"`, the default), in seconds. Default 86,400
    /// (a day). A skill's own namespace (`state = "skill"`) never expires.
    pub state_ttl_seconds: u64,
    /// Skills pulled from OCI registries by reference (docs/distribution.md); an entry wins
    /// over a folder or built-in of the same name.
    pub oci: Vec<super::OciSkill>,
    /// The most bytes one blob of an OCI artifact may have (a layer: the component, the files
    /// tar), counted on the bytes received whatever the registry declares; a download passing
    /// it stops there. Manifests, referrers, signatures and bundles stop at 4 MiB. Default
    /// 512 MiB.
    pub oci_max_bytes: u64,
    /// Acts on a `SKILL.md`'s `allowed-tools`: the skill's own tools it lists run without
    /// asking (`human.overrides` still wins). Default false: kept in the frontmatter, shown.
    pub honour_allowed_tools: bool,
}

/// `skills.loading`: how a `SKILL.md` skill's body (and its tools) reach the model.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Loading {
    /// The body goes into every system prompt and the tools are always offered.
    Always,
    /// The system prompt lists the skill's name and description; the model calls
    /// `load_skill` for its body, and its tools are offered from then on.
    #[default]
    OnDemand,
    /// The skill is one tool, `<skill>__run {task}`: a nested turn whose only system prompt
    /// is the body, with only the skill's own tools; its answer is the result.
    SubAgent,
}

impl Default for Skills {
    fn default() -> Self {
        Skills {
            paths: vec![PathBuf::from(DEFAULT_SKILLS_PATH)],
            config: BTreeMap::new(),
            grants: BTreeMap::new(),
            builtins: vec![Builtin::Shell, Builtin::Memory, Builtin::HttpChecker],
            allowed: None,
            max_prompt_bytes: DEFAULT_MAX_PROMPT_BYTES,
            loading: Loading::OnDemand,
            loading_overrides: BTreeMap::new(),
            strict: false,
            schedule_minimum: super::DEFAULT_SCHEDULE_MINIMUM,
            declared: Vec::new(),
            state_ttl_seconds: DEFAULT_STATE_TTL_SECONDS,
            oci: Vec::new(),
            oci_max_bytes: DEFAULT_OCI_MAX_BYTES,
            honour_allowed_tools: false,
        }
    }
}

/// `skills.state_ttl_seconds` when the config names none: a day.
pub const DEFAULT_STATE_TTL_SECONDS: u64 = 86_400;

/// `skills.oci_max_bytes` when the config names none: 512 MiB (a Python component is some
/// 40 MB).
pub const DEFAULT_OCI_MAX_BYTES: u64 = 512 << 20;

/// `skills.max_prompt_bytes` when the config names none: 256 KiB.
pub const DEFAULT_MAX_PROMPT_BYTES: u64 = 256 * 1024;

/// `skills.paths` when the config names none; unlike a path the operator wrote, it may be
/// missing.
pub const DEFAULT_SKILLS_PATH: &str = "./skills";

/// A skill that ships inside the binary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Builtin {
    /// `shell__run_command`: native, spawns processes.
    Shell,
    /// The memory skill (a component embedded in the binary).
    Memory,
    /// The http_checker skill (a component embedded in the binary).
    HttpChecker,
}

impl Builtin {
    /// The skill's name.
    pub fn name(self) -> &'static str {
        match self {
            Builtin::Shell => "shell",
            Builtin::Memory => "memory",
            Builtin::HttpChecker => "http_checker",
        }
    }
}

/// What the operator allows one skill. A skill gets a capability only when its manifest asks
/// for it and its grant allows it.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Grant {
    /// Access to the memory root.
    pub memory: bool,
    /// Hosts it may reach over HTTP (`host`, `host:port`, `*.domain`, or `*` for any).
    pub http_hosts: Vec<String>,
    /// Variables of skillhost's own environment the skill may read (exact names). Those its
    /// manifest also names are its WASI environment in every call (hooks and tools alike),
    /// with their values when skillhost started; nothing else of the environment reaches it.
    pub env: Vec<String>,
    /// Where the skill may send messages of its own (the `notify` import), when its manifest
    /// asks for it: `slack:<channel id>`, `telegram:<chat id>`.
    pub notify: Vec<super::Destination>,
    /// Pins this grant to one OCI artifact (`sha256:<64 hex>`): a skill of another digest,
    /// or one asking for a capability this grant does not name, is refused until re-granted.
    pub digest: Option<String>,
    /// The registry repository (`registry/path`, no tag or digest) whose skill of this name
    /// it is for: a skill pulled from a registry receives its grant only when the grant names
    /// its repository or pins its digest; a grant naming a repository is not a folder's.
    pub source: Option<String>,
}

impl Grant {
    fn check(&self) -> Result<(), String> {
        if let Some(source) = &self.source
            && (source.is_empty() || source.contains('@') || super::oci::repository_of(source) != source)
        {
            return Err(format!("source: `{source}` is not a repository (registry/path, without tag or digest)"));
        }
        if let Some(digest) = &self.digest {
            let hex = digest.strip_prefix("sha256:").unwrap_or_default();
            if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
                return Err(format!("digest: `{digest}` is not sha256:<64 lowercase hex>"));
            }
        }
        self.env.iter().try_for_each(|name| super::check_env_name(name).map_err(|e| format!("env: {e}")))
    }
}

/// Per-call limits; every field optional so that layers (defaults, manifest) can combine.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LimitSettings {
    /// Fuel (roughly, wasm instructions) per call.
    pub fuel: Option<u64>,
    /// Wall-clock deadline per call, in milliseconds.
    pub timeout_ms: Option<u64>,
    /// Linear memory cap per instance, in MiB.
    pub memory_mb: Option<u64>,
    /// Largest result a call may return, in bytes.
    pub max_result_bytes: Option<u64>,
    /// Most log output (log import plus stdout/stderr) kept per call, in bytes.
    pub max_log_bytes: Option<u64>,
    /// Most MiB the memory root may hold after a write through the skill's `memory` import.
    pub memory_quota_mb: Option<u64>,
    /// Most files the memory root may hold after such a write.
    pub memory_quota_files: Option<u64>,
    /// Most MiB (keys plus values) in the skill's state namespace.
    pub state_quota_mb: Option<u64>,
    /// Most keys in the skill's state namespace.
    pub state_quota_keys: Option<u64>,
}

impl LimitSettings {
    pub(crate) fn check(&self) -> Result<(), String> {
        let fields = [
            ("fuel", self.fuel),
            ("timeout_ms", self.timeout_ms),
            ("memory_mb", self.memory_mb),
            ("max_result_bytes", self.max_result_bytes),
            ("max_log_bytes", self.max_log_bytes),
            ("memory_quota_mb", self.memory_quota_mb),
            ("memory_quota_files", self.memory_quota_files),
            ("state_quota_mb", self.state_quota_mb),
            ("state_quota_keys", self.state_quota_keys),
        ];
        match fields.iter().find(|(_, v)| *v == Some(0)) {
            Some((name, _)) => Err(format!("{name} must be greater than 0")),
            None => Ok(()),
        }
    }
}

/// `sandbox` (beyond the spec): per-call limits and the compiled-component cache.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Sandbox {
    /// Limits for skills whose manifest sets none.
    pub defaults: LimitSettings,
    /// The most any manifest may ask for; larger requests are clamped.
    pub maximums: LimitSettings,
    /// Where compiled components are cached (default `./.skillhost/cache`).
    pub cache_dir: Option<PathBuf>,
    /// Fresh instances of each skill component made ahead of need (default 2; 0: every call
    /// instantiates its own).
    pub warm_instances: Option<usize>,
    /// The most memory, in MiB, the sandbox keeps resident for skills between calls, all
    /// skills together (default 1024; 0 keeps none).
    pub resident_mb: Option<u64>,
    /// The most of it one skill's calls keep (default 256).
    pub resident_per_skill_mb: Option<u64>,
}

/// An approval level an operator can set in `human.overrides` (`null` means auto).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OverrideLevel {
    /// Pause for approve/deny.
    Approve,
    /// Require typing the confirmation challenge.
    Confirm,
}

/// `human`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Human {
    /// How long to wait for a decision before treating it as denied.
    pub timeout_seconds: u64,
    /// `skill__tool` -> level; `null` runs without asking. The final word on approval.
    pub overrides: BTreeMap<String, Option<OverrideLevel>>,
    /// How long the record of approvals and questions (`GET /api/audit`, `skillhost audit`)
    /// keeps a record, in days; older ones are pruned, and the pruning is recorded. `0` keeps
    /// every record. Default 365.
    pub audit_retention_days: u64,
}

impl Default for Human {
    fn default() -> Self {
        Human { timeout_seconds: 300, overrides: BTreeMap::new(), audit_retention_days: 365 }
    }
}

impl Human {
    /// How long a record is kept (`None`: for good).
    pub fn audit_retention(&self) -> Option<std::time::Duration> {
        (self.audit_retention_days > 0)
            .then(|| std::time::Duration::from_secs(self.audit_retention_days.saturating_mul(86_400)))
    }
}

/// `verifier`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Verifier {
    /// The model for fact checks; the main model when absent.
    pub model: Option<String>,
}

/// `learning`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Learning {
    /// Master switch.
    pub enabled: bool,
    /// Append a daily reflection after each conversation.
    pub reflection: bool,
    /// Approvals with zero denials before a call auto-executes.
    pub approval_auto_promote: u32,
    /// Where memory files live.
    pub memory: MemoryBackend,
}

impl Default for Learning {
    fn default() -> Self {
        Learning { enabled: true, reflection: false, approval_auto_promote: 3, memory: MemoryBackend::default() }
    }
}

/// `learning.memory`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MemoryBackend {
    /// `filesystem` (files under a directory, the default) or `postgres` (rows in a database).
    pub backend: Backend,
    /// The memory root: a directory, or on PostgreSQL the name its files are stored under.
    pub filesystem: FsPath,
    /// The PostgreSQL backend's own database (only with `backend: postgres`); absent, the
    /// state's (`state.postgres`, and the `PG*` environment) is used.
    pub postgres: Option<PostgresState>,
}

impl Default for MemoryBackend {
    fn default() -> Self {
        MemoryBackend { backend: Backend::Filesystem, filesystem: FsPath { path: "./memory".into() }, postgres: None }
    }
}

impl MemoryBackend {
    fn check(&self) -> Result<(), String> {
        match (self.backend, &self.postgres) {
            (Backend::Filesystem, Some(_)) => Err("learning.memory.postgres is set but learning.memory.backend is \
                filesystem: set learning.memory.backend: postgres to use it, or remove it"
                .into()),
            (_, Some(pg)) => pg.check("learning.memory.postgres"),
            _ => Ok(()),
        }
    }
}

/// `learning.memory.backend`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// Files under `learning.memory.filesystem.path`.
    Filesystem,
    /// Rows in a PostgreSQL database: replicas on any machines share the memory.
    Postgres,
}

/// `filesystem: { path }`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FsPath {
    /// The root directory.
    pub path: PathBuf,
}

/// `state`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct State {
    /// `filesystem` (SQLite in a directory, the default) or `postgres`.
    pub backend: StateBackend,
    /// The filesystem backend's settings (only with `backend: filesystem`; the path
    /// defaults to `./.skillhost/state`).
    pub filesystem: Option<FsPath>,
    /// The PostgreSQL backend's settings (only with `backend: postgres`).
    pub postgres: Option<PostgresState>,
}

impl Default for State {
    fn default() -> Self {
        State { backend: StateBackend::Filesystem, filesystem: None, postgres: None }
    }
}

impl State {
    /// The filesystem backend's directory, as written (`state.filesystem.path`).
    pub fn directory(&self) -> PathBuf {
        self.filesystem.as_ref().map_or_else(|| "./.skillhost/state".into(), |f| f.path.clone())
    }

    fn check(&self) -> Result<(), String> {
        if self.backend == StateBackend::Postgres && self.filesystem.is_some() {
            return Err("state.filesystem is set but state.backend is postgres: the state is in the database; \
                remove state.filesystem"
                .into());
        }
        match (self.backend, &self.postgres) {
            (StateBackend::Filesystem, Some(_)) => Err("state.postgres is set but state.backend is filesystem: \
                set state.backend: postgres to use it, or remove it"
                .into()),
            (_, Some(pg)) => pg.check("state.postgres"),
            _ => Ok(()),
        }
    }
}

/// `state.backend`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StateBackend {
    /// One SQLite database in `state.filesystem.path`: the processes of one machine.
    Filesystem,
    /// One PostgreSQL database: replicas on any machines.
    Postgres,
}

/// `state.postgres` (and `learning.memory.postgres`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PostgresState {
    /// `postgres://user:password@host:port/database?sslmode=...`. What it leaves out comes
    /// from the standard environment (`PGHOST`, `PGPORT`, `PGUSER`, `PGPASSWORD`,
    /// `PGDATABASE`, `PGSSLMODE`, `PGSSLROOTCERT`); without it, all of it does.
    pub url: Option<String>,
    /// The most connections this process opens (default 16).
    pub pool_size: Option<u32>,
    /// Seconds to connect, or to wait for a free connection, before a clear error (default 5).
    pub connect_timeout_seconds: Option<u64>,
}

impl PostgresState {
    /// `section`: where the block is (`state.postgres`), for the message.
    fn check(&self, section: &str) -> Result<(), String> {
        if self.pool_size == Some(0) {
            return Err(format!("{section}.pool_size must be at least 1"));
        }
        if self.connect_timeout_seconds == Some(0) {
            return Err(format!("{section}.connect_timeout_seconds must be at least 1"));
        }
        Ok(())
    }
}

/// One `mcp_servers` entry, by transport.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "transport", rename_all = "lowercase", deny_unknown_fields)]
pub enum McpServer {
    /// A child process speaking MCP on stdin/stdout.
    Stdio {
        /// The program.
        command: String,
        /// Its arguments.
        #[serde(default)]
        args: Vec<String>,
        /// Extra environment variables for it.
        #[serde(default)]
        env: BTreeMap<String, String>,
        /// Which tools to offer.
        #[serde(default)]
        tools: ToolFilter,
        /// The tools (as the server lists them) that post to Slack, for the external-channel guard.
        #[serde(default)]
        slack_posting_tools: Vec<String>,
        /// Which protocol lifecycle to start with.
        #[serde(default)]
        protocol: McpProtocol,
        /// Import the skills it serves (the Skills extension) into on-demand loading.
        #[serde(default)]
        skills: bool,
    },
    /// The legacy HTTP+SSE transport.
    Sse {
        /// The endpoint.
        url: String,
        /// Extra request headers.
        #[serde(default)]
        headers: BTreeMap<String, String>,
        /// Which tools to offer.
        #[serde(default)]
        tools: ToolFilter,
        /// The tools (as the server lists them) that post to Slack, for the external-channel guard.
        #[serde(default)]
        slack_posting_tools: Vec<String>,
        /// Import the skills it serves (the Skills extension) into on-demand loading.
        #[serde(default)]
        skills: bool,
    },
    /// The streamable HTTP transport.
    Streamablehttp {
        /// The endpoint.
        url: String,
        /// Extra request headers.
        #[serde(default)]
        headers: BTreeMap<String, String>,
        /// Which tools to offer.
        #[serde(default)]
        tools: ToolFilter,
        /// OAuth 2.1 per the MCP authorization spec, when the server asks for it.
        #[serde(default)]
        auth: Option<McpAuth>,
        /// The tools (as the server lists them) that post to Slack, for the external-channel guard.
        #[serde(default)]
        slack_posting_tools: Vec<String>,
        /// Which protocol lifecycle to start with.
        #[serde(default)]
        protocol: McpProtocol,
        /// Import the skills it serves (the Skills extension) into on-demand loading.
        #[serde(default)]
        skills: bool,
    },
}

/// `mcp_servers.<name>.protocol`: how the client opens a session with a server.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
pub enum McpProtocol {
    /// The `initialize` handshake at 2025-11-25 (the newest revision that has one), and
    /// `server/discover` at 2026-07-28 when the server refuses the handshake.
    #[default]
    #[serde(rename = "auto")]
    Auto,
    /// The handshake only (2025-11-25 or whatever older revision the server answers).
    #[serde(rename = "2025-11-25")]
    Handshake,
    /// 2026-07-28 only: `server/discover`, then stateless requests, each carrying its
    /// revision and the client's capabilities in `_meta` and the standard `Mcp-*` headers.
    #[serde(rename = "2026-07-28")]
    Stateless,
}

/// `mcp_servers.<name>.auth`: how skillhost authorizes with a remote server (OAuth 2.1, the
/// MCP authorization spec). Without `client_id`, the client registers itself (dynamic client
/// registration, or a client ID metadata document when `client_metadata_url` is set and the
/// authorization server supports it).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpAuth {
    /// A client id registered with the authorization server beforehand.
    pub client_id: Option<String>,
    /// Its secret (a confidential client); sent as the server's metadata prefers
    /// (`client_secret_basic`, else `client_secret_post`).
    pub client_secret: Option<String>,
    /// The scopes to ask for; by default the server's challenge, else its protected-resource
    /// metadata's `scopes_supported`, else none.
    #[serde(default)]
    pub scopes: Vec<String>,
    /// The loopback port the authorization redirect comes back to (`http://127.0.0.1:PORT/callback`);
    /// by default any free port (fine for dynamic registration; a pre-registered client's
    /// redirect URI usually names a fixed one).
    pub redirect_port: Option<u16>,
    /// An HTTPS URL of the client's metadata document (SEP-991), used as its client id where
    /// the authorization server supports it.
    pub client_metadata_url: Option<String>,
}

impl McpServer {
    /// `slack_posting_tools`: the tools that post to Slack (the channel in their `channel_id`
    /// or `channel` argument), refused in external channels when the agent may not post there.
    pub fn slack_posting_tools(&self) -> &[String] {
        match self {
            McpServer::Stdio { slack_posting_tools, .. }
            | McpServer::Sse { slack_posting_tools, .. }
            | McpServer::Streamablehttp { slack_posting_tools, .. } => slack_posting_tools,
        }
    }

    /// `protocol`: how a session opens (the legacy SSE transport has only the handshake).
    pub fn protocol(&self) -> McpProtocol {
        match self {
            McpServer::Stdio { protocol, .. } | McpServer::Streamablehttp { protocol, .. } => *protocol,
            McpServer::Sse { .. } => McpProtocol::Handshake,
        }
    }

    /// `skills`: whether the skills it serves are imported into on-demand loading, as
    /// `<server>/<skill>`.
    pub fn serves_skills(&self) -> bool {
        match self {
            McpServer::Stdio { skills, .. }
            | McpServer::Sse { skills, .. }
            | McpServer::Streamablehttp { skills, .. } => *skills,
        }
    }

    fn check(&self) -> Result<(), String> {
        match self {
            McpServer::Stdio { command, .. } if command.trim().is_empty() => Err("command is empty".into()),
            McpServer::Streamablehttp { auth: Some(auth), .. }
                if auth.client_secret.is_some() && auth.client_id.is_none() =>
            {
                Err("auth.client_secret needs auth.client_id (a secret belongs to a registered client)".into())
            }
            McpServer::Sse { url, .. } | McpServer::Streamablehttp { url, .. } => {
                url::Url::parse(url).map(|_| ()).map_err(|e| format!("url `{url}` is not a valid URL: {e}"))
            }
            _ => Ok(()),
        }
    }
}

/// `"*"` or a list of tool names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ToolFilter {
    /// Every tool the server offers.
    #[default]
    All,
    /// Only these.
    Only(Vec<String>),
}

impl<'de> Deserialize<'de> for ToolFilter {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Star(String),
            List(Vec<String>),
        }
        match Raw::deserialize(d)? {
            Raw::Star(s) if s == "*" => Ok(ToolFilter::All),
            Raw::Star(s) => {
                Err(serde::de::Error::custom(format!("tools must be \"*\" or a list of tool names, not `{s}`")))
            }
            Raw::List(list) => Ok(ToolFilter::Only(list)),
        }
    }
}

/// One `agents` entry. Its `adapter`, `skills`, `llm` and `ui` blocks override the top-level
/// ones key by key (the config loader merges them, so here they are already complete); an
/// absent block is the top-level one.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Agent {
    /// Display name (shown in responses and as the MCP server's name).
    pub name: Option<String>,
    /// Its system prompt (else `bot.system_prompt`).
    pub system_prompt: Option<String>,
    /// Its skills settings, `allowed` above all.
    pub skills: Option<Skills>,
    /// Its adapters.
    pub adapter: Option<Adapter>,
    /// Its memory root: its `MEMORY.md`, its daily reflections, what its memory skill sees.
    pub memory: Option<AgentMemory>,
    /// Its LLM settings.
    pub llm: Option<Llm>,
    /// Its HTTP API server (`port`, `auth_token`), when it serves the API.
    pub ui: Option<Ui>,
}

/// `agents.<name>.memory`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentMemory {
    /// The memory root.
    pub path: PathBuf,
}

/// `engine`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Engine {
    /// Per-turn wall-clock budgets.
    pub session: Session,
    /// Per-turn caps on chosen tools.
    pub tool_budget: Option<ToolBudget>,
    /// Legacy alias of `tool_budget`.
    pub log_tool_budget: Option<ToolBudget>,
    /// Time-window handling for MCP tools.
    pub temporal_guardrails: super::TemporalGuardrails,
}

impl Engine {
    /// The warning for `engine.tool_budget` caps written without `enabled`: the new key is
    /// off unless `enabled: true` (only the legacy `log_tool_budget` defaults to on), which an
    /// operator writing caps rarely means. An explicit `enabled: false` is said, not silent.
    pub fn inert_budget(&self) -> Option<&'static str> {
        let budget = self.tool_budget.as_ref()?;
        let caps = budget.max_per_turn.is_some() || budget.max_long_range_per_turn.is_some();
        (caps && budget.enabled.is_none())
            .then_some("engine.tool_budget sets caps without enabled: true: the budget is off")
    }
}

/// `engine.session`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Session {
    /// The turn budget before a forced tools-free wrap-up.
    pub deadline_seconds: u64,
    /// How long the wrap-up answer may take.
    pub wrapup_timeout_seconds: u64,
    /// Crash-safety bound for in-flight markers.
    pub inflight_ttl_seconds: u64,
    /// After SIGTERM or Ctrl-C (`skillhost run`): how long running turns may go on to
    /// their answers before they are stopped.
    pub drain_seconds: u64,
    /// How long a turn (or a call of a compiling skill's tool) waits for skills that a
    /// server started with an empty compile cache is still compiling; past it, it fails
    /// naming them. Not charged to `deadline_seconds`.
    pub skills_wait_seconds: u64,
}

impl Default for Session {
    fn default() -> Self {
        Session {
            deadline_seconds: 150,
            wrapup_timeout_seconds: 25,
            inflight_ttl_seconds: 400,
            drain_seconds: 30,
            skills_wait_seconds: 120,
        }
    }
}

/// `engine.tool_budget`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ToolBudget {
    /// On or off (defaults to on under the legacy key).
    pub enabled: Option<bool>,
    /// The budgeted tools.
    pub tools: Vec<String>,
    /// Calls per turn.
    pub max_per_turn: Option<u32>,
    /// Long-range calls per turn.
    pub max_long_range_per_turn: Option<u32>,
    /// What counts as long range.
    pub long_range_threshold_minutes: Option<u32>,
    /// Also count a call as long range when a service-name argument carries a time span
    /// (`checkout last 7 days`); see docs/temporal-guardrails.md.
    pub long_range_service_name_heuristic: bool,
    /// Offer one corrective round when a cap is reached.
    pub replan_enabled: bool,
}

impl ToolBudget {
    /// The heuristic and the threshold only decide which calls count toward the long-range
    /// cap: without the cap they would be accepted and ignored.
    fn check(&self) -> Result<(), String> {
        if self.long_range_service_name_heuristic && self.max_long_range_per_turn.is_none() {
            return Err("long_range_service_name_heuristic needs max_long_range_per_turn: \
                it only decides which calls count toward that cap"
                .into());
        }
        if self.long_range_threshold_minutes.is_some() && self.max_long_range_per_turn.is_none() {
            return Err("long_range_threshold_minutes needs max_long_range_per_turn: \
                it only decides which calls count toward that cap"
                .into());
        }
        if self.long_range_threshold_minutes == Some(0) {
            return Err("long_range_threshold_minutes must be greater than 0".into());
        }
        Ok(())
    }
}

impl Ui {
    fn check(&self) -> Result<(), String> {
        let mut names = std::collections::HashSet::new();
        for (i, t) in self.tokens.iter().enumerate() {
            let at = format!("tokens[{i}]");
            let name_ok = !t.name.is_empty()
                && t.name.len() <= 64
                && t.name.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
            if !name_ok {
                return Err(format!("{at}.name: `{}` is not 1 to 64 of a-z, 0-9, `-`, `_`, `.`", t.name));
            }
            if t.name == DEFAULT_TOKEN_NAME {
                return Err(format!("{at}.name: `{DEFAULT_TOKEN_NAME}` is the name of ui.auth_token"));
            }
            if !names.insert(t.name.as_str()) {
                return Err(format!("{at}.name: `{}` names two tokens", t.name));
            }
            if t.token.trim().len() < 8 {
                return Err(format!("{at}.token: `{}`'s token is empty or shorter than 8 characters", t.name));
            }
            if t.scopes.is_empty() {
                return Err(format!(
                    "{at}.scopes: `{}` grants nothing (give trigger, read, decide, admin or mcp)",
                    t.name
                ));
            }
        }
        let mut tokens: Vec<&str> = self.tokens.iter().map(|t| t.token.as_str()).collect();
        tokens.extend(self.auth_token.as_deref());
        let all = tokens.len();
        tokens.sort_unstable();
        tokens.dedup();
        if tokens.len() != all {
            return Err("tokens: two tokens (or one and auth_token) are the same secret".into());
        }
        for host in &self.allowed_hosts {
            if host.is_empty() || host.contains('/') || host.contains("://") {
                return Err(format!("allowed_hosts: `{host}` is not a host name or host:port"));
            }
        }
        for origin in self.allowed_origins.iter().filter(|o| *o != "*" && *o != "null") {
            let Some((scheme, rest)) = origin.split_once("://") else {
                return Err(format!("allowed_origins: `{origin}` needs a scheme (https://host[:port])"));
            };
            if scheme.is_empty() || rest.is_empty() || rest.contains('/') {
                return Err(format!("allowed_origins: `{origin}` is not scheme://host[:port]"));
            }
        }
        Ok(())
    }
}

/// `ui`: the embedded HTTP server.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Ui {
    /// The port (`SKILLHOST_UI_PORT`, else `MITHAI_UI_PORT`, overrides).
    pub port: Option<u16>,
    /// The bearer token (`SKILLHOST_UI_TOKEN`, else `MITHAI_UI_TOKEN`, overrides).
    pub auth_token: Option<String>,
    /// `Host` names (or `host:port`) `/mcp` answers besides the loopback names, which it
    /// always answers (DNS-rebinding protection); `["*"]` turns the check off.
    pub allowed_hosts: Vec<String>,
    /// Browser `Origin`s (`scheme://host[:port|:*]`) `/mcp` admits besides loopback ones; a
    /// request without an `Origin` (not from a browser) is admitted; `["*"]` admits any.
    pub allowed_origins: Vec<String>,
    /// `GET /metrics` answers without the bearer token (for a scraper on a trusted network).
    pub metrics_public: bool,
    /// Named tokens, each with what it may do (`ui.auth_token` may do everything).
    pub tokens: Vec<NamedToken>,
}

/// One of `ui.tokens`: a bearer token with a name (recorded with what it decides) and the
/// scopes it grants.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NamedToken {
    /// Its name: in the record of its decisions and in the log, never the token itself.
    pub name: String,
    /// The bearer token.
    pub token: String,
    /// What it may do.
    pub scopes: Vec<TokenScope>,
}

/// What a token may do on the HTTP server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TokenScope {
    /// Start runs (`POST /api/trigger`).
    Trigger,
    /// Read runs, approvals, questions, skills, MCP status and `/metrics` (unless public).
    Read,
    /// Decide approvals and answer questions.
    Decide,
    /// Reload; cancel another's run; reset a conversation.
    Admin,
    /// `/mcp`.
    Mcp,
}

impl TokenScope {
    /// Every scope: what `ui.auth_token` grants.
    pub const ALL: [TokenScope; 5] =
        [TokenScope::Trigger, TokenScope::Read, TokenScope::Decide, TokenScope::Admin, TokenScope::Mcp];

    /// Its name in the config.
    pub fn name(self) -> &'static str {
        match self {
            TokenScope::Trigger => "trigger",
            TokenScope::Read => "read",
            TokenScope::Decide => "decide",
            TokenScope::Admin => "admin",
            TokenScope::Mcp => "mcp",
        }
    }
}

/// The name `ui.auth_token` (or `SKILLHOST_UI_TOKEN`) goes by in the record.
pub const DEFAULT_TOKEN_NAME: &str = "default";
