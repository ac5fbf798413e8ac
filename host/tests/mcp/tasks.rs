//! The MCP Tasks extension (`io.modelcontextprotocol/tasks`) through `skillhost mcp`, in raw
//! JSON-RPC lines at 2026-07-28: a tool whose `task-support` allows it becomes a task for a
//! client that declared the extension (and runs in the call for one that did not), polled with
//! `tasks/get`; a call that waits on a person becomes a task whose first input request is the
//! approval, answered with `tasks/update`; `tasks/cancel` stops a running task; unknown tasks
//! and clients without the extension are refused. (`/mcp` of `run` is the conformance suite's,
//! in `conformance.rs`; replicas sharing PostgreSQL are in `broker.rs`.) A module of `mcp.rs`:
//! one test binary less to link.

use super::support;
use serde_json::{Value, json};
use skillhost_tests::{Workspace, guests};
use std::time::{Duration, Instant};
use support::raw::Raw;

/// `probe` with its memory granted (kept in `memory/`), `probe__memory_write` asking for
/// approval.
fn workspace() -> Workspace {
    let ws = Workspace::new();
    ws.add_skill("skills", "probe", guests::PROBE, "[capabilities]\nmemory = true\n");
    let config = "skills:\n  paths: [skills]\n  builtins: []\n  grants:\n    probe: {memory: true}\n\
        learning:\n  approval_auto_promote: 0\n  memory:\n    filesystem: {path: memory}\n\
        state:\n  filesystem: {path: state}\nhuman:\n  overrides:\n    probe__memory_write: approve\n";
    std::fs::write(ws.path().join("config.yaml"), config).unwrap();
    ws
}

/// A request's `_meta` at 2026-07-28 for a client declaring `capabilities`.
fn meta(capabilities: Value) -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    })
}

/// A client that answers forms and polls tasks.
fn tasking() -> Value {
    json!({"elicitation": {"form": {}}, "extensions": {"io.modelcontextprotocol/tasks": {}}})
}

fn request(raw: &mut Raw, method: &str, mut params: Value, capabilities: Value) -> Value {
    params["_meta"] = meta(capabilities);
    raw.request(method, params)
}

fn call(raw: &mut Raw, name: &str, arguments: Value, capabilities: Value) -> Value {
    request(raw, "tools/call", json!({"name": name, "arguments": arguments}), capabilities)
}

fn get(raw: &mut Raw, task: &str) -> Value {
    request(raw, "tasks/get", json!({"taskId": task}), tasking())
}

