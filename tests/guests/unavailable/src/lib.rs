//! `unavailable`: `is_available` answers false, so the host must not register it.

use skill_sdk::{Context, Error, IsAvailable, Skill, Tool, ToolResult, Value};

struct Unavailable;

impl Skill for Unavailable {
    fn tools() -> Vec<Tool> {
        vec![Tool::without_input("x", "Never offered: the skill is unavailable.")]
    }

    fn handle(name: &str, _input: Value, _ctx: &Context) -> Result<ToolResult, Error> {
        match name {
            "x" => Ok(ToolResult::ok("x")),
            _ => Err(Error::unknown_tool(name)),
        }
    }
}

impl IsAvailable for Unavailable {
    fn is_available(_config: Value) -> bool {
        false
    }
}

skill_sdk::export!(Unavailable, hooks: [is_available]);
