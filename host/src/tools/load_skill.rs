//! `load_skill`, the built-in tool of on-demand `SKILL.md` skills (`skills.loading`).
//!
//! The system prompt lists an on-demand skill's name, description and folder; its body
//! reaches the model as the result of a `load_skill` call, and its tools (every
//! `<skill>__<tool>` name, whichever source offers it) are withheld until then. A call of a
//! withheld tool is answered at once with an error telling the model to load the skill.
//!
//! Skills MCP servers serve (`mcp_servers.<name>.skills: true`) join the list each turn as
//! `<server>/<skill>` ([`super::remote_skills`]): their instructions are fetched and verified
//! when they load, and each of their files when the model reads it (`load_skill`'s `file`).
//!
//! A [`LoadSkill`] is made per turn with the conversation's loaded skills; the engine keeps
//! them across turns. The name has no `__`, so no skill's, server's or adapter's tool
//! (`<prefix>__<tool>`) can take it.

use super::remote_skills::{Remote, RemoteSkills};
use super::{CallScope, Level, PromotionKey, ToolCall, ToolInfo, ToolOutcome, ToolSource};
use crate::config::Loading;
use crate::llm::{Block, Message, ToolDecl};
use crate::mcp::skills::Refused;
use crate::skills::SkillSet;
use crate::skills::skill::split_exposed;
use parking_lot::Mutex;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The built-in tool's name.
pub const LOAD_SKILL: &str = "load_skill";

/// One on-demand skill as the system prompt lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct Listed {
    /// The skill's name (what `load_skill` takes).
    pub name: String,
    /// SKILL.md's `description`.
    pub description: String,
    /// Its folder, where its reference files are.
    pub dir: PathBuf,
    /// What loading it returns: the body and its reference files.
    pub text: String,
    /// The tools of it offered when the engine was built (`<skill>__<tool>`).
    pub tools: Vec<String>,
    /// Its component was still compiling when the engine was given this list: loading it
    /// waits until it joins ([`CallScope::join_skill`]).
    pub pending: bool,
    /// Served by an MCP server (`None`: a local skill): `text` is fetched when it loads.
    pub remote: Option<Remote>,
}

impl Listed {
    /// A skill an MCP server serves, listed as `name` (`<server>/<skill>`).
    pub fn remote(name: String, description: String, remote: Remote) -> Self {
        let (dir, text, tools) = (PathBuf::new(), String::new(), Vec::new());
        Listed { name, description, dir, text, tools, pending: false, remote: Some(remote) }
    }
}

/// The on-demand skills of one agent, by name.
#[derive(Debug, Clone, Default)]
pub struct OnDemand {
    skills: BTreeMap<String, Listed>,
    /// Skills of MCP servers refused this turn, with why (for the model that asks for one).
    refused: BTreeMap<String, String>,
    /// The servers whose skills join the list each turn ([`OnDemand::for_turn`]).
    remote: Option<Arc<RemoteSkills>>,
}

impl OnDemand {
    /// The skills of `set` that load on demand (`SKILL.md` skills whose `loading_of` is
    /// `on_demand`), with the names among `offered` that are theirs.
    pub fn new(set: &SkillSet, loading_of: impl Fn(&str) -> Loading, offered: &[ToolDecl]) -> Self {
        let on_demand =
            set.skills.values().filter(|s| is_skill_md(&s.prompt) && loading_of(&s.name) == Loading::OnDemand);
        let mut skills: BTreeMap<String, Listed> = on_demand
            .map(|skill| {
                let tools =
                    offered.iter().filter(|d| owner_prefix(&d.name) == Some(&skill.name)).map(|d| d.name.clone());
                let listed = Listed {
                    name: skill.name.clone(),
                    description: skill.prompt.description.clone(),
                    dir: skill.dir.clone(),
                    text: skill.prompt.system_text(&skill.dir),
                    tools: tools.collect(),
                    pending: false,
                    remote: None,
                };
                (skill.name.clone(), listed)
            })
            .collect();
        // Those still compiling are listed from their `SKILL.md` alone, tools to come.
        let compiling = set.pending_prompts.iter().filter(|p| loading_of(&p.name) == Loading::OnDemand);
        for pending in compiling {
            let listed = Listed {
                name: pending.name.clone(),
                description: pending.prompt.description.clone(),
                dir: pending.dir.clone(),
                text: pending.prompt.system_text(&pending.dir),
                tools: Vec::new(),
                pending: true,
                remote: None,
            };
            skills.entry(pending.name.clone()).or_insert(listed);
        }
        OnDemand { skills, ..OnDemand::default() }
    }

