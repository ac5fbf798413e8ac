//! Names the operator writes in config that must name something this process has: a skill
//! (`skills.config`, `skills.grants`, `skills.allowed`, `skills.loading_overrides`) or a
//! tool (`human.overrides`, `engine.tool_budget.tools`, `engine.temporal_guardrails`,
//! `mcp_servers.<name>.slack_posting_tools`). A name
//! that matches nothing is a typo or a leftover, and the setting is inert: each one is
//! reported, as a warning, or as an error under `skills.strict` / `--strict`.
//!
//! A name is checked against everything found, not only what one agent loaded: a skill left
//! out by `is-available` or by an agent's `allowed` list is real. The tools of an MCP server
//! whose list is not known (down, still connecting, or not started in this command) cannot
//! be checked: names under its prefix, and bare tool names while any such server exists,
//! are let through.

use crate::config::{Config, TemporalGuardrails};
use crate::mcp::{McpManager, Status};
use crate::skills::SkillSet;
use crate::skills::skill::{SEPARATOR, split_exposed};
use crate::tools::Tools;
use std::collections::BTreeSet;

/// What the process has, to check names against.
#[derive(Debug, Default)]
pub struct Known {
    /// Skills found: loaded, left out, or failed to load (reported on their own).
    skills: BTreeSet<String>,
    /// MCP servers configured.
    servers: BTreeSet<String>,
    /// Every exposed tool name: skills', script tools, MCP tools as offered and as
    /// `server__tool`.
    tools: BTreeSet<String>,
    /// The names an MCP tool is known by: as offered, as `server__tool`, and bare.
    mcp_tools: BTreeSet<String>,
    /// Configured MCP servers whose tools are not known.
    unknown_servers: BTreeSet<String>,
}

impl Known {
    /// Nothing yet but the configured MCP servers, whose tools are unknown until
    /// [`Known::add_mcp`] says otherwise.
    pub fn new(config: &Config) -> Self {
        let servers: BTreeSet<String> = config.mcp_servers.keys().cloned().collect();
        Known { unknown_servers: servers.clone(), servers, ..Default::default() }
    }

    /// Adds one agent's skills (and the tools of its sources, when built).
    pub fn add(&mut self, set: &SkillSet, tools: Option<&Tools>) {
        for skill in set.skills.values() {
            self.skills.insert(skill.name.clone());
            self.tools.extend(skill.exposed_names());
        }
        for (name, tools) in &set.left_out {
            self.skills.insert(name.clone());
            self.tools.extend(tools.iter().cloned());
        }
        self.skills.extend(set.problems.iter().map(|p| p.skill.clone()));
        // A declared tool's grants are written under its tool name (`declared__weather`).
        for tool in &set.declared.tools {
            self.skills.insert(tool.spec.full_name.clone());
            self.tools.insert(tool.spec.full_name.clone());
        }
        if let Some(tools) = tools {
            self.tools.extend(tools.decls().into_iter().map(|d| d.name));
        }
    }

    /// Adds the tools of every MCP server that is connected.
    pub fn add_mcp(&mut self, mcp: &McpManager) {
        for server in self.servers.clone() {
            if mcp.status(&server) != Some(Status::Ready) {
                continue;
            }
            self.unknown_servers.remove(&server);
            for tool in mcp.tools(&server) {
                let direct = format!("{server}{SEPARATOR}{}", tool.name);
                self.mcp_tools.insert(tool.name.to_string());
                self.mcp_tools.insert(direct.clone());
                self.tools.insert(direct);
            }
        }
        // The names MCP tools are offered under (a skill's `mcp-tools` aliases).
        let aliases: Vec<String> = self.tools.iter().filter(|t| !self.mcp_tools.contains(*t)).cloned().collect();
        for alias in aliases {
            if let Some((_, tool)) = split_exposed(&alias)
                && self.mcp_tools.contains(tool)
            {
                self.mcp_tools.insert(alias);
            }
        }
    }

    /// Whether `name` (prefixed or bare) may name a tool of a server whose tools are unknown.
    fn maybe_unlisted(&self, name: &str) -> bool {
        match split_exposed(name) {
            Some((prefix, _)) => self.unknown_servers.contains(prefix),
            None => !self.unknown_servers.is_empty(),
        }
    }
}

