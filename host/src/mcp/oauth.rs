//! OAuth 2.1 for remote (streamable HTTP) servers, as the MCP authorization spec describes,
//! on rmcp's `auth` machinery: a server's 401 (or 403 `insufficient_scope`) challenge starts
//! discovery (the challenge's `resource_metadata`, else `/.well-known/oauth-protected-resource`,
//! then the authorization server's metadata), the client is registered (a configured client
//! id, a client ID metadata document, or dynamic registration), the person authorizes (PKCE,
//! the redirect caught on a loopback port) and the code is exchanged for tokens. Requests
//! carry the token; an expired one is refreshed; a 403 asks for the union of the scopes.
//!
//! Tokens live in the state store (namespace [`NAMESPACE`], one key per server and URL), so a
//! restart reuses them; they are never logged (rmcp's own `Debug` redacts them too).

use crate::config::McpAuth;
use crate::store::StateStore;
use oauth2::TokenResponse;
use rmcp::transport::auth::{
    AuthClient, AuthError, AuthorizationManager, AuthorizationRequest, AuthorizationSession, CredentialStore,
    StoredCredentials, WWWAuthenticateParams,
};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::Mutex;

/// The state-store namespace of the servers' tokens.
pub const NAMESPACE: &str = "mcp-oauth";
/// How long the person has to authorize in the browser.
pub const AUTHORIZE_TIMEOUT: Duration = Duration::from_secs(300);
/// The path of the loopback redirect URI.
const CALLBACK: &str = "/callback";

/// How the authorization URL reaches a person.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Browser {
    /// Shown on stderr (the operator's terminal) for them to open; the redirect is awaited.
    #[default]
    Person,
    /// Fetched by skillhost itself, following redirects to the loopback port: for
    /// authorization servers that approve without a person (the conformance suite, tests).
    Fetch,
}

