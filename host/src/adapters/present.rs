//! What the API shows of tool calls: the redacted, size-capped `tool_input`, the approval's
//! safe description, and the `wait=true` summary (`tool_results`, `coverage`).

use crate::engine::{ApprovalOutcome, ToolCallRecord};
use crate::skills::SkillSet;
use crate::tools::Tools;
use crate::tools::coverage::{self, CoverageEntry, CoverageSummary};
use serde_json::{Value, json};
use std::sync::Arc;

pub use crate::broker::present::{REDACTED, safe_description, sensitive, tool_input};

/// What a person is told a gated call does: the tool's name and the first line of its
/// declared description, whatever provides it (a component, a native built-in, a SKILL.md
/// script, an MCP server or an alias of one), looked up when asked, since an MCP server's
/// tools change while the process runs.
#[derive(Clone, Default)]
pub struct Descriptions {
    tools: Source,
}

/// Where [`Descriptions`] finds the tools.
#[derive(Clone)]
enum Source {
    Fixed(Tools),
    /// What the engine offers at the time asked (skills join it as they finish compiling).
    Live(Arc<crate::engine::Engine>),
}

impl Default for Source {
    fn default() -> Self {
        Source::Fixed(Tools::default())
    }
}

impl std::fmt::Debug for Descriptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Descriptions").finish_non_exhaustive()
    }
}

impl Descriptions {
    /// The descriptions of the tools `tools` offers.
    pub fn new(tools: Tools) -> Self {
        Descriptions { tools: Source::Fixed(tools) }
    }

    /// The descriptions of the tools `engine` offers when asked.
    pub fn live(engine: Arc<crate::engine::Engine>) -> Self {
        Descriptions { tools: Source::Live(engine) }
    }

    /// `Tool: <name>` and, when the tool describes itself, `Action: <first line>` (at most
    /// 200 characters). Never the call's arguments.
    pub fn safe_description(&self, tool_name: &str) -> String {
        let decls = match &self.tools {
            Source::Fixed(tools) => tools.decls(),
            Source::Live(engine) => engine.tools().decls(),
        };
        safe_description(&decls, tool_name)
    }
}

/// The `tool_results` of a `wait=true` response: completed, approved calls of
/// `expose_result` tools whose handler declared success; JSON content decoded, other text
/// kept as a string; inputs never included.
pub fn tool_results(skills: &SkillSet, calls: &[ToolCallRecord]) -> Vec<Value> {
    calls
        .iter()
        .filter(|c| {
            c.executed && matches!(c.approval, None | Some(ApprovalOutcome::Approved | ApprovalOutcome::Edited(_)))
        })
        .filter(|c| c.outcome.succeeded == Some(true) && !c.outcome.is_error)
        .filter(|c| skills.find_tool(&c.tool_name).is_some_and(|(_, tool)| tool.expose_result))
        .map(|c| {
            let result =
                serde_json::from_str(&c.outcome.content).unwrap_or_else(|_| Value::String(c.outcome.content.clone()));
            json!({ "tool": c.tool_name, "result": result })
        })
        .collect()
}

/// The turn's coverage: each call's declaration, and calls of coverage-capable tools
/// without a valid one (including those that never ran) as unverified. Calls that did not
/// run carry the engine's own mark: unverified when the tool is budgeted (a call the budget
/// refused) or coverage-capable (a skill's `declares_coverage`, an MCP tool's `_meta`).
pub fn coverage(skills: &SkillSet, calls: &[ToolCallRecord]) -> CoverageSummary {
    let entries: Vec<CoverageEntry> = calls
        .iter()
        .filter_map(|c| {
            let declared = skills.find_tool(&c.tool_name).is_some_and(|(_, tool)| tool.declares_coverage);
            match c.outcome.coverage {
                Some(entry) if c.executed => Some(entry),
                Some(_) => Some(CoverageEntry::Unverified),
                None if declared => Some(CoverageEntry::Unverified),
                None => None,
            }
        })
        .collect();
    coverage::summarize(&entries)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::ToolDecl;
    use crate::tools::{CallScope, Level, ToolCall, ToolInfo, ToolOutcome, ToolSource};
    use serde_json::Map;
    use std::sync::Arc;

    const MAX_STRING: usize = 256;

    /// A source that only declares tools (as an MCP server or a script's would).
    struct Declared(Vec<(&'static str, &'static str)>);

    #[async_trait::async_trait]
    impl ToolSource for Declared {
        fn decls(&self) -> Vec<ToolDecl> {
            let decl = |(name, description): &(&str, &str)| ToolDecl {
                name: name.to_string(),
                description: description.to_string(),
                input_schema: crate::llm::Schema::new(json!({"type": "object"})),
            };
            self.0.iter().map(decl).collect()
        }
        fn info(&self, name: &str) -> Option<ToolInfo> {
            self.0.iter().any(|(n, _)| *n == name).then(ToolInfo::default)
        }
        async fn level(&self, _call: ToolCall<'_>) -> Level {
            Level::Approve
        }
        async fn execute(&self, _call: ToolCall<'_>, _scope: &dyn CallScope) -> ToolOutcome {
            ToolOutcome::text(String::new(), std::time::Duration::ZERO)
        }
    }

    #[test]
    fn every_kind_of_tool_gets_its_action_line() {
        let mcp = Declared(vec![("obs__get_logs", "\n  Fetch logs for a service.\nMore detail.")]);
        let script = Declared(vec![("pdf__extract", "Extract the text of a PDF.")]);
        let descriptions = Descriptions::new(Tools::new(vec![Arc::new(mcp), Arc::new(script)]));
        assert_eq!(
            descriptions.safe_description("obs__get_logs"),
            "Tool: obs__get_logs\nAction: Fetch logs for a service."
        );
        assert_eq!(
            descriptions.safe_description("pdf__extract"),
            "Tool: pdf__extract\nAction: Extract the text of a PDF."
        );
        assert_eq!(descriptions.safe_description("gone__tool"), "Tool: gone__tool");
    }

    #[test]
    fn sensitive_keys() {
        for key in [
            "query",
            "sql",
            "script",
            "search_query",
            "rawSQL",
            "SQL",
            "api_key",
            "apiKey",
            "Authorization",
            "db-password",
            "promScript",
        ] {
            assert!(sensitive(key), "{key}");
        }
        for key in ["description", "service", "command", "querystring_len", "subscript", "transcript"] {
            assert!(!sensitive(key), "{key}");
        }
    }

    #[test]
    fn inputs_are_redacted_at_every_depth_and_capped() {
        let input = json!({"service": "api", "filter": {"query": "select 1", "limit": 5}, "list": [{"token": "t"}]});
        assert_eq!(
            tool_input(&input),
            json!({"service": "api", "filter": {"query": "[redacted]", "limit": 5}, "list": [{"token": "[redacted]"}]})
        );
        let long = tool_input(&json!({"text": "x".repeat(1000)}));
        assert_eq!(long["text"].as_str().unwrap().chars().count(), MAX_STRING + 1);
        let deep = tool_input(&json!({"a": {"b": {"c": {"d": {"e": 1}}}}}));
        assert_eq!(deep, json!({"a": {"b": {"c": {"d": "[…]"}}}}));
        let many: Map<String, Value> = (0..40).map(|i| (format!("k{i:02}"), json!("v".repeat(200)))).collect();
        assert_eq!(tool_input(&Value::Object(many)), json!({"_truncated": true}));
        assert_eq!(tool_input(&json!("plain")), json!("plain"));
    }
}
