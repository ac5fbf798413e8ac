//! What a `Store` holds for one call: WASI (deny-by-default), the memory limiter, the skill's
//! granted capabilities, and the call's log buffer and route attributes.

use super::capabilities::{Capabilities, SKILL_FOLDER, SkillFiles};
use super::clock::Clock;
use super::component::CallEnv;
use super::inquirer::Inquirer;
use super::limits::{Limits, MemoryLimiter};
use super::observer::Observer;
use super::output::{LogBuffer, LogRecord};
use crate::store::state::Conversation;
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::sync::Arc;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

/// The routing attributes of one turn, shared by every call in it.
#[derive(Debug, Clone, Default)]
pub struct RouteAttributes(Arc<Mutex<BTreeMap<String, String>>>);

/// At most this many attributes per turn.
pub const MAX_ROUTE_ATTRIBUTES: usize = 64;

impl RouteAttributes {
    /// A snapshot, for `call-context.route`.
    pub fn snapshot(&self) -> Vec<(String, String)> {
        let map = self.0.lock();
        map.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
    }

    /// A turn's attributes as the host attaches them; those [`RouteAttributes::set`] would
    /// drop are dropped (adapters check them first: [`RouteAttributes::check`]).
    pub fn from_host(attributes: &[(String, String)]) -> Self {
        let route = RouteAttributes::default();
        for (key, value) in attributes {
            route.set(key.clone(), value.clone());
        }
        route
    }

    /// Why `attributes` cannot all be a turn's attributes, if they cannot.
    pub fn check(attributes: &[(String, String)]) -> Result<(), String> {
        if attributes.len() > MAX_ROUTE_ATTRIBUTES {
            return Err(format!("at most {MAX_ROUTE_ATTRIBUTES} route attributes"));
        }
        match attributes.iter().find(|(k, v)| !fits(k, v)) {
            Some((key, _)) => {
                Err(format!("route attribute `{key}`: keys are 1 to {MAX_KEY} bytes, values at most {MAX_VALUE} bytes"))
            }
            None => Ok(()),
        }
    }

    /// Sets one attribute. Oversized keys or values, and attributes past the cap, are
    /// dropped (the caller logs it).
    pub fn set(&self, key: String, value: String) -> bool {
        let mut map = self.0.lock();
        if !fits(&key, &value) || (map.len() >= MAX_ROUTE_ATTRIBUTES && !map.contains_key(&key)) {
            return false;
        }
        map.insert(key, value);
        true
    }
}

/// The longest route attribute key, in bytes.
const MAX_KEY: usize = 128;
/// The longest route attribute value, in bytes.
const MAX_VALUE: usize = 4096;

fn fits(key: &str, value: &str) -> bool {
    !key.is_empty() && key.len() <= MAX_KEY && value.len() <= MAX_VALUE
}

/// What one conversation is, for a skill whose state is per conversation
/// (`[capabilities] state = "conversation"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ConversationBy {
    /// The agent and the channel: every front door but one.
    #[default]
    Channel,
    /// The agent alone: MCP from revision 2026-07-28, whose requests belong to no session.
    Agent,
}

/// Who is calling: agent, channel, user, config and the turn's route attributes.
#[derive(Debug, Clone)]
pub struct CallContext {
    /// The skill's config block, as JSON.
    pub config: serde_json::Value,
    /// The agent the call serves (`None`: the config's top-level agent). The engine sets it
    /// ([`crate::engine::Engine::call_tool`], and the turns it builds).
    pub agent: Option<String>,
    /// The channel the message came from.
    pub channel_id: String,
    /// What the call's conversation is, for the `state` import.
    pub conversation_by: ConversationBy,
    /// The user, when known.
    pub user_id: Option<String>,
    /// The turn's routing attributes.
    pub route: RouteAttributes,
    /// The text of the turn's incoming message; `None` outside a turn.
    pub user_message: Option<String>,
    /// Who hears the call's log records and progress as it runs (an MCP client's session);
    /// `None` for everyone else.
    pub observer: Option<Observer>,
    /// Who answers the call's `ask` rounds (the person, the MCP client); `None`: nobody.
    pub inquirer: Option<Inquirer>,
    /// Who takes the call on as a task when its tool detaches (`tasks.detach`); `None`: the
    /// call cannot go on as one.
    pub detacher: Option<Arc<dyn Detacher>>,
}

/// Who takes a call on as a task of the MCP Tasks extension when its tool calls
/// `tasks.detach`: the MCP adapter, for a tool that may and a client that declared the
/// extension. The sandbox knows nothing of tasks.
#[async_trait::async_trait]
pub trait Detacher: Send + Sync + std::fmt::Debug {
    /// The call goes on as a task from here (recorded before this returns `true`); `false`
    /// when it cannot, and the call goes on as it is.
    async fn detach(&self) -> bool;
}

impl CallContext {
    /// A context for a call outside any conversation (CLI `call`, tests, benchmarks).
    pub fn standalone(channel_id: &str) -> Self {
        CallContext {
            config: serde_json::json!({}),
            agent: None,
            channel_id: channel_id.into(),
            conversation_by: ConversationBy::Channel,
            user_id: None,
            route: RouteAttributes::default(),
            user_message: None,
            observer: None,
            inquirer: None,
            detacher: None,
        }
    }

