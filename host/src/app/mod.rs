//! The app builder: turns a loaded config into the running parts (the sandbox, the MCP client
//! manager, one engine per agent with its skills and tools) and owns them for as long as they
//! run. Every command and the tests build through it; [`App::serve`] runs the adapters.
//!
//! Every call's wall-clock deadline is kept by the call's own store (fuel yields, checked
//! by the sandbox), so it holds whoever owns the sandbox; the MCP supervisors live as long
//! as the manager, which the app and every agent's tools hold.

pub mod names;
mod relist;
pub mod reload;
pub mod schedule;
pub mod serve;
pub mod slack_guard;

pub use serve::serve;

use crate::config::{self, AdapterKind, LoadedConfig, Ui};
use crate::engine::{Engine, EngineSettings, NestedRunner, Peers};

use crate::adapters::outbox::Outbox;
use crate::mcp::McpManager;
use crate::sandbox::{LimitPolicy, Notifier, Resident, Sandbox, SandboxOptions, WARM_INSTANCES};
use crate::skills::{LoadMode, LoadProblem, Loader, SkillSet};
use crate::tools::{DeclaredTools, ScriptTools, SkillTools, ToolSource, Tools};
use anyhow::{Context, bail};
use std::path::PathBuf;
use std::sync::Arc;

/// Which agents to build.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Agents {
    /// The top-level config as one agent, whatever `agents` says (`call`, `mcp`, `chat`).
    TopLevel,
    /// One entry of `agents` (`--agent NAME`).
    One(String),
    /// Every entry of `agents`, or the top-level config when there is none (`run`).
    All,
}

/// How far to build.
#[derive(Debug, Clone)]
pub struct Options {
    /// How skills load: `Serve` runs `startup`, `Inspect` does not.
    pub mode: LoadMode,
    /// Whether the agents need their LLM provider (a missing key is then an error, reported
    /// before any skill loads).
    pub llm: bool,
    /// Which agents.
    pub agents: Agents,
}

impl Options {
    /// Whether a person can be asked in this process, so MCP servers may elicit: every build
    /// that runs turns (the terminal, the API's interactive runs), and `call` on a terminal;
    /// not `skillhost mcp`, which serves with no LLM and nobody to ask.
    pub fn asks_people(&self) -> bool {
        use std::io::IsTerminal;
        self.llm || (self.mode == LoadMode::Inspect && std::io::stdin().is_terminal())
    }
}

/// One agent, ready to serve.
pub struct Agent {
    /// Its `agents` key; `None` for the single top-level agent.
    pub name: Option<String>,
    /// Its display name: `agents.<name>.name`, else `bot.name`.
    pub display_name: String,
    /// Its engine.
    pub engine: Arc<Engine>,
    /// The adapters its config names (`adapter.type` / `types`; the terminal when none).
    pub adapters: Vec<AdapterKind>,
    /// Its `adapter` block (the chat platforms' settings).
    pub adapter: config::Adapter,
    /// Its HTTP server settings.
    pub ui: Ui,
    /// Where its skills' own messages find its chat adapters.
    pub outbox: Arc<Outbox>,
    /// Skills that did not load (the others still serve).
    pub problems: Vec<LoadProblem>,
    /// Its recent runs, as every adapter of it records them (read by the console).
    pub runs: Arc<crate::adapters::runs::Runs>,
    /// Its effective config, and the loader that reloads its skills.
    loader: Loader,
    mcp: Arc<McpManager>,
    /// Its guard on MCP tools that post to Slack (kept across reloads with what it learned).
    slack_guard: crate::mcp::SlackPostingGuard,
    /// The skills that said their lists changed, until [`App::relisting`] takes the queue.
    relisted: parking_lot::Mutex<Option<tokio::sync::mpsc::UnboundedReceiver<String>>>,
}

impl Agent {
    /// Loads the agent's skills again (the MCP servers new skills declare are started) and
    /// swaps them into its engine ([`Engine::swap_skills`]: every adapter serves them from
    /// then on, MCP clients are told); returns the skills that did not load. On error the
    /// running skills are untouched.
    pub async fn reload(&self) -> anyhow::Result<Vec<LoadProblem>> {
        self.load_into_engine(LoadMode::Join).await
    }

