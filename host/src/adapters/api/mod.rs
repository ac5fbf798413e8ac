//! The HTTP API adapter (`skillhost run --adapter api`): `POST /api/trigger` in four modes
//! (fire-and-forget, `wait=true` JSON, NDJSON, the interactive approval-v1 SSE stream), the
//! approval and question decision routes, and `/healthz`, `/readyz` for operators.
//!
//! # Layout
//! - [`trigger`]: the trigger route and its modes; [`decisions`]: approvals and questions.
//! - [`read`]: what the console reads (runs and their events, pending approvals and
//!   questions, skills, MCP servers); [`console`]: the page itself, at `/`.
//! - [`stream`]: the approval-v1 wire protocol, a pure state machine over engine events.
//! - [`run`]: one interactive run (event sink, counterpart, `human__ask`); [`driver`]: the
//!   response body that drives the run, so a client leaving cancels it.
//! - [`error`]: JSON errors. Beside it, shared with the other adapters:
//!   [`crate::broker`] (approvals and questions waiting on a person),
//!   [`crate::adapters::present`] (redacted inputs, safe descriptions, `tool_results`,
//!   coverage), [`crate::adapters::auth`] (bearer tokens).

pub mod audit;
pub mod console;
pub mod decisions;
pub mod driver;
pub mod error;
pub mod read;
pub mod reload;
pub mod run;
pub mod stream;
pub mod trigger;

use crate::adapters::auth::{self, Allowed, Caller, Tokens};
use crate::adapters::present::Descriptions;
use crate::adapters::runs::Runs;
use crate::broker::Broker;
use crate::config::{NamedToken, TokenScope, Ui};
use crate::engine::Engine;
use axum::Router;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::middleware;
use axum::routing::{get, post};
use error::ApiError;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// The response header naming the agent that answered.
pub const AGENT_HEADER: &str = "x-skillhost-agent";
/// The default port when neither `ui.port` nor `SKILLHOST_UI_PORT` sets one.
pub const DEFAULT_PORT: u16 = 8080;
/// The default largest request body.
pub const DEFAULT_BODY_LIMIT: usize = 1 << 20;
/// The default heartbeat interval of the approval-v1 stream.
pub const DEFAULT_HEARTBEAT: Duration = Duration::from_secs(15);

/// How the server is set up.
#[derive(Debug, Clone)]
pub struct ApiConfig {
    /// The bearer token that may do everything (`ui.auth_token`, its variable); without it
    /// and [`ApiConfig::tokens`] the routes that read, decide or reload answer 503 and the
    /// trigger and `/mcp` are open (the CLI then listens on 127.0.0.1 only).
    pub auth_token: Option<String>,
    /// `ui.tokens`: named tokens, each with its scopes.
    pub tokens: Vec<NamedToken>,
    /// The `Host`s and `Origin`s every `/api` request and `/mcp` may come with.
    pub allowed: Allowed,
    /// `adapter.type` is `api`: the interactive routes are served (409 otherwise).
    pub adapter_is_api: bool,
    /// The approval-v1 heartbeat interval.
    pub heartbeat: Duration,
    /// The largest request body, in bytes (413 beyond).
    pub body_limit: usize,
    /// The agent's name (`bot.name`), in the [`AGENT_HEADER`] of every response.
    pub name: String,
    /// `ui.metrics_public`: `/metrics` without the token.
    pub metrics_public: bool,
}

impl ApiConfig {
    /// The settings of `ui`, with `SKILLHOST_UI_TOKEN` (else the spec's `MITHAI_UI_TOKEN`)
    /// overriding the token.
    pub fn from_ui(ui: &Ui, adapter_is_api: bool) -> Self {
        let env_token = first_env(&["SKILLHOST_UI_TOKEN", "MITHAI_UI_TOKEN"]).map(|(_, t)| t);
        ApiConfig {
            auth_token: env_token.or_else(|| ui.auth_token.clone()).filter(|t| !t.is_empty()),
            tokens: ui.tokens.clone(),
            allowed: Allowed::of(ui),
            adapter_is_api,
            heartbeat: DEFAULT_HEARTBEAT,
            body_limit: DEFAULT_BODY_LIMIT,
            name: crate::config::Bot::default().name,
            metrics_public: ui.metrics_public,
        }
    }

