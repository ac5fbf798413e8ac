//! AWS Bedrock, two ways (`llm.bedrock.api`):
//!
//! - `converse` (default): the Converse API, `POST {base}/model/{modelId}/converse` on
//!   `https://bedrock-runtime.{region}.amazonaws.com`, signed with SigV4 (service `bedrock`)
//!   from IAM credentials. [`Converse`] is **not streamed**: the whole answer arrives in one
//!   body and its text reaches the sink as a single [`Delta::Text`]. (ConverseStream speaks
//!   the binary AWS event-stream format, which this module does not implement.)
//! - `responses`: OpenAI models through Bedrock's Mantle gateway, which speaks the OpenAI
//!   Responses wire format at `https://bedrock-mantle.{region}.api.aws/v1` with a Bedrock API
//!   key as bearer token: the [`OpenAi`] provider under the name `bedrock`, with the same
//!   `store: false`, encrypted reasoning, `reasoning_effort` and output-token floor.

mod wire;

use super::http;
use super::openai::{self, OpenAi};
use super::{Delta, LlmError, Provider, Request, Response};
use crate::config::BedrockSettings;
use aws_credential_types::Credentials;
use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
use aws_sigv4::sign::v4;
use aws_smithy_runtime_api::client::identity::Identity;
use std::time::SystemTime;

pub use wire::body;

const NAME: &str = "bedrock";
/// Everything but RFC 3986 unreserved characters.
const PATH_SEGMENT: &percent_encoding::AsciiSet =
    &percent_encoding::NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~');
/// The SigV4 service name of the Bedrock runtime.
pub const SIGNING_SERVICE: &str = "bedrock";

/// A setting from the config, else from the environment variable `env` (empty counts as unset).
fn setting(configured: &Option<String>, env: &str) -> Option<String> {
    let configured = configured.clone().filter(|v| !v.is_empty());
    configured.or_else(|| std::env::var(env).ok().filter(|v| !v.is_empty()))
}

fn region(s: &BedrockSettings) -> Result<String, String> {
    setting(&s.region, "AWS_REGION").ok_or_else(|| "llm.bedrock.region is required (or set AWS_REGION)".into())
}

/// The Mantle provider (`api: responses`) from `llm.bedrock`.
pub fn mantle(s: &BedrockSettings) -> Result<OpenAi, String> {
    let key = setting(&s.api_key, "AWS_BEDROCK_API_KEY")
        .ok_or("llm.bedrock.api_key is required for api: responses (or set AWS_BEDROCK_API_KEY)")?;
    let effort = s.reasoning_effort.as_deref().unwrap_or(openai::DEFAULT_EFFORT);
    let effort = openai::check_effort(effort).map_err(|e| format!("llm.bedrock.reasoning_effort: {e}"))?;
    let region = region(s)?;
    let base = match s.base_url.as_deref().filter(|b| !b.is_empty()) {
        Some(base) => base.to_owned(),
        None => format!("https://bedrock-mantle.{region}.api.aws/v1"),
    };
    Ok(OpenAi::new(key, Some(&base), effort).named(NAME))
}

/// IAM credentials for SigV4.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AwsCredentials {
    /// `AKID...`.
    pub access_key_id: String,
    /// The secret.
    pub secret_access_key: String,
    /// The STS session token of temporary credentials.
    pub session_token: Option<String>,
}

/// The Bedrock Converse provider: one non-streamed `converse` call per request.
///
/// Converse has no `tool_choice: none`: with [`super::ToolChoice::None`] the tools stay
/// declared (the history may hold tool blocks, which need them) and any tool call the model
/// still makes is dropped from the answer.
pub struct Converse {
    base: String,
    region: String,
    credentials: AwsCredentials,
}

impl Converse {
    /// A provider for `region` with `credentials`, at `base_url` (default: the region's
    /// `bedrock-runtime` endpoint).
    pub fn new(credentials: AwsCredentials, region: impl Into<String>, base_url: Option<&str>) -> Self {
        let region = region.into();
        let base = match base_url.filter(|b| !b.is_empty()) {
            Some(base) => base.trim_end_matches('/').to_owned(),
            None => format!("https://bedrock-runtime.{region}.amazonaws.com"),
        };
        Converse { base, region, credentials }
    }

