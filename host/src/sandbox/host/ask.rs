//! `ask`: a round of requests to whoever drives the call, through the call's
//! [`crate::sandbox::Inquirer`]. The call's deadline stops while it waits. A round that goes
//! to the client in the call's result instead (MCP `input_required`) stops the call with
//! [`Suspended`]: it runs again, from the start, with the answers.

use crate::person::{FormAction, Reply, Request, Round, Said, Sampling, Unanswered};
use crate::sandbox::bindings::skillhost::skill::ask::{
    Action, Answer, Error, FormAnswer, Host, Request as WitRequest, Role, Root, Sampled,
};
use crate::sandbox::host_state::HostState;
use serde_json::Value;

/// At most this many requests in one round.
pub const MAX_REQUESTS: usize = 16;
/// The longest key, in bytes.
const MAX_KEY: usize = 128;
/// The largest form schema, serialized.
const MAX_SCHEMA: usize = 8 * 1024;
/// The longest form message, in bytes.
const MAX_MESSAGE: usize = 4 * 1024;

/// The call stopped at a round the client answers in its retry (a trap the host classifies
/// as [`crate::sandbox::CallError::Suspended`]).
#[derive(Debug)]
pub struct Suspended;

impl std::fmt::Display for Suspended {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the call asked for input that its client answers in a retry")
    }
}

impl std::error::Error for Suspended {}

impl Host for HostState {
    async fn ask(
        &mut self,
        requests: Vec<(String, WitRequest)>,
    ) -> wasmtime::Result<Result<Vec<(String, Answer)>, Error>> {
        let round = match checked(requests) {
            Ok(round) => round,
            Err(why) => return Ok(Err(Error::Invalid(why))),
        };
        let Some(inquirer) = self.inquirer.clone() else {
            let nobody = crate::person::unavailable(&round, "nobody can be asked during this call");
            return Ok(Ok(nobody.into_iter().map(|(k, r)| (k, answer(r))).collect()));
        };
        let asked = self.deadline.clone().paused(inquirer.ask(round)).await;
        match asked {
            Ok(replies) => Ok(Ok(replies.into_iter().map(|(k, r)| (k, answer(r))).collect())),
            Err(Unanswered::TimedOut) => Ok(Err(Error::TimedOut)),
            Err(Unanswered::Cancelled) => Ok(Err(Error::Cancelled)),
            Err(Unanswered::Suspended) => Err(wasmtime::Error::new(Suspended)),
        }
    }
}

/// The round as the guest asked it, checked.
fn checked(requests: Vec<(String, WitRequest)>) -> Result<Round, String> {
    if requests.is_empty() || requests.len() > MAX_REQUESTS {
        return Err(format!("a round has 1 to {MAX_REQUESTS} requests; this one has {}", requests.len()));
    }
    let mut round = Round::with_capacity(requests.len());
    for (key, request) in requests {
        if key.is_empty() || key.len() > MAX_KEY {
            return Err(format!("a key is 1 to {MAX_KEY} bytes: `{}`", key.chars().take(40).collect::<String>()));
        }
        if round.iter().any(|(k, _)| *k == key) {
            return Err(format!("key `{key}` is used twice"));
        }
        let request = match request {
            WitRequest::Form(form) => {
                if form.message.trim().is_empty() || form.message.len() > MAX_MESSAGE {
                    return Err(format!("`{key}`: a form's message is 1 to {MAX_MESSAGE} bytes"));
                }
                if form.schema.len() > MAX_SCHEMA {
                    return Err(format!("`{key}`: the schema is {} bytes; at most {MAX_SCHEMA}", form.schema.len()));
                }
                let schema: Value =
                    serde_json::from_str(&form.schema).map_err(|e| format!("`{key}`: the schema is not JSON ({e})"))?;
                if !schema.is_object() {
                    return Err(format!("`{key}`: the schema must be a JSON Schema object"));
                }
                Request::Form { message: form.message, schema }
            }
            WitRequest::Sampling(sampling) => {
                if sampling.messages.is_empty() || sampling.max_tokens == 0 {
                    return Err(format!("`{key}`: sampling needs at least one message and max-tokens above 0"));
                }
                let messages = sampling
                    .messages
                    .into_iter()
                    .map(|m| Said { by_assistant: m.role == Role::Assistant, text: m.text })
                    .collect();
                Request::Sampling(Sampling {
                    messages,
                    system_prompt: sampling.system_prompt,
                    max_tokens: sampling.max_tokens,
                })
            }
            WitRequest::Roots => Request::Roots,
        };
        round.push((key, request));
    }
    Ok(round)
}

/// A reply as the guest reads it.
fn answer(reply: Reply) -> Answer {
    match reply {
        Reply::Form { action, content } => Answer::Form(FormAnswer {
            action: match action {
                FormAction::Accept => Action::Accept,
                FormAction::Decline => Action::Decline,
                FormAction::Cancel => Action::Cancel,
            },
            content: content.map(|c| c.to_string()),
        }),
        Reply::Sampled { text, model, stop_reason } => Answer::Sampled(Sampled { text, model, stop_reason }),
        Reply::Roots { roots } => Answer::Roots(roots.into_iter().map(|r| Root { uri: r.uri, name: r.name }).collect()),
        Reply::Unavailable { why } => Answer::Unavailable(why),
    }
}
