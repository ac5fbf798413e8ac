//! What a skill declares: its tools and the facts in [`SkillInfo`].

use schemars::JsonSchema;

use crate::Value;
use crate::bindings::skillhost::skill::types as wit;

/// How much human involvement a call needs before it runs (the spec's `human` key).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Approval {
    /// Run without asking anyone.
    #[default]
    None,
    /// Pause until a person approves or denies the call.
    Approve,
    /// Pause until a person types the confirmation challenge.
    Confirm,
    /// Ask the skill's [`ResolveHuman`](crate::ResolveHuman) hook with the call's input.
    /// Without the hook exported, the host treats the tool as [`Approval::Approve`].
    Dynamic,
}

/// One tool the skill offers to the model.
///
/// ```
/// # use skill_sdk::{Approval, Tool};
/// #[derive(schemars::JsonSchema)]
/// struct Restart {
///     /// The service to restart.
///     service: String,
/// }
///
/// let tool = Tool::new::<Restart>("restart", "Restart a service.").approval(Approval::Approve);
/// assert!(tool.schema().contains(r#""required":["service"]"#));
/// ```
#[derive(Debug, Clone)]
pub struct Tool {
    name: String,
    description: String,
    /// JSON text, as the host receives it.
    schema: String,
    approval: Approval,
    expose_result: bool,
    declares_coverage: bool,
    output_schema: Option<String>,
    hints: wit::ToolHints,
}

impl Tool {
    /// A tool whose input is `I`, described by the JSON Schema that `I` derives. `I` must be
    /// a struct (or another type whose schema is a JSON object); doc comments on its fields
    /// become the schema's descriptions, which the model reads.
    pub fn new<I: JsonSchema>(name: impl Into<String>, description: impl Into<String>) -> Self {
        let schema = schemars::generate::SchemaSettings::draft2020_12().into_generator().into_root_schema_for::<I>();
        Self::with_schema(name, description, schema.to_value())
    }

    /// A tool with a hand-written input schema; its root must be `{"type": "object", ...}`.
    pub fn with_schema(name: impl Into<String>, description: impl Into<String>, schema: Value) -> Self {
        Self::with_raw_schema(name, description, schema.to_string())
    }

    /// A tool whose input schema is JSON text, such as `include_str!("check.schema.json")`.
    /// It is sent as it is: the host rejects the skill at load if it is not a JSON object
    /// schema.
    pub fn with_raw_schema(name: impl Into<String>, description: impl Into<String>, schema: impl Into<String>) -> Self {
        Tool {
            name: name.into(),
            description: description.into(),
            schema: schema.into(),
            approval: Approval::None,
            expose_result: false,
            declares_coverage: false,
            output_schema: None,
            hints: wit::ToolHints {
                title: None,
                read_only: None,
                destructive: None,
                idempotent: None,
                open_world: None,
            },
        }
    }

    /// A tool that takes no input.
    pub fn without_input(name: impl Into<String>, description: impl Into<String>) -> Self {
        let schema = serde_json::json!({ "type": "object", "properties": {} });
        Self::with_schema(name, description, schema)
    }

    /// Sets the approval each call needs (default [`Approval::None`]).
    pub fn approval(mut self, approval: Approval) -> Self {
        self.approval = approval;
        self
    }

    /// Includes results that the handler marks as succeeded ([`ToolResult::ok`](crate::ToolResult::ok))
    /// in synchronous API responses.
    pub fn expose_result(mut self) -> Self {
        self.expose_result = true;
        self
    }

    /// Declares that results may carry a [`Coverage`](crate::Coverage) observation.
    pub fn declares_coverage(mut self) -> Self {
        self.declares_coverage = true;
        self
    }

    /// Declares the tool's structured result as the JSON Schema that `O` derives (an object):
    /// MCP clients see it as `outputSchema`, and each result's JSON block
    /// ([`ToolResult::with_json`](crate::ToolResult::with_json)), or its JSON content, as
    /// `structuredContent`.
    pub fn output<O: JsonSchema>(self) -> Self {
        let schema = schemars::generate::SchemaSettings::draft2020_12().into_generator().into_root_schema_for::<O>();
        self.output_schema(schema.to_value())
    }

    /// [`Tool::output`] with a hand-written schema; its root must be `{"type": "object", ...}`.
    pub fn output_schema(mut self, schema: Value) -> Self {
        self.output_schema = Some(schema.to_string());
        self
    }

    /// A human-readable title (the MCP annotation `title`).
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.hints.title = Some(title.into());
        self
    }

    /// Hints that the tool does not change its environment (`readOnlyHint`).
    pub fn read_only(mut self) -> Self {
        self.hints.read_only = Some(true);
        self
    }

    /// Hints whether the tool may destroy or overwrite data (`destructiveHint`).
    pub fn destructive(mut self, destructive: bool) -> Self {
        self.hints.destructive = Some(destructive);
        self
    }

    /// Hints that calling the tool again with the same input has no further effect
    /// (`idempotentHint`).
    pub fn idempotent(mut self) -> Self {
        self.hints.idempotent = Some(true);
        self
    }

    /// Hints whether the tool reaches external entities such as the web (`openWorldHint`).
    pub fn open_world(mut self, open_world: bool) -> Self {
        self.hints.open_world = Some(open_world);
        self
    }

    /// The tool's name, unprefixed.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The input schema as the JSON text sent to the host.
    pub fn schema(&self) -> &str {
        &self.schema
    }
}

