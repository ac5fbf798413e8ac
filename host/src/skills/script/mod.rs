//! Script tools (Mode C): SKILL.md frontmatter `tools:` declares scripts as typed tools.
//!
//! ```yaml
//! tools:
//!   add:
//!     description: Sum two integers.
//!     script: scripts/add.py
//!     args:
//!       a: {type: string, description: First int}
//!       b: {type: string, description: Second int}
//! ```
//!
//! Each becomes `<skill>__<tool>` with a JSON Schema from `args` (every arg required, no
//! others); the args are the script's positional argv in declared order. Scripts run as WASI
//! command components (`.py` and `.js` built by `skillhost skill build` into
//! [`BUILD_DIR`], `.wasm` taken as written), never as host processes.

pub mod build;
mod load;
mod tool;

pub use tool::{ScriptError, ScriptTool};

use serde_yaml_ng::Value as Yaml;
use std::path::{Component, Path, PathBuf};

/// Where `skill build` puts the components of `.py` and `.js` scripts, inside the skill folder
/// (`.build/scripts/add.py.wasm`); hidden, so it is no reference file.
pub const BUILD_DIR: &str = ".build";

/// One declared script tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptDecl {
    /// The tool name (unprefixed).
    pub name: String,
    /// Shown to the model.
    pub description: String,
    /// The script, relative to the skill folder, as written.
    pub script: String,
    /// The arguments, in declared (argv) order.
    pub args: Vec<ArgDecl>,
}

/// One argument of a script tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgDecl {
    /// Its name in the tool's input.
    pub name: String,
    /// Its JSON type.
    pub kind: ArgType,
    /// Shown to the model.
    pub description: String,
}

/// The JSON types an argument may have: each is rendered as one argv string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgType {
    /// Passed as written.
    String,
    /// Passed in decimal.
    Integer,
    /// Passed as JSON writes it.
    Number,
    /// `true` or `false`.
    Boolean,
}

impl ArgType {
    fn parse(text: &str) -> Option<ArgType> {
        Some(match text {
            "string" => ArgType::String,
            "integer" => ArgType::Integer,
            "number" => ArgType::Number,
            "boolean" => ArgType::Boolean,
            _ => return None,
        })
    }

    fn as_str(self) -> &'static str {
        match self {
            ArgType::String => "string",
            ArgType::Integer => "integer",
            ArgType::Number => "number",
            ArgType::Boolean => "boolean",
        }
    }
}

/// How a script is run, by its extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScriptKind {
    /// Built with componentize-py.
    Python,
    /// Built with componentize-js.
    JavaScript,
    /// A WASI command component already (Rust, C, Go, ... for wasm32-wasip2).
    Wasm,
}

impl ScriptKind {
    /// The kind of `script`; any other interpreter is refused, naming what to do instead.
    pub fn of(script: &str) -> Result<ScriptKind, String> {
        let extension = Path::new(script).extension().map(|e| e.to_string_lossy().to_lowercase());
        match extension.as_deref() {
            Some("py") => Ok(ScriptKind::Python),
            Some("js" | "cjs") => Ok(ScriptKind::JavaScript),
            Some("wasm") => Ok(ScriptKind::Wasm),
            other => {
                let what =
                    other.map_or_else(|| "a script without an extension".to_owned(), |e| format!("a `.{e}` script"));
                Err(format!(
                    "script `{script}`: {what} cannot run here: skillhost runs no host processes, only sandboxed \
                     WebAssembly. Write it in Python (.py) or JavaScript (.js), which `skillhost skill build` \
                     compiles, or build it as a wasm32-wasip2 command component (.wasm: a Rust, C or Go program)"
                ))
            }
        }
    }
}

impl ScriptDecl {
    /// The tool's input schema: one property per argument, all required, no others.
    pub fn schema(&self) -> serde_json::Value {
        let properties: serde_json::Map<String, serde_json::Value> = self
            .args
            .iter()
            .map(|a| (a.name.clone(), serde_json::json!({"type": a.kind.as_str(), "description": a.description})))
            .collect();
        let required: Vec<&str> = self.args.iter().map(|a| a.name.as_str()).collect();
        serde_json::json!({
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": false,
        })
    }

