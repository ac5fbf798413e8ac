//! Each provider's streaming wire format, rendered from a scripted [`Answer`], following the
//! published API references (event names, field names, ordering).

use super::{Answer, Call, Format};
use serde_json::{Value, json};

/// One SSE frame; `delta` marks frames that carry visible text.
pub struct Frame {
    /// The frame, ending in a blank line.
    pub text: String,
    /// Whether it streams text the client shows.
    pub delta: bool,
}

fn frame(event: Option<&str>, data: &Value, delta: bool) -> Frame {
    let text = match event {
        Some(name) => format!("event: {name}\ndata: {data}\n\n"),
        None => format!("data: {data}\n\n"),
    };
    Frame { text, delta }
}

/// The frames of `answer` in `format`.
pub fn answer(format: Format, model: &str, answer: &Answer) -> Vec<Frame> {
    match format {
        Format::Anthropic => anthropic(model, answer),
        Format::OpenAi => openai(model, answer),
        Format::Chat => chat(model, answer),
        Format::Converse => panic!("Converse answers are not streamed: use `converse`"),
    }
}

/// A Bedrock Converse answer body: text, then the tool calls.
pub fn converse(answer: &Answer) -> Value {
    let mut content = Vec::new();
    if !answer.text.is_empty() {
        content.push(json!({"text": answer.text.concat()}));
    }
    for call in &answer.calls {
        content.push(json!({"toolUse": {"toolUseId": call.id, "name": call.name, "input": call.arguments}}));
    }
    let stop = if answer.calls.is_empty() { "end_turn" } else { "tool_use" };
    json!({"output": {"message": {"role": "assistant", "content": content}}, "stopReason": stop,
        "usage": {"inputTokens": 25, "outputTokens": 42, "totalTokens": 67}, "metrics": {"latencyMs": 120}})
}

/// The `x-amzn-errortype` of a Converse error status.
pub fn converse_error_type(status: u16) -> String {
    let kind = match status {
        400 => "ValidationException",
        403 => "AccessDeniedException",
        404 => "ResourceNotFoundException",
        429 => "ThrottlingException",
        503 => "ServiceUnavailableException",
        _ => "InternalServerException",
    };
    format!("{kind}:http://internal.amazon.com/coral/com.amazon.bedrock/")
}

/// An error body in the provider's shape.
pub fn error_body(format: Format, status: u16, message: &str) -> String {
    let kind = match status {
        400 => "invalid_request_error",
        401 => "authentication_error",
        429 => "rate_limit_error",
        529 => "overloaded_error",
        _ => "api_error",
    };
    let body = match format {
        Format::Anthropic => json!({"type": "error", "error": {"type": kind, "message": message}}),
        Format::OpenAi | Format::Chat => {
            json!({"error": {"message": message, "type": kind, "param": null, "code": null}})
        }
        Format::Converse => json!({"message": message}),
    };
    body.to_string()
}

/// The arguments as JSON text in three fragments.
fn fragments(call: &Call) -> Vec<String> {
    let text = call.arguments.to_string();
    let chars: Vec<char> = text.chars().collect();
    let third = chars.len().div_ceil(3).max(1);
    chars.chunks(third).map(|c| c.iter().collect()).collect()
}

fn anthropic(model: &str, answer: &Answer) -> Vec<Frame> {
    let ev = |name: &str, data: Value| frame(Some(name), &data, false);
    let usage = json!({"input_tokens": 25, "output_tokens": 1});
    let message = json!({"id": "msg_01", "type": "message", "role": "assistant", "model": model, "content": [],
        "stop_reason": null, "stop_sequence": null, "usage": usage});
    let mut frames = vec![ev("message_start", json!({"type": "message_start", "message": message}))];
    let mut index = 0;
    if !answer.text.is_empty() {
        let block = json!({"type": "text", "text": ""});
        frames.push(ev(
            "content_block_start",
            json!({"type": "content_block_start", "index": index, "content_block": block}),
        ));
        frames.push(ev("ping", json!({"type": "ping"})));
        for piece in &answer.text {
            let delta =
                json!({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": piece}});
            frames.push(frame(Some("content_block_delta"), &delta, true));
        }
        frames.push(ev("content_block_stop", json!({"type": "content_block_stop", "index": index})));
        index += 1;
    }
    for call in &answer.calls {
        let block = json!({"type": "tool_use", "id": call.id, "name": call.name, "input": {}});
        frames.push(ev(
            "content_block_start",
            json!({"type": "content_block_start", "index": index, "content_block": block}),
        ));
        // The API opens every tool input with an empty fragment.
        for piece in std::iter::once(String::new()).chain(fragments(call)) {
            let delta = json!({"type": "input_json_delta", "partial_json": piece});
            frames.push(ev(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": index, "delta": delta}),
            ));
        }
        frames.push(ev("content_block_stop", json!({"type": "content_block_stop", "index": index})));
        index += 1;
    }
    let stop = if answer.calls.is_empty() { "end_turn" } else { "tool_use" };
    let delta = json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
        "usage": {"output_tokens": 42}});
    frames.push(ev("message_delta", delta));
    frames.push(ev("message_stop", json!({"type": "message_stop"})));
    frames
}

