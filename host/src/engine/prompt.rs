//! The system prompt, assembled in the spec's order: `bot.system_prompt`, then the loaded
//! skills' prompts (by skill name; an on-demand `SKILL.md` skill only by name, description
//! and folder, see [`crate::tools::load_skill`]), then `MEMORY.md` from the memory root.

use crate::skills::SkillSet;
use crate::store::MemoryStore;
use crate::tools::{LOAD_SKILL, OnDemand};
use std::collections::BTreeSet;

/// The memory file injected into every conversation.
pub const MEMORY_FILE: &str = "MEMORY.md";

/// The heading of the on-demand skills' list.
pub const SKILLS_TO_LOAD: &str = "# Skills to load";

/// Builds the system prompt. Empty parts are skipped, so no blank sections reach the model.
/// Skills in `on_demand` are listed, not injected, except those in `carried`: loaded in
/// this conversation, but their load is no longer in the history sent. Skills `left_out`
/// (sub-agents: their body is another turn's prompt) are neither. `memory`: `MEMORY.md`'s
/// text ([`read_memory`]).
pub fn system_prompt(
    bot_prompt: &str,
    skills: &SkillSet,
    on_demand: &OnDemand,
    carried: &BTreeSet<String>,
    memory: Option<&str>,
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
    if let Some(memory) = memory {
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
    let served = match on_demand.listed().any(|s| s.remote.is_some()) {
        true => format!(" Those of a skill an MCP server serves are read with `{LOAD_SKILL}` and its `file`."),
        false => String::new(),
    };
    let mut text = format!(
        "{SKILLS_TO_LOAD}\n\nBefore you act on a request one of these skills covers, call `{LOAD_SKILL}` with its name: \
         you get its instructions (and its tools, if it has any) for the rest of the conversation. Each skill's files \
         are in its folder.{served}\n"
    );
    for skill in on_demand.listed() {
        let description = skill.description.split_whitespace().collect::<Vec<_>>().join(" ");
        let from = match &skill.remote {
            Some(remote) => format!("served by MCP server `{}`", remote.server),
            None => format!("folder: {}", skill.dir.display()),
        };
        text.push_str(&format!("\n- `{}`: {description} ({from})", skill.name));
    }
    text
}

/// `MEMORY.md`'s trimmed text, or `None` when it is missing, unreadable or empty. Read on
/// every turn, not cached: skills write memory during a conversation (on any replica) and
/// the next turn must see it.
pub async fn read_memory(memory: &MemoryStore) -> Option<String> {
    match memory.read(MEMORY_FILE).await {
        Ok(Some(text)) if !text.trim().is_empty() => Some(text.trim().to_owned()),
        Ok(_) => None,
        Err(e) => {
            // A broken memory file must not stop the conversation; say so in the log.
            tracing::warn!("cannot read {MEMORY_FILE} in {}: {e}", memory.describe());
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn bot_prompt_then_memory_and_empty_parts_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let (set, none, memory) = (SkillSet::default(), OnDemand::default(), MemoryStore::new(dir.path()));
        let prompt = |bot: &str, memory: Option<String>| {
            system_prompt(bot, &set, &none, &BTreeSet::new(), memory.as_deref(), &|_| false)
        };
        assert_eq!(prompt(" Be brief. ", read_memory(&memory).await), "Be brief.");
        std::fs::write(dir.path().join(MEMORY_FILE), "\n").unwrap();
        assert_eq!(prompt("Be brief.", read_memory(&memory).await), "Be brief.");
        std::fs::write(dir.path().join(MEMORY_FILE), "The sky is blue.\n").unwrap();
        assert_eq!(prompt("", read_memory(&memory).await), "# Memory (MEMORY.md)\n\nThe sky is blue.");
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
        let listed = system_prompt("Bot.", &set, &on_demand, &BTreeSet::new(), None, &|_| false);
        assert!(listed.starts_with("Bot.\n\nNOTES BODY\n\n# Skills to load\n"), "{listed}");
        let line = format!("- `pdf`: Reads PDFs. (folder: {})", dir.path().join("pdf").display());
        assert!(listed.contains(&line) && !listed.contains("PDF BODY"), "{listed}");
        let carried = system_prompt("Bot.", &set, &on_demand, &BTreeSet::from(["pdf".to_owned()]), None, &|_| false);
        assert!(carried.ends_with("# Skill `pdf` (loaded earlier in this conversation)\n\nPDF BODY"), "{carried}");
        let always = OnDemand::new(&set, |_| crate::config::Loading::Always, &[]);
        let injected = system_prompt("Bot.", &set, &always, &BTreeSet::new(), None, &|_| false);
        assert_eq!(injected, "Bot.\n\nNOTES BODY\n\nPDF BODY");
    }
}