    /// Every token the server takes.
    pub fn tokens(&self) -> Tokens {
        Tokens::new(self.auth_token.as_deref(), &self.tokens)
    }

    /// The same settings for the agent called `name`.
    pub fn named(self, name: &str) -> Self {
        ApiConfig { name: name.to_owned(), ..self }
    }

    /// The port: `SKILLHOST_UI_PORT`, else the spec's `MITHAI_UI_PORT` (when `env` applies:
    /// a single agent), else `ui.port`, else [`DEFAULT_PORT`].
    pub fn port(ui: &Ui, env: bool) -> Result<u16, NotAPort> {
        match first_env(&["SKILLHOST_UI_PORT", "MITHAI_UI_PORT"]).filter(|_| env) {
            Some((name, p)) => p.parse().map_err(|_| NotAPort { variable: name.to_string(), value: p }),
            None => Ok(ui.port.unwrap_or(DEFAULT_PORT)),
        }
    }
}

/// An environment variable that should hold the API's port and does not.
#[derive(Debug, thiserror::Error)]
#[error("{variable}: `{value}` is not a port number")]
pub struct NotAPort {
    /// The variable.
    pub variable: String,
    /// What it holds.
    pub value: String,
}

/// The variables that override `ui.port` and `ui.auth_token`.
const UI_VARIABLES: [&str; 4] = ["SKILLHOST_UI_PORT", "SKILLHOST_UI_TOKEN", "MITHAI_UI_PORT", "MITHAI_UI_TOKEN"];

impl ApiConfig {
    /// The first variable overriding `ui.port` or `ui.auth_token` that is set, if any: they
    /// apply to one agent serving the API, never to several.
    pub fn overriding_variable() -> Option<&'static str> {
        first_env(&UI_VARIABLES).map(|(name, _)| name)
    }
}

/// The first of `names` that is set to a non-empty value, with its value: ours before the
/// spec's, so an operator moving from mithai can keep `MITHAI_UI_*`.
fn first_env(names: &[&'static str]) -> Option<(&'static str, String)> {
    names.iter().find_map(|name| std::env::var(name).ok().filter(|v| !v.is_empty()).map(|v| (*name, v)))
}

/// The server's shared state.
pub struct Api {
    engine: Arc<Engine>,
    tokens: Tokens,
    config: ApiConfig,
    broker: Arc<Broker>,
    descriptions: Arc<Descriptions>,
    /// Where turns run; `None`: on the runtime serving the request.
    turns: Option<tokio::runtime::Handle>,
    /// The agent's recent runs (shared with its chat adapters).
    runs: Arc<Runs>,
    /// The MCP servers, for their status.
    mcp: Option<Arc<crate::mcp::McpManager>>,
    /// What `POST /api/skills/reload` calls (`skillhost run`); none: 503.
    reload: Option<Arc<dyn reload::SkillReload>>,
}

impl Api {
    /// The API over `engine`, its turns run as tasks of the runtime that serves it.
    pub fn new(engine: Arc<Engine>, config: ApiConfig) -> Arc<Self> {
        let runs = Runs::new(&config.name);
        Self::build(engine, config, None, runs, (None, None))
    }

    /// The API over `engine`, its turns run on the runtime `turns` (`skillhost run`): the
    /// runtime serving HTTP then only reads, routes and answers requests and writes
    /// streams, so that under load a decision, a status read or a stream's next event does
    /// not queue behind the turns' own work (LLM responses, tool calls).
    pub fn with_turns(engine: Arc<Engine>, config: ApiConfig, turns: tokio::runtime::Handle) -> Arc<Self> {
        let runs = Runs::new(&config.name);
        Self::build(engine, config, Some(turns), runs, (None, None))
    }

    /// [`Api::with_turns`] for `skillhost run`: the runs are the agent's (its chat adapters
    /// record theirs there too), the console shows the status of the MCP servers, and
    /// `POST /api/skills/reload` calls `reload`.
    pub fn serving(
        engine: Arc<Engine>,
        config: ApiConfig,
        turns: tokio::runtime::Handle,
        (runs, mcp): (Arc<Runs>, Arc<crate::mcp::McpManager>),
        reload: Option<Arc<dyn reload::SkillReload>>,
    ) -> Arc<Self> {
        Self::build(engine, config, Some(turns), runs, (Some(mcp), reload))
    }

    fn build(
        engine: Arc<Engine>,
        config: ApiConfig,
        turns: Option<tokio::runtime::Handle>,
        runs: Arc<Runs>,
        (mcp, reload): (Option<Arc<crate::mcp::McpManager>>, Option<Arc<dyn reload::SkillReload>>),
    ) -> Arc<Self> {
        let tokens = config.tokens();
        let descriptions = Arc::new(Descriptions::live(engine.clone()));
        let broker = engine.broker();
        // `/api/activity` announces what changes at the broker, on any replica.
        let (mut changes, watchers) = (broker.changes(), Arc::downgrade(&runs));
        tokio::spawn(async move {
            while let Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) = changes.recv().await {
                let Some(runs) = watchers.upgrade() else { return };
                runs.touch();
            }
        });
        Arc::new(Api { engine, tokens, config, broker, descriptions, turns, runs, mcp, reload })
    }

    /// Starts `turn` as a task on the turns' runtime.
    fn spawn<F>(&self, turn: F) -> tokio::task::JoinHandle<F::Output>
    where
        F: std::future::Future + Send + 'static,
        F::Output: Send + 'static,
    {
        // The request's span (and the caller's trace context) goes with the turn.
        let turn = tracing::Instrument::in_current_span(turn);
        match &self.turns {
            Some(turns) => turns.spawn(turn),
            None => tokio::spawn(turn),
        }
    }

    /// Where the agent's approvals and questions wait.
    pub fn broker(&self) -> &Arc<Broker> {
        &self.broker
    }

    /// Who the routes act for: the agent's operator, through `caller`'s token.
    fn operator<'a>(&'a self, caller: Option<&'a Caller>) -> crate::broker::Who<'a> {
        let token = caller.map(|c| c.name.as_str());
        crate::broker::Who { agent: self.engine.agent(), surface: None, user: "api", conversation: None, token }
    }

    /// 503 without a token, 409 when the adapter is not `api`.
    fn interactive(&self) -> Result<(), ApiError> {
        if self.tokens.is_empty() {
            return Err(ApiError::new(StatusCode::SERVICE_UNAVAILABLE, auth::NO_TOKEN));
        }
        if !self.config.adapter_is_api {
            return Err(ApiError::new(StatusCode::CONFLICT, "interactive API adapter required"));
        }
        Ok(())
    }
}

