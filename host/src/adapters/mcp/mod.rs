//! Skills served over MCP, an adapter like the API: every tool of the agent is an MCP tool
//! named as the model would see it (`skill__tool`), every skill prompt an MCP prompt. No LLM
//! is involved.
//!
//! Calls go through the engine's one call path ([`Engine::call_tool`]): the same approval
//! levels, overrides, auto-promotion, tool budget and refusal kinds as a chat. A call that
//! needs a person is put to the client's user through MCP elicitation (approve: a yes/no;
//! confirm: type the challenge) when the client declared that capability, and refused
//! otherwise; never silently executed. From protocol 2026-07-28 the question travels in an
//! `input_required` result instead of a request to the client ([`elicit`]). Each client
//! session is a channel of its own (`mcp-<id>`: what skills see as `channel_id`), and counts
//! as one turn for the tool budget. The session is the conversation of skills whose state
//! is per conversation up to 2025-11-25; from 2026-07-28, which has no sessions, the agent is
//! ([`ConversationBy`]).
//!
//! Protocol revisions: every one rmcp knows (2024-11-05 to 2026-07-28). `initialize` echoes
//! the client's revision when it has a handshake; else (an unknown one, or one without a
//! handshake) it answers 2025-11-25. From 2026-07-28 a client uses `server/discover` and
//! per-request metadata instead, and hears of list changes through `subscriptions/listen`.
//!
//! Beyond tools and prompts: logging (`logging/setLevel`; a skill's `log` records during a
//! call as `notifications/message`, [`logging`]), progress (`report-progress` as
//! `notifications/progress` when the call carries a token, [`notify`]), the skills' prompt and
//! reference files as read-only resources ([`resources`]), typed results, `outputSchema`
//! and `annotations` ([`content`]).

mod catalog;
mod content;
mod elicit;
mod http;
mod inquire;
mod logging;
mod names;
mod notify;
pub mod request_state;
pub mod resources;
mod served;
mod stdio;
pub mod tasks;

pub use http::http_app;

use crate::broker::UseRefused;
use crate::engine::gate::new_id;
use crate::engine::tool_budget::TurnBudget;
use crate::engine::{ApprovalOutcome, Counterpart, Engine, NoEvents, ResumeError};
use crate::person::{Replies, Round as AskRound, Unanswered};
use crate::sandbox::{CallContext, ConversationBy};
use parking_lot::Mutex;
use request_state::Refused;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CompleteRequestParams, CompleteResult, CompletionInfo,
    GetPromptRequestParams, GetPromptResponse, GetPromptResult, Implementation, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams, ProgressToken, Prompt,
    PromptMessage, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, Reference, Role,
    ServerCapabilities, ServerConfig, SubscribeRequestParams, SubscriptionFilter, UnsubscribeRequestParams,
};
use rmcp::service::{NotificationContext, Peer, RequestContext, RoleServer, SubscriptionContext, SubscriptionSink};
use rmcp::{ErrorData, ServerHandler};
use serde_json::Value;
use std::borrow::Cow;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The prefix of the channel ids of MCP client sessions.
pub const CHANNEL_PREFIX: &str = "mcp-";

struct Shared {
    engine: Arc<Engine>,
    /// `bot.name` (or the agent's name): the server's `serverInfo.name`.
    name: String,
    /// Connected clients, told when the tool list changes.
    peers: Mutex<Vec<Peer<RoleServer>>>,
    /// 2026-07-28 clients' open `subscriptions/listen` streams, told the same; keyed by a
    /// counter (request ids repeat across clients).
    listeners: Mutex<Vec<(u64, SubscriptionSink)>>,
    next_listener: AtomicU64,
    /// The keys that sign the `requestState` of approvals asked through `input_required`
    /// (2026-07-28), kept in the shared state store.
    keys: request_state::Keys,
    /// The Agent Skills catalog of the skill set last asked about: built once per set (a
    /// reload swaps the set), so a read neither rebuilds it from disk nor serves files that
    /// changed under the manifest it lists.
    catalog: Mutex<Option<(std::sync::Weak<crate::skills::SkillSet>, Arc<catalog::Catalog>)>>,
}

/// One client session: its own channel, tool budget and logging level.
struct Session {
    channel: String,
    budget: TurnBudget,
    threshold: Arc<logging::Threshold>,
}

/// The MCP server over an agent's engine; [`SkillServer::session`] makes one per client.
#[derive(Clone)]
pub struct SkillServer {
    shared: Arc<Shared>,
    session: Arc<Session>,
}

