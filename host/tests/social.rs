//! The built-ins that publish, `whatsapp_send` and `instagram_post`, through the real binary:
//! `run --adapter api` with the scripted LLM calling them and a person approving each call on
//! the approval-v1 stream, against the scripted Graph API (`tests/src/graph_server.rs`) over
//! real HTTP on loopback. The token travels only in the `Authorization` header; the bodies are
//! the platforms'; a platform error reaches the model; a host not granted is refused; and the
//! token is in no log line and nothing the model reads.

mod support;

use serde_json::{Value, json};
use skillhost_tests::Workspace;
use skillhost_tests::graph_server::GraphServer;
use skillhost_tests::llm_server::{Answer, LlmServer};
use support::api::ApiProcess;

/// A config with the two built-ins on `base` (their credentials from the environment), and
/// `ig_elsewhere`, an `instagram_post` on `localhost` whose grant names only 127.0.0.1 (and
/// which asks nobody: `human: null`).
fn workspace(base: &str, llm: &str) -> Workspace {
    let ws = Workspace::new();
    let elsewhere = base.replace("127.0.0.1", "localhost");
    let yaml = format!(
        "skills:\n  paths: []\n  builtins: []\n  declared:\n\
         \x20   - {{name: whatsapp_send, skill_type: builtin, config_json: {{access_token: '${{GRAPH_TOKEN}}', phone_number_id: '${{WA_PHONE_ID}}', base_url: '{base}'}}}}\n\
         \x20   - {{name: instagram_post, skill_type: builtin, config_json: {{access_token: '${{GRAPH_TOKEN}}', ig_user_id: '{ig}', base_url: '{base}'}}}}\n\
         \x20   - {{name: ig_elsewhere, skill_type: builtin, human: null, config_json: {{function_name: instagram_post, access_token: '${{GRAPH_TOKEN}}', ig_user_id: '{ig}', base_url: '{elsewhere}'}}}}\n\
         \x20 grants:\n\
         \x20   declared__whatsapp_send: {{http_hosts: ['127.0.0.1']}}\n\
         \x20   declared__instagram_post: {{http_hosts: ['127.0.0.1']}}\n\
         \x20   declared__ig_elsewhere: {{http_hosts: ['127.0.0.1']}}\n\
         state:\n  filesystem: {{path: state}}\nadapter: {{type: api}}\n\
         llm:\n  provider: anthropic\n  model: test-model\n  max_tokens: 500\n  anthropic: {{api_key: test, base_url: '{llm}'}}\n",
        ig = GraphServer::IG_USER_ID,
    );
    std::fs::write(ws.path().join("config.yaml"), yaml).unwrap();
    ws
}

/// The environment the credentials come from, and a verbose log to search for the token.
fn env() -> [(&'static str, &'static str); 3] {
    [("GRAPH_TOKEN", GraphServer::TOKEN), ("WA_PHONE_ID", GraphServer::PHONE_NUMBER_ID), ("RUST_LOG", "debug")]
}

