//! `hooks_none`: tools only; the component exports `tools` and no hook.
//!
//! It also shows that a skill can derive its input types with the SDK as its only
//! dependency, through the `crate` attributes of serde and schemars.

use skill_sdk::schemars::JsonSchema;
use skill_sdk::serde::Deserialize;
use skill_sdk::{Context, Error, Skill, Tool, ToolResult, Value};

struct HooksNone;

/// Input of `ping`.
#[derive(Deserialize, JsonSchema)]
#[serde(crate = "skill_sdk::serde")]
#[schemars(crate = "skill_sdk::schemars")]
struct Ping {
    /// Returned instead of `pong` when given.
    message: Option<String>,
}

impl Skill for HooksNone {
    fn tools() -> Vec<Tool> {
        vec![Tool::new::<Ping>("ping", "Answer `pong`, or the message given.")]
    }

    fn handle(name: &str, input: Value, _ctx: &Context) -> Result<ToolResult, Error> {
        match name {
            "ping" => {
                let ping: Ping = skill_sdk::parse_input(input)?;
                Ok(ToolResult::ok(ping.message.unwrap_or_else(|| "pong".into())))
            }
            _ => Err(Error::unknown_tool(name)),
        }
    }
}

skill_sdk::export!(HooksNone);
