//! Runs every adapter of every agent in one process: an HTTP server per agent that serves the
//! API (with its MCP endpoint at `/mcp`), and the terminal for the one agent that uses it.
//! An approval or a question always goes back through the adapter that received the
//! message: each adapter brings its own approver.

use super::{Agent, App};
use crate::adapters::api::{self, Api, ApiConfig};
use crate::adapters::mcp::{SkillServer, http_app};
use crate::adapters::terminal;
use crate::config::AdapterKind;
use anyhow::bail;
use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// How long open responses may run on after Ctrl-C / SIGTERM.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// Serves every agent's adapters (`adapter` overrides what the config names) until Ctrl-C or
/// SIGTERM, or until the terminal session ends when an agent uses the terminal.
pub async fn serve(app: App, adapter: Option<AdapterKind>) -> anyhow::Result<()> {
    let plan = plan(&app.agents, adapter)?;
    let mut turns = Turns(None);
    let (stop, stopping) = watch::channel(false);
    let mut servers = tokio::task::JoinSet::new();
    for (agent, port) in &plan.api {
        let listener = listen(agent, *port).await?;
        let app = http(agent, turns.handle()?);
        let shutdown = signalled(stopping.clone());
        servers.spawn(async move { api::serve(listener, app, shutdown).await });
    }
    match plan.terminal {
        Some(agent) => {
            // The terminal session ends the process, as `chat` does; Ctrl-C there cancels a
            // turn rather than stopping the servers.
            terminal::chat(&agent.engine, "cli").await;
        }
        None => shutdown_signal().await,
    }
    let _ = stop.send(true);
    let drained = async {
        while let Some(served) = servers.join_next().await {
            if let Ok(Err(e)) = served {
                tracing::error!("an API server stopped with an error: {e}");
            }
        }
    };
    // Graceful shutdown waits for open responses; a stream waiting on a person could hold
    // it for `human.timeout_seconds`, so open streams get a grace period, then are cut.
    if tokio::time::timeout(SHUTDOWN_GRACE, drained).await.is_err() {
        eprintln!("warning: open streams were cut after {} s", SHUTDOWN_GRACE.as_secs());
    }
    for agent in &app.agents {
        finish_background(&agent.engine).await;
    }
    Ok(())
}

/// The runtime the API servers' turns run on, beside the one that serves HTTP (see
/// [`Api::with_turns`]): as many workers as cores, like the serving runtime, which the OS
/// then shares between them. Shut down in the background when dropped (a runtime cannot
/// be dropped by a task of another one), after the servers drained. Started by the first
/// API server: a terminal-only run has none.
struct Turns(Option<tokio::runtime::Runtime>);

impl Turns {
    /// The runtime's handle, started on first use.
    fn handle(&mut self) -> anyhow::Result<tokio::runtime::Handle> {
        let runtime = match self.0.take() {
            Some(runtime) => runtime,
            None => tokio::runtime::Builder::new_multi_thread()
                .thread_name("skillhost-turns")
                .enable_all()
                .build()
                .map_err(|e| anyhow::anyhow!("cannot start the runtime for turns: {e}"))?,
        };
        Ok(self.0.insert(runtime).handle().clone())
    }
}

impl Drop for Turns {
    fn drop(&mut self) {
        if let Some(runtime) = self.0.take() {
            runtime.shutdown_background();
        }
    }
}

/// Which agent serves what, checked before anything listens.
struct Plan<'a> {
    api: Vec<(&'a Agent, u16)>,
    terminal: Option<&'a Agent>,
}

