//! The turn loop: ask the model, run the tools it asks for, feed the results back, until it
//! answers; with a per-turn time budget, one turn at a time per channel, and the history
//! persisted at the end.

use super::checkpoint::{Checkpoint, Durable, Given};
use super::counterpart::Counterpart;
use super::deadline::{Deadline, TIME_SPENT, WrapUp};
use super::events::{EngineEvent, EventSink};
use super::gate::Gate;
use super::history::History;
use super::inflight::{Held, InFlight};
use super::on_demand::TurnSkills;
use super::promote::Promotion;
use super::ready::NotReady;
use super::round::{Call, Nesting, Peers, Round, Spent, ToolCallRecord};
use super::tool_budget::{AfterRound, BUDGET_SPENT, TurnBudget};
use super::{prompt, reflection, verifier};
use crate::config::{Human, Learning, LoadedConfig, Loading, Session};
use crate::llm::{Block, Delta, LlmError, Message, Provider, Request, Response, Role};
use crate::sandbox::{CallContext, RouteAttributes};
use crate::skills::SkillSet;
use crate::store::{MemoryStore, StateError, StateStore};
use crate::tools::{OnDemand, SubAgents, Tools};
use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;
use tracing::Instrument as _;

/// The config an [`Engine`] acts on.
#[derive(Debug, Clone)]
pub struct EngineSettings {
    /// `llm.model`.
    pub model: String,
    /// `llm.max_tokens`.
    pub max_tokens: u32,
    /// `bot.system_prompt`.
    pub system_prompt: String,
    /// The memory root (`learning.memory`): its `MEMORY.md` is in every prompt, and the
    /// daily reflections go there.
    pub memory: MemoryStore,
    /// `human`: approval timeout and overrides.
    pub human: Human,
    /// `engine.session`: the turn budget and the wrap-up timeout.
    pub session: Session,
    /// `learning`: auto-promotion and the daily reflection.
    pub learning: Learning,
    /// `verifier.model`; the main model when absent.
    pub verifier_model: Option<String>,
    /// `engine.tool_budget` (or the legacy `log_tool_budget`); `None` when off.
    pub tool_budget: Option<super::tool_budget::ToolBudgetPolicy>,
    /// The agent's name in multi-agent mode: its histories, in-flight markers and approval
    /// counts are its own, even on a state directory shared with other agents.
    pub agent: Option<String>,
    /// `skills.loading`: how `SKILL.md` skills reach the model.
    pub loading: Loading,
    /// `skills.loading_overrides`: per skill, over `loading`.
    pub loading_overrides: BTreeMap<String, Loading>,
    /// The skills its MCP servers serve (`mcp_servers.<name>.skills`), listed each turn.
    pub remote_skills: Option<Arc<crate::tools::RemoteSkills>>,
}

impl EngineSettings {
    /// The settings `config` gives, with the memory root it configures.
    pub fn from_config(config: &LoadedConfig, memory: MemoryStore) -> Self {
        let c = &config.config;
        EngineSettings {
            model: c.llm.model.clone(),
            max_tokens: c.llm.max_tokens,
            system_prompt: c.bot.system_prompt.clone(),
            memory,
            human: c.human.clone(),
            session: c.engine.session.clone(),
            learning: c.learning.clone(),
            verifier_model: c.verifier.model.clone(),
            tool_budget: super::tool_budget::ToolBudgetPolicy::from_config(&c.engine),
            agent: None,
            loading: c.skills.loading,
            loading_overrides: c.skills.loading_overrides.clone(),
            remote_skills: None,
        }
    }

    /// How the skill called `name` reaches the model, if it has a `SKILL.md`.
    pub fn loading_of(&self, name: &str) -> Loading {
        self.loading_overrides.get(name).copied().unwrap_or(self.loading)
    }
}

pub use super::request::TurnRequest;

/// How a turn ended.
#[derive(Debug, Clone)]
pub struct TurnResult {
    /// The final answer's text.
    pub text: String,
    /// LLM requests made, the wrap-up included.
    pub rounds: u32,
    /// Every tool call, in the order the model made them.
    pub tool_calls: Vec<ToolCallRecord>,
    /// The time budget ran out and the answer is the forced wrap-up.
    pub time_boxed: bool,
    /// The tokens of the turn's LLM requests, its nested turns' included (not the fact
    /// check's or the reflection's).
    pub usage: crate::llm::Usage,
}

