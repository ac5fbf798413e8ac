//! The MCP client side: one supervised connection per configured server that some loaded
//! skill (or agent) needs. A server that fails to start or dies is logged, marked down (its
//! tools leave the offered list) and reconnected with exponential backoff; the host goes on.

use super::handler::Askers;
use super::oauth::{Browser, OAuth};
use super::supervise::{Settings, authorized, supervise};
use crate::config::{McpServer, ToolFilter};
use crate::person::Person;
use crate::sandbox::capabilities::{McpBridge, McpCallError, McpFuture};
use crate::skills::SkillSet;
use crate::store::StateStore;
use parking_lot::{Mutex, RwLock};
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, CancelledNotificationParam, ClientRequest, JsonObject,
    RequestId, ServerResult, Tool,
};
use rmcp::service::{Peer, PeerRequestOptions, RoleClient, ServiceError};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// The first reconnection delay; it doubles up to [`BACKOFF_MAX`].
pub const BACKOFF_START: Duration = Duration::from_millis(250);
/// The longest reconnection delay.
pub const BACKOFF_MAX: Duration = Duration::from_secs(30);
/// How long connecting and listing tools may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// Where a server's connection stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// Not needed by any loaded skill or agent: never started.
    Idle,
    /// Connecting (first time or again).
    Starting,
    /// Connected; its tools are offered.
    Ready,
    /// Failed to start or died; retried with backoff. The last error.
    Down(String),
}

pub(super) struct State {
    pub(super) status: Status,
    pub(super) peer: Option<Peer<RoleClient>>,
    pub(super) tools: Arc<Vec<Tool>>,
    /// Connection attempts finished (successful or not), for waiting on the first one.
    pub(super) attempts: u64,
}

/// One configured server and its connection.
pub(super) struct Server {
    pub(super) name: String,
    pub(super) config: McpServer,
    state: RwLock<State>,
    changed: watch::Sender<u64>,
    /// Its calls in flight that can ask a person (for its elicitations).
    pub(super) askers: Arc<Askers>,
    /// Its OAuth authorization, once supervision made it (servers with `auth`).
    pub(super) oauth: RwLock<Option<Arc<OAuth>>>,
}

impl Server {
    pub(super) fn update(&self, f: impl FnOnce(&mut State)) {
        let mut state = self.state.write();
        f(&mut state);
        let attempts = state.attempts;
        drop(state);
        self.changed.send_replace(attempts);
    }

    pub(super) fn read<T>(&self, f: impl FnOnce(&State) -> T) -> T {
        f(&self.state.read())
    }

    /// Its session, when it is ready; else why it is not available.
    fn ready_peer(&self) -> Result<Peer<RoleClient>, String> {
        let server = &self.name;
        self.read(|st| match (&st.status, &st.peer) {
            (Status::Ready, Some(peer)) => Ok(peer.clone()),
            (Status::Down(why), _) => {
                Err(format!("MCP server `{server}` is not available ({why}); it is being restarted"))
            }
            _ => Err(format!("MCP server `{server}` is not available; it is starting")),
        })
    }

    fn filter(&self) -> &ToolFilter {
        match &self.config {
            McpServer::Stdio { tools, .. } | McpServer::Sse { tools, .. } | McpServer::Streamablehttp { tools, .. } => {
                tools
            }
        }
    }
}

/// One server as [`McpManager::overview`] shows it.
#[derive(Debug, Clone)]
pub struct ServerOverview {
    /// Its `mcp_servers` key.
    pub name: String,
    /// `stdio`, `sse` or `streamablehttp`.
    pub transport: &'static str,
    /// Its connection status.
    pub status: Status,
    /// Connection attempts finished so far.
    pub attempts: u64,
    /// The tools it offers now, after its `tools` filter.
    pub tools: Vec<String>,
}

/// Every configured MCP server; the ones in use connected and supervised.
pub struct McpManager {
    servers: BTreeMap<String, Arc<Server>>,
    /// Which servers each skill declared (`mcp-tools` or `mcp-servers`): the `mcp` import
    /// reaches only those.
    declared: RwLock<BTreeMap<String, BTreeSet<String>>>,
    tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    /// What servers started from now on are told and use.
    settings: Mutex<Settings>,
}

impl Drop for McpManager {
    fn drop(&mut self) {
        for task in self.tasks.get_mut().drain(..) {
            task.abort();
        }
    }
}