/// The router: `/api/*` behind bearer auth, the probes open.
pub fn app(api: Arc<Api>) -> Router {
    app_with(api, Router::new())
}

/// [`app`] with `extra` routes (the agent's `/mcp`) merged in, so that their answers too
/// carry the [`AGENT_HEADER`].
pub fn app_with(api: Arc<Api>, extra: Router) -> Router {
    let scoped = |routes: Router<Arc<Api>>, scope: TokenScope| {
        routes.route_layer(middleware::from_fn_with_state((api.tokens.clone(), scope), auth::require))
    };
    let trigger = Router::new().route("/api/trigger", post(trigger::trigger));
    let decide = Router::new()
        .route("/api/approvals/{id}/decision", post(decisions::decide_approval))
        .route("/api/questions/{id}/answer", post(decisions::answer_question));
    let mut read = Router::new()
        .route("/api/approvals/{id}", get(decisions::approval))
        .route("/api/questions/{id}", get(decisions::question))
        .route("/api/runs", get(read::runs))
        .route("/api/runs/{id}", get(read::run))
        .route("/api/runs/{id}/events", get(read::run_events))
        .route("/api/activity", get(read::activity))
        .route("/api/approvals", get(read::approvals))
        .route("/api/questions", get(read::questions))
        .route("/api/skills", get(read::skills))
        .route("/api/mcp", get(read::mcp))
        .route("/api/audit", get(audit::audit));
    let admin = Router::new().route("/api/skills/reload", post(reload::reload));
    let open = match api.config.metrics_public {
        true => Router::new().route("/metrics", get(metrics)),
        false => {
            read = read.route("/metrics", get(metrics));
            Router::new()
        }
    };
    // Every `/api` route: a `Host` and `Origin` of the allowed ones (DNS rebinding, pages).
    let api_routes = Router::new()
        .merge(scoped(trigger, TokenScope::Trigger))
        .merge(scoped(decide, TokenScope::Decide))
        .merge(scoped(read, TokenScope::Read))
        .merge(scoped(admin, TokenScope::Admin))
        .route_layer(middleware::from_fn_with_state(Arc::new(api.config.allowed.clone()), auth::same_site));
    Router::new()
        .route("/healthz", get(|| async { axum::Json(serde_json::json!({"status": "ok"})) }))
        .route("/readyz", get(readyz))
        .merge(open)
        .merge(console::routes())
        .merge(api_routes)
        .fallback(|| async { ApiError::new(StatusCode::NOT_FOUND, "no such route") })
        .method_not_allowed_fallback(|| async {
            ApiError::new(StatusCode::METHOD_NOT_ALLOWED, "method not allowed on this route")
        })
        .layer(DefaultBodyLimit::max(api.config.body_limit))
        .with_state(api.clone())
        .merge(extra)
        .layer(middleware::map_response_with_state(api, agent_header))
}

