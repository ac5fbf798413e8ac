//! `POST /api/skills/reload` (behind the token): the app reloads the skills of this replica
//! ([`SkillReload`], implemented by the app builder) and answers what changed, or why it did
//! not (the old set keeps serving).

use super::Api;
use super::error::ApiError;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde_json::{Value, json};
use std::sync::Arc;

/// Reloads the skills of the process serving the API.
#[async_trait::async_trait]
pub trait SkillReload: Send + Sync {
    /// Reads the config's skill sections again, pulls and verifies what changed, compiles,
    /// then swaps the new set in; the old set keeps serving on error. `Ok`: what the
    /// answer says (the skills now serving); `Err`: why nothing changed.
    async fn reload(&self) -> Result<Value, String>;
}

/// The route's handler: 200 with the new set, 409 with why the old one still serves, 503
/// when this server cannot reload (a test's API, `skillhost mcp`).
pub async fn reload(State(api): State<Arc<Api>>) -> Result<Json<Value>, ApiError> {
    let Some(reloader) = api.reload.clone() else {
        return Err(ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "this server does not reload its skills"));
    };
    match reloader.reload().await {
        Ok(done) => Ok(Json(json!({"reloaded": true, "skills": done}))),
        Err(why) => {
            Err(ApiError::new(StatusCode::CONFLICT, format!("reload failed; the loaded skills still serve: {why}")))
        }
    }
}