impl SkillServer {
    /// A server over `engine`, introducing itself as `name`. Whenever the engine's skills
    /// change ([`Engine::swap_skills`]: skills that finished compiling joined, or a reload),
    /// every connected client is told its tool and prompt lists changed.
    pub fn new(engine: Arc<Engine>, name: &str) -> Self {
        let budget = engine.tool_budget();
        let mut changes = engine.skills_changed();
        let grace = Duration::from_secs(engine.settings().human.timeout_seconds);
        let keys = request_state::Keys::new(engine.history().state().clone(), grace);
        let shared = Shared {
            engine,
            name: name.to_owned(),
            peers: Mutex::default(),
            listeners: Mutex::default(),
            next_listener: AtomicU64::default(),
            keys,
            catalog: Mutex::default(),
        };
        let session = Session { channel: session_channel(), budget, threshold: Arc::default() };
        let shared = Arc::new(shared);
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let server = Arc::downgrade(&shared);
            runtime.spawn(async move {
                while changes.changed().await.is_ok() {
                    let Some(shared) = server.upgrade() else { return };
                    tell_lists_changed(&shared).await;
                }
            });
        }
        SkillServer { shared, session: Arc::new(session) }
    }

    /// The same server for a new client session: a fresh channel and tool budget.
    pub fn session(&self) -> Self {
        let budget = self.engine().tool_budget();
        let session = Session { channel: session_channel(), budget, threshold: Arc::default() };
        SkillServer { shared: self.shared.clone(), session: Arc::new(session) }
    }

    /// The channel id of this session.
    pub fn channel(&self) -> &str {
        &self.session.channel
    }

    fn engine(&self) -> Arc<Engine> {
        self.shared.engine.clone()
    }

    /// The context a resource read or a prompt of a skill runs in: this session's channel,
    /// and from 2026-07-28 the agent as the conversation.
    fn served_context(&self, context: &RequestContext<RoleServer>) -> CallContext {
        let conversation_by = if elicit::inline(context) { ConversationBy::Agent } else { ConversationBy::Channel };
        let agent = self.shared.engine.settings().agent.clone();
        CallContext { agent, conversation_by, ..CallContext::standalone(&self.session.channel) }
    }

    /// The catalog of `skills`, built when first asked for this set.
    fn catalog(&self, skills: &Arc<crate::skills::SkillSet>) -> Arc<catalog::Catalog> {
        let mut cached = self.shared.catalog.lock();
        if let Some((set, catalog)) = cached.as_ref()
            && std::sync::Weak::ptr_eq(set, &Arc::downgrade(skills))
        {
            return catalog.clone();
        }
        let catalog = Arc::new(catalog::Catalog::of(skills));
        *cached = Some((Arc::downgrade(skills), catalog.clone()));
        catalog
    }

    /// `Ok` for a resource some skill serves (a file or one of its own), else not found.
    fn known_resource(&self, uri: &str) -> Result<(), ErrorData> {
        let skills = self.engine().skills();
        let file = uri.starts_with(resources::SCHEME)
            && (resources::read(&skills, uri).is_ok() || self.catalog(&skills).read(uri).is_some());
        if file || served::owner(&skills, uri).is_some() { Ok(()) } else { Err(served::not_found(uri)) }
    }

    /// Which `log` records of a call the client hears: the session's level up to 2025-11-25;
    /// from 2026-07-28, which has no sessions, the level the request names in its `_meta`
    /// (`io.modelcontextprotocol/logLevel`), and none without one.
    fn log_threshold(
        &self,
        request: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
        stateless: bool,
    ) -> Arc<logging::Threshold> {
        if !stateless {
            return self.session.threshold.clone();
        }
        let level = request.meta.as_ref().and_then(|m| m.log_level()).or_else(|| context.meta.log_level());
        Arc::new(logging::Threshold::of_request(level))
    }
}

/// `Err` when tool `name` needs a client capability the client did not declare: it does not
/// run.
fn needs_met(engine: &Engine, name: &str, context: &RequestContext<RoleServer>) -> Result<(), ErrorData> {
    let Some((skill, tool)) = crate::skills::skill::split_exposed(name) else { return Ok(()) };
    let skills = engine.skills();
    let Some(needs) = skills.skills.get(skill).and_then(|s| s.served.client_needs.get(tool)) else { return Ok(()) };
    match inquire::lacking(name, needs, context.client_capabilities().as_ref()) {
        Some(refusal) => Err(refusal),
        None => Ok(()),
    }
}

/// `Err` when tool `name` cannot run for this client: it needs a client capability the
/// client did not declare, or runs only as a task and the client did not declare the Tasks
/// extension. Else how it may run as a task.
fn admitted(
    engine: &Engine,
    name: &str,
    context: &RequestContext<RoleServer>,
) -> Result<Option<crate::skills::served::TaskSupport>, ErrorData> {
    needs_met(engine, name, context)?;
    let support = tasks::support(engine, name);
    match support.is_some_and(|s| s.required) && !tasks::declared(context) {
        true => Err(tasks::refusal()),
        false => Ok(support),
    }
}

/// From 2026-07-28: what a request's retry resumes.
struct Retry {
    /// The approval the call resumes with (its broker entry), if any.
    approval: Option<String>,
    /// The skill's rounds answered so far.
    rounds: Box<inquire::Rounds>,
}