    /// The same list, with the skills of `remote`'s servers joining it each turn.
    pub fn with_remote(self, remote: Option<Arc<RemoteSkills>>) -> Self {
        OnDemand { remote, ..self }
    }

    /// The list of one turn: this one, with the skills the servers serve now.
    pub async fn for_turn(this: &Arc<Self>) -> Arc<Self> {
        let Some(remote) = &this.remote else { return this.clone() };
        let listing = remote.list().await;
        let mut turn = OnDemand::clone(this);
        for listed in listing.listed {
            turn.skills.entry(listed.name.clone()).or_insert(listed);
        }
        turn.refused = listing.refused;
        Arc::new(turn)
    }

    /// Fetches the instructions of the served skills among `carried` (the system prompt
    /// carries their text); one that cannot be fetched says so instead.
    pub async fn fetch_carried(this: &mut Arc<Self>, carried: &BTreeSet<String>) {
        let Some(source) = this.remote.clone() else { return };
        let remotes: Vec<(String, Remote)> =
            carried.iter().filter_map(|name| Some((name.clone(), this.skills.get(name)?.remote.clone()?))).collect();
        for (name, remote) in remotes {
            let text = source.instructions(&name, &remote).await.unwrap_or_else(|why| {
                format!("(Its instructions could not be fetched again: {why}. Load it again with `{LOAD_SKILL}`.)")
            });
            if let Some(listed) = Arc::make_mut(this).skills.get_mut(&name) {
                listed.text = text;
            }
        }
    }

    /// The on-demand skills still compiling when this list was made: a turn does not wait
    /// for them unless it loads one.
    pub fn compiling(&self) -> impl Iterator<Item = &str> {
        self.skills.values().filter(|s| s.pending).map(|s| s.name.as_str())
    }

    /// Whether no skill loads on demand (then there is no `load_skill`).
    pub fn is_empty(&self) -> bool {
        self.skills.is_empty()
    }

    /// Whether the skill called `name` loads on demand (its prompt is not injected).
    pub fn contains(&self, name: &str) -> bool {
        self.skills.contains_key(name)
    }

    /// The skill called `name`, if it loads on demand.
    pub fn get(&self, name: &str) -> Option<&Listed> {
        self.skills.get(name)
    }

    /// Every on-demand skill, by name.
    pub fn listed(&self) -> impl Iterator<Item = &Listed> {
        self.skills.values()
    }

    /// The on-demand skill a tool name belongs to.
    fn owner<'a>(&self, tool: &'a str) -> Option<&'a str> {
        owner_prefix(tool).filter(|skill| self.skills.contains_key(*skill))
    }

    /// The on-demand skills `messages` hold a successful `load_skill` call of.
    pub fn loaded_in(&self, messages: &[Message]) -> BTreeSet<String> {
        let blocks = || messages.iter().flat_map(|m| m.content.iter());
        let succeeded: BTreeSet<&str> = blocks()
            .filter_map(|b| match b {
                Block::ToolResult { tool_use_id, is_error: false, .. } => Some(tool_use_id.as_str()),
                _ => None,
            })
            .collect();
        let loads = blocks().filter_map(|b| match b {
            Block::ToolUse { id, name, input } if name == LOAD_SKILL && succeeded.contains(id.as_str()) => {
                input.get("skill").and_then(Value::as_str)
            }
            _ => None,
        });
        loads.filter(|s| self.skills.contains_key(*s)).map(str::to_owned).collect()
    }
}

fn is_skill_md(prompt: &crate::skills::prompt::Prompt) -> bool {
    prompt.file == "SKILL.md"
}

fn owner_prefix(tool: &str) -> Option<&str> {
    split_exposed(tool).map(|(prefix, _)| prefix)
}

