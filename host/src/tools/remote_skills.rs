//! Skills MCP servers serve (`mcp_servers.<name>.skills: true`, the Skills extension), as
//! on-demand skills named `<server>/<skill>`: a local skill's name has no `/`, so none is
//! ever shadowed.
//!
//! Every turn lists them anew (a server's skills change while it serves): each entry is
//! checked against the extension's rules and limits ([`skills::admit`]) and against the
//! manifest accepted earlier ([`skills::standing`]: the first seen is accepted, a changed one
//! waits for `skillhost skill accept`). Nothing of a skill is fetched until the model loads
//! it; then its `SKILL.md`, and later each file it reads, is fetched and checked against the
//! turn's manifest before the model sees it. What is refused is logged (once until it
//! changes) and told to the model that asks for it.

use super::load_skill::Listed;
use crate::mcp::client::McpManager;
use crate::mcp::skills::{self, Refused};
use crate::skills::prompt;
use crate::store::StateStore;
use parking_lot::Mutex;
use rmcp::model::{Skill, SkillResources};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// How long one server's `skills/list` may take before the turn goes on without its skills.
pub const LIST_TIMEOUT: Duration = Duration::from_secs(10);

/// One skill a server serves, as the turn listed it.
#[derive(Debug, Clone, PartialEq)]
pub struct Remote {
    /// The server's `mcp_servers` key.
    pub server: String,
    /// The manifest entry every fetched file is checked against.
    pub skill: Skill,
}

impl Remote {
    /// The URI prefix of the skill's files (its `SKILL.md`'s folder).
    fn base(&self) -> &str {
        self.skill.uri.strip_suffix("SKILL.md").unwrap_or(&self.skill.uri)
    }

    /// The skill's files but its `SKILL.md`, by path within the skill, with their sizes.
    fn files(&self) -> Vec<(&str, u64)> {
        let SkillResources::Files(files) = &self.skill.resources else { return Vec::new() };
        let paths = files.iter().filter(|f| f.uri != self.skill.uri);
        paths.filter_map(|f| Some((f.uri.strip_prefix(self.base())?, f.size))).collect()
    }
}

/// What one listing found: the skills to offer, and the names refused with why.
#[derive(Debug, Default)]
pub struct Listing {
    /// The skills to offer, as on-demand entries.
    pub listed: Vec<Listed>,
    /// `<server>/<skill>` -> why it is not offered.
    pub refused: BTreeMap<String, String>,
}

/// The servers whose skills one agent imports.
pub struct RemoteSkills {
    manager: Arc<McpManager>,
    servers: Vec<String>,
    state: StateStore,
    /// `skills.max_prompt_bytes`: no file larger (by its manifest) is fetched.
    max_bytes: u64,
    /// What was last logged of each server or skill, so a refusal is logged once until it changes.
    said: Mutex<BTreeMap<String, String>>,
}

impl std::fmt::Debug for RemoteSkills {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteSkills").field("servers", &self.servers).finish_non_exhaustive()
    }
}

impl RemoteSkills {
    /// The skills of `servers` (configured, with `skills: true`), accepted in `state`, none
    /// of whose files larger than `max_bytes` (`skills.max_prompt_bytes`) is fetched.
    pub fn new(manager: Arc<McpManager>, servers: Vec<String>, state: StateStore, max_bytes: u64) -> Self {
        RemoteSkills { manager, servers, state, max_bytes, said: Mutex::default() }
    }

    /// Lists every server's skills now, each admitted and accepted, or refused with why.
    pub async fn list(&self) -> Listing {
        let asked = self.servers.iter().map(|server| async move {
            let listed = tokio::time::timeout(LIST_TIMEOUT, skills::list(&self.manager, server)).await;
            (server, listed.unwrap_or_else(|_| Err(Refused::Server(format!("skills/list took over {LIST_TIMEOUT:?}")))))
        });
        let mut listing = Listing::default();
        for (server, listed) in futures::future::join_all(asked).await {
            let (admitted, malformed) = match listed {
                Ok(listed) => listed,
                Err(why) => {
                    self.say(server, format!("cannot list the skills of MCP server `{server}`: {why}"));
                    continue;
                }
            };
            self.said.lock().remove(server.as_str());
            for why in malformed {
                self.say(&format!("{server} {why}"), format!("MCP server `{server}`: skill not used: {why}"));
            }
            for skill in admitted {
                self.take(server, skill, &mut listing).await;
            }
        }
        listing
    }

    /// Adds `skill` to `listing` when it stands against its accepted manifest, else its refusal.
    async fn take(&self, server: &str, skill: Skill, listing: &mut Listing) {
        let name = format!("{server}/{}", skill.name());
        if listing.listed.iter().any(|l| l.name == name) {
            let why = format!("MCP server `{server}` serves two skills named `{}`; the first is used", skill.name());
            return self.say(&format!("{name} twice"), why);
        }
        if let Err(why) = skills::standing(&self.state, server, &skill).await {
            self.say(&name, why.to_string());
            listing.refused.insert(name, why.to_string());
            return;
        }
        self.said.lock().remove(&name);
        let description = skill.frontmatter.description.clone();
        let remote = Remote { server: server.to_owned(), skill };
        listing.listed.push(Listed::remote(name, description, remote));
    }

    /// Logs `message` under `key` unless it is what was logged last under it.
    fn say(&self, key: &str, message: String) {
        let mut said = self.said.lock();
        if said.get(key) != Some(&message) {
            tracing::warn!("{message}");
            said.insert(key.to_owned(), message);
        }
    }

    /// What loading skill `name` returns: its `SKILL.md`'s body, fetched and verified, then
    /// its other files by path.
    pub async fn instructions(&self, name: &str, remote: &Remote) -> Result<String, Refused> {
        let fetched = self.fetch(remote, &remote.skill.uri).await;
        let text = String::from_utf8(self.checked(name, fetched)?).map_err(|e| Refused::Integrity(e.to_string()))?;
        let (_, body) = prompt::split_skill_md(&text).map_err(Refused::Integrity)?;
        let mut text = body.trim().to_owned();
        let files = remote.files();
        if !files.is_empty() {
            text.push_str(&format!(
                "\n\nFiles of this skill (read one with `load_skill` and {{\"skill\": \"{name}\", \"file\": PATH}} when \
                 the instructions point to it):"
            ));
            for (path, size) in files {
                text.push_str(&format!("\n- {path} ({size} bytes)"));
            }
        }
        Ok(text)
    }

    /// File `path` (within the skill) of skill `name`, fetched and verified: its text, or what
    /// it is when it is not text.
    pub async fn file(&self, name: &str, remote: &Remote, path: &str) -> Result<String, Refused> {
        let uri = format!("{}{path}", remote.base());
        let bytes = self.checked(name, self.fetch(remote, &uri).await)?;
        Ok(match String::from_utf8(bytes) {
            Ok(text) => text,
            Err(e) => format!("`{path}` is not text ({} bytes, verified against the manifest)", e.into_bytes().len()),
        })
    }

    async fn fetch(&self, remote: &Remote, uri: &str) -> Result<Vec<u8>, Refused> {
        skills::fetch_within(&self.manager, &remote.server, &remote.skill, uri, self.max_bytes).await
    }

    /// `fetched`, with a refusal logged.
    fn checked(&self, name: &str, fetched: Result<Vec<u8>, Refused>) -> Result<Vec<u8>, Refused> {
        fetched.inspect_err(|why| tracing::warn!(skill = %name, "MCP skill content refused: {why}"))
    }
}
