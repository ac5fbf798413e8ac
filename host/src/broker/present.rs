//! What every surface shows of an entry: the call's input redacted and capped, the tool's
//! safe description, and the approval's presentation (the fields of `approval_requested`).

use crate::llm::ToolDecl;
use crate::tools::{CONFIRMATION_CHALLENGE, Level};
use serde_json::{Map, Value, json};
use std::time::{SystemTime, UNIX_EPOCH};

/// Replaces a redacted value.
pub const REDACTED: &str = "[redacted]";
/// Key words whose values never leave the host: the spec's query/sql/script inputs, plus
/// credentials.
const REDACTED_WORDS: &[&str] = &[
    "query",
    "queries",
    "sql",
    "script",
    "scripts",
    "password",
    "passwd",
    "secret",
    "token",
    "apikey",
    "credential",
    "credentials",
    "authorization",
];
/// Longest string value shown, in characters.
const MAX_STRING: usize = 256;
/// Most members or items shown per object or array.
const MAX_ITEMS: usize = 32;
/// Deepest nesting shown (root 0).
const MAX_DEPTH: usize = 4;
/// Largest presentation, in bytes of compact JSON.
const MAX_BYTES: usize = 4096;

/// The `tool_input` presentation: values under sensitive keys redacted (at any depth),
/// strings, containers and nesting capped; a result still too large becomes
/// `{"_truncated": true}`.
pub fn tool_input(input: &Value) -> Value {
    let shown = present(input, 0);
    if shown.to_string().len() > MAX_BYTES {
        return json!({ "_truncated": true });
    }
    shown
}

fn present(value: &Value, depth: usize) -> Value {
    match value {
        Value::String(s) if s.chars().count() > MAX_STRING => {
            Value::String(format!("{}…", s.chars().take(MAX_STRING).collect::<String>()))
        }
        Value::Array(_) | Value::Object(_) if depth >= MAX_DEPTH => Value::String("[…]".into()),
        Value::Array(items) => Value::Array(items.iter().take(MAX_ITEMS).map(|v| present(v, depth + 1)).collect()),
        Value::Object(map) => {
            let shown = map.iter().take(MAX_ITEMS).map(|(k, v)| {
                let v = if sensitive(k) { Value::String(REDACTED.into()) } else { present(v, depth + 1) };
                (k.clone(), v)
            });
            Value::Object(shown.collect::<Map<_, _>>())
        }
        other => other.clone(),
    }
}

/// Whether a key names a query, SQL, script or credential: one of its words (split at
/// `_`, `-`, `.`, spaces and lower-to-upper case changes) is a redacted word.
pub fn sensitive(key: &str) -> bool {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut prev_lower = false;
    for c in key.chars() {
        if !c.is_alphanumeric() || (c.is_uppercase() && prev_lower) {
            words.push(std::mem::take(&mut word));
        }
        if c.is_alphanumeric() {
            word.extend(c.to_lowercase());
        }
        prev_lower = c.is_lowercase() || c.is_ascii_digit();
    }
    words.push(word);
    let joined: String = words.concat();
    words.iter().any(|w| REDACTED_WORDS.contains(&w.as_str())) || REDACTED_WORDS.contains(&joined.as_str())
}

/// `Tool: <name>` and, when the tool describes itself among `decls`, `Action: <first line>`
/// (at most 200 characters). Never the call's arguments.
pub fn safe_description(decls: &[ToolDecl], tool_name: &str) -> String {
    let decl = decls.iter().find(|d| d.name == tool_name);
    let action = decl.and_then(|d| {
        let line = d.description.lines().map(str::trim).find(|l| !l.is_empty())?;
        Some(line.chars().take(200).collect::<String>())
    });
    match action {
        Some(action) => format!("Tool: {tool_name}\nAction: {action}"),
        None => format!("Tool: {tool_name}"),
    }
}

/// Seconds since the epoch, as the wire shows times.
pub fn unix_seconds(t: SystemTime) -> f64 {
    t.duration_since(UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

/// A gated call as every surface presents it (the fields of `approval_requested` but its id).
pub struct Approval<'a> {
    /// The prefixed tool name.
    pub tool_name: &'a str,
    /// The model's call id.
    pub tool_call_id: &'a str,
    /// The call's arguments (redacted and capped here).
    pub input: &'a Value,
    /// `approve` or `confirm`.
    pub level: Level,
    /// From [`safe_description`].
    pub safe_description: String,
    /// When the wait ends.
    pub expires_at: SystemTime,
}

impl Approval<'_> {
    /// The presentation, with `approval_id`.
    pub fn json(&self, approval_id: &str) -> Value {
        json!({
            "approval_id": approval_id,
            "tool_name": self.tool_name,
            "tool_call_id": self.tool_call_id,
            "level": self.level.as_str(),
            "safe_description": self.safe_description,
            "confirmation_challenge": (self.level == Level::Confirm).then_some(CONFIRMATION_CHALLENGE),
            "tool_input": tool_input(self.input),
            "arguments_sha256": super::arguments_hash(self.input),
            "expires_at": unix_seconds(self.expires_at),
        })
    }
}

/// What an approval entry's presentation says of the call it covers: the tool, the hash of
/// its arguments and its level (`None` when it is not an approval's).
pub fn covered(presentation: Option<&str>) -> Option<(String, String, Level)> {
    let fields: Value = serde_json::from_str(presentation?).ok()?;
    let tool = fields.get("tool_name")?.as_str()?.to_owned();
    let hash = fields.get("arguments_sha256")?.as_str()?.to_owned();
    let level = match fields.get("level")?.as_str()? {
        "confirm" => Level::Confirm,
        "approve" => Level::Approve,
        _ => return None,
    };
    Some((tool, hash, level))
}

/// A question as every surface presents it (the fields of `question_requested`).
pub fn question(
    question_id: &str,
    prompt: &str,
    choices: &[String],
    schema: Option<&Value>,
    expires_at: SystemTime,
) -> Value {
    let mut fields = json!({ "question_id": question_id, "prompt": prompt, "choices": choices, "expires_at": unix_seconds(expires_at) });
    if let Some(schema) = schema {
        fields["schema"] = schema.clone();
    }
    fields
}
