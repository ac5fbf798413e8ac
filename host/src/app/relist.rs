//! A skill's lists changed while it serves (the `lists` import): its agent describes that
//! skill again from its folder (its `list-tools`, `list-prompts` and resources asked anew,
//! its `startup` not run again) and swaps the new set in ([`crate::engine::Engine::swap_skills`]),
//! which tells MCP clients their lists changed. Requests that come while one is being
//! handled are handled once after it, per skill.

use super::{Agent, App, tools_for};
use crate::sandbox::{ListKind, ListsWatcher};
use std::collections::BTreeSet;
use std::sync::Arc;
use tokio::sync::mpsc;

/// The sandbox's side: skills whose lists changed, queued for their agent.
pub struct Relists(mpsc::UnboundedSender<String>);

impl Relists {
    /// The watcher for an agent's loader, and the queue its [`App::relisting`] task reads.
    pub fn channel() -> (Relists, mpsc::UnboundedReceiver<String>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (Relists(tx), rx)
    }
}

impl ListsWatcher for Relists {
    fn changed(&self, skill: &str, which: ListKind) {
        tracing::debug!(skill, ?which, "the skill says a list of it changed");
        let _ = self.0.send(skill.to_owned());
    }
}

impl App {
    /// Starts, for every agent, the task that describes a skill again when it says its lists
    /// changed (`skillhost run` and `skillhost mcp`; nothing else serves).
    pub fn relisting(self: &Arc<Self>) {
        for index in 0..self.agents.len() {
            let Some(mut queue) = self.agents[index].relisted.lock().take() else { continue };
            let app = Arc::downgrade(self);
            tokio::spawn(async move {
                while let Some(first) = queue.recv().await {
                    let mut skills = BTreeSet::from([first]);
                    while let Ok(more) = queue.try_recv() {
                        skills.insert(more);
                    }
                    let Some(app) = app.upgrade() else { return };
                    let agent = &app.agents[index];
                    for skill in skills {
                        if let Err(why) = agent.relist(&skill).await {
                            tracing::warn!(skill, "cannot describe the skill again: {why}");
                        }
                    }
                }
            });
        }
    }
}

impl Agent {
    /// Describes `skill` again from its folder and swaps it into the agent's set.
    async fn relist(&self, skill: &str) -> Result<(), String> {
        let before = self.engine.skills();
        let dir = before.skills.get(skill).ok_or_else(|| format!("no skill `{skill}` serves"))?.dir.clone();
        let fresh = self.loader.relist(&dir).await.map_err(|problem| problem.to_string())?;
        if fresh.name != skill {
            return Err(format!("its folder now holds skill `{}`", fresh.name));
        }
        let mut set = (*before).clone();
        set.skills.insert(skill.to_owned(), Arc::new(fresh));
        let set = Arc::new(set);
        let tools = tools_for(&self.mcp, &set, &self.loader.config, &self.loader.memory, &self.slack_guard).await;
        self.engine.swap_skills(set, tools);
        tracing::info!(skill, "the skill's lists were described again");
        Ok(())
    }
}
