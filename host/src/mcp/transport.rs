//! Connecting to one configured server, by transport: a child process on stdio, the legacy
//! HTTP+SSE transport, or streamable HTTP. Headers come from the config, whose `${VAR}`
//! references were substituted when it loaded.
//!
//! Every transport starts the same way: `server/discover` at the newest protocol revision
//! (2026-07-28, no handshake), falling back to the `initialize` handshake at the newest
//! revision that has one when the server answers as a legacy server.

use super::sse::SseTransport;
use crate::config::McpServer;
use rmcp::model::ProtocolVersion;
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RoleClient, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use std::collections::BTreeMap;
use std::process::Stdio;

/// A live client session with one server.
pub type Session = RunningService<RoleClient, ()>;

/// Starts the transport and opens the session (discovery, or the legacy handshake).
pub async fn connect(config: &McpServer) -> anyhow::Result<Session> {
    match config {
        McpServer::Stdio { command, args, env, .. } => {
            let mut cmd = tokio::process::Command::new(command);
            cmd.args(args).envs(env).kill_on_drop(true);
            let (process, _) = TokioChildProcess::builder(cmd)
                .stderr(Stdio::inherit())
                .spawn()
                .map_err(|e| anyhow::anyhow!("cannot start `{command}`: {e}"))?;
            Ok(().serve_with_lifecycle(process, lifecycle()).await?)
        }
        McpServer::Sse { url, headers, .. } => {
            let transport = SseTransport::connect(http_client(headers)?, url).await?;
            Ok(().serve_with_lifecycle(transport, lifecycle()).await?)
        }
        McpServer::Streamablehttp { url, headers, .. } => {
            let config = StreamableHttpClientTransportConfig::with_uri(url.as_str());
            let transport = StreamableHttpClientTransport::with_client(http_client(headers)?, config);
            Ok(().serve_with_lifecycle(transport, lifecycle()).await?)
        }
    }
}

/// The newest revision first; a server that does not know `server/discover` gets the
/// handshake at the newest revision that has one (it may answer with an older one).
fn lifecycle() -> ClientLifecycleMode {
    ClientLifecycleMode::Auto {
        preferred_versions: vec![ProtocolVersion::LATEST],
        legacy_version: Some(ProtocolVersion::LATEST_WITH_INITIALIZE),
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