    /// The script's argv for a checked `input`: the script's path, then each argument in
    /// declared order.
    pub fn argv(&self, input: &serde_json::Value) -> Vec<String> {
        let arg = |a: &ArgDecl| match input.get(&a.name) {
            Some(serde_json::Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
            None => String::new(),
        };
        std::iter::once(self.script.clone()).chain(self.args.iter().map(arg)).collect()
    }

    /// The kind of its script.
    pub fn kind(&self) -> Result<ScriptKind, String> {
        ScriptKind::of(&self.script)
    }

    /// The component that runs it: the `.wasm` itself, or what `skill build` made of the source.
    pub fn artifact(&self, dir: &Path) -> PathBuf {
        match self.kind() {
            Ok(ScriptKind::Wasm) => dir.join(&self.script),
            _ => dir.join(BUILD_DIR).join(format!("{}.wasm", self.script)),
        }
    }
}

/// The script tools of a SKILL.md `tools:` block (`None`: no block), in declared order.
pub fn declarations(block: Option<&Yaml>) -> Result<Vec<ScriptDecl>, String> {
    let Some(block) = block else { return Ok(Vec::new()) };
    let Yaml::Mapping(tools) = block else {
        return Err("`tools` must be a mapping of tool names to {description, script, args}".into());
    };
    tools.iter().map(|(name, body)| declaration(name, body)).collect()
}

fn declaration(name: &Yaml, body: &Yaml) -> Result<ScriptDecl, String> {
    let name = text(name).ok_or("`tools`: a tool name must be text")?;
    let at = format!("`tools.{name}`");
    let fields = mapping(body, &at, &["description", "script", "args"])?;
    let field = |key: &str| fields.get(key).and_then(|v| text(v));
    let description = field("description").ok_or_else(|| format!("{at} has no `description`"))?;
    let script = field("script").ok_or_else(|| format!("{at} has no `script` (the file it runs)"))?;
    check_inside(&script).map_err(|e| format!("{at}.script: {e}"))?;
    let args = match fields.get("args") {
        None | Some(Yaml::Null) => Vec::new(),
        Some(Yaml::Mapping(args)) => {
            args.iter().map(|(arg, body)| argument(&at, arg, body)).collect::<Result<Vec<_>, _>>()?
        }
        Some(_) => return Err(format!("{at}.args must be a mapping of argument names to {{type, description}}")),
    };
    Ok(ScriptDecl { name, description, script, args })
}

fn argument(at: &str, name: &Yaml, body: &Yaml) -> Result<ArgDecl, String> {
    let name =
        text(name).filter(|n| !n.is_empty()).ok_or_else(|| format!("{at}.args: an argument name must be text"))?;
    let at = format!("{at}.args.{name}");
    let fields = mapping(body, &at, &["type", "description"])?;
    let kind = match fields.get("type").and_then(|v| text(v)) {
        None => ArgType::String,
        Some(kind) => ArgType::parse(&kind)
            .ok_or_else(|| format!("{at}.type `{kind}` is not one of string, integer, number, boolean"))?,
    };
    let description = fields.get("description").and_then(|v| text(v)).unwrap_or_default();
    Ok(ArgDecl { name, kind, description })
}

/// `body` as a mapping with only `allowed` keys (a misspelt key is an error, not ignored).
fn mapping<'a>(
    body: &'a Yaml,
    at: &str,
    allowed: &[&str],
) -> Result<std::collections::BTreeMap<String, &'a Yaml>, String> {
    let Yaml::Mapping(map) = body else { return Err(format!("{at} must be a mapping ({})", allowed.join(", "))) };
    let mut fields = std::collections::BTreeMap::new();
    for (key, value) in map {
        let key = text(key).unwrap_or_default();
        if !allowed.contains(&key.as_str()) {
            return Err(format!("{at}: unknown key `{key}` (known: {})", allowed.join(", ")));
        }
        fields.insert(key, value);
    }
    Ok(fields)
}

/// A YAML scalar as text (numbers and booleans as written).
fn text(value: &Yaml) -> Option<String> {
    match value {
        Yaml::String(s) => Some(s.trim().to_owned()),
        Yaml::Number(n) => Some(n.to_string()),
        Yaml::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// A script path stays inside the skill folder: relative, no `..`.
fn check_inside(script: &str) -> Result<(), String> {
    let path = Path::new(script);
    let inside = path.components().all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
    if script.is_empty() || !inside {
        return Err(format!("`{script}` must be a path inside the skill folder (relative, without `..`)"));
    }
    Ok(())
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
