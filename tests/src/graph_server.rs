//! A scripted Meta Graph API on loopback, for the `whatsapp_send` and `instagram_post`
//! built-ins: the WhatsApp Cloud API's `POST /{version}/{phone_number_id}/messages` and the
//! Instagram Graph API's `POST /{version}/{ig_user_id}/media` (a container) and
//! `POST /{version}/{ig_user_id}/media_publish`, each checking its bearer token and its JSON
//! body as the platform does, and answering success and failure with the platform's bodies
//! (`{"error": {"message", "type", "code", "error_subcode", "fbtrace_id"}}` on failure).

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// One request the server received, as it came.
#[derive(Debug, Clone)]
pub struct GraphRequest {
    /// The path (`/v23.0/{id}/{edge}`).
    pub path: String,
    /// The query string, if any (a token must never be there).
    pub query: Option<String>,
    /// The `Authorization` header.
    pub authorization: Option<String>,
    /// The JSON body (`Null` when it was not JSON).
    pub body: Value,
}

#[derive(Default)]
struct Inner {
    requests: Vec<GraphRequest>,
    /// Messages delivered: (to, body).
    delivered: Vec<(String, String)>,
    /// Containers by id: (image_url, caption, published).
    containers: BTreeMap<String, (String, Option<String>, bool)>,
    /// Media published: (media id, image_url, caption).
    published: Vec<(String, String, Option<String>)>,
    counter: u64,
}

/// The running server; it stops with the test's runtime.
pub struct GraphServer {
    inner: Arc<Mutex<Inner>>,
    port: u16,
}

impl GraphServer {
    /// The access token it accepts.
    pub const TOKEN: &'static str = "EAAGm0PX4ZCpsBO-test-7c41d9";
    /// The API version its paths start with.
    pub const VERSION: &'static str = "v23.0";
    /// The WhatsApp Business phone number's id.
    pub const PHONE_NUMBER_ID: &'static str = "106540352242922";
    /// The Instagram professional account's id.
    pub const IG_USER_ID: &'static str = "17841405822304914";
    /// The one recipient the (test) phone number may message; others get error 131030.
    pub const ALLOWED_RECIPIENT: &'static str = "15551234567";

    /// Serves on a free port of 127.0.0.1.
    pub async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let inner = Arc::new(Mutex::new(Inner::default()));
        let app = Router::new().route("/{version}/{id}/{edge}", axum::routing::any(edge)).with_state(inner.clone());
        tokio::spawn(async move { axum::serve(listener, app).await });
        GraphServer { inner, port }
    }

    /// The `base_url` to configure: `http://127.0.0.1:<port>/v23.0`.
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/{}", self.port, Self::VERSION)
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<GraphRequest> {
        self.inner.lock().unwrap().requests.clone()
    }

    /// The WhatsApp messages delivered: (to, body).
    pub fn delivered(&self) -> Vec<(String, String)> {
        self.inner.lock().unwrap().delivered.clone()
    }

    /// The Instagram media published: (media id, image_url, caption).
    pub fn published(&self) -> Vec<(String, String, Option<String>)> {
        self.inner.lock().unwrap().published.clone()
    }
}

/// A Graph API error answer.
fn error(status: StatusCode, error: Value) -> Response {
    (status, axum::Json(json!({ "error": error }))).into_response()
}

fn invalid_parameter(message: &str) -> Response {
    error(
        StatusCode::BAD_REQUEST,
        json!({"message": message, "type": "OAuthException", "code": 100, "fbtrace_id": "AqParam"}),
    )
}

