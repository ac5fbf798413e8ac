//! `hooks_loop`: a tool and hooks that loop forever on CPU, for the sandbox's wall-clock
//! deadline. Its `skill.toml` sets a 300 ms deadline and the largest fuel budget, so only the
//! deadline can stop a loop.
//!
//! Tools: `spin` (no approval) loops forever; `work` (approval dynamic) returns
//! `{"tool": "work", "input": <input>}`.
//!
//! Each hook loops forever when what it receives asks it to: the input or arguments have
//! `"loop_in": "<hook>"` (`resolve_human`, `before_mcp_call`, `tool_target`), or the text it
//! is given contains `"loop_in":"<hook>"` (`tool_result_empty`, `observe_mcp_result`: a
//! `work` result echoing such an input, or an MCP `echo` of such a message). Otherwise:
//!
//! - `resolve_human`: none (run without asking); it panics with a message holding
//!   [`SECRET`] when the input has `"panic_in": "resolve_human"`.
//! - `before_mcp_call`: proceed.
//! - `tool_target`: target `steady`, query kind `logs`.
//! - `tool_result_empty`: `some(true)`, so a fallback (generic emptiness) is visible.
//! - `observe_mcp_result`: appends `\n\nobserved` to the output.
//!
//! Info: owns MCP server `everything`, so its MCP hooks see that server's calls.

use skill_sdk::{
    Approval, BeforeMcpCall, Context, Error, HumanLevel, ObserveMcpResult, Preflight, ResolveHuman, Skill, SkillInfo,
    Target, Tool, ToolResult, ToolResultEmpty, ToolTarget, Value, json,
};
use std::hint::black_box;

/// What the panicking `resolve_human` says: a stand-in for a secret a panic message can hold.
pub const SECRET: &str = "secret-7c1e9a";

struct HooksLoop;

/// Loops on CPU forever: no host call, no allocation, nothing but the deadline ends it.
fn spin() -> ! {
    let mut i: u64 = 0;
    loop {
        i = black_box(i).wrapping_add(1);
    }
}

/// Spins when `input` has `"loop_in": hook`.
fn loop_if_asked(input: &Value, hook: &str) {
    if input["loop_in"] == hook {
        spin();
    }
}

/// Spins when `text` contains `"loop_in":"<hook>"`.
fn loop_if_text_asks(text: &str, hook: &str) {
    if text.contains(&format!("\"loop_in\":\"{hook}\"")) {
        spin();
    }
}

impl Skill for HooksLoop {
    fn tools() -> Vec<Tool> {
        let schema = json!({
            "type": "object",
            "properties": { "loop_in": { "type": "string" }, "panic_in": { "type": "string" } },
        });
        vec![
            Tool::without_input("spin", "Loop forever."),
            Tool::with_schema("work", "Echo the input; the hooks may loop.", schema).approval(Approval::Dynamic),
        ]
    }

    fn handle(name: &str, input: Value, _ctx: &Context) -> Result<ToolResult, Error> {
        match name {
            "spin" => spin(),
            "work" => Ok(ToolResult::ok(json!({ "tool": name, "input": input }))),
            _ => Err(Error::unknown_tool(name)),
        }
    }

    fn info() -> SkillInfo {
        SkillInfo::default().mcp_server("everything")
    }
}

impl ResolveHuman for HooksLoop {
    fn resolve_human(_name: &str, input: Value, _ctx: &Context) -> Option<HumanLevel> {
        loop_if_asked(&input, "resolve_human");
        if input["panic_in"] == "resolve_human" {
            panic!("hooks_loop: resolve_human panicked holding {SECRET}");
        }
        None
    }
}

impl BeforeMcpCall for HooksLoop {
    fn before_mcp_call(_server: &str, _tool: &str, arguments: Value, _ctx: &Context) -> Preflight {
        loop_if_asked(&arguments, "before_mcp_call");
        Preflight::proceed()
    }
}

impl ObserveMcpResult for HooksLoop {
    fn observe_mcp_result(_s: &str, _t: &str, _a: Value, output: &str, _ctx: &Context) -> Option<String> {
        loop_if_text_asks(output, "observe_mcp_result");
        Some(format!("{output}\n\nobserved"))
    }
}

impl ToolResultEmpty for HooksLoop {
    fn tool_result_empty(_tool_name: &str, raw_result: &str) -> Option<bool> {
        loop_if_text_asks(raw_result, "tool_result_empty");
        Some(true)
    }
}

impl ToolTarget for HooksLoop {
    fn tool_target(_tool_name: &str, tool_input: Value) -> Option<Target> {
        loop_if_asked(&tool_input, "tool_target");
        Some(Target { target: Some("steady".into()), query_kind: Some("logs".into()) })
    }
}

skill_sdk::export!(HooksLoop, hooks: [
    resolve_human,
    before_mcp_call,
    observe_mcp_result,
    tool_result_empty,
    tool_target,
]);
