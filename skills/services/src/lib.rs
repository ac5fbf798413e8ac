//! `services`: the spec's example skill. It lists the services named in its configuration,
//! checks their health over HTTP, and "restarts" them: approval is dynamic, asked for only in
//! production, and the restart is recorded in the skill's state (there is no real service
//! behind it).
//!
//! Configuration (`skills.config.services` in `config.yaml`):
//!
//! ```yaml
//! services:
//!   checkout: { url: "https://checkout.internal/health" }
//! ```

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::Deserialize;
use skill_sdk::http::{self, Request};
use skill_sdk::{Approval, Context, Error, HumanLevel, ResolveHuman, Skill, Tool, ToolResult, Value, json, state};

const CHECK_TIMEOUT: Duration = Duration::from_secs(5);

struct Services;

/// The skill's configuration block.
#[derive(Deserialize, Default)]
struct Config {
    #[serde(default)]
    services: BTreeMap<String, Service>,
}

/// One configured service.
#[derive(Deserialize)]
struct Service {
    /// The health endpoint, requested with GET.
    url: String,
}

/// Input of `check_health`.
#[derive(Deserialize, JsonSchema)]
struct CheckHealth {
    /// The service's name, as `list_services` gives it.
    service: String,
}

/// Input of `restart_service`.
#[derive(Deserialize, JsonSchema)]
struct Restart {
    /// The service's name, as `list_services` gives it.
    service: String,
    /// The environment to restart it in, such as `staging` or `production`.
    environment: String,
}

impl Skill for Services {
    fn tools() -> Vec<Tool> {
        vec![
            Tool::without_input("list_services", "List the services this skill knows, with their health URLs."),
            Tool::new::<CheckHealth>(
                "check_health",
                "Check whether a service's health endpoint responds: status code, response time, healthy (2xx/3xx).",
            )
            .expose_result(),
            Tool::new::<Restart>(
                "restart_service",
                "Restart a service in an environment. Needs human approval in production.",
            )
            .approval(Approval::Dynamic),
        ]
    }

    fn handle(name: &str, input: Value, ctx: &Context) -> Result<ToolResult, Error> {
        let config: Config = ctx.config()?;
        match name {
            "list_services" => Ok(list(&config)),
            "check_health" => check_health(&config, skill_sdk::parse_input(input)?),
            "restart_service" => restart(&config, skill_sdk::parse_input(input)?),
            _ => Err(Error::unknown_tool(name)),
        }
    }
}

impl ResolveHuman for Services {
    fn resolve_human(name: &str, input: Value, _ctx: &Context) -> Option<HumanLevel> {
        let production = input["environment"] == "production";
        (name == "restart_service" && production).then_some(HumanLevel::Approve)
    }
}

fn list(config: &Config) -> ToolResult {
    let services: Vec<Value> =
        config.services.iter().map(|(name, service)| json!({ "name": name, "url": service.url })).collect();
    let empty = services.is_empty();
    ToolResult::ok(json!({ "services": services })).empty(empty)
}

fn lookup<'a>(config: &'a Config, name: &str) -> Result<&'a Service, Error> {
    config.services.get(name).ok_or_else(|| {
        let known: Vec<&str> = config.services.keys().map(String::as_str).collect();
        Error::msg(format!("unknown service `{name}`; known services: {known:?}"))
    })
}

fn check_health(config: &Config, args: CheckHealth) -> Result<ToolResult, Error> {
    let service = lookup(config, &args.service)?;
    let started = Instant::now();
    let outcome = http::fetch(Request::get(&service.url).timeout(CHECK_TIMEOUT));
    let response_time_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    Ok(match outcome {
        Ok(response) => ToolResult::ok(json!({
            "service": args.service,
            "status": response.status,
            "response_time_ms": response_time_ms,
            "healthy": (200..400).contains(&response.status),
        })),
        Err(e) => ToolResult::failed(json!({
            "service": args.service,
            "status": null,
            "healthy": false,
            "error": e.to_string(),
        })),
    })
}

fn restart(config: &Config, args: Restart) -> Result<ToolResult, Error> {
    lookup(config, &args.service)?;
    let key = format!("restarts:{}:{}", args.service, args.environment);
    let restarts = state::get_json::<u64>(&key)?.unwrap_or(0) + 1;
    state::set_json(&key, &restarts)?;
    Ok(ToolResult::ok(json!({
        "service": args.service,
        "environment": args.environment,
        "restarted": true,
        "restarts": restarts,
        "note": "example skill: the restart is recorded in the skill's state; no process was restarted",
    })))
}

skill_sdk::export!(Services, hooks: [resolve_human]);