async fn edge(
    State(inner): State<Arc<Mutex<Inner>>>,
    Path((version, id, edge)): Path<(String, String, String)>,
    uri: Uri,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let authorization = headers.get("authorization").and_then(|v| v.to_str().ok()).map(str::to_owned);
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let request =
        GraphRequest { path: uri.path().to_owned(), query: uri.query().map(str::to_owned), authorization, body };
    let mut inner = inner.lock().unwrap();
    inner.requests.push(request.clone());
    if request.authorization.as_deref() != Some(&format!("Bearer {}", GraphServer::TOKEN)) {
        let message = "Invalid OAuth access token - Cannot parse access token";
        return error(
            StatusCode::BAD_REQUEST,
            json!({"message": message, "type": "OAuthException", "code": 190, "fbtrace_id": "AqAuth"}),
        );
    }
    if version != GraphServer::VERSION {
        return invalid_parameter(&format!("Unknown path components: /{version}"));
    }
    match (id.as_str(), edge.as_str()) {
        (GraphServer::PHONE_NUMBER_ID, "messages") => message(&mut inner, &request.body),
        (GraphServer::IG_USER_ID, "media") => container(&mut inner, &request.body),
        (GraphServer::IG_USER_ID, "media_publish") => publish(&mut inner, &request.body),
        _ => error(
            StatusCode::BAD_REQUEST,
            json!({"message": format!("Unsupported post request. Object with ID '{id}' does not exist, cannot be \
                loaded due to missing permissions, or does not support this operation."),
                "type": "GraphMethodException", "code": 100, "error_subcode": 33, "fbtrace_id": "AqObject"}),
        ),
    }
}

/// The WhatsApp Cloud API's text message.
fn message(inner: &mut Inner, body: &Value) -> Response {
    if body["messaging_product"] != "whatsapp" {
        return invalid_parameter("(#100) The parameter messaging_product is required.");
    }
    if body["type"] != "text" {
        return invalid_parameter("(#100) Param type must be one of {text, image, ...}");
    }
    let (Some(to), Some(text)) = (body["to"].as_str(), body["text"]["body"].as_str()) else {
        return invalid_parameter("(#100) The parameter to and text.body are required.");
    };
    if to != GraphServer::ALLOWED_RECIPIENT {
        return error(
            StatusCode::BAD_REQUEST,
            json!({"message": "(#131030) Recipient phone number not in allowed list", "type": "OAuthException",
                "code": 131030, "error_data": {"messaging_product": "whatsapp",
                "details": "Recipient phone number not in allowed list: Add recipient phone number to recipient list and try again."},
                "fbtrace_id": "AqRecipient"}),
        );
    }
    inner.counter += 1;
    let id = format!("wamid.HBgLMTU1NTEyMzQ1NjcVAgARGBI{:06}", inner.counter);
    inner.delivered.push((to.to_owned(), text.to_owned()));
    axum::Json(
        json!({"messaging_product": "whatsapp", "contacts": [{"input": to, "wa_id": to}], "messages": [{"id": id}]}),
    )
    .into_response()
}

/// The Instagram Graph API's image container: images only, fetched from a public JPEG URL.
fn container(inner: &mut Inner, body: &Value) -> Response {
    if body.get("video_url").is_some() || body.get("media_type").is_some() {
        return invalid_parameter("only image containers are scripted here");
    }
    let Some(image_url) = body["image_url"].as_str() else {
        return invalid_parameter("(#100) The parameter image_url is required.");
    };
    if !(image_url.ends_with(".jpg") || image_url.ends_with(".jpeg")) {
        return error(
            StatusCode::BAD_REQUEST,
            json!({"message": "Only photo or video can be accepted as media type.", "type": "OAuthException",
                "code": 9004, "error_subcode": 2207052, "is_transient": false,
                "error_user_title": "Media download has failed.",
                "error_user_msg": format!("The media could not be fetched from this uri: {image_url}"),
                "fbtrace_id": "AqMedia"}),
        );
    }
    inner.counter += 1;
    let id = format!("1788945556{:07}", inner.counter);
    let caption = body["caption"].as_str().map(str::to_owned);
    inner.containers.insert(id.clone(), (image_url.to_owned(), caption, false));
    axum::Json(json!({ "id": id })).into_response()
}

/// Publishes a container made by this account, once.
fn publish(inner: &mut Inner, body: &Value) -> Response {
    let creation_id = body["creation_id"].as_str().unwrap_or_default().to_owned();
    let Some((image_url, caption, published)) = inner.containers.get_mut(&creation_id) else {
        return invalid_parameter("(#100) Invalid parameter: creation_id");
    };
    if *published {
        return invalid_parameter("(#100) The media container was already published");
    }
    *published = true;
    let (image_url, caption) = (image_url.clone(), caption.clone());
    inner.counter += 1;
    let id = format!("1792023842{:07}", inner.counter);
    inner.published.push((id.clone(), image_url, caption));
    axum::Json(json!({ "id": id })).into_response()
}
