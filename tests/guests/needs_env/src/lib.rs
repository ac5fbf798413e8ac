//! `needs_env`: available only when the credential `NEEDS_ENV_TOKEN` is in its environment
//! and its config block does not say `disabled: true`, as the spec's `is_available` intends.
//! - tool `env`: every variable of its WASI environment, and the call's `user-message`.
//! - `startup`: fails when its config says `fail_startup: true`, naming the variables it sees
//!   and its config's `endpoint`, which shows that startup receives both.

use skill_sdk::{Context, Error, IsAvailable, Skill, Startup, Tool, ToolResult, Value, json};

/// The credential the skill cannot work without.
const TOKEN: &str = "NEEDS_ENV_TOKEN";

struct NeedsEnv;

fn names() -> Vec<String> {
    let mut names: Vec<String> = std::env::vars().map(|(k, _)| k).collect();
    names.sort();
    names
}

impl Skill for NeedsEnv {
    fn tools() -> Vec<Tool> {
        vec![Tool::without_input("env", "The skill's environment and the turn's message.")]
    }

    fn handle(name: &str, _input: Value, ctx: &Context) -> Result<ToolResult, Error> {
        match name {
            "env" => {
                let vars: skill_sdk::serde_json::Map<String, Value> =
                    std::env::vars().map(|(k, v)| (k, json!(v))).collect();
                Ok(ToolResult::ok(json!({ "vars": vars, "user_message": ctx.user_message(), "route": ctx.routes() })))
            }
            _ => Err(Error::unknown_tool(name)),
        }
    }
}

impl IsAvailable for NeedsEnv {
    fn is_available(config: Value) -> bool {
        config["disabled"] != json!(true) && std::env::var(TOKEN).is_ok_and(|t| !t.trim().is_empty())
    }
}

impl Startup for NeedsEnv {
    fn startup(config: Value) -> Result<(), Error> {
        if config["fail_startup"] == json!(true) {
            let endpoint = config["endpoint"].as_str().unwrap_or("none");
            return Err(Error::msg(format!("startup saw env {:?} and endpoint {endpoint}", names())));
        }
        Ok(())
    }
}

skill_sdk::export!(NeedsEnv, hooks: [is_available, startup]);
