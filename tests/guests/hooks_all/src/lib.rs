//! `hooks_all`: exports every hook, each with behaviour a test can steer from its input.
//!
//! - `resolve_human`: `approve` when the input has `"level": "approve"`, `confirm` for
//!   `"confirm"`, none (run without asking) otherwise.
//! - `is_available`: true, after setting state key `is_available` (a failure ignored).
//! - `startup`: fails when the config has `"fail_startup": true`; else sets state key
//!   `startup` (a failure ignored). Both hooks serve no conversation: the keys are in the
//!   skill's own namespace.
//! - `before_mcp_call`, by the arguments' `_decision`: `deny`, `prerequisite` (runs
//!   `list_things` with `{}` first), `prerequisite_widen` (the same, retrying over the last
//!   day: `lookback_minutes: 1440` instead of any bounds), `widen` (proceeds over that day),
//!   `prerequisite_then_approve` (the same, retrying with `"level": "approve"`, so the retry
//!   needs a person where the first call did not),
//!   `correct` (proceeds with the arguments minus `_decision` plus `"corrected": true`),
//!   `context` (proceeds with context `{"policy": "hooks_all"}`), anything else proceeds
//!   unchanged.
//! - `observe_mcp_result`: appends `\n\nobserved` to the output.
//! - `tool_result_empty`: `some(true)` when the raw result is `[]`, none otherwise.
//! - `tool_target`: target from the input's `service`, query kind `logs`.
//!
//! Tools: `dyn_tool` (approval dynamic) and `plain` (none) return `{"tool", "input"}`.
//! Info: verify, owns MCP server `obs`, prerequisite `list_things`.

use skill_sdk::{
    Approval, BeforeMcpCall, Context, Error, HumanLevel, IsAvailable, ObserveMcpResult, Preflight, ResolveHuman, Skill,
    SkillInfo, Startup, Target, Tool, ToolResult, ToolResultEmpty, ToolTarget, Value, json, state,
};

struct HooksAll;

impl Skill for HooksAll {
    fn tools() -> Vec<Tool> {
        let schema = json!({
            "type": "object",
            "properties": { "level": { "type": "string" }, "service": { "type": "string" } },
        });
        vec![
            Tool::with_schema("dyn_tool", "A tool whose approval the hook decides.", schema.clone())
                .approval(Approval::Dynamic),
            Tool::with_schema("plain", "A tool that needs no approval.", schema),
        ]
    }

    fn handle(name: &str, input: Value, _ctx: &Context) -> Result<ToolResult, Error> {
        match name {
            "dyn_tool" | "plain" => Ok(ToolResult::ok(json!({ "tool": name, "input": input }))),
            _ => Err(Error::unknown_tool(name)),
        }
    }

    fn info() -> SkillInfo {
        SkillInfo::default().verify().mcp_server("obs").mcp_prerequisite("list_things")
    }
}

impl ResolveHuman for HooksAll {
    fn resolve_human(_name: &str, input: Value, _ctx: &Context) -> Option<HumanLevel> {
        match input["level"].as_str() {
            Some("approve") => Some(HumanLevel::Approve),
            Some("confirm") => Some(HumanLevel::Confirm),
            _ => None,
        }
    }
}

impl IsAvailable for HooksAll {
    fn is_available(_config: Value) -> bool {
        // Whatever the store says: the tests that read the key check it.
        let _ = state::set("is_available", "ran");
        true
    }
}

impl Startup for HooksAll {
    fn startup(config: Value) -> Result<(), Error> {
        if config["fail_startup"] == true {
            return Err(Error::msg("hooks_all: fail_startup is set"));
        }
        let _ = state::set("startup", "ran");
        Ok(())
    }
}

impl BeforeMcpCall for HooksAll {
    fn before_mcp_call(_server: &str, _tool: &str, mut arguments: Value, _ctx: &Context) -> Preflight {
        let decision = arguments["_decision"].as_str().unwrap_or_default().to_owned();
        match decision.as_str() {
            "deny" => Preflight::deny("hooks_all denied the call"),
            // Read `list_things` first, then retry without the marker (the retry passes this
            // policy again and proceeds).
            "prerequisite" => {
                if let Some(object) = arguments.as_object_mut() {
                    object.remove("_decision");
                }
                Preflight::prerequisite("list_things", json!({}), "hooks_all: list_things failed")
                    .with_arguments(arguments)
            }
            // Read `list_things` first, then retry over a whole day (for the temporal
            // guardrails, which must clamp the retry again).
            "prerequisite_widen" => Preflight::prerequisite("list_things", json!({}), "hooks_all: list_things failed")
                .with_arguments(widened(arguments)),
            // Proceed over a whole day instead.
            "widen" => Preflight::proceed().with_arguments(widened(arguments)),
            // Read `list_things` first, then refuse the retry with a new correction.
            "prerequisite_then_deny" => {
                arguments["_decision"] = json!("deny_retry");
                Preflight::prerequisite("list_things", json!({}), "hooks_all: list_things failed")
                    .with_arguments(arguments)
            }
            "deny_retry" => Preflight::deny("hooks_all refused the retry"),
            // Read `list_things` first, then retry at a level that needs a person.
            "prerequisite_then_approve" => {
                if let Some(object) = arguments.as_object_mut() {
                    object.remove("_decision");
                    object.insert("level".into(), json!("approve"));
                }
                Preflight::prerequisite("list_things", json!({}), "hooks_all: list_things failed")
                    .with_arguments(arguments)
            }
            "correct" => {
                if let Some(object) = arguments.as_object_mut() {
                    object.remove("_decision");
                    object.insert("corrected".into(), json!(true));
                }
                Preflight::proceed().with_arguments(arguments)
            }
            "context" => Preflight::proceed().with_context(json!({ "policy": "hooks_all" })),
            _ => Preflight::proceed(),
        }
    }
}

/// `arguments` without `_decision` and time bounds, looking back a day.
fn widened(mut arguments: Value) -> Value {
    if let Some(object) = arguments.as_object_mut() {
        for field in ["_decision", "start_time_iso", "end_time_iso"] {
            object.remove(field);
        }
        object.insert("lookback_minutes".into(), json!(1440));
    }
    arguments
}

impl ObserveMcpResult for HooksAll {
    fn observe_mcp_result(_s: &str, _t: &str, _a: Value, output: &str, _ctx: &Context) -> Option<String> {
        Some(format!("{output}\n\nobserved"))
    }
}

impl ToolResultEmpty for HooksAll {
    fn tool_result_empty(_tool_name: &str, raw_result: &str) -> Option<bool> {
        (raw_result == "[]").then_some(true)
    }
}

impl ToolTarget for HooksAll {
    fn tool_target(_tool_name: &str, tool_input: Value) -> Option<Target> {
        let target = tool_input["service"].as_str().map(str::to_owned);
        Some(Target { target, query_kind: Some("logs".into()) })
    }
}

skill_sdk::export!(HooksAll, hooks: [
    resolve_human,
    is_available,
    startup,
    before_mcp_call,
    observe_mcp_result,
    tool_result_empty,
    tool_target,
]);