impl McpManager {
    /// A manager of the `mcp_servers` section; nothing starts yet.
    pub fn new(config: &BTreeMap<String, McpServer>) -> Arc<Self> {
        let servers = config.iter().map(|(name, config)| {
            let state = State { status: Status::Idle, peer: None, tools: Arc::default(), attempts: 0 };
            let server = Server {
                name: name.clone(),
                config: config.clone(),
                state: RwLock::new(state),
                changed: watch::channel(0).0,
                askers: Arc::default(),
                oauth: RwLock::default(),
            };
            (name.clone(), Arc::new(server))
        });
        let (declared, tasks, settings) = (RwLock::default(), Mutex::default(), Mutex::default());
        Arc::new(McpManager { servers: servers.collect(), declared, tasks, settings })
    }

    fn settings(&self) -> parking_lot::MutexGuard<'_, Settings> {
        self.settings.lock()
    }

    /// Whether a person can be asked in this process (a terminal, the API's interactive
    /// runs): servers started from now on are told the client can elicit. Off by default,
    /// as where nobody can be asked (`skillhost mcp`) every elicitation is declined.
    pub fn set_people(&self, people: bool) {
        self.settings().people = people;
    }

    /// Where servers' OAuth tokens are kept (in memory only, for this process, without it).
    pub fn set_state(&self, state: StateStore) {
        self.settings().state = Some(state);
    }

    /// How an authorization URL reaches a person ([`Browser::Person`] by default).
    pub fn set_browser(&self, browser: Browser) {
        self.settings().browser = browser;
    }

    /// Whether any server is configured.
    pub fn is_configured(&self) -> bool {
        !self.servers.is_empty()
    }

    /// Whether `server` is configured.
    pub fn has_server(&self, server: &str) -> bool {
        self.servers.contains_key(server)
    }

    /// Records which servers each loaded skill declared, for the `mcp` import (agents that
    /// load the same skill record the same servers).
    pub fn declare(&self, skills: &SkillSet) {
        let declared = skills.skills.values().map(|skill| (skill.name.clone(), declared_servers(skill).collect()));
        self.declared.write().extend(declared);
    }

    /// Starts supervising `names` (configured ones not started yet); unknown names are ignored.
    pub fn start<'a>(&self, names: impl IntoIterator<Item = &'a str>) {
        for name in names {
            let Some(server) = self.servers.get(name) else { continue };
            if server.read(|s| s.status != Status::Idle) {
                continue;
            }
            server.update(|s| s.status = Status::Starting);
            let task = tokio::spawn(supervise(server.clone(), self.settings().clone()));
            self.tasks.lock().push(task);
        }
    }

    /// Waits until every started server has finished its first connection attempt, at most
    /// `timeout`.
    pub async fn wait_started(&self, timeout: Duration) {
        let waits = self.servers.values().filter(|s| s.read(|s| s.status != Status::Idle)).map(|server| {
            let mut rx = server.changed.subscribe();
            async move {
                let _ = rx.wait_for(|attempts| *attempts > 0).await;
            }
        });
        let _ = tokio::time::timeout(timeout, futures::future::join_all(waits)).await;
    }

    /// Waits until `server` is ready (for tests and restarts), at most `timeout`.
    pub async fn wait_ready(&self, server: &str, timeout: Duration) -> bool {
        let Some(s) = self.servers.get(server) else { return false };
        let mut rx = s.changed.subscribe();
        let ready = async {
            loop {
                if s.read(|st| st.status == Status::Ready) {
                    return;
                }
                if rx.changed().await.is_err() {
                    return;
                }
            }
        };
        tokio::time::timeout(timeout, ready).await.is_ok() && s.read(|st| st.status == Status::Ready)
    }

    /// Every configured server as an operator sees it: transport, status, connection
    /// attempts, the tools offered now.
    pub fn overview(&self) -> Vec<ServerOverview> {
        self.servers
            .values()
            .map(|s| {
                let transport = match &s.config {
                    McpServer::Stdio { .. } => "stdio",
                    McpServer::Sse { .. } => "sse",
                    McpServer::Streamablehttp { .. } => "streamablehttp",
                };
                let (status, attempts) = s.read(|st| (st.status.clone(), st.attempts));
                let tools = self.tools(&s.name).into_iter().map(|t| t.name.to_string()).collect();
                ServerOverview { name: s.name.clone(), transport, status, attempts, tools }
            })
            .collect()
    }

    /// The server's connection status (`None` when not configured).
    pub fn status(&self, server: &str) -> Option<Status> {
        Some(self.servers.get(server)?.read(|s| s.status.clone()))
    }

    /// The tools a ready server offers, after its `tools` filter; empty when it is not ready.
    pub fn tools(&self, server: &str) -> Vec<Tool> {
        let Some(s) = self.servers.get(server) else { return Vec::new() };
        let tools = s.read(|st| if st.status == Status::Ready { st.tools.clone() } else { Arc::default() });
        tools.iter().filter(|t| allows(s.filter(), &t.name)).cloned().collect()
    }

    /// One offered tool of a ready server.
    pub fn tool(&self, server: &str, tool: &str) -> Option<Tool> {
        self.tools(server).into_iter().find(|t| t.name == tool)
    }

    /// Calls an offered tool. The server's `isError` results are `Ok` (the model reads them);
    /// `Err` means the call did not complete (not offered, server down, transport error).
    pub async fn call(&self, server: &str, tool: &str, arguments: JsonObject) -> Result<CallToolResult, String> {
        let s = self.servers.get(server).ok_or_else(|| format!("no MCP server `{server}` is configured"))?;
        if !allows(s.filter(), tool) {
            return Err(format!("tool `{tool}` of MCP server `{server}` is not offered (mcp_servers.{server}.tools)"));
        }
        let peer = s.ready_peer()?;
        let mut request = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
        let oauth = s.oauth.read().clone();
        let span = tracing::info_span!(
            "mcp_call",
            otel.name = %format!("tools/call {tool}"),
            otel.kind = "client",
            mcp.method.name = "tools/call",
            mcp.server = %server,
            gen_ai.tool.name = %tool,
            skillhost.outcome = tracing::field::Empty,
            otel.status_code = tracing::field::Empty,
        );
        request.meta = trace_context(&span);
        let called = authorized(oauth.as_deref(), || call_tool(&peer, request.clone(), &s.askers));
        let called = tracing::Instrument::instrument(called, span.clone()).await;
        let outcome = match &called {
            Ok(result) if result.is_error == Some(true) => "error",
            Ok(_) => "ok",
            Err(_) => "failed",
        };
        span.record("skillhost.outcome", outcome);
        if outcome != "ok" {
            span.record("otel.status_code", "ERROR");
        }
        called.map_err(|e| format!("MCP server `{server}`: {e:#}"))
    }

    /// Sends `request` to `server` once it is ready: the server's answer, or why there is
    /// none (for requests beyond tools: `skills/list`, `resources/read`).
    pub async fn request(&self, server: &str, request: ClientRequest) -> Result<ServerResult, String> {
        let s = self.servers.get(server).ok_or_else(|| format!("no MCP server `{server}` is configured"))?;
        let peer = s.ready_peer()?;
        let oauth = s.oauth.read().clone();
        let asked = authorized(oauth.as_deref(), || send(&peer, request.clone())).await;
        asked.map_err(|e| format!("MCP server `{server}`: {e:#}"))
    }

    /// Runs `work` (calls to `server`) with `person` answering the server's elicitations
    /// meanwhile; outside it they are declined.
    pub async fn asking<T>(&self, server: &str, person: &dyn Person, work: impl Future<Output = T>) -> T {
        match self.servers.get(server) {
            Some(s) => s.askers.asking(server, person, work).await,
            None => work.await,
        }
    }
}

