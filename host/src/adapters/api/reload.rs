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
    async fn reload(&self) -> Result<Value, ReloadError>;
}

/// Why a reload changed nothing (the loaded skills still serve).
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    /// The server is stopping.
    #[error("the server is stopping")]
    Stopping,
    /// The config read again does not load.
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    /// An agent of the running server is no longer in the config.
    #[error("agent `{0}` is no longer in the config (a reload keeps the agents)")]
    AgentGone(String),
    /// An agent's skills do not load (the agent's name, when it has one, and why).
    #[error("{}{error:#}", .agent.as_deref().map(|a| format!("agent `{a}`: ")).unwrap_or_default())]
    Skills {
        /// The agent.
        agent: Option<String>,
        /// Why.
        error: anyhow::Error,
    },
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