    /// Loads the skills its start left pending ([`Agent::pending`], compiled since) beside
    /// those serving, and swaps them all into its engine; `startup` runs only for the skills
    /// joining ([`LoadMode::Join`]).
    pub async fn join_pending(&self) -> anyhow::Result<Vec<LoadProblem>> {
        self.load_into_engine(LoadMode::Join).await
    }

    async fn load_into_engine(&self, mode: LoadMode) -> anyhow::Result<Vec<LoadProblem>> {
        let set = Arc::new(self.loader.load_all(mode).await?);
        check_loading(&set, &self.loader.config)?;
        let tools = tools_for(&self.mcp, &set, &self.loader.config, &self.loader.memory, &self.slack_guard).await;
        self.engine.swap_skills(set.clone(), tools);
        Ok(set.problems.clone())
    }

    /// What its skills' load left pending ([`LoadMode::ServeReady`]: components still to be
    /// compiled).
    pub fn pending(&self) -> Vec<String> {
        self.engine.skills().pending.clone()
    }

    /// Compiles what [`Agent::pending`] names (and anything else missing from the cache), so
    /// that [`Agent::reload`] then loads every skill. Blocking: call it off the runtime.
    pub fn compile_pending(&self) {
        self.loader.compile_all();
    }

    /// The config the agent was built from (the top-level one with its blocks merged in).
    pub fn config(&self) -> &LoadedConfig {
        &self.loader.config
    }
}

/// The running parts of one config.
pub struct App {
    /// The config as loaded.
    pub config: LoadedConfig,
    /// The sandbox every agent's skills run in.
    pub sandbox: Arc<Sandbox>,
    /// The MCP servers' manager, shared by the agents.
    pub mcp: Arc<McpManager>,
    /// The agents, by name (the top-level one alone when there are none).
    pub agents: Vec<Agent>,
    /// The config file a reload reads again (`None`: `./config.yaml` if there is one).
    pub config_path: Option<PathBuf>,
    /// Where every agent's approvals and questions wait on a person (its background tasks
    /// run while it lives).
    pub broker: Arc<crate::broker::Broker>,
}

impl App {
    /// Builds every part `options` asks for.
    pub async fn build(config: LoadedConfig, options: Options) -> anyhow::Result<App> {
        let sandbox = Arc::new(sandbox(&config)?);
        let mcp = McpManager::new(&config.config.mcp_servers);
        mcp.set_people(options.asks_people());
        let c = &config.config;
        let state = crate::store::StateStore::from_config(&c.state, |p| config.resolve(p))?;
        mcp.set_state(state.clone());
        // One broker for the process: every agent's entries, one heartbeat among the replicas.
        let broker = crate::broker::Broker::start(&state, c.human.audit_retention());
        let (mut agents, peers) = (Vec::new(), Arc::new(Peers::default()));
        for (name, agent_config) in agent_configs(&config, &options.agents)? {
            let shared = Shared { sandbox: &sandbox, mcp: &mcp, peers: &peers, broker: &broker };
            agents.push(build_agent(shared, name, agent_config, &options).await?);
        }
        // Delegations (`delegate_to_agent`) find the other agents of this process by key.
        for agent in &agents {
            if let Some(name) = &agent.name {
                let engine: Arc<dyn NestedRunner> = agent.engine.clone();
                peers.register(name, Arc::downgrade(&engine));
            }
        }
        check_delegations(&config, &agents)?;
        // With skills still to compile, the names config writes are checked once they loaded
        // ([`App::load_pending`]).
        if agents.iter().all(|a| a.pending().is_empty()) {
            let engines: Vec<_> = agents.iter().map(|a| (a.name.as_deref(), &*a.engine)).collect();
            check_names(&config, &engines, &mcp)?;
        }
        Ok(App { config, sandbox, mcp, agents, config_path: None, broker })
    }

