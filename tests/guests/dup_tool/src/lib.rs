//! `dup_tool`: two tools named `same`. The host must reject the skill at load.

use skill_sdk::{Context, Error, Skill, Tool, ToolResult, Value};

struct DupTool;

impl Skill for DupTool {
    fn tools() -> Vec<Tool> {
        vec![
            Tool::without_input("same", "The first tool called `same`."),
            Tool::without_input("same", "The second tool called `same`."),
        ]
    }

    fn handle(name: &str, _input: Value, _ctx: &Context) -> Result<ToolResult, Error> {
        Err(Error::unknown_tool(name))
    }
}

skill_sdk::export!(DupTool);