/// Checks `skills.loading_overrides` against the loaded skills: `on_demand` or `sub_agent`
/// for a skill without a `SKILL.md` is an error (it has no description to list). Names no loaded skill
/// has are the app's to report (`app::names`), with every other name in config.
pub fn check_overrides(set: &SkillSet, overrides: &BTreeMap<String, Loading>) -> Result<(), String> {
    for (name, loading) in overrides {
        match set.skills.get(name) {
            Some(skill) if *loading == Loading::OnDemand && !is_skill_md(&skill.prompt) => {
                return Err(format!(
                    "skills.loading_overrides.{name}: `on_demand` needs a SKILL.md (its description is what the \
                     model reads before loading it); `{name}` has a {}, which is always injected",
                    skill.prompt.file
                ));
            }
            Some(skill) if *loading == Loading::SubAgent && !is_skill_md(&skill.prompt) => {
                return Err(format!(
                    "skills.loading_overrides.{name}: `sub_agent` needs a SKILL.md (its description describes \
                     the `{name}__run` tool, its body is the sub-agent's prompt); `{name}` has a {}",
                    skill.prompt.file
                ));
            }
            _ => {}
        }
    }
    Ok(())
}

/// `load_skill` for one turn: the conversation's loaded skills, and the tools it withholds.
pub struct LoadSkill {
    catalog: Arc<OnDemand>,
    loaded: Mutex<BTreeSet<String>>,
}

impl LoadSkill {
    /// The tool over `catalog` with `loaded` already loaded (names not in it are dropped).
    pub fn new(catalog: Arc<OnDemand>, loaded: BTreeSet<String>) -> Self {
        let loaded = loaded.into_iter().filter(|s| catalog.contains(s)).collect();
        LoadSkill { catalog, loaded: Mutex::new(loaded) }
    }

    /// The skills loaded now.
    pub fn loaded(&self) -> BTreeSet<String> {
        self.loaded.lock().clone()
    }

    fn is_loaded(&self, skill: &str) -> bool {
        self.loaded.lock().contains(skill)
    }

    /// The on-demand skill of `name` that is not loaded yet, if `name` is one of its tools.
    fn withheld_by<'a>(&self, name: &'a str) -> Option<&'a str> {
        self.catalog.owner(name).filter(|skill| !self.is_loaded(skill))
    }

    /// The skill a `load_skill` input names, or the error the model reads.
    fn requested<'a>(&'a self, input: &Value) -> Result<&'a Listed, ToolOutcome> {
        let names = || self.catalog.skills.keys().map(|s| format!("`{s}`")).collect::<Vec<_>>().join(", ");
        let Some(skill) = input.get("skill").and_then(Value::as_str) else {
            return Err(error(
                format!("give the skill's name as {{\"skill\": NAME}}; skills to load: {}", names()),
                "invalid_input",
            ));
        };
        self.catalog.get(skill).ok_or_else(|| match self.catalog.refused.get(skill) {
            Some(why) => error(why.clone(), "skill_refused"),
            None => error(format!("no skill `{skill}` to load; skills to load: {}", names()), "unknown_skill"),
        })
    }

    /// Loads a skill an MCP server serves (its verified instructions), or reads one of its
    /// files (`file`).
    async fn load_remote(&self, skill: &Listed, remote: &Remote, file: Option<&str>) -> Result<String, ToolOutcome> {
        let refused = |why: Refused| error(why.to_string(), "skill_refused");
        let Some(source) = &self.catalog.remote else {
            return Err(error(format!("skill `{}` is no longer served", skill.name), "unknown_skill"));
        };
        if let Some(path) = file {
            return source.file(&skill.name, remote, path).await.map_err(refused);
        }
        let text = source.instructions(&skill.name, remote).await.map_err(refused)?;
        self.loaded.lock().insert(skill.name.clone());
        Ok(loaded_text(&Listed { text, ..skill.clone() }))
    }
}

fn error(message: String, kind: &str) -> ToolOutcome {
    ToolOutcome::error(&json!({"error": message, "kind": kind}), Duration::ZERO)
}

/// The `file` a `load_skill` input names, if any.
fn file_of(input: &Value) -> Result<Option<&str>, ToolOutcome> {
    match input.get("file") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(path)) => Ok(Some(path)),
        Some(_) => Err(error("`file` must be a path (a string)".into(), "invalid_input")),
    }
}

