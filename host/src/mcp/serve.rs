//! Skills served over MCP: every tool of every runnable skill is an MCP tool named as the
//! model would see it (`skill__tool`), every skill prompt an MCP prompt. No LLM is involved.
//!
//! Approval levels hold: a call that needs a person is put to the client's user through MCP
//! elicitation (approve: a yes/no; confirm: type the challenge) when the client declared
//! that capability, and refused with a clear message otherwise. Never silently executed.

use crate::api::auth::Token;
use crate::config::OverrideLevel;
use crate::engine::ToolRouter;
use crate::engine::approval::{self, CONFIRMATION_CHALLENGE, Level};
use crate::sandbox::CallContext;
use crate::skills::SkillSet;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::model::{
    CallToolRequestParam, CallToolResult, Content, CreateElicitationRequestParam, ElicitationAction, ElicitationSchema,
    GetPromptRequestParam, GetPromptResult, Implementation, ListPromptsResult, ListToolsResult, PaginatedRequestParam,
    Prompt, PromptMessage, PromptMessageRole, ProtocolVersion, ServerCapabilities, ServerInfo, Tool,
};
use rmcp::service::{NotificationContext, Peer, RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

/// The channel id calls served over MCP run under.
pub const CHANNEL: &str = "mcp";

struct Shared {
    skills: RwLock<Arc<SkillSet>>,
    overrides: BTreeMap<String, Option<OverrideLevel>>,
    approval_timeout: Duration,
    /// Connected clients, told when the tool list changes.
    peers: Mutex<Vec<Peer<RoleServer>>>,
}

/// The MCP server over a skill set; cheap to clone (one per HTTP session).
#[derive(Clone)]
pub struct SkillServer {
    shared: Arc<Shared>,
}

impl SkillServer {
    /// A server over `skills`, with the operator's `human` settings.
    pub fn new(
        skills: Arc<SkillSet>,
        overrides: BTreeMap<String, Option<OverrideLevel>>,
        approval_timeout: Duration,
    ) -> Self {
        let shared = Shared { skills: RwLock::new(skills), overrides, approval_timeout, peers: Mutex::default() };
        SkillServer { shared: Arc::new(shared) }
    }

    /// A server over an engine's skills and `human` settings (for `/mcp` next to the API).
    pub fn for_engine(engine: &crate::engine::Engine) -> Self {
        let human = &engine.settings().human;
        Self::new(
            Arc::new(engine.skills().clone()),
            human.overrides.clone(),
            Duration::from_secs(human.timeout_seconds),
        )
    }

    fn skills(&self) -> Arc<SkillSet> {
        self.shared.skills.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Reloads the skills from `loader`, starts the MCP servers newly loaded skills declare
    /// (through `manager`, whose `mcp` import the skills use), and swaps them in. On a fatal
    /// load error the loaded skills stay. Returns the problems of skills that did not load.
    pub async fn reload(
        &self,
        loader: &crate::skills::Loader,
        manager: &Arc<super::McpManager>,
    ) -> Result<Vec<crate::skills::LoadProblem>, crate::skills::FatalLoadError> {
        let set = Arc::new(loader.load_all(crate::skills::LoadMode::Serve).await?);
        let problems = set.problems.clone();
        super::start_for(manager, set.clone(), &[], self.shared.overrides.clone()).await;
        self.set_skills(set).await;
        Ok(problems)
    }

    /// Replaces the skills (after a reload) and tells every connected client that the tool and
    /// prompt lists changed.
    pub async fn set_skills(&self, skills: Arc<SkillSet>) {
        *self.shared.skills.write().unwrap_or_else(|p| p.into_inner()) = skills;
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

    /// Puts a gated call to the client's user; `Err` is the refusal the caller receives.
    async fn approve(&self, peer: &Peer<RoleServer>, name: &str, input: &Value, level: Level) -> Result<(), String> {
        if !peer.supports_elicitation() {
            return Err(format!(
                "`{name}` needs a person's approval ({}), and this MCP client cannot ask one (no elicitation support); it was not executed",
                level.as_str()
            ));
        }
        let (message, schema) = match level {
            Level::Confirm => (
                format!("Run {name} with {input}? Type {CONFIRMATION_CHALLENGE} to confirm."),
                json!({"type": "object", "properties": {"confirmation": {"type": "string", "description": format!("Type {CONFIRMATION_CHALLENGE}")}}, "required": ["confirmation"]}),
            ),
            _ => (
                format!("Approve {name} with {input}?"),
                json!({"type": "object", "properties": {"approve": {"type": "boolean", "description": "Run the tool"}}, "required": ["approve"]}),
            ),
        };
        let Value::Object(schema) = schema else { unreachable!("a literal object") };
        let requested_schema =
            ElicitationSchema::from_json_schema(schema).map_err(|e| format!("elicitation schema: {e}"))?;
        let request = peer.create_elicitation(CreateElicitationRequestParam { message, requested_schema });
        let answer = match tokio::time::timeout(self.shared.approval_timeout, request).await {
            Err(_) => {
                return Err(format!(
                    "nobody approved `{name}` within {} s; it was not executed",
                    self.shared.approval_timeout.as_secs()
                ));
            }
            Ok(Err(e)) => return Err(format!("asking for approval of `{name}` failed ({e}); it was not executed")),
            Ok(Ok(answer)) => answer,
        };
        let content = answer.content.unwrap_or_default();
        let approved = answer.action == ElicitationAction::Accept
            && match level {
                Level::Confirm => content["confirmation"].as_str().map(str::trim) == Some(CONFIRMATION_CHALLENGE),
                _ => content["approve"] == Value::Bool(true),
            };
        if approved { Ok(()) } else { Err(format!("the user denied `{name}`; it was not executed")) }
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
            name: "skillhost".into(),
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
        let tools = ToolRouter::new(self.skills()).decls().into_iter().map(|d| {
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
        let skills = self.skills();
        let name = request.name.to_string();
        let input = Value::Object(request.arguments.unwrap_or_default());
        let ctx = CallContext::standalone(CHANNEL);
        let level = match skills.find_tool(&name) {
            Some((skill, tool)) if tool.validate(&input).is_ok() => {
                approval::resolve(skill, tool, &input, &ctx, &self.shared.overrides).await
            }
            _ => Level::Auto,
        };
        if level != Level::Auto
            && let Err(refusal) = self.approve(&context.peer, &name, &input, level).await
        {
            let json = json!({"error": refusal, "kind": "not_approved"});
            return Ok(CallToolResult::error(vec![Content::text(json.to_string())]));
        }
        let outcome = ToolRouter::new(skills).execute(&name, &input, &ctx).await;
        let content = vec![Content::text(outcome.content)];
        Ok(if outcome.is_error { CallToolResult::error(content) } else { CallToolResult::success(content) })
    }

    async fn list_prompts(
        &self,
        _: Option<PaginatedRequestParam>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let skills = self.skills();
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
        let skills = self.skills();
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
        move || Ok(server.clone()),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    let token = token.and_then(Token::new);
    axum::Router::new().nest_service("/mcp", service).layer(axum::middleware::from_fn_with_state(token, authenticate))
}

async fn authenticate(State(token): State<Option<Token>>, request: Request, next: Next) -> Response {
    match crate::api::auth::check(token.as_ref(), request.headers()) {
        Ok(()) => next.run(request).await,
        Err(e) => e.into_response(),
    }
}
