//! `whatsapp_send` and `instagram_post`: clients of Meta's Graph API.
//!
//! - WhatsApp Cloud API: `POST {base_url}/{phone_number_id}/messages` with
//!   `{"messaging_product": "whatsapp", "to", "type": "text", "text": {"body"}}`; the result is
//!   `{"message_id"}`, the platform's `messages[0].id`.
//! - Instagram Graph API: `POST {base_url}/{ig_user_id}/media` with `{image_url, caption}` (a
//!   media container), then at once `POST {base_url}/{ig_user_id}/media_publish` with
//!   `{"creation_id"}`; the result is `{"media_id"}`. Images only.
//!
//! Every request goes through the `http` records' discipline: the host must be granted
//! (`skills.grants.declared__<name>.http_hosts`), redirects only on the same origin, the body
//! read up to the result cap. The token travels only in `Authorization: Bearer` (which
//! reqwest marks sensitive), never in a URL; a Graph API error
//! (`{"error": {"message", "type", "code", "error_subcode", "fbtrace_id"}}`) reaches the model
//! as its message and codes, with the token cut out of any text that would echo it.

use super::{DeclaredTools, Failure, client};
use crate::skills::declared::{DEFAULT_TIMEOUT, GraphAccount};
use serde_json::{Value, json};

const WHATSAPP: &str = "the WhatsApp Cloud API";
const INSTAGRAM: &str = "the Instagram Graph API";

impl DeclaredTools {
    /// A text message to `to`, from the account's phone number.
    pub(super) async fn whatsapp_send(
        &self,
        name: &str,
        account: &GraphAccount,
        input: &Value,
    ) -> Result<Value, Failure> {
        let (to, text) = (input["to"].as_str().unwrap_or_default(), input["text"].as_str().unwrap_or_default());
        let body = json!({"messaging_product": "whatsapp", "to": to, "type": "text", "text": {"body": text}});
        let answer = self.graph(name, account, "messages", &body, WHATSAPP).await?;
        let id = answer["messages"][0]["id"].as_str().ok_or_else(|| missing(WHATSAPP, "messages[0].id"))?;
        Ok(json!({"message_id": id}))
    }

    /// An image post: the container, then its publication.
    pub(super) async fn instagram_post(
        &self,
        name: &str,
        account: &GraphAccount,
        input: &Value,
    ) -> Result<Value, Failure> {
        let image_url = input["image_url"].as_str().unwrap_or_default();
        let public = url::Url::parse(image_url).is_ok_and(|u| matches!(u.scheme(), "http" | "https") && u.has_host());
        if !public {
            return Err((format!("image_url `{image_url}` is not an http(s) URL"), "invalid_input"));
        }
        let mut body = json!({"image_url": image_url});
        if let Some(caption) = input["caption"].as_str() {
            body["caption"] = json!(caption);
        }
        let container = self.graph(name, account, "media", &body, INSTAGRAM).await?;
        let creation_id = container["id"].as_str().ok_or_else(|| missing(INSTAGRAM, "id"))?;
        let publish = json!({"creation_id": creation_id});
        let published =
            self.graph(name, account, "media_publish", &publish, INSTAGRAM).await.map_err(|(why, kind)| {
                (format!("the media container {creation_id} was created but not published: {why}"), kind)
            })?;
        let id = published["id"].as_str().ok_or_else(|| missing(INSTAGRAM, "id"))?;
        Ok(json!({"media_id": id}))
    }

    /// `POST {base_url}/{id}/{edge}` with `body`: the platform's JSON answer, or its error.
    async fn graph(
        &self,
        name: &str,
        account: &GraphAccount,
        edge: &str,
        body: &Value,
        platform: &str,
    ) -> Result<Value, Failure> {
        let url = account.url(edge);
        self.granted(name, &url)?;
        let request = client().post(url).bearer_auth(&account.token).json(body);
        let hide = |(why, kind): Failure| (redact(&why, &account.token), kind);
        let (status, text) = self.send(request, DEFAULT_TIMEOUT).await.map_err(hide)?;
        let answer: Option<Value> = serde_json::from_str(&text).ok();
        if let Some(error) = answer.as_ref().and_then(|a| a.get("error")) {
            return Err(hide((platform_error(platform, error), "platform_error")));
        }
        if !(200..300).contains(&status) {
            return Err((format!("{platform} answered HTTP {status}"), "http_status"));
        }
        answer.ok_or_else(|| (format!("{platform}'s answer is not JSON"), "protocol"))
    }
}

/// An answer without the field that carries its result.
fn missing(platform: &str, field: &str) -> Failure {
    (format!("{platform}'s answer has no `{field}`"), "protocol")
}

/// A Graph API error as the model reads it: the message, then its type, codes and trace id
/// (what the operator quotes to Meta), then any detail meant for people.
fn platform_error(platform: &str, error: &Value) -> String {
    let message = error["message"].as_str().unwrap_or("no message");
    let mut codes = Vec::new();
    if let Some(kind) = error["type"].as_str() {
        codes.push(kind.to_owned());
    }
    for (key, label) in [("code", "code"), ("error_subcode", "subcode")] {
        if let Some(code) = error[key].as_i64() {
            codes.push(format!("{label} {code}"));
        }
    }
    if let Some(trace) = error["fbtrace_id"].as_str() {
        codes.push(format!("fbtrace_id {trace}"));
    }
    let mut text = format!("{platform} refused the call: {message}");
    if !codes.is_empty() {
        text.push_str(&format!(" ({})", codes.join(", ")));
    }
    let details = [&error["error_user_msg"], &error["error_data"]["details"]];
    for detail in details.into_iter().filter_map(Value::as_str).filter(|d| !d.is_empty()) {
        text.push_str(&format!(". {detail}"));
    }
    text
}

/// `text` with every occurrence of `token` replaced: a platform that echoes the request must
/// not carry the credential to the model or a log line.
fn redact(text: &str, token: &str) -> String {
    if token.is_empty() { text.to_owned() } else { text.replace(token, "[access_token]") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_graph_error_keeps_its_codes_and_loses_the_token() {
        let error = json!({"message": "(#131030) Recipient phone number not in allowed list", "type": "OAuthException",
            "code": 131030, "error_subcode": 2494010, "fbtrace_id": "AbC", "error_data": {"details": "Add it first."}});
        assert_eq!(
            platform_error(WHATSAPP, &error),
            "the WhatsApp Cloud API refused the call: (#131030) Recipient phone number not in allowed list \
             (OAuthException, code 131030, subcode 2494010, fbtrace_id AbC). Add it first."
        );
        assert_eq!(platform_error(INSTAGRAM, &json!({})), "the Instagram Graph API refused the call: no message");
        assert_eq!(redact("bad token EAAB1 here", "EAAB1"), "bad token [access_token] here");
    }

    #[test]
    fn urls_are_the_base_then_the_account_then_the_edge() {
        let account = |base: &str| GraphAccount { base_url: base.parse().unwrap(), id: "42".into(), token: "t".into() };
        let at = |base: &str| account(base).url("messages").to_string();
        assert_eq!(at("https://graph.facebook.com/v23.0"), "https://graph.facebook.com/v23.0/42/messages");
        assert_eq!(at("http://127.0.0.1:9/v23.0/"), "http://127.0.0.1:9/v23.0/42/messages");
        assert!(!format!("{:?}", account("http://x/")).contains("token: \"t\""), "Debug hides the token");
    }
}