fn not_loaded(tool: &str, skill: &str) -> ToolOutcome {
    let message = format!(
        "`{tool}` is a tool of skill `{skill}`, which is not loaded: call `{LOAD_SKILL}` with {{\"skill\": \"{skill}\"}} \
         first, read its instructions, then call the tool again"
    );
    error(message, "skill_not_loaded")
}

/// The text a load returns: the skill's instructions, then its tools.
fn loaded_text(skill: &Listed) -> String {
    let mut text =
        format!("Skill `{}` is loaded for the rest of this conversation.\n\n{}", skill.name, skill.text.trim());
    if !skill.tools.is_empty() {
        let tools: Vec<String> = skill.tools.iter().map(|t| format!("`{t}`")).collect();
        text.push_str(&format!("\n\nIts tools are offered from your next step on: {}.", tools.join(", ")));
    }
    text
}

#[async_trait::async_trait]
impl ToolSource for LoadSkill {
    fn decls(&self) -> Vec<ToolDecl> {
        let names: Vec<&String> = self.catalog.skills.keys().collect();
        let mut properties = json!({"skill": {"type": "string", "enum": names, "description": "The skill's name."}});
        if self.catalog.skills.values().any(|s| s.remote.is_some()) {
            properties["file"] = json!({
                "type": "string",
                "description": "For a skill an MCP server serves: one of its files, by the path its load lists; \
                                returns that file instead of loading the skill.",
            });
        }
        vec![ToolDecl {
            name: LOAD_SKILL.into(),
            description: "Loads one of the skills listed under \"Skills to load\" in the system prompt: returns its \
                          instructions, and offers its tools from your next step on, for the rest of the conversation. \
                          Load a skill before acting on a request it covers."
                .into(),
            input_schema: json!({
                "type": "object",
                "properties": properties,
                "required": ["skill"],
                "additionalProperties": false,
            })
            .into(),
        }]
    }

    fn kind(&self, _name: &str) -> &'static str {
        "load_skill"
    }

    fn info(&self, name: &str) -> Option<ToolInfo> {
        (name == LOAD_SKILL || self.withheld_by(name).is_some()).then(ToolInfo::default)
    }

    fn check(&self, name: &str, input: &Value) -> Result<(), ToolOutcome> {
        if name == LOAD_SKILL {
            return file_of(input).and_then(|_| self.requested(input)).map(|_| ());
        }
        match self.withheld_by(name) {
            Some(skill) => Err(not_loaded(name, skill)),
            None => Ok(()),
        }
    }

    async fn level(&self, _call: ToolCall<'_>) -> Level {
        Level::Auto // reading instructions changes nothing
    }

    fn promotion_key(&self, _name: &str, _input: &Value) -> Option<PromotionKey> {
        None
    }

    async fn execute(&self, call: ToolCall<'_>, scope: &dyn CallScope) -> ToolOutcome {
        let started = Instant::now();
        if let Some(skill) = self.withheld_by(call.name) {
            return not_loaded(call.name, skill);
        }
        let (skill, file) = match self.requested(call.input).and_then(|s| Ok((s, file_of(call.input)?))) {
            Ok(found) => found,
            Err(outcome) => return outcome,
        };
        match (&skill.remote, file) {
            (Some(remote), file) => {
                return match self.load_remote(skill, remote, file).await {
                    Ok(text) => ToolOutcome::text(text, started.elapsed()),
                    Err(outcome) => outcome,
                };
            }
            (None, Some(_)) => {
                let message = format!(
                    "`file` reads a file of a skill an MCP server serves; the files of `{}` are in its folder {}",
                    skill.name,
                    skill.dir.display()
                );
                return error(message, "invalid_input");
            }
            (None, None) => {}
        }
        // A skill still compiling when the turn began is waited for, and its tools are
        // offered once it joined.
        let text = match skill.pending {
            false => loaded_text(skill),
            true => match scope.join_skill(&skill.name).await {
                Ok(tools) => loaded_text(&Listed { tools, ..skill.clone() }),
                Err(why) => return error(why, "skill_not_ready"),
            },
        };
        self.loaded.lock().insert(skill.name.clone());
        ToolOutcome::text(text, started.elapsed())
    }

    fn withholds(&self, name: &str) -> bool {
        self.withheld_by(name).is_some()
    }
}

#[cfg(test)]
#[path = "load_skill_tests.rs"]
mod tests;
