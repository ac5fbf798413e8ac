//! A loaded skill: its prompt, its validated tools, its facts, and the component that runs
//! them.

use super::content::Content;
use super::contract::{Asked, Human, Preflight, Target, ToolDef, ToolHints, ToolResult};
use super::prompt::Prompt;
use super::script::ScriptTool;
use super::served::{Prompted, ServeError};
use crate::sandbox::bindings::guest::resources::ReadError;
use crate::sandbox::bindings::types as wit;
use crate::sandbox::{CallContext, CallEnv, CallError, Outcome, SkillComponent};
use std::path::PathBuf;
use std::sync::Arc;

/// The separator between skill and tool in the names the model sees.
pub const SEPARATOR: &str = "__";
/// The longest prefixed tool name the LLM providers accept.
pub const MAX_TOOL_NAME: usize = 64;

/// One tool, checked: its name is valid and its schema compiles.
#[derive(Clone)]
pub struct ToolSpec {
    /// Unprefixed name, as `handle` receives it.
    pub name: String,
    /// `skill__tool`, as the model sees it.
    pub full_name: String,
    /// Shown to the model.
    pub description: String,
    /// The input JSON Schema.
    pub schema: Arc<serde_json::Value>,
    /// `schema` rendered once, for the requests that offer the tool every round.
    pub schema_json: Arc<serde_json::value::RawValue>,
    validator: Arc<jsonschema::Validator>,
    /// The static approval level.
    pub human: Human,
    /// Include explicit successes in synchronous API responses.
    pub expose_result: bool,
    /// The tool can attach coverage observations.
    pub declares_coverage: bool,
    /// The JSON Schema of its structured result, with its validator, when declared.
    pub output_schema: Option<(serde_json::Value, Arc<jsonschema::Validator>)>,
    /// Hints about its behaviour (MCP annotations).
    pub hints: ToolHints,
}

impl std::fmt::Debug for ToolSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolSpec").field("full_name", &self.full_name).field("human", &self.human).finish()
    }
}

impl ToolSpec {
    /// Checks a guest's tool definition: its name follows [`crate::config::check_name`] (so
    /// `skill__tool` splits back into exactly this skill and tool), its schema compiles.
    pub fn new(skill: &str, def: ToolDef) -> Result<ToolSpec, String> {
        crate::config::check_name(&def.name).map_err(|e| format!("tool name `{}` {e}", def.name))?;
        let full_name = format!("{skill}{SEPARATOR}{}", def.name);
        if full_name.len() > MAX_TOOL_NAME {
            return Err(format!("tool name `{full_name}` is longer than {MAX_TOOL_NAME} characters"));
        }
        let schema: serde_json::Value = serde_json::from_str(&def.input_schema)
            .map_err(|e| format!("tool `{}`: input schema is not valid JSON: {e}", def.name))?;
        if schema.get("type").and_then(|t| t.as_str()) != Some("object") {
            return Err(format!("tool `{}`: input schema must have \"type\": \"object\"", def.name));
        }
        let validator = jsonschema::validator_for(&schema)
            .map_err(|e| format!("tool `{}`: input schema is not a valid JSON Schema: {e}", def.name))?;
        let output_schema = match &def.output_schema {
            Some(text) => Some(object_schema(text).map_err(|e| format!("tool `{}`: output schema {e}", def.name))?),
            None => None,
        };
        let schema_json =
            serde_json::value::to_raw_value(&schema).map_err(|e| format!("tool `{}`: {e}", def.name))?.into();
        Ok(ToolSpec {
            name: def.name,
            full_name,
            description: def.description,
            schema_json,
            schema: schema.into(),
            validator: Arc::new(validator),
            human: def.human,
            expose_result: def.expose_result,
            declares_coverage: def.declares_coverage,
            output_schema,
            hints: def.hints,
        })
    }

