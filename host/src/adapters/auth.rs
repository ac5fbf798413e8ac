//! Bearer authentication, shared by the HTTP adapters (the API and `/mcp`). The token is
//! compared in constant time (both sides hashed first, so not even its length leaks through
//! timing).

use super::api::error::ApiError;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};

/// The configured token, hashed.
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

/// Checks `Authorization: Bearer <token>` against `token` (when one is configured).
pub fn check(token: Option<&Token>, headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(token) = token else { return Ok(()) };
    let given = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")));
    match given {
        Some(given) if token.matches(given.trim()) => Ok(()),
        Some(_) => Err(ApiError::new(StatusCode::UNAUTHORIZED, "invalid bearer token")),
        None => Err(ApiError::new(StatusCode::UNAUTHORIZED, "missing bearer token (Authorization: Bearer <token>)")),
    }
}

/// Middleware: the request goes on only with the right bearer token (when one is set).
pub async fn require(State(token): State<Option<Token>>, request: Request, next: Next) -> Response {
    match check(token.as_ref(), request.headers()) {
        Ok(()) => next.run(request).await,
        Err(e) => e.into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens() {
        let token = Token::new("secret").unwrap();
        assert!(token.matches("secret"));
        assert!(!token.matches("secret2"));
        assert!(!token.matches(""));
        assert!(Token::new("").is_none());
        let mut headers = HeaderMap::new();
        assert_eq!(check(Some(&token), &headers).unwrap_err().status, StatusCode::UNAUTHORIZED);
        headers.insert("authorization", "Bearer secret".parse().unwrap());
        assert!(check(Some(&token), &headers).is_ok());
        headers.insert("authorization", "Basic c2VjcmV0".parse().unwrap());
        assert!(check(Some(&token), &headers).is_err());
        assert!(check(None, &HeaderMap::new()).is_ok());
    }
}