/// Numbers the OpenAI events (`sequence_number`) as the API does.
struct Seq(u64, Vec<Frame>);

impl Seq {
    fn push(&mut self, kind: &str, mut data: Value, delta: bool) {
        data["type"] = json!(kind);
        data["sequence_number"] = json!(self.0);
        self.0 += 1;
        self.1.push(frame(Some(kind), &data, delta));
    }
}

fn openai(model: &str, answer: &Answer) -> Vec<Frame> {
    let response = |status: &str, output: &[Value]| json!({"id": "resp_1", "object": "response", "model": model, "status": status, "output": output});
    let mut seq = Seq(0, Vec::new());
    seq.push("response.created", json!({"response": response("in_progress", &[])}), false);
    let mut output = Vec::new();
    if let Some(encrypted) = &answer.reasoning {
        let item = json!({"id": "rs_1", "type": "reasoning", "summary": [], "encrypted_content": encrypted});
        seq.push(
            "response.output_item.added",
            json!({"output_index": 0, "item": {"id": "rs_1", "type": "reasoning", "summary": []}}),
            false,
        );
        seq.push("response.output_item.done", json!({"output_index": 0, "item": item}), false);
        output.push(item);
    }
    if !answer.text.is_empty() {
        output.push(openai_message(&mut seq, output.len(), &answer.text));
    }
    for (n, call) in answer.calls.iter().enumerate() {
        output.push(openai_call(&mut seq, output.len(), n, call));
    }
    let mut done = response("completed", &output);
    done["usage"] = json!({"input_tokens": 25, "output_tokens": 42, "total_tokens": 67,
        "output_tokens_details": {"reasoning_tokens": 8}});
    seq.push("response.completed", json!({"response": done}), false);
    seq.1
}

fn openai_message(seq: &mut Seq, index: usize, pieces: &[String]) -> Value {
    let at = json!({"item_id": "msg_1", "output_index": index, "content_index": 0});
    let with = |mut base: Value, key: &str, value: Value| {
        base[key] = value;
        base
    };
    let opened = json!({"id": "msg_1", "type": "message", "status": "in_progress", "role": "assistant", "content": []});
    seq.push("response.output_item.added", json!({"output_index": index, "item": opened}), false);
    seq.push(
        "response.content_part.added",
        with(at.clone(), "part", json!({"type": "output_text", "text": "", "annotations": []})),
        false,
    );
    for piece in pieces {
        seq.push("response.output_text.delta", with(at.clone(), "delta", json!(piece)), true);
    }
    let text: String = pieces.concat();
    seq.push("response.output_text.done", with(at.clone(), "text", json!(text)), false);
    let part = json!({"type": "output_text", "text": text, "annotations": []});
    seq.push("response.content_part.done", with(at, "part", part.clone()), false);
    let item = json!({"id": "msg_1", "type": "message", "status": "completed", "role": "assistant", "content": [part]});
    seq.push("response.output_item.done", json!({"output_index": index, "item": item}), false);
    item
}

fn openai_call(seq: &mut Seq, index: usize, n: usize, call: &Call) -> Value {
    let id = format!("fc_{n}");
    let item = |status: &str, arguments: &str| {
        json!({"id": id, "type": "function_call", "status": status, "arguments": arguments,
            "call_id": call.id, "name": call.name})
    };
    seq.push("response.output_item.added", json!({"output_index": index, "item": item("in_progress", "")}), false);
    for piece in fragments(call) {
        seq.push(
            "response.function_call_arguments.delta",
            json!({"item_id": id, "output_index": index, "delta": piece}),
            false,
        );
    }
    let arguments = call.arguments.to_string();
    seq.push(
        "response.function_call_arguments.done",
        json!({"item_id": id, "output_index": index, "arguments": arguments}),
        false,
    );
    let done = item("completed", &arguments);
    seq.push("response.output_item.done", json!({"output_index": index, "item": done}), false);
    done
}

fn chat(model: &str, answer: &Answer) -> Vec<Frame> {
    let chunk = |delta: Value, finish: Value| {
        json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": model,
            "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}]})
    };
    let mut frames = vec![frame(None, &chunk(json!({"role": "assistant", "content": ""}), Value::Null), false)];
    for piece in &answer.text {
        frames.push(frame(None, &chunk(json!({"content": piece}), Value::Null), true));
    }
    for (index, call) in answer.calls.iter().enumerate() {
        let function = json!({"name": call.name, "arguments": ""});
        let first = json!({"index": index, "id": call.id, "type": "function", "function": function});
        frames.push(frame(None, &chunk(json!({"tool_calls": [first]}), Value::Null), false));
        for piece in fragments(call) {
            let more = json!({"index": index, "function": {"arguments": piece}});
            frames.push(frame(None, &chunk(json!({"tool_calls": [more]}), Value::Null), false));
        }
    }
    let finish = if answer.calls.is_empty() { "stop" } else { "tool_calls" };
    frames.push(frame(None, &chunk(json!({}), json!(finish)), false));
    let usage = json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": model,
        "choices": [],
        "usage": {"prompt_tokens": 25, "completion_tokens": 42, "total_tokens": 67}});
    frames.push(frame(None, &usage, false));
    frames.push(Frame { text: "data: [DONE]\n\n".into(), delta: false });
    frames
}
