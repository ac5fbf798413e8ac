//! `hostile`: tools that misbehave on purpose, for the sandbox's limits.
//!
//! | tool | does | should end in |
//! | --- | --- | --- |
//! | `spin` | loops forever | fuel or the deadline |
//! | `hog` | allocates 1 MiB blocks forever, touching each page | the memory limit |
//! | `recurse` | recurses without bound | stack exhaustion |
//! | `huge_result` | returns `mb` MiB of text (default 32) | the result-size limit (past 128 MiB, the host's copy limit) |
//! | `huge_log` | logs one record of `mb` MiB (default 200) | the host's copy limit for one import call |
//! | `log_flood` | logs `count` 1 KiB records (default 1,000,000), then returns `done` | the log cap |
//! | `trap` | panics with a message | a crash report |
//! | `stdout_flood` | prints `mb` MiB to stdout (default 64), ignoring write errors, then returns `done` | the output cap |
//! | `fill_memory` | writes `files` memory files (default 512) of `kb` KiB (default 1024) under `fill/`, stopping at the first error | the memory quota |
//! | `empty_writes` | one byte, then `count` empty writes (default 4,000,000), to stdout, then to stderr, straight through `wasi:io/streams`, then returns `done` | nothing kept for them (GHSA-5m8g-xhq4-4h93) |
//! | `fill_state` | sets `keys` state keys (default 20,000) of `bytes` bytes (default 1024), stopping at the first error | the state quota |
//!
//! The `fill_*` tools report `{"written": n, "error": kind or null, "detail": text or null}`.

use std::hint::black_box;
use std::io::Write;

use skill_sdk::{Context, Error, Skill, Tool, ToolResult, Value, json, log, memory, state};

struct Hostile;

const MIB: usize = 1 << 20;

fn number_schema(field: &str, description: &str) -> Value {
    json!({
        "type": "object",
        "properties": { field: { "type": "integer", "minimum": 0, "description": description } },
    })
}

fn numbers_schema(fields: &[&str]) -> Value {
    let properties: skill_sdk::serde_json::Map<String, Value> =
        fields.iter().map(|f| (f.to_string(), json!({ "type": "integer", "minimum": 0 }))).collect();
    json!({ "type": "object", "properties": properties })
}

fn number(input: &Value, field: &str, default: u64) -> u64 {
    input[field].as_u64().unwrap_or(default)
}

impl Skill for Hostile {
    fn tools() -> Vec<Tool> {
        vec![
            Tool::without_input("spin", "Loop forever."),
            Tool::without_input("hog", "Allocate memory forever."),
            Tool::without_input("recurse", "Recurse without bound."),
            Tool::with_schema(
                "huge_result",
                "Return a huge result.",
                number_schema("mb", "MiB to return (default 32)."),
            ),
            Tool::with_schema(
                "huge_log",
                "Log one huge record.",
                number_schema("mb", "MiB to log in one record (default 200)."),
            ),
            Tool::with_schema(
                "log_flood",
                "Log a flood of records.",
                number_schema("count", "Records (default 1000000)."),
            ),
            Tool::without_input("trap", "Panic."),
            Tool::with_schema(
                "stdout_flood",
                "Print a flood to stdout.",
                number_schema("mb", "MiB to print (default 64)."),
            ),
            Tool::with_schema(
                "empty_writes",
                "Write nothing, many times, to stdout and stderr.",
                number_schema("count", "Empty writes to each (default 4000000)."),
            ),
            Tool::with_schema("fill_memory", "Write many memory files.", numbers_schema(&["files", "kb"])),
            Tool::with_schema("fill_state", "Set many state keys.", numbers_schema(&["keys", "bytes"])),
        ]
    }

    fn handle(name: &str, input: Value, _ctx: &Context) -> Result<ToolResult, Error> {
        match name {
            "spin" => spin(),
            "hog" => hog(),
            "recurse" => Ok(ToolResult::text(recurse(black_box(0)).to_string())),
            "huge_result" => Ok(ToolResult::text("x".repeat(number(&input, "mb", 32) as usize * MIB))),
            "huge_log" => {
                log::info(&"z".repeat(number(&input, "mb", 200) as usize * MIB), &[]);
                Ok(ToolResult::text("logged"))
            }
            "log_flood" => Ok(log_flood(number(&input, "count", 1_000_000))),
            "trap" => panic!("hostile guest panicked on purpose"),
            "stdout_flood" => Ok(stdout_flood(number(&input, "mb", 64) as usize)),
            "empty_writes" => Ok(empty_writes(number(&input, "count", 4_000_000))),
            "fill_memory" => Ok(fill_memory(number(&input, "files", 512), number(&input, "kb", 1024) as usize)),
            "fill_state" => Ok(fill_state(number(&input, "keys", 20_000), number(&input, "bytes", 1024) as usize)),
            _ => Err(Error::unknown_tool(name)),
        }
    }
}

fn spin() -> ! {
    let mut i: u64 = 0;
    loop {
        i = black_box(i).wrapping_add(1);
    }
}

fn hog() -> ! {
    let mut blocks: Vec<Vec<u8>> = Vec::new();
    loop {
        let mut block = vec![0u8; MIB];
        for page in (0..MIB).step_by(4096) {
            block[page] = 1;
        }
        blocks.push(black_box(block));
    }
}

