//! Who may use the HTTP server (the API and `/mcp`): bearer tokens with names and scopes
//! (`ui.tokens`; `ui.auth_token` may do everything and is named `default`), and the `Host`
//! and `Origin` a request may come with (DNS rebinding, cross-origin pages). Tokens are
//! compared in constant time (both sides hashed first, so not even the length leaks through
//! timing), every configured token each time.

use super::api::error::ApiError;
use crate::config::{DEFAULT_TOKEN_NAME, TokenScope, Ui};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};
use std::sync::Arc;

/// A configured token, hashed.
#[derive(Clone)]
pub struct Token {
    digest: [u8; 32],
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(..)")
    }
}

impl Token {
    /// The token; an empty one counts as not configured.
    pub fn new(token: &str) -> Option<Self> {
        (!token.is_empty()).then(|| Token { digest: Sha256::digest(token.as_bytes()).into() })
    }

    /// Whether `given` is the token.
    pub fn matches(&self, given: &str) -> bool {
        let given: [u8; 32] = Sha256::digest(given.as_bytes()).into();
        given.iter().zip(self.digest.iter()).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
    }
}

/// Why a route that needs a token answers 503 when none is configured.
pub const NO_TOKEN: &str = "API authentication required: set ui.auth_token (SKILLHOST_UI_TOKEN) or ui.tokens";

/// Who a request came from: the token's name and what it may do.
#[derive(Debug, Clone)]
pub struct Caller {
    /// The token's name (`default` for `ui.auth_token`).
    pub name: String,
    /// What it may do.
    pub scopes: Vec<TokenScope>,
}

impl Caller {
    /// Whether it may do `scope`.
    pub fn may(&self, scope: TokenScope) -> bool {
        self.scopes.contains(&scope)
    }
}

/// Every token the server takes; none: no authentication (loopback only).
#[derive(Debug, Clone, Default)]
pub struct Tokens(Arc<Vec<(Token, Caller)>>);

impl Tokens {
    /// `default` (`ui.auth_token` or its variable: every scope) and `ui.tokens`.
    pub fn new(default: Option<&str>, named: &[crate::config::NamedToken]) -> Self {
        let default = default
            .and_then(Token::new)
            .map(|token| (token, Caller { name: DEFAULT_TOKEN_NAME.to_owned(), scopes: TokenScope::ALL.to_vec() }));
        let named = named.iter().filter_map(|t| {
            let caller = Caller { name: t.name.clone(), scopes: t.scopes.clone() };
            Token::new(&t.token).map(|token| (token, caller))
        });
        Tokens(Arc::new(default.into_iter().chain(named).collect()))
    }

    /// Whether no token is configured.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether there is more than one token (MCP tasks are then kept per token).
    pub fn several(&self) -> bool {
        self.0.len() > 1
    }

    /// Who presents `headers`' bearer token: `None` when no token is configured.
    pub fn caller(&self, headers: &HeaderMap) -> Result<Option<Caller>, ApiError> {
        if self.is_empty() {
            return Ok(None);
        }
        let given = headers
            .get(axum::http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")));
        let Some(given) = given.map(str::trim) else {
            return Err(ApiError::new(
                StatusCode::UNAUTHORIZED,
                "missing bearer token (Authorization: Bearer <token>)",
            ));
        };
        // Every token is compared, the match or not.
        let mut found = None;
        for (token, caller) in self.0.iter() {
            if token.matches(given) && found.is_none() {
                found = Some(caller.clone());
            }
        }
        found.map(Some).ok_or_else(|| ApiError::new(StatusCode::UNAUTHORIZED, "invalid bearer token"))
    }

    /// The caller, when it may do `scope`: 401 without a known token, 403 with one that
    /// lacks the scope, 503 for a scope that needs a token when none is configured
    /// (`trigger` and `mcp` are then open, on loopback only).
    pub fn admit(&self, headers: &HeaderMap, scope: TokenScope) -> Result<Option<Caller>, ApiError> {
        if self.is_empty() && !matches!(scope, TokenScope::Trigger | TokenScope::Mcp) {
            return Err(ApiError::new(StatusCode::SERVICE_UNAVAILABLE, NO_TOKEN));
        }
        match self.caller(headers)? {
            Some(caller) if !caller.may(scope) => Err(ApiError::new(
                StatusCode::FORBIDDEN,
                format!("token `{}` does not have the `{}` scope", caller.name, scope.name()),
            )),
            caller => Ok(caller),
        }
    }
}

/// Middleware: the request goes on only with a token that may do the route's scope; its
/// [`Caller`] goes with it (a request extension).
pub async fn require(
    State((tokens, scope)): State<(Tokens, TokenScope)>,
    mut request: Request,
    next: Next,
) -> Response {
    match tokens.admit(request.headers(), scope) {
        Ok(caller) => {
            if let Some(caller) = caller {
                request.extensions_mut().insert(caller);
            }
            next.run(request).await
        }
        Err(e) => e.into_response(),
    }
}

/// The loopback names every local client uses.
pub const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// The `Host`s and browser `Origin`s the server answers: the loopback ones and
/// `ui.allowed_hosts` / `ui.allowed_origins` (`["*"]`: any).
#[derive(Debug, Clone)]
pub struct Allowed {
    /// `None`: any.
    hosts: Option<Vec<String>>,
    /// `None`: any.
    origins: Option<Vec<String>>,
}

impl Allowed {
    /// What `ui` allows.
    pub fn of(ui: &Ui) -> Self {
        let any = |list: &[String]| list.iter().any(|h| h == "*");
        let hosts = (!any(&ui.allowed_hosts))
            .then(|| LOOPBACK_HOSTS.iter().map(|h| h.to_string()).chain(ui.allowed_hosts.iter().cloned()).collect());
        let loopback = ["http", "https"]
            .into_iter()
            .flat_map(|scheme| ["localhost", "127.0.0.1", "[::1]"].map(|h| format!("{scheme}://{h}:*")));
        let origins = (!any(&ui.allowed_origins)).then(|| loopback.chain(ui.allowed_origins.iter().cloned()).collect());
        Allowed { hosts, origins }
    }