/// One `tools/call`, its request id tied to the asking call this task runs (the server's
/// elicitations for it reach that call's person). Dropped before the answer (the turn's
/// deadline, a cancelled turn), it tells the server `notifications/cancelled`.
/// The W3C trace context of `span` for a request's `_meta` (`traceparent`, `tracestate`:
/// SEP-414, whatever the transport), when traces are on.
fn trace_context(span: &tracing::Span) -> Option<rmcp::model::RequestMetaObject> {
    use tracing_opentelemetry::OpenTelemetrySpanExt as _;
    struct Meta(rmcp::model::RequestMetaObject, bool);
    impl opentelemetry::propagation::Injector for Meta {
        fn set(&mut self, key: &str, value: String) {
            match key {
                "traceparent" => self.0.set_traceparent(value),
                "tracestate" => self.0.set_tracestate(value),
                _ => return,
            }
            self.1 = true;
        }
    }
    let mut meta = Meta(rmcp::model::RequestMetaObject::new(), false);
    let context = span.context();
    opentelemetry::global::get_text_map_propagator(|p| p.inject_context(&context, &mut meta));
    meta.1.then_some(meta.0)
}

/// One request and its answer.
async fn send(peer: &Peer<RoleClient>, request: ClientRequest) -> Result<ServerResult, ServiceError> {
    peer.send_request_with_option(request, PeerRequestOptions::no_options()).await?.await_response().await
}

