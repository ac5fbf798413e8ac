//! Each provider error class, for every provider: what is retried, what surfaces, and how the
//! error names the provider and the cause.

use super::*;

/// The provider's name as errors show it.
fn name(kind: Kind) -> &'static str {
    match kind {
        Kind::Anthropic => "anthropic",
        Kind::OpenAi => "openai",
        Kind::Chat => "openai_compatible",
    }
}

/// Runs `replies` against each provider with one user message; returns the outcome, the
/// deltas and the number of requests the server saw.
async fn run(kind: Kind, replies: Vec<Reply>) -> (Result<Response, LlmError>, Vec<String>, usize) {
    let server = LlmServer::start(replies).await;
    let (result, deltas) = complete(&*provider(kind, &server), &request(vec![Message::user("hi")])).await;
    (result, deltas, server.requests().len())
}

fn ok() -> Reply {
    Answer::text(&["fine"]).into()
}

#[tokio::test]
async fn unauthorized_is_not_retried_and_names_provider_and_status() {
    for kind in KINDS {
        let (result, _, requests) = run(kind, vec![Reply::error(401, "invalid x-api-key"), ok()]).await;
        let error = result.unwrap_err();
        assert_eq!(error.status(), Some(401), "{kind:?}");
        assert_eq!(requests, 1, "{kind:?}: a 401 is never retried");
        let text = error.to_string();
        assert!(text.starts_with(&format!("{}: HTTP 401", name(kind))), "{text}");
        assert!(text.contains("invalid x-api-key"), "{text}");
    }
}

#[tokio::test]
async fn rate_limit_waits_for_retry_after_then_succeeds() {
    let runs = KINDS.map(|kind| async move {
        let started = Instant::now();
        let (result, _, requests) = run(kind, vec![Reply::rate_limited(1), ok()]).await;
        assert_eq!(result.unwrap_or_else(|e| panic!("{kind:?}: {e}")).text(), "fine");
        assert_eq!(requests, 2, "{kind:?}");
        assert!(started.elapsed() >= Duration::from_secs(1), "{kind:?}: retry-after: 1 was not honoured");
    });
    futures::future::join_all(runs).await;
}

#[tokio::test]
async fn server_errors_are_retried_then_surfaced() {
    for kind in KINDS {
        let replies = vec![
            Reply::error(500, "internal"),
            Reply::error(503, "busy"),
            Reply::error(500, "internal"),
            Reply::error(500, "still"),
            ok(),
        ];
        let (result, _, requests) = run(kind, replies).await;
        let error = result.unwrap_err();
        assert_eq!(requests, 4, "{kind:?}: the first attempt and 3 retries");
        assert_eq!(error.status(), Some(500), "{kind:?}");
        assert!(error.to_string().contains("still"), "{error}");
    }
}

#[tokio::test]
async fn a_server_error_then_success_is_transparent() {
    for kind in KINDS {
        let (result, deltas, requests) = run(kind, vec![Reply::error(529, "overloaded"), ok()]).await;
        assert_eq!(result.unwrap().text(), "fine", "{kind:?}");
        assert_eq!((deltas.len(), requests), (1, 2), "{kind:?}");
    }
}

#[tokio::test]
async fn a_malformed_stream_is_a_protocol_error_not_retried() {
    for kind in KINDS {
        let (result, _, requests) = run(kind, vec![Reply::Malformed, ok()]).await;
        let error = result.unwrap_err();
        assert!(matches!(error, LlmError::Protocol { .. }), "{kind:?}: {error}");
        assert_eq!(error.provider(), name(kind));
        assert_eq!(requests, 1, "{kind:?}");
    }
}

#[tokio::test]
async fn a_connection_dropped_before_any_text_is_retried() {
    for kind in KINDS {
        let (result, deltas, requests) = run(kind, vec![Reply::Drop(vec![]), ok()]).await;
        assert_eq!(result.unwrap_or_else(|e| panic!("{kind:?}: {e}")).text(), "fine");
        assert_eq!((deltas, requests), (vec!["fine".to_string()], 2), "{kind:?}");
    }
}

#[tokio::test]
async fn a_connection_dropped_after_text_surfaces_without_retry() {
    for kind in KINDS {
        let (result, deltas, requests) = run(kind, vec![Reply::Drop(vec!["par".into()]), ok()]).await;
        let error = result.unwrap_err();
        assert!(matches!(error, LlmError::Transport { .. }), "{kind:?}: {error}");
        assert_eq!(deltas, ["par"], "{kind:?}");
        assert_eq!(requests, 1, "{kind:?}: the person already saw text; a retry would splice two answers");
    }
}

#[tokio::test]
async fn a_refused_connection_is_a_transport_error_naming_the_provider() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let url = format!("http://127.0.0.1:{port}");
    let provider = Retrying::new(Anthropic::new("k", Some(&url)), policy());
    let error = complete(&provider, &request(vec![Message::user("hi")])).await.0.unwrap_err();
    assert!(matches!(error, LlmError::Transport { .. }), "{error}");
    assert!(error.to_string().starts_with("anthropic: connection failed"), "{error}");
}
