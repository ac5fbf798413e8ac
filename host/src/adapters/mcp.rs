//! Skills served over MCP, an adapter like the API: every tool of the agent is an MCP tool
//! named as the model would see it (`skill__tool`), every skill prompt an MCP prompt. No LLM
//! is involved.
//!
//! Calls go through the engine's one call path ([`Engine::call_tool`]): the same approval
//! levels, overrides, auto-promotion, tool budget and refusal kinds as a chat. A call that
//! needs a person is put to the client's user through MCP elicitation (approve: a yes/no;
//! confirm: type the challenge) when the client declared that capability, and refused
//! otherwise; never silently executed. Each client session is a channel of its own
//! (`mcp-<id>`: what skills see as `channel_id`), and counts as one turn for the tool budget.

use crate::adapters::auth::{self, Token};
use crate::engine::gate::new_id;
use crate::engine::tool_budget::TurnBudget;
use crate::engine::{ApprovalOutcome, ApprovalRequest, Approver, Engine, NoEvents};
use crate::sandbox::CallContext;
use crate::tools::{CONFIRMATION_CHALLENGE, Level};
use rmcp::model::{
    CallToolRequestParam, CallToolResult, Content, CreateElicitationRequestParam, ElicitationAction, ElicitationSchema,
    GetPromptRequestParam, GetPromptResult, Implementation, ListPromptsResult, ListToolsResult, PaginatedRequestParam,
    Prompt, PromptMessage, PromptMessageRole, ProtocolVersion, ServerCapabilities, ServerInfo, Tool,
};
use rmcp::service::{NotificationContext, Peer, RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex, RwLock};

/// The prefix of the channel ids of MCP client sessions.
pub const CHANNEL_PREFIX: &str = "mcp-";

struct Shared {
    engine: RwLock<Arc<Engine>>,
    /// `bot.name` (or the agent's name): the server's `serverInfo.name`.
    name: String,
    /// Connected clients, told when the tool list changes.
    peers: Mutex<Vec<Peer<RoleServer>>>,
}

/// One client session: its own channel and tool budget.
struct Session {
    channel: String,
    budget: TurnBudget,
}

/// The MCP server over an agent's engine; [`SkillServer::session`] makes one per client.
#[derive(Clone)]
pub struct SkillServer {
    shared: Arc<Shared>,
    session: Arc<Session>,
}

impl SkillServer {
    /// A server over `engine`, introducing itself as `name`.
    pub fn new(engine: Arc<Engine>, name: &str) -> Self {
        let budget = engine.tool_budget();
        let shared = Shared { engine: RwLock::new(engine), name: name.to_owned(), peers: Mutex::default() };
        SkillServer { shared: Arc::new(shared), session: Arc::new(Session { channel: session_channel(), budget }) }
    }

    /// The same server for a new client session: a fresh channel and tool budget.
    pub fn session(&self) -> Self {
        let session = Session { channel: session_channel(), budget: self.engine().tool_budget() };
        SkillServer { shared: self.shared.clone(), session: Arc::new(session) }
    }

    /// The channel id of this session.
    pub fn channel(&self) -> &str {
        &self.session.channel
    }

