//! The reference tools of the official MCP conformance suite that ask the client mid-call,
//! through the `ask` import, with the reference names and behaviour (those that sample and
//! elicit on the session up to 2025-11-25 are the Python skill `reference_python`'s):
//!
//! - from 2026-07-28, where the host answers the call with `input_required` and the client's
//!   retry runs the tool again from the start: `test_input_required_result_*` (a form,
//!   sampling, roots, several requests in one round, two rounds, and requests the client
//!   may not support), and the prompt `test_input_required_result_prompt`;
//! - the diagnostic tools of `server-stateless`: `test_missing_capability`, which needs the
//!   client's sampling (declared through `client-capabilities`: the host refuses a client
//!   without it, -32021, before the tool runs), and `test_streaming_elicitation`, whose form
//!   travels in the call's result at 2026-07-28, never as a request on the stream; and
//!   `test_trigger_tool_change` / `test_trigger_prompt_change`, which say (the `lists`
//!   import) that the skill's tools or prompts changed: the host describes the skill again
//!   and tells MCP clients.
//!
//! Every tool is the same code at both revisions: the skill only asks; the host decides how
//! the question travels, keeps the answers between rounds, checks the `requestState` and
//! leaves out what the client did not declare. Nothing in the host knows these names.

use skill_sdk::ask::{self, Answer, Answers, Request};
use skill_sdk::lists::{self, List};
use skill_sdk::{
    Block, ClientCapabilities, Context, Error, PromptDef, PromptError, Prompted, Prompts, Skill, Tool, ToolResult,
    Value, json,
};
use std::collections::BTreeMap;

struct ReferenceAsk;

/// A form of one required string property `field`.
fn one_string(message: &str, field: &str) -> Request {
    Request::form(message, json!({"type": "object", "properties": {field: {"type": "string"}}, "required": [field]}))
}

/// A form's action and content, as the reference tools print them.
fn described(answers: &Answers, key: &str) -> String {
    match answers.get(key) {
        Some(Answer::Form { action, content }) => {
            let content = content.clone().unwrap_or(Value::Null);
            format!("action={}, content={content}", action.as_str())
        }
        Some(Answer::Unavailable(why)) => format!("action=unavailable ({why})"),
        _ => "action=none".into(),
    }
}

/// The string `field` of the form accepted under `key`.
fn field(answers: &Answers, key: &str, field: &str) -> Option<String> {
    answers.accepted(key)?.get(field)?.as_str().map(str::to_owned)
}

