//! Connecting to one configured server, by transport: a child process on stdio, the legacy
//! HTTP+SSE transport, or streamable HTTP. Headers come from the config, whose `${VAR}`
//! references were substituted when it loaded.
//!
//! Every transport starts the same way unless `protocol` says otherwise: the `initialize`
//! handshake at 2025-11-25, the newest revision that has one (a server may answer with an
//! older one). A server that refuses the handshake with a JSON-RPC error is connected again
//! and asked `server/discover` at 2026-07-28. `protocol: "2026-07-28"` starts with discovery
//! and never falls back; `protocol: "2025-11-25"` never discovers. The handshake comes first because rmcp's discover-first mode gives up on a
//! slow server after 10 s and then reads the late discover answer as the handshake's
//! ("conflict initialized response id"), failing the first attempt at every slow server.

use super::handler::Handler;
use super::listening::Listening;
use super::oauth::OAuth;
use super::sse::SseTransport;
use crate::config::{McpProtocol, McpServer};
use rmcp::model::ProtocolVersion;
use rmcp::service::{ClientInitializeError, ClientLifecycleMode, ClientServiceExt, RoleClient, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use std::collections::BTreeMap;
use std::process::Stdio;

/// A live client session with one server.
pub type Session = RunningService<RoleClient, Handler>;

/// Starts the transport and opens the session: the handshake, else discovery. A server with
/// `auth` gets its requests through `oauth`'s client (tokens added, refreshed).
pub async fn connect(config: &McpServer, handler: Handler, oauth: Option<&OAuth>) -> Result<Session, ConnectError> {
    let discover = || ClientLifecycleMode::Discover { preferred_versions: vec![ProtocolVersion::LATEST] };
    match config.protocol() {
        McpProtocol::Auto => {}
        McpProtocol::Handshake => return open(config, handler, oauth, ClientLifecycleMode::Initialize).await,
        McpProtocol::Stateless => return open(config, handler, oauth, discover()).await,
    }
    match open(config, handler.clone(), oauth, ClientLifecycleMode::Initialize).await {
        Err(ConnectError::Init(e)) if matches!(*e, ClientInitializeError::JsonRpcError(_)) => {
            let message = match *e {
                ClientInitializeError::JsonRpcError(refusal) => refusal.message,
                _ => Default::default(),
            };
            tracing::info!(server = %handler.server, "MCP server refused the handshake ({message}); trying server/discover");
            open(config, handler, oauth, discover()).await
        }
        outcome => outcome,
    }
}

/// Why a session did not open.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The transport could not start.
    #[error(transparent)]
    Transport(#[from] anyhow::Error),
    /// The lifecycle failed (the server may have asked for authorization: `auth_challenge`).
    #[error(transparent)]
    Init(Box<ClientInitializeError>),
}

impl From<ClientInitializeError> for ConnectError {
    fn from(e: ClientInitializeError) -> Self {
        ConnectError::Init(Box::new(e))
    }
}

async fn open(
    config: &McpServer,
    handler: Handler,
    oauth: Option<&OAuth>,
    lifecycle: ClientLifecycleMode,
) -> Result<Session, ConnectError> {
    match config {
        McpServer::Stdio { command, args, env, .. } => {
            let mut cmd = tokio::process::Command::new(command);
            cmd.args(args).envs(env).kill_on_drop(true);
            let (process, _) = TokioChildProcess::builder(cmd)
                .stderr(Stdio::inherit())
                .spawn()
                .map_err(|e| anyhow::anyhow!("cannot start `{command}`: {e}"))?;
            Ok(handler.serve_with_lifecycle(process, lifecycle).await?)
        }
        McpServer::Sse { url, headers, .. } => {
            let transport = SseTransport::connect(http_client(headers)?, url).await.map_err(anyhow::Error::from)?;
            Ok(handler.serve_with_lifecycle(transport, lifecycle).await?)
        }
        McpServer::Streamablehttp { url, headers, .. } => {
            let config = StreamableHttpClientTransportConfig::with_uri(url.as_str());
            let http = http_client(headers)?;
            let (session, opened) = match oauth {
                Some(oauth) => {
                    let client = oauth.client(http).await.map_err(anyhow::Error::from)?;
                    let (client, opened) = Listening::new(client);
                    let transport = StreamableHttpClientTransport::with_client(client, config);
                    (handler.serve_with_lifecycle(transport, lifecycle).await?, opened)
                }
                None => {
                    let (client, opened) = Listening::new(http);
                    let transport = StreamableHttpClientTransport::with_client(client, config);
                    (handler.serve_with_lifecycle(transport, lifecycle).await?, opened)
                }
            };
            // A session with a handshake has a standalone stream, opened after it: what the
            // server sends there must not be lost to a first call that overtook it.
            let stateful =
                session.peer_info().is_some_and(|info| info.protocol_version < ProtocolVersion::V_2026_07_28);
            if stateful {
                opened.wait(super::listening::WAIT).await;
            }
            Ok(session)
        }
    }
}

/// A client sending the configured headers with every request.
fn http_client(headers: &BTreeMap<String, String>) -> anyhow::Result<reqwest::Client> {
    let mut map = reqwest::header::HeaderMap::new();
    for (name, value) in headers {
        let name = reqwest::header::HeaderName::from_bytes(name.as_bytes())
            .map_err(|e| anyhow::anyhow!("header name `{name}`: {e}"))?;
        let value =
            reqwest::header::HeaderValue::from_str(value).map_err(|e| anyhow::anyhow!("header `{name}`: {e}"))?;
        map.insert(name, value);
    }
    Ok(reqwest::Client::builder().default_headers(map).no_proxy().build()?)
}
