//! `GET /api/audit`: the agent's record of approvals and questions ([`crate::broker::audit`]),
//! oldest first, a page at a time, with the head to keep elsewhere.

use super::Api;
use super::error::{ApiError, ApiResult};
use axum::Json;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Arc;

/// The most records one page holds.
const MAX_PAGE: usize = 500;

/// `GET /api/audit?after=<seq>&limit=<n>`: up to `limit` records (default 100, at most 500)
/// after sequence number `after` (default 0), and the head; `next` is the `after` of the page
/// that follows, while there is one.
pub async fn audit(
    State(api): State<Arc<Api>>,
    Query(query): Query<HashMap<String, String>>,
) -> ApiResult<Json<Value>> {
    let number = |name: &str, default: u64| -> ApiResult<u64> {
        query.get(name).map_or(Ok(default), |text| {
            text.parse().map_err(|_| ApiError::new(StatusCode::BAD_REQUEST, format!("`{name}` must be a whole number")))
        })
    };
    if let Some(unknown) = query.keys().find(|k| !matches!(k.as_str(), "after" | "limit")) {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("unknown query parameter `{unknown}` (after, limit)"),
        ));
    }
    let (after, limit) = (number("after", 0)?, number("limit", 100)?);
    let limit = usize::try_from(limit).unwrap_or(MAX_PAGE).clamp(1, MAX_PAGE);
    let agent = api.operator(None).agent;
    let Some(audit) = api.broker().audit(agent) else {
        return Err(ApiError::new(StatusCode::NOT_FOUND, "this agent keeps no record"));
    };
    let (records, head) = audit.page(after, limit).await.map_err(|e| {
        tracing::warn!("cannot read the record: {e}");
        ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "the state database is unavailable; try again")
    })?;
    let next = records.last().map(|r| r.seq).filter(|&seq| seq < head.seq);
    Ok(Json(json!({
        "agent": agent,
        "records": records,
        "head": {"seq": head.seq, "hash": head.hash, "text": head.to_string()},
        "next": next,
    })))
}
