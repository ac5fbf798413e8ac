//! The names tools have over MCP: `<skill>__<tool>`, as the model sees them, or the tool's
//! own name for a skill whose `skill.toml` says `[mcp] names = "bare"` (the loader refuses
//! two skills serving one bare name).

use crate::skills::SkillSet;
use crate::skills::manifest::McpNames;
use crate::skills::skill::{SEPARATOR, split_exposed};

/// The bare name an MCP client sees for the tool the model knows as `exposed`, when its skill
/// serves bare names; `None`: the client sees `exposed`.
pub(super) fn bare<'a>(skills: &SkillSet, exposed: &'a str) -> Option<&'a str> {
    let (skill, tool) = split_exposed(exposed)?;
    let skill = skills.skills.get(skill)?;
    let serves = skill.mcp_names == McpNames::Bare && (skill.tool(tool).is_some() || skill.script(tool).is_some());
    serves.then_some(tool)
}

/// The name the model knows for the tool an MCP client calls `served`, when that is a bare
/// skill's tool; `None`: `served` is the model's name already (or no tool's).
pub(super) fn exposed(skills: &SkillSet, served: &str) -> Option<String> {
    // Tool names have no `__`: a name with one is the model's already (every `tools/call`).
    if served.contains(SEPARATOR) {
        return None;
    }
    let mut bare = skills.skills.values().filter(|s| s.mcp_names == McpNames::Bare);
    let skill = bare.find(|s| s.tool(served).is_some() || s.script(served).is_some())?;
    Some(format!("{}{SEPARATOR}{served}", skill.name))
}