/// Each frame keeps a buffer alive across the call, so neither the shadow stack in linear
/// memory nor the wasm stack can be optimised away.
#[inline(never)]
#[allow(unconditional_recursion)] // on purpose: the sandbox must stop it
fn recurse(depth: u64) -> u64 {
    let frame = black_box([depth; 32]);
    recurse(black_box(depth + 1)).wrapping_add(frame[depth as usize % 32])
}

fn log_flood(count: u64) -> ToolResult {
    let message = "x".repeat(1024);
    for i in 0..count {
        log::info(&message, &[("i", &i.to_string())]);
    }
    ToolResult::text("done")
}

/// Write errors are ignored (where `println!` would panic), so that a host which refuses
/// output past its cap still gets `done` back.
fn stdout_flood(mb: usize) -> ToolResult {
    let line = "y".repeat(1023);
    let mut stdout = std::io::stdout().lock();
    for _ in 0..mb * 1024 {
        let _ = writeln!(stdout, "{line}");
    }
    ToolResult::text("done")
}

/// `wasi:io` 0.2.0 (whole: the linker merges it with std's copy) and the two `wasi:cli`
/// interfaces `empty_writes` calls directly (std skips an empty write).
mod streams {
    wit_bindgen::generate!({
        inline: r#"
            package skillhost:hostile;

            package wasi:io@0.2.0 {
                interface error {
                    resource error {
                        to-debug-string: func() -> string;
                    }
                }
                interface poll {
                    resource pollable {
                        ready: func() -> bool;
                        block: func();
                    }
                    poll: func(in: list<borrow<pollable>>) -> list<u32>;
                }
                interface streams {
                    use error.{error};
                    use poll.{pollable};
                    variant stream-error {
                        last-operation-failed(error),
                        closed,
                    }
                    resource input-stream {
                        read: func(len: u64) -> result<list<u8>, stream-error>;
                        blocking-read: func(len: u64) -> result<list<u8>, stream-error>;
                        skip: func(len: u64) -> result<u64, stream-error>;
                        blocking-skip: func(len: u64) -> result<u64, stream-error>;
                        subscribe: func() -> pollable;
                    }
                    resource output-stream {
                        check-write: func() -> result<u64, stream-error>;
                        write: func(contents: list<u8>) -> result<_, stream-error>;
                        blocking-write-and-flush: func(contents: list<u8>) -> result<_, stream-error>;
                        flush: func() -> result<_, stream-error>;
                        blocking-flush: func() -> result<_, stream-error>;
                        subscribe: func() -> pollable;
                        write-zeroes: func(len: u64) -> result<_, stream-error>;
                        blocking-write-zeroes-and-flush: func(len: u64) -> result<_, stream-error>;
                        splice: func(src: borrow<input-stream>, len: u64) -> result<u64, stream-error>;
                        blocking-splice: func(src: borrow<input-stream>, len: u64) -> result<u64, stream-error>;
                    }
                }
            }

            package wasi:cli@0.2.0 {
                interface stdout {
                    use wasi:io/streams@0.2.0.{output-stream};
                    get-stdout: func() -> output-stream;
                }
                interface stderr {
                    use wasi:io/streams@0.2.0.{output-stream};
                    get-stderr: func() -> output-stream;
                }
            }

            world empty-writes {
                import wasi:cli/stdout@0.2.0;
                import wasi:cli/stderr@0.2.0;
            }
        "#,
        world: "skillhost:hostile/empty-writes",
        generate_all,
    });
}

/// One byte, then `count` empty writes, to stdout, then to stderr; a write the host refuses
/// ends that stream's run. (The byte first: a stream that queues writes behind a slow sink
/// queues the empty ones too, since an empty write costs no budget.)
fn empty_writes(count: u64) -> ToolResult {
    use streams::wasi::cli::{stderr, stdout};
    for stream in [stdout::get_stdout(), stderr::get_stderr()] {
        let _ = stream.write(b"x");
        for _ in 0..count {
            if stream.write(&[]).is_err() {
                break;
            }
        }
    }
    ToolResult::text("done")
}

fn fill_memory(files: u64, kb: usize) -> ToolResult {
    let content = "m".repeat(kb * 1024);
    let mut written = 0;
    for i in 0..files {
        if let Err(e) = memory::write(&format!("fill/{i}.txt"), &content) {
            return filled(written, Some((e.kind(), e.to_string())));
        }
        written += 1;
    }
    filled(written, None)
}

fn fill_state(keys: u64, bytes: usize) -> ToolResult {
    let value = "s".repeat(bytes);
    let mut written = 0;
    for i in 0..keys {
        if let Err(e) = state::set(&format!("fill-{i}"), &value) {
            return filled(written, Some((e.kind(), e.to_string())));
        }
        written += 1;
    }
    filled(written, None)
}

fn filled(written: u64, error: Option<(&str, String)>) -> ToolResult {
    let (kind, detail) = error.unzip();
    ToolResult::ok(json!({ "written": written, "error": kind, "detail": detail }))
}

skill_sdk::export!(Hostile);
