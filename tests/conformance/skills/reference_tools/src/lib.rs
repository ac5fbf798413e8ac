//! The reference tools of the official MCP conformance suite that a skill can serve with the
//! `skillhost:skill@0.1.0` contract, with the reference names and behaviour:
//!
//! - `test_simple_text`: one text block.
//! - `test_image_content`: one PNG image (a 1x1 red pixel).
//! - `test_audio_content`: one WAV sound (a tenth of a second of silence).
//! - `test_embedded_resource`: one text resource embedded with its contents.
//! - `test_multiple_content_types`: text, an image and an embedded JSON resource.
//! - `test_error_handling`: an error result (`isError: true`) with its message.
//! - `test_tool_with_progress`: progress 0, 50 and 100 of 100, about 50 ms apart, to the
//!   client that sent a progress token.
//! - `test_tool_with_logging`: three `info` records about 50 ms apart, which the host sends as
//!   `notifications/message` to a client that asked for logs.
//! - `test_logging_tool`: one `info` record (a client that did not ask for logs hears none).
//!
//! Nothing in the host knows these names: they run through the sandbox like any skill's tools.

use skill_sdk::{Context, Error, ResourceContents, Skill, Tool, ToolResult, Value, json, log, progress};
use std::time::Duration;

/// A 1x1 red PNG.
const PIXEL: [u8; 69] = [
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52, 0x00, 0x00, 0x00,
    0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x02, 0x00, 0x00, 0x00, 0x90, 0x77, 0x53, 0xde, 0x00, 0x00, 0x00, 0x0c, 0x49,
    0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0xf8, 0xcf, 0xc0, 0x00, 0x00, 0x03, 0x01, 0x01, 0x00, 0xc9, 0xfe, 0x92, 0xef,
    0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
];

/// A WAV file: 8 kHz, 8-bit mono, 800 samples of silence (a tenth of a second).
fn silence() -> Vec<u8> {
    const SAMPLES: u32 = 800;
    let mut wav = Vec::with_capacity(44 + SAMPLES as usize);
    wav.extend_from_slice(b"RIFF");
    wav.extend_from_slice(&(36 + SAMPLES).to_le_bytes());
    wav.extend_from_slice(b"WAVEfmt ");
    // PCM, 1 channel, 8000 Hz, 8000 bytes a second, 1-byte frames, 8 bits a sample.
    for field in [16u32.to_le_bytes().as_slice(), &1u16.to_le_bytes(), &1u16.to_le_bytes()] {
        wav.extend_from_slice(field);
    }
    for field in [8000u32.to_le_bytes(), 8000u32.to_le_bytes()] {
        wav.extend_from_slice(&field);
    }
    wav.extend_from_slice(&1u16.to_le_bytes());
    wav.extend_from_slice(&8u16.to_le_bytes());
    wav.extend_from_slice(b"data");
    wav.extend_from_slice(&SAMPLES.to_le_bytes());
    // Unsigned 8-bit samples: 128 is silence.
    wav.resize(44 + SAMPLES as usize, 128);
    wav
}

/// The pause between two reports: the host forwards at most one every 50 ms.
const PAUSE: Duration = Duration::from_millis(60);

struct ReferenceTools;

impl Skill for ReferenceTools {
    fn tools() -> Vec<Tool> {
        vec![
            Tool::without_input("test_simple_text", "Returns simple text content."),
            Tool::without_input("test_image_content", "Returns an image (a 1x1 red PNG)."),
            Tool::without_input("test_audio_content", "Returns audio (a WAV of silence)."),
            Tool::without_input("test_embedded_resource", "Returns an embedded text resource."),
            Tool::without_input("test_multiple_content_types", "Returns text, an image and an embedded resource."),
            Tool::without_input("test_error_handling", "Always fails, with an error result."),
            Tool::without_input("test_tool_with_progress", "Reports progress 0, 50 and 100 of 100."),
            Tool::without_input("test_tool_with_logging", "Logs three records while it runs."),
            Tool::without_input("test_logging_tool", "Logs one record."),
        ]
    }

    fn handle(name: &str, _input: Value, _ctx: &Context) -> Result<ToolResult, Error> {
        Ok(match name {
            "test_simple_text" => ToolResult::text("This is a simple text response for testing."),
            "test_image_content" => ToolResult::text("").with_image("image/png", PIXEL.to_vec()),
            "test_audio_content" => ToolResult::text("").with_audio("audio/wav", silence()),
            "test_embedded_resource" => ToolResult::text("").with_resource(
                "test://embedded-resource",
                Some("text/plain"),
                ResourceContents::Text("This is an embedded resource content.".into()),
            ),
            "test_multiple_content_types" => {
                ToolResult::text("Multiple content types test:").with_image("image/png", PIXEL.to_vec()).with_resource(
                    "test://mixed-content-resource",
                    Some("application/json"),
                    ResourceContents::Text(json!({"test": "data", "value": 123}).to_string()),
                )
            }
            "test_error_handling" => ToolResult::failed("This tool intentionally returns an error for testing"),
            "test_tool_with_progress" => {
                for done in [0.0, 50.0, 100.0] {
                    progress::report(done, Some(100.0), None);
                    if done < 100.0 {
                        std::thread::sleep(PAUSE);
                    }
                }
                ToolResult::text("Progress test completed")
            }
            "test_tool_with_logging" => {
                log::info("Tool execution started", &[]);
                std::thread::sleep(PAUSE);
                log::info("Tool processing data", &[]);
                std::thread::sleep(PAUSE);
                log::info("Tool execution completed", &[]);
                ToolResult::text("Logging test completed")
            }
            "test_logging_tool" => {
                log::info("test_logging_tool ran", &[]);
                ToolResult::text("Logged one record")
            }
            _ => return Err(Error::unknown_tool(name)),
        })
    }
}

skill_sdk::export!(ReferenceTools);
