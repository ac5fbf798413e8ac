//! A loaded skill: its prompt, its validated tools, its facts, and the component that runs
//! them.

use super::prompt::Prompt;
use crate::sandbox::bindings::types::{self as wit, Approval};
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
    pub schema: serde_json::Value,
    validator: Arc<jsonschema::Validator>,
    /// The static approval level.
    pub approval: Approval,
    /// Include explicit successes in synchronous API responses.
    pub expose_result: bool,
    /// The tool can attach coverage observations.
    pub declares_coverage: bool,
}

impl std::fmt::Debug for ToolSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolSpec").field("full_name", &self.full_name).field("approval", &self.approval).finish()
    }
}

impl ToolSpec {
    /// Checks a guest's tool definition: its name follows [`crate::config::check_name`] (so
    /// `skill__tool` splits back into exactly this skill and tool), its schema compiles.
    pub fn new(skill: &str, def: wit::ToolDef) -> Result<ToolSpec, String> {
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
        Ok(ToolSpec {
            name: def.name,
            full_name,
            description: def.description,
            schema,
            validator: Arc::new(validator),
            approval: def.approval,
            expose_result: def.expose_result,
            declares_coverage: def.declares_coverage,
        })
    }

    /// The static approval level as the spec names it.
    pub fn approval_name(&self) -> &'static str {
        match self.approval {
            Approval::None => "none",
            Approval::Approve => "approve",
            Approval::Confirm => "confirm",
            Approval::Dynamic => "dynamic",
        }
    }

    /// Every way `input` breaks the schema, one line each (at most 10).
    pub fn validate(&self, input: &serde_json::Value) -> Result<(), String> {
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
    /// Facts from `info`.
    pub facts: SkillFacts,
    /// Its `skills.config` block.
    pub config: serde_json::Value,
    /// The component and its call environment; `None` for a prompt-only or native skill.
    pub runtime: Option<(SkillComponent, CallEnv)>,
    /// The host-side tools of a native skill (the built-in `shell`).
    pub native: Option<Arc<dyn super::NativeTools>>,
}

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
    /// The tool called `name` (unprefixed).
    pub fn tool(&self, name: &str) -> Option<&ToolSpec> {
        self.tools.iter().find(|t| t.name == name)
    }

    /// Whether its tools can be called (a component or native tools; not prompt-only).
    pub fn is_runnable(&self) -> bool {
        self.runtime.is_some() || self.native.is_some()
    }

    /// What approvals of a call of `tool` are counted against, beyond the tool itself.
    pub fn promotion_subject(&self, tool: &str, input: &serde_json::Value) -> Option<String> {
        self.native.as_ref()?.promotion_subject(tool, input)
    }

    /// Validates `input` and runs the tool: in a fresh sandboxed instance, or in the host for
    /// a native skill.
    pub async fn call(
        &self,
        tool: &str,
        input: &serde_json::Value,
        caller: &CallContext,
    ) -> Result<Outcome<wit::ToolResult>, ToolError> {
        let spec = self.tool(tool).ok_or_else(|| ToolError::UnknownTool(format!("{}{SEPARATOR}{tool}", self.name)))?;
        spec.validate(input).map_err(|problems| ToolError::InvalidInput { tool: spec.full_name.clone(), problems })?;
        let ctx = CallContext { config: self.config.clone(), ..caller.clone() };
        if let Some(native) = &self.native {
            let started = std::time::Instant::now();
            let value = native.handle(tool, input, &ctx).await;
            return Ok(Outcome { value, logs: Vec::new(), logs_dropped: 0, fuel_used: 0, elapsed: started.elapsed() });
        }
        let (component, env) = self.runtime.as_ref().ok_or_else(|| ToolError::UnknownTool(spec.full_name.clone()))?;
        Ok(component.handle(env, tool, &input.to_string(), &ctx).await?)
    }
}
