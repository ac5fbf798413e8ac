//! `alerter`: a skill that speaks first, through the `notify` import.
//!
//! `scheduled` counts its runs (state key `runs`) and, on run `n`:
//! - loops forever when `n` is in config `loop_on` (only the deadline ends it);
//! - sends `alert <n>` to every destination in config `to`, logging each refusal as a
//!   warning `not sent` with the destination and the error;
//! - when `n` is config `wake_on`, sends `alert <n>: <wake_text>` to config `wake_to` with
//!   `wake`, so the agent runs a turn on it.
//!
//! Tool `send` (`destination`, `text`, optional `wake`): sends one message; the result is
//! `{"sent": true}` or `{"error": "<kind>: <message>"}` (failed).

use skill_sdk::{Context, Error, Scheduled, Skill, Tool, ToolResult, Value, json, log, notify, state};
use std::hint::black_box;

struct Alerter;

fn spin() -> ! {
    let mut i: u64 = 0;
    loop {
        i = black_box(i).wrapping_add(1);
    }
}

fn strings(value: &Value) -> Vec<String> {
    value.as_array().into_iter().flatten().filter_map(|v| v.as_str().map(str::to_owned)).collect()
}

impl Skill for Alerter {
    fn tools() -> Vec<Tool> {
        let schema = json!({
            "type": "object",
            "properties": {
                "destination": { "type": "string" },
                "text": { "type": "string" },
                "wake": { "type": "boolean" },
            },
            "required": ["destination", "text"],
        });
        vec![Tool::with_schema("send", "Send a message of the skill's own.", schema)]
    }

    fn handle(name: &str, input: Value, _ctx: &Context) -> Result<ToolResult, Error> {
        if name != "send" {
            return Err(Error::unknown_tool(name));
        }
        let destination = input["destination"].as_str().unwrap_or_default();
        let text = input["text"].as_str().unwrap_or_default();
        let wake = input["wake"].as_bool().unwrap_or(false);
        let sent = if wake { notify::wake(destination, text) } else { notify::send(destination, text) };
        Ok(match sent {
            Ok(()) => ToolResult::ok(json!({ "sent": true })),
            Err(e) => ToolResult::failed(json!({ "error": e.to_string() })),
        })
    }
}

impl Scheduled for Alerter {
    fn scheduled(config: Value) -> Result<(), Error> {
        let runs: u64 = state::get("runs")?.and_then(|n| n.parse().ok()).unwrap_or(0) + 1;
        state::set("runs", &runs.to_string())?;
        if config["loop_on"].as_array().is_some_and(|on| on.contains(&json!(runs))) {
            spin();
        }
        for destination in strings(&config["to"]) {
            if let Err(e) = notify::send(&destination, &format!("alert {runs}")) {
                log::warn("not sent", &[("destination", &destination), ("error", &e.to_string())]);
            }
        }
        if config["wake_on"] == json!(runs) {
            let to = config["wake_to"].as_str().unwrap_or_default();
            let text = format!("alert {runs}: {}", config["wake_text"].as_str().unwrap_or("look into it"));
            notify::wake(to, &text)?;
        }
        Ok(())
    }
}

skill_sdk::export!(Alerter, hooks: [scheduled]);
