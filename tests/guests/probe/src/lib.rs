//! `probe`: reports what a guest can observe and what the host's imports answer. It never
//! traps: a failure is a failed result `{"error": "<WIT case name>", "detail": "..."}` (for
//! std I/O, `"error": "io"`), so tests can assert on the case.
//!
//! Tools: `env`, `args`, `read_file(path)`, `memory_read(path)`,
//! `memory_write(path, content, mode?)`, `memory_search(query)`, `http_get(url)`,
//! `state_set(key, value)`, `state_get(key)`, `state_keys`, `route_set(key, value)`,
//! `route_get(key?)`, `ctx`, `echo` (returns its input unchanged, for benchmarks),
//! `counter` (increments a guest global: a fresh instance per call always answers 1),
//! `spin(rounds)` (CPU-bound work for benchmarks: `rounds` steps of a hash chain) and
//! `mcp_call(server, tool, arguments?)`; `lists_changed` (tells the host its tools changed,
//! the `lists` import) and, when its memory holds `probe_extra_tool.txt`, one more tool named
//! by that file (answering `{"extra": <name>}`), and one named by `PROBE_EXTRA_TOOL` when its
//! environment has it (listed only); `task(ms?, mark?)` (sleeps, then appends
//! `mark` to memory `tasks.txt`; its `task-support` is `optional`: an MCP task for a client
//! that declared the Tasks extension); and the MCP feature tools of [`features`].

mod features;

use skill_sdk::http::HttpError;
use skill_sdk::mcp::McpError;
use skill_sdk::memory::MemoryError;
use skill_sdk::state::StateError;
use skill_sdk::{Context, Error, Skill, Tool, ToolResult, Value, json, mcp, memory, route, state};

struct Probe;

/// Guest memory that would carry over if the host reused instances between calls.
static CALLS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// An object schema whose properties are all strings; `required` lists the mandatory ones.
fn strings(required: &[&str], optional: &[&str]) -> Value {
    let properties: skill_sdk::serde_json::Map<String, Value> =
        required.iter().chain(optional).map(|name| (name.to_string(), json!({ "type": "string" }))).collect();
    json!({ "type": "object", "properties": properties, "required": required })
}

impl Skill for Probe {
    fn tools() -> Vec<Tool> {
        let any_object = json!({ "type": "object" });
        let mut tools = vec![
            Tool::without_input("env", "The environment variables the guest sees."),
            Tool::without_input("args", "The command-line arguments the guest sees."),
            Tool::with_schema("read_file", "Read a file with std::fs.", strings(&["path"], &[])),
            Tool::with_schema("memory_read", "memory.read", strings(&["path"], &[])),
            Tool::with_schema("memory_write", "memory.write", strings(&["path", "content"], &["mode"])),
            Tool::with_schema("memory_search", "memory.search", strings(&["query"], &[])),
            Tool::with_schema("http_get", "http.fetch with GET", strings(&["url"], &[])),
            Tool::with_schema("state_set", "state.set", strings(&["key", "value"], &[])),
            Tool::with_schema("state_get", "state.get", strings(&["key"], &[])),
            Tool::without_input("state_keys", "state.keys"),
            Tool::with_schema("route_set", "route.set-attribute", strings(&["key", "value"], &[])),
            Tool::with_schema("route_get", "The call's route attributes, or one of them.", strings(&[], &["key"])),
            Tool::without_input("ctx", "The whole call context."),
            Tool::with_schema("echo", "Return the input unchanged.", any_object.clone()).title("Echo").read_only(),
            Tool::without_input("counter", "Increment a guest global and return it."),
            Tool::with_schema(
                "spin",
                "CPU-bound work: `rounds` steps of a hash chain.",
                json!({ "type": "object", "properties": { "rounds": { "type": "integer", "minimum": 0 } } }),
            ),
            Tool::with_schema("mcp_call", "mcp.call-tool", {
                let mut schema = strings(&["server", "tool"], &[]);
                schema["properties"]["arguments"] = any_object;
                schema
            }),
        ];
        tools.extend(features::tools());
        tools.push(Tool::without_input("lists_changed", "Tell the host this skill's tools changed."));
        tools.push(Tool::with_schema(
            "task",
            "Sleep `ms` (a task when the MCP client can poll one), then append `mark` to memory `tasks.txt`.",
            json!({ "type": "object", "properties": {
                "ms": { "type": "integer", "minimum": 0, "maximum": 600000 },
                "mark": { "type": "string" },
            } }),
        ));
        // A list that depends on what the skill finds: a tool its memory names, if any, and
        // one its environment names (what a skill reading a secret at describe time shows).
        let named = |name: &str| !name.is_empty() && name.chars().all(|c| c.is_ascii_lowercase() || c == '_');
        if let Ok(Some(extra)) = memory::read(EXTRA_TOOL) {
            let name = extra.trim().to_owned();
            if named(&name) {
                tools.push(Tool::without_input(name, "A tool the skill's memory names."));
            }
        }
        if let Some(name) = std::env::var(EXTRA_TOOL_VARIABLE).ok().filter(|name| named(name.trim())) {
            tools.push(Tool::without_input(name.trim().to_owned(), "A tool the skill's environment names."));
        }
        tools
    }

