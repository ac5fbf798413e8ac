//! The MCP server's features through the real binary, with the `probe` guest built from
//! source: logging (`logging/setLevel`, skill `log` records as `notifications/message`),
//! progress (`report-progress` as `notifications/progress`), resources (a skill's prompt and
//! reference files), typed results (`image`, `resource_link`, `structuredContent`), and
//! `tools/list`'s `outputSchema` and `annotations`. Over stdio with a raw JSON-RPC client,
//! and over `/mcp`.

mod support;

use base64::Engine as _;
use serde_json::{Value, json};
use skillhost_tests::{Workspace, guests};
use std::process::{Command, Stdio};
use std::time::Duration;
use support::raw::Raw;

/// What the workspace's files outside the skill folder hold (never served).
const OUTSIDE: &str = "outside the skill folder";

/// `probe`, and `guide`: a prompt-only `SKILL.md` skill with reference files, a symlink out
/// of its folder among them. `probe__counter` needs approval (an operator override).
fn workspace() -> Workspace {
    let ws = Workspace::new();
    ws.add_skill("skills", "probe", guests::PROBE, "");
    let guide = ws.path().join("skills/guide");
    std::fs::create_dir_all(guide.join("references")).unwrap();
    std::fs::write(guide.join("SKILL.md"), "---\nname: guide\ndescription: How to read the guide.\n---\nRead it.\n")
        .unwrap();
    std::fs::write(guide.join("references/howto.md"), "# How to\n").unwrap();
    std::fs::write(guide.join("references/pixel.png"), [0x89, b'P', b'N', b'G', 0, 0xff]).unwrap();
    std::fs::write(ws.path().join("secret.txt"), OUTSIDE).unwrap();
    std::os::unix::fs::symlink(ws.path().join("secret.txt"), guide.join("references/leak.md")).unwrap();
    // The LLM is never asked (`run --adapter api` needs one configured; MCP calls no model).
    let config = "skills:\n  paths: [skills]\n  builtins: []\nstate:\n  filesystem: {path: state}\n\
                  human:\n  overrides:\n    probe__counter: approve\n\
                  llm:\n  provider: openai_compatible\n  openai_compatible:\n    base_url: http://127.0.0.1:9/v1\n";
    std::fs::write(ws.path().join("config.yaml"), config).unwrap();
    ws
}

