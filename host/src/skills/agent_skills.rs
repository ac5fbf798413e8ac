//! The open Agent Skills rules for a `SKILL.md`'s frontmatter, which `skill validate` checks
//! (warnings; errors under `--strict`) so that a folder shared with other agents' hosts is
//! one they accept.
//!
//! The names: a skill's Agent Skills (and MCP) name is its frontmatter `name`, kebab-case;
//! its host name (the prefix of its tools, `<skill>__<tool>`) is that name with `-` turned to
//! `_` ([`super::prompt::slugify`], which does exactly that to a valid name).
//!
//! `allowed-tools` (the tools a skill pre-approves) is kept in the frontmatter; only under
//! `skills.honour_allowed_tools: true` does it act ([`preapproved`]).

use super::Skill;
use super::prompt::Prompt;

/// The skill's own tools (component and script tools) its `SKILL.md`'s `allowed-tools`
/// names, by tool name or `<skill>__<tool>`: they run without asking (the operator's
/// `human.overrides` still has the last word). Other names there (another host's tools,
/// `Bash(git:*)`) pre-approve nothing here.
pub fn preapproved(skill: &Skill) -> Vec<String> {
    if skill.prompt.file != "SKILL.md" {
        return Vec::new();
    }
    let listed = |name: &str, full: &str| skill.prompt.allowed_tools.iter().any(|a| a == name || a == full);
    let tools = skill.tools.iter().chain(skill.scripts.iter().map(|s| &s.spec));
    tools.filter(|t| listed(&t.name, &t.full_name)).map(|t| t.name.clone()).collect()
}

/// The longest `name`.
const MAX_NAME: usize = 64;
/// The longest `description`.
const MAX_DESCRIPTION: usize = 1024;
/// The longest `compatibility`.
const MAX_COMPATIBILITY: usize = 500;

/// Each rule `prompt` (a `SKILL.md` in the folder named `folder`) breaks, one line each,
/// naming the field and the rule.
pub fn broken_rules(prompt: &Prompt, folder: &str) -> Vec<String> {
    let mut broken = Vec::new();
    match &prompt.name {
        Some(name) => broken.extend(name_rules(name, folder)),
        None => broken.push("name: missing".into()),
    }
    let description = prompt.description.chars().count();
    if description == 0 || description > MAX_DESCRIPTION {
        broken.push(format!("description: {description} characters; 1 to {MAX_DESCRIPTION}"));
    }
    if let Some(compatibility) = prompt.frontmatter.get("compatibility") {
        match compatibility.as_str() {
            Some(text) if text.chars().count() <= MAX_COMPATIBILITY => {}
            Some(text) => {
                broken.push(format!("compatibility: {} characters; at most {MAX_COMPATIBILITY}", text.chars().count()))
            }
            None => broken.push("compatibility: not a string".into()),
        }
    }
    if let Some(metadata) = prompt.frontmatter.get("metadata") {
        let strings = metadata.as_object().is_some_and(|map| map.values().all(serde_json::Value::is_string));
        if !strings {
            broken.push("metadata: not a map of strings to strings".into());
        }
    }
    broken
}

fn name_rules(name: &str, folder: &str) -> Vec<String> {
    let mut broken = Vec::new();
    let length = name.chars().count();
    if length == 0 || length > MAX_NAME {
        broken.push(format!("name: {length} characters; 1 to {MAX_NAME}"));
    }
    if !name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-') {
        broken.push(format!("name `{name}`: only lowercase letters, digits and `-`"));
    }
    if name.starts_with('-') || name.ends_with('-') || name.contains("--") {
        broken.push(format!("name `{name}`: no leading, trailing or double `-`"));
    }
    if name != folder {
        broken.push(format!("name `{name}`: must equal the folder's name (`{folder}`)"));
    }
    broken
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prompt(name: &str, description: &str, extra: &[(&str, serde_json::Value)]) -> Prompt {
        let frontmatter = extra.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
        Prompt { name: Some(name.into()), description: description.into(), frontmatter, ..Prompt::default() }
    }

    #[test]
    fn each_rule_is_named_when_broken() {
        assert!(broken_rules(&prompt("pdf-tools", "Fills PDF forms.", &[]), "pdf-tools").is_empty());
        let broken = broken_rules(&prompt("PDF--tools-", "", &[]), "pdf");
        assert_eq!(broken.len(), 4, "{broken:?}");
        assert!(broken[0].contains("only lowercase") && broken[1].contains("double") && broken[2].contains("folder"));
        assert!(broken[3].starts_with("description: 0 characters"));
        let long = "x".repeat(501);
        let extra = [("compatibility", serde_json::json!(long)), ("metadata", serde_json::json!({"a": 1}))];
        let broken = broken_rules(&prompt("a", "d", &extra), "a");
        assert_eq!(broken, ["compatibility: 501 characters; at most 500", "metadata: not a map of strings to strings"]);
        assert_eq!(broken_rules(&prompt(&"a".repeat(65), "d", &[]), &"a".repeat(65)).len(), 1);
    }
}
