//! One server's supervision: connect (authorizing when the server asks), list its tools, wait
//! for the connection to end, again with backoff, forever (the task is aborted when the
//! manager goes). A server's `tools/list_changed` lists its tools again on the same session
//! (on a `subscriptions/listen` stream at the revisions without `initialize`).

use super::client::{BACKOFF_MAX, BACKOFF_START, CONNECT_TIMEOUT, Server, Status};
use super::handler::Handler;
use super::oauth::{Browser, OAuth};
use super::transport::{self, Session};
use crate::config::McpServer;
use crate::store::StateStore;
use rmcp::ServiceError;
use rmcp::model::{ServerNotification, SubscriptionFilter, Tool};
use rmcp::service::{Peer, RoleClient};
use std::sync::{Arc, Weak};

/// How often one request (or connection) is authorized again after the server refused it:
/// a server that keeps refusing fresh tokens is not asked forever.
pub const AUTH_ATTEMPTS: usize = 2;

/// What the manager tells the servers it starts.
#[derive(Clone, Default)]
pub struct Settings {
    /// Whether a person can be asked (the elicitation capability is declared).
    pub people: bool,
    /// Where OAuth tokens are kept.
    pub state: Option<StateStore>,
    /// How an authorization URL reaches a person.
    pub browser: Browser,
}