    /// The static approval level as the spec names it.
    pub fn approval_name(&self) -> &'static str {
        self.human.as_str()
    }

    /// Every way `input` breaks the schema, one line each (at most 10).
    pub fn validate(&self, input: &serde_json::Value) -> Result<(), String> {
        // The common case, valid input, without building the error iterator.
        if self.validator.is_valid(input) {
            return Ok(());
        }
        let errors: Vec<String> = self
            .validator
            .iter_errors(input)
            .take(10)
            .map(|e| {
                let at = e.instance_path().to_string();
                if at.is_empty() { e.to_string() } else { format!("at {at}: {e}") }
            })
            .collect();
        if errors.is_empty() { Ok(()) } else { Err(errors.join("; ")) }
    }
}

/// An output schema: JSON, an object schema (MCP requires `"type": "object"` at its root),
/// and a JSON Schema that compiles.
fn object_schema(text: &str) -> Result<(serde_json::Value, Arc<jsonschema::Validator>), String> {
    let schema: serde_json::Value = serde_json::from_str(text).map_err(|e| format!("is not valid JSON: {e}"))?;
    if schema.get("type").and_then(|t| t.as_str()) != Some("object") {
        return Err("must have \"type\": \"object\"".into());
    }
    let validator = jsonschema::validator_for(&schema).map_err(|e| format!("is not a valid JSON Schema: {e}"))?;
    Ok((schema, Arc::new(validator)))
}

/// Facts about the skill from its `info` export.
#[derive(Debug, Clone, Default)]
pub struct SkillFacts {
    /// MCP servers used, and which of their tools.
    pub mcp_tools: Vec<(String, Vec<String>)>,
    /// MCP servers owned.
    pub mcp_servers: Vec<String>,
    /// Read-only tools its preflight may request.
    pub mcp_prerequisites: Vec<String>,
    /// Fact-check answers after turns that used it.
    pub verify: bool,
}

impl From<wit::SkillInfo> for SkillFacts {
    fn from(info: wit::SkillInfo) -> Self {
        SkillFacts {
            mcp_tools: info.mcp_tools.into_iter().map(|u| (u.server, u.tools)).collect(),
            mcp_servers: info.mcp_servers,
            mcp_prerequisites: info.mcp_prerequisites,
            verify: info.verify,
        }
    }
}

/// A skill ready to serve.
#[derive(Clone)]
pub struct Skill {
    /// The name tools are prefixed with.
    pub name: String,
    /// Its folder.
    pub dir: PathBuf,
    /// Its prompt.
    pub prompt: Prompt,
    /// Its tools, in the order the skill lists them.
    pub tools: Vec<ToolSpec>,
    /// Its script tools (SKILL.md `tools:`), in declared order; they run apart from `tools`.
    pub scripts: Vec<ScriptTool>,
    /// Facts from `info`.
    pub facts: SkillFacts,
    /// Its `skills.config` block.
    pub config: serde_json::Value,
    /// How often its `scheduled` export runs while serving (`[schedule] every`, raised to
    /// the operator's minimum); `None` when it has no schedule.
    pub schedule: Option<std::time::Duration>,
    /// Its tools its `SKILL.md`'s `allowed-tools` pre-approves (by tool name), when the
    /// operator honours it (`skills.honour_allowed_tools`): they run without asking, unless
    /// `human.overrides` says otherwise.
    pub preapproved: Vec<String>,
    /// How MCP clients see its tools' names (`[mcp] names`).
    pub mcp_names: super::manifest::McpNames,
    /// What it serves MCP clients beyond tools (resources, templates, prompts).
    pub served: super::served::Served,
    /// What runs its tools and hooks.
    runtime: Runtime,
}

/// What runs a skill's tools: nothing (prompt only), a sandboxed component, or host-side
/// native tools (the built-in `shell`).
#[derive(Clone)]
enum Runtime {
    Prompt,
    Component(Box<(SkillComponent, CallEnv)>),
    Native(Arc<dyn super::NativeTools>),
}

/// A hook's answer: `None` when the skill does not export the hook.
pub type HookAnswer<T> = Option<Result<T, CallError>>;

