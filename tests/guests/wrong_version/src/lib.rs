//! `wrong_version`: built with `wit-bindgen` directly against `wit/`, a copy of the contract
//! at version 0.0.9, so it exports `skillhost:skill/tools@0.0.9`. The host must reject it.

wit_bindgen::generate!({ path: "wit", world: "skill" });

use exports::skillhost::skill::tools::{CallContext, Guest, SkillInfo, ToolDef, ToolResult};
use skillhost::skill::types::Approval;

struct WrongVersion;

impl Guest for WrongVersion {
    fn list_tools() -> Vec<ToolDef> {
        vec![ToolDef {
            name: "x".into(),
            description: "Never offered: the component targets contract 0.0.9.".into(),
            input_schema: r#"{"type":"object","properties":{}}"#.into(),
            approval: Approval::None,
            expose_result: false,
            declares_coverage: false,
        }]
    }

    fn handle(_name: String, _input: String, _ctx: CallContext) -> ToolResult {
        ToolResult { content: "x".into(), succeeded: None, is_empty: None, coverage: None }
    }

    fn info() -> SkillInfo {
        SkillInfo { mcp_tools: vec![], mcp_servers: vec![], mcp_prerequisites: vec![], verify: false }
    }
}

export!(WrongVersion);