pub(super) async fn supervise(server: Arc<Server>, settings: Settings) {
    let mut delay = BACKOFF_START;
    let weak = Arc::downgrade(&server);
    let handler = Handler {
        server: server.name.clone(),
        people: settings.people,
        askers: server.askers.clone(),
        tools_changed: Arc::new(move |peer| relist(weak.clone(), peer)),
    };
    let mut was_up = false;
    crate::metrics::mcp_server(&server.name, false);
    loop {
        match open(&server, &settings, handler.clone()).await {
            Ok((session, tools)) => {
                tracing::info!(server = %server.name, tools = tools.len(), "MCP server ready");
                crate::metrics::mcp_server(&server.name, true);
                if std::mem::replace(&mut was_up, true) {
                    crate::metrics::mcp_reconnect(&server.name);
                }
                let peer = session.peer().clone();
                server.update(|s| {
                    (s.status, s.peer, s.tools) = (Status::Ready, Some(peer.clone()), Arc::new(tools));
                    s.attempts += 1;
                });
                let listening = listen_for_changes(Arc::downgrade(&server), peer);
                let reason = session.waiting().await;
                listening.abort();
                let why = format!("the connection ended ({reason:?})");
                tracing::warn!(server = %server.name, "MCP server stopped: {why}; restarting in {delay:?}");
                crate::metrics::mcp_server(&server.name, false);
                server.update(|s| (s.status, s.peer, s.tools) = (Status::Down(why), None, Arc::default()));
                delay = BACKOFF_START;
            }
            Err(e) => {
                let why = format!("{e:#}");
                tracing::warn!(server = %server.name, "MCP server failed to start: {why}; retrying in {delay:?}");
                server.update(|s| {
                    (s.status, s.peer, s.tools) = (Status::Down(why), None, Arc::default());
                    s.attempts += 1;
                });
            }
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(BACKOFF_MAX);
        server.update(|s| s.status = Status::Starting);
    }
}

/// Connects and lists the tools, each within [`CONNECT_TIMEOUT`]; the person's authorization
/// in between is not charged to it.
async fn open(server: &Server, settings: &Settings, handler: Handler) -> anyhow::Result<(Session, Vec<Tool>)> {
    let oauth = oauth(server, settings).await?;
    let mut attempts = 0;
    let session = loop {
        let connecting = tokio::time::timeout(
            CONNECT_TIMEOUT,
            transport::connect(&server.config, handler.clone(), oauth.as_deref()),
        );
        let error = match connecting.await {
            Ok(Ok(session)) => break session,
            Ok(Err(transport::ConnectError::Init(e))) => e,
            Ok(Err(e)) => return Err(e.into()),
            Err(_) => anyhow::bail!("no answer within {} s", CONNECT_TIMEOUT.as_secs()),
        };
        match (error.auth_challenge(), &oauth) {
            (Some(challenge), Some(oauth)) if attempts < AUTH_ATTEMPTS => oauth.authorize(challenge, attempts).await?,
            (Some(_), None) => {
                anyhow::bail!("the server asks for authorization: configure `mcp_servers.{}.auth`", server.name)
            }
            _ => return Err(error.into()),
        }
        attempts += 1;
    };
    let listing = authorized(oauth.as_deref(), || session.list_all_tools());
    let tools = tokio::time::timeout(CONNECT_TIMEOUT, listing)
        .await
        .map_err(|_| anyhow::anyhow!("tools/list took over {} s", CONNECT_TIMEOUT.as_secs()))??;
    Ok((session, tools))
}

/// The server's OAuth, made once (it keeps the tokens and the redirect's port).
async fn oauth(server: &Server, settings: &Settings) -> anyhow::Result<Option<Arc<OAuth>>> {
    let McpServer::Streamablehttp { url, auth: Some(auth), .. } = &server.config else { return Ok(None) };
    if let Some(made) = server.oauth.read().clone() {
        return Ok(Some(made));
    }
    let made = Arc::new(OAuth::new(&server.name, url, auth, settings.state.clone(), settings.browser).await?);
    *server.oauth.write() = Some(made.clone());
    Ok(Some(made))
}

/// Runs `request`; when the server refuses it for want of authorization (401, or 403
/// `insufficient_scope`), authorizes and runs it again, at most [`AUTH_ATTEMPTS`] times.
pub(super) async fn authorized<T, F, Fut>(oauth: Option<&OAuth>, request: F) -> Result<T, anyhow::Error>
where
    F: Fn() -> Fut,
    Fut: Future<Output = Result<T, ServiceError>>,
{
    let mut result = request().await;
    for attempt in 0..AUTH_ATTEMPTS {
        let (Err(e), Some(oauth)) = (&result, oauth) else { break };
        let Some(challenge) = e.auth_challenge() else { break };
        oauth.authorize(challenge, attempt).await?;
        result = request().await;
    }
    Ok(result?)
}

/// A session at a revision without `initialize` (2026-07-28 on, after `server/discover`) gets
/// change notifications only on a `subscriptions/listen` stream it opens: one is opened for
/// `tools/list_changed` when the server says its list changes, and each notification re-lists
/// the tools as on older sessions. Earlier sessions get the notification unasked, through
/// the handler.
fn listen_for_changes(server: Weak<Server>, peer: Peer<RoleClient>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let Some(info) = peer.peer_info() else { return };
        let changes = info.capabilities.tools.as_ref().and_then(|t| t.list_changed).unwrap_or(false);
        if info.protocol_version.has_initialize() || !changes {
            return;
        }
        let name = server.upgrade().map(|s| s.name.clone()).unwrap_or_default();
        let filter = SubscriptionFilter::builder().tools_list_changed().build();
        let mut subscription = match peer.listen(filter).await {
            Ok(subscription) => subscription,
            Err(e) => {
                tracing::warn!(server = %name, "could not listen for tool list changes: {e}");
                return;
            }
        };
        loop {
            match subscription.next().await {
                Ok(Some(ServerNotification::ToolListChangedNotification(_))) => relist(server.clone(), peer.clone()),
                Ok(Some(_)) => {}
                Ok(None) => return,
                Err(e) => {
                    tracing::warn!(server = %name, "the tool list change subscription ended: {e}");
                    return;
                }
            }
        }
    })
}

/// Lists a server's tools again on its session after it said they changed; the next round
/// offers the new list. A failure keeps the old one (the server will say so again or die).
fn relist(server: Weak<Server>, peer: Peer<RoleClient>) {
    tokio::spawn(async move {
        let Some(server) = server.upgrade() else { return };
        match tokio::time::timeout(CONNECT_TIMEOUT, peer.list_all_tools()).await {
            Ok(Ok(tools)) => {
                tracing::info!(server = %server.name, tools = tools.len(), "MCP server's tools changed");
                server.update(|s| {
                    if s.status == Status::Ready {
                        s.tools = Arc::new(tools);
                    }
                });
            }
            Ok(Err(e)) => tracing::warn!(server = %server.name, "listing the changed tools failed: {e}"),
            Err(_) => tracing::warn!(server = %server.name, "listing the changed tools took too long"),
        }
    });
}
