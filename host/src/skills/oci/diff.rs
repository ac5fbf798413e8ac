//! What a skill asks for, and what a new version asks for that the old one did not
//! (`skill diff`); what a digest-pinned grant does not cover.

use crate::config::Grant;
use crate::skills::{Manifest, Skill};
use crate::store::state::StateScope;
use std::collections::{BTreeMap, BTreeSet};

/// Every capability `manifest` (and the loaded `skill`, for its MCP servers) asks for, one
/// line each: `memory`, `http host <h>`, `environment variable <NAME>`, `notify`,
/// `files: its own folder`, `state: the skill's own`, `mcp server <name>`,
/// `schedule: every <t>`.
pub fn asked(manifest: &Manifest, skill: Option<&Skill>) -> BTreeSet<String> {
    let caps = &manifest.capabilities;
    let mut asked = BTreeSet::new();
    if caps.memory {
        asked.insert("memory".to_string());
    }
    asked.extend(caps.http_hosts.iter().map(|h| format!("http host {h}")));
    asked.extend(caps.env.iter().map(|v| format!("environment variable {v}")));
    if caps.notify {
        asked.insert("notify".into());
    }
    if caps.files.is_some() {
        asked.insert("files: its own folder".into());
    }
    if caps.state == StateScope::Skill {
        asked.insert("state: the skill's own (every conversation's)".into());
    }
    if let Some(schedule) = manifest.schedule {
        asked.insert(format!("schedule: every {}", schedule.every));
    }
    if let Some(skill) = skill {
        asked.extend(skill.facts.mcp_servers.iter().map(|s| format!("mcp server {s}")));
    }
    asked
}

/// What `manifest` asks for that `grant` does not name: each capability, one line.
pub fn beyond_grant(manifest: &Manifest, grant: &Grant) -> Vec<String> {
    let caps = &manifest.capabilities;
    let mut beyond = Vec::new();
    if caps.memory && !grant.memory {
        beyond.push("memory".to_string());
    }
    let any_host = grant.http_hosts.iter().any(|h| h == "*");
    for host in &caps.http_hosts {
        let named = grant.http_hosts.contains(host) || any_host || (host == "*" && !grant.http_hosts.is_empty());
        if !named {
            beyond.push(format!("http host {host}"));
        }
    }
    beyond.extend(caps.env.iter().filter(|v| !grant.env.contains(v)).map(|v| format!("environment variable {v}")));
    if caps.notify && grant.notify.is_empty() {
        beyond.push("notify".into());
    }
    beyond
}

/// A skill's tools with their approval levels, by exposed name.
fn levels(skill: &Skill) -> BTreeMap<String, String> {
    let tools = skill.tools.iter().chain(skill.scripts.iter().map(|s| &s.spec));
    tools.map(|t| (t.name.clone(), t.approval_name().to_string())).collect()
}

/// What changed from `old` to `new`, as lines: `+ tool x`, `- tool y`, `~ tool z: approval
/// a -> b`, `+ asks: ...`, `- asks: ...`. Empty when nothing an operator grants or approves
/// changed.
pub fn diff(old: (&Skill, &Manifest), new: (&Skill, &Manifest)) -> Vec<String> {
    let (old_tools, new_tools) = (levels(old.0), levels(new.0));
    let mut lines = Vec::new();
    for (tool, level) in &new_tools {
        match old_tools.get(tool) {
            None => lines.push(format!("+ tool {tool} [approval: {level}]")),
            Some(was) if was != level => lines.push(format!("~ tool {tool}: approval {was} -> {level}")),
            Some(_) => {}
        }
    }
    lines.extend(old_tools.keys().filter(|t| !new_tools.contains_key(*t)).map(|t| format!("- tool {t}")));
    let (old_asks, new_asks) = (asked(old.1, Some(old.0)), asked(new.1, Some(new.0)));
    lines.extend(new_asks.difference(&old_asks).map(|a| format!("+ asks: {a}")));
    lines.extend(old_asks.difference(&new_asks).map(|a| format!("- asks: {a}")));
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_grant_covers_only_what_it_names() {
        let manifest = Manifest::parse(
            "[capabilities]\nmemory = true\nhttp_hosts = [\"api.example.com\", \"b.example.com\"]\nenv = [\"TOKEN\"]\n",
        )
        .unwrap();
        let grant = Grant { http_hosts: vec!["api.example.com".into()], env: vec!["TOKEN".into()], ..Grant::default() };
        assert_eq!(beyond_grant(&manifest, &grant), ["memory", "http host b.example.com"]);
        let all = Grant { memory: true, http_hosts: vec!["*".into()], env: vec!["TOKEN".into()], ..Grant::default() };
        assert!(beyond_grant(&manifest, &all).is_empty());
        let asked = asked(&manifest, None);
        assert!(asked.contains("environment variable TOKEN") && asked.contains("memory"), "{asked:?}");
    }
}