/// Why a call has no approval: its client cannot be asked (no elicitation support).
const NO_ELICITATION: &str = "this MCP client cannot ask one (no elicitation support)";

/// What a call's run gives its handler: its record and the approval it ran with (when
/// resumed); or the refusal of its retry (JSON-RPC -32602, nothing ran).
type Ran = Result<(crate::engine::ToolCallRecord, Option<crate::engine::Given>), ErrorData>;

impl SkillServer {
    /// From 2026-07-28: what the request's `requestState` and `inputResponses` resume: an
    /// approval's answer, carried to the broker as the client's decision, or the skill's rounds
    /// answered so far (with the approval an earlier round ran with).
    async fn retry(
        &self,
        engine: &Engine,
        request: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
        input: &Value,
        bound: &inquire::Call<'_>,
    ) -> Result<Retry, ErrorData> {
        let keys = &self.shared.keys;
        let (state, responses) = (request.request_state.as_deref(), request.input_responses.as_ref());
        let capabilities = context.client_capabilities();
        if let Some(state) = state.filter(|s| request_state::peek(s).is_some_and(|c| !c.inquiry)) {
            let call = (request.name.as_ref(), input);
            let approval = elicit::answered(engine, keys, (state, responses), call).await;
            // The suite requires an error, not a result: nothing runs.
            let approval = approval.map_err(|refused| ErrorData::invalid_params(refused.to_string(), None))?;
            let rounds = inquire::Rounds::begin(engine, keys, bound, capabilities, None, None).await?;
            return Ok(Retry { approval, rounds: Box::new(rounds) });
        }
        let rounds = inquire::Rounds::begin(engine, keys, bound, capabilities, state, responses).await?;
        Ok(Retry { approval: rounds.approval(), rounds: Box::new(rounds) })
    }
}

/// Runs `call`: resumed with the approval an earlier run opened (decided at the broker since),
/// or afresh.
async fn run_call(
    engine: &Engine,
    approval: Option<&str>,
    call: crate::engine::round::Call,
    ctx: &CallContext,
    counterpart: &dyn Counterpart,
    budget: &TurnBudget,
) -> Ran {
    let Some(entry) = approval else {
        return Ok((engine.call_tool(call, ctx, &NoEvents, counterpart, budget).await, None));
    };
    let refused = match engine.resume_call(entry, call, ctx, &NoEvents, counterpart, budget).await {
        Ok(resumed) => return Ok((resumed.record, Some(resumed.given))),
        Err(ResumeError::Gone) => Refused::Expired.to_string(),
        Err(ResumeError::OtherCall) => Refused::OtherCall.to_string(),
        Err(ResumeError::Undecided | ResumeError::Use(UseRefused::Used)) => Refused::Replayed.to_string(),
        Err(running @ ResumeError::Use(UseRefused::Running)) => format!("invalid requestState: {running}"),
        Err(ResumeError::Unavailable(why) | ResumeError::Use(UseRefused::Unavailable(why))) => {
            Refused::Unavailable(why).to_string()
        }
    };
    Err(ErrorData::invalid_params(refused, None))
}

impl SkillServer {
    /// From 2026-07-28, for a client that declared the Tasks extension: the call as a task
    /// ([`tasks`]). A tool marked to run as one starts as a task; any other call runs in the
    /// request until it detaches or waits on a person (its approval is then the task's first
    /// input request), answered with its result, its next round (`input_required`), or its
    /// task. `None`: the client did not declare the extension.
    async fn as_task(
        &self,
        engine: &Arc<Engine>,
        request: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
        input: &Value,
        support: Option<crate::skills::served::TaskSupport>,
    ) -> Result<Option<CallToolResponse>, ErrorData> {
        if !elicit::inline(context) || !tasks::declared(context) {
            return Ok(None);
        }
        let name = request.name.to_string();
        let ctx =
            CallContext { conversation_by: ConversationBy::Agent, ..CallContext::standalone(&self.session.channel) };
        let detaches = support.is_some_and(|s| s.detaches);
        let starts_now = support.is_some_and(|s| !s.detaches);
        let capabilities = context.client_capabilities();
        let bound = inquire::Call { name: format!("tool:{name}"), arguments: input };
        let (approval, rounds) = match starts_now {
            true => (None, None),
            false => {
                let retry = self.retry(engine, request, context, input, &bound).await?;
                (retry.approval, Some(retry.rounds))
            }
        };
        let call = (format!("mcp-{}", context.id), name.clone(), input.clone());
        let owner = task_owner(engine, context);
        let side = tasks::TaskSide::new(engine.clone(), (&call, owner), &self.session.channel, capabilities, rounds);
        let created = match starts_now {
            true => Some(side.begin().await?),
            false => None,
        };
        let detached = side.on_detach();
        let detacher: Option<Arc<dyn crate::sandbox::Detacher>> = detaches.then(|| side.clone() as _);
        // The call runs in the background: a task outlives its request.
        let (done, outcome) = tokio::sync::oneshot::channel();
        let (runner_engine, session, runner) = (engine.clone(), self.session.clone(), side.clone());
        let ctx = CallContext { detacher, ..ctx };
        let work = tokio::spawn(async move {
            let run = run_call(&runner_engine, approval.as_deref(), call, &ctx, &*runner, &session.budget);
            let _ = done.send(runner.run(run).await);
        });
        match created {
            Some(created) => Ok(Some(CallToolResponse::Task(created))),
            None => self.detaching(engine, context, &side, &bound, (outcome, detached, work)).await.map(Some),
        }
    }