/// Why a tool call produced no tool result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolError {
    /// No tool of that name.
    #[error("unknown tool `{0}`")]
    UnknownTool(String),
    /// The input broke the tool's schema; `handle` was not called.
    #[error("invalid input for `{tool}`: {problems}")]
    InvalidInput {
        /// The tool.
        tool: String,
        /// What is wrong.
        problems: String,
    },
    /// The call failed in the sandbox.
    #[error(transparent)]
    Call(#[from] CallError),
}

impl ToolError {
    /// A short machine-readable name for the cause.
    pub fn kind(&self) -> &'static str {
        match self {
            ToolError::UnknownTool(_) => "unknown_tool",
            ToolError::InvalidInput { .. } => "invalid_input",
            ToolError::Call(e) => e.kind(),
        }
    }

    /// The structured result the model receives instead of the tool's answer.
    pub fn to_model_json(&self) -> serde_json::Value {
        serde_json::json!({ "error": self.to_string(), "kind": self.kind() })
    }
}

/// Splits an exposed tool name into its prefix (skill or MCP server) and tool, at the first
/// `__`: exact for names that follow [`crate::config::check_name`].
pub fn split_exposed(full_name: &str) -> Option<(&str, &str)> {
    full_name.split_once(SEPARATOR)
}

impl Skill {
    /// A prompt-only skill (tools come with [`Skill::with_component`] or [`Skill::native`]).
    pub fn new(name: String, dir: PathBuf, prompt: Prompt, config: serde_json::Value) -> Self {
        Skill {
            name,
            dir,
            prompt,
            tools: Vec::new(),
            scripts: Vec::new(),
            facts: SkillFacts::default(),
            config,
            schedule: None,
            preapproved: Vec::new(),
            mcp_names: Default::default(),
            served: Default::default(),
            runtime: Runtime::Prompt,
        }
    }

    /// A skill whose tools are host-side `native` tools, checked like a component's.
    pub fn native(
        name: &str,
        dir: PathBuf,
        prompt: Prompt,
        config: serde_json::Value,
        native: Arc<dyn super::NativeTools>,
    ) -> Result<Self, String> {
        let tools = native.tools().into_iter().map(|def| ToolSpec::new(name, def)).collect::<Result<Vec<_>, _>>()?;
        Ok(Skill { tools, runtime: Runtime::Native(native), ..Skill::new(name.into(), dir, prompt, config) })
    }

    /// Gives the skill its component, checked tools and facts.
    pub(super) fn with_component(
        mut self,
        component: SkillComponent,
        env: CallEnv,
        tools: Vec<ToolSpec>,
        facts: SkillFacts,
    ) -> Self {
        (self.tools, self.facts, self.runtime) = (tools, facts, Runtime::Component(Box::new((component, env))));
        self
    }

    /// The tool called `name` (unprefixed).
    pub fn tool(&self, name: &str) -> Option<&ToolSpec> {
        self.tools.iter().find(|t| t.name == name)
    }

    /// The exposed (`skill__tool`) names of its tools and script tools, and of the MCP tools
    /// it offers under its own name (`mcp-tools`).
    pub fn exposed_names(&self) -> Vec<String> {
        let tools = self.tools.iter().chain(self.scripts.iter().map(|s| &s.spec)).map(|t| t.full_name.clone());
        let aliases = self.facts.mcp_tools.iter().flat_map(|(_, tools)| tools);
        tools.chain(aliases.map(|tool| format!("{}{SEPARATOR}{tool}", self.name))).collect()
    }

    /// The script tool called `name` (unprefixed).
    pub fn script(&self, name: &str) -> Option<&ScriptTool> {
        self.scripts.iter().find(|t| t.spec.name == name)
    }

    /// Whether its tools can be called (a component or native tools; not prompt-only).
    pub fn is_runnable(&self) -> bool {
        !matches!(self.runtime, Runtime::Prompt)
    }