fn plan(agents: &[Agent], adapter: Option<AdapterKind>) -> anyhow::Result<Plan<'_>> {
    let mut plan = Plan { api: Vec::new(), terminal: None };
    let mut ports: BTreeMap<u16, &str> = BTreeMap::new();
    let kinds = |agent: &Agent| adapter.map(|a| vec![a]).unwrap_or_else(|| agent.adapters.clone());
    // `SKILLHOST_UI_PORT` / `_TOKEN` (or the spec's `MITHAI_UI_*`) set the port and token of
    // the one agent serving the API; with several, each has its own `ui`, and a variable
    // that would replace them all (or apply to none) is refused by name.
    let serving_api = agents.iter().filter(|a| kinds(a).contains(&AdapterKind::Api)).count();
    if serving_api > 1
        && let Some(name) = ApiConfig::overriding_variable()
    {
        bail!(
            "{name} is set, but {serving_api} agents serve the API: it would replace every agent's own ui setting; \
             unset it and give each agent its own agents.<name>.ui.port and ui.auth_token"
        );
    }
    let single = serving_api == 1;
    for agent in agents {
        let label = agent.name.as_deref().unwrap_or("the agent");
        for kind in kinds(agent) {
            match kind {
                AdapterKind::Cli => {
                    if let Some(other) = plan.terminal {
                        bail!(
                            "agents `{}` and `{label}` both use the cli adapter; only one agent can have the terminal",
                            other.name.as_deref().unwrap_or_default()
                        );
                    }
                    plan.terminal = Some(agent);
                }
                AdapterKind::Api => {
                    // `SKILLHOST_UI_PORT` overrides the port of a single agent; several agents
                    // each need a `ui.port` of their own.
                    let port = ApiConfig::port(&agent.ui, single).map_err(anyhow::Error::msg)?;
                    if let Some(other) = ports.insert(port, label) {
                        bail!(
                            "agents `{other}` and `{label}` both serve the API on port {port}: give each agent its own `ui.port` (agents.<name>.ui.port)"
                        );
                    }
                    plan.api.push((agent, port));
                }
                other => bail!(
                    "{label}: the {} adapter is not served by skillhost yet; use cli or api",
                    format!("{other:?}").to_lowercase()
                ),
            }
        }
    }
    Ok(plan)
}

/// The agent's HTTP app: the API, and its tools over MCP at `/mcp` behind the same token.
fn http(agent: &Agent, turns: tokio::runtime::Handle) -> axum::Router {
    let settings = ApiConfig::from_ui(&agent.ui, true).named(&agent.display_name);
    let token = settings.auth_token.clone();
    let mcp = http_app(SkillServer::new(agent.engine.clone(), &agent.display_name), token.as_deref(), &agent.ui);
    api::app_with(Api::with_turns(agent.engine.clone(), settings, turns), mcp)
}

/// Without a token the server listens on 127.0.0.1 only: the trigger route is then open to
/// anyone who can reach it, and the interactive routes answer 503.
async fn listen(agent: &Agent, port: u16) -> anyhow::Result<tokio::net::TcpListener> {
    let token = ApiConfig::from_ui(&agent.ui, true).auth_token;
    let host = if token.is_some() { Ipv4Addr::UNSPECIFIED } else { Ipv4Addr::LOCALHOST };
    let who = agent.name.as_deref().map(|n| format!(" (agent `{n}`)")).unwrap_or_default();
    if token.is_none() {
        eprintln!(
            "warning: no ui.auth_token (SKILLHOST_UI_TOKEN){who}: listening on 127.0.0.1 only, interactive routes disabled"
        );
    }
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
    Ok(listener)
}

/// Lets the last turns' daily reflections reach the memory files before the process ends,
/// but never hangs the exit on a slow provider.
pub async fn finish_background(engine: &Arc<crate::engine::Engine>) {
    if tokio::time::timeout(Duration::from_secs(30), engine.wait_for_background()).await.is_err() {
        eprintln!("warning: a background reflection was still running and was dropped");
    }
}

async fn signalled(mut rx: watch::Receiver<bool>) {
    let _ = rx.wait_for(|stop| *stop).await;
}

/// Ctrl-C or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut term) => {
                term.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
}
