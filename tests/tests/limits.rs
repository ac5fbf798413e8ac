//! Every sandbox limit is hit by a hostile guest and contained: a structured error naming
//! the cause, within the deadline plus a small margin, and the host keeps serving.

use serde_json::json;
use skillhost::sandbox::CallError;
use skillhost::skills::{SkillSet, ToolError};
use skillhost_tests::{Workspace, ctx, guests};
use std::time::{Duration, Instant};

/// Slack on top of a deadline for the yield interval and a loaded 2-core machine.
const MARGIN: Duration = Duration::from_millis(750);

async fn hostile(limits: &str) -> (Workspace, SkillSet) {
    let ws = Workspace::new();
    ws.add_skill("skills", "hostile", guests::HOSTILE, &format!("[limits]\n{limits}\n"));
    ws.add_skill("skills", "probe", guests::PROBE, "");
    let set = ws.load("skills:\n  paths: [skills]\n").await;
    assert!(set.problems.is_empty(), "{:?}", set.problems);
    (ws, set)
}

async fn call(set: &SkillSet, tool: &str, input: serde_json::Value) -> (Result<String, ToolError>, Duration) {
    let (skill, spec) = set.find_tool(tool).unwrap_or_else(|| panic!("no tool {tool}"));
    let started = Instant::now();
    let result = skill.call(&spec.name, &input, &ctx()).await.map(|o| o.value.content);
    (result, started.elapsed())
}

