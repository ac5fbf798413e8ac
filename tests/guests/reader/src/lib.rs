//! `reader`: reads files with `std::fs`, as a skill that asks for its own folder
//! (`[capabilities] files = "self"`) would; the tests give it folders to read.
//!
//! - `read {path}`: `{"text"}`, or `{"error", "kind"}` (the `io::ErrorKind`) when it cannot.
//! - `listdir {path}`: `{"names"}` (sorted), or `{"error", "kind"}`.
//! - `cwd`: `{"cwd"}` (what `std::env::current_dir` says), or `{"error"}`.

use skill_sdk::{Context, Error, Skill, Tool, ToolResult, Value, json};

struct Reader;

fn path_schema() -> Value {
    json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]})
}

fn failed(e: &std::io::Error) -> ToolResult {
    ToolResult::ok(json!({ "error": e.to_string(), "kind": format!("{:?}", e.kind()) }))
}

impl Skill for Reader {
    fn tools() -> Vec<Tool> {
        vec![
            Tool::with_schema("read", "Reads a text file.", path_schema()),
            Tool::with_schema("listdir", "Lists a folder.", path_schema()),
            Tool::without_input("cwd", "The working directory."),
        ]
    }

    fn handle(name: &str, input: Value, _ctx: &Context) -> Result<ToolResult, Error> {
        let path = input["path"].as_str().unwrap_or_default();
        Ok(match name {
            "read" => match std::fs::read_to_string(path) {
                Ok(text) => ToolResult::ok(json!({ "text": text })),
                Err(e) => failed(&e),
            },
            "listdir" => match std::fs::read_dir(path) {
                Ok(entries) => {
                    let mut names: Vec<String> =
                        entries.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
                    names.sort();
                    ToolResult::ok(json!({ "names": names }))
                }
                Err(e) => failed(&e),
            },
            "cwd" => match std::env::current_dir() {
                Ok(dir) => ToolResult::ok(json!({ "cwd": dir.display().to_string() })),
                Err(e) => failed(&e),
            },
            _ => return Err(Error::unknown_tool(name)),
        })
    }
}

skill_sdk::export!(Reader);
