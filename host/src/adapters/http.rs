//! The HTTP adapter of one agent: the API ([`super::api`]) and the agent's tools over MCP at
//! `/mcp` ([`super::mcp::http_app`]) on one port, behind one token.

use super::api::{self, Api, ApiConfig};
use super::mcp::{SkillServer, http_app};
use super::{Adapter, Stop, stopped};
use crate::config::Ui;
use crate::engine::Engine;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;

/// One agent's HTTP server, bound and ready to serve.
pub struct HttpAdapter {
    listener: tokio::net::TcpListener,
    app: axum::Router,
    describe: String,
}

/// What one agent's HTTP server serves.
pub struct HttpSettings<'a> {
    /// Its `agents` key, if any (for messages).
    pub agent: Option<&'a str>,
    /// Its display name (`bot.name` / `agents.<name>.name`): the agent header and the MCP
    /// server's name.
    pub display_name: &'a str,
    /// Its `ui` block.
    pub ui: &'a Ui,
    /// The port (the plan chose it: `ui.port`, or the variable for a single agent).
    pub port: u16,
    /// The agent's recent runs (the console's list).
    pub runs: Arc<crate::adapters::runs::Runs>,
    /// The MCP servers (the console's status page).
    pub mcp: Arc<crate::mcp::McpManager>,
    /// What `POST /api/skills/reload` calls.
    pub reload: Option<Arc<dyn crate::adapters::api::reload::SkillReload>>,
}

impl HttpAdapter {
    /// Binds the port for `engine`: on every interface with a token, on 127.0.0.1 only
    /// without one (the trigger route is then open to anyone who can reach it, and the
    /// interactive routes answer 503). Turns run on `turns`.
    pub async fn bind(
        engine: Arc<Engine>,
        settings: HttpSettings<'_>,
        turns: tokio::runtime::Handle,
    ) -> anyhow::Result<Self> {
        let config = ApiConfig::from_ui(settings.ui, true).named(settings.display_name);
        let tokens = config.tokens();
        let host = if tokens.is_empty() { Ipv4Addr::LOCALHOST } else { Ipv4Addr::UNSPECIFIED };
        let who = settings.agent.map(|n| format!(" (agent `{n}`)")).unwrap_or_default();
        if tokens.is_empty() {
            eprintln!(
                "warning: no ui.auth_token (SKILLHOST_UI_TOKEN) or ui.tokens{who}: listening on 127.0.0.1 only; \
                 POST /api/trigger and /mcp are open to anyone on this machine, every other /api route answers 503"
            );
        }
        let port = settings.port;
        let listener = tokio::net::TcpListener::bind(SocketAddr::from((host, port)))
            .await
            .map_err(|e| anyhow::anyhow!("cannot listen on {host}:{port}{who}: {e}"))?;
        // One write: stderr is unbuffered, and `eprintln!` writes a line in pieces, which other
        // processes writing to the same pipe could split.
        let line = format!("skillhost api listening on http://{}{who}\n", listener.local_addr()?);
        let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
        // The HTTP clients read the system's root certificates when first used: now, beside the
        // serving, rather than in the first request.
        std::thread::spawn(|| {
            crate::llm::prepare_client();
            crate::sandbox::capabilities::http_client();
        });
        let server = SkillServer::new(engine.clone(), settings.display_name);
        let mcp = http_app(server, tokens, &config.allowed, engine.draining().child_token());
        let api = Api::serving(engine, config, turns, (settings.runs, settings.mcp), settings.reload);
        let app = api::app_with(api, mcp);
        Ok(HttpAdapter { describe: format!("the api on {}{who}", listener.local_addr()?), listener, app })
    }
}

#[async_trait::async_trait]
impl Adapter for HttpAdapter {
    fn describe(&self) -> String {
        self.describe.clone()
    }

    async fn serve(self: Box<Self>, stop: Stop) -> anyhow::Result<()> {
        Ok(api::serve(self.listener, self.app, stopped(stop)).await?)
    }
}
