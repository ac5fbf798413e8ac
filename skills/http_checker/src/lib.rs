//! `http_checker`: whether a URL answers, how fast, and with which status.
//!
//! Requests go through the host's HTTP import, so they reach only the hosts that both this
//! skill's `skill.toml` (`http_hosts = ["*"]`) and the operator allow.

use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::Deserialize;
use skill_sdk::http::{self, Request};
use skill_sdk::{Context, Error, Skill, Tool, ToolResult, Value, json};

/// Used when the caller gives no timeout, so that a hanging server yields an answer before
/// the host's per-call deadline ends the call.
const DEFAULT_TIMEOUT_MS: u32 = 5_000;

struct HttpChecker;

/// Input of `check_url`.
#[derive(Deserialize, JsonSchema)]
struct CheckUrl {
    /// The absolute http or https URL to request with GET.
    url: String,
    /// Give up after this many milliseconds. Default: 5000.
    timeout_ms: Option<u32>,
}

impl Skill for HttpChecker {
    fn tools() -> Vec<Tool> {
        let check = Tool::new::<CheckUrl>(
            "check_url",
            "Request a URL with GET and report its HTTP status, response time in \
             milliseconds, and whether it is healthy (a 2xx or 3xx status).",
        );
        vec![check.expose_result()]
    }

    fn handle(name: &str, input: Value, _ctx: &Context) -> Result<ToolResult, Error> {
        match name {
            "check_url" => Ok(check_url(skill_sdk::parse_input(input)?)),
            _ => Err(Error::unknown_tool(name)),
        }
    }
}

/// Any response is a successful check (a 500 is an answer: unhealthy); only a request that
/// got no response at all is a failed one.
fn check_url(args: CheckUrl) -> ToolResult {
    let timeout = Duration::from_millis(args.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS).into());
    let started = Instant::now();
    let outcome = http::fetch(Request::get(&args.url).timeout(timeout));
    let response_time_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    match outcome {
        Ok(response) => ToolResult::ok(json!({
            "url": args.url,
            "status": response.status,
            "response_time_ms": response_time_ms,
            "healthy": (200..400).contains(&response.status),
        })),
        Err(e) => ToolResult::failed(json!({
            "url": args.url,
            "status": null,
            "response_time_ms": response_time_ms,
            "healthy": false,
            "error": e.to_string(),
            "error_kind": e.kind(),
        })),
    }
}

skill_sdk::export!(HttpChecker);