    /// Checks the names the config writes against what the agents serve now (after a later
    /// full load: see [`LoadMode::ServeReady`]).
    pub fn check_names(&self) -> anyhow::Result<()> {
        let engines: Vec<_> = self.agents.iter().map(|a| (a.name.as_deref(), &*a.engine)).collect();
        check_names(&self.config, &engines, &self.mcp)
    }

    /// The skills the agents' start left pending, each named once.
    fn pending_names(&self) -> String {
        let mut names: Vec<String> = self.agents.iter().flat_map(|a| a.pending()).collect();
        names.sort();
        names.dedup();
        names.join(", ")
    }

    /// Says on stderr which skills still compile, if any, before the serving starts (so a
    /// client that sees the server answer can also see the line).
    pub fn announce_pending(&self) {
        let names = self.pending_names();
        if !names.is_empty() {
            eprintln!("skillhost: serving now; compiling in the background: {names}");
        }
    }

    /// Compiles what the agents' start left pending ([`LoadMode::ServeReady`]), off the
    /// runtime, then reloads each agent that had some, so its skills join while it serves
    /// (MCP clients are told their lists changed, `/readyz` turns ready). Progress goes to
    /// stderr; the names the config writes are checked then. Spawn it beside the serving,
    /// after [`App::announce_pending`].
    pub async fn load_pending(self: Arc<Self>) {
        let waiting: Vec<(usize, Vec<String>)> =
            self.agents.iter().enumerate().map(|(i, a)| (i, a.pending())).filter(|(_, p)| !p.is_empty()).collect();
        if waiting.is_empty() {
            return;
        }
        let names = self.pending_names();
        let app = self.clone();
        let indices: Vec<usize> = waiting.iter().map(|(i, _)| *i).collect();
        let compiled = tokio::task::spawn_blocking(move || {
            for &i in &indices {
                app.agents[i].compile_pending();
            }
        });
        if compiled.await.is_err() {
            eprintln!("error: compiling the pending skills stopped; serving without them");
            waiting.iter().for_each(|(i, _)| self.agents[*i].engine.stop_waiting_for_skills());
            return;
        }
        let mut joined = true;
        for (i, _) in waiting {
            match self.agents[i].join_pending().await {
                Ok(problems) => problems.iter().for_each(|p| eprintln!("warning: {p}")),
                Err(e) => {
                    // `/readyz` stays 503: what is left pending never joins, so turns and
                    // calls stop waiting for it.
                    eprintln!("error: loading the compiled skills failed, serving without them: {e:#}");
                    self.agents[i].engine.stop_waiting_for_skills();
                    joined = false;
                }
            }
        }
        if let Err(e) = self.check_names() {
            eprintln!("error: {e:#}");
        }
        if joined {
            eprintln!("skillhost: every skill is ready ({names} joined)");
        }
    }

    /// The first (for a single-agent config, the only) agent.
    pub fn agent(&self) -> &Agent {
        self.agents.first().expect("an app has at least one agent")
    }
}

/// The environment variable naming the compile cache when `sandbox.cache_dir` is not set
/// (else `./.skillhost/cache` beside the config). The repository's `.cargo/config.toml` sets
/// it for `cargo test`, so every test binary shares one cache under `target/`.
pub const CACHE_DIR_VAR: &str = "SKILLHOST_CACHE_DIR";

/// The compile cache [`CACHE_DIR_VAR`] names, if it is set and not empty.
pub fn cache_dir_from_env() -> Option<PathBuf> {
    std::env::var_os(CACHE_DIR_VAR).filter(|dir| !dir.is_empty()).map(PathBuf::from)
}

/// The sandbox the config describes.
pub fn sandbox(config: &LoadedConfig) -> anyhow::Result<Sandbox> {
    let c = &config.config;
    let policy = LimitPolicy::from_config(&c.sandbox.defaults, &c.sandbox.maximums);
    let cache_dir = match (&c.sandbox.cache_dir, cache_dir_from_env()) {
        (Some(dir), _) => config.resolve(dir),
        (None, Some(dir)) => dir,
        (None, None) => config.resolve(".skillhost/cache".as_ref()),
    };
    let options = SandboxOptions {
        max_memory_bytes: policy.maximums.memory_bytes,
        cache_dir: Some(cache_dir),
        warm_instances: c.sandbox.warm_instances.unwrap_or(WARM_INSTANCES),
        resident_budget: resident_budget(&c.sandbox),
        ..Default::default()
    };
    tracing::info!("the sandbox keeps skills' memory resident between calls: {}", options.resident_budget);
    let started = std::time::Instant::now();
    let sandbox = Sandbox::new(&options);
    tracing::debug!(took = ?started.elapsed(), "sandbox ready");
    sandbox
}

