//! `mcp_user`: uses MCP servers through the `mcp` host import (the spec's `bind` +
//! `engine.mcp_manager.call_tool`) and declares them in `MCP_TOOLS`.
//!
//! - `call(server, tool, arguments?)` (no approval) and `guarded_call` (approve) return
//!   `{"result": text}` or fail with `{"error": <wit case>, "detail"}`.
//!
//! Info: uses `echo` of server `everything` and `get_logs` of `obs`, so `mcp_user__echo` and
//! `mcp_user__get_logs` are aliases of `everything__echo` and `obs__get_logs`; owns
//! `everything`: its `before-mcp-call` proceeds, its `observe-mcp-result` traps when the
//! output contains `trap`, spins forever on `spin`, and keeps the output otherwise.

use skill_sdk::{
    Approval, BeforeMcpCall, Context, Error, ObserveMcpResult, Preflight, Skill, SkillInfo, Tool, ToolResult, Value,
    json, mcp,
};

struct McpUser;

impl Skill for McpUser {
    fn tools() -> Vec<Tool> {
        let schema = json!({
            "type": "object",
            "properties": {
                "server": { "type": "string" },
                "tool": { "type": "string" },
                "arguments": { "type": "object" },
            },
            "required": ["server", "tool"],
        });
        vec![
            Tool::with_schema("call", "Call an MCP tool through the host.", schema.clone()),
            Tool::with_schema("guarded_call", "The same, behind approval.", schema).approval(Approval::Approve),
        ]
    }

    fn handle(name: &str, input: Value, _ctx: &Context) -> Result<ToolResult, Error> {
        if name != "call" && name != "guarded_call" {
            return Err(Error::unknown_tool(name));
        }
        let field = |f: &str| input[f].as_str().unwrap_or_default().to_owned();
        let arguments = input.get("arguments").cloned().unwrap_or_else(|| json!({}));
        Ok(match mcp::call_tool(&field("server"), &field("tool"), &arguments) {
            Ok(text) => ToolResult::ok(json!({ "result": text })),
            Err(e) => ToolResult::failed(json!({ "error": e.kind(), "detail": e.to_string() })),
        })
    }

    fn info() -> SkillInfo {
        SkillInfo::default().mcp_tools("everything", ["echo"]).mcp_tools("obs", ["get_logs"]).mcp_server("everything")
    }
}

impl BeforeMcpCall for McpUser {
    fn before_mcp_call(_: &str, _: &str, _: Value, _: &Context) -> Preflight {
        Preflight::proceed()
    }
}

impl ObserveMcpResult for McpUser {
    fn observe_mcp_result(_: &str, _: &str, _: Value, output: &str, _: &Context) -> Option<String> {
        if output.contains("trap") {
            panic!("mcp_user: observer trapped");
        }
        if output.contains("spin") {
            let mut n: u64 = 0;
            loop {
                n = std::hint::black_box(n.wrapping_add(1));
            }
        }
        None
    }
}

skill_sdk::export!(McpUser, hooks: [before_mcp_call, observe_mcp_result]);