    /// The answer to a call that may detach (running as `work`): its result or next round
    /// when it ends first (`outcome`), its task when it detaches first (`detached`).
    async fn detaching(
        &self,
        engine: &Engine,
        context: &RequestContext<RoleServer>,
        side: &tasks::TaskSide,
        bound: &inquire::Call<'_>,
        (outcome, mut detached, work): Detaching,
    ) -> Result<CallToolResponse, ErrorData> {
        let task = |begun: Result<rmcp::model::CreateTaskResult, ErrorData>| begun.map(CallToolResponse::Task);
        let outcome = tokio::select! {
            outcome = outcome => outcome.ok().flatten(),
            begun = &mut detached => {
                return begun.map_err(|_| ErrorData::internal_error("the call ended as it detached", None)).and_then(task);
            }
            () = context.ct.cancelled() => {
                work.abort();
                return Err(ErrorData::new(rmcp::model::ErrorCode(-32800), "the request was cancelled", None));
            }
        };
        let Some(ran) = outcome else {
            // It became a task (and ended) before its answer was read.
            let begun = detached.await.map_err(|_| ErrorData::internal_error("the call ended without a result", None));
            return begun.and_then(task);
        };
        self.answer(engine, ran?, side.rounds(), bound).await
    }
}

impl SkillServer {
    /// The answer to a call that ran (`bound`: its tool and arguments): the approval it waits
    /// on, the next round of the skill's questions, or its result.
    async fn answer(
        &self,
        engine: &Engine,
        (record, given): (crate::engine::ToolCallRecord, Option<crate::engine::Given>),
        rounds: Option<&inquire::Rounds>,
        bound: &inquire::Call<'_>,
    ) -> Result<CallToolResponse, ErrorData> {
        let (keys, name) = (&self.shared.keys, request_name(bound));
        // The call waits on its approval, which the client's retry answers.
        if let Some(ApprovalOutcome::Suspended(entry)) = &record.approval {
            let until = std::time::SystemTime::now() + Duration::from_secs(engine.settings().human.timeout_seconds);
            return Ok(elicit::ask(keys, entry, (&name, bound.arguments, record.level), until).await?.into());
        }
        // The skill stopped at a round its client answers in a retry.
        if let Some(rounds) = rounds
            && let Some(ask) = next_round(engine, keys, rounds, given.as_ref(), bound).await?
        {
            return Ok(ask.into());
        }
        let skills = engine.skills();
        Ok(content::result(&record.outcome, content::spec_of(&skills, &name)).into())
    }
}

/// The next round of a call that stopped at one its client answers in a retry (carrying the
/// approval the call ran with, if it was approved); `None` when it did not stop.
async fn next_round(
    engine: &Engine,
    keys: &request_state::Keys,
    rounds: &inquire::Rounds,
    given: Option<&crate::engine::Given>,
    bound: &inquire::Call<'_>,
) -> Result<Option<rmcp::model::InputRequiredResult>, ErrorData> {
    if let Some(given) = given.filter(|g| g.outcome == ApprovalOutcome::Approved) {
        rounds.carry(&given.entry, given.expires_at);
    }
    rounds.finish(engine, keys, bound).await
}

/// What a detaching call's handler waits on: the call's outcome (`None` once it is a task),
/// its task, and the call itself.
type Detaching = (
    tokio::sync::oneshot::Receiver<Option<Ran>>,
    tokio::sync::oneshot::Receiver<Result<rmcp::model::CreateTaskResult, ErrorData>>,
    tokio::task::JoinHandle<()>,
);

/// The progress token of a call: in its params' `_meta`, or the request's.
fn progress_token(request: &CallToolRequestParams, context: &RequestContext<RoleServer>) -> Option<ProgressToken> {
    request.meta.as_ref().and_then(|m| m.get_progress_token()).or_else(|| context.meta.get_progress_token())
}

/// The tool a bound call names (`tool:<name>`).
fn request_name(bound: &inquire::Call<'_>) -> String {
    bound.name.strip_prefix("tool:").unwrap_or(&bound.name).to_owned()
}

