//! The system prompt, assembled in the spec's order: `bot.system_prompt`, then the loaded
//! skills' prompts (by skill name; an on-demand `SKILL.md` skill only by name, description
//! and folder, see [`crate::tools::load_skill`]), then `MEMORY.md` from the memory root.

use crate::skills::SkillSet;
use crate::tools::{LOAD_SKILL, OnDemand};
use std::collections::BTreeSet;
use std::path::Path;

/// The memory file injected into every conversation.
pub const MEMORY_FILE: &str = "MEMORY.md";

/// The heading of the on-demand skills' list.
pub const SKILLS_TO_LOAD: &str = "# Skills to load";

/// Builds the system prompt. Empty parts are skipped, so no blank sections reach the model.
/// Skills in `on_demand` are listed, not injected, except those in `carried`: loaded in
/// this conversation, but their load is no longer in the history sent. Skills `left_out`
/// (sub-agents: their body is another turn's prompt) are neither.
///
/// `MEMORY.md` is read on every call, not cached: skills write memory during a conversation
/// and the next turn must see it.
pub fn system_prompt(
    bot_prompt: &str,
    skills: &SkillSet,
    on_demand: &OnDemand,
    carried: &BTreeSet<String>,
    memory_root: &Path,
    left_out: &dyn Fn(&str) -> bool,
) -> String {
    let mut parts: Vec<String> = vec![bot_prompt.trim().to_owned()];
    let injected = skills.skills.values().filter(|s| !on_demand.contains(&s.name) && !left_out(&s.name));
    parts.extend(injected.map(|s| s.prompt.system_text(&s.dir).trim().to_owned()));
    parts.push(catalog(on_demand));
    let carried = carried.iter().filter_map(|name| on_demand.get(name));
    parts.extend(
        carried.map(|s| format!("# Skill `{}` (loaded earlier in this conversation)\n\n{}", s.name, s.text.trim())),
    );
    if let Some(memory) = read_memory(memory_root) {
        parts.push(format!("# Memory ({MEMORY_FILE})\n\n{memory}"));
    }
    parts.retain(|p| !p.is_empty());
    parts.join("\n\n")
}

/// The list of on-demand skills: name, description on one line, folder. Empty when none.
fn catalog(on_demand: &OnDemand) -> String {
    if on_demand.is_empty() {
        return String::new();
    }
    let mut text = format!(
        "{SKILLS_TO_LOAD}\n\nBefore you act on a request one of these skills covers, call `{LOAD_SKILL}` with its name: \
         you get its instructions (and its tools, if it has any) for the rest of the conversation. Each skill's files \
         are in its folder.\n"
    );
    for skill in on_demand.listed() {
        let description = skill.description.split_whitespace().collect::<Vec<_>>().join(" ");
        text.push_str(&format!("\n- `{}`: {description} (folder: {})", skill.name, skill.dir.display()));
    }
    text
}

/// `MEMORY.md`'s trimmed text, or `None` when it is missing, unreadable or empty.
fn read_memory(root: &Path) -> Option<String> {
    let path = root.join(MEMORY_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) if !text.trim().is_empty() => Some(text.trim().to_owned()),
        Ok(_) => None,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => {
            // A broken memory file must not stop the conversation; say so in the log.
            tracing::warn!("cannot read {}: {e}", path.display());
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bot_prompt_then_memory_and_empty_parts_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let (set, none) = (SkillSet::default(), OnDemand::default());
        let prompt = |bot: &str| system_prompt(bot, &set, &none, &BTreeSet::new(), dir.path(), &|_| false);
        assert_eq!(prompt(" Be brief. "), "Be brief.");
        std::fs::write(dir.path().join(MEMORY_FILE), "\n").unwrap();
        assert_eq!(prompt("Be brief."), "Be brief.");
        std::fs::write(dir.path().join(MEMORY_FILE), "The sky is blue.\n").unwrap();
        assert_eq!(prompt(""), "# Memory (MEMORY.md)\n\nThe sky is blue.");
    }

    #[test]
    fn on_demand_skills_are_listed_and_carried_ones_injected() {
        use crate::skills::Skill;
        use crate::skills::prompt::{Prompt, parse_skill_md};
        let dir = tempfile::tempdir().unwrap();
        let mut set = SkillSet::default();
        let md = parse_skill_md("---\nname: pdf\ndescription: >\n  Reads\n  PDFs.\n---\nPDF BODY\n").unwrap();
        for (name, prompt) in [("pdf", md), ("notes", Prompt::prompt_md("NOTES BODY"))] {
            let skill = Skill::new(name.into(), dir.path().join(name), prompt, serde_json::json!({}));
            set.skills.insert(name.into(), std::sync::Arc::new(skill));
        }
        let on_demand = OnDemand::new(&set, |_| crate::config::Loading::OnDemand, &[]);
        let listed = system_prompt("Bot.", &set, &on_demand, &BTreeSet::new(), dir.path(), &|_| false);
        assert!(listed.starts_with("Bot.\n\nNOTES BODY\n\n# Skills to load\n"), "{listed}");
        let line = format!("- `pdf`: Reads PDFs. (folder: {})", dir.path().join("pdf").display());
        assert!(listed.contains(&line) && !listed.contains("PDF BODY"), "{listed}");
        let carried =
            system_prompt("Bot.", &set, &on_demand, &BTreeSet::from(["pdf".to_owned()]), dir.path(), &|_| false);
        assert!(carried.ends_with("# Skill `pdf` (loaded earlier in this conversation)\n\nPDF BODY"), "{carried}");
        let always = OnDemand::new(&set, |_| crate::config::Loading::Always, &[]);
        let injected = system_prompt("Bot.", &set, &always, &BTreeSet::new(), dir.path(), &|_| false);
        assert_eq!(injected, "Bot.\n\nNOTES BODY\n\nPDF BODY");
    }
}
