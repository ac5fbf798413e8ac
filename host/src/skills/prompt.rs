//! A skill's prompt: `prompt.md` (the whole file), or `SKILL.md` in the Agent Skills format:
//! YAML frontmatter (`name` and `description` required, every other key kept), then the
//! body. The files beside a `SKILL.md` (`reference.md`, `scripts/...`) are listed so that
//! the model knows they exist.

use std::collections::BTreeMap;
use std::io::Read as _;
use std::path::Path;

/// The default of `skills.max_prompt_bytes`: a prompt file larger than this is a load error.
pub use crate::config::DEFAULT_MAX_PROMPT_BYTES;

/// At most this many reference files are listed; the rest are counted.
const MAX_REFERENCES: usize = 50;

/// A skill's prompt and the names it declares.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Prompt {
    /// The name from `SKILL.md` frontmatter, if any (as written; the loader slugifies it).
    pub name: Option<String>,
    /// The description from `SKILL.md` frontmatter (empty for `prompt.md`).
    pub description: String,
    /// The text injected into the system prompt.
    pub body: String,
    /// Which file it came from.
    pub file: &'static str,
    /// `license` from the frontmatter.
    pub license: Option<String>,
    /// `allowed-tools` from the frontmatter (a list, or one space-separated string).
    pub allowed_tools: Vec<String>,
    /// Every frontmatter key (`metadata`, `version`, ... included), as JSON.
    pub frontmatter: BTreeMap<String, serde_json::Value>,
    /// Files beside `SKILL.md`, relative to the skill folder, sorted (`reference.md`,
    /// `scripts/add.py`); build files, sources and the component are left out.
    pub references: Vec<String>,
    /// How many reference files were left off the list past [`MAX_REFERENCES`].
    pub references_left_off: usize,
    /// The frontmatter's `tools:` block (script tools), in the order written: argument order
    /// is argv order, which the JSON map in `frontmatter` does not keep.
    pub tools: Option<serde_yaml_ng::Value>,
}

/// Why a prompt could not be read: the file (`prompt.md` / `SKILL.md`) and the message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}: {message}")]
pub struct PromptError {
    /// The file at fault.
    pub file: &'static str,
    /// What is wrong with it.
    pub message: String,
}

impl Prompt {
    /// The prompt of a `prompt.md` holding `text`.
    pub fn prompt_md(text: &str) -> Prompt {
        Prompt { body: text.trim().to_owned(), file: "prompt.md", ..Prompt::default() }
    }

    /// What the system prompt carries for this skill: the body, then the reference files
    /// (their paths under `dir`, the skill's folder), if any.
    pub fn system_text(&self, dir: &Path) -> String {
        if self.references.is_empty() {
            return self.body.clone();
        }
        let mut text = format!("{}\n\nFiles of this skill (read one when the instructions point to it):", self.body);
        for file in &self.references {
            text.push_str(&format!("\n- {}", dir.join(file).display()));
        }
        if self.references_left_off > 0 {
            text.push_str(&format!("\n- and {} more under {}", self.references_left_off, dir.display()));
        }
        text
    }
}

/// Reads the prompt of the skill folder `dir`: `prompt.md` first, then `SKILL.md`; a file
/// larger than `max_bytes` is refused. `Ok(None)` when the folder has neither.
pub fn load(dir: &Path, max_bytes: u64) -> Result<Option<Prompt>, PromptError> {
    if let Some(text) = read(dir, "prompt.md", max_bytes)? {
        return Ok(Some(Prompt::prompt_md(&text)));
    }
    let Some(text) = read(dir, "SKILL.md", max_bytes)? else { return Ok(None) };
    let mut prompt = parse_skill_md(&text).map_err(|message| PromptError { file: "SKILL.md", message })?;
    let mut references = Vec::new();
    list_references(dir, "", &mut references);
    references.sort();
    prompt.references_left_off = references.len().saturating_sub(MAX_REFERENCES);
    references.truncate(MAX_REFERENCES);
    prompt.references = references;
    Ok(Some(prompt))
}

fn read(dir: &Path, file: &'static str, max_bytes: u64) -> Result<Option<String>, PromptError> {
    let error = |message: String| PromptError { file, message };
    let handle = match std::fs::File::open(dir.join(file)) {
        Ok(handle) => handle,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(error(e.to_string())),
    };
    // Read one byte past the cap rather than trust the size: the file may grow meanwhile.
    let mut bytes = Vec::new();
    handle.take(max_bytes + 1).read_to_end(&mut bytes).map_err(|e| error(e.to_string()))?;
    if bytes.len() as u64 > max_bytes {
        return Err(error(format!(
            "larger than skills.max_prompt_bytes ({max_bytes} bytes): the prompt goes into every system prompt; \
             shorten it or move detail into reference files beside SKILL.md"
        )));
    }
    String::from_utf8(bytes).map(Some).map_err(|_| error("not valid UTF-8".into()))
}

/// Files and folders of a skill that are not reference material for the model.
const NOT_REFERENCES: &[&str] = &[
    "SKILL.md",
    "prompt.md",
    "skill.toml",
    "skill.wasm",
    "Cargo.toml",
    "Cargo.lock",
    "package.json",
    "package-lock.json",
    "target",
    "node_modules",
    "__pycache__",
    "src",
    "wit",
];

