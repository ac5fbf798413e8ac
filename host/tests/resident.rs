//! What a hostile skill can make the host keep, measured as the server's resident memory
//! (`VmRSS`) through `skillhost mcp`: memory bombs run 64 at a time leave no more than the
//! sandbox's resident budget behind (`sandbox.resident_mb`, `sandbox.resident_per_skill_mb`),
//! results and HTTP bodies refused for their size leave RSS within 32 MiB of where it
//! was, and millions of empty writes to stdout and stderr leave the peak where it was. The
//! bounds asserted are the budgets the test configures; without them the bombs
//! alone left 2.4 GiB behind on this machine.

mod support;

use serde_json::{Value, json};
use skillhost_tests::{Workspace, guests};
use std::io::{Read, Write};
use std::net::TcpListener;
use support::raw::Raw;

const MIB: u64 = 1 << 20;

/// The server's memory as `/proc/<pid>/status` gives `field` (`VmRSS:`, `VmHWM:`), in bytes.
fn status_bytes(raw: &Raw, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", raw.pid())).unwrap();
    let line = status.lines().find(|l| l.starts_with(field)).unwrap();
    line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 1024
}

/// The server's resident memory, in bytes.
fn rss(raw: &Raw) -> u64 {
    status_bytes(raw, "VmRSS:")
}

/// The `kind` of a tool's error answer (`"ok"` for a success).
fn kind(answer: &Value) -> String {
    let result = &answer["result"];
    if result["isError"] == false {
        return "ok".into();
    }
    let text = result["content"][0]["text"].as_str().unwrap_or_else(|| panic!("{answer}"));
    let error: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"));
    error["kind"].as_str().or(error["error"].as_str()).unwrap_or_else(|| panic!("{error}")).to_owned()
}

/// A workspace serving the hostile guest under `manifest`, with `sandbox` lines in its
/// config, compiled into its cache first so the server starts with every skill ready.
fn serve(manifest: &str, sandbox: &str, extra: impl FnOnce(&Workspace) -> String) -> (Workspace, Raw) {
    let ws = Workspace::new();
    ws.add_skill("skills", "hostile", guests::HOSTILE, manifest);
    let grants = extra(&ws);
    let yaml = format!(
        "skills:\n  paths: [skills]\n  builtins: []\n{grants}sandbox:\n  cache_dir: cache\n{sandbox}state:\n  filesystem: {{path: state}}\n"
    );
    std::fs::write(ws.path().join("config.yaml"), yaml).unwrap();
    let built = support::skillhost(&ws, &["skill", "validate"], "");
    assert_eq!(built.code, 0, "{}", built.stderr);
    let mut raw = Raw::start(&ws);
    raw.initialize("2025-11-25");
    (ws, raw)
}

/// Runs 64 memory bombs at once, twice, and returns how far RSS rose from before the first.
fn bombs_64_at_once(raw: &mut Raw) -> u64 {
    let before = rss(raw);
    for _ in 0..2 {
        let answers = raw.calls_at_once(64, "hostile__hog", json!({}));
        for answer in &answers {
            assert_eq!(kind(answer), "memory_cap", "{answer}");
        }
    }
    let (echo, _) = raw.call("hostile__huge_result", json!({"mb": 0}));
    assert_eq!(kind(&echo), "ok", "the skill still answers: {echo}");
    rss(raw).saturating_sub(before)
}

#[test]
fn memory_bombs_64_at_once_leave_at_most_the_skills_share_resident() {
    let manifest = "[limits]\nmemory_mb = 40\ntimeout_ms = 60_000\n";
    let (ws, mut raw) = serve(manifest, "  resident_mb: 1024\n  resident_per_skill_mb: 96\n", |_| String::new());
    // The operator sees what is in force.
    let listed = support::skillhost(&ws, &["skill", "list"], "");
    assert!(
        listed.stdout.contains("kept resident between calls: at most 1024 MiB in all, 96 MiB per skill"),
        "{}",
        listed.stdout
    );
    let rose = bombs_64_at_once(&mut raw);
    // 64 slots each wrote 40 MiB; the skill's share is 96 MiB. The rest of the margin is
    // the host's own (the 128 answers, the allocator's pages).
    eprintln!("64 bombs at once, twice, with a 96 MiB share: RSS rose {} MiB", rose / MIB);
    assert!(rose <= (96 + 48) * MIB, "RSS rose {} MiB", rose / MIB);
}

#[test]
fn memory_bombs_64_at_once_leave_at_most_the_total_budget_resident() {
    let manifest = "[limits]\nmemory_mb = 40\ntimeout_ms = 60_000\n";
    let (_ws, mut raw) = serve(manifest, "  resident_mb: 64\n  resident_per_skill_mb: 4096\n", |_| String::new());
    let rose = bombs_64_at_once(&mut raw);
    eprintln!("64 bombs at once, twice, with a 64 MiB total: RSS rose {} MiB", rose / MIB);
    assert!(rose <= (64 + 48) * MIB, "RSS rose {} MiB", rose / MIB);
}

/// An HTTP server on loopback whose every response body never ends; its address.
fn endless_body_server() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            std::thread::spawn(move || {
                let mut request = [0u8; 4096];
                let _ = stream.read(&mut request);
                let head = "HTTP/1.1 200 OK\r\ncontent-type: application/octet-stream\r\n\r\n";
                if stream.write_all(head.as_bytes()).is_err() {
                    return;
                }
                let chunk = vec![b'x'; 64 << 10];
                while stream.write_all(&chunk).is_ok() {}
            });
        }
    });
    address
}