/// The most `input_required` rounds one call may take before it is given up (SEP-2322).
const MAX_INPUT_ROUNDS: usize = 16;

async fn call_tool(
    peer: &Peer<RoleClient>,
    mut params: CallToolRequestParams,
    askers: &Askers,
) -> Result<CallToolResult, ServiceError> {
    for _ in 0..MAX_INPUT_ROUNDS {
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params.clone()));
        let handle = peer.send_request_with_option(request, PeerRequestOptions::no_options()).await?;
        askers.bind(&handle.id);
        let mut abandoned = Abandoned { peer: Some(peer.clone()), id: handle.id.clone() };
        let answer = handle.await_response().await;
        abandoned.peer = None;
        match answer? {
            ServerResult::CallToolResult(result) => return Ok(result),
            // A result with nothing but `_meta` (some servers answer a void tool so).
            ServerResult::EmptyResult(_) => return Ok(CallToolResult::success(Vec::new())),
            // From 2026-07-28 a server asks through the result; the retry (a new request,
            // with a new id) carries the answers and the state exactly as it was given.
            ServerResult::InputRequiredResult(asked) => {
                let requests = asked.input_requests.unwrap_or_default();
                if requests.is_empty() && asked.request_state.is_none() {
                    return Err(ServiceError::UnexpectedResponse);
                }
                let mut responses = rmcp::model::InputResponses::new();
                for (key, request) in requests {
                    responses.insert(key, askers.answer(request).await?);
                }
                params.input_responses = (!responses.is_empty()).then_some(responses);
                params.request_state = asked.request_state;
            }
            _ => return Err(ServiceError::UnexpectedResponse),
        }
    }
    let why = format!("the server asked for input {MAX_INPUT_ROUNDS} times without answering the call");
    Err(ServiceError::McpError(rmcp::ErrorData::internal_error(why, None)))
}

/// Cancels a `tools/call` whose answer nobody waits for any more.
struct Abandoned {
    peer: Option<Peer<RoleClient>>,
    id: RequestId,
}

impl Drop for Abandoned {
    fn drop(&mut self) {
        let (Some(peer), Ok(runtime)) = (self.peer.take(), tokio::runtime::Handle::try_current()) else { return };
        let params = CancelledNotificationParam::new(Some(self.id.clone()), Some("the call was abandoned".into()));
        runtime.spawn(async move {
            let _ = peer.notify_cancelled(params).await;
        });
    }
}

/// The servers a skill declares: used (`mcp-tools`) or owned (`mcp-servers`).
pub fn declared_servers(skill: &crate::skills::Skill) -> impl Iterator<Item = String> + '_ {
    skill.facts.mcp_tools.iter().map(|(server, _)| server.clone()).chain(skill.facts.mcp_servers.iter().cloned())
}

fn allows(filter: &ToolFilter, tool: &str) -> bool {
    match filter {
        ToolFilter::All => true,
        ToolFilter::Only(names) => names.iter().any(|n| n == tool),
    }
}

/// The text the model reads of a result: its text blocks joined by newlines; other blocks as
/// JSON; the structured content when there is nothing else.
pub fn result_text(result: &CallToolResult) -> String {
    let parts: Vec<String> = result
        .content
        .iter()
        .map(|c| match c.as_text() {
            Some(text) => text.text.clone(),
            None => serde_json::to_string(c).unwrap_or_default(),
        })
        .collect();
    match (&result.structured_content, parts.is_empty()) {
        (Some(structured), true) => structured.to_string(),
        _ => parts.join("\n"),
    }
}

impl McpManager {
    /// Whether `skill` declared `server`, a configured one, so its `mcp` import may call it.
    pub fn declares(&self, skill: &str, server: &str) -> bool {
        let declared = self.declared.read();
        declared.get(skill).is_some_and(|s| s.contains(server)) && self.has_server(server)
    }
}

impl McpBridge for McpManager {
    fn call_tool<'a>(&'a self, skill: &'a str, server: &'a str, tool: &'a str, arguments: &'a str) -> McpFuture<'a> {
        Box::pin(async move {
            if !self.declares(skill, server) {
                return Err(McpCallError::UnknownServer(server.to_owned()));
            }
            let arguments = match serde_json::from_str::<Value>(arguments) {
                Ok(Value::Object(map)) => map,
                _ => return Err(McpCallError::Other("arguments must be a JSON object".into())),
            };
            let result = self.call(server, tool, arguments).await.map_err(McpCallError::Other)?;
            let text = result_text(&result);
            if result.is_error == Some(true) { Err(McpCallError::ToolFailed(text)) } else { Ok(text) }
        })
    }
}
