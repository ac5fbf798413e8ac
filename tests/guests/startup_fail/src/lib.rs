//! `startup_fail`: `startup` always fails, so the host must refuse to start with it.

use skill_sdk::{Context, Error, Skill, Startup, Tool, ToolResult, Value};

struct StartupFail;

impl Skill for StartupFail {
    fn tools() -> Vec<Tool> {
        vec![Tool::without_input("x", "Never runs: startup fails.")]
    }

    fn handle(name: &str, _input: Value, _ctx: &Context) -> Result<ToolResult, Error> {
        match name {
            "x" => Ok(ToolResult::ok("x")),
            _ => Err(Error::unknown_tool(name)),
        }
    }
}

impl Startup for StartupFail {
    fn startup(_config: Value) -> Result<(), Error> {
        Err(Error::msg("missing api_key in skills.config.startup_fail"))
    }
}

skill_sdk::export!(StartupFail, hooks: [startup]);