impl SkillServer {
    /// Runs a skill's resource read or prompt (`work`, given its context) with its `ask`
    /// rounds answered by the client: on the session up to 2025-11-25; from 2026-07-28 from
    /// the `retry` (its state and responses), or stopped at the first round the client must
    /// answer (`Err`: the question to answer the request with).
    async fn answering<T, F>(
        &self,
        context: &RequestContext<RoleServer>,
        bound: &inquire::Call<'_>,
        retry: (Option<&str>, Option<&rmcp::model::InputResponses>),
        work: impl FnOnce(CallContext) -> F,
    ) -> Result<Result<T, rmcp::model::InputRequiredResult>, ErrorData>
    where
        F: std::future::Future<Output = Result<T, ErrorData>>,
    {
        let engine = self.engine();
        let (inquirer, inquiries) = crate::sandbox::Inquirer::pair();
        let ctx = CallContext { inquirer: Some(inquirer), ..self.served_context(context) };
        let timeout = Duration::from_secs(engine.settings().human.timeout_seconds);
        if !elicit::inline(context) {
            let ask = |round: AskRound| async move {
                let asked = tokio::time::timeout(timeout, inquire::on_session(context, &round)).await;
                asked.map_err(|_| Unanswered::TimedOut)
            };
            return inquiries.answering(work(ctx), ask).await.map(Ok);
        }
        let (keys, capabilities) = (&self.shared.keys, context.client_capabilities());
        let rounds = inquire::Rounds::begin(&engine, keys, bound, capabilities, retry.0, retry.1).await?;
        let out = inquiries.answering(work(ctx), |round| std::future::ready(rounds.inquire(round))).await;
        match rounds.finish(&engine, keys, bound).await? {
            Some(question) => Ok(Err(question)),
            None => out.map(Ok),
        }
    }
}

/// The error for a task this agent does not have (or has forgotten).
/// Who keeps the tasks a request makes and reads: the agent, or, when the HTTP server takes
/// several tokens, the agent and the request's token ([`http::TaskOwner`]): another token's
/// task is not found.
fn task_owner(engine: &Engine, context: &RequestContext<RoleServer>) -> String {
    let parts = context.extensions.get::<axum::http::request::Parts>();
    match parts.and_then(|p| p.extensions.get::<Option<http::TaskOwner>>()).cloned().flatten() {
        Some(http::TaskOwner(token)) => format!("{}#{token}", engine.agent()),
        None => engine.agent().to_owned(),
    }
}

fn unknown_task(id: &str) -> ErrorData {
    ErrorData::invalid_params(format!("no task `{id}` (unknown, or past its time to live)"), None)
}

/// The error for a task that cannot be read now.
fn unreadable(e: crate::broker::BrokerError) -> ErrorData {
    ErrorData::internal_error(format!("the task cannot be read: {e}"), None)
}

/// Tells every connected client that the tool, prompt and resource lists changed.
async fn tell_lists_changed(shared: &Shared) {
    let peers = {
        let mut peers = shared.peers.lock();
        peers.retain(|p| !p.is_transport_closed());
        peers.clone()
    };
    for peer in peers {
        let _ = peer.notify_tool_list_changed().await;
        let _ = peer.notify_prompt_list_changed().await;
        let _ = peer.notify_resource_list_changed().await;
    }
    let listeners = shared.listeners.lock().clone();
    for (_, sink) in listeners {
        let _ = sink.notify_tool_list_changed().await;
        let _ = sink.notify_prompt_list_changed().await;
        let _ = sink.notify_resource_list_changed().await;
    }
}

/// `mcp-<random>`, or `mcp-<pid>-<n>` in the unlikely case the OS random source fails (a
/// channel id names a conversation; it grants nothing).
fn session_channel() -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    match new_id() {
        Ok(id) => format!("{CHANNEL_PREFIX}{}", &id[..16]),
        Err(_) => format!("{CHANNEL_PREFIX}{}-{n}", std::process::id()),
    }
}

/// The client's user, at the person broker: the gate opens a gated call's approval there
/// (surface `mcp`, this session's conversation), and this presents it: up to 2025-11-25 as
/// `elicitation/create`, whose answer it carries to the broker; from 2026-07-28 the entry
/// suspends the call, and the client's retry carries the answer ([`elicit::answered`]). A
/// client without elicitation cannot be asked. A skill's own rounds go to the client
/// likewise ([`inquire`]).
struct Elicit<'a> {
    engine: &'a Engine,
    /// The request.
    context: &'a RequestContext<RoleServer>,
    /// Who asks: this session's conversation, the call as its run.
    scope: crate::broker::Scope,
    /// The call (what an elicitation shows).
    call: &'a crate::engine::round::Call,
    /// From 2026-07-28: the skill's rounds, answered from the retry.
    rounds: Option<&'a inquire::Rounds>,
}