/// Polls task `task` until its status is `status` (or a final one); its last `tasks/get`.
fn until(raw: &mut Raw, task: &str, status: &str) -> Value {
    let started = Instant::now();
    loop {
        let got = get(raw, task);
        let now = got["result"]["status"].as_str().unwrap_or_default().to_owned();
        if now == status || ["completed", "failed", "cancelled"].contains(&now.as_str()) {
            return got;
        }
        assert!(started.elapsed() < support::PROCESS_LIMIT, "task {task} never got to {status}: {got}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The `taskId` of a `tools/call` answered with a task handle, checked: flat, with its
/// times, a time to live and a poll interval, and `content: []` beside it.
fn task_of(created: &Value) -> String {
    let result = &created["result"];
    assert_eq!(result["resultType"], "task", "{created}");
    assert_eq!(result["status"], "working", "{created}");
    assert!(result["createdAt"].as_str().unwrap().contains('T'), "{created}");
    assert!(result["ttlMs"].as_u64().unwrap() > 0 && result["pollIntervalMs"].as_u64().unwrap() > 0, "{created}");
    assert_eq!(result["content"], json!([]), "{created}");
    result["taskId"].as_str().unwrap().to_owned()
}

fn memory(ws: &Workspace, file: &str) -> String {
    std::fs::read_to_string(ws.path().join("memory").join(file)).unwrap_or_default()
}

#[test]
fn a_tool_that_may_run_as_a_task_does_so_only_for_a_client_that_can_poll_it() {
    let ws = workspace();
    let mut raw = Raw::start(&ws);
    let task = task_of(&call(&mut raw, "probe__task", json!({"ms": 200, "mark": "a"}), tasking()));
    let done = until(&mut raw, &task, "completed");
    assert_eq!(done["result"]["status"], "completed", "{done}");
    assert_eq!(done["result"]["resultType"], "complete", "{done}");
    assert_eq!(done["result"]["result"]["isError"], false, "{done}");
    assert_eq!(done["result"]["result"]["content"][0]["text"], r#"{"ok":true}"#, "the tool's own result: {done}");
    assert_eq!(memory(&ws, "tasks.txt"), "a");

    // A client without the extension gets the result in the call, and no task.
    let plain = call(&mut raw, "probe__task", json!({"ms": 0, "mark": "b"}), json!({}));
    assert!(plain["result"].get("taskId").is_none(), "{plain}");
    assert_eq!(plain["result"]["isError"], false, "{plain}");
    assert_eq!(memory(&ws, "tasks.txt"), "ab");
    // Nor may it read a task.
    let refused = request(&mut raw, "tasks/get", json!({"taskId": task}), json!({}));
    assert_eq!(refused["error"]["code"], -32021, "{refused}");
    // A task nobody made.
    let unknown = get(&mut raw, "no-such-task");
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
}

#[test]
fn a_call_waiting_on_a_person_is_a_task_whose_question_tasks_update_answers() {
    let ws = workspace();
    let mut raw = Raw::start(&ws);
    let write = json!({"path": "runs.txt", "content": "x", "mode": "append"});
    for (answer, ran) in [(true, "x"), (false, "x")] {
        let task = task_of(&call(&mut raw, "probe__memory_write", write.clone(), tasking()));
        let asked = until(&mut raw, &task, "input_required");
        let approval = &asked["result"]["inputRequests"]["approval"];
        assert_eq!(approval["method"], "elicitation/create", "{asked}");
        assert!(approval["params"]["message"].as_str().unwrap().contains("probe__memory_write"), "{asked}");
        assert_eq!(memory(&ws, "runs.txt"), if answer { "" } else { "x" }, "nothing runs before the answer");
        let responses = json!({"approval": {"action": "accept", "content": {"approve": answer}}, "stray": {}});
        let ack = request(&mut raw, "tasks/update", json!({"taskId": task, "inputResponses": responses}), tasking());
        assert_eq!(ack["result"], json!({"resultType": "complete"}), "{ack}");
        let done = until(&mut raw, &task, "completed");
        assert_eq!(done["result"]["status"], "completed", "{done}");
        assert_eq!(done["result"]["result"]["isError"], !answer, "{done}");
        assert_eq!(memory(&ws, "runs.txt"), ran, "ran once, only when approved");
    }
}

#[test]
fn a_cancelled_task_stops_and_stays_cancelled() {
    let ws = workspace();
    let mut raw = Raw::start(&ws);
    let task = task_of(&call(&mut raw, "probe__task", json!({"ms": 3000, "mark": "late"}), tasking()));
    let ack = request(&mut raw, "tasks/cancel", json!({"taskId": task}), tasking());
    assert_eq!(ack["result"], json!({"resultType": "complete"}), "{ack}");
    assert_eq!(get(&mut raw, &task)["result"]["status"], "cancelled");
    // Past the time the tool would have taken, it never finished: the call was stopped.
    std::thread::sleep(Duration::from_millis(3500));
    assert_eq!(get(&mut raw, &task)["result"]["status"], "cancelled");
    assert_eq!(memory(&ws, "tasks.txt"), "", "the cancelled call never went on");
    // Cancelling again (or a final task) is acknowledged the same.
    let again = request(&mut raw, "tasks/cancel", json!({"taskId": task}), tasking());
    assert_eq!(again["result"], json!({"resultType": "complete"}), "{again}");
}

/// The Python SDK (`reader_py`, built with componentize-py): `task_support()` and
/// `skillhost.tasks.detach()`. A client that can poll gets a task, whose result says the tool
/// detached; one that cannot gets the result in the call, where `detach` said no.
#[test]
fn a_python_tool_detaches_into_a_task_only_for_a_client_that_can_poll_it() {
    let ws = Workspace::new();
    ws.add_skill("skills", "reader_py", guests::READER_PY, "");
    let yaml = "skills:\n  paths: [skills]\n  builtins: []\nstate:\n  filesystem: {path: state}\n";
    std::fs::write(ws.path().join("config.yaml"), yaml).unwrap();
    let mut raw = Raw::start(&ws);
    let task = task_of(&call(&mut raw, "reader_py__greet_later", json!({"name": "Ada"}), tasking()));
    let done = until(&mut raw, &task, "completed");
    let text = done["result"]["result"]["content"][0]["text"].as_str().unwrap_or_default().to_owned();
    let said: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {done}"));
    assert_eq!(said, json!({"greeting": "Hello, Ada!", "detached": true}), "{done}");
    let plain = call(&mut raw, "reader_py__greet_later", json!({"name": "Bea"}), json!({}));
    let text = plain["result"]["content"][0]["text"].as_str().unwrap_or_default().to_owned();
    let said: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {plain}"));
    assert_eq!(said, json!({"greeting": "Hello, Bea!", "detached": false}), "{plain}");
}
