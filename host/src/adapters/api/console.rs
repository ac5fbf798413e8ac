//! The web console: one dependency-free page (HTML, CSS, JavaScript) embedded in the binary
//! and served at `/`, `/console.css` and `/console.js` on the API port. It signs in with the
//! API token (kept in the tab's session storage) and uses only the public API: the read
//! routes of [`super::read`], `POST /api/trigger` and the decision routes. The assets are
//! open; everything they read is behind the token. A strict content security policy keeps
//! the page from loading or sending anything beyond its own origin.

use axum::Router;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;

const INDEX: &str = include_str!("console/index.html");
const STYLE: &str = include_str!("console/console.css");
const SCRIPT: &str = include_str!("console/console.js");

/// The page's content security policy: its own script and style, requests to its own
/// origin only, no frames, no forms posting elsewhere.
const POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
                      img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

fn asset(kind: &'static str, body: &'static str) -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, kind),
            (header::CONTENT_SECURITY_POLICY, POLICY),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::REFERRER_POLICY, "no-referrer"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
}

/// The console's routes (open: the page itself holds no data).
pub fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/", get(|| async { asset("text/html; charset=utf-8", INDEX) }))
        .route("/console.css", get(|| async { asset("text/css; charset=utf-8", STYLE) }))
        .route("/console.js", get(|| async { asset("text/javascript; charset=utf-8", SCRIPT) }))
}