/// `sandbox.resident_mb` and `sandbox.resident_per_skill_mb`, with their defaults.
pub fn resident_budget(sandbox: &crate::config::Sandbox) -> Resident {
    let mib = |mb: u64| usize::try_from(mb.saturating_mul(1 << 20)).unwrap_or(usize::MAX);
    let default = Resident::DEFAULT;
    Resident {
        total: sandbox.resident_mb.map_or(default.total, mib),
        per_skill: sandbox.resident_per_skill_mb.map_or(default.per_skill, mib),
    }
}

/// Refuses, before anything loads, an adapter that could not serve: Slack or Telegram
/// without its token (the error names the setting and the agent, never the token).
/// `adapter` replaces what each agent's config names (`run --adapter`).
pub fn check_adapters(config: &LoadedConfig, which: &Agents, adapter: Option<AdapterKind>) -> anyhow::Result<()> {
    for (name, agent) in agent_configs(config, which)? {
        let block = &agent.config.adapter;
        let at = name.map_or("adapter".to_owned(), |n| format!("agents.{n}.adapter"));
        for kind in adapter.map_or_else(|| block.kinds(), |kind| vec![kind]) {
            block.ready(kind).map_err(|e| anyhow::anyhow!("{at}: {e}"))?;
        }
    }
    Ok(())
}

