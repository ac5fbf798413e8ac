//! The one error type of the routes: a status and a message, sent as `{"error": "..."}`.
//! Internals (engine errors' sources, panics) never reach the body beyond their message.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// An error response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// The status code.
    pub status: StatusCode,
    /// What the client reads.
    pub message: String,
}

impl ApiError {
    /// An error with `status` and `message`.
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        ApiError { status, message: message.into() }
    }

    /// 400.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message)
    }

    /// 410: unknown, expired or cancelled.
    pub fn gone(what: &str) -> Self {
        Self::new(StatusCode::GONE, format!("unknown, expired or cancelled {what}"))
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.status, Json(json!({ "error": self.message }))).into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert("www-authenticate", axum::http::HeaderValue::from_static("Bearer"));
        }
        response
    }
}

/// The result of a route.
pub type ApiResult<T> = Result<T, ApiError>;
