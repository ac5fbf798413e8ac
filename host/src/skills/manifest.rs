//! `skill.toml`: what a skill asks for (capabilities, limits) and how it is built.

use crate::config::LimitSettings;
use serde::Deserialize;
use std::path::Path;

/// A parsed `skill.toml`. Every key is optional; unknown keys are errors.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Manifest {
    /// What the skill asks for.
    pub capabilities: Capabilities,
    /// Per-call limits it asks for (clamped to the operator's maximums).
    pub limits: LimitSettings,
    /// How `skillhost skill build` builds it.
    pub build: Build,
    /// When its `scheduled` export runs.
    pub schedule: Option<Schedule>,
    /// How it is served over MCP.
    pub mcp: McpServing,
}

/// `[mcp]`: how the skill's tools are named to MCP clients.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct McpServing {
    /// `"prefixed"` (the default): `<skill>__<tool>`, as the model sees them; `"bare"`: the
    /// tools' own names (the model and `skillhost call` still see `<skill>__<tool>`).
    pub names: McpNames,
}

/// `[mcp] names`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum McpNames {
    /// `<skill>__<tool>`.
    #[default]
    Prefixed,
    /// The tool's own name; the same bare name in two skills is a load error.
    Bare,
}

/// `[schedule]`: the skill's `scheduled` export runs every `every` while `skillhost run`
/// serves (never more often than the operator's `skills.schedule_minimum`).
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Schedule {
    /// The time between two runs (`30s`, `5m`, `1h`).
    pub every: crate::config::Interval,
}

/// `[capabilities]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Capabilities {
    /// The memory import.
    pub memory: bool,
    /// Hosts for the HTTP import (`*` for whatever the operator grants).
    pub http_hosts: Vec<String>,
    /// Environment variables the skill reads (exact names): those the operator also grants
    /// (`skills.grants.<skill>.env`) are its WASI environment in every call.
    pub env: Vec<String>,
    /// The notify import: messages of its own to the destinations the operator grants
    /// (`skills.grants.<skill>.notify`).
    pub notify: bool,
    /// Whose keys the state import reads and writes: the conversation's (`"conversation"`,
    /// the default; entries expire after `skills.state_ttl_seconds` untouched) or the
    /// skill's, shared by every conversation (`"skill"`). No grant is needed for either.
    pub state: crate::store::state::StateScope,
    /// `"self"`: the component reads its skill's distributable files, read-only at `/skill`
    /// (also its working directory). No grant is needed: they are the skill's own.
    pub files: Option<Files>,
}

/// `[capabilities] files`: which files a component reads. Only its own folder for now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub enum Files {
    /// `"self"`: the skill's distributable files ([`super::files`]), at `/skill`.
    Own,
}

impl TryFrom<String> for Files {
    type Error = String;

    fn try_from(value: String) -> Result<Self, String> {
        match value.as_str() {
            "self" => Ok(Files::Own),
            other => Err(format!(
                "files = \"{other}\": only \"self\" is supported (the skill's own folder, read-only at /skill)"
            )),
        }
    }
}

/// `[build]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Build {
    /// `rust`, `python`, `js` or `mithai`; detected from the folder when absent.
    pub kind: Option<BuildKind>,
    /// The Python module holding the skill (default `app`).
    pub python_module: Option<String>,
    /// The JavaScript entry module (default: `package.json`'s `main`, else `app.js`).
    pub js_entry: Option<String>,
    /// WASI features a JavaScript skill keeps (`random`, `clocks`); all others are off.
    pub js_features: Vec<String>,
    /// The world to build against (default `skill`); a skill with its own `wit/` folder
    /// names its world there, e.g. one that includes `skillhost:skill/skill` and adds hooks.
    pub world: Option<String>,
}

/// A skill's source language.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BuildKind {
    /// A Rust crate built for wasm32-wasip2.
    Rust,
    /// A Python app built with componentize-py.
    Python,
    /// A JavaScript module built with componentize-js.
    Js,
    /// A mithai `tools.py`, built unchanged with componentize-py and the mithai shim.
    Mithai,
}

impl Manifest {
    /// Reads `dir/skill.toml`; a missing file is the empty manifest. The error is one line and
    /// does not repeat the path: callers name the file.
    pub fn load(dir: &Path) -> Result<Manifest, String> {
        let path = dir.join("skill.toml");
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Manifest::default()),
            Err(e) => return Err(format!("cannot read: {e}")),
        };
        Manifest::parse(&text)
    }

    /// Parses the text of a `skill.toml`. The error is one line: `line L, column C: what`.
    pub fn parse(text: &str) -> Result<Manifest, String> {
        let manifest: Manifest = toml::from_str(text).map_err(|e| one_line(text, &e))?;
        manifest.limits.check().map_err(|e| format!("[limits] {e}"))?;
        for name in &manifest.capabilities.env {
            crate::config::check_env_name(name).map_err(|e| format!("[capabilities] env: {e}"))?;
        }
        Ok(manifest)
    }
}