/// Why authorization failed.
#[derive(Debug, thiserror::Error)]
pub enum OAuthError {
    /// rmcp's OAuth flow failed (discovery, registration, the token exchange).
    #[error("OAuth: {0}")]
    Auth(#[from] AuthError),
    /// The loopback redirect could not be listened for or read.
    #[error("the authorization redirect on the loopback port: {0}")]
    Redirect(#[from] std::io::Error),
    /// Nobody authorized in time.
    #[error("nobody authorized within {} s", AUTHORIZE_TIMEOUT.as_secs())]
    TimedOut,
}

/// One server's authorization: the manager its requests take tokens from.
pub struct OAuth {
    server: String,
    url: String,
    config: McpAuth,
    browser: Browser,
    manager: Arc<Mutex<AuthorizationManager>>,
    /// The redirect's listener, bound once: a step-up must come back to the same URI.
    loopback: Mutex<Option<TcpListener>>,
}

impl OAuth {
    /// The server's authorization, with the tokens an earlier run stored (if any).
    pub async fn new(
        server: &str,
        url: &str,
        config: &McpAuth,
        state: Option<StateStore>,
        browser: Browser,
    ) -> Result<Self, OAuthError> {
        let mut manager = AuthorizationManager::new(url).await?;
        if let Some(state) = state {
            manager.set_credential_store(Stored { state, key: format!("{server} {url}") });
            // Metadata discovery runs only when tokens are stored; a failure means we start over.
            if let Err(e) = manager.initialize_from_store().await {
                tracing::info!(server, "stored MCP authorization not usable ({e}); authorizing again when asked");
            }
        }
        let manager = Arc::new(Mutex::new(manager));
        let (server, url, config) = (server.to_owned(), url.to_owned(), config.clone());
        Ok(OAuth { server, url, config, browser, manager, loopback: Mutex::default() })
    }

    /// An HTTP client for the transport that adds the token to every request.
    pub async fn client(&self, http: reqwest::Client) -> Result<AuthClient<reqwest::Client>, OAuthError> {
        let mut client = AuthClient::new(http, AuthorizationManager::new(self.url.as_str()).await?);
        client.auth_manager = self.manager.clone();
        Ok(client)
    }

    /// Authorizes after the server's `challenge` (a `WWW-Authenticate` value): a first
    /// authorization, or a scope step-up after a 403. Requests wait meanwhile. On the first
    /// `attempt` for a request, a refused token that has a refresh token is refreshed instead
    /// (a server may end a token before its `expires_in`); the person is asked only when that
    /// fails or the new token is refused too.
    pub async fn authorize(&self, challenge: &str, attempt: usize) -> Result<(), OAuthError> {
        let mut guard = self.manager.lock().await;
        if attempt == 0 && self.refreshed(&guard, challenge).await {
            return Ok(());
        }
        let placeholder = AuthorizationManager::new(self.url.as_str()).await?;
        let manager = std::mem::replace(&mut *guard, placeholder);
        let (manager, result) = self.run(manager, challenge).await;
        *guard = manager;
        result
    }

    /// Whether the refused token could be refreshed (not for a scope step-up: a refresh
    /// cannot widen the grant).
    async fn refreshed(&self, manager: &AuthorizationManager, challenge: &str) -> bool {
        let Ok(base) = url::Url::parse(&self.url) else { return false };
        if WWWAuthenticateParams::parse(challenge, &base).is_insufficient_scope() {
            return false;
        }
        let refreshable =
            manager.get_credentials().await.is_ok_and(|(_, token)| token.is_some_and(|t| t.refresh_token().is_some()));
        if !refreshable {
            return false;
        }
        match manager.refresh_token().await {
            Ok(_) => {
                tracing::info!(server = %self.server, "MCP server refused its token; refreshed it");
                true
            }
            Err(e) => {
                tracing::info!(server = %self.server, "refreshing the refused token failed ({e}); authorizing again");
                false
            }
        }
    }

    /// The flow; the manager comes back whatever happens (it holds the stores and metadata).
    async fn run(
        &self,
        manager: AuthorizationManager,
        challenge: &str,
    ) -> (AuthorizationManager, Result<(), OAuthError>) {
        let redirect = match self.redirect_uri().await {
            Ok(uri) => uri,
            Err(e) => return (manager, Err(e)),
        };
        let session = match self.session(manager, challenge, &redirect).await {
            Ok(session) => session,
            Err((manager, e)) => return (manager, Err(e)),
        };
        let result = match self.callback(session.get_authorization_url(), &redirect).await {
            Ok(callback) => session.handle_callback_url(&callback).await.map(|_| ()).map_err(OAuthError::from),
            Err(e) => Err(e),
        };
        if result.is_ok() {
            tracing::info!(server = %self.server, "MCP server authorized");
        }
        let AuthorizationSession { auth_manager, .. } = session;
        (auth_manager, result)
    }

    /// A session for a first authorization, or for more scopes when the server said
    /// `insufficient_scope` to tokens it had already granted.
    async fn session(
        &self,
        mut manager: AuthorizationManager,
        challenge: &str,
        redirect: &str,
    ) -> Result<AuthorizationSession, (AuthorizationManager, OAuthError)> {
        let base = url::Url::parse(&self.url).map_err(|e| AuthError::OAuthError(e.to_string()));
        let params = match base {
            Ok(base) => WWWAuthenticateParams::parse(challenge, &base),
            Err(e) => return Err((manager, e.into())),
        };
        let authorized = manager.get_credentials().await.is_ok_and(|(_, token)| token.is_some());
        if params.is_insufficient_scope() && authorized {
            let scope = params.scope.unwrap_or_default();
            return match manager.request_scope_upgrade(&scope).await {
                Ok(url) => Ok(AuthorizationSession::for_scope_upgrade(manager, url, redirect)),
                Err(e) => Err((manager, e.into())),
            };
        }
        match manager.resolve_metadata_from_challenge(Some(challenge)).await {
            Ok(resolution) => manager.set_metadata(resolution.metadata),
            Err(e) => return Err((manager, e.into())),
        }
        AuthorizationSession::new(manager, self.request(challenge, redirect)).await.map_err(|(m, e)| (m, e.into()))
    }

    /// What the configuration says about the client and scopes.
    fn request(&self, challenge: &str, redirect: &str) -> AuthorizationRequest {
        let c = &self.config;
        let mut request = AuthorizationRequest::new(redirect)
            .with_challenge(challenge)
            .with_client_name("skillhost")
            .with_initial_scope_selection();
        if !c.scopes.is_empty() {
            request = request.with_scopes(c.scopes.iter().cloned());
        }
        if let Some(id) = &c.client_id {
            request = request.with_preregistered_client(id);
        }
        if let Some(secret) = &c.client_secret {
            request = request.with_client_secret(secret);
        }
        if let Some(url) = &c.client_metadata_url {
            request = request.with_client_metadata_url(url);
        }
        request
    }

    async fn redirect_uri(&self) -> Result<String, OAuthError> {
        let mut loopback = self.loopback.lock().await;
        if loopback.is_none() {
            *loopback = Some(TcpListener::bind(("127.0.0.1", self.config.redirect_port.unwrap_or(0))).await?);
        }
        let port = loopback.as_ref().map(|l| l.local_addr()).transpose()?.map_or(0, |a| a.port());
        Ok(format!("http://127.0.0.1:{port}{CALLBACK}"))
    }

    /// The redirect with the authorization code, after the person (or the fetch) went to `url`.
    async fn callback(&self, url: &str, redirect: &str) -> Result<String, OAuthError> {
        let loopback = self.loopback.lock().await;
        let Some(listener) = loopback.as_ref() else { return Err(std::io::Error::other("not listening").into()) };
        let caught = async {
            match self.browser {
                Browser::Person => {
                    eprintln!(
                        "MCP server `{}` needs authorization. Open this URL in a browser (waiting {} s for the redirect to {redirect}):\n  {url}",
                        self.server,
                        AUTHORIZE_TIMEOUT.as_secs()
                    );
                    redirected(listener, redirect).await
                }
                Browser::Fetch => {
                    let fetch = async {
                        let client = reqwest::Client::builder().no_proxy().build().map_err(std::io::Error::other)?;
                        client.get(url).send().await.map_err(std::io::Error::other)
                    };
                    let (callback, _) = tokio::join!(redirected(listener, redirect), fetch);
                    callback
                }
            }
        };
        tokio::time::timeout(AUTHORIZE_TIMEOUT, caught).await.map_err(|_| OAuthError::TimedOut)?.map_err(Into::into)
    }
}

/// Answers requests on the loopback port until the redirect to [`CALLBACK`] arrives; returns
/// its full URL (code, state, issuer).
async fn redirected(listener: &TcpListener, redirect: &str) -> std::io::Result<String> {
    loop {
        let (mut socket, _) = listener.accept().await?;
        let mut buf = vec![0u8; 8192];
        let mut len = 0;
        while len < buf.len() && !buf[..len].windows(4).any(|w| w == b"\r\n\r\n") {
            match socket.read(&mut buf[len..]).await? {
                0 => break,
                n => len += n,
            }
        }
        let head = String::from_utf8_lossy(&buf[..len]);
        let target = head.lines().next().and_then(|l| l.split_whitespace().nth(1)).unwrap_or_default().to_owned();
        let found = target.starts_with(CALLBACK) && target[CALLBACK.len()..].starts_with('?');
        let (status, body) =
            if found { ("200 OK", "Authorized. You can close this window.") } else { ("404 Not Found", "Not found.") };
        let response = format!(
            "HTTP/1.1 {status}\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        let _ = socket.write_all(response.as_bytes()).await;
        if found {
            let origin = redirect.strip_suffix(CALLBACK).unwrap_or(redirect);
            return Ok(format!("{origin}{target}"));
        }
    }
}

/// Tokens in the state store, one key per server and URL.
struct Stored {
    state: StateStore,
    key: String,
}

fn store_error(e: impl std::fmt::Display) -> AuthError {
    AuthError::InternalError(format!("the state store: {e}"))
}

#[async_trait::async_trait]
impl CredentialStore for Stored {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        let Some(text) = self.state.get(NAMESPACE, &self.key).await.map_err(store_error)? else { return Ok(None) };
        // Unreadable (an older format): authorize again rather than fail.
        Ok(serde_json::from_str(&text).ok())
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        let text = serde_json::to_string(&credentials).map_err(store_error)?;
        self.state.set(NAMESPACE, &self.key, &text).await.map_err(store_error)
    }

    async fn clear(&self) -> Result<(), AuthError> {
        self.state.delete(NAMESPACE, &self.key).await.map_err(store_error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn get(port: u16, path: &str) -> String {
        let mut socket = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        socket.write_all(format!("GET {path} HTTP/1.1\r\nhost: x\r\n\r\n").as_bytes()).await.unwrap();
        let mut answer = String::new();
        socket.read_to_string(&mut answer).await.unwrap();
        answer
    }

    #[tokio::test]
    async fn the_loopback_answers_until_the_redirect_with_its_code_arrives() {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let redirect = format!("http://127.0.0.1:{port}{CALLBACK}");
        let browser = async {
            assert!(get(port, "/favicon.ico").await.starts_with("HTTP/1.1 404"));
            assert!(get(port, "/callbackx?code=1").await.starts_with("HTTP/1.1 404"));
            get(port, "/callback?code=abc&state=s1").await
        };
        let (caught, shown) = tokio::join!(redirected(&listener, &redirect), browser);
        assert_eq!(caught.unwrap(), format!("{redirect}?code=abc&state=s1"));
        assert!(shown.starts_with("HTTP/1.1 200") && shown.ends_with("You can close this window."), "{shown}");
    }
}
