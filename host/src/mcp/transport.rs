//! Connecting to one configured server, by transport: a child process on stdio, the legacy
//! HTTP+SSE transport, or streamable HTTP. Headers come from the config, whose `${VAR}`
//! references were substituted when it loaded.

use crate::config::McpServer;
use rmcp::ServiceExt;
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::sse_client::SseClientConfig;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{SseClientTransport, StreamableHttpClientTransport, TokioChildProcess};
use std::collections::BTreeMap;
use std::process::Stdio;

/// A live client session with one server.
pub type Session = RunningService<RoleClient, ()>;

/// Starts the transport and runs the MCP handshake.
pub async fn connect(config: &McpServer) -> anyhow::Result<Session> {
    match config {
        McpServer::Stdio { command, args, env, .. } => {
            let mut cmd = tokio::process::Command::new(command);
            cmd.args(args).envs(env).kill_on_drop(true);
            let (process, _) = TokioChildProcess::builder(cmd)
                .stderr(Stdio::inherit())
                .spawn()
                .map_err(|e| anyhow::anyhow!("cannot start `{command}`: {e}"))?;
            Ok(().serve(process).await?)
        }
        McpServer::Sse { url, headers, .. } => {
            let config = SseClientConfig { sse_endpoint: url.as_str().into(), ..Default::default() };
            let transport = SseClientTransport::start_with_client(http_client(headers)?, config).await?;
            Ok(().serve(transport).await?)
        }
        McpServer::Streamablehttp { url, headers, .. } => {
            let config = StreamableHttpClientTransportConfig::with_uri(url.as_str());
            let transport = StreamableHttpClientTransport::with_client(http_client(headers)?, config);
            Ok(().serve(transport).await?)
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