/// The text of the first tool result of request `n`, and whether it is an error.
fn result(llm: &LlmServer, n: usize) -> (String, bool) {
    let results = support::tool_results(llm, n);
    let first = &results[0];
    let text = match &first["content"] {
        Value::String(text) => text.clone(),
        blocks => blocks.as_array().into_iter().flatten().filter_map(|b| b["text"].as_str()).collect(),
    };
    (text, first["is_error"] == json!(true))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn social_builtins_publish_once_approved_and_the_model_reads_the_platforms_errors() {
    let graph = GraphServer::start().await;
    let to = GraphServer::ALLOWED_RECIPIENT;
    let post = json!({"image_url": "https://cdn.example/launch.jpg", "caption": "Launch day"});
    let replies = vec![
        Answer::default()
            .call("w1", "declared__whatsapp_send", json!({"to": to, "text": "Your order shipped."}))
            .into(),
        Answer::default().call("i1", "declared__instagram_post", post).into(),
        Answer::default().call("w2", "declared__whatsapp_send", json!({"to": "15550000000", "text": "Hi"})).into(),
        Answer::default()
            .call("e1", "declared__ig_elsewhere", json!({"image_url": "https://cdn.example/a.jpg"}))
            .into(),
        Answer::text(&["Done."]).into(),
    ];
    let llm = LlmServer::start(replies).await;
    let ws = workspace(&graph.base_url(), &llm.url());
    let api = ApiProcess::start_with(&ws, &env()).await;

    let mut sse = api.stream("tell the customer, then announce the launch", "social").await;
    let (mut asked, mut seen) = (Vec::new(), Vec::new());
    for _ in 0..3 {
        seen.extend(sse.until("approval_requested").await);
        let request = seen.last().unwrap().data.clone();
        assert_eq!(request["level"], "approve", "they publish: asked by default: {request}");
        let id = request["approval_id"].as_str().unwrap();
        assert_eq!(api.decide(id, &json!({"approved": true})).send().await.unwrap().status(), 200);
        asked.push(request["tool_name"].as_str().unwrap().to_owned());
    }
    let rest = sse.rest().await;
    assert!(rest.iter().any(|e| e.kind == "run_completed"), "{rest:#?}");
    assert!(!rest.iter().any(|e| e.kind == "approval_requested"), "`human: null` asks nobody: {rest:#?}");
    assert_eq!(asked, ["declared__whatsapp_send", "declared__instagram_post", "declared__whatsapp_send"]);

    // What the platforms received: the token in the header only, their bodies exactly.
    let requests = graph.requests();
    let paths: Vec<&str> = requests.iter().map(|r| r.path.as_str()).collect();
    let (phone, ig) = (GraphServer::PHONE_NUMBER_ID, GraphServer::IG_USER_ID);
    assert_eq!(
        paths,
        [
            format!("/v23.0/{phone}/messages"),
            format!("/v23.0/{ig}/media"),
            format!("/v23.0/{ig}/media_publish"),
            format!("/v23.0/{phone}/messages"),
        ],
        "the host not granted was never reached"
    );
    for request in &requests {
        assert_eq!(request.authorization.as_deref(), Some(&*format!("Bearer {}", GraphServer::TOKEN)));
        assert_eq!(request.query, None, "nothing in the URL: {request:?}");
    }
    let text =
        json!({"messaging_product": "whatsapp", "to": to, "type": "text", "text": {"body": "Your order shipped."}});
    assert_eq!(requests[0].body, text);
    assert_eq!(requests[1].body, json!({"image_url": "https://cdn.example/launch.jpg", "caption": "Launch day"}));
    let published = graph.published();
    assert_eq!(published.len(), 1);
    assert_eq!(graph.delivered(), [(to.to_owned(), "Your order shipped.".to_owned())]);

    // What the model read after each call.
    let (sent, failed) = result(&llm, 1);
    let sent: Value = serde_json::from_str(&sent).unwrap_or_else(|_| panic!("{sent}"));
    assert!(!failed && sent["message_id"].as_str().is_some_and(|id| id.starts_with("wamid.")), "{sent}");
    let (posted, failed) = result(&llm, 2);
    assert_eq!(serde_json::from_str::<Value>(&posted).unwrap(), json!({"media_id": published[0].0}));
    assert!(!failed);
    let publish: Vec<&String> = requests[2].body.as_object().unwrap().keys().collect();
    assert_eq!(publish, ["creation_id"], "the container, published at once: {:?}", requests[2]);
    let (refused, failed) = result(&llm, 3);
    assert!(failed, "{refused}");
    for part in ["(#131030) Recipient phone number not in allowed list", "code 131030", "fbtrace_id AqRecipient"] {
        assert!(refused.contains(part), "the platform's error reaches the model ({part}): {refused}");
    }
    let (denied, failed) = result(&llm, 4);
    assert!(failed && denied.contains("is not granted") && denied.contains("denied"), "{denied}");

    // The token is nowhere but in the header the platform read.
    let token = GraphServer::TOKEN;
    let log = api.stderr();
    assert!(log.contains("DEBUG"), "the log was verbose: {log}");
    assert!(!log.contains(token), "the token is in the log:\n{log}");
    for n in 0..5 {
        assert!(!llm.body(n).to_string().contains(token), "the model read the token in request {n}");
    }
    let events = format!("{seen:?}{rest:?}");
    assert!(!events.contains(token), "the token is in the stream");
}

/// The records' credentials and keys are checked at load, one problem each; the publishing
/// built-ins ask `approve` unless the record says otherwise.
#[test]
fn social_records_are_checked_at_load() {
    let ws = Workspace::new();
    let yaml = "skills:\n  paths: []\n  builtins: []\n  declared:\n\
        \x20   - {name: whatsapp_send, skill_type: builtin, config_json: {access_token: tok-1, phone_number_id: '123'}}\n\
        \x20   - {name: announce, skill_type: builtin, human: confirm, config_json: {function_name: instagram_post, access_token: tok-1, ig_user_id: '9'}}\n\
        \x20   - {name: no_token, skill_type: builtin, config_json: {function_name: whatsapp_send, phone_number_id: '1'}}\n\
        \x20   - {name: bad_id, skill_type: builtin, config_json: {function_name: instagram_post, access_token: tok-1, ig_user_id: '9/../x'}}\n\
        \x20   - {name: crossed, skill_type: builtin, config_json: {function_name: whatsapp_send, access_token: tok-1, phone_number_id: '1', ig_user_id: '2'}}\n\
        \x20   - {name: search, skill_type: builtin, config_json: {function_name: web_search, access_token: tok-1}}\n\
        state:\n  filesystem: {path: state}\n";
    std::fs::write(ws.path().join("config.yaml"), yaml).unwrap();
    let out = support::skillhost(&ws, &["skill", "list"], "");
    assert!(out.stdout.contains("- declared__whatsapp_send  [builtin, approval: approve, active]"), "{}", out.stdout);
    assert!(out.stdout.contains("- declared__announce  [builtin, approval: confirm, active]"), "{}", out.stdout);
    let out = support::skillhost(&ws, &["skill", "validate"], "");
    assert_eq!(out.code, 1, "{}{}", out.stdout, out.stderr);
    for expected in [
        "skills.declared[2]: config_json.access_token: needed by whatsapp_send",
        "skills.declared[3]: config_json.ig_user_id: `9/../x` is not a Graph API id (digits only)",
        "skills.declared[4]: config_json.ig_user_id: whatsapp_send takes no ig_user_id (only instagram_post)",
        "skills.declared[5]: config_json.access_token: web_search takes no access_token (only whatsapp_send, instagram_post)",
    ] {
        assert!(out.stderr.contains(expected), "{expected}:\n{}", out.stderr);
    }
    assert!(!format!("{}{}", out.stdout, out.stderr).contains("tok-1"), "no token in what the command prints");
}