/// Whether `run` serves a person at the terminal (`adapter` replaces what the config names;
/// an agent naming no adapter gets the terminal). A person typing there expects every skill
/// from the first message, so such a start waits for its compiles; servers answer at once
/// ([`LoadMode::ServeReady`]).
pub fn serves_terminal(config: &LoadedConfig, which: &Agents, adapter: Option<AdapterKind>) -> anyhow::Result<bool> {
    if let Some(kind) = adapter {
        return Ok(kind == AdapterKind::Cli);
    }
    for (_, agent) in agent_configs(config, which)? {
        let kinds = agent.config.adapter.kinds();
        if kinds.is_empty() || kinds.contains(&AdapterKind::Cli) {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The effective config of each agent to build: the top-level one with the agent's blocks
/// (already merged key by key by the config loader) in place.
fn agent_configs(config: &LoadedConfig, which: &Agents) -> anyhow::Result<Vec<(Option<String>, LoadedConfig)>> {
    let agents = &config.config.agents;
    let names: Vec<String> = match which {
        Agents::TopLevel => return Ok(vec![(None, config.clone())]),
        Agents::All if agents.is_empty() => return Ok(vec![(None, config.clone())]),
        Agents::All => agents.keys().cloned().collect(),
        Agents::One(name) if agents.is_empty() => bail!("--agent {name}: no agents configured"),
        Agents::One(name) if !agents.contains_key(name) => {
            let known: Vec<&str> = agents.keys().map(String::as_str).collect();
            bail!("--agent {name}: no such agent; configured agents: {}", known.join(", "))
        }
        Agents::One(name) => vec![name.clone()],
    };
    Ok(names.into_iter().map(|name| (Some(name.clone()), for_agent(config, &name))).collect())
}

/// The config one agent runs on.
pub fn for_agent(config: &LoadedConfig, name: &str) -> LoadedConfig {
    let mut effective = config.clone();
    let (c, agent) = (&mut effective.config, config.config.agents[name].clone());
    if let Some(prompt) = agent.system_prompt {
        c.bot.system_prompt = prompt;
    }
    if let Some(display) = agent.name {
        c.bot.name = display;
    }
    if let Some(memory) = agent.memory {
        c.learning.memory.filesystem.path = memory.path;
    }
    c.skills = agent.skills.unwrap_or_else(|| c.skills.clone());
    c.llm = agent.llm.unwrap_or_else(|| c.llm.clone());
    c.adapter = agent.adapter.unwrap_or_else(|| c.adapter.clone());
    c.ui = agent.ui.unwrap_or_else(|| c.ui.clone());
    c.agents.clear();
    effective
}

/// What every agent of the process shares.
struct Shared<'a> {
    sandbox: &'a Arc<Sandbox>,
    mcp: &'a Arc<McpManager>,
    peers: &'a Arc<Peers>,
    broker: &'a Arc<crate::broker::Broker>,
}

async fn build_agent(
    Shared { sandbox, mcp, peers, broker }: Shared<'_>,
    name: Option<String>,
    config: LoadedConfig,
    options: &Options,
) -> anyhow::Result<Agent> {
    let who = name.as_deref().map(|n| format!("agent `{n}`: ")).unwrap_or_default();
    let provider = match options.llm {
        true => Some(
            crate::llm::from_config(&config.config.llm)
                .map_err(|e| anyhow::anyhow!("{who}cannot use the LLM provider: {e}"))?,
        ),
        false => None,
    };
    let mut loader = Loader::new(sandbox.clone(), config.clone())?;
    let guard = slack_guard::slack_guard(&config, name.as_deref());
    loader.mcp = mcp.is_configured().then(|| slack_guard::bridge(mcp, &guard));
    let outbox = Outbox::new();
    loader.notifier = Some(outbox.clone() as Arc<dyn Notifier>);
    let (relists, relisted) = relist::Relists::channel();
    loader.lists = Some(Arc::new(relists));
    let set = Arc::new(loader.load_all(options.mode).await.with_context(|| who.clone())?);
    check_loading(&set, &config).with_context(|| who.clone())?;
    let tools = tools_for(mcp, &set, &config, &loader.memory, &guard).await;
    let mut settings = EngineSettings::from_config(&config, loader.memory.clone());
    settings.agent = name.clone();
    settings.remote_skills = remote_skills(mcp, &config, &loader.state).await;
    let engine = Engine::new(set.clone(), tools, provider, settings, loader.state.clone(), broker.clone())
        .with_peers(peers.clone());
    let engine = Arc::new(engine);
    let mut adapters = config.config.adapter.kinds();
    if adapters.is_empty() {
        adapters.push(AdapterKind::Cli);
    }
    let runs = crate::adapters::runs::Runs::new(name.as_deref().unwrap_or(&config.config.bot.name));
    Ok(Agent {
        display_name: config.config.bot.name.clone(),
        name,
        engine,
        adapters,
        adapter: config.config.adapter.clone(),
        ui: config.config.ui.clone(),
        outbox,
        problems: set.problems.clone(),
        runs,
        loader,
        mcp: mcp.clone(),
        slack_guard: guard,
        relisted: parking_lot::Mutex::new(Some(relisted)),
    })
}

/// Refuses `skills.loading_overrides` that cannot apply (`on_demand` for a `prompt.md`
/// skill); those naming no skill are [`check_names`]' to report.
fn check_loading(set: &SkillSet, config: &LoadedConfig) -> anyhow::Result<()> {
    let overrides = &config.config.skills.loading_overrides;
    crate::tools::load_skill::check_overrides(set, overrides).map_err(anyhow::Error::msg)
}

/// Refuses a `delegate_to_agent` record whose `to_agent_id` names no agent in `agents`.
fn check_delegations(config: &LoadedConfig, agents: &[Agent]) -> anyhow::Result<()> {
    use crate::skills::declared::{Builtin, Kind};
    let known = &config.config.agents;
    for agent in agents {
        for tool in &agent.engine.skills().declared.tools {
            let Kind::Builtin(Builtin::Delegate { to: Some(to) }) = &tool.kind else { continue };
            if !known.contains_key(to) {
                let at = agent.name.as_deref().map(|n| format!("agent `{n}`: ")).unwrap_or_default();
                let names: Vec<&str> = known.keys().map(String::as_str).collect();
                bail!(
                    "{at}skills.declared `{}`: config_json.to_agent_id: no agent `{to}` in `agents` (configured: {})",
                    tool.spec.full_name,
                    names.join(", ")
                );
            }
        }
    }
    Ok(())
}

/// Reports the names in config that match nothing the built agents have ([`names`]): a
/// warning each, or, under `skills.strict`, one error listing them all. Only the built
/// agents' blocks are checked (`chat --agent a` does not judge agent `b`'s).
fn check_names(config: &LoadedConfig, agents: &[(Option<&str>, &Engine)], mcp: &McpManager) -> anyhow::Result<()> {
    let mut scope = config.config.clone();
    scope.agents.retain(|name, _| agents.iter().any(|(agent, _)| *agent == Some(name.as_str())));
    let mut known = names::Known::new(&scope);
    for (_, engine) in agents {
        known.add(&engine.skills(), Some(&engine.tools()));
    }
    known.add_mcp(mcp);
    names::report(names::unmatched(&scope, &known), names::strict(&scope))
}

/// The tools an agent offers: its skills', their script tools, then (when servers are configured) those of the
/// MCP servers its skills declare or its `skills.allowed` names, behind its `slack` guard.
async fn tools_for(
    mcp: &Arc<McpManager>,
    set: &Arc<SkillSet>,
    config: &LoadedConfig,
    memory: &crate::store::MemoryStore,
    slack: &crate::mcp::SlackPostingGuard,
) -> Tools {
    let mut sources: Vec<Arc<dyn ToolSource>> = vec![
        Arc::new(SkillTools::new(set.clone())),
        Arc::new(ScriptTools::new(set.clone())),
        Arc::new(DeclaredTools::new(set.clone(), declared_reach(config, memory))),
    ];
    if mcp.is_configured() {
        let extra = config.config.skills.allowed.clone().unwrap_or_default();
        let guardrails = crate::tools::temporal::Guardrails::from_config(&config.config.engine.temporal_guardrails);
        sources.push(crate::tools::mcp::start_for(mcp, set.clone(), &extra, guardrails, slack.clone()).await);
    }
    Tools::new(sources)
}

/// The skills the agent imports from MCP servers: those of every server with `skills: true`
/// that its `skills.allowed` admits (all, when it is unset), started here. `None` when none.
async fn remote_skills(
    mcp: &Arc<McpManager>,
    config: &LoadedConfig,
    state: &crate::store::StateStore,
) -> Option<Arc<crate::tools::RemoteSkills>> {
    let allowed = config.config.skills.allowed.as_ref();
    let servers: Vec<String> = (config.config.mcp_servers.iter())
        .filter(|(name, server)| server.serves_skills() && allowed.is_none_or(|a| a.contains(name)))
        .map(|(name, _)| name.clone())
        .collect();
    if servers.is_empty() {
        return None;
    }
    crate::tools::mcp::start_servers(mcp, &servers).await;
    let max_bytes = config.config.skills.max_prompt_bytes;
    Some(Arc::new(crate::tools::RemoteSkills::new(mcp.clone(), servers, state.clone(), max_bytes)))
}

/// What the declared tools of `config` may reach: each one's `http_hosts` grant, the memory
/// root, the result cap and the longest call.
fn declared_reach(config: &LoadedConfig, memory: &crate::store::MemoryStore) -> crate::tools::declared::Reach {
    let c = &config.config;
    let policy = LimitPolicy::from_config(&c.sandbox.defaults, &c.sandbox.maximums);
    let grants =
        c.skills.grants.iter().map(|(name, g)| (name.clone(), crate::sandbox::HostList::new(g.http_hosts.clone())));
    crate::tools::declared::Reach {
        grants: grants.collect(),
        memory: memory.clone(),
        max_result: usize::try_from(policy.defaults.max_result_bytes).unwrap_or(usize::MAX),
        max_timeout: policy.maximums.timeout,
    }
}

/// Loads `path` (or `./config.yaml`), for commands.
pub fn load_config(path: Option<&std::path::Path>) -> anyhow::Result<LoadedConfig> {
    Ok(config::load(path)?)
}
