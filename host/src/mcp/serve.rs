//! Skills served over MCP: every tool of every runnable skill is an MCP tool named as the
//! model would see it (`skill__tool`), every skill prompt an MCP prompt. No LLM is involved.
//!
//! Approval levels hold: a call that needs a person is put to the client's user through MCP
//! elicitation (approve: a yes/no; confirm: type the challenge) when the client declared
//! that capability, and refused with a clear message otherwise. Never silently executed.
//! From protocol 2026-07-28 the question travels in an `input_required` result instead of a
//! request to the client ([`super::elicit`]).
//!
//! Protocol revisions: every one rmcp knows (2024-11-05 to 2026-07-28). `initialize` echoes
//! the client's revision when it has a handshake; else (an unknown one, or one without a
//! handshake) it answers 2025-11-25. From 2026-07-28 a client uses `server/discover` and
//! per-request metadata instead, and hears of list changes through `subscriptions/listen`.

use super::elicit::{self, Round};
use crate::api::auth::Token;
use crate::config::OverrideLevel;
use crate::engine::ToolRouter;
use crate::engine::approval::{self, Level};
use crate::sandbox::CallContext;
use crate::skills::SkillSet;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, GetPromptRequestParams, GetPromptResponse,
    GetPromptResult, Implementation, ListPromptsResult, ListToolsResult, PaginatedRequestParams, Prompt, PromptMessage,
    Role, ServerCapabilities, ServerConfig, SubscriptionFilter, Tool,
};
use rmcp::service::{NotificationContext, Peer, RequestContext, RoleServer, SubscriptionContext, SubscriptionSink};
use rmcp::{ErrorData, ServerHandler};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
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
    /// 2026-07-28 clients' open `subscriptions/listen` streams, told the same; keyed by a
    /// counter (request ids repeat across clients).
    listeners: Mutex<Vec<(u64, SubscriptionSink)>>,
    next_listener: AtomicU64,
    /// Approvals asked through `input_required` (2026-07-28) and not answered yet.
    pending: elicit::Pending,
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
        let shared = Shared {
            skills: RwLock::new(skills),
            overrides,
            approval_timeout,
            peers: Mutex::default(),
            listeners: Mutex::default(),
            next_listener: AtomicU64::default(),
            pending: elicit::Pending::default(),
        };
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
        let listeners = self.shared.listeners.lock().unwrap_or_else(|p| p.into_inner()).clone();
        for (_, sink) in listeners {
            let _ = sink.notify_tool_list_changed().await;
            let _ = sink.notify_prompt_list_changed().await;
        }
    }

    /// Puts a gated call to the client's user; `Err` is the refusal the caller receives.
    async fn approve(
        &self,
        context: &RequestContext<RoleServer>,
        name: &str,
        input: &Value,
        level: Level,
    ) -> Result<(), String> {
        if !elicit::can_elicit(context) {
            return Err(format!(
                "`{name}` needs a person's approval ({}), and this MCP client cannot ask one (no elicitation support); it was not executed",
                level.as_str()
            ));
        }
        let request = context.peer.create_elicitation(elicit::question(name, input, level)?);
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
        if elicit::approves(&answer, level) {
            Ok(())
        } else {
            Err(format!("the user denied `{name}`; it was not executed"))
        }
    }
}

impl ServerHandler for SkillServer {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_prompts()
            .enable_prompts_list_changed()
            .build();
        // The protocol version stays rmcp's latest: `initialize` negotiates it (module docs).
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("skillhost", env!("CARGO_PKG_VERSION")))
            .with_instructions("Tools of WebAssembly skills run by skillhost.")
    }

    fn accepted_subscription_filter(&self, _: &SubscriptionFilter) -> Option<SubscriptionFilter> {
        Some(SubscriptionFilter::builder().tools_list_changed().prompts_list_changed().build())
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let key = self.shared.next_listener.fetch_add(1, Ordering::Relaxed);
        self.shared.listeners.lock().unwrap_or_else(|p| p.into_inner()).push((key, context.sink().clone()));
        // Cancelled when the client ends the subscription or goes away.
        context.cancelled().await;
        self.shared.listeners.lock().unwrap_or_else(|p| p.into_inner()).retain(|(k, _)| *k != key);
        Ok(())
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        self.shared.peers.lock().unwrap_or_else(|p| p.into_inner()).push(context.peer);
    }

    async fn list_tools(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tools = ToolRouter::new(self.skills()).decls().into_iter().map(|d| {
            let schema = match d.input_schema {
                Value::Object(map) => map,
                _ => Default::default(),
            };
            Tool::new(d.name, d.description, Arc::new(schema))
        });
        Ok(ListToolsResult::with_all_items(tools.collect()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let skills = self.skills();
        let name = request.name.to_string();
        let input = Value::Object(request.arguments.clone().unwrap_or_default());
        let ctx = CallContext::standalone(CHANNEL);
        let level = match skills.find_tool(&name) {
            Some((skill, tool)) if tool.validate(&input).is_ok() => {
                approval::resolve(skill, tool, &input, &ctx, &self.shared.overrides).await
            }
            _ => Level::Auto,
        };
        if level != Level::Auto {
            let approved = if elicit::inline(&context) && elicit::can_elicit(&context) {
                match self.shared.pending.round(&request, &input, level, self.shared.approval_timeout) {
                    Round::Ask(question) => return Ok(question.into()),
                    Round::Decided(decided) => decided,
                }
            } else {
                self.approve(&context, &name, &input, level).await
            };
            if let Err(refusal) = approved {
                let json = json!({"error": refusal, "kind": "not_approved"});
                return Ok(CallToolResult::error(vec![ContentBlock::text(json.to_string())]).into());
            }
        }
        let outcome = ToolRouter::new(skills).execute(&name, &input, &ctx).await;
        let content = vec![ContentBlock::text(outcome.content)];
        Ok(if outcome.is_error { CallToolResult::error(content) } else { CallToolResult::success(content) }.into())
    }

    async fn list_prompts(
        &self,
        _: Option<PaginatedRequestParams>,
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
        Ok(ListPromptsResult::with_all_items(prompts.collect()))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let skills = self.skills();
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
    // No Host allowlist (rmcp's default admits loopback names only): `/mcp` is reached at
    // whatever name the API is, and is guarded like it, by the bearer token.
    let config = StreamableHttpServerConfig::default().disable_allowed_hosts();
    let service =
        StreamableHttpService::new(move || Ok(server.clone()), Arc::new(LocalSessionManager::default()), config);
    let token = token.and_then(Token::new);
    axum::Router::new().nest_service("/mcp", service).layer(axum::middleware::from_fn_with_state(token, authenticate))
}

async fn authenticate(State(token): State<Option<Token>>, request: Request, next: Next) -> Response {
    match crate::api::auth::check(token.as_ref(), request.headers()) {
        Ok(()) => next.run(request).await,
        Err(e) => e.into_response(),
    }
}
