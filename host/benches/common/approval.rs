//! One approval-v1 run against `skillhost run --adapter api`, as the `api_load` and `soak`
//! benches make them: the scripted model asks for `probe__echo` (gated by
//! `human.overrides`), the client approves as soon as it is asked.

use crate::support::api::ApiProcess;
use serde_json::{Value, json};
use skillhost_tests::api_client::Sse;
use skillhost_tests::llm_server::{Answer, Reply};
use std::time::{Duration, Instant};

/// The model asks for `probe__echo` once, then answers once it has the tool's result.
pub fn respond(body: &Value) -> Reply {
    let answered = body["messages"].as_array().and_then(|m| m.last()).is_some_and(|last| {
        last["content"].as_array().is_some_and(|blocks| blocks.iter().any(|b| b["type"] == "tool_result"))
    });
    if answered {
        Answer::text(&["Done."]).into()
    } else {
        Answer::text(&["Checking."]).call("c1", "probe__echo", json!({"n": 1})).into()
    }
}

/// One run: open the stream, approve, read to the end; returns the decision latency.
pub async fn run(api: &ApiProcess, i: usize) -> Result<Duration, String> {
    run_deciding_on(api, api, i).await
}

/// [`run`] with the decision sent to `decider` (another replica, say).
pub async fn run_deciding_on(api: &ApiProcess, decider: &ApiProcess, i: usize) -> Result<Duration, String> {
    let opened = api.trigger("wait=1&stream=approval-v1", "go", &format!("load-{i}")).send().await;
    let response = opened.map_err(|e| e.to_string())?;
    if response.status() != 200 {
        return Err(format!("trigger: {}", response.status()));
    }
    let mut sse = Sse::new(response);
    let (mut sent, mut latency) = (None, None);
    while let Some(event) = sse.next().await {
        match event.kind.as_str() {
            "approval_requested" => {
                let id = event.data["approval_id"].as_str().ok_or("no approval id")?.to_owned();
                sent = Some(Instant::now());
                let decision = decider.decide(&id, &json!({"approved": true})).send().await;
                let response = decision.map_err(|e| e.to_string())?;
                let status = response.status();
                let text = response.text().await.unwrap_or_default();
                if status != 200 {
                    return Err(format!("decision: {status} {text}"));
                }
            }
            "approval_resolved" => latency = sent.map(|t| t.elapsed()),
            "run_completed" => return latency.ok_or_else(|| "completed without an approval".to_owned()),
            "run_failed" => return Err(format!("run failed: {}", event.data["error"])),
            _ => {}
        }
    }
    Err("the stream ended without run_completed".into())
}

/// A `/proc/<pid>/status` field in KiB.
pub fn status_kib(pid: &str, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}