impl From<Approval> for wit::Approval {
    fn from(approval: Approval) -> Self {
        match approval {
            Approval::None => wit::Approval::None,
            Approval::Approve => wit::Approval::Approve,
            Approval::Confirm => wit::Approval::Confirm,
            Approval::Dynamic => wit::Approval::Dynamic,
        }
    }
}

impl From<Tool> for wit::ToolDef {
    fn from(tool: Tool) -> Self {
        wit::ToolDef {
            name: tool.name,
            description: tool.description,
            input_schema: tool.schema,
            approval: tool.approval.into(),
            expose_result: tool.expose_result,
            declares_coverage: tool.declares_coverage,
            output_schema: tool.output_schema,
            hints: tool.hints,
        }
    }
}

/// MCP tools a skill uses from one server configured under `mcp_servers`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpUse {
    /// The server's name in `mcp_servers`.
    pub server: String,
    /// The tools used, or `["*"]` for all the server allows.
    pub tools: Vec<String>,
}

/// Facts about the skill that do not depend on a call, from [`Skill::info`](crate::Skill::info).
///
/// ```
/// # use skill_sdk::SkillInfo;
/// let info = SkillInfo::default()
///     .verify()
///     .mcp_server("observability")
///     .mcp_prerequisite("list_sources")
///     .mcp_tools("linear", ["create_issue", "list_issues"]);
/// assert!(info.verify);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SkillInfo {
    /// MCP servers the skill uses (the spec's `MCP_TOOLS`).
    pub mcp_tools: Vec<McpUse>,
    /// MCP servers the skill owns (`MCP_SERVERS`): its MCP hooks see their calls.
    pub mcp_servers: Vec<String>,
    /// Read-only tools of owned servers that [`BeforeMcpCall`](crate::BeforeMcpCall) may
    /// request first.
    pub mcp_prerequisites: Vec<String>,
    /// Check the model's answer against this skill's results after each turn (`VERIFY`).
    pub verify: bool,
}

impl SkillInfo {
    /// Adds tools used from `server` (`["*"]` for all of them).
    pub fn mcp_tools<T: Into<String>>(mut self, server: impl Into<String>, tools: impl IntoIterator<Item = T>) -> Self {
        let tools = tools.into_iter().map(Into::into).collect();
        self.mcp_tools.push(McpUse { server: server.into(), tools });
        self
    }

    /// Adds a server the skill owns.
    pub fn mcp_server(mut self, server: impl Into<String>) -> Self {
        self.mcp_servers.push(server.into());
        self
    }

    /// Adds a prerequisite tool of an owned server.
    pub fn mcp_prerequisite(mut self, tool: impl Into<String>) -> Self {
        self.mcp_prerequisites.push(tool.into());
        self
    }

    /// Turns on post-turn verification.
    pub fn verify(mut self) -> Self {
        self.verify = true;
        self
    }
}

impl From<SkillInfo> for wit::SkillInfo {
    fn from(info: SkillInfo) -> Self {
        wit::SkillInfo {
            mcp_tools: info.mcp_tools.into_iter().map(|u| wit::McpUse { server: u.server, tools: u.tools }).collect(),
            mcp_servers: info.mcp_servers,
            mcp_prerequisites: info.mcp_prerequisites,
            verify: info.verify,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json;

    /// Input of a test tool.
    #[derive(JsonSchema)]
    #[allow(dead_code)]
    struct CheckUrl {
        /// The URL to check.
        url: String,
        /// Give up after this many milliseconds.
        timeout_ms: Option<u32>,
    }

    #[test]
    fn derived_schema_is_an_object_with_described_fields() {
        let tool = Tool::new::<CheckUrl>("check_url", "Check a URL.");
        let schema: Value = serde_json::from_str(tool.schema()).unwrap();
        assert_eq!(schema["type"], "object");
        assert_eq!(schema["required"], json!(["url"]));
        assert_eq!(schema["properties"]["url"]["description"], "The URL to check.");
    }

    #[test]
    fn tool_def_carries_the_builder_flags() {
        let def = wit::ToolDef::from(Tool::without_input("list", "List.").approval(Approval::Dynamic).expose_result());
        assert!(matches!(def.approval, wit::Approval::Dynamic));
        assert!(def.expose_result && !def.declares_coverage);
        let schema: Value = serde_json::from_str(&def.input_schema).unwrap();
        assert_eq!(schema, json!({ "type": "object", "properties": {} }));
    }
}
