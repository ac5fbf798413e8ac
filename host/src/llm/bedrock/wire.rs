//! The Converse request and response bodies.
//!
//! Request: `messages` (`role`, `content` of `text` / `toolUse` / `toolResult` blocks),
//! `system`, `inferenceConfig.maxTokens` and `toolConfig.tools[].toolSpec`. Response:
//! `output.message.content`, `stopReason`, `usage.inputTokens` / `outputTokens`.

use super::super::{Block, LlmError, Message, Request, Response, Role, StopReason, ToolChoice, Usage};
use serde_json::{Value, json};

/// The request body.
///
/// `toolConfig.toolChoice` is never sent: `auto` is Converse's default, only some model
/// families accept the field at all, and there is no `none` (see [`super::Converse`]).
/// `toolConfig` is sent whenever tools are offered, since Converse rejects a history holding
/// `toolUse` / `toolResult` blocks without it.
pub fn body(req: &Request) -> Value {
    let mut body = json!({
        "messages": messages(&req.messages),
        "inferenceConfig": {"maxTokens": req.max_tokens},
    });
    if !req.system.is_empty() {
        body["system"] = json!([{"text": req.system}]);
    }
    if !req.tools.is_empty() {
        let tools = req.tools.iter().map(|t| {
            json!({"toolSpec": {"name": t.name, "description": t.description,
                "inputSchema": {"json": &*t.input_schema}}})
        });
        body["toolConfig"] = json!({"tools": tools.collect::<Vec<_>>()});
    }
    body
}

/// The conversation as Converse messages. Empty text and other providers' opaque state are
/// left out (Converse rejects empty blocks), and a message left empty is skipped; messages of
/// the same role that then meet are merged, since Converse requires alternating roles.
fn messages(messages: &[Message]) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    for m in messages {
        let role = match m.role {
            Role::User => "user",
            Role::Assistant => "assistant",
        };
        let content: Vec<Value> = m.content.iter().filter_map(block).collect();
        if content.is_empty() {
            continue;
        }
        match out.last_mut() {
            Some(last) if last["role"] == role => {
                last["content"].as_array_mut().expect("content is an array").extend(content)
            }
            _ => out.push(json!({"role": role, "content": content})),
        }
    }
    out
}

fn block(b: &Block) -> Option<Value> {
    match b {
        Block::Text(t) if t.is_empty() => None,
        Block::Text(t) => Some(json!({"text": t})),
        Block::ToolUse { id, name, input } => Some(json!({"toolUse": {"toolUseId": id, "name": name, "input": input}})),
        Block::ToolResult { tool_use_id, content, is_error } => {
            let status = if *is_error { "error" } else { "success" };
            Some(json!({"toolResult": {"toolUseId": tool_use_id, "content": [{"text": content}], "status": status}}))
        }
        Block::Opaque(_) => None,
    }
}

/// The answer from a Converse response body. With [`ToolChoice::None`], tool calls are
/// dropped (and a `tool_use` stop becomes the end of the turn).
pub fn response(name: &'static str, body: &Value, choice: ToolChoice) -> Result<Response, LlmError> {
    let Some(parts) = body["output"]["message"]["content"].as_array() else {
        return Err(LlmError::protocol(name, "no output.message.content in the answer"));
    };
    let mut content = Vec::new();
    for part in parts {
        if let Some(text) = part["text"].as_str() {
            if !text.is_empty() {
                content.push(Block::Text(text.to_owned()));
            }
        } else if let Some(call) = part.get("toolUse") {
            let field = |key: &str| call[key].as_str().unwrap_or_default().to_owned();
            let (id, tool) = (field("toolUseId"), field("name"));
            if id.is_empty() || tool.is_empty() {
                return Err(LlmError::protocol(name, "toolUse block without toolUseId or name"));
            }
            if choice != ToolChoice::None {
                let input = if call["input"].is_null() { json!({}) } else { call["input"].clone() };
                content.push(Block::ToolUse { id, name: tool, input });
            }
        } // reasoningContent, images, citations: not used
    }
    let calls = content.iter().any(|b| matches!(b, Block::ToolUse { .. }));
    let stop = match body["stopReason"].as_str().unwrap_or("end_turn") {
        "end_turn" | "stop_sequence" => StopReason::EndTurn,
        "tool_use" if calls => StopReason::ToolUse,
        "tool_use" => StopReason::EndTurn,
        "max_tokens" => StopReason::MaxTokens,
        other => StopReason::Other(other.to_owned()),
    };
    let usage = Usage {
        input_tokens: body["usage"]["inputTokens"].as_u64().unwrap_or_default(),
        output_tokens: body["usage"]["outputTokens"].as_u64().unwrap_or_default(),
    };
    Ok(Response { content, stop, usage })
}
