//! {{name}}: a skillhost skill. Its one tool, `hello`, greets someone.

use schemars::JsonSchema;
use serde::Deserialize;
use skill_sdk::{Context, Error, Skill, Tool, ToolResult, Value, json};

struct {{type}};

/// Input of `hello`: the schema the model sees comes from this type and its doc comments.
#[derive(Deserialize, JsonSchema)]
struct Hello {
    /// Who to greet.
    name: String,
    /// Add an exclamation mark.
    #[serde(default)]
    excited: bool,
}

impl Skill for {{type}} {
    fn tools() -> Vec<Tool> {
        vec![Tool::new::<Hello>("hello", "Greet someone by name.")]
    }

    fn handle(name: &str, input: Value, _ctx: &Context) -> Result<ToolResult, Error> {
        match name {
            "hello" => {
                let args: Hello = skill_sdk::parse_input(input)?;
                let mark = if args.excited { "!" } else { "." };
                Ok(ToolResult::ok(json!({ "greeting": format!("Hello, {}{mark}", args.name) })))
            }
            _ => Err(Error::unknown_tool(name)),
        }
    }
}

skill_sdk::export!({{type}});