fn asked(name: &str) -> Result<ToolResult, ask::AskError> {
    Ok(match name {
        "test_input_required_result_elicitation" => {
            let answers = ask::ask([("user_name", one_string("What is your name?", "name"))])?;
            match field(&answers, "user_name", "name") {
                Some(name) => ToolResult::text(format!("Hello, {name}!")),
                None => ToolResult::text(format!("No name given: {}", described(&answers, "user_name"))),
            }
        }
        "test_input_required_result_sampling" => {
            let answers = ask::ask([("sample_request", Request::sampling("What is the capital of France?", 100))])?;
            ToolResult::text(format!("Sampling result: {}", answers.sampled("sample_request").unwrap_or("(none)")))
        }
        "test_input_required_result_list_roots" => {
            let answers = ask::ask([("roots_request", Request::Roots)])?;
            match answers.get("roots_request") {
                Some(Answer::Roots(roots)) => ToolResult::text(format!("Found {} root(s)", roots.len())),
                other => ToolResult::text(format!("No roots: {other:?}")),
            }
        }
        "test_input_required_result_request_state" | "test_input_required_result_tampered_state" => {
            let schema = json!({"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]});
            let answers = ask::ask([("confirm", Request::form("Please confirm", schema))])?;
            let ok = answers.accepted("confirm").and_then(|c| c["ok"].as_bool()) == Some(true);
            match (ok, name) {
                (true, "test_input_required_result_request_state") => {
                    ToolResult::text("state-ok: requestState validated")
                }
                (true, _) => ToolResult::text("integrity-ok: state verified"),
                (false, _) => ToolResult::text(format!("Not confirmed: {}", described(&answers, "confirm"))),
            }
        }
        "test_input_required_result_multiple_inputs" => {
            let answers = ask::ask([
                ("user_name", one_string("What is your name?", "name")),
                ("greeting", Request::sampling("Generate a greeting", 50)),
                ("client_roots", Request::Roots),
            ])?;
            let name = field(&answers, "user_name", "name").unwrap_or_default();
            let greeting = answers.sampled("greeting").unwrap_or_default();
            let roots = match answers.get("client_roots") {
                Some(Answer::Roots(roots)) => roots.len(),
                _ => 0,
            };
            ToolResult::text(format!("All inputs received: name={name}, greeting={greeting}, roots={roots}"))
        }
        "test_input_required_result_multi_round" => {
            let first = ask::ask([("step1", one_string("Step 1: What is your name?", "name"))])?;
            let name = field(&first, "step1", "name").unwrap_or_default();
            let second = ask::ask([("step2", one_string("Step 2: What is your favorite color?", "color"))])?;
            let color = field(&second, "step2", "color").unwrap_or_default();
            ToolResult::text(format!("Multi-round complete for {name} who likes {color}"))
        }
        "test_missing_capability" => ToolResult::text("Success"),
        "test_trigger_tool_change" => {
            lists::changed(List::Tools);
            ToolResult::text("Mutation triggered")
        }
        "test_trigger_prompt_change" => {
            lists::changed(List::Prompts);
            ToolResult::text("Mutation triggered")
        }
        "test_streaming_elicitation" => {
            let answers = ask::ask([("confirm", one_string("Streaming elicitation: confirm to continue", "confirm"))])?;
            ToolResult::text(format!("Streaming complete: {}", described(&answers, "confirm")))
        }
        "test_input_required_result_capabilities" => {
            let answers = ask::ask([
                ("elicit_input", one_string("Please provide input", "input")),
                ("sample_input", Request::sampling("Sample request", 50)),
            ])?;
            let answered: Vec<&str> = answers
                .0
                .iter()
                .filter(|(_, a)| !matches!(a, Answer::Unavailable(_)))
                .map(|(k, _)| k.as_str())
                .collect();
            match answered.is_empty() {
                true => ToolResult::text("No supported capabilities declared"),
                false => ToolResult::text(format!("Completed with: {}", answered.join(", "))),
            }
        }
        _ => return Ok(ToolResult::failed(format!("unknown tool `{name}`"))),
    })
}

impl Skill for ReferenceAsk {
    fn tools() -> Vec<Tool> {
        let mut tools = vec![
            Tool::without_input("test_missing_capability", "Needs the client's sampling capability"),
            Tool::without_input("test_trigger_tool_change", "Says the skill's tools changed"),
            Tool::without_input("test_trigger_prompt_change", "Says the skill's prompts changed"),
            Tool::without_input(
                "test_streaming_elicitation",
                "Asks a form while it runs, never as a request on the stream",
            ),
        ];
        for (name, description) in [
            ("elicitation", "MRTR: asks the user's name through elicitation"),
            ("sampling", "MRTR: asks the client's model a question"),
            ("list_roots", "MRTR: asks for the client's roots"),
            ("request_state", "MRTR: asks for a confirmation, with request state"),
            ("multiple_inputs", "MRTR: asks for a name, a greeting and the roots in one round"),
            ("multi_round", "MRTR: asks a name, then a color, in two rounds"),
            ("tampered_state", "MRTR: asks for a confirmation; a tampered state is refused"),
            ("capabilities", "MRTR: asks only what the client declared it can answer"),
        ] {
            tools.push(Tool::without_input(format!("test_input_required_result_{name}"), description));
        }
        tools
    }

    fn handle(name: &str, _input: Value, _ctx: &Context) -> Result<ToolResult, Error> {
        match asked(name) {
            Ok(result) => Ok(result),
            Err(e) => Ok(ToolResult::failed(format!("the question got no answer: {e}"))),
        }
    }
}

impl ClientCapabilities for ReferenceAsk {
    fn required() -> Vec<(&'static str, &'static [&'static str])> {
        vec![("test_missing_capability", &["sampling"])]
    }
}

impl Prompts for ReferenceAsk {
    fn prompts() -> Vec<PromptDef> {
        vec![PromptDef::new("test_input_required_result_prompt", "MRTR: prompt that requires elicitation input")]
    }

    fn get_prompt(name: &str, _arguments: &BTreeMap<String, String>, _ctx: &Context) -> Result<Prompted, PromptError> {
        if name != "test_input_required_result_prompt" {
            return Err(PromptError::NotFound);
        }
        let form = one_string("What context should the prompt use?", "context");
        let answers = ask::ask([("user_context", form)]).map_err(|e| PromptError::Failed(e.to_string()))?;
        let context = field(&answers, "user_context", "context").unwrap_or_default();
        Ok(Prompted::default().user(Block::Text(format!("Prompt with context: {context}"))))
    }

    fn complete(_name: &str, _argument: &str, _value: &str, _context: &BTreeMap<String, String>) -> Vec<String> {
        Vec::new()
    }
}

skill_sdk::export!(ReferenceAsk, hooks: [prompts, client_capabilities]);