/// The parser's own rendering spans several lines (a source excerpt with a caret), which
/// breaks `skill validate`'s one line per problem: keep the position and the message only.
fn one_line(text: &str, error: &toml::de::Error) -> String {
    let message = error.message().split_whitespace().collect::<Vec<_>>().join(" ");
    match error.span() {
        Some(span) => {
            let (line, column) = position(text, span.start);
            format!("line {line}, column {column}: {message}")
        }
        None => message,
    }
}

/// The 1-based line and column (in characters) of byte `offset` in `text`.
pub(crate) fn position(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (before.matches('\n').count() + 1, before[line_start..].chars().count() + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Manifest, String> {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("skill.toml"), text).unwrap();
        Manifest::load(dir.path())
    }

    #[test]
    fn full_manifest() {
        let m = parse("[capabilities]\nmemory = true\nhttp_hosts = [\"*\"]\nenv = [\"API_KEY\"]\n[limits]\ntimeout_ms = 500\n[build]\nkind = \"python\"\n").unwrap();
        assert!(m.capabilities.memory);
        assert_eq!(m.capabilities.env, ["API_KEY"]);
        assert_eq!(m.limits.timeout_ms, Some(500));
        assert_eq!(m.build.kind, Some(BuildKind::Python));
    }

    #[test]
    fn schedule_and_notify() {
        let m = parse("[capabilities]\nnotify = true\n[schedule]\nevery = \"90s\"\n").unwrap();
        assert!(m.capabilities.notify);
        assert_eq!(m.schedule.unwrap().every.0, std::time::Duration::from_secs(90));
        assert!(parse("").unwrap().schedule.is_none());
        let err = parse("[schedule]\nevery = \"often\"\n").unwrap_err();
        assert!(err.starts_with("line 2, column 9: ") && err.contains("30s"), "{err}");
        let err = parse("[schedule]\n").unwrap_err();
        assert!(err.contains("every"), "{err}");
        let err = parse("[schedule]\nevery = \"1m\"\nat = \"noon\"\n").unwrap_err();
        assert!(err.contains("at"), "{err}");
    }

    #[test]
    fn state_is_per_conversation_unless_the_skill_asks_for_its_own() {
        use crate::store::state::StateScope;
        assert_eq!(parse("").unwrap().capabilities.state, StateScope::Conversation);
        assert_eq!(parse("[capabilities]\nstate = \"skill\"\n").unwrap().capabilities.state, StateScope::Skill);
        let m = parse("[capabilities]\nstate = \"conversation\"\n").unwrap();
        assert_eq!(m.capabilities.state, StateScope::Conversation);
        let err = parse("[capabilities]\nstate = \"global\"\n").unwrap_err();
        assert!(
            err.starts_with("line 2, column 9: ") && err.contains("conversation") && err.contains("skill"),
            "{err}"
        );
    }

    #[test]
    fn files_takes_only_self() {
        assert_eq!(parse("").unwrap().capabilities.files, None);
        assert_eq!(parse("[capabilities]\nfiles = \"self\"\n").unwrap().capabilities.files, Some(Files::Own));
        let err = parse("[capabilities]\nfiles = \"all\"\n").unwrap_err();
        assert!(err.starts_with("line 2, column 9: files = \"all\": only \"self\""), "{err}");
        let err = parse("[capabilities]\nfiles = true\n").unwrap_err();
        assert!(err.starts_with("line 2, column 9: ") && err.contains("string"), "{err}");
    }

    #[test]
    fn unknown_keys_and_zero_limits_are_errors() {
        let err = parse("[capabilities]\nnetwork = true\n").unwrap_err();
        assert!(err.contains("network") && err.starts_with("line 2, column 1: "), "{err}");
        let err = parse("[limits]\nfuel = 0\n").unwrap_err();
        assert!(err.contains("fuel"), "{err}");
        let err = parse("[capabilities]\nenv = [\"AWS_*\"]\n").unwrap_err();
        assert!(err.starts_with("[capabilities] env: `AWS_*` is not"), "{err}");
    }

    #[test]
    fn syntax_errors_are_one_line_with_their_position() {
        let err = parse("[limits]\nfuel = 1\ntimeout_ms = \n").unwrap_err();
        assert!(!err.contains('\n'), "{err}");
        assert!(err.starts_with("line 3, column 14: "), "{err}");
        let err = parse("[capabilities]\nmemory = \"yes\"\n").unwrap_err();
        assert!(!err.contains('\n') && err.starts_with("line 2, column 10: ") && err.contains("bool"), "{err}");
        assert_eq!(position("ab\ncé\nd", 6), (2, 3));
    }

    #[test]
    fn missing_file_is_empty_manifest() {
        let dir = tempfile::tempdir().unwrap();
        let m = Manifest::load(dir.path()).unwrap();
        assert!(!m.capabilities.memory && m.capabilities.http_hosts.is_empty());
    }
}
