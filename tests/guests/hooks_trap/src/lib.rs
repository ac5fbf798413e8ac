//! `hooks_trap`: exports every hook, and every hook panics (so traps). Its tools work:
//! `plain` (no approval) and `dyn_tool` (approval dynamic) answer `ok`. It owns MCP server
//! `obs` so that the MCP hooks apply to it.
//!
//! `is_available` and `startup` trap too: a host that calls them at load or start fails
//! there, with a configuration error that names the skill.

use skill_sdk::{
    Approval, BeforeMcpCall, Context, Error, HumanLevel, IsAvailable, ObserveMcpResult, Preflight, ResolveHuman, Skill,
    SkillInfo, Startup, Target, Tool, ToolResult, ToolResultEmpty, ToolTarget, Value,
};

struct HooksTrap;

impl Skill for HooksTrap {
    fn tools() -> Vec<Tool> {
        vec![
            Tool::without_input("plain", "Answer `ok`."),
            Tool::without_input("dyn_tool", "Answer `ok` after the hook decides.").approval(Approval::Dynamic),
        ]
    }

    fn handle(name: &str, _input: Value, _ctx: &Context) -> Result<ToolResult, Error> {
        match name {
            "plain" | "dyn_tool" => Ok(ToolResult::ok("ok")),
            _ => Err(Error::unknown_tool(name)),
        }
    }

    fn info() -> SkillInfo {
        SkillInfo::default().mcp_server("obs")
    }
}

impl ResolveHuman for HooksTrap {
    fn resolve_human(_: &str, _: Value, _: &Context) -> Option<HumanLevel> {
        panic!("hooks_trap: resolve_human panicked")
    }
}

impl IsAvailable for HooksTrap {
    fn is_available(_config: Value) -> bool {
        panic!("hooks_trap: is_available panicked")
    }
}

impl Startup for HooksTrap {
    fn startup(_: Value) -> Result<(), Error> {
        panic!("hooks_trap: startup panicked")
    }
}

impl BeforeMcpCall for HooksTrap {
    fn before_mcp_call(_: &str, _: &str, _: Value, _: &Context) -> Preflight {
        panic!("hooks_trap: before_mcp_call panicked")
    }
}

impl ObserveMcpResult for HooksTrap {
    fn observe_mcp_result(_: &str, _: &str, _: Value, _: &str, _: &Context) -> Option<String> {
        panic!("hooks_trap: observe_mcp_result panicked")
    }
}

impl ToolResultEmpty for HooksTrap {
    fn tool_result_empty(_: &str, _: &str) -> Option<bool> {
        panic!("hooks_trap: tool_result_empty panicked")
    }
}

impl ToolTarget for HooksTrap {
    fn tool_target(_: &str, _: Value) -> Option<Target> {
        panic!("hooks_trap: tool_target panicked")
    }
}

skill_sdk::export!(HooksTrap, hooks: [
    resolve_human,
    is_available,
    startup,
    before_mcp_call,
    observe_mcp_result,
    tool_result_empty,
    tool_target,
]);
