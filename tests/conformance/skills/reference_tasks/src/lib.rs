//! The reference tools of the official MCP conformance suite's Tasks extension scenarios
//! (`tasks-*`), with the reference names and behaviour, written with the Rust SDK:
//!
//! - `greet`: never a task;
//! - `slow_compute`: a task when the client declared the extension (`optional`), sleeping
//!   `seconds` before it completes;
//! - `failing_job`: only a task (`required`), completing with a tool error (`isError`);
//! - `protocol_error_job`: only a task, which crashes: the sandbox stops it, and the task
//!   ends `failed` with a JSON-RPC error;
//! - `confirm_delete` and `multi_input`: only tasks, which ask the client (the `ask` import)
//!   one form, or two at once; in a task each round is the task's `inputRequests`;
//! - `test_tool_with_task`: asks for a name in the call itself (`input_required`), then
//!   detaches (`tasks.detach`): the retry that answers is given the task.
//!
//! Nothing in the host knows these names: `task-support` says how each tool runs.

use skill_sdk::ask::{self, Request};
use skill_sdk::{Context, Error, Skill, Task, TaskSupport, Tool, ToolResult, Value, json};
use std::time::Duration;

struct ReferenceTasks;

/// A form of the boolean `confirm`, and optionally the string `name`.
fn confirm(message: &str, with_name: bool) -> Request {
    let mut properties = json!({"confirm": {"type": "boolean"}});
    if with_name {
        properties["name"] = json!({"type": "string"});
    }
    Request::form(message, json!({"type": "object", "properties": properties, "required": ["confirm"]}))
}

fn run(name: &str, input: &Value) -> Result<ToolResult, ask::AskError> {
    let text = |key: &str| input.get(key).and_then(Value::as_str).unwrap_or_default().to_owned();
    Ok(match name {
        "greet" => ToolResult::text(format!("Hello, {}!", text("name"))),
        "slow_compute" => {
            let seconds = input.get("seconds").and_then(Value::as_f64).unwrap_or(0.0).clamp(0.0, 600.0);
            std::thread::sleep(Duration::from_secs_f64(seconds));
            ToolResult::text(format!("Computed {} after {seconds} s", text("label")))
        }
        "failing_job" => {
            std::thread::sleep(Duration::from_secs(1));
            ToolResult::failed("the job failed, as this fixture always does")
        }
        "protocol_error_job" => panic!("protocol_error_job stops the call itself, not the tool"),
        "confirm_delete" => {
            let filename = text("filename");
            let answers = ask::ask([("confirm", confirm(&format!("Delete {filename}?"), false))])?;
            match answers.accepted("confirm").and_then(|c| c["confirm"].as_bool()) {
                Some(true) => ToolResult::text(format!("Deleted {filename}")),
                _ => ToolResult::text(format!("Kept {filename}")),
            }
        }
        "multi_input" => {
            let answers = ask::ask([
                ("first", confirm("First input: a name, and confirm", true)),
                ("second", confirm("Second input: a name, and confirm", true)),
            ])?;
            let name = |key: &str| answers.accepted(key).and_then(|c| c["name"].as_str().map(str::to_owned));
            let (first, second) = (name("first").unwrap_or_default(), name("second").unwrap_or_default());
            ToolResult::text(format!("Received {first} and {second}"))
        }
        "test_tool_with_task" => {
            let schema = json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]});
            let answers = ask::ask([("user_name", Request::form("What is your name?", schema))])?;
            let name = answers.accepted("user_name").and_then(|c| c["name"].as_str().map(str::to_owned));
            let name = name.unwrap_or_else(|| "nobody".into());
            // Gathered: the rest runs as a task.
            skill_sdk::tasks::detach();
            std::thread::sleep(Duration::from_millis(300));
            ToolResult::text(format!("Task done for {name}"))
        }
        _ => ToolResult::failed(format!("unknown tool `{name}`")),
    })
}

impl Skill for ReferenceTasks {
    fn tools() -> Vec<Tool> {
        let string =
            |field: &str| json!({"type": "object", "properties": {field: {"type": "string"}}, "required": [field]});
        let compute = json!({
            "type": "object",
            "properties": {"seconds": {"type": "number"}, "label": {"type": "string"}},
            "required": ["seconds"],
        });
        vec![
            Tool::with_schema("greet", "Greets by name, in the call", string("name")),
            Tool::with_schema("slow_compute", "Computes for `seconds`; a task when the client can poll", compute),
            Tool::without_input("failing_job", "A task that completes with a tool error"),
            Tool::without_input("protocol_error_job", "A task whose call fails"),
            Tool::with_schema("confirm_delete", "A task that asks to confirm a deletion", string("filename")),
            Tool::without_input("multi_input", "A task that asks two forms at once"),
            Tool::without_input("test_tool_with_task", "Asks a name in the call, then goes on as a task"),
        ]
    }

    fn handle(name: &str, input: Value, _ctx: &Context) -> Result<ToolResult, Error> {
        match run(name, &input) {
            Ok(result) => Ok(result),
            Err(e) => Ok(ToolResult::failed(format!("the question got no answer: {e}"))),
        }
    }
}

impl TaskSupport for ReferenceTasks {
    fn tasks() -> Vec<(&'static str, Task)> {
        vec![
            ("slow_compute", Task::Optional),
            ("failing_job", Task::Required),
            ("protocol_error_job", Task::Required),
            ("confirm_delete", Task::Required),
            ("multi_input", Task::Required),
            ("test_tool_with_task", Task::Detaches),
        ]
    }
}

skill_sdk::export!(ReferenceTasks, hooks: [task_support]);