impl<'a> Elicit<'a> {
    fn new(
        engine: &'a Engine,
        context: &'a RequestContext<RoleServer>,
        channel: &str,
        call: &'a crate::engine::round::Call,
        rounds: Option<&'a inquire::Rounds>,
    ) -> Self {
        let scope = crate::broker::Scope::new(engine.agent(), elicit::SURFACE, channel, &call.0);
        Elicit { engine, context, scope, call, rounds }
    }
}

#[async_trait::async_trait]
impl Counterpart for Elicit<'_> {
    fn desk(&self) -> Option<crate::engine::desk::Desk> {
        let desk = crate::engine::desk::Desk::new(self.engine.broker(), self.scope.clone());
        let answers_later = elicit::inline(self.context);
        elicit::can_elicit(self.context).then_some(crate::engine::desk::Desk { answers_later, ..desk })
    }

    fn unattended(&self) -> ApprovalOutcome {
        ApprovalOutcome::Unavailable(NO_ELICITATION.into())
    }

    /// Up to 2025-11-25: the approval asked as `elicitation/create` on the session, and the
    /// answer carried to the broker as the client's decision.
    async fn present(&self, entry: &crate::broker::Entry, _: bool) -> Result<(), crate::engine::PresentError> {
        if entry.kind != crate::broker::Kind::Approval {
            // A question (an MCP server's elicitation during the call) is not put to the client.
            return Err(crate::engine::PresentError::new(elicit::NotAsked));
        }
        if elicit::inline(self.context) {
            return Ok(());
        }
        let level = elicit::level_of(entry);
        let question = elicit::question(&self.call.1, &self.call.2, level).map_err(crate::engine::PresentError::new)?;
        let answer = self.context.peer.create_elicitation(question).await.map_err(crate::engine::PresentError::new)?;
        let desk = crate::engine::desk::Desk::new(self.engine.broker(), self.scope.clone());
        desk.carry(&entry.id, elicit::CLIENT, elicit::decision(Some(&answer), level)).await
    }

    async fn inquire(&self, round: &AskRound) -> Option<Result<Replies, Unanswered>> {
        Some(match self.rounds {
            Some(rounds) => rounds.inquire(round.clone()),
            None => Ok(inquire::on_session(self.context, round).await),
        })
    }
}