/// `skillhost mcp` after the handshake, which must offer logging and resources.
fn started(ws: &Workspace) -> Raw {
    let mut raw = Raw::start(ws);
    let init = raw.initialize("2025-11-25");
    assert!(init["result"]["capabilities"]["logging"].is_object(), "{init}");
    assert!(init["result"]["capabilities"]["resources"].is_object(), "{init}");
    // `skillhost mcp` answers while the skill compiles (its lists grow when it joins): wait
    // for it, as a client that heard `list_changed` would.
    let started = std::time::Instant::now();
    loop {
        let (tools, _) = raw.exchange("tools/list", json!({}));
        if tools.to_string().contains("probe__echo") {
            break raw;
        }
        assert!(started.elapsed() < std::time::Duration::from_secs(120), "probe never joined: {tools}");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// The `params` of the notifications called `method`.
fn of(notes: &[Value], method: &str) -> Vec<Value> {
    notes.iter().filter(|n| n["method"] == method).map(|n| n["params"].clone()).collect()
}

fn levels(notes: &[Value]) -> Vec<String> {
    of(notes, "notifications/message").iter().map(|p| p["level"].as_str().unwrap().to_owned()).collect()
}

#[test]
fn skill_logs_reach_the_client_at_or_above_its_level_without_secrets() {
    let ws = workspace();
    let mut mcp = started(&ws);
    let (response, notes) = mcp.call("probe__log_levels", json!({}));
    assert_eq!(response["result"]["isError"], false, "{response}");
    // `info` until the client sets a level; logger = the skill; credential fields redacted.
    assert_eq!(levels(&notes), ["info", "warning", "error"], "{notes:?}");
    let info = &of(&notes, "notifications/message")[0];
    assert_eq!(info["logger"], "probe");
    assert_eq!(
        info["data"],
        json!({"message": "checked", "fields": {"url": "https://example.com", "api_token": "[redacted]"}})
    );

    let (set, _) = mcp.exchange("logging/setLevel", json!({"level": "debug"}));
    assert_eq!(set["result"], json!({}), "{set}");
    let (_, notes) = mcp.call("probe__log_levels", json!({}));
    assert_eq!(levels(&notes), ["debug", "info", "warning", "error"]);
    mcp.exchange("logging/setLevel", json!({"level": "error"}));
    let (_, notes) = mcp.call("probe__log_levels", json!({}));
    assert_eq!(levels(&notes), ["error"]);
    let (bad, _) = mcp.exchange("logging/setLevel", json!({"level": "loud"}));
    assert_eq!(bad["error"]["code"], -32602, "{bad}");
}

#[test]
fn progress_reaches_a_client_that_sent_a_token_rate_limited_and_nobody_else() {
    let ws = workspace();
    let mut mcp = started(&ws);
    let with_token = |steps: u64, pause_ms: u64| json!({"name": "probe__progress", "arguments": {"steps": steps, "pause_ms": pause_ms}, "_meta": {"progressToken": "p-1"}});
    let (response, notes) = mcp.exchange("tools/call", with_token(3, 60));
    assert_eq!(response["result"]["isError"], false, "{response}");
    let progress = of(&notes, "notifications/progress");
    let seen: Vec<(f64, f64)> =
        progress.iter().map(|p| (p["progress"].as_f64().unwrap(), p["total"].as_f64().unwrap())).collect();
    assert_eq!(seen, [(1.0, 3.0), (2.0, 3.0), (3.0, 3.0)], "{notes:?}");
    assert!(progress.iter().all(|p| p["progressToken"] == "p-1"));
    assert_eq!(progress[1]["message"], "step 2");

    // 200 reports at once: at most one per 50 ms goes, and the last always does.
    let (_, notes) = mcp.exchange("tools/call", with_token(200, 0));
    let progress = of(&notes, "notifications/progress");
    assert!(progress.len() < 50, "{} notes", progress.len());
    assert_eq!(progress.last().unwrap()["progress"], 200.0);

    let (response, notes) = mcp.call("probe__progress", json!({"steps": 3, "pause_ms": 60}));
    assert_eq!(response["result"]["isError"], false);
    assert!(of(&notes, "notifications/progress").is_empty(), "no token, no progress: {notes:?}");
}

#[test]
fn typed_content_structured_results_and_tool_annotations() {
    let ws = workspace();
    let mut mcp = started(&ws);
    let (list, _) = mcp.exchange("tools/list", json!({}));
    let tools = list["result"]["tools"].as_array().unwrap();
    let tool =
        |name: &str| tools.iter().find(|t| t["name"] == name).unwrap_or_else(|| panic!("{name}: {list}")).clone();
    let structured = tool("probe__structured");
    assert_eq!(structured["outputSchema"]["required"], json!(["sum"]));
    assert_eq!(
        structured["annotations"],
        json!({"readOnlyHint": true, "idempotentHint": true, "openWorldHint": false})
    );
    assert_eq!(tool("probe__echo")["annotations"], json!({"title": "Echo", "readOnlyHint": true}));
    // Gated by the operator: said in the title and hinted destructive.
    let counter = tool("probe__counter");
    assert_eq!(counter["annotations"]["title"], "counter (asks a person to approve each call)");
    assert_eq!(counter["annotations"]["destructiveHint"], true);
    assert!(tool("probe__env").get("annotations").is_none() && tool("probe__env").get("outputSchema").is_none());

    let (picture, _) = mcp.call("probe__picture", json!({}));
    let content = picture["result"]["content"].as_array().unwrap();
    let kinds: Vec<&str> = content.iter().map(|c| c["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["text", "image", "resource_link"], "{picture}");
    assert_eq!(content[0]["text"], "a red pixel");
    assert_eq!(content[1]["mimeType"], "image/png");
    let png = base64::engine::general_purpose::STANDARD.decode(content[1]["data"].as_str().unwrap()).unwrap();
    assert!(png.starts_with(b"\x89PNG") && png.len() == 69);
    assert_eq!(
        (content[2]["uri"].clone(), content[2]["name"].clone()),
        (json!("skill://probe/prompt.md"), json!("prompt.md"))
    );

    // Audio and embedded resources travel through the `blocks` import, in order after the text.
    let (recording, _) = mcp.call("probe__recording", json!({"bytes": 16}));
    let content = recording["result"]["content"].as_array().unwrap();
    let kinds: Vec<&str> = content.iter().map(|c| c["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["text", "audio", "resource", "resource"], "{recording}");
    let audio = base64::engine::general_purpose::STANDARD.decode(content[1]["data"].as_str().unwrap()).unwrap();
    assert_eq!((audio, &content[1]["mimeType"]), (vec![128; 16], &json!("audio/wav")));
    assert_eq!(
        content[2]["resource"],
        json!({"uri": "skill://probe/notes.txt", "mimeType": "text/plain", "text": "notes"})
    );
    assert_eq!(content[3]["resource"], json!({"uri": "skill://probe/raw.bin", "blob": "AQID"}));
    // They count in the result's size cap (1 MiB by default).
    let (large, _) = mcp.call("probe__recording", json!({"bytes": 2_000_000}));
    assert_eq!(large["result"]["isError"], true, "{large}");
    assert!(large["result"]["content"][0]["text"].as_str().unwrap().contains("result_too_large"), "{large}");

    let (sum, _) = mcp.call("probe__structured", json!({}));
    assert_eq!(sum["result"]["structuredContent"], json!({"sum": 3}), "{sum}");
    let texts: Vec<&str> =
        sum["result"]["content"].as_array().unwrap().iter().map(|c| c["text"].as_str().unwrap()).collect();
    assert_eq!(texts, ["1 + 2", "{\"sum\":3}"]);
    let (broken, _) = mcp.call("probe__structured", json!({"broken": true}));
    assert_eq!(broken["result"]["isError"], true, "{broken}");
    assert!(broken["result"]["content"][0]["text"].as_str().unwrap().contains("output schema"));
    assert!(broken["result"].get("structuredContent").is_none());
}

#[test]
fn the_model_reads_placeholders_for_images_audio_and_bytes_and_an_embedded_text() {
    let ws = workspace();
    let out = Command::new(env!("CARGO_BIN_EXE_skillhost"))
        .args(["--config", "config.yaml", "call", "probe__picture", "{}"])
        .current_dir(ws.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        stdout.contains("a red pixel\n[image: image/png, 69 bytes]\n[resource: prompt.md <skill://probe/prompt.md>]"),
        "{stdout}"
    );
    let out = Command::new(env!("CARGO_BIN_EXE_skillhost"))
        .args(["--config", "config.yaml", "call", "probe__recording", "{}"])
        .current_dir(ws.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let read = "a recording\n[audio: audio/wav, 16 bytes]\n[resource <skill://probe/notes.txt>]\nnotes\n\
                [resource <skill://probe/raw.bin>: bytes, 3 bytes]";
    assert!(stdout.contains(read), "{stdout}");
}

#[test]
fn prompts_and_reference_files_are_read_only_resources_confined_to_the_skill() {
    let ws = workspace();
    let mut mcp = started(&ws);
    let (list, _) = mcp.exchange("resources/list", json!({}));
    let uris: Vec<&str> =
        list["result"]["resources"].as_array().unwrap().iter().map(|r| r["uri"].as_str().unwrap()).collect();
    // The symlink out of the folder is not listed; `probe`, whose prompt is a `prompt.md`, is
    // also an Agent Skill of the Skills extension, with a `SKILL.md` made for it.
    assert_eq!(
        uris,
        [
            "skill://guide/SKILL.md",
            "skill://guide/references/howto.md",
            "skill://guide/references/pixel.png",
            "skill://probe/SKILL.md",
            "skill://probe/prompt.md"
        ],
        "{list}"
    );
    let read = |mcp: &mut Raw, uri: &str| mcp.exchange("resources/read", json!({"uri": uri})).0;
    // The same skills through the Skills extension over stdio: each file with its digest.
    let (skills, _) = mcp.exchange("skills/list", json!({}));
    let guide = &skills["result"]["skills"][0];
    assert_eq!(
        (guide["uri"].as_str(), guide["resources"].as_array().map(Vec::len)),
        (Some("skill://guide/SKILL.md"), Some(3)),
        "{skills}"
    );
    assert!(guide["resources"][1]["digest"].as_str().unwrap().starts_with("sha256:"), "{skills}");
    let (unknown, _) = mcp.exchange("skills/get", json!({"uri": "skill://nope/SKILL.md"}));
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    let howto = read(&mut mcp, "skill://guide/references/howto.md");
    assert_eq!(
        howto["result"]["contents"],
        json!([{"uri": "skill://guide/references/howto.md", "mimeType": "text/markdown", "text": "# How to\n"}])
    );
    let pixel = &read(&mut mcp, "skill://guide/references/pixel.png")["result"]["contents"][0];
    assert_eq!((pixel["mimeType"].clone(), pixel.get("text")), (json!("image/png"), None));
    let bytes = base64::engine::general_purpose::STANDARD.decode(pixel["blob"].as_str().unwrap()).unwrap();
    assert_eq!(bytes, [0x89, b'P', b'N', b'G', 0, 0xff]);
    assert!(
        read(&mut mcp, "skill://probe/prompt.md")["result"]["contents"][0]["text"].as_str().unwrap().contains("probe")
    );

    for uri in [
        "skill://guide/references/leak.md",
        "skill://guide/../secret.txt",
        "skill://guide/skill.toml",
        "file:///etc/passwd",
        "skill://nope/SKILL.md",
    ] {
        let refused = read(&mut mcp, uri);
        assert_eq!(refused["error"]["code"], -32002, "{uri}: {refused}");
    }
    // A file swapped for a symlink out of the folder after the load: an Agent Skill's file
    // is answered from its skill set's catalog (built once, its digests as listed), never
    // through the link; another skill's file read from disk is refused.
    let howto = ws.path().join("skills/guide/references/howto.md");
    std::fs::remove_file(&howto).unwrap();
    std::os::unix::fs::symlink(ws.path().join("secret.txt"), &howto).unwrap();
    let swapped = read(&mut mcp, "skill://guide/references/howto.md");
    assert_eq!(swapped["result"]["contents"][0]["text"], "# How to\n", "{swapped}");
    assert!(!swapped.to_string().contains(OUTSIDE));
    let prompt = ws.path().join("skills/probe/prompt.md");
    std::fs::remove_file(&prompt).unwrap();
    std::os::unix::fs::symlink(ws.path().join("secret.txt"), &prompt).unwrap();
    let swapped = read(&mut mcp, "skill://probe/prompt.md");
    assert!(swapped["error"]["message"].as_str().unwrap().contains("leaves the skill's folder"), "{swapped}");
    assert!(!swapped.to_string().contains(OUTSIDE));
}

/// Over `/mcp` (streamable HTTP): the log level and records, progress on the call's own
/// stream, the typed result and resources, through `skillhost run --adapter api`.
#[test]
fn the_features_are_served_over_http_too() {
    let ws = workspace();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_skillhost"))
        .current_dir(ws.path())
        .args(["--config", "config.yaml", "run", "--adapter", "api"])
        .env("SKILLHOST_UI_PORT", port.to_string())
        .env_remove("SKILLHOST_UI_TOKEN")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(http_session(port));
    let _ = child.kill();
    let _ = child.wait();
}

async fn http_session(port: u16) {
    let client = reqwest::Client::new();
    let url = format!("http://127.0.0.1:{port}/mcp");
    for _ in 0..1200 {
        let ready = client.get(format!("http://127.0.0.1:{port}/readyz")).send().await;
        if ready.is_ok_and(|r| r.status() == 200) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let post = |session: Option<String>, body: Value| {
        let request = client
            .post(&url)
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-11-25")
            .json(&body);
        let request = match session {
            Some(id) => request.header("mcp-session-id", id),
            None => request,
        };
        async move { request.send().await.unwrap() }
    };
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "http", "version": "0"}}});
    let response = post(None, init).await;
    let session = response.headers()["mcp-session-id"].to_str().unwrap().to_owned();
    let messages = sse_messages(&response.text().await.unwrap());
    assert!(messages[0]["result"]["capabilities"]["logging"].is_object(), "{messages:?}");
    post(Some(session.clone()), json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await;
    let request =
        |id: u64, method: &str, params: Value| json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});

    let set = sse_messages(
        &post(Some(session.clone()), request(2, "logging/setLevel", json!({"level": "debug"})))
            .await
            .text()
            .await
            .unwrap(),
    );
    assert_eq!(set.last().unwrap()["result"], json!({}), "{set:?}");
    // Log records ride the session's standalone stream (rmcp routes only progress to the call's).
    let mut stream = client
        .get(&url)
        .header("accept", "text/event-stream")
        .header("mcp-protocol-version", "2025-11-25")
        .header("mcp-session-id", &session)
        .send()
        .await
        .unwrap();
    post(Some(session.clone()), request(9, "tools/call", json!({"name": "probe__log_levels", "arguments": {}}))).await;
    let mut seen = String::new();
    while sse_messages(&seen).len() < 4 {
        let chunk = tokio::time::timeout(Duration::from_secs(20), stream.chunk()).await.expect("logs within 20 s");
        seen.push_str(&String::from_utf8_lossy(&chunk.unwrap().expect("the stream stays open")));
    }
    assert_eq!(levels(&sse_messages(&seen)), ["debug", "info", "warning", "error"], "{seen}");
    let call = request(
        3,
        "tools/call",
        json!({"name": "probe__progress", "arguments": {"steps": 3, "pause_ms": 60}, "_meta": {"progressToken": 7}}),
    );
    let messages = sse_messages(&post(Some(session.clone()), call).await.text().await.unwrap());
    let progress: Vec<f64> =
        of(&messages, "notifications/progress").iter().map(|p| p["progress"].as_f64().unwrap()).collect();
    assert_eq!(progress, [1.0, 2.0, 3.0], "{messages:?}");
    assert_eq!(messages.last().unwrap()["id"], 3);

    let picture = request(4, "tools/call", json!({"name": "probe__picture", "arguments": {}}));
    let messages = sse_messages(&post(Some(session.clone()), picture).await.text().await.unwrap());
    assert_eq!(messages.last().unwrap()["result"]["content"][1]["type"], "image", "{messages:?}");
    let read = request(5, "resources/read", json!({"uri": "skill://guide/references/howto.md"}));
    let messages = sse_messages(&post(Some(session.clone()), read).await.text().await.unwrap());
    assert_eq!(messages.last().unwrap()["result"]["contents"][0]["text"], "# How to\n", "{messages:?}");

    // The probe's template `notes://{day}-{slot}` serves its resources, and a hostile URI
    // of nearly 4 MiB against it (a backtracking matcher's quadratic case per placeholder) is
    // answered, not found, while the server goes on answering; nothing waits on it.
    let note = request(6, "resources/read", json!({"uri": "notes://monday-9"}));
    let messages = sse_messages(&post(Some(session.clone()), note).await.text().await.unwrap());
    assert_eq!(messages.last().unwrap()["result"]["contents"][0]["text"], "a note at notes://monday-9", "{messages:?}");
    let hostile = format!("notes://{}/", "a-".repeat(1_900_000));
    let read = post(Some(session), request(7, "resources/read", json!({"uri": hostile})));
    let ready = async {
        let readyz = client.get(format!("http://127.0.0.1:{port}/readyz")).send().await.unwrap();
        assert_eq!(readyz.status(), 200, "the server answers beside the read");
    };
    let (answer, ()) = tokio::join!(read, ready);
    let messages = sse_messages(&answer.text().await.unwrap());
    let error = &messages.last().unwrap()["error"];
    assert!(error["message"].as_str().is_some_and(|m| m.contains("not found") || m.contains("notes://")), "{error}");
}

/// The JSON-RPC messages of an SSE body (or of a plain JSON one).
fn sse_messages(body: &str) -> Vec<Value> {
    if let Ok(value) = serde_json::from_str::<Value>(body) {
        return vec![value];
    }
    body.lines().filter_map(|l| l.strip_prefix("data:")).filter_map(|d| serde_json::from_str(d.trim()).ok()).collect()
}