/// After any failure the same skill, and another, still answer.
async fn still_serving(set: &SkillSet) {
    let (echo, _) = call(set, "probe__echo", json!({"x": 1})).await;
    assert_eq!(echo.unwrap(), r#"{"x":1}"#);
    let (result, _) = call(set, "hostile__huge_result", json!({"mb": 0})).await;
    assert_eq!(result.unwrap(), "");
}

#[tokio::test]
async fn fuel_exhaustion_is_named() {
    let (_ws, set) = hostile("fuel = 50_000_000\ntimeout_ms = 60_000").await;
    let (result, elapsed) = call(&set, "hostile__spin", json!({})).await;
    assert_eq!(result, Err(ToolError::Call(CallError::FuelExhausted(50_000_000))));
    assert!(elapsed < Duration::from_secs(10), "{elapsed:?}");
    let message = ToolError::Call(CallError::FuelExhausted(1)).to_model_json();
    assert_eq!(message["kind"], "fuel_exhausted");
    assert!(message["error"].as_str().unwrap().contains("ran out of fuel"));
    still_serving(&set).await;
}

#[tokio::test]
async fn deadline_stops_an_infinite_loop_on_time() {
    let (_ws, set) = hostile("fuel = 50_000_000_000\ntimeout_ms = 300").await;
    let (result, elapsed) = call(&set, "hostile__spin", json!({})).await;
    assert_eq!(result, Err(ToolError::Call(CallError::Deadline(Duration::from_millis(300)))));
    assert!(elapsed < Duration::from_millis(300) + MARGIN, "took {elapsed:?}");
    assert!(elapsed >= Duration::from_millis(300), "stopped early: {elapsed:?}");
    still_serving(&set).await;
}

#[tokio::test]
async fn memory_cap_is_named() {
    let (_ws, set) = hostile("memory_mb = 32\ntimeout_ms = 20_000").await;
    let (result, elapsed) = call(&set, "hostile__hog", json!({})).await;
    assert_eq!(result, Err(ToolError::Call(CallError::MemoryCap(32 << 20))));
    assert!(elapsed < Duration::from_secs(20), "{elapsed:?}");
    still_serving(&set).await;
}

#[tokio::test]
async fn unbounded_recursion_is_contained() {
    let (_ws, set) = hostile("timeout_ms = 5_000").await;
    let (result, elapsed) = call(&set, "hostile__recurse", json!({})).await;
    match result {
        Err(ToolError::Call(CallError::StackOverflow)) => {}
        // Rust's shadow stack lives in linear memory: running off it is an out-of-bounds access.
        Err(ToolError::Call(CallError::Trap(m))) if m.contains("out of bounds") => {}
        other => panic!("unexpected: {other:?}"),
    }
    assert!(elapsed < Duration::from_secs(5) + MARGIN);
    still_serving(&set).await;
}

#[tokio::test]
async fn oversize_result_is_refused() {
    let (_ws, set) = hostile("max_result_bytes = 1_048_576\nmemory_mb = 128").await;
    let (result, _) = call(&set, "hostile__huge_result", json!({"mb": 4})).await;
    let copy_limit = 65 << 20;
    let too_large = CallError::ResultTooLarge { size: Some(4 << 20), limit: 1 << 20, copy_limit };
    assert_eq!(result, Err(ToolError::Call(too_large)));
    let (result, _) = call(&set, "hostile__huge_result", json!({"mb": 1})).await;
    assert_eq!(result.unwrap().len(), 1 << 20, "exactly the limit is allowed");
    still_serving(&set).await;
}

#[tokio::test]
async fn a_result_past_the_host_copy_limit_is_named_as_oversize() {
    // The memory cap lets the guest build 200 MiB; the host copies at most the largest thing a
    // call may hand over (here the 64 MiB memory quota) plus 1 MiB, and refuses the rest
    // before copying it.
    let (_ws, set) = hostile("memory_mb = 512\nfuel = 50_000_000_000\ntimeout_ms = 60_000").await;
    let (result, _) = call(&set, "hostile__huge_result", json!({"mb": 200})).await;
    let error = result.unwrap_err();
    assert_eq!(error, ToolError::Call(CallError::ResultTooLarge { size: None, limit: 1 << 20, copy_limit: 65 << 20 }));
    let message = error.to_model_json();
    assert_eq!(message["kind"], "result_too_large", "{message}");
    assert!(message["error"].as_str().unwrap().contains("more than the 65 MiB the host copies"), "{message}");
    // Handing the host as much through an import is a failed call of that skill, not the host's.
    let (result, _) = call(&set, "hostile__huge_log", json!({"mb": 200})).await;
    match result {
        Err(ToolError::Call(CallError::Trap(m))) => assert!(m.contains("65 MiB to a host function"), "{m}"),
        other => panic!("unexpected: {other:?}"),
    }
    still_serving(&set).await;
}

#[tokio::test]
async fn log_flood_is_capped_not_fatal() {
    let (_ws, set) = hostile("max_log_bytes = 65_536\ntimeout_ms = 30_000").await;
    let (skill, spec) = set.find_tool("hostile__log_flood").unwrap();
    let started = Instant::now();
    let outcome = skill.call(&spec.name, &json!({"count": 100_000}), &ctx()).await.unwrap();
    assert_eq!(outcome.value.content, "done");
    let kept: usize = outcome
        .logs
        .iter()
        .map(|r| r.message.len() + r.fields.iter().map(|(k, v)| k.len() + v.len()).sum::<usize>())
        .sum();
    assert!(kept <= 65_536, "kept {kept} bytes");
    assert!(!outcome.logs.is_empty());
    assert!(outcome.logs_dropped > 90_000, "dropped {}", outcome.logs_dropped);
    assert!(started.elapsed() < Duration::from_secs(30));
}

#[tokio::test]
async fn stdout_flood_is_capped_not_fatal() {
    let (_ws, set) = hostile("max_log_bytes = 10_000\ntimeout_ms = 30_000").await;
    let (skill, spec) = set.find_tool("hostile__stdout_flood").unwrap();
    let outcome = skill.call(&spec.name, &json!({"mb": 8}), &ctx()).await.unwrap();
    assert_eq!(outcome.value.content, "done");
    assert!(outcome.logs.iter().all(|r| r.source == "stdout"));
    let kept: usize = outcome.logs.iter().map(|r| r.message.len()).sum();
    assert!(kept <= 10_000 && kept > 0, "kept {kept}");
    assert!(outcome.logs_dropped > 0);
}

#[tokio::test]
async fn a_panic_is_a_crash_report_with_the_message() {
    let (_ws, set) = hostile("").await;
    let (result, _) = call(&set, "hostile__trap", json!({})).await;
    match result {
        Err(ToolError::Call(CallError::Trap(m))) => assert!(m.contains("panicked on purpose"), "{m}"),
        other => panic!("unexpected: {other:?}"),
    }
    still_serving(&set).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_looping_skill_does_not_slow_other_calls() {
    let (_ws, set) = hostile("fuel = 50_000_000_000\ntimeout_ms = 3_000").await;
    let set = std::sync::Arc::new(set);
    let spinners: Vec<_> = (0..4)
        .map(|_| {
            let set = set.clone();
            tokio::spawn(async move { call(&set, "hostile__spin", json!({})).await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(200)).await;
    // Four CPU-bound guests on two cores: fuel yields keep the runtime responsive.
    for _ in 0..20 {
        let (result, elapsed) = call(&set, "probe__echo", json!({"ok": true})).await;
        assert_eq!(result.unwrap(), r#"{"ok":true}"#);
        assert!(elapsed < Duration::from_secs(1), "echo took {elapsed:?} beside spinning guests");
    }
    for spinner in spinners {
        let (result, elapsed) = spinner.await.unwrap();
        assert!(matches!(result, Err(ToolError::Call(CallError::Deadline(_)))));
        assert!(elapsed < Duration::from_secs(3) + MARGIN, "{elapsed:?}");
    }
}

#[tokio::test]
async fn invalid_input_never_reaches_the_guest() {
    let (_ws, set) = hostile("").await;
    let (result, _) = call(&set, "hostile__huge_result", json!({"mb": "lots"})).await;
    match result {
        Err(ToolError::InvalidInput { tool, problems }) => {
            assert_eq!(tool, "hostile__huge_result");
            assert!(problems.contains("/mb"), "{problems}");
        }
        other => panic!("unexpected: {other:?}"),
    }
    let (skill, _) = set.find_tool("hostile__spin").unwrap();
    let err = skill.call("nope", &json!({}), &ctx()).await.unwrap_err();
    assert_eq!(err.kind(), "unknown_tool");
}