#[test]
fn refused_results_and_endless_http_bodies_leave_rss_where_it_was() {
    let server = endless_body_server();
    let manifest = "[limits]\nmemory_mb = 512\nfuel = 50_000_000_000\ntimeout_ms = 60_000\n";
    let (_ws, mut raw) = serve(manifest, "  resident_per_skill_mb: 128\n", |ws| {
        let probe = format!("[capabilities]\nhttp_hosts = [\"{server}\"]\n");
        ws.add_skill("skills", "probe", guests::PROBE, &probe);
        format!("  grants:\n    probe:\n      http_hosts: [\"{server}\"]\n")
    });
    let url = format!("http://{server}/endless");
    // The pages the calls below write in their own memory stay resident up to the skills'
    // shares (memory_bombs_* above): fill those first, so what is measured is the host's.
    for _ in 0..4 {
        for answer in raw.calls_at_once(4, "hostile__huge_result", json!({"mb": 200})) {
            assert_eq!(kind(&answer), "result_too_large", "{answer}");
        }
        let (fetched, _) = raw.call("probe__http_get", json!({"url": url}));
        assert_eq!(kind(&fetched), "too-large", "{fetched}");
    }
    let before = rss(&raw);
    for round in 0..3 {
        // Past what the host copies out of a skill at all: refused before it is copied.
        let (huge, _) = raw.call("hostile__huge_result", json!({"mb": 200}));
        assert_eq!(kind(&huge), "result_too_large", "{huge}");
        let text = huge["result"]["content"][0]["text"].as_str().unwrap();
        assert!(text.contains("more than the 65 MiB the host copies"), "{text}");
        // Within it: copied, measured, refused, and the buffer handed back.
        let (large, _) = raw.call("hostile__huge_result", json!({"mb": 40}));
        assert!(large["result"]["content"][0]["text"].as_str().unwrap().contains("41943040 bytes"), "{large}");
        // A body that never ends: refused at 16 MiB.
        let (fetched, _) = raw.call("probe__http_get", json!({"url": url}));
        assert_eq!(kind(&fetched), "too-large", "{fetched}");
        let now = rss(&raw);
        eprintln!("round {round}: RSS {} MiB, was {} MiB", now / MIB, before / MIB);
        assert!(now <= before + 32 * MIB, "round {round}: RSS {} MiB, was {} MiB", now / MIB, before / MIB);
    }
}

/// A call that fails gives back what it touched: its store is dropped releasing its memory,
/// instead of keeping the pages resident for the next instance as a successful call's are
/// (before: each refused 100 or 200 MiB result left RSS 64 MiB higher, 106 -> 170 -> 234 MiB).
#[test]
fn a_refused_or_failed_call_gives_back_the_memory_it_touched() {
    let manifest = "[limits]\nmemory_mb = 512\nfuel = 50_000_000_000\ntimeout_ms = 60_000\n";
    // The default budgets (1024 MiB in all, 256 MiB per skill), which would keep every one.
    let (_ws, mut raw) = serve(manifest, "", |_| String::new());
    let (first, _) = raw.call("hostile__huge_result", json!({"mb": 0}));
    assert_eq!(kind(&first), "ok", "{first}");
    let before = rss(&raw);
    for round in 0..3 {
        // Past what the host copies (refused before copying), and within it (copied, then
        // refused by the result cap).
        for mb in [100, 200, 40] {
            let (answer, _) = raw.call("hostile__huge_result", json!({"mb": mb}));
            assert_eq!(kind(&answer), "result_too_large", "{answer}");
        }
        let (hog, _) = raw.call("hostile__hog", json!({}));
        assert_eq!(kind(&hog), "memory_cap", "{hog}");
        let now = rss(&raw);
        eprintln!("round {round}: RSS {} MiB, was {} MiB", now / MIB, before / MIB);
        assert!(now <= before + 32 * MIB, "round {round}: RSS {} MiB, was {} MiB", now / MIB, before / MIB);
    }
    let (after, _) = raw.call("hostile__huge_result", json!({"mb": 0}));
    assert_eq!(kind(&after), "ok", "the skill still answers: {after}");
}

/// The server's peak resident memory so far, in bytes.
fn peak(raw: &Raw) -> u64 {
    status_bytes(raw, "VmHWM:")
}

/// GHSA-5m8g-xhq4-4h93: wasmtime-wasi's `AsyncWriteStream` (the default behind a
/// `StdoutStream`) queued every empty write, unbounded, since an empty write costs no budget.
/// The streams a skill can write are stdout and stderr (the HTTP import takes a whole body,
/// never a stream, and refuses one past its size): a byte and then millions of empty writes to
/// each, straight through `wasi:io/streams`, leave the host's peak memory where it was. (Seen
/// failing: with wasmtime-wasi 48.0.8's default adapter in place of our writer and a sink that
/// never takes the first byte, the same call raised the peak by 121 MiB; ours: under 1 MiB.)
#[test]
fn millions_of_empty_writes_to_stdout_and_stderr_keep_nothing() {
    let manifest = "[limits]\nfuel = 50_000_000_000\ntimeout_ms = 120_000\n";
    let (_ws, mut raw) = serve(manifest, "", |_| String::new());
    let (warm, _) = raw.call("hostile__empty_writes", json!({"count": 1}));
    assert_eq!(kind(&warm), "ok", "{warm}");
    let before = peak(&raw);
    let (answer, _) = raw.call("hostile__empty_writes", json!({"count": 2_000_000}));
    assert_eq!(kind(&answer), "ok", "{answer}");
    let rose = peak(&raw).saturating_sub(before);
    eprintln!("4,000,000 empty writes: peak RSS rose {} KiB", rose >> 10);
    assert!(rose < 32 * MIB, "4,000,000 empty writes raised the peak by {} MiB", rose / MIB);
}
