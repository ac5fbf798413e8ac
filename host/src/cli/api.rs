//! `skillhost run --adapter api`: the HTTP API on `ui.port` (`SKILLHOST_UI_PORT`), with the
//! bearer token `ui.auth_token` (`SKILLHOST_UI_TOKEN`), and the skills as an MCP server
//! (streamable HTTP at `/mcp`, same token), until Ctrl-C or SIGTERM.

use skillhost::api::{self, Api, ApiConfig};
use skillhost::mcp::serve::SkillServer;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

/// Serves the API. Without a token the server listens on 127.0.0.1 only: the trigger route
/// is then open to anyone who can reach it, and the interactive routes answer 503.
pub async fn run(agent: Option<&str>, config: Option<&Path>) -> anyhow::Result<ExitCode> {
    let config = super::load_config(config)?;
    let ui = config.config.ui.clone();
    let port = ApiConfig::port(&ui).map_err(anyhow::Error::msg)?;
    let settings = ApiConfig::from_ui(&ui, true);
    let (engine, _) = super::chat::engine(config, agent, "trigger").await?;
    let engine = Arc::new(engine);
    let host = if settings.auth_token.is_some() { Ipv4Addr::UNSPECIFIED } else { Ipv4Addr::LOCALHOST };
    if settings.auth_token.is_none() {
        eprintln!(
            "warning: no ui.auth_token (SKILLHOST_UI_TOKEN): listening on 127.0.0.1 only, interactive routes disabled"
        );
    }
    let listener = tokio::net::TcpListener::bind(SocketAddr::from((host, port)))
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {host}:{port}: {e}"))?;
    eprintln!("skillhost api listening on http://{}", listener.local_addr()?);
    let (stop, stopping) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        shutdown().await;
        let _ = stop.send(true);
    });
    let signalled = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|stop| *stop).await;
    };
    // The API, and the skills as an MCP server at `/mcp` behind the same token.
    let mcp = skillhost::mcp::serve::http_app(SkillServer::for_engine(&engine), settings.auth_token.as_deref());
    let app = api::app(Api::new(engine.clone(), settings)).merge(mcp);
    let serving = api::serve(listener, app, signalled(stopping.clone()));
    // Graceful shutdown waits for open responses; a stream waiting on a person could hold it
    // for `human.timeout_seconds`, so open streams get a grace period, then are cut.
    let grace = async {
        signalled(stopping).await;
        tokio::time::sleep(SHUTDOWN_GRACE).await;
    };
    tokio::select! {
        served = serving => served?,
        () = grace => eprintln!("warning: open streams were cut after {} s", SHUTDOWN_GRACE.as_secs()),
    }
    super::chat::finish_background(&engine).await;
    Ok(ExitCode::SUCCESS)
}

/// How long open responses may run on after Ctrl-C / SIGTERM.
const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(10);

/// Ctrl-C or SIGTERM.
async fn shutdown() {
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