    fn handle(name: &str, input: Value, ctx: &Context) -> Result<ToolResult, Error> {
        if let Some(result) = features::handle(name, &input) {
            return Ok(result);
        }
        let arg = |field: &str| input[field].as_str().unwrap_or_default().to_owned();
        Ok(match name {
            "echo" => ToolResult::text(input),
            "counter" => {
                ToolResult::ok(json!({ "calls": CALLS.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1 }))
            }
            "spin" => ToolResult::ok(json!({ "hash": spin(input["rounds"].as_u64().unwrap_or(0)) })),
            "env" => ToolResult::ok(json!({ "vars": std::env::vars().collect::<Vec<_>>() })),
            "args" => ToolResult::ok(json!({ "args": std::env::args().collect::<Vec<_>>() })),
            "read_file" => match std::fs::read_to_string(arg("path")) {
                Ok(content) => ToolResult::ok(json!({ "content": content })),
                Err(e) => ToolResult::failed(json!({ "error": "io", "detail": e.to_string() })),
            },
            "memory_read" => answer(memory::read(&arg("path")).map(|c| json!({ "content": c }))),
            "memory_write" => answer(memory_write(&arg("path"), &arg("content"), &arg("mode"))),
            "memory_search" => answer(memory::search(&arg("query")).map(|hits| json!({ "hits": hits }))),
            "http_get" => answer(
                skill_sdk::http::get(&arg("url"))
                    .map(|r| json!({ "status": r.status, "headers": r.headers, "body": r.text() })),
            ),
            "state_set" => answer(state::set(&arg("key"), &arg("value")).map(|()| json!({ "ok": true }))),
            "state_get" => answer(state::get(&arg("key")).map(|v| json!({ "value": v }))),
            "state_keys" => answer(state::keys().map(|keys| json!({ "keys": keys }))),
            "route_set" => {
                route::set(&arg("key"), &arg("value"));
                ToolResult::ok(json!({ "ok": true }))
            }
            "route_get" => match input["key"].as_str() {
                Some(key) => ToolResult::ok(json!({ "value": ctx.route(key) })),
                None => ToolResult::ok(json!({ "route": ctx.routes() })),
            },
            "ctx" => ToolResult::ok(json!({
                "config": ctx.config_value(),
                "channel_id": ctx.channel_id(),
                "user_id": ctx.user_id(),
                "route": ctx.routes(),
                "user_message": ctx.user_message(),
            })),
            "mcp_call" => {
                let arguments = input.get("arguments").cloned().unwrap_or_else(|| json!({}));
                answer(mcp::call_tool(&arg("server"), &arg("tool"), &arguments).map(|text| json!({ "result": text })))
            }
            "task" => {
                std::thread::sleep(std::time::Duration::from_millis(input["ms"].as_u64().unwrap_or(0)));
                match input["mark"].as_str() {
                    Some(mark) => answer(memory_write("tasks.txt", mark, "append")),
                    None => ToolResult::ok(json!({ "slept": input["ms"] })),
                }
            }
            "lists_changed" => {
                skill_sdk::lists::changed(skill_sdk::lists::List::Tools);
                ToolResult::ok(json!({ "told": true }))
            }
            other if memory::read(EXTRA_TOOL).ok().flatten().is_some_and(|e| e.trim() == other) => {
                ToolResult::ok(json!({ "extra": other }))
            }
            _ => return Err(Error::unknown_tool(name)),
        })
    }
}

/// The memory file naming one more tool.
const EXTRA_TOOL: &str = "probe_extra_tool.txt";

/// The environment variable naming one more tool (when granted and asked for).
const EXTRA_TOOL_VARIABLE: &str = "PROBE_EXTRA_TOOL";

/// A hash chain (splitmix64 over a small table) the optimizer cannot fold: real work whose
/// cost grows linearly with `rounds`, touching memory as well as registers.
fn spin(rounds: u64) -> u64 {
    let mut table = [0u64; 256];
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for i in 0..rounds {
        x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        let slot = (z as usize ^ i as usize) & 255;
        table[slot] = table[slot].wrapping_add(z);
        x ^= table[(z >> 56) as usize];
    }
    x
}

fn memory_write(path: &str, content: &str, mode: &str) -> Result<Value, MemoryError> {
    match mode {
        "append" => memory::append(path, content)?,
        _ => memory::write(path, content)?,
    }
    Ok(json!({ "ok": true }))
}

/// A host error's WIT case name and its description.
trait Kind: std::fmt::Display {
    fn kind(&self) -> &'static str;
}

impl Kind for MemoryError {
    fn kind(&self) -> &'static str {
        MemoryError::kind(self)
    }
}

impl Kind for StateError {
    fn kind(&self) -> &'static str {
        StateError::kind(self)
    }
}

impl Kind for HttpError {
    fn kind(&self) -> &'static str {
        HttpError::kind(self)
    }
}

impl Kind for McpError {
    fn kind(&self) -> &'static str {
        McpError::kind(self)
    }
}

fn answer<E: Kind>(outcome: Result<Value, E>) -> ToolResult {
    match outcome {
        Ok(value) => ToolResult::ok(value),
        Err(e) => ToolResult::failed(json!({ "error": e.kind(), "detail": e.to_string() })),
    }
}

/// `task` may run as an MCP task.
impl skill_sdk::TaskSupport for Probe {
    fn tasks() -> Vec<(&'static str, skill_sdk::Task)> {
        vec![("task", skill_sdk::Task::Optional)]
    }
}

/// One family of resources: `notes://{day}-{slot}` (two placeholders, for the hostile-URI
/// test), read back as the URI itself.
impl skill_sdk::Resources for Probe {
    fn resources() -> Vec<skill_sdk::ResourceDef> {
        Vec::new()
    }

    fn templates() -> Vec<skill_sdk::ResourceDef> {
        vec![skill_sdk::ResourceDef::new("notes://{day}-{slot}", "notes").mime_type("text/plain")]
    }

    fn read_resource(uri: &str, _ctx: &Context) -> Result<Vec<skill_sdk::Embedded>, skill_sdk::ReadError> {
        Ok(vec![skill_sdk::Embedded::text(uri, "text/plain", format!("a note at {uri}"))])
    }
}

skill_sdk::export!(Probe, hooks: [task_support, resources]);
