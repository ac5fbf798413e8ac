//! `bad_tool_name`: a tool named `_y`. In a skill `cx` it would be `cx___y`, the exposed name
//! of skill `cx_` tool `y` too; the host must reject it at load.

use skill_sdk::{Context, Error, Skill, Tool, ToolResult, Value};

struct BadToolName;

impl Skill for BadToolName {
    fn tools() -> Vec<Tool> {
        vec![
            Tool::without_input("ok", "A well-named tool."),
            Tool::without_input("_y", "A tool whose name starts with `_`."),
        ]
    }

    fn handle(name: &str, _input: Value, _ctx: &Context) -> Result<ToolResult, Error> {
        Err(Error::unknown_tool(name))
    }
}

skill_sdk::export!(BadToolName);