/// `GET /readyz`: 200 once every skill is loaded and the state database answers; 503 while
/// some skills still compile (a server with an empty compile cache answers at once and loads
/// them in the background) or while the database is away (PostgreSQL restarting), so a load
/// balancer sends it nothing it cannot serve. Says how many skills, never which, and never
/// where the database is (the log does).
async fn readyz(State(api): State<Arc<Api>>) -> axum::response::Response {
    use axum::response::IntoResponse as _;
    let unavailable = |body: serde_json::Value| (StatusCode::SERVICE_UNAVAILABLE, axum::Json(body)).into_response();
    if api.engine.draining().is_cancelled() {
        return unavailable(serde_json::json!({"status": "stopping"}));
    }
    let pending = api.engine.skills().pending.len();
    if pending > 0 {
        return unavailable(serde_json::json!({"status": "compiling", "pending": pending}));
    }
    let state = api.engine.history().state();
    match tokio::time::timeout(READY_DATABASE_WAIT, state.ping()).await {
        Ok(Ok(())) => axum::Json(serde_json::json!({"status": "ready"})).into_response(),
        Ok(Err(e)) => {
            tracing::warn!("/readyz: the state database does not answer: {e}");
            unavailable(serde_json::json!({"status": "database_unavailable"}))
        }
        Err(_) => {
            tracing::warn!(
                "/readyz: the state database ({}) gave no answer within {READY_DATABASE_WAIT:?}",
                state.describe()
            );
            unavailable(serde_json::json!({"status": "database_unavailable"}))
        }
    }
}

/// How long `/readyz` waits for the state database.
const READY_DATABASE_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// `GET /metrics`: the process's metrics in the Prometheus (OpenMetrics) text format.
async fn metrics() -> impl axum::response::IntoResponse {
    ([(axum::http::header::CONTENT_TYPE, crate::metrics::CONTENT_TYPE)], crate::metrics::get().render())
}

/// Names the agent (`bot.name`, or the agent's `name`) on every response.
async fn agent_header(State(api): State<Arc<Api>>, mut response: axum::response::Response) -> axum::response::Response {
    if let Ok(value) = axum::http::HeaderValue::from_str(&api.config.name) {
        response.headers_mut().insert(AGENT_HEADER, value);
    }
    response
}

/// Serves `app(api)` on `listener` until `shutdown` resolves.
///
/// Every connection has `TCP_NODELAY`: a stream's events (SSE on `/api` and `/mcp`) are
/// small writes, each to go out at once. With Nagle's algorithm on, a write waits for the
/// previous one's ACK, which the client delays by up to 40 ms: every `/mcp` call took 44 ms.
pub async fn serve(
    listener: tokio::net::TcpListener,
    app: Router,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    use axum::serve::ListenerExt as _;
    let listener = listener.tap_io(|tcp| {
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!("cannot set TCP_NODELAY on a connection: {e}");
        }
    });
    axum::serve(listener, app).with_graceful_shutdown(shutdown).await
}

/// Binds `addr` (port 0: any free port) and serves in a spawned task; returns the address
/// bound. For tests and benchmarks; the server stops with the runtime.
pub async fn spawn(api: Arc<Api>, addr: SocketAddr) -> std::io::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    tokio::spawn(async move {
        if let Err(e) = serve(listener, app(api), std::future::pending()).await {
            tracing::error!("api server stopped: {e}");
        }
    });
    Ok(bound)
}
