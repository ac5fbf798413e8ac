//! Tools for what an MCP client sees beyond text: `log_levels` (one `log` record per level,
//! one field a credential), `progress(steps, pause_ms)` (reports `1..=steps` of `steps`),
//! `picture` (text, a 1x1 PNG and a resource link), `recording(bytes)` (text, `bytes` of
//! audio, and two embedded resources: text and bytes, through the `blocks` import), `structured(sum?)` (a JSON block under an
//! output schema: `{"sum": <n>}`, or `{"sum": "oops"}` when `broken`), hints on `echo`, and
//! `ask(requests, rounds?)`: `rounds` rounds (default 1) of the `ask` import, each asking
//! `requests` (key -> `{"form": {"message", "schema"}}`, `{"sampling": {"prompt",
//! "max_tokens"}}` or `{"roots": {}}`, keys suffixed with the round after the first), each
//! round counted first in state key `asked` (a side effect before the question); the answers
//! by key, or the error.

use skill_sdk::ask::{self, Answer, Request};
use skill_sdk::{Block, ResourceContents, Tool, ToolResult, Value, json, log, progress, state};

/// A 1x1 red PNG.
pub const PIXEL: [u8; 69] = [
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52, 0x00, 0x00, 0x00,
    0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x02, 0x00, 0x00, 0x00, 0x90, 0x77, 0x53, 0xde, 0x00, 0x00, 0x00, 0x0c, 0x49,
    0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0xf8, 0xcf, 0xc0, 0x00, 0x00, 0x03, 0x01, 0x01, 0x00, 0xc9, 0xfe, 0x92, 0xef,
    0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
];

/// The feature tools.
pub fn tools() -> Vec<Tool> {
    vec![
        Tool::without_input("log_levels", "Log one record at each level."),
        Tool::with_schema(
            "progress",
            "Report progress `steps` times, pausing `pause_ms` between reports.",
            json!({ "type": "object", "properties": {
                "steps": { "type": "integer", "minimum": 0, "maximum": 1000 },
                "pause_ms": { "type": "integer", "minimum": 0, "maximum": 1000 },
            } }),
        ),
        Tool::without_input("picture", "Return text, an image and a resource link."),
        Tool::with_schema(
            "ask",
            "Ask `requests` (key -> form, sampling or roots) in `rounds` rounds; the answers by key.",
            json!({ "type": "object", "properties": {
                "requests": { "type": "object" },
                "rounds": { "type": "integer", "minimum": 1, "maximum": 5 },
            }, "required": ["requests"] }),
        ),
        Tool::with_schema(
            "recording",
            "Return text, `bytes` bytes of audio and two embedded resources.",
            json!({ "type": "object", "properties": { "bytes": { "type": "integer", "minimum": 0, "maximum": 4_000_000 } } }),
        ),
        Tool::with_schema(
            "structured",
            "Return a structured sum.",
            json!({ "type": "object", "properties": { "broken": { "type": "boolean" } } }),
        )
        .output_schema(json!({
            "type": "object",
            "properties": { "sum": { "type": "integer" } },
            "required": ["sum"],
        }))
        .read_only()
        .idempotent()
        .open_world(false),
    ]
}

/// Runs a feature tool; `None` for any other name.
pub fn handle(name: &str, input: &Value) -> Option<ToolResult> {
    Some(match name {
        "log_levels" => {
            log::debug("debug detail", &[]);
            log::info("checked", &[("url", "https://example.com"), ("api_token", "s3cr3t")]);
            log::warn("slow", &[]);
            log::error("failed", &[]);
            ToolResult::ok(json!({ "logged": 4 }))
        }
        "progress" => {
            let steps = input["steps"].as_u64().unwrap_or(3);
            let pause = std::time::Duration::from_millis(input["pause_ms"].as_u64().unwrap_or(0));
            for step in 1..=steps {
                std::thread::sleep(pause);
                progress::report(step as f64, Some(steps as f64), Some(&format!("step {step}")));
            }
            ToolResult::ok(json!({ "steps": steps }))
        }
        "picture" => {
            ToolResult::ok("a red pixel").with_image("image/png", PIXEL.to_vec()).with_block(Block::ResourceLink {
                uri: "skill://probe/prompt.md".into(),
                name: "prompt.md".into(),
                mime_type: Some("text/markdown".into()),
                description: None,
            })
        }
        "recording" => {
            let bytes = input["bytes"].as_u64().unwrap_or(16) as usize;
            ToolResult::ok("a recording")
                .with_audio("audio/wav", vec![128; bytes])
                .with_resource("skill://probe/notes.txt", Some("text/plain"), ResourceContents::Text("notes".into()))
                .with_resource("skill://probe/raw.bin", None, ResourceContents::Blob(vec![1, 2, 3]))
        }
        "ask" => asked(input),
        "structured" => {
            let sum = if input["broken"].as_bool() == Some(true) { json!("oops") } else { json!(3) };
            ToolResult::ok("1 + 2").with_json(json!({ "sum": sum }))
        }
        _ => return None,
    })
}

/// `ask`: its rounds, each counted in state first; the answers by key.
fn asked(input: &Value) -> ToolResult {
    let rounds = input["rounds"].as_u64().unwrap_or(1);
    let mut answers = skill_sdk::serde_json::Map::new();
    for round in 1..=rounds {
        let count = state::get("asked").ok().flatten().and_then(|c| c.parse::<u64>().ok()).unwrap_or(0);
        let _ = state::set("asked", &(count + 1).to_string());
        let suffix = if round == 1 { String::new() } else { format!("_{round}") };
        let requests = input["requests"].as_object().into_iter().flatten().map(|(key, r)| {
            let text = |field: &str| r.pointer(field).and_then(Value::as_str).unwrap_or_default().to_owned();
            let request = if r.get("form").is_some() {
                Request::form(text("/form/message"), r["form"]["schema"].clone())
            } else if r.get("sampling").is_some() {
                let tokens = r["sampling"]["max_tokens"].as_u64().unwrap_or(50) as u32;
                Request::sampling(text("/sampling/prompt"), tokens)
            } else {
                Request::Roots
            };
            (format!("{key}{suffix}"), request)
        });
        match ask::ask(requests.collect::<Vec<_>>()) {
            Ok(got) => {
                for (key, answer) in got.0 {
                    answers.insert(key, described(answer));
                }
            }
            Err(e) => return ToolResult::failed(json!({ "error": e.to_string() })),
        }
    }
    ToolResult::ok(Value::Object(answers))
}

fn described(answer: Answer) -> Value {
    match answer {
        Answer::Form { action, content } => json!({ "form": { "action": action.as_str(), "content": content } }),
        Answer::Sampled { text, model, stop_reason } => {
            json!({ "sampled": { "text": text, "model": model, "stop_reason": stop_reason } })
        }
        Answer::Roots(roots) => {
            json!({ "roots": roots.into_iter().map(|(uri, name)| json!({ "uri": uri, "name": name })).collect::<Vec<_>>() })
        }
        Answer::Unavailable(why) => json!({ "unavailable": why }),
    }
}
