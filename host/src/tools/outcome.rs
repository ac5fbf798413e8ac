//! What one tool call produced, whatever kind of tool it was.

use super::coverage::CoverageEntry;
use crate::skills::contract::Content;
use serde_json::Value;
use std::time::Duration;

/// What one tool call produced, ready to become a `tool_result` block.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutcome {
    /// The text the model reads: the guest's content, or a structured error as JSON.
    pub content: String,
    /// Whether the call failed (a host-side error or the guest's `succeeded: false`).
    pub is_error: bool,
    /// Wall-clock time of the call.
    pub duration: Duration,
    /// The guest's own `succeeded` flag; `None` when it did not say or the call never ran.
    pub succeeded: Option<bool>,
    /// The machine-readable cause when the host failed the call (`unknown_tool`, `trap`, ...).
    pub error_kind: Option<String>,
    /// The guest's own `is-empty` flag.
    pub is_empty: Option<bool>,
    /// The guest's coverage declaration: verified when valid, unverified when not; `None`
    /// when it attached none.
    pub coverage: Option<CoverageEntry>,
    /// The result as typed content, for clients that take it (MCP): the guest's text first
    /// (when not empty), then its blocks. Empty when the result is `content` alone, which
    /// then holds the model's rendering of every block ([`crate::skills::content::model_text`]).
    pub blocks: Vec<Content>,
}

impl ToolOutcome {
    /// An error result built from a structured JSON value (`{"error", "kind", ...}`).
    pub fn error(json: &Value, duration: Duration) -> Self {
        let kind = json.get("kind").and_then(Value::as_str).map(str::to_owned);
        ToolOutcome {
            content: json.to_string(),
            is_error: true,
            duration,
            succeeded: None,
            error_kind: kind,
            is_empty: None,
            coverage: None,
            blocks: Vec::new(),
        }
    }

    /// A successful plain result (adapter tools).
    pub fn text(content: String, duration: Duration) -> Self {
        ToolOutcome {
            content,
            is_error: false,
            duration,
            succeeded: None,
            error_kind: None,
            is_empty: None,
            coverage: None,
            blocks: Vec::new(),
        }
    }

    /// Whether the result is a JSON object holding `field`.
    pub fn has_field(&self, field: &str) -> bool {
        serde_json::from_str::<Value>(&self.content).is_ok_and(|v| v.get(field).is_some())
    }

    /// Adds `field` to the model-visible result: into a JSON object result, else around it
    /// as `{"result": <text>, field: value}`.
    pub fn with_field(mut self, field: &str, value: Value) -> Self {
        let mut object = match serde_json::from_str::<Value>(&self.content) {
            Ok(Value::Object(map)) => map,
            _ => serde_json::Map::from_iter([("result".to_owned(), Value::String(self.content.clone()))]),
        };
        object.insert(field.to_owned(), value);
        self.content = Value::Object(object).to_string();
        self
    }
}

/// `""`, `[]`, `{}` or `null` (as text or JSON), ignoring surrounding whitespace.
pub fn generically_empty(content: &str) -> bool {
    let trimmed = content.trim();
    trimmed.is_empty()
        || match serde_json::from_str::<Value>(trimmed) {
            Ok(Value::Null) => true,
            Ok(Value::String(s)) => s.is_empty(),
            Ok(Value::Array(a)) => a.is_empty(),
            Ok(Value::Object(o)) => o.is_empty(),
            _ => false,
        }
}

#[cfg(test)]
mod tests {
    #[test]
    fn generic_emptiness() {
        for empty in ["", "  ", "[]", "{}", "null", "\"\"", " [ ] "] {
            assert!(super::generically_empty(empty), "{empty:?}");
        }
        for full in ["0", "false", "[1]", "{\"a\":1}", "text"] {
            assert!(!super::generically_empty(full), "{full:?}");
        }
    }
}