impl ServerHandler for SkillServer {
    // Logging is deprecated in rmcp (SEP-2577), not in the revisions our clients speak.
    #[allow(deprecated)]
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_prompts()
            .enable_prompts_list_changed()
            .enable_resources()
            .enable_resources_list_changed()
            .enable_resources_subscribe()
            .enable_completions()
            .enable_logging()
            .enable_tasks()
            .enable_skills_with_directory_read()
            .build();
        // The protocol version stays rmcp's latest: `initialize` negotiates it (module docs).
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new(self.shared.name.clone(), env!("CARGO_PKG_VERSION")))
            .with_instructions("Tools of WebAssembly skills run by skillhost.")
    }

    async fn get_task(
        &self,
        request: rmcp::model::GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::GetTaskResult, ErrorData> {
        let engine = self.engine();
        let entry = engine.broker().task(&request.task_id, &task_owner(&engine, &context)).await.map_err(unreadable)?;
        let entry = entry.ok_or_else(|| unknown_task(&request.task_id))?;
        Ok(rmcp::model::GetTaskResult::new(tasks::detailed(&entry)))
    }

    async fn update_task(
        &self,
        request: rmcp::model::UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let engine = self.engine();
        let responses = tasks::responses(&request.input_responses);
        match engine.broker().task_answer(&request.task_id, &task_owner(&engine, &context), &responses).await {
            Ok(true) => Ok(()),
            Ok(false) => Err(unknown_task(&request.task_id)),
            Err(e) => Err(unreadable(e)),
        }
    }

    async fn cancel_task(
        &self,
        request: rmcp::model::CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let engine = self.engine();
        match engine.broker().task_cancel(&request.task_id, &task_owner(&engine, &context)).await {
            Ok(true) => Ok(()),
            Ok(false) => Err(unknown_task(&request.task_id)),
            Err(e) => Err(unreadable(e)),
        }
    }

    async fn list_skills(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListSkillsResult, ErrorData> {
        let catalog = self.catalog(&self.engine().skills());
        Ok(rmcp::model::ListSkillsResult::with_all_items(catalog.skills.clone()))
    }

    async fn get_skill(
        &self,
        request: rmcp::model::GetSkillRequestParams,
        _: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::GetSkillResult, ErrorData> {
        let catalog = self.catalog(&self.engine().skills());
        Ok(rmcp::model::GetSkillResult::new(catalog.get(&request.uri)?))
    }

    async fn read_resource_directory(
        &self,
        request: rmcp::model::ReadResourceDirectoryRequestParams,
        _: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ReadResourceDirectoryResult, ErrorData> {
        let catalog = self.catalog(&self.engine().skills());
        Ok(rmcp::model::ReadResourceDirectoryResult::with_all_items(catalog.directory(&request.uri)?))
    }

    fn accepted_subscription_filter(&self, _: &SubscriptionFilter) -> Option<SubscriptionFilter> {
        Some(SubscriptionFilter::builder().tools_list_changed().prompts_list_changed().resources_list_changed().build())
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let key = self.shared.next_listener.fetch_add(1, Ordering::Relaxed);
        self.shared.listeners.lock().push((key, context.sink().clone()));
        // Cancelled when the client ends the subscription or goes away.
        context.cancelled().await;
        self.shared.listeners.lock().retain(|(k, _)| *k != key);
        Ok(())
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        self.shared.peers.lock().push(context.peer);
    }

    async fn list_tools(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let engine = self.engine();
        let (skills, overrides) = (engine.skills(), &engine.settings().human.overrides);
        let tools = engine.tools().decls().into_iter().map(|d| {
            let mut tool = content::tool(d, &skills, overrides);
            if let Some(bare) = names::bare(&skills, &tool.name) {
                tool.name = Cow::Owned(bare.to_owned());
            }
            tool
        });
        Ok(ListToolsResult::with_all_items(tools.collect()))
    }

    async fn call_tool(
        &self,
        mut request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let engine = self.engine();
        // A bare name (`[mcp] names = "bare"`) is the model's `<skill>__<tool>` from here on.
        if let Some(exposed) = names::exposed(&engine.skills(), &request.name) {
            request.name = Cow::Owned(exposed);
        }
        // A tool of a skill still compiling is waited for (bounded), as a turn waits; past
        // the bound the call fails as a tool that cannot run now.
        let loaded = match engine.ready_for_call(&request.name).await {
            Ok(loaded) => loaded,
            Err(not_ready) => {
                let text = rmcp::model::ContentBlock::text(not_ready.to_string());
                return Ok(rmcp::model::CallToolResult::error(vec![text]).into());
            }
        };
        // The spec's protocol error for a tool the server does not have (a tool that fails
        // is an `isError` result instead).
        if loaded.tools.find(&request.name).is_none() {
            return Err(ErrorData::invalid_params(format!("Unknown tool: {}", request.name), None));
        }
        let support = admitted(&engine, &request.name, &context)?;
        let input = Value::Object(request.arguments.clone().unwrap_or_default());
        if let Some(response) = self.as_task(&engine, &request, &context, &input, support).await? {
            return Ok(response);
        }
        let token = progress_token(&request, &context);
        let inline = elicit::inline(&context);
        let (direct, threshold) = (context.extensions.get(), self.log_threshold(&request, &context, inline));
        let forwarding = notify::Forwarding::start(context.peer.clone(), direct, threshold, token);
        // Up to 2025-11-25 a session is a conversation; from 2026-07-28 a request belongs to
        // no session, and the agent is the one conversation.
        let conversation_by = if inline { ConversationBy::Agent } else { ConversationBy::Channel };
        let ctx = CallContext {
            observer: Some(forwarding.observer()),
            conversation_by,
            ..CallContext::standalone(&self.session.channel)
        };
        let name = request.name.to_string();
        let bound = inquire::Call { name: format!("tool:{name}"), arguments: &input };
        let (approval, rounds) = match inline {
            true => {
                let retry = self.retry(&engine, &request, &context, &input, &bound).await?;
                (retry.approval, Some(retry.rounds))
            }
            false => (None, None),
        };
        let call = (format!("mcp-{}", context.id), name.clone(), input.clone());
        let counterpart = Elicit::new(&engine, &context, &self.session.channel, &call, rounds.as_deref());
        // `notifications/cancelled` cancels the token: dropping the call drops the guest's
        // store, which stops it; no result is sent for a cancelled request.
        let run = run_call(&engine, approval.as_deref(), call.clone(), &ctx, &counterpart, &self.session.budget);
        let ran = tokio::select! {
            ran = run => Some(ran),
            () = context.ct.cancelled() => None,
        };
        drop(ctx);
        // Every note of the call reaches the client before its result.
        forwarding.finish().await;
        let Some(ran) = ran else {
            return Err(ErrorData::new(rmcp::model::ErrorCode(-32800), "the request was cancelled", None));
        };
        self.answer(&engine, ran?, rounds.as_deref(), &bound).await
    }

    // Logging is deprecated in rmcp (SEP-2577), not in the revisions our clients speak.
    #[allow(deprecated)]
    async fn set_level(
        &self,
        request: rmcp::model::SetLevelRequestParams,
        _: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.session.threshold.set(request.level);
        Ok(())
    }

    async fn list_resources(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let skills = self.engine().skills();
        // A skill's SKILL.md is listed once, as the Skills extension serves it (by the name it
        // is served under); under its host name it is still read.
        let catalog = self.catalog(&skills);
        let mut listed: Vec<_> = resources::list(&skills).into_iter().filter(|r| !catalog.lists(&r.uri)).collect();
        for file in catalog.listed() {
            if !listed.iter().any(|r| r.uri == file.uri) {
                listed.push(file);
            }
        }
        listed.sort_by(|a, b| a.uri.cmp(&b.uri));
        listed.extend(served::resources(&skills));
        Ok(ListResourcesResult::with_all_items(listed))
    }

    async fn list_resource_templates(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Ok(ListResourceTemplatesResult::with_all_items(served::templates(&self.engine().skills())))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let skills = self.engine().skills();
        if request.uri.starts_with(resources::SCHEME) {
            if let Some(file) = self.catalog(&skills).read(&request.uri) {
                return Ok(ReadResourceResult::new(vec![file]).into());
            }
            return Ok(ReadResourceResult::new(vec![resources::read(&skills, &request.uri)?]).into());
        }
        let skill = served::owner(&skills, &request.uri).ok_or_else(|| served::not_found(&request.uri))?;
        let bound = inquire::Call { name: format!("resource:{}", request.uri), arguments: &Value::Null };
        let retry = (request.request_state.as_deref(), request.input_responses.as_ref());
        let read = |ctx: CallContext| async move { served::read(skill, &request.uri, &ctx).await };
        match self.answering(&context, &bound, retry, read).await? {
            Ok(contents) => Ok(ReadResourceResult::new(contents).into()),
            Err(question) => Ok(question.into()),
        }
    }

    // A subscription is accepted for a resource that is served; a skill's resources change
    // only when its skills are reloaded, which `notifications/resources/list_changed` tells.
    async fn subscribe(&self, request: SubscribeRequestParams, _: RequestContext<RoleServer>) -> Result<(), ErrorData> {
        self.known_resource(&request.uri)
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.known_resource(&request.uri)
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        _: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        let skills = self.engine().skills();
        let values = match &request.r#ref {
            Reference::Prompt(reference) => match served::prompt(&skills, &reference.name) {
                Some((skill, prompt)) => {
                    let context = request.context.and_then(|c| c.arguments).unwrap_or_default();
                    let (argument, value) = (&request.argument.name, &request.argument.value);
                    skill.complete(prompt, argument, value, context.into_iter().collect()).await
                }
                None => Vec::new(),
            },
            _ => Vec::new(),
        };
        let info = CompletionInfo::new(values).map_err(|e| ErrorData::internal_error(e, None))?;
        Ok(CompleteResult::new(info))
    }

    async fn list_prompts(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let engine = self.engine();
        let skills = engine.skills();
        let prompts = skills.skills.values().filter(|s| !s.prompt.body.trim().is_empty()).map(|s| {
            let description = if s.prompt.description.is_empty() {
                format!("The prompt of skill `{}`", s.name)
            } else {
                s.prompt.description.clone()
            };
            Prompt::new(s.name.clone(), Some(description), None)
        });
        Ok(ListPromptsResult::with_all_items(prompts.chain(served::prompts(&skills)).collect()))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let engine = self.engine();
        let skills = engine.skills();
        if let Some((skill, prompt)) = served::prompt(&skills, &request.name) {
            // Argument values are strings; anything else is passed as its JSON text.
            let text = |v: Value| match v {
                Value::String(s) => s,
                other => other.to_string(),
            };
            let given = Value::Object(request.arguments.clone().unwrap_or_default());
            let arguments: Vec<_> =
                request.arguments.unwrap_or_default().into_iter().map(|(k, v)| (k, text(v))).collect();
            let bound = inquire::Call { name: format!("prompt:{}", request.name), arguments: &given };
            let retry = (request.request_state.as_deref(), request.input_responses.as_ref());
            let get = |ctx: CallContext| async move { served::get(skill, prompt, arguments, &ctx).await };
            return match self.answering(&context, &bound, retry, get).await? {
                Ok(result) => Ok(result.into()),
                Err(question) => Ok(question.into()),
            };
        }
        let skill = skills
            .skills
            .get(&request.name)
            .ok_or_else(|| ErrorData::invalid_params(format!("no prompt `{}`", request.name), None))?;
        let message = PromptMessage::new_text(Role::User, skill.prompt.body.clone());
        let result =
            GetPromptResult::new(vec![message]).with_description(format!("The prompt of skill `{}`", skill.name));
        Ok(result.into())
    }
}
/// Serves `server` on stdin/stdout until stdin ends; no input line ends it ([`stdio`]).
///
/// The front runs as a task of the runtime, not in the caller's `block_on`: then a line read,
/// the call it starts and the answer written stay on one worker thread, instead of a wake-up
/// of another thread for each hop (a futex, and on a virtual machine an interrupt between
/// cores).
pub async fn stdio(server: SkillServer) -> anyhow::Result<()> {
    match tokio::spawn(stdio::serve(server)).await {
        Ok(served) => served,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(e) => Err(anyhow::anyhow!("serving stdio stopped: {e}")),
    }
}