/// Why a turn failed.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The LLM request failed (after the provider's retries).
    #[error(transparent)]
    Llm(#[from] LlmError),
    /// The history could not be read or written.
    #[error("conversation history: {0}")]
    History(#[from] StateError),
    /// The channel's in-flight marker could not be written.
    #[error("{0}")]
    InFlight(StateError),
    /// The agent has no LLM provider (an engine built only to serve tools).
    #[error("no LLM provider is configured for this agent")]
    NoProvider,
    /// The turn's task was stopped before it ended (the server is shutting down).
    #[error("the run was stopped: the server is shutting down")]
    Stopped,
    /// A turn written down elsewhere cannot be resumed here.
    #[error("cannot resume the turn: {0}")]
    Resume(String),
    /// Skills it may be offered were still compiling when the wait for them ended.
    #[error(transparent)]
    NotReady(#[from] NotReady),
}

/// What the agent's skills give its engine, swapped whole when skills join or are reloaded
/// ([`Engine::swap_skills`]); a turn keeps the one it started with.
pub struct Loaded {
    /// The skills it serves.
    pub skills: Arc<SkillSet>,
    /// The tools they (and the MCP servers) offer.
    pub tools: Tools,
    /// The skills that load on demand, and their `load_skill`.
    pub(super) on_demand: Arc<OnDemand>,
    /// The skills that run as sub-agents, and their `<skill>__run` tools.
    pub(super) sub_agents: Arc<SubAgents>,
}

impl Loaded {
    fn new(skills: Arc<SkillSet>, tools: Tools, settings: &EngineSettings) -> Self {
        let on_demand = OnDemand::new(&skills, |s| settings.loading_of(s), &tools.decls());
        let on_demand = Arc::new(on_demand.with_remote(settings.remote_skills.clone()));
        let sub_agents = Arc::new(SubAgents::new(&skills, |s| settings.loading_of(s)));
        Loaded { skills, tools, on_demand, sub_agents }
    }

    /// The skills still compiling that a turn waits for: all but the on-demand ones (a turn
    /// that loads one waits for it then).
    pub(super) fn compiling_for_turn(&self) -> Vec<String> {
        let on_demand: Vec<&str> = self.on_demand.compiling().collect();
        self.skills.pending.iter().filter(|name| !on_demand.contains(&name.as_str())).cloned().collect()
    }

    /// `tools` with the sub-agent skills' `<skill>__run` in front, when the agent has any.
    pub(super) fn with_sub_agents(&self, tools: &Tools) -> Tools {
        match self.sub_agents.is_empty() {
            true => tools.clone(),
            false => tools.with_first(self.sub_agents.clone()),
        }
    }
}

/// The agent engine: its skills and tools, a provider, the config, and the per-channel
/// histories.
pub struct Engine {
    /// What its skills give it; replaced whole by [`Engine::swap_skills`]. Shared with the
    /// turns' [`crate::tools::Joining`], which look at the skills as they are now.
    loaded: Arc<parking_lot::RwLock<Arc<Loaded>>>,
    /// Bumped at each swap, for those who tell clients (MCP's `list_changed`).
    changed: tokio::sync::watch::Sender<u64>,
    /// The skills left compiling will not join: nothing waits for them any more.
    gave_up: std::sync::atomic::AtomicBool,
    /// Shared with background reflections, which outlive the turn. `None` for an engine
    /// that only serves tool calls (`skillhost mcp`, `skillhost call`).
    provider: Option<Arc<dyn Provider>>,
    settings: EngineSettings,
    history: History,
    gate: Gate,
    /// Reflections still running; see [`Engine::wait_for_background`].
    background: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    /// One lock per channel with a turn running or waiting; removed when none is left.
    channels: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// The same, across processes sharing the state directory.
    inflight: InFlight,
    /// The other agents of this process, for delegations.
    pub(super) peers: Arc<Peers>,
    /// Cancelled when the process stops taking runs ([`Engine::drain`]).
    draining: tokio_util::sync::CancellationToken,
    /// Cancelled when the process stops its turns ([`Engine::stop_turns`]).
    stopping: tokio_util::sync::CancellationToken,
    /// Where its turns' approvals and questions wait on a person: the process's broker.
    broker: Arc<crate::broker::Broker>,
}

impl Engine {
    /// The person broker of this agent's turns (the process's): shared by the replicas with
    /// `state.backend: postgres`, in this process otherwise.
    pub fn broker(&self) -> Arc<crate::broker::Broker> {
        self.broker.clone()
    }

    /// The agent's name as entries record it (`""` for the single top-level agent).
    pub fn agent(&self) -> &str {
        self.settings.agent.as_deref().unwrap_or_default()
    }

    /// An engine over `skills` and the `tools` they (and the MCP servers) offer, keeping
    /// histories and approval counts in `state`, asking people through `broker`.
    pub fn new(
        skills: Arc<SkillSet>,
        tools: Tools,
        provider: Option<Box<dyn Provider>>,
        settings: EngineSettings,
        state: StateStore,
        broker: Arc<crate::broker::Broker>,
    ) -> Self {
        let promotion = Promotion::for_agent(state.clone(), &settings.learning, settings.agent.as_deref());
        let human = &settings.human;
        let gate = Gate::new(human.overrides.clone(), Duration::from_secs(human.timeout_seconds), promotion);
        let ttl = Duration::from_secs(settings.session.inflight_ttl_seconds);
        let inflight = InFlight::new(state.clone(), ttl, broker.replica().map(str::to_owned));
        let (history, provider) = (History::new(state), provider.map(Arc::from));
        let (background, channels) = (Mutex::default(), Mutex::default());
        let loaded = Arc::new(parking_lot::RwLock::new(Arc::new(Loaded::new(skills, tools, &settings))));
        let peers = Arc::new(Peers::default());
        Engine {
            loaded,
            changed: tokio::sync::watch::Sender::new(0),
            gave_up: Default::default(),
            provider,
            settings,
            history,
            gate,
            background,
            channels,
            inflight,
            peers,
            draining: tokio_util::sync::CancellationToken::new(),
            stopping: tokio_util::sync::CancellationToken::new(),
            broker,
        }
    }

    /// The same engine, finding the other agents of this process in `peers`.
    pub fn with_peers(mut self, peers: Arc<Peers>) -> Self {
        self.peers = peers;
        self
    }

    /// The same engine over reloaded `skills` and `tools`: provider, settings, histories
    /// and approval counts carry over.
    pub fn reloaded(&self, skills: Arc<SkillSet>, tools: Tools) -> Self {
        let loaded = Loaded::new(skills, tools, &self.settings);
        Engine {
            peers: self.peers.clone(),
            loaded: Arc::new(parking_lot::RwLock::new(Arc::new(loaded))),
            changed: tokio::sync::watch::Sender::new(0),
            gave_up: Default::default(),
            provider: self.provider.clone(),
            settings: self.settings.clone(),
            history: self.history.clone(),
            gate: self.gate.clone(),
            background: Mutex::default(),
            channels: Mutex::default(),
            inflight: self.inflight.clone(),
            draining: self.draining.clone(),
            stopping: self.stopping.clone(),
            // What waits on a person carries over to the reloaded skills.
            broker: self.broker.clone(),
        }
    }

    /// The process stops taking runs (SIGTERM): `/readyz` answers 503, new runs are
    /// refused, streams that only watch end; the turns running go on.
    pub fn drain(&self) {
        self.draining.cancel();
    }

    /// Cancelled once the process stops taking runs ([`Engine::drain`]).
    pub fn draining(&self) -> &tokio_util::sync::CancellationToken {
        &self.draining
    }

    /// Ends every turn running, and every turn started from now on, with
    /// [`EngineError::Stopped`]: a turn stops where it is (no further tool runs), its
    /// in-flight marker is removed and its adapter records the failure. For a shutdown
    /// whose drain bound passed.
    pub fn stop_turns(&self) {
        self.stopping.cancel();
    }

    /// The agent's LLM provider, if it has one.
    pub(super) fn provider(&self) -> Option<Arc<dyn Provider>> {
        self.provider.clone()
    }

    /// The agent's approval policy.
    pub fn gate(&self) -> &Gate {
        &self.gate
    }

    /// The system prompt of one of its turns, with the turn's on-demand skills (those the
    /// conversation loaded earlier carried). Sub-agent skills' bodies are their own turns'
    /// prompts, never this one's.
    pub(super) async fn system_prompt(&self, loaded: &Loaded, turn: &TurnSkills) -> String {
        let memory = prompt::read_memory(&self.settings.memory).await;
        let left_out = |name: &str| loaded.sub_agents.contains(name);
        let (bot, on_demand) = (&self.settings.system_prompt, &turn.catalog);
        prompt::system_prompt(bot, &loaded.skills, on_demand, &turn.carried, memory.as_deref(), &left_out)
    }

    /// The approval counts behind auto-promotion.
    pub fn promotion(&self) -> &Promotion {
        self.gate.promotion()
    }

    /// Waits for the background work started by finished turns (the daily reflections).
    pub async fn wait_for_background(&self) {
        let handles = std::mem::take(&mut *self.background.lock());
        for handle in handles {
            if let Err(e) = handle.await {
                tracing::warn!("background task failed: {e}");
            }
        }
    }

    /// The settings in force.
    pub fn settings(&self) -> &EngineSettings {
        &self.settings
    }

    /// What its skills give it now (a turn keeps the one it started with).
    pub fn loaded(&self) -> Arc<Loaded> {
        self.loaded.read().clone()
    }

    /// The skills it serves now.
    pub fn skills(&self) -> Arc<SkillSet> {
        self.loaded().skills.clone()
    }

    /// The tools it offers now.
    pub fn tools(&self) -> Tools {
        self.loaded().tools.clone()
    }

    /// Serves `skills` and the `tools` they offer from now on: turns and calls that started
    /// keep what they started with; providers, settings, histories, approval counts and the
    /// per-channel locks are untouched. [`Engine::skills_changed`] is told.
    pub fn swap_skills(&self, skills: Arc<SkillSet>, tools: Tools) {
        let loaded = Arc::new(Loaded::new(skills, tools, &self.settings));
        *self.loaded.write() = loaded;
        self.notify_skills_changed();
    }

    /// Tells [`Engine::skills_changed`]'s receivers.
    fn notify_skills_changed(&self) {
        self.changed.send_modify(|n| *n += 1);
    }

    /// The skills now, once none of those a turn may be offered is compiling
    /// ([`super::ready`]; on-demand skills excepted: a turn waits for one only when
    /// `load_skill` names it).
    pub(super) async fn ready_for_turn(&self) -> Result<Arc<Loaded>, NotReady> {
        self.ready(|loaded| loaded.compiling_for_turn()).await
    }

    /// The tools of the skill called `skill` once it is not compiling any more (an
    /// on-demand skill a turn loads).
    pub(super) async fn joined(&self, skill: &str) -> Result<Vec<String>, NotReady> {
        let loaded =
            self.ready(|loaded| loaded.skills.pending.iter().filter(|p| *p == skill).cloned().collect()).await?;
        let prefix = format!("{skill}__");
        Ok(loaded.tools.decls().into_iter().map(|d| d.name).filter(|name| name.starts_with(&prefix)).collect())
    }

    /// The skills now, once the skill a call of `name` belongs to is not compiling: a tool
    /// the skills offer now needs no wait, nor does a name no compiling skill could own (it
    /// is answered `unknown tool` at once).
    pub async fn ready_for_call(&self, name: &str) -> Result<Arc<Loaded>, NotReady> {
        self.ready(|loaded| match loaded.tools.find(name) {
            Some(_) => Vec::new(),
            None => super::ready::compiling_owner(&loaded.skills.pending, name),
        })
        .await
    }

    async fn ready(&self, waits_for: impl Fn(&Loaded) -> Vec<String>) -> Result<Arc<Loaded>, NotReady> {
        let bound = Duration::from_secs(self.settings.session.skills_wait_seconds);
        super::ready::wait(bound, self.skills_changed(), &self.gave_up, || {
            let loaded = self.loaded();
            let compiling = waits_for(&loaded);
            (loaded, compiling)
        })
        .await
    }

    /// The skills left compiling will not join (their load failed): turns and calls stop
    /// waiting for them and go on with the skills that serve (`/readyz` still says 503).
    pub fn stop_waiting_for_skills(&self) {
        self.gave_up.store(true, std::sync::atomic::Ordering::SeqCst);
        self.notify_skills_changed();
    }

    /// Changes at each [`Engine::swap_skills`].
    pub fn skills_changed(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// The persisted histories.
    pub fn history(&self) -> &History {
        &self.history
    }

    /// The key a channel's history and in-flight marker live under: the channel itself for
    /// a single agent, prefixed with the agent's name in multi-agent mode.
    pub fn conversation(&self, channel_id: &str) -> String {
        match &self.settings.agent {
            Some(agent) => format!("agent:{agent}/{channel_id}"),
            None => channel_id.to_owned(),
        }
    }

    /// A fresh tool budget, for an adapter that runs calls outside a turn (one MCP client
    /// session counts as one turn).
    pub fn tool_budget(&self) -> TurnBudget {
        TurnBudget::new(self.settings.tool_budget.clone())
    }

    /// Runs one call outside a turn, through the same path as the model's calls: the tool
    /// budget, the approval (levels, overrides, promotion, the adapter's `counterpart`), the
    /// deadline, the events. For adapters that serve tools directly (MCP serving, `call`).
    pub async fn call_tool(
        &self,
        call: Call,
        ctx: &CallContext,
        events: &dyn EventSink,
        counterpart: &dyn Counterpart,
        budget: &TurnBudget,
    ) -> ToolCallRecord {
        self.call_once(call, ctx, events, counterpart, budget, None).await.0
    }

    /// [`Engine::call_tool`], with the approval `given` by an earlier run of the call (when
    /// it covers this one); also whether the call stopped at a round of questions its
    /// counterpart answers with a later request.
    pub(super) async fn call_once(
        &self,
        call: Call,
        ctx: &CallContext,
        events: &dyn EventSink,
        counterpart: &dyn Counterpart,
        budget: &TurnBudget,
        given: Option<&super::gate::Given>,
    ) -> (ToolCallRecord, bool) {
        let loaded = match self.ready_for_call(&call.1).await {
            Ok(loaded) => loaded,
            Err(not_ready) => return (ToolCallRecord::not_ready(call, &not_ready), false),
        };
        let deadline = Deadline::starting_now(Duration::from_secs(self.settings.session.deadline_seconds));
        let tool_budget = budget;
        // The call serves this agent, whatever its caller knew (the conversation of a
        // per-conversation skill's state is the agent's).
        let stamped;
        let ctx = if ctx.agent == self.settings.agent {
            ctx
        } else {
            stamped = CallContext { agent: self.settings.agent.clone(), ..ctx.clone() };
            &stamped
        };
        let round = Round {
            tools: &loaded.tools,
            gate: &self.gate,
            deadline,
            ctx,
            events,
            counterpart,
            tool_budget,
            nesting: None,
            spent: &Spent::default(),
            durable: None,
            given,
            suspended: Default::default(),
        };
        let mut records = round.run(vec![call]).await;
        let suspended = round.suspended.load(std::sync::atomic::Ordering::Relaxed);
        (records.pop().expect("one record per call"), suspended)
    }

    /// Answers one message. Turns on the same channel run one after the other (the history
    /// is read at the start and written at the end); other channels run concurrently.
    pub async fn run_turn(
        &self,
        req: TurnRequest,
        events: &dyn EventSink,
        counterpart: &dyn Counterpart,
    ) -> Result<TurnResult, EngineError> {
        self.start_turn(req, events, counterpart, Start::Message).await
    }

    /// Finishes a turn another process wrote down while it waited for a person
    /// ([`Checkpoint`]), with the person's `outcome`: once the channel is free (the
    /// in-flight marker of a process that died expires after `inflight_ttl_seconds`), the
    /// round that waited runs with the decisions taken, and the turn goes on to its answer
    /// and its history, as if it had never stopped.
    /// `outcome`: the decision on the approval it waited on (`None` when it waited on an
    /// answer, which its counterpart gives when the question is asked again).
    pub async fn resume_turn(
        &self,
        checkpoint: Checkpoint,
        outcome: Option<super::checkpoint::Waited>,
        events: &dyn EventSink,
        counterpart: &dyn Counterpart,
    ) -> Result<TurnResult, EngineError> {
        if checkpoint.version != super::checkpoint::VERSION {
            return Err(EngineError::Resume(format!(
                "the turn was written down as version {} and this skillhost reads version {}",
                checkpoint.version,
                super::checkpoint::VERSION
            )));
        }
        let ids: Vec<String> = waited_on(&checkpoint.messages).into_iter().map(|(id, ..)| id).collect();
        let given = checkpoint.given(outcome, &ids);
        let (req, interrupted) = (checkpoint.request, checkpoint.interrupted);
        let start = Start::Resumed { messages: checkpoint.messages, given, interrupted };
        self.start_turn(req, events, counterpart, start).await
    }

    async fn start_turn(
        &self,
        req: TurnRequest,
        events: &dyn EventSink,
        counterpart: &dyn Counterpart,
        start: Start,
    ) -> Result<TurnResult, EngineError> {
        let Some(provider) = self.provider.clone() else { return Err(EngineError::NoProvider) };
        let conversation = self.conversation(&req.place());
        let lock = self.channel_lock(&conversation);
        let agent = self.settings.agent.as_deref().unwrap_or("default");
        let span = tracing::info_span!(
            "invoke_agent",
            otel.name = %format!("invoke_agent {agent}"),
            gen_ai.operation.name = "invoke_agent",
            gen_ai.agent.name = %agent,
            skillhost.channel = %req.channel_id,
            skillhost.adapter = events.adapter().unwrap_or("none"),
            skillhost.time_boxed = tracing::field::Empty,
            skillhost.outcome = tracing::field::Empty,
            otel.status_code = tracing::field::Empty,
        );
        let result = async {
            // Before the lock and the deadline: the wait is not charged to the turn.
            tokio::select! {
                ready = self.ready_for_turn() => ready?,
                () = self.stopping.cancelled() => return Err(EngineError::Stopped),
            };
            let _turn = lock.lock().await;
            let started = std::time::Instant::now();
            let result = match self.inflight.acquire(&conversation).await {
                Ok(mut held) => tokio::select! {
                    result = self.turn(&req, &conversation, &provider, events, counterpart, &mut held, start) => result,
                    () = self.stopping.cancelled() => Err(EngineError::Stopped),
                },
                Err(e) => Err(EngineError::InFlight(e)),
            };
            let outcome = match &result {
                Ok(r) if r.time_boxed => "time_boxed",
                Ok(_) => "completed",
                Err(_) => "failed",
            };
            crate::metrics::turn(self.settings.agent.as_deref(), outcome, started.elapsed());
            let current = tracing::Span::current();
            current.record("skillhost.outcome", outcome);
            if let Ok(r) = &result {
                current.record("skillhost.time_boxed", r.time_boxed);
            } else {
                current.record("otel.status_code", "ERROR");
            }
            result
        }
        .instrument(span)
        .await;
        self.release(&conversation, lock);
        result
    }

    fn channel_lock(&self, channel: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut channels = self.channels.lock();
        channels.entry(channel.to_owned()).or_default().clone()
    }

    /// Forgets the channel's lock when no other turn holds or awaits it. Clones are only
    /// made under the map lock, so the count is exact here.
    fn release(&self, channel: &str, lock: Arc<tokio::sync::Mutex<()>>) {
        let mut channels = self.channels.lock();
        if Arc::strong_count(&lock) == 2 {
            channels.remove(channel);
        }
    }

    /// The messages a turn starts from: the conversation and the person's message, or a turn
    /// written down (with the calls it waited on and what was decided meanwhile).
    async fn begin(&self, req: &TurnRequest, conversation: &str, start: Start) -> Result<Beginning, EngineError> {
        match start {
            Start::Message => {
                let mut messages = self.history.load(conversation).await?;
                messages.push(Message::user(req.message.clone()));
                Ok((messages, None, Given::default()))
            }
            Start::Resumed { mut messages, mut given, interrupted } => {
                let calls = waited_on(&messages);
                if calls.is_empty() {
                    return Err(EngineError::Resume("the turn written down has no calls waiting".into()));
                }
                if !interrupted {
                    return Ok((messages, Some(calls), given));
                }
                // The replica running the round died: its calls may have run. Each is
                // answered with its kept result, else as interrupted; none runs again.
                let results = calls
                    .into_iter()
                    .map(|call| {
                        let outcome =
                            given.results.remove(&call.0).unwrap_or_else(super::checkpoint::interrupted_outcome);
                        ToolCallRecord::unrun(call, outcome).to_block()
                    })
                    .collect();
                messages.push(Message { role: Role::User, content: results });
                Ok((messages, None, given))
            }
        }
    }

    /// The turn itself, under the channel lock. The budget starts once the lock is held, so
    /// a turn queued behind another is not born late.
    #[allow(clippy::too_many_arguments)]
    async fn turn(
        &self,
        req: &TurnRequest,
        conversation: &str,
        provider: &Arc<dyn Provider>,
        events: &dyn EventSink,
        counterpart: &dyn Counterpart,
        held: &mut Held,
        start: Start,
    ) -> Result<TurnResult, EngineError> {
        let deadline = Deadline::starting_now(Duration::from_secs(self.settings.session.deadline_seconds));
        let (mut messages, pending, given) = self.begin(req, conversation, start).await?;
        let durable = counterpart.durable().then(|| Durable::new(req.clone(), given));
        let loaded = self.loaded();
        let skills =
            TurnSkills::begin(&loaded.on_demand, &loaded.tools, &self.history, conversation, &messages).await?;
        // On-demand skills still compiling: waited for if the conversation loaded one
        // earlier, offered once they join either way.
        let compiling: Vec<String> = loaded.on_demand.compiling().map(str::to_owned).collect();
        for skill in compiling.iter().filter(|s| skills.carried.contains(*s)) {
            deadline.paused(self.joined(skill)).await?;
        }
        let system = self.system_prompt(&loaded, &skills).await;
        let ctx = CallContext {
            agent: self.settings.agent.clone(),
            user_id: req.user_id.clone(),
            route: RouteAttributes::from_host(&req.route),
            user_message: Some(req.message.clone()),
            ..CallContext::standalone(&req.channel_id)
        };
        let mut tools = loaded.with_sub_agents(&skills.tools);
        if !compiling.is_empty() {
            let shared = self.loaded.clone();
            let now = Arc::new(move || shared.read().tools.clone());
            tools = tools.with_last(Arc::new(crate::tools::Joining::new(now, compiling)));
        }
        let tool_budget = TurnBudget::new(self.settings.tool_budget.clone());
        let round = Round {
            tools: &tools,
            gate: &self.gate,
            deadline,
            ctx: &ctx,
            events,
            counterpart,
            tool_budget: &tool_budget,
            nesting: Some(Nesting { runner: self, chain: &[] }),
            spent: &Spent::default(),
            durable: durable.as_ref(),
            given: None,
            suspended: Default::default(),
        };
        let mut result = self.converse(provider, &system, &mut messages, &round, Some(held), pending).await?;
        if verifier::needed(&result.tool_calls) {
            self.verify(provider, &mut messages, &mut result).await;
        }
        // The history, and the loaded skills when they changed, are written in the same
        // commit that releases the channel's in-flight marker.
        let mut writes = vec![History::saving(conversation, &messages)?];
        writes.extend(skills.saving(conversation)?);
        held.release_with(writes).await?;
        if self.settings.learning.enabled && self.settings.learning.reflection {
            self.reflect(provider, req, &result);
        }
        Ok(result)
    }

    /// The model's rounds until it answers: each request with the tools the round offers,
    /// each round of calls answered; a forced wrap-up once the round's deadline or a tool
    /// budget is spent. `held`, the turn's in-flight marker, is refreshed before every request.
    pub(super) async fn converse(
        &self,
        provider: &Arc<dyn Provider>,
        system: &str,
        messages: &mut Vec<Message>,
        round: &Round<'_>,
        mut held: Option<&mut Held>,
        mut pending: Option<Vec<Call>>,
    ) -> Result<TurnResult, EngineError> {
        let (deadline, events, tool_budget) = (&round.deadline, round.events, round.tool_budget);
        let mut result = TurnResult {
            text: String::new(),
            rounds: 0,
            tool_calls: Vec::new(),
            time_boxed: false,
            usage: Default::default(),
        };
        result.text = loop {
            if let Some(held) = held.as_deref_mut() {
                held.refresh().await;
            }
            // A resumed turn first answers the calls it waited on.
            let calls = match pending.take() {
                Some(calls) => calls,
                None => {
                    if deadline.is_spent() {
                        result.time_boxed = true;
                        let wrapped = self.wrap_up(provider, system, messages, round, &mut result, TIME_SPENT);
                        break wrapped.await?.0;
                    }
                    result.rounds += 1;
                    events.emit(EngineEvent::RoundStarted);
                    let request = self.request(system, messages, tool_budget.offered(round.decls()));
                    let Ok(response) =
                        tokio::time::timeout_at(deadline.deadline().into(), self.complete(provider, &request, events))
                            .await
                    else {
                        continue; // the budget ran out mid-answer: the next pass wraps up
                    };
                    let response = response?;
                    result.usage += response.usage;
                    push_assistant(messages, response.content.clone());
                    let calls = calls_of(&response.content);
                    if calls.is_empty() {
                        break response.text();
                    }
                    calls
                }
            };
            if let Some(durable) = round.durable {
                durable.round_starts(messages);
            }
            let records = round.run(calls).await;
            messages
                .push(Message { role: Role::User, content: records.iter().map(ToolCallRecord::to_block).collect() });
            result.tool_calls.extend(records);
            // A refused call either gets one corrective round (the next request offers only
            // tools that can still run) or ends the loop with an honest partial answer.
            if tool_budget.after_round() == AfterRound::Synthesize {
                let (text, fell_back) =
                    self.wrap_up(provider, system, messages, round, &mut result, BUDGET_SPENT).await?;
                tool_budget.answered(fell_back);
                break text;
            }
        };
        // The tokens of this conversation, and of those nested in it (which added theirs).
        round.spent.add(result.usage);
        result.usage = round.spent.get();
        Ok(result)
    }

    /// Fact-checks the answer; an annotation replaces the text of the persisted answer too,
    /// so later turns see the warning the person saw. The annotation is not streamed: the
    /// answer has already gone out by the time it is checked.
    async fn verify(&self, provider: &Arc<dyn Provider>, messages: &mut [Message], result: &mut TurnResult) {
        let model = self.settings.verifier_model.as_deref().unwrap_or(&self.settings.model);
        let timeout = Duration::from_secs(self.settings.session.wrapup_timeout_seconds);
        let checked = verifier::check(provider.as_ref(), model, timeout, result.text.clone(), &result.tool_calls).await;
        if checked != result.text {
            verifier::replace_answer(messages, &checked);
            result.text = checked;
        }
    }

    /// Starts the daily reflection on the finished exchange, without waiting for it.
    fn reflect(&self, provider: &Arc<dyn Provider>, req: &TurnRequest, result: &TurnResult) {
        let exchange = reflection::Exchange::new(&req.channel_id, &req.message, &result.text, &result.tool_calls);
        let memory = self.settings.memory.clone();
        let handle = reflection::spawn(provider.clone(), self.settings.model.clone(), memory, exchange);
        let mut background = self.background.lock();
        background.retain(|h| !h.is_finished());
        background.push(handle);
    }

    /// The forced tools-free answer (tools declared, `tool_choice: none`) once the time budget
    /// or a tool budget is spent, asked with `why.instruction` and bounded by
    /// `wrapup_timeout_seconds`. Its tool calls, if the model makes any anyway, are dropped:
    /// nothing would answer them. The text, and whether it is `why.fallback` (no text came).
    async fn wrap_up(
        &self,
        provider: &Arc<dyn Provider>,
        system: &str,
        messages: &mut Vec<Message>,
        round: &Round<'_>,
        result: &mut TurnResult,
        why: WrapUp,
    ) -> Result<(String, bool), EngineError> {
        result.rounds += 1;
        let mut sent = messages.clone();
        match sent.last_mut() {
            Some(last) if last.role == Role::User => last.content.push(Block::Text(why.instruction.into())),
            _ => sent.push(Message::user(why.instruction)),
        }
        let events = round.events;
        events.emit(EngineEvent::RoundStarted);
        let mut request = self.request(system, &sent, round.decls());
        request.tool_choice = crate::llm::ToolChoice::None;
        let limit = Duration::from_secs(self.settings.session.wrapup_timeout_seconds);
        let content = match tokio::time::timeout(limit, self.complete(provider, &request, events)).await {
            Ok(response) => {
                let response = response?;
                result.usage += response.usage;
                response.content.into_iter().filter(|b| !matches!(b, Block::ToolUse { .. })).collect()
            }
            Err(_) => Vec::new(),
        };
        let text: String =
            content.iter().filter_map(|b| if let Block::Text(t) = b { Some(t.as_str()) } else { None }).collect();
        if text.is_empty() {
            events.emit(EngineEvent::TextDelta(why.fallback.into()));
            push_assistant(messages, vec![Block::Text(why.fallback.into())]);
            return Ok((why.fallback.into(), true));
        }
        push_assistant(messages, content);
        Ok((text, false))
    }

    fn request(&self, system: &str, messages: &[Message], tools: Vec<crate::llm::ToolDecl>) -> Request {
        let (model, max_tokens) = (self.settings.model.clone(), self.settings.max_tokens);
        let tool_choice = crate::llm::ToolChoice::Auto;
        Request { model, system: system.to_owned(), messages: messages.to_vec(), tools, tool_choice, max_tokens }
    }

    /// One LLM request, streaming its text to `events`.
    async fn complete(
        &self,
        provider: &Arc<dyn Provider>,
        request: &Request,
        events: &dyn EventSink,
    ) -> Result<Response, LlmError> {
        let mut sink = |Delta::Text(text)| events.emit(EngineEvent::TextDelta(text));
        let system = match provider.name() {
            "bedrock" => "aws.bedrock",
            other => other,
        };
        let span = tracing::info_span!(
            "chat",
            otel.name = %format!("chat {}", request.model),
            otel.kind = "client",
            gen_ai.operation.name = "chat",
            gen_ai.system = system,
            gen_ai.provider.name = system,
            gen_ai.request.model = %request.model,
            gen_ai.response.model = tracing::field::Empty,
            gen_ai.usage.input_tokens = tracing::field::Empty,
            gen_ai.usage.output_tokens = tracing::field::Empty,
            gen_ai.response.finish_reasons = tracing::field::Empty,
            error.type = tracing::field::Empty,
            otel.status_code = tracing::field::Empty,
        );
        let response = provider.complete(request, &mut sink).instrument(span.clone()).await;
        match &response {
            Ok(r) => {
                span.record("gen_ai.response.model", request.model.as_str());
                span.record("gen_ai.usage.input_tokens", r.usage.input_tokens);
                span.record("gen_ai.usage.output_tokens", r.usage.output_tokens);
                let finish = match &r.stop {
                    crate::llm::StopReason::EndTurn => "end_turn",
                    crate::llm::StopReason::ToolUse => "tool_use",
                    crate::llm::StopReason::MaxTokens => "max_tokens",
                    crate::llm::StopReason::Other(other) => other.as_str(),
                };
                span.record("gen_ai.response.finish_reasons", finish);
            }
            Err(e) => {
                let kind = match e {
                    LlmError::Status { status, .. } => format!("http_{status}"),
                    LlmError::Transport { .. } => "transport".to_owned(),
                    LlmError::Protocol { .. } => "protocol".to_owned(),
                };
                span.record("error.type", kind);
                span.record("otel.status_code", "ERROR");
            }
        }
        let tokens = response.as_ref().ok().map(|r| (r.usage.input_tokens, r.usage.output_tokens));
        crate::metrics::llm_request(provider.name(), &request.model, response.is_ok(), tokens);
        response
    }
}

/// Where a turn starts.
enum Start {
    /// A person's new message.
    Message,
    /// A turn written down while it waited, with the people's decisions on its round and
    /// the results of its calls that ran, and whether the replica running that round died
    /// while it ran ([`Checkpoint::interrupted`]).
    Resumed { messages: Vec<Message>, given: Given, interrupted: bool },
}

/// The tool calls of a model's message.
/// Where a turn's conversation begins: its messages, the calls a resumed round waited on,
/// and what that round is given.
pub(super) type Beginning = (Vec<Message>, Option<Vec<Call>>, Given);

/// The calls a conversation written down waits on: those of its last message, the model's.
pub(super) fn waited_on(messages: &[Message]) -> Vec<Call> {
    match messages.last() {
        Some(last) if last.role == Role::Assistant => calls_of(&last.content),
        _ => Vec::new(),
    }
}

fn calls_of(content: &[Block]) -> Vec<Call> {
    content
        .iter()
        .filter_map(|b| match b {
            Block::ToolUse { id, name, input } => Some((id.clone(), name.clone(), input.clone())),
            _ => None,
        })
        .collect()
}

/// Appends an assistant message unless it is empty: providers refuse empty messages.
fn push_assistant(messages: &mut Vec<Message>, content: Vec<Block>) {
    if !content.is_empty() {
        messages.push(Message::assistant(content));
    }
}
