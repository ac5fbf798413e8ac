//! `memory`: read, write and search the operator's memory files (notes, playbooks,
//! incident logs) through the host's memory import.

use schemars::JsonSchema;
use serde::Deserialize;
use skill_sdk::{Context, Error, Skill, Tool, ToolResult, Value, json, memory};

struct Memory;

/// Input of `memory_read`.
#[derive(Deserialize, JsonSchema)]
struct Read {
    /// The file's path relative to the memory root, such as `playbooks/restart.md`.
    path: String,
}

/// How `memory_write` treats an existing file.
#[derive(Deserialize, JsonSchema, Default, Clone, Copy)]
#[serde(rename_all = "lowercase")]
enum Mode {
    /// Replace the file's content.
    #[default]
    Overwrite,
    /// Add to the end of the file.
    Append,
}

/// Input of `memory_write`.
#[derive(Deserialize, JsonSchema)]
struct Write {
    /// The file's path relative to the memory root; parent folders are created.
    path: String,
    /// The text to write.
    content: String,
    /// `overwrite` (the default) replaces the file; `append` adds to its end.
    #[serde(default)]
    mode: Mode,
}

/// Input of `memory_search`.
#[derive(Deserialize, JsonSchema)]
struct Search {
    /// Text to look for, case-insensitive, in every memory file.
    query: String,
}

impl Skill for Memory {
    fn tools() -> Vec<Tool> {
        vec![
            Tool::new::<Read>("memory_read", "Read a memory file. Returns its content, or `exists: false`."),
            Tool::new::<Write>(
                "memory_write",
                "Write a memory file, replacing it (mode `overwrite`) or adding to its end (mode `append`).",
            ),
            Tool::new::<Search>(
                "memory_search",
                "Find lines containing a text in all memory files (case-insensitive, at most 100 hits).",
            ),
        ]
    }

    fn handle(name: &str, input: Value, _ctx: &Context) -> Result<ToolResult, Error> {
        match name {
            "memory_read" => read(skill_sdk::parse_input(input)?),
            "memory_write" => write(skill_sdk::parse_input(input)?),
            "memory_search" => search(skill_sdk::parse_input(input)?),
            _ => Err(Error::unknown_tool(name)),
        }
    }
}

fn read(args: Read) -> Result<ToolResult, Error> {
    let content = memory::read(&args.path)?;
    let exists = content.is_some();
    let result = ToolResult::ok(json!({ "path": args.path, "exists": exists, "content": content }));
    Ok(result.empty(!exists))
}

fn write(args: Write) -> Result<ToolResult, Error> {
    let mode = match args.mode {
        Mode::Overwrite => {
            memory::write(&args.path, &args.content)?;
            "overwrite"
        }
        Mode::Append => {
            memory::append(&args.path, &args.content)?;
            "append"
        }
    };
    let bytes = args.content.len();
    Ok(ToolResult::ok(json!({ "path": args.path, "mode": mode, "bytes": bytes })))
}

fn search(args: Search) -> Result<ToolResult, Error> {
    let hits = memory::search(&args.query)?;
    let empty = hits.is_empty();
    let result = ToolResult::ok(json!({ "query": args.query, "hits": hits }));
    Ok(result.empty(empty))
}

skill_sdk::export!(Memory);