/// The names in `config` (the top-level one, with every agent) that match nothing in `known`,
/// one line each, naming the key and, where one is close, what it may have meant.
pub fn unmatched(config: &Config, known: &Known) -> Vec<String> {
    let mut found = BTreeSet::new();
    let top = &config.skills;
    let agent_skills =
        config.agents.iter().filter_map(|(n, a)| Some((format!("agents.{n}.skills"), a.skills.as_ref()?)));
    for (at, skills) in std::iter::once(("skills".to_owned(), top)).chain(agent_skills) {
        // An agent's block holds the top-level keys too (merged): those are reported once, as
        // the top level's.
        let own = |name: &String, top: &dyn Fn(&String) -> bool| at == "skills" || !top(name);
        let keys = [
            ("config", skills.config.keys().filter(|k| own(k, &|k| top.config.contains_key(k))).collect::<Vec<_>>()),
            ("grants", skills.grants.keys().filter(|k| own(k, &|k| top.grants.contains_key(k))).collect()),
            (
                "loading_overrides",
                skills
                    .loading_overrides
                    .keys()
                    .filter(|k| own(k, &|k| top.loading_overrides.contains_key(k)))
                    .collect(),
            ),
        ];
        for (key, names) in keys {
            for name in names.into_iter().filter(|name| !known.skills.contains(*name)) {
                found.insert(format!(
                    "{at}.{key} names `{name}`, which is not a skill here{}",
                    hint(name, &known.skills)
                ));
            }
        }
        let inherited = |name: &String| top.allowed.as_ref().is_some_and(|a| a.contains(name));
        for name in skills.allowed.iter().flatten().filter(|n| own(n, &inherited)) {
            if !known.skills.contains(name) && !known.servers.contains(name) {
                let candidates: BTreeSet<String> = known.skills.union(&known.servers).cloned().collect();
                found.insert(format!(
                    "{at}.allowed names `{name}`, which is neither a skill nor an MCP server here{}",
                    hint(name, &candidates)
                ));
            }
        }
    }
    for name in config.human.overrides.keys() {
        if !known.tools.contains(name) && !known.maybe_unlisted(name) {
            found.insert(format!(
                "human.overrides names `{name}`, which is not a tool here{}: its level applies to nothing",
                hint(name, &known.tools)
            ));
        }
    }
    let budget = [("tool_budget", &config.engine.tool_budget), ("log_tool_budget", &config.engine.log_tool_budget)];
    for (key, budget) in budget.iter().filter_map(|(k, b)| Some((k, b.as_ref()?))) {
        let bare: BTreeSet<String> =
            known.tools.iter().filter_map(|t| split_exposed(t)).map(|(_, t)| t.into()).collect();
        for name in &budget.tools {
            if !known.tools.contains(name) && !bare.contains(name) && !known.maybe_unlisted(name) {
                let candidates: BTreeSet<String> = known.tools.union(&bare).cloned().collect();
                found.insert(format!(
                    "engine.{key}.tools names `{name}`, which is not a tool here{}: it is never budgeted",
                    hint(name, &candidates)
                ));
            }
        }
    }
    for (key, name) in temporal_names(&config.engine.temporal_guardrails) {
        if !known.mcp_tools.contains(name) && !known.maybe_unlisted(name) {
            found.insert(format!(
                "engine.temporal_guardrails.{key} names `{name}`, which is not an MCP tool here{}: \
                 the guardrails apply to MCP tools only",
                hint(name, &known.mcp_tools)
            ));
        }
    }
    for (server, settings) in &config.mcp_servers {
        for tool in settings.slack_posting_tools() {
            let name = format!("{server}{SEPARATOR}{tool}");
            if !known.tools.contains(&name) && !known.maybe_unlisted(&name) {
                found.insert(format!(
                    "mcp_servers.{server}.slack_posting_tools names `{tool}`, which server `{server}` does not list{}: \
                     it is never guarded",
                    hint(&name, &known.tools)
                ));
            }
        }
    }
    found.into_iter().collect()
}

/// Whether `config` (the top level, or any agent's merged `skills` block) is strict.
pub fn strict(config: &Config) -> bool {
    config.skills.strict || config.agents.values().any(|a| a.skills.as_ref().is_some_and(|s| s.strict))
}

/// Prints each unmatched name as a warning on stderr, as the commands print their other
/// warnings; under `strict`, refuses them all in one error.
pub fn report(unmatched: Vec<String>, strict: bool) -> anyhow::Result<()> {
    if strict && !unmatched.is_empty() {
        anyhow::bail!(
            "skills.strict: {} name(s) in config match nothing here:\n  {}",
            unmatched.len(),
            unmatched.join("\n  ")
        );
    }
    for line in unmatched {
        eprintln!("warning: {line}");
    }
    Ok(())
}

fn temporal_names(g: &TemporalGuardrails) -> impl Iterator<Item = (&'static str, &String)> {
    let tools = g.tools.iter().map(|t| ("tools", t));
    let profiles = g.tool_profiles.keys().map(|t| ("tool_profiles", t));
    tools.chain(profiles).chain(g.attribute_discovery_tools.iter().map(|t| ("attribute_discovery_tools", t)))
}

