//! Admission: how one load result joins the [`SkillSet`] (precedence by name), and the rules
//! for the names skills expose, so that no skill's tool ever shadows another's.

use super::loader::{FatalLoadError, LoadProblem, SkillSet, WASM_FILE};
use super::skill::{Skill, split_exposed};
use std::path::Path;
use std::sync::Arc;

/// A skill folder that passed the first checks, before precedence is applied.
pub(super) enum Candidate {
    /// Loaded and checked.
    Loaded(Box<Skill>),
    /// Its `is-available` said no: it removes an earlier skill of the name.
    Unavailable(String),
}

/// Why a skill did not load: a problem (the others still load) or a fatal error.
pub(super) enum Failure {
    /// Recorded; loading goes on.
    Problem(LoadProblem),
    /// Stops loading.
    Fatal(FatalLoadError),
}

/// Applies one load result to the set: a later skill of a name replaces the earlier, an
/// unavailable one removes it, a problem is recorded, a fatal error stops everything.
///
/// A skill with an exposed name that would not lead back to it is a problem, not a member.
pub(super) fn admit(
    set: &mut SkillSet,
    loaded: Result<Option<Candidate>, Failure>,
    origin: &Path,
) -> Result<(), FatalLoadError> {
    match loaded {
        Ok(Some(Candidate::Loaded(skill))) => {
            if let Err(message) = check_exposed(&skill) {
                let file = if skill.component().is_some() { skill.dir.join(WASM_FILE) } else { skill.dir.clone() };
                record(set, LoadProblem { skill: skill.name.clone(), file, message });
                return Ok(());
            }
            if let Some(old) = set.skills.get(&skill.name) {
                tracing::info!(skill = %skill.name, "{} overrides {}", origin.display(), old.dir.display());
            }
            set.left_out.remove(&skill.name);
            set.skills.insert(skill.name.clone(), Arc::new(*skill));
        }
        Ok(Some(Candidate::Unavailable(name))) => {
            tracing::info!(skill = %name, "not available here; excluded");
            let tools = set.skills.remove(&name).map(|s| s.exposed_names()).unwrap_or_default();
            set.left_out.insert(name, tools);
        }
        Ok(None) => {}
        Err(Failure::Problem(problem)) => record(set, problem),
        Err(Failure::Fatal(e)) => return Err(e),
    }
    Ok(())
}

fn record(set: &mut SkillSet, problem: LoadProblem) {
    tracing::info!("{problem}");
    set.problems.push(problem);
}

/// Every exposed name of `skill` must split back into this skill and that tool. Then no two
/// skills of different names share an exposed name (its prefix is the skill's name), and a
/// same-named skill replaces the earlier one whole, as precedence says. Valid names
/// ([`crate::config::check_name`]) make this hold by construction; the check keeps it so at
/// the one place skills enter the set.
pub(super) fn check_exposed(skill: &Skill) -> Result<(), String> {
    if let Some(twice) = skill.scripts.iter().find(|s| skill.tool(&s.spec.name).is_some()) {
        return Err(format!(
            "tool `{}` is declared twice: by the component and by SKILL.md `tools:` (script `{}`); rename one",
            twice.spec.name, twice.decl.script
        ));
    }
    for tool in skill.tools.iter().chain(skill.scripts.iter().map(|s| &s.spec)) {
        if split_exposed(&tool.full_name) != Some((skill.name.as_str(), tool.name.as_str())) {
            let owner = split_exposed(&tool.full_name).map_or("no", |(prefix, _)| prefix);
            return Err(format!(
                "tool `{}` would be exposed as `{}`, which names a tool of {owner} skill; rename the skill or the tool",
                tool.name, tool.full_name
            ));
        }
    }
    Ok(())
}

/// The longest skill name: the rest of [`super::skill::MAX_TOOL_NAME`] is for the tool.
const MAX_SKILL_NAME: usize = 40;

/// Prefixes of tools the host itself offers (`human__ask` in the API's interactive stream).
const RESERVED_NAMES: &[&str] = &["human"];

/// Skill names become tool prefixes: snake_case by [`crate::config::check_name`], and short
/// enough to leave room for a tool name.
pub(super) fn check_skill_name(name: &str) -> Result<(), String> {
    crate::config::check_name(name).map_err(|e| format!("skill name `{name}` {e}"))?;
    if name.len() > MAX_SKILL_NAME {
        return Err(format!("skill name `{name}` is longer than {MAX_SKILL_NAME} characters"));
    }
    if RESERVED_NAMES.contains(&name) {
        return Err(format!(
            "skill name `{name}` is reserved for the host's own tools (`{name}__...`); rename the skill"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::skills::ToolSpec;
    use crate::skills::contract::{Human, ToolDef};
    use crate::skills::prompt::Prompt;

    /// A prompt-only skill `skill` with one tool, its names forced past `ToolSpec::new`'s
    /// checks as a future bug could.
    fn skill_with(skill: &str, tool: &str) -> Skill {
        let def = ToolDef {
            name: "t".into(),
            description: String::new(),
            input_schema: r#"{"type": "object"}"#.into(),
            human: Human::None,
            expose_result: false,
            declares_coverage: false,
            output_schema: None,
            hints: Default::default(),
        };
        let mut spec = ToolSpec::new(skill, def).unwrap();
        spec.name = tool.into();
        spec.full_name = format!("{skill}__{tool}");
        let prompt = Prompt::default();
        let mut skill = Skill::new(skill.into(), skill.into(), prompt, serde_json::json!({}));
        skill.tools = vec![spec];
        skill
    }

    fn admit_skill(set: &mut SkillSet, skill: Skill) {
        admit(set, Ok(Some(Candidate::Loaded(Box::new(skill)))), Path::new("x")).unwrap();
    }

    #[test]
    fn a_name_that_leads_to_another_tool_is_not_admitted() {
        // The issue's pair: both are `cx___y`, which lookup splits as `cx` + `_y`.
        let mut set = SkillSet::default();
        admit_skill(&mut set, skill_with("cx_", "y"));
        assert!(set.skills.is_empty(), "cx_ is refused");
        assert!(set.problems[0].message.contains("`cx___y`"), "{}", set.problems[0]);
        admit_skill(&mut set, skill_with("cx", "_y"));
        assert_eq!(set.find_tool("cx___y").map(|(s, t)| (s.name.as_str(), t.name.as_str())), Some(("cx", "_y")));
        assert_eq!(set.problems.len(), 1);
    }

    #[test]
    fn same_named_skills_still_replace_each_other() {
        let mut set = SkillSet::default();
        admit_skill(&mut set, skill_with("ops", "a"));
        admit_skill(&mut set, skill_with("ops", "b"));
        assert!(set.problems.is_empty());
        assert!(set.find_tool("ops__a").is_none() && set.find_tool("ops__b").is_some());
    }

    #[test]
    fn skill_names_are_snake_case_short_and_not_reserved() {
        assert!(check_skill_name("http_checker").is_ok());
        for bad in ["cx_", "_cx", "a__b", "Web", "web-search", "2fa"] {
            let err = check_skill_name(bad).unwrap_err();
            assert!(err.contains(&format!("`{bad}`")) && err.contains("snake_case"), "{err}");
        }
        assert!(check_skill_name(&"a".repeat(41)).unwrap_err().contains("longer"));
        assert!(check_skill_name("human").unwrap_err().contains("reserved"));
    }
}