    /// The conversation the call serves: the agent, and the channel unless the conversation
    /// is the agent as a whole.
    pub fn conversation(&self) -> Conversation {
        let channel = match self.conversation_by {
            ConversationBy::Channel => Some(self.channel_id.clone()),
            ConversationBy::Agent => None,
        };
        Conversation { agent: self.agent.clone(), channel }
    }
}

/// The data of one call's `Store`.
pub struct HostState {
    wasi: WasiCtx,
    table: ResourceTable,
    pub(crate) limiter: MemoryLimiter,
    pub(crate) caps: Arc<Capabilities>,
    pub(crate) logs: LogBuffer,
    pub(crate) route: RouteAttributes,
    /// The conversation the call serves (the `state` import's namespace); `None` for the
    /// lifecycle hooks, which serve none.
    pub(crate) conversation: Option<Conversation>,
    /// What is being run, for log attribution.
    pub(crate) operation: String,
    /// The call's wall-clock deadline, stopped while the call waits for a person.
    pub(crate) deadline: Clock,
    /// The call's limits (the host imports read the skill's storage quotas from them).
    pub(crate) limits: Limits,
    /// Who hears the call's log records and progress (`handle` calls only).
    pub(crate) observer: Option<Observer>,
    /// Messages sent so far (the `notify` import's per-call cap).
    pub(crate) notices: u32,
    /// The result's blocks the call set (`blocks.set-result-blocks`), taken when it returns.
    pub(crate) result_blocks: Option<Vec<crate::sandbox::bindings::skillhost::skill::blocks::Block>>,
    /// Who answers the call's `ask` rounds; `None`: nobody can be asked.
    pub(crate) inquirer: Option<Inquirer>,
    /// Who takes the call on as a task (`tasks.detach`), until it did.
    pub(crate) detacher: Option<Arc<dyn Detacher>>,
}

impl HostState {
    /// The data of a fresh store for a call of a skill component; [`HostState::begin`] names
    /// the call and starts its deadline.
    pub(crate) fn new(caps: Arc<Capabilities>, limits: &Limits) -> Self {
        let logs = LogBuffer::new(limits.max_log_bytes as usize);
        let wasi = deny_by_default_wasi(&logs, &caps.env, caps.files.as_ref());
        HostState {
            wasi,
            table: ResourceTable::new(),
            limiter: MemoryLimiter::new(limits.memory_bytes),
            caps,
            logs,
            route: RouteAttributes::default(),
            conversation: None,
            operation: String::new(),
            deadline: Clock::starting_now(limits.timeout),
            limits: *limits,
            observer: None,
            notices: 0,
            result_blocks: None,
            inquirer: None,
            detacher: None,
        }
    }

    /// The call this store now serves begins: its route attributes and conversation, what it
    /// runs, and its deadline from now (a store made ahead of need waited before its call).
    pub(crate) fn begin(&mut self, route: RouteAttributes, conversation: Option<Conversation>, operation: String) {
        self.route = route;
        self.conversation = conversation;
        self.operation = operation;
        self.deadline.restart(self.limits.timeout);
        self.inquirer = None;
        self.detacher = None;
        self.notices = 0;
        self.result_blocks = None;
    }

    /// The data of a script's run (`command.rs`): its own WASI (arguments, the folder, stdout
    /// captured) and `logs`, the buffer its stderr writes into.
    pub(crate) fn for_command(env: &CallEnv, operation: String, wasi: WasiCtx, logs: LogBuffer) -> Self {
        let limits = env.limits;
        HostState {
            wasi,
            table: ResourceTable::new(),
            limiter: MemoryLimiter::new(limits.memory_bytes),
            caps: env.caps.clone(),
            logs,
            route: RouteAttributes::default(),
            conversation: None,
            operation,
            deadline: Clock::starting_now(limits.timeout),
            limits,
            observer: None,
            notices: 0,
            result_blocks: None,
            inquirer: None,
            detacher: None,
        }
    }

    /// The records logged during the call (capped).
    pub fn take_logs(&self) -> (Vec<LogRecord>, u64) {
        self.logs.take()
    }
}

/// WASI with nothing granted: no arguments, no sockets, no name lookups, empty stdin, only
/// the granted environment variables (`env`), and no preopened directory but the skill's
/// own files when it asked for them (`files`); stdout and stderr feed the capped log buffer.
fn deny_by_default_wasi(logs: &LogBuffer, env: &[(String, String)], files: Option<&SkillFiles>) -> WasiCtx {
    let mut builder = WasiCtx::builder();
    builder
        .envs(env)
        .allow_tcp(false)
        .allow_udp(false)
        .allow_ip_name_lookup(false)
        .stdout(logs.stream("stdout"))
        .stderr(logs.stream("stderr"));
    if let Some(files) = files {
        mount(&mut builder, files);
    }
    builder.build()
}

/// The skill's files, read-only at `/skill` and as `.`: wasi-libc resolves a relative path
/// (and, with `chdir` linked, the absolute path it makes of one against its working
/// directory, `/` in a fresh instance) against the preopen named `.`, so `open("data.csv")`
/// reads the folder in every language, as a script tool's does (`command.rs`).
fn mount(builder: &mut wasmtime_wasi::WasiCtxBuilder, files: &SkillFiles) {
    for guest in [SKILL_FOLDER, "."] {
        if let Err(e) = builder.preopened_dir(files.path(), guest, wasmtime_wasi::FsPerms::ReadOnly) {
            // The copy is gone (a temp cleaner took it): the call sees no files, and says so.
            tracing::warn!(dir = %files.path().display(), "cannot open the skill's files: {e:#}");
            return;
        }
    }
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}
