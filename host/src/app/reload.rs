//! Reloading the skills of a running `skillhost run` (SIGHUP: every agent;
//! `POST /api/skills/reload`: the agent whose API it is), per replica: the config file is read again and each agent's skill sections taken from it;
//! every agent's new set is loaded (pulled, verified, compiled) before any is swapped in, and
//! only when every skill of every agent loaded (but those that did not load before either):
//! otherwise nothing changes and the answer says why. Turns and calls that began before keep the set they began with (an approval waiting
//! runs its call on the old version); a skill that did not change is not started again
//! ([`crate::skills::Loader::startup_key`]); MCP clients are told their lists changed.

use super::{Agent, App, check_loading, tools_for};
use crate::adapters::api::reload::{ReloadError, SkillReload};
use crate::config::LoadedConfig;
use crate::skills::{LoadMode, SkillSet};
use crate::tools::Tools;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::{Arc, Weak};

/// Reloads an app's skills from its config file.
pub struct Reloader {
    app: Weak<App>,
    /// The config file (`None`: the defaults, as at the start).
    path: Option<PathBuf>,
    /// One reload at a time.
    running: tokio::sync::Mutex<()>,
}

impl Reloader {
    /// A reloader of `app`, reading `path` again each time.
    pub fn new(app: &Arc<App>) -> Arc<Self> {
        let path = app.config_path.clone();
        Arc::new(Reloader { app: Arc::downgrade(app), path, running: tokio::sync::Mutex::new(()) })
    }

    /// Reloads every agent's skills, or none; the new sets as JSON, or why nothing changed.
    pub async fn reload_all(&self) -> Result<Value, ReloadError> {
        self.reload_where(|_| true).await
    }

    /// Reloads the skills of the agents `which` names (all or none of them).
    async fn reload_where(&self, which: impl Fn(&Agent) -> bool) -> Result<Value, ReloadError> {
        let _one = self.running.lock().await;
        let app = self.app.upgrade().ok_or(ReloadError::Stopping)?;
        let fresh = crate::config::load(self.path.as_deref()).map_err(ReloadError::Config)?;
        let agents: Vec<&Agent> = app.agents.iter().filter(|a| which(a)).collect();
        let mut loaded = Vec::new();
        for agent in &agents {
            let config = agent_config(&fresh, agent.name.as_deref())?;
            let new = agent
                .load_for_reload(&config)
                .await
                .map_err(|error| ReloadError::Skills { agent: agent.name.clone(), error })?;
            loaded.push(new);
        }
        let mut done = Vec::new();
        for (agent, (set, tools)) in agents.into_iter().zip(loaded) {
            done.push(json!({"agent": agent.name, "skills": summary(&set)}));
            agent.engine.swap_skills(set, tools);
        }
        tracing::info!("skills reloaded");
        Ok(Value::Array(done))
    }

    /// Reloads on every SIGHUP until the process ends; each outcome goes to the log and
    /// stderr.
    pub async fn on_hangup(self: Arc<Self>) {
        use tokio::signal::unix::{SignalKind, signal};
        let Ok(mut hangup) = signal(SignalKind::hangup()) else { return };
        while hangup.recv().await.is_some() {
            match self.reload_all().await {
                Ok(_) => eprintln!("skillhost: skills reloaded (SIGHUP)"),
                Err(why) => eprintln!("error: reload failed; the loaded skills still serve: {why}"),
            }
        }
    }
}

/// The HTTP reload route of one agent: reloads that agent only, and says only its skills
/// (its token is not another agent's).
pub struct AgentReload {
    /// The app's reloader.
    pub reloader: Arc<Reloader>,
    /// The agent (its `agents` key; `None` for the only one).
    pub agent: Option<String>,
}

#[async_trait::async_trait]
impl SkillReload for AgentReload {
    async fn reload(&self) -> Result<Value, ReloadError> {
        let outcome = self.reloader.reload_where(|a| a.name == self.agent).await;
        if let Err(why) = &outcome {
            eprintln!("error: reload failed; the loaded skills still serve: {why}");
        }
        outcome
    }
}

/// The agent's effective config in the config read again.
fn agent_config(fresh: &LoadedConfig, name: Option<&str>) -> Result<LoadedConfig, ReloadError> {
    match name {
        None => Ok(fresh.clone()),
        Some(name) if fresh.config.agents.contains_key(name) => Ok(super::for_agent(fresh, name)),
        Some(name) => Err(ReloadError::AgentGone(name.to_owned())),
    }
}

/// Each skill serving after the reload, with its source.
fn summary(set: &SkillSet) -> Vec<Value> {
    let source = |name: &str, dir: &std::path::Path| match set.origins.get(name) {
        Some(origin) => json!(origin),
        None => json!({"folder": dir}),
    };
    set.skills.values().map(|s| json!({"name": s.name, "source": source(&s.name, &s.dir)})).collect()
}

impl Agent {
    /// Loads the skills `config`'s skill sections describe (this agent's, read again) with
    /// this agent's loader, without swapping them in: an error when a skill did not load that
    /// was not failing already.
    async fn load_for_reload(&self, config: &LoadedConfig) -> anyhow::Result<(Arc<SkillSet>, Tools)> {
        let mut loader = self.loader.clone();
        loader.config.config.skills = config.config.skills.clone();
        // Compiling blocks its thread for as long as it takes: off the serving runtime's
        // workers, as the start's background compile is.
        let (runtime, loading) = (tokio::runtime::Handle::current(), loader.clone());
        let set = tokio::task::spawn_blocking(move || runtime.block_on(loading.load_all(LoadMode::Join))).await??;
        let set = Arc::new(set);
        // A skill that did not load before may still not load; any other problem stops it.
        let before = self.engine.skills();
        let known = |skill: &str| before.problems.iter().any(|p| p.skill == skill);
        let new: Vec<String> = set.problems.iter().filter(|p| !known(&p.skill)).map(ToString::to_string).collect();
        if !new.is_empty() {
            anyhow::bail!("{}", new.join("; "));
        }
        check_loading(&set, &loader.config)?;
        let tools = tools_for(&self.mcp, &set, &loader.config, &loader.memory, &self.slack_guard).await;
        Ok((set, tools))
    }
}
