//! `bad_schema`: tool `broken` has an input schema that is not JSON; tool `fine` is valid.
//! The host must reject the skill at load, naming the tool.

use skill_sdk::{Context, Error, Skill, Tool, ToolResult, Value};

struct BadSchema;

impl Skill for BadSchema {
    fn tools() -> Vec<Tool> {
        vec![
            Tool::without_input("fine", "A valid tool."),
            Tool::with_raw_schema("broken", "A tool whose schema is not JSON.", "{\"type\": \"object\", "),
        ]
    }

    fn handle(name: &str, _input: Value, _ctx: &Context) -> Result<ToolResult, Error> {
        Err(Error::unknown_tool(name))
    }
}

skill_sdk::export!(BadSchema);