    /// The Converse provider from `llm.bedrock` (credentials from config, else the `AWS_*`
    /// environment variables).
    pub fn from_settings(s: &BedrockSettings) -> Result<Self, String> {
        let access_key_id = setting(&s.access_key_id, "AWS_ACCESS_KEY_ID")
            .ok_or("llm.bedrock.access_key_id is required for api: converse (or set AWS_ACCESS_KEY_ID)")?;
        let secret_access_key = setting(&s.secret_access_key, "AWS_SECRET_ACCESS_KEY")
            .ok_or("llm.bedrock.secret_access_key is required for api: converse (or set AWS_SECRET_ACCESS_KEY)")?;
        let session_token = setting(&s.session_token, "AWS_SESSION_TOKEN");
        let credentials = AwsCredentials { access_key_id, secret_access_key, session_token };
        Ok(Converse::new(credentials, region(s)?, s.base_url.as_deref()))
    }

    /// The endpoint for `model`: its id percent-encoded as one path segment, as the AWS SDKs
    /// do (`:` and the `/` of inference-profile ARNs included; unreserved characters kept).
    fn url(&self, model: &str) -> String {
        let id = percent_encoding::utf8_percent_encode(model, PATH_SEGMENT);
        format!("{}/model/{id}/converse", self.base)
    }

    /// The SigV4 headers (`authorization`, `x-amz-date`, `x-amz-security-token`) for a POST
    /// of `payload` to `url` with `content-type: application/json`.
    fn signature(&self, url: &str, payload: &[u8]) -> Result<Vec<(String, String)>, LlmError> {
        let c = &self.credentials;
        let credentials =
            Credentials::new(&c.access_key_id, &c.secret_access_key, c.session_token.clone(), None, "llm.bedrock");
        let identity: Identity = credentials.into();
        let params = v4::SigningParams::builder()
            .identity(&identity)
            .region(&self.region)
            .name(SIGNING_SERVICE)
            .time(SystemTime::now())
            .settings(SigningSettings::default())
            .build()
            .map_err(|e| LlmError::protocol(NAME, format!("SigV4 parameters: {e}")))?
            .into();
        let headers = [("content-type", "application/json")];
        let request = SignableRequest::new("POST", url, headers.into_iter(), SignableBody::Bytes(payload))
            .map_err(|e| LlmError::protocol(NAME, format!("cannot sign the request: {e}")))?;
        let (instructions, _) = sign(request, &params)
            .map_err(|e| LlmError::protocol(NAME, format!("cannot sign the request: {e}")))?
            .into_parts();
        Ok(instructions.headers().map(|(k, v)| (k.to_owned(), v.to_owned())).collect())
    }
}

#[async_trait::async_trait]
impl Provider for Converse {
    fn name(&self) -> &'static str {
        NAME
    }

    async fn complete(&self, req: &Request, sink: &mut (dyn FnMut(Delta) + Send)) -> Result<Response, LlmError> {
        let url = self.url(&req.model);
        let payload = serde_json::to_vec(&body(req)).expect("a JSON value serializes");
        let mut post =
            http::client().post(&url).header("content-type", "application/json").headers(http::trace_headers());
        for (name, value) in self.signature(&url, &payload)? {
            post = post.header(name, value);
        }
        let sent = post.body(payload).send().await;
        let response = sent.map_err(|e| LlmError::transport(NAME, http::error_chain(&e)))?;
        let status = response.status();
        let retry_after = http::retry_after(response.headers());
        let error_type = response.headers().get("x-amzn-errortype").and_then(|v| v.to_str().ok()).map(str::to_owned);
        let text = response.text().await.map_err(|e| LlmError::transport(NAME, http::error_chain(&e)))?;
        if !status.is_success() {
            let mut message = http::error_message(&text);
            // `ThrottlingException:http://internal.amazon.com/coral/...`: the name is enough.
            if let Some(kind) = error_type.as_deref().and_then(|t| t.split(':').next()).filter(|k| !k.is_empty()) {
                message = format!("{kind}: {message}");
            }
            return Err(LlmError::Status { provider: NAME, status: status.as_u16(), message, retry_after });
        }
        let json = http::json(NAME, &text)?;
        let response = wire::response(NAME, &json, req.tool_choice)?;
        let shown = response.text();
        if !shown.is_empty() {
            sink(Delta::Text(shown));
        }
        Ok(response)
    }
}