    /// The `Host`s, `None` for any (what `/mcp`'s transport is given).
    pub fn hosts(&self) -> Option<&[String]> {
        self.hosts.as_deref()
    }

    /// The `Origin`s, `None` for any.
    pub fn origins(&self) -> Option<&[String]> {
        self.origins.as_deref()
    }

    /// `Ok` when `headers`' `Host` is allowed and their `Origin`, if any, too (a request
    /// without an `Origin` does not come from a web page's script); else 403 saying which.
    pub fn check(&self, headers: &HeaderMap) -> Result<(), ApiError> {
        let refused = |what: &str| {
            ApiError::new(
                StatusCode::FORBIDDEN,
                format!("{what} is not allowed (ui.allowed_hosts / ui.allowed_origins)"),
            )
        };
        if let Some(hosts) = &self.hosts {
            let host = headers.get(axum::http::header::HOST).and_then(|h| h.to_str().ok()).unwrap_or_default();
            if !hosts.iter().any(|allowed| host_matches(allowed, host)) {
                return Err(refused("the Host header"));
            }
        }
        if let (Some(origins), Some(origin)) = (&self.origins, headers.get(axum::http::header::ORIGIN)) {
            let origin = origin.to_str().unwrap_or_default();
            if !origins.iter().any(|allowed| origin_matches(allowed, origin)) {
                return Err(refused("the Origin header"));
            }
        }
        Ok(())
    }
}

/// Lower-case host and port of an authority (`host`, `host:port`, `[v6]:port`).
fn authority(text: &str) -> Option<(String, Option<u16>)> {
    // A bare IPv6 address (`::1`, as `ui.allowed_hosts` may list it) has no port.
    if text.matches(':').count() > 1 && !text.trim().starts_with('[') {
        return text.trim().parse::<std::net::Ipv6Addr>().ok().map(|ip| (ip.to_string(), None));
    }
    let authority = axum::http::uri::Authority::try_from(text.trim()).ok()?;
    let host = authority.host().trim_matches(['[', ']']).to_ascii_lowercase();
    Some((host, authority.port_u16()))
}

/// Whether `host` (a `Host` header) is `allowed` (`name`: any port; `name:port`: that one).
fn host_matches(allowed: &str, host: &str) -> bool {
    match (authority(allowed), authority(host)) {
        (Some((a_host, a_port)), Some((host, port))) => a_host == host && a_port.is_none_or(|p| Some(p) == port),
        _ => false,
    }
}

/// Whether `origin` is `allowed` (`scheme://host`: any port; `:*` too; `:port`: that one,
/// the scheme's default port when the origin names none).
fn origin_matches(allowed: &str, origin: &str) -> bool {
    if origin.trim().eq_ignore_ascii_case("null") || allowed.eq_ignore_ascii_case("null") {
        return allowed.eq_ignore_ascii_case("null") && origin.trim().eq_ignore_ascii_case("null");
    }
    let split = |text: &str| {
        let (scheme, rest) = text.trim().split_once("://")?;
        Some((scheme.to_ascii_lowercase(), rest.to_owned()))
    };
    let (Some((a_scheme, a_rest)), Some((scheme, rest))) = (split(allowed), split(origin)) else { return false };
    let (a_rest, any_port) = match a_rest.strip_suffix(":*") {
        Some(base) => (base.to_owned(), true),
        None => (a_rest, false),
    };
    let (Some((a_host, a_port)), Some((host, port))) = (authority(&a_rest), authority(&rest)) else { return false };
    let default = match scheme.as_str() {
        "http" => Some(80),
        "https" => Some(443),
        _ => None,
    };
    a_scheme == scheme && a_host == host && (any_port || a_port.is_none_or(|p| Some(p) == port.or(default)))
}

/// Middleware: refuses a request whose `Host` or `Origin` is not allowed (403).
pub async fn same_site(State(allowed): State<Arc<Allowed>>, request: Request, next: Next) -> Response {
    match allowed.check(request.headers()) {
        Ok(()) => next.run(request).await,
        Err(e) => e.into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::NamedToken;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        pairs.iter().map(|(k, v)| (axum::http::HeaderName::from_static(k), v.parse().unwrap())).collect()
    }

    #[test]
    fn tokens_name_their_caller_and_scopes_limit_it() {
        let reader = NamedToken { name: "dash".into(), token: "reader-token".into(), scopes: vec![TokenScope::Read] };
        let tokens = Tokens::new(Some("secret"), &[reader]);
        let bearer = |t: &str| headers(&[("authorization", &format!("Bearer {t}"))]);
        assert_eq!(tokens.caller(&HeaderMap::new()).unwrap_err().status, StatusCode::UNAUTHORIZED);
        assert_eq!(tokens.caller(&bearer("nope")).unwrap_err().status, StatusCode::UNAUTHORIZED);
        assert_eq!(
            tokens.caller(&headers(&[("authorization", "Basic c2VjcmV0")])).unwrap_err().status,
            StatusCode::UNAUTHORIZED
        );
        assert_eq!(tokens.admit(&bearer("secret"), TokenScope::Admin).unwrap().unwrap().name, "default");
        assert_eq!(tokens.admit(&bearer("reader-token"), TokenScope::Read).unwrap().unwrap().name, "dash");
        let refused = tokens.admit(&bearer("reader-token"), TokenScope::Decide).unwrap_err();
        assert_eq!(refused.status, StatusCode::FORBIDDEN);
        let none = Tokens::new(None, &[]);
        assert!(none.admit(&HeaderMap::new(), TokenScope::Trigger).unwrap().is_none());
        assert_eq!(
            none.admit(&HeaderMap::new(), TokenScope::Read).unwrap_err().status,
            StatusCode::SERVICE_UNAVAILABLE
        );
        assert!(Token::new("").is_none());
    }

    #[test]
    fn hosts_and_origins() {
        let ui = Ui {
            allowed_hosts: vec!["agents.example.com".into(), "10.0.0.5:8080".into()],
            allowed_origins: vec!["https://console.example.com".into(), "http://tools.example:*".into()],
            ..Ui::default()
        };
        let allowed = Allowed::of(&ui);
        let ok = |pairs: &[(&'static str, &str)]| allowed.check(&headers(pairs)).is_ok();
        assert!(ok(&[("host", "127.0.0.1:8080")]));
        assert!(ok(&[("host", "[::1]:9")]));
        assert!(ok(&[("host", "LOCALHOST")]));
        assert!(ok(&[("host", "agents.example.com:443")]));
        assert!(ok(&[("host", "10.0.0.5:8080")]));
        assert!(!ok(&[("host", "10.0.0.5:8081")]));
        assert!(!ok(&[("host", "evil.example")]));
        assert!(!ok(&[]));
        assert!(ok(&[("host", "127.0.0.1:1"), ("origin", "http://localhost:3000")]));
        assert!(ok(&[("host", "127.0.0.1:1"), ("origin", "https://console.example.com")]));
        assert!(ok(&[("host", "127.0.0.1:1"), ("origin", "http://tools.example:81")]));
        assert!(!ok(&[("host", "127.0.0.1:1"), ("origin", "http://evil.example")]));
        assert!(!ok(&[("host", "127.0.0.1:1"), ("origin", "null")]));
        assert!(!ok(&[("host", "127.0.0.1:1"), ("origin", "https://console.example.com.evil.example")]));
        let open =
            Allowed::of(&Ui { allowed_hosts: vec!["*".into()], allowed_origins: vec!["*".into()], ..Ui::default() });
        assert!(open.check(&headers(&[("host", "anything"), ("origin", "http://evil.example")])).is_ok());
    }
}