    /// What kind of skill this is: `component`, `native`, `scripts` (a prompt with script
    /// tools) or `prompt-only`.
    pub fn kind(&self) -> &'static str {
        match self.runtime {
            Runtime::Prompt if !self.scripts.is_empty() => "scripts",
            Runtime::Prompt => "prompt-only",
            Runtime::Component(_) => "component",
            Runtime::Native(_) => "native",
        }
    }

    /// The component and its call environment, for a component skill (sandbox-level tests
    /// and benchmarks call its exports directly).
    pub fn component(&self) -> Option<(&SkillComponent, &CallEnv)> {
        match &self.runtime {
            Runtime::Component(runtime) => Some((&runtime.0, &runtime.1)),
            _ => None,
        }
    }

    /// The WIT names of the hooks the skill exports (none for native and prompt skills).
    pub fn hook_names(&self) -> Vec<&'static str> {
        self.component().map(|(c, _)| c.hooks().names()).unwrap_or_default()
    }

    /// What approvals of a call of `tool` are counted against, beyond the tool itself.
    pub fn promotion_subject(&self, tool: &str, input: &serde_json::Value) -> Option<String> {
        match &self.runtime {
            Runtime::Native(native) => native.promotion_subject(tool, input),
            _ => None,
        }
    }

    /// The context a hook or handler of this skill sees: the caller's, with the skill's config.
    fn own(&self, caller: &CallContext) -> CallContext {
        CallContext { config: self.config.clone(), ..caller.clone() }
    }

    /// Validates `input` and runs the tool: in a fresh sandboxed instance, or in the host for
    /// a native skill.
    pub async fn call(
        &self,
        tool: &str,
        input: &serde_json::Value,
        caller: &CallContext,
    ) -> Result<Outcome<ToolResult>, ToolError> {
        let spec = self.tool(tool).ok_or_else(|| ToolError::UnknownTool(format!("{}{SEPARATOR}{tool}", self.name)))?;
        spec.validate(input).map_err(|problems| ToolError::InvalidInput { tool: spec.full_name.clone(), problems })?;
        let ctx = self.own(caller);
        match &self.runtime {
            Runtime::Native(native) => {
                let started = std::time::Instant::now();
                let value = native.handle(tool, input, &ctx).await;
                Ok(Outcome {
                    value,
                    logs: Vec::new(),
                    logs_dropped: 0,
                    fuel_used: 0,
                    elapsed: started.elapsed(),
                    memory_bytes: 0,
                })
            }
            Runtime::Component(runtime) => {
                let (component, env) = &**runtime;
                Ok(component.handle(env, tool, &input.to_string(), &ctx).await?.map(ToolResult::from))
            }
            Runtime::Prompt => Err(ToolError::UnknownTool(spec.full_name.clone())),
        }
    }

    /// `resolve-human` for a call of `tool` (unprefixed): `Some(Ok(None))` runs it unasked.
    pub async fn resolve_human(
        &self,
        tool: &str,
        input: &serde_json::Value,
        caller: &CallContext,
    ) -> HookAnswer<Option<Asked>> {
        match &self.runtime {
            Runtime::Native(native) => Some(Ok(native.resolve_human(tool, input))),
            Runtime::Component(runtime) => {
                let (component, env) = &**runtime;
                let answer = component.resolve_human(env, tool, &input.to_string(), &self.own(caller)).await?;
                Some(answer.map(|o| o.value.map(Asked::from)))
            }
            Runtime::Prompt => None,
        }
    }

    /// `before-mcp-call` for a call of `server`'s `tool` with `arguments` (JSON text).
    pub async fn before_mcp_call(
        &self,
        server: &str,
        tool: &str,
        arguments: &str,
        caller: &CallContext,
    ) -> HookAnswer<Preflight> {
        let (component, env) = self.component()?;
        let answer = component.before_mcp_call(env, server, tool, arguments, &self.own(caller)).await?;
        Some(answer.map(|o| o.value.into()))
    }

    /// `observe-mcp-result`: `Some(Ok(Some(text)))` replaces the model-visible result.
    pub async fn observe_mcp_result(
        &self,
        server: &str,
        tool: &str,
        arguments: &str,
        output: &str,
        caller: &CallContext,
    ) -> HookAnswer<Option<String>> {
        let (component, env) = self.component()?;
        let answer = component.observe_mcp_result(env, server, tool, arguments, output, &self.own(caller)).await?;
        Some(answer.map(|o| o.value))
    }

    /// `tool-target` for a call of `tool` with `input`.
    pub async fn tool_target(
        &self,
        tool: &str,
        input: &serde_json::Value,
        caller: &CallContext,
    ) -> HookAnswer<Option<Target>> {
        let (component, env) = self.component()?;
        let answer = component.tool_target(env, tool, &input.to_string(), caller).await?;
        Some(answer.map(|o| o.value.map(Target::from)))
    }

    /// `resources.read-resource` of `uri`: its contents (embedded resources).
    pub async fn read_resource(&self, uri: &str, caller: &CallContext) -> Result<Vec<Content>, ServeError> {
        let (component, env) = self.component().ok_or(ServeError::NotFound)?;
        let outcome = component.read_resource(env, uri, &self.own(caller)).await.ok_or(ServeError::NotFound)?;
        match outcome.map_err(|e| ServeError::Failed(e.to_string()))?.value {
            Ok(contents) => Ok(contents.into_iter().map(super::served::embedded).collect()),
            Err(ReadError::NotFound) => Err(ServeError::NotFound),
            Err(ReadError::Failed(why)) => Err(ServeError::Failed(why)),
        }
    }

    /// `prompts.get-prompt` of `name` (unprefixed) with `arguments`, after checking that the
    /// prompt exists and every required argument is given.
    pub async fn get_prompt(
        &self,
        name: &str,
        arguments: Vec<(String, String)>,
        caller: &CallContext,
    ) -> Result<Prompted, ServeError> {
        let def = self.served.prompt(name).ok_or(ServeError::NotFound)?;
        let missing: Vec<&str> = def
            .arguments
            .iter()
            .filter(|a| a.required && !arguments.iter().any(|(given, _)| *given == a.name))
            .map(|a| a.name.as_str())
            .collect();
        if !missing.is_empty() {
            return Err(ServeError::InvalidArguments(format!("missing required arguments: {}", missing.join(", "))));
        }
        let (component, env) = self.component().ok_or(ServeError::NotFound)?;
        let outcome =
            component.get_prompt(env, name, arguments, &self.own(caller)).await.ok_or(ServeError::NotFound)?;
        Ok(outcome.map_err(|e| ServeError::Failed(e.to_string()))?.value?.into())
    }

    /// `prompts.complete` of `argument` of prompt `name`: at most 100 values; none when the
    /// skill cannot say (no such prompt or argument, a failed hook).
    pub async fn complete(
        &self,
        name: &str,
        argument: &str,
        value: &str,
        context: Vec<(String, String)>,
    ) -> Vec<String> {
        let known = self.served.prompt(name).is_some_and(|p| p.arguments.iter().any(|a| a.name == argument));
        let Some((component, env)) = self.component().filter(|_| known) else { return Vec::new() };
        match component.complete(env, name, argument, value, context).await {
            Some(Ok(outcome)) => outcome.value.into_iter().take(100).collect(),
            Some(Err(e)) => {
                tracing::warn!(skill = %self.name, prompt = name, "completion failed: {e}");
                Vec::new()
            }
            None => Vec::new(),
        }
    }

    /// `tool-result-empty` for a successful raw result of `tool`.
    pub async fn tool_result_empty(
        &self,
        tool: &str,
        raw_result: &str,
        caller: &CallContext,
    ) -> HookAnswer<Option<bool>> {
        let (component, env) = self.component()?;
        Some(component.tool_result_empty(env, tool, raw_result, caller).await?.map(|o| o.value))
    }
}