    fn engine(&self) -> Arc<Engine> {
        self.shared.engine.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Replaces the engine (after a reload) and tells every connected client that the tool
    /// and prompt lists changed.
    pub async fn set_engine(&self, engine: Arc<Engine>) {
        *self.shared.engine.write().unwrap_or_else(|p| p.into_inner()) = engine;
        let peers = {
            let mut peers = self.shared.peers.lock().unwrap_or_else(|p| p.into_inner());
            peers.retain(|p| !p.is_transport_closed());
            peers.clone()
        };
        for peer in peers {
            let _ = peer.notify_tool_list_changed().await;
            let _ = peer.notify_prompt_list_changed().await;
        }
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

/// Asks the client's user through elicitation; refuses when the client cannot elicit.
struct Elicit<'a> {
    peer: &'a Peer<RoleServer>,
}

#[async_trait::async_trait]
impl Approver for Elicit<'_> {
    async fn decide(&self, request: ApprovalRequest) -> ApprovalOutcome {
        if !self.peer.supports_elicitation() {
            return ApprovalOutcome::Unavailable("this MCP client cannot ask one (no elicitation support)".into());
        }
        let name = &request.tool_name;
        let (message, schema) = match request.level {
            Level::Confirm => (
                format!("Run {name} with {}? Type {CONFIRMATION_CHALLENGE} to confirm.", request.input),
                json!({"type": "object", "properties": {"confirmation": {"type": "string", "description": format!("Type {CONFIRMATION_CHALLENGE}")}}, "required": ["confirmation"]}),
            ),
            _ => (
                format!("Approve {name} with {}?", request.input),
                json!({"type": "object", "properties": {"approve": {"type": "boolean", "description": "Run the tool"}}, "required": ["approve"]}),
            ),
        };
        let Value::Object(schema) = schema else { unreachable!("a literal object") };
        let requested_schema = match ElicitationSchema::from_json_schema(schema) {
            Ok(schema) => schema,
            Err(e) => return ApprovalOutcome::Unavailable(format!("the elicitation schema was refused ({e})")),
        };
        // The engine bounds the wait by `human.timeout_seconds`.
        let answer =
            match self.peer.create_elicitation(CreateElicitationRequestParam { message, requested_schema }).await {
                Ok(answer) => answer,
                Err(e) => return ApprovalOutcome::Unavailable(format!("asking the MCP client failed ({e})")),
            };
        let content = answer.content.unwrap_or_default();
        let approved = answer.action == ElicitationAction::Accept
            && match request.level {
                Level::Confirm => content["confirmation"].as_str().map(str::trim) == Some(CONFIRMATION_CHALLENGE),
                _ => content["approve"] == Value::Bool(true),
            };
        if approved { ApprovalOutcome::Approved } else { ApprovalOutcome::Denied(None) }
    }
}

impl ServerHandler for SkillServer {
    fn get_info(&self) -> ServerInfo {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_prompts()
            .enable_prompts_list_changed()
            .build();
        let server_info = Implementation {
            name: self.shared.name.clone(),
            version: env!("CARGO_PKG_VERSION").into(),
            ..Implementation::from_build_env()
        };
        // Elicitation arrived in 2025-06-18: a client at 2025-03-26 (rmcp's default) refuses it.
        ServerInfo {
            protocol_version: ProtocolVersion::V_2025_06_18,
            capabilities,
            server_info,
            instructions: Some("Tools of WebAssembly skills run by skillhost.".into()),
        }
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        self.shared.peers.lock().unwrap_or_else(|p| p.into_inner()).push(context.peer);
    }

    async fn list_tools(
        &self,
        _: Option<PaginatedRequestParam>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tools = self.engine().tools().decls().into_iter().map(|d| {
            let schema = match d.input_schema {
                Value::Object(map) => map,
                _ => Default::default(),
            };
            Tool::new(d.name, d.description, Arc::new(schema))
        });
        Ok(ListToolsResult { tools: tools.collect(), next_cursor: None })
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParam,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let engine = self.engine();
        let input = Value::Object(request.arguments.unwrap_or_default());
        let ctx = CallContext::standalone(&self.session.channel);
        let id = format!("mcp-{}", context.id);
        let call = (id, request.name.to_string(), input);
        let approver = Elicit { peer: &context.peer };
        let record = engine.call_tool(call, &ctx, &NoEvents, &approver, &self.session.budget).await;
        let content = vec![Content::text(record.outcome.content)];
        Ok(if record.outcome.is_error { CallToolResult::error(content) } else { CallToolResult::success(content) })
    }

    async fn list_prompts(
        &self,
        _: Option<PaginatedRequestParam>,
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
        Ok(ListPromptsResult { prompts: prompts.collect(), next_cursor: None })
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParam,
        _: RequestContext<RoleServer>,
    ) -> Result<GetPromptResult, ErrorData> {
        let engine = self.engine();
        let skills = engine.skills();
        let skill = skills
            .skills
            .get(&request.name)
            .ok_or_else(|| ErrorData::invalid_params(format!("no prompt `{}`", request.name), None))?;
        let message = PromptMessage::new_text(PromptMessageRole::User, skill.prompt.body.clone());
        Ok(GetPromptResult {
            description: Some(format!("The prompt of skill `{}`", skill.name)),
            messages: vec![message],
        })
    }
}
/// Serves `server` on stdin/stdout until the client goes away.
pub async fn stdio(server: SkillServer) -> anyhow::Result<()> {
    use rmcp::ServiceExt;
    let running = server.serve(rmcp::transport::stdio()).await?;
    running.waiting().await?;
    Ok(())
}

/// The streamable HTTP endpoint at `/mcp`, behind the API's bearer token when one is set
/// (`ui.auth_token` / `SKILLHOST_UI_TOKEN`): merge it into the API's router.
pub fn http_app(server: SkillServer, token: Option<&str>) -> axum::Router {
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
    let service = StreamableHttpService::new(
        move || Ok(server.session()),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    let token = token.and_then(Token::new);
    axum::Router::new().nest_service("/mcp", service).layer(axum::middleware::from_fn_with_state(token, auth::require))
}