fn list_references(dir: &Path, prefix: &str, out: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let top_level_skip = prefix.is_empty() && NOT_REFERENCES.contains(&name.as_str());
        if name.starts_with('.') || top_level_skip || name.ends_with(".wasm") || name == "__pycache__" {
            continue;
        }
        let Ok(kind) = entry.file_type() else { continue };
        let relative = format!("{prefix}{name}");
        if kind.is_dir() && out.len() <= MAX_REFERENCES * 4 {
            list_references(&entry.path(), &format!("{relative}/"), out);
        } else if kind.is_file() {
            out.push(relative);
        }
    }
}

/// A `SKILL.md`'s YAML frontmatter and its body: a `---` line (after an optional byte-order
/// mark), the YAML, a `---` line, then the body.
pub(crate) fn split_skill_md(text: &str) -> Result<(&str, &str), String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.split_inclusive('\n');
    let opening = lines.next().unwrap_or("");
    if opening.trim_end() != "---" {
        return Err("must start with a `---` frontmatter line".into());
    }
    let mut consumed = opening.len();
    let mut yaml_end = None;
    for line in lines {
        if line.trim_end() == "---" {
            yaml_end = Some(consumed);
            consumed += line.len();
            break;
        }
        consumed += line.len();
    }
    let yaml_end = yaml_end.ok_or("frontmatter is not closed by a `---` line")?;
    Ok((&text[opening.len()..yaml_end], text.get(consumed..).unwrap_or("")))
}

/// Parses `SKILL.md`: a `---` line, YAML frontmatter, a `---` line, then the body.
pub fn parse_skill_md(text: &str) -> Result<Prompt, String> {
    let (yaml, body) = split_skill_md(text)?;
    let frontmatter = frontmatter(yaml)?;
    let tools = match frontmatter.contains_key("tools") {
        true => tools_block(yaml)?,
        false => None,
    };
    let name = scalar(&frontmatter, "name")?.ok_or("frontmatter has no `name`")?;
    let description = scalar(&frontmatter, "description")?.ok_or("frontmatter has no `description`")?;
    let license = scalar(&frontmatter, "license")?;
    let allowed_tools = match frontmatter.get("allowed-tools") {
        None | Some(serde_json::Value::Null) => Vec::new(),
        Some(serde_json::Value::String(s)) => s.split_whitespace().map(str::to_owned).collect(),
        Some(serde_json::Value::Array(items)) => {
            items.iter().map(|i| i.as_str().map(str::to_owned).unwrap_or_else(|| i.to_string())).collect()
        }
        Some(_) => return Err("`allowed-tools` must be a list of tool names".into()),
    };
    let body = body.trim().to_string();
    Ok(Prompt {
        name: Some(name),
        description,
        body,
        file: "SKILL.md",
        license,
        allowed_tools,
        frontmatter,
        tools,
        ..Prompt::default()
    })
}

/// The `tools:` block as YAML, keeping the order of its keys.
fn tools_block(yaml: &str) -> Result<Option<serde_yaml_ng::Value>, String> {
    let value: serde_yaml_ng::Value = serde_yaml_ng::from_str(yaml).map_err(|e| format!("frontmatter: {e}"))?;
    Ok(value.get("tools").filter(|t| !t.is_null()).cloned())
}

/// The frontmatter as a map of top-level keys (YAML; JSON values keep what it holds).
pub(crate) fn frontmatter(yaml: &str) -> Result<BTreeMap<String, serde_json::Value>, String> {
    if yaml.trim().is_empty() {
        return Ok(BTreeMap::new());
    }
    let value: serde_json::Value = serde_yaml_ng::from_str(yaml).map_err(|e| {
        // The YAML starts on the file's second line, after the opening `---`.
        let at = e.location().map(|l| format!(" (line {})", l.line() + 1)).unwrap_or_default();
        format!("frontmatter is not valid YAML{at}: {e}")
    })?;
    match value {
        serde_json::Value::Object(map) => Ok(map.into_iter().collect()),
        _ => Err("frontmatter must be `key: value` lines (a YAML mapping)".into()),
    }
}

/// A top-level key holding text (numbers and booleans are taken as written); empty is absent.
fn scalar(map: &BTreeMap<String, serde_json::Value>, key: &str) -> Result<Option<String>, String> {
    let text = match map.get(key) {
        None | Some(serde_json::Value::Null) => return Ok(None),
        Some(serde_json::Value::String(s)) => s.trim().to_owned(),
        Some(v @ (serde_json::Value::Number(_) | serde_json::Value::Bool(_))) => v.to_string(),
        Some(_) => return Err(format!("`{key}` must be text, not a list or mapping")),
    };
    Ok((!text.is_empty()).then_some(text))
}

/// The tool-name-safe form of a skill name: lowercase; other characters than `[a-z0-9]`
/// become `_`, with runs of `_` collapsed and none at either end (`Web Search!` ->
/// `web_search`), so that a name the format allows is one the host accepts.
/// A skill folder's name as a skill name: lowercased, characters outside `[a-z0-9_]` become
/// `_`, and nothing trimmed, so a folder whose name breaks the name rule (`cx_`, `2fa`) is a
/// load error rather than silently the same skill as another folder.
pub fn folder_name(folder: &str) -> String {
    folder.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c.to_ascii_lowercase() } else { '_' }).collect()
}

/// SKILL.md's `name` as a skill name: lowercased, characters outside `[a-z0-9]` become `_`,
/// runs of `_` collapse and none is left at either end (`PDF Tools` -> `pdf_tools`).
pub fn slugify(name: &str) -> String {
    let mapped: String =
        name.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '_' }).collect();
    mapped.split('_').filter(|part| !part.is_empty()).collect::<Vec<_>>().join("_")
}

#[cfg(test)]
#[path = "prompt_tests.rs"]
mod tests;