/// ` (did you mean `x`?)` for the closest of `candidates`, when one is close.
fn hint(name: &str, candidates: &BTreeSet<String>) -> String {
    let close = candidates
        .iter()
        .map(|c| (distance(name, c), c))
        .filter(|(d, c)| *d <= 2.max(name.len().min(c.len()) / 4))
        .min_by_key(|(d, _)| *d);
    match close {
        Some((_, c)) => format!(" (did you mean `{c}`?)"),
        None => String::new(),
    }
}

/// The edit distance between `a` and `b` (insertions, deletions, substitutions).
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1).min(row[j] + 1).min(diagonal + usize::from(ca != *cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::parse;

    fn known(skills: &[&str], tools: &[&str], servers: &[&str]) -> Known {
        let mut known = Known { servers: servers.iter().map(|s| s.to_string()).collect(), ..Default::default() };
        known.skills = skills.iter().map(|s| s.to_string()).collect();
        known.tools = tools.iter().map(|s| s.to_string()).collect();
        known
    }

    #[test]
    fn each_kind_of_name_is_checked_against_what_it_names() {
        let yaml = "human:\n  overrides: {shel__run_command: confirm, shell__run_command: approve}\n\
                    skills:\n  config: {memroy: {}}\n  grants: {http_checker: {memory: true}, ghost: {}}\n\
                    \x20 allowed: [shell, obs, nothing]\n  loading_overrides: {pdf: always}\n\
                    engine:\n  tool_budget: {tools: [run_command, get_logz]}\n\
                    \x20 temporal_guardrails: {tools: [run_command]}\n\
                    mcp_servers:\n  obs: {transport: stdio, command: x}\n";
        let (config, _) = parse(yaml, |_| None).unwrap();
        let mut k = known(&["shell", "memory", "http_checker"], &["shell__run_command", "memory__read"], &["obs"]);
        k.mcp_tools = ["get_logs", "obs__get_logs"].into_iter().map(String::from).collect();
        k.tools.insert("obs__get_logs".into());
        let found = unmatched(&config, &k);
        let expected = [
            "engine.temporal_guardrails.tools names `run_command`, which is not an MCP tool here: the guardrails apply to MCP tools only",
            "engine.tool_budget.tools names `get_logz`, which is not a tool here (did you mean `get_logs`?): it is never budgeted",
            "human.overrides names `shel__run_command`, which is not a tool here (did you mean `shell__run_command`?): its level applies to nothing",
            "skills.allowed names `nothing`, which is neither a skill nor an MCP server here",
            "skills.config names `memroy`, which is not a skill here (did you mean `memory`?)",
            "skills.grants names `ghost`, which is not a skill here",
            "skills.loading_overrides names `pdf`, which is not a skill here",
        ];
        assert_eq!(found, expected);
    }

    #[test]
    fn names_under_a_server_whose_tools_are_unknown_pass() {
        let yaml = "human:\n  overrides: {obs__anything: approve}\nengine:\n  tool_budget: {tools: [get_logs]}\n\
                    \x20 temporal_guardrails: {tools: [get_traces]}\nmcp_servers:\n  obs: {transport: stdio, command: x}\n";
        let (config, _) = parse(yaml, |_| None).unwrap();
        let mut k = known(&[], &[], &["obs"]);
        k.unknown_servers.insert("obs".into());
        assert_eq!(unmatched(&config, &k), Vec::<String>::new());
    }

    #[test]
    fn agents_own_keys_are_checked_with_their_agent_named() {
        let yaml = "agents:\n  a:\n    skills: {allowed: [shel], grants: {memory: {memory: true}}}\n";
        let (config, _) = parse(yaml, |_| None).unwrap();
        let found = unmatched(&config, &known(&["shell", "memory"], &[], &[]));
        assert_eq!(
            found,
            [
                "agents.a.skills.allowed names `shel`, which is neither a skill nor an MCP server here (did you mean `shell`?)"
            ]
        );
    }

    #[test]
    fn slack_posting_tools_must_be_the_servers_tools() {
        let yaml = "mcp_servers:\n  poster: {transport: stdio, command: x, slack_posting_tools: [post_mesage, read_history]}\n\
                    \x20 later: {transport: stdio, command: y, slack_posting_tools: [anything]}\n";
        let (config, _) = parse(yaml, |_| None).unwrap();
        let mut k = known(&[], &["poster__post_message", "poster__read_history"], &["poster", "later"]);
        k.unknown_servers.insert("later".into());
        assert_eq!(
            unmatched(&config, &k),
            ["mcp_servers.poster.slack_posting_tools names `post_mesage`, which server `poster` does not list \
                 (did you mean `poster__post_message`?): it is never guarded"]
        );
    }

    #[test]
    fn distance_counts_edits() {
        assert_eq!(distance("shel", "shell"), 1);
        assert_eq!(distance("kitten", "sitting"), 3);
        assert_eq!(distance("", "abc"), 3);
    }
}
