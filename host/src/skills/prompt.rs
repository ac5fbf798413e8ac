//! A skill's prompt: `prompt.md` (the whole file), or `SKILL.md` (frontmatter with `name` and
//! `description`, then the body), as in the Agent Skills format.

use std::path::Path;

/// A skill's prompt and the names it declares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prompt {
    /// The name from `SKILL.md` frontmatter, if any.
    pub name: Option<String>,
    /// The description from `SKILL.md` frontmatter (empty for `prompt.md`).
    pub description: String,
    /// The text injected into the system prompt.
    pub body: String,
    /// Which file it came from.
    pub file: &'static str,
}

/// Reads the prompt of the skill folder `dir`: `prompt.md` first, then `SKILL.md`.
/// `Ok(None)` when the folder has neither.
pub fn load(dir: &Path) -> Result<Option<Prompt>, String> {
    if let Some(text) = read(dir, "prompt.md")? {
        return Ok(Some(Prompt {
            name: None,
            description: String::new(),
            body: text.trim().to_string(),
            file: "prompt.md",
        }));
    }
    let Some(text) = read(dir, "SKILL.md")? else { return Ok(None) };
    parse_skill_md(&text).map(Some).map_err(|e| format!("{}: {e}", dir.join("SKILL.md").display()))
}

fn read(dir: &Path, file: &str) -> Result<Option<String>, String> {
    match std::fs::read_to_string(dir.join(file)) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("{}: {e}", dir.join(file).display())),
    }
}

/// Parses `SKILL.md`: a `---` line, `key: value` lines, a `---` line, then the body.
pub fn parse_skill_md(text: &str) -> Result<Prompt, String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.split_inclusive('\n');
    if lines.next().map(str::trim_end) != Some("---") {
        return Err("must start with a `---` frontmatter line".into());
    }
    let (mut name, mut description, mut consumed) = (None, None, 4);
    let mut closed = false;
    for line in lines.by_ref() {
        consumed += line.len();
        let trimmed = line.trim_end();
        if trimmed == "---" {
            closed = true;
            break;
        }
        if let Some((key, value)) = trimmed.split_once(':') {
            let value = value.trim().trim_matches(|c| c == '"' || c == '\'').to_string();
            match key.trim() {
                "name" if !value.is_empty() => name = Some(value),
                "description" if !value.is_empty() => description = Some(value),
                _ => {}
            }
        }
    }
    if !closed {
        return Err("frontmatter is not closed by a `---` line".into());
    }
    let name = name.ok_or("frontmatter has no `name`")?;
    let description = description.ok_or("frontmatter has no `description`")?;
    let body = text.get(consumed.min(text.len())..).unwrap_or("").trim().to_string();
    Ok(Prompt { name: Some(name), description, body, file: "SKILL.md" })
}

/// The tool-name-safe form of a skill name: lowercase, other characters become `_`.
pub fn slugify(name: &str) -> String {
    name.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '_' }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skill_md_frontmatter() {
        let p = parse_skill_md("---\nname: web-search\ndescription: Search the web.\nauthor: x\n---\n\n# Body\ntext\n")
            .unwrap();
        assert_eq!(p.name.as_deref(), Some("web-search"));
        assert_eq!(p.description, "Search the web.");
        assert_eq!(p.body, "# Body\ntext");
        assert_eq!(slugify("web-search"), "web_search");
    }

    #[test]
    fn skill_md_errors() {
        assert!(parse_skill_md("no frontmatter").unwrap_err().contains("---"));
        assert!(parse_skill_md("---\nname: x\n").unwrap_err().contains("not closed"));
        assert!(parse_skill_md("---\nname: x\n---\nbody").unwrap_err().contains("description"));
    }
}
