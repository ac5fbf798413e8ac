//! The system prompt, assembled in the spec's order: `bot.system_prompt`, then every loaded
//! skill's prompt (by skill name), then `MEMORY.md` from the memory root.

use crate::skills::SkillSet;
use std::path::Path;

/// The memory file injected into every conversation.
pub const MEMORY_FILE: &str = "MEMORY.md";

/// Builds the system prompt. Empty parts are skipped, so no blank sections reach the model.
///
/// `MEMORY.md` is read on every call, not cached: skills write memory during a conversation
/// and the next turn must see it.
pub fn system_prompt(bot_prompt: &str, skills: &SkillSet, memory_root: &Path) -> String {
    let mut parts: Vec<String> = vec![bot_prompt.trim().to_owned()];
    parts.extend(skills.skills.values().map(|s| s.prompt.system_text(&s.dir).trim().to_owned()));
    if let Some(memory) = read_memory(memory_root) {
        parts.push(format!("# Memory ({MEMORY_FILE})\n\n{memory}"));
    }
    parts.retain(|p| !p.is_empty());
    parts.join("\n\n")
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
        let set = SkillSet::default();
        assert_eq!(system_prompt(" Be brief. ", &set, dir.path()), "Be brief.");
        std::fs::write(dir.path().join(MEMORY_FILE), "\n").unwrap();
        assert_eq!(system_prompt("Be brief.", &set, dir.path()), "Be brief.");
        std::fs::write(dir.path().join(MEMORY_FILE), "The sky is blue.\n").unwrap();
        assert_eq!(system_prompt("", &set, dir.path()), "# Memory (MEMORY.md)\n\nThe sky is blue.");
    }
}
