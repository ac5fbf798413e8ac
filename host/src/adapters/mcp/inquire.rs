//! A skill's `ask` rounds ([`crate::sandbox::Inquirer`]) put to the MCP client as they are:
//! forms as `elicitation/create` (the schema passed on untouched), sampling as
//! `sampling/createMessage`, roots as `roots/list`. A request the client did not declare the
//! capability for is answered `unavailable` and not sent.
//!
//! - Up to 2025-11-25 ([`on_session`]) each request goes to the client on the session, and
//!   the call waits for the answers.
//! - From 2026-07-28 ([`Rounds`]) a server sends the client no requests: the call stops at
//!   its first unanswered round and is answered with an `input_required` result carrying the
//!   round's requests and a `requestState`; the client's retry runs the tool again from the
//!   start, and each round it asks is answered from what is recorded, then from the retry's
//!   `inputResponses`. The recorded answers are kept at the person broker, one question
//!   entry per round (answered by the retry, first answer wins, on any replica with
//!   PostgreSQL), and the `requestState` is a signed reference to it
//!   ([`super::request_state`]), bound to the call (tool and arguments).

use super::request_state::{Claims, Keys, Refused, arguments_hash};
use crate::broker::{DecideError, Decision, Kind, Opening, Scope};
use crate::engine::Engine;
use crate::person::{FormAction, Replies, Reply, Request, Root, Round, Unanswered};
use parking_lot::Mutex;
use rmcp::ErrorData;
use rmcp::model::{
    ClientCapabilities, CustomRequest, InputRequest, InputRequests, InputRequiredResult, InputResponses, ServerRequest,
};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::{Value, json};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The surface the broker records.
const SURFACE: &str = "mcp";

/// Whether the client declared what `request` needs; `Err(why)` if not.
pub fn able(request: &Request, capabilities: Option<&ClientCapabilities>) -> Result<(), String> {
    let declared = match request {
        Request::Form { .. } => {
            capabilities.and_then(|c| c.elicitation.as_ref()).is_some_and(|e| e.form.is_some() || e.url.is_none())
        }
        Request::Sampling(_) => capabilities.is_some_and(|c| c.sampling.is_some()),
        Request::Roots => capabilities.is_some_and(|c| c.roots.is_some()),
    };
    match declared {
        true => Ok(()),
        false => Err(format!("the MCP client did not declare the capability `{}` asks for", request.method())),
    }
}

/// The refusal of a call of `tool`, which needs the client capabilities `needs`, when the
/// client did not declare them all: -32021 with `data.requiredCapabilities` (HTTP 400).
pub fn lacking(tool: &str, needs: &[String], capabilities: Option<&ClientCapabilities>) -> Option<ErrorData> {
    let declared = |need: &str| match need {
        "sampling" => capabilities.is_some_and(|c| c.sampling.is_some()),
        "elicitation" => capabilities.is_some_and(|c| c.elicitation.is_some()),
        _ => capabilities.is_some_and(|c| c.roots.is_some()),
    };
    let missing: Vec<&String> = needs.iter().filter(|n| !declared(n)).collect();
    if missing.is_empty() {
        return None;
    }
    let required: serde_json::Map<String, Value> = missing.iter().map(|n| ((*n).clone(), json!({}))).collect();
    let names: Vec<&str> = missing.iter().map(|n| n.as_str()).collect();
    let message =
        format!("tool `{tool}` needs the client capabilities {}, which this client did not declare", names.join(", "));
    let data = json!({"requiredCapabilities": required});
    Some(ErrorData::new(rmcp::model::ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY, message, Some(data)))
}

/// The request's `params` as MCP carries them.
pub fn params(request: &Request) -> Value {
    match request {
        Request::Form { message, schema } => json!({"message": message, "requestedSchema": schema}),
        Request::Sampling(sampling) => {
            let messages: Vec<Value> = sampling
                .messages
                .iter()
                .map(|m| {
                    let role = if m.by_assistant { "assistant" } else { "user" };
                    json!({"role": role, "content": {"type": "text", "text": m.text}})
                })
                .collect();
            let mut params = json!({"messages": messages, "maxTokens": sampling.max_tokens});
            if let Some(system) = &sampling.system_prompt {
                params["systemPrompt"] = json!(system);
            }
            params
        }
        Request::Roots => json!({}),
    }
}

/// The client's answer to `request` as the skill reads it; `Err(why)` when it is not an
/// answer of that kind.
pub fn read(request: &Request, answer: &Value) -> Result<Reply, String> {
    let text = |v: &Value| v.as_str().map(str::to_owned);
    match request {
        Request::Form { .. } => {
            let action = match answer.get("action").and_then(Value::as_str) {
                Some("accept") => FormAction::Accept,
                Some("decline") => FormAction::Decline,
                Some("cancel") => FormAction::Cancel,
                _ => return Err("an elicitation result needs `action`: accept, decline or cancel".into()),
            };
            let content = answer.get("content").filter(|c| !c.is_null()).cloned();
            match (&content, action) {
                (Some(c), _) if !c.is_object() => Err("an elicitation result's `content` must be an object".into()),
                (None, FormAction::Accept) => Err("an accepted elicitation result needs `content`".into()),
                _ => Ok(Reply::Form { action, content: content.filter(|_| action == FormAction::Accept) }),
            }
        }
        Request::Sampling(_) => {
            let content = answer.get("content").ok_or("a sampling result needs `content`")?;
            // One block, or a list of them (2025-11-25): the text blocks, joined.
            let blocks = content.as_array().cloned().unwrap_or_else(|| vec![content.clone()]);
            let said: String = blocks.iter().filter_map(|b| b.get("text").and_then(Value::as_str)).collect();
            if blocks.iter().any(|b| b.get("type").is_none()) {
                return Err("a sampling result's content blocks need `type`".into());
            }
            let model = answer.get("model").and_then(text).ok_or("a sampling result needs `model`")?;
            Ok(Reply::Sampled { text: said, model, stop_reason: answer.get("stopReason").and_then(text) })
        }
        Request::Roots => {
            let roots = answer.get("roots").and_then(Value::as_array).ok_or("a roots result needs `roots`")?;
            let roots = roots
                .iter()
                .map(|r| {
                    let uri = r.get("uri").and_then(text).ok_or("each root needs `uri`")?;
                    Ok(Root { uri, name: r.get("name").and_then(text) })
                })
                .collect::<Result<Vec<_>, String>>()?;
            Ok(Reply::Roots { roots })
        }
    }
}

/// Up to 2025-11-25: each request of `round` sent to the client on the session, in order;
/// the ones it cannot answer are not sent.
pub async fn on_session(context: &RequestContext<RoleServer>, round: &Round) -> Replies {
    let capabilities = context.client_capabilities();
    let mut replies = Replies::with_capacity(round.len());
    for (key, request) in round {
        let reply = match able(request, capabilities.as_ref()) {
            Err(why) => Reply::Unavailable { why },
            Ok(()) => {
                let sent = CustomRequest::new(request.method(), Some(params(request)));
                match context.peer.send_request(ServerRequest::CustomRequest(sent)).await {
                    Ok(answer) => match serde_json::to_value(answer) {
                        Ok(answer) => read(request, &answer).unwrap_or_else(|why| Reply::Unavailable {
                            why: format!("the MCP client's answer does not fit: {why}"),
                        }),
                        Err(e) => Reply::Unavailable { why: format!("the MCP client's answer cannot be read: {e}") },
                    },
                    Err(e) => Reply::Unavailable { why: format!("the MCP client did not answer: {e}") },
                }
            }
        };
        replies.push((key.clone(), reply));
    }
    replies
}

/// How one request's run ended its rounds, besides completing.
enum Stop {
    /// At a round the client answers in its retry: the round, and the rounds answered before.
    Ask(Round, Vec<Replies>),
    /// The retry's answer to a request does not fit it (JSON-RPC -32602).
    Invalid(String),
}

/// From 2026-07-28: the rounds of one request (`tools/call`, `prompts/get`), answered from
/// what was recorded, then from the retry's `inputResponses`, until the first one that
/// needs the client.
pub struct Rounds {
    capabilities: Option<ClientCapabilities>,
    /// The rounds answered before (earlier retries), then the ones answered in this run.
    answered: Mutex<Vec<Replies>>,
    /// Which round comes next.
    next: Mutex<usize>,
    /// The retry's answers, for the first round not recorded.
    responses: Option<InputResponses>,
    /// Which round the retry answers: the first one not recorded.
    retried: usize,
    stop: Mutex<Option<Stop>>,
    /// The approval an earlier round of the call ran with (its broker entry), and its
    /// deadline: later rounds carry it, and expire with it.
    approval: Mutex<Option<(String, SystemTime)>>,
}

/// The call a `requestState` is bound to: `tools/call <name>` or `prompts/get <name>`, and
/// its arguments.
pub struct Call<'a> {
    /// `tool:<name>` or `prompt:<name>`.
    pub name: String,
    /// Its arguments.
    pub arguments: &'a Value,
}

impl Rounds {
    /// The rounds of a request whose client declared `capabilities`, retried with
    /// `responses` and `state` (either may be absent), on `engine`'s broker.
    pub async fn begin(
        engine: &Engine,
        keys: &Keys,
        call: &Call<'_>,
        capabilities: Option<ClientCapabilities>,
        state: Option<&str>,
        responses: Option<&InputResponses>,
    ) -> Result<Rounds, ErrorData> {
        let mut rounds = Rounds {
            capabilities,
            answered: Mutex::default(),
            next: Mutex::new(0),
            responses: responses.cloned(),
            retried: 0,
            stop: Mutex::default(),
            approval: Mutex::default(),
        };
        let Some(state) = state else { return Ok(rounds) };
        let refused = |r: Refused| ErrorData::invalid_params(r.to_string(), None);
        let claims = keys.verify(state).await.map_err(refused)?;
        if !claims.inquiry || claims.tool != call.name || claims.arguments != arguments_hash(call.arguments) {
            return Err(refused(Refused::OtherCall));
        }
        let client = super::elicit::client(engine);
        let entry = engine.broker().get(&claims.entry, Kind::Question, client).await;
        let entry =
            entry.map_err(|e| refused(Refused::Unavailable(e.to_string())))?.ok_or(refused(Refused::Expired))?;
        let kept: Value = entry.presentation.as_deref().and_then(|p| serde_json::from_str(p).ok()).unwrap_or_default();
        let recorded: Vec<Replies> =
            serde_json::from_value(kept["recorded"].clone()).map_err(|_| refused(Refused::Tampered))?;
        // The retry's answer to the round, recorded once: repeating the same retry is
        // accepted again, a different answer to the same round is not. A retry without
        // answers decides nothing: the round is asked again.
        if let Some(responses) = responses {
            let answer = serde_json::to_string(responses).unwrap_or_default();
            match engine.broker().decide(&claims.entry, client, Decision::Answer(answer)).await {
                Ok(_) => {}
                Err(DecideError::Unavailable(why)) => return Err(refused(Refused::Unavailable(why))),
                Err(DecideError::Conflict(_)) => return Err(refused(Refused::Answered)),
                Err(_) => return Err(refused(Refused::Expired)),
            }
        }
        rounds.retried = recorded.len();
        *rounds.answered.get_mut() = recorded;
        *rounds.approval.get_mut() =
            claims.approval.map(|entry| (entry, UNIX_EPOCH + Duration::from_secs(claims.expires)));
        Ok(rounds)
    }

    /// The approval an earlier round of this call ran with (its broker entry), which this
    /// run resumes the call with.
    pub fn approval(&self) -> Option<String> {
        self.approval.lock().as_ref().map(|(entry, _)| entry.clone())
    }

    /// Notes the approval this run ran with (until its deadline), so that its later rounds
    /// carry it, and expire with it.
    pub fn carry(&self, entry: &str, until: SystemTime) {
        *self.approval.lock() = Some((entry.to_owned(), until));
    }

    /// Answers the run's next round, or stops the run there ([`Unanswered::Suspended`]).
    pub fn inquire(&self, round: Round) -> Result<Replies, Unanswered> {
        let index = {
            let mut next = self.next.lock();
            *next += 1;
            *next - 1
        };
        let mut answered = self.answered.lock();
        if let Some(recorded) = answered.get(index) {
            let same = recorded.len() == round.len() && recorded.iter().zip(&round).all(|((a, _), (b, _))| a == b);
            if same {
                return Ok(recorded.clone());
            }
            // The tool asks something else now: what was recorded from here on is stale.
            answered.truncate(index);
        }
        let capabilities = self.capabilities.as_ref();
        let responses = self.responses.as_ref().filter(|_| index == self.retried && index == answered.len());
        let mut replies = Replies::with_capacity(round.len());
        let mut missing = false;
        for (key, request) in &round {
            let reply = match able(request, capabilities) {
                Err(why) => Reply::Unavailable { why },
                Ok(()) => match responses.and_then(|r| r.get(key)) {
                    Some(answer) => match read(request, answer) {
                        Ok(reply) => reply,
                        Err(why) => {
                            *self.stop.lock() = Some(Stop::Invalid(format!("inputResponses.{key}: {why}")));
                            return Err(Unanswered::Suspended);
                        }
                    },
                    None => {
                        missing = true;
                        continue;
                    }
                },
            };
            replies.push((key.clone(), reply));
        }
        if missing {
            *self.stop.lock() = Some(Stop::Ask(round, answered.clone()));
            return Err(Unanswered::Suspended);
        }
        answered.push(replies.clone());
        Ok(replies)
    }

    /// After the run: `Some` result to answer the request with instead of the run's own (the
    /// next round's `input_required`), or the error for an answer that did not fit.
    pub async fn finish(
        &self,
        engine: &Engine,
        keys: &Keys,
        call: &Call<'_>,
    ) -> Result<Option<InputRequiredResult>, ErrorData> {
        let stop = self.stop.lock().take();
        let (round, recorded) = match stop {
            None => return Ok(None),
            Some(Stop::Invalid(why)) => return Err(ErrorData::invalid_params(why, None)),
            Some(Stop::Ask(round, recorded)) => (round, recorded),
        };
        let unavailable = |e: String| ErrorData::internal_error(format!("the question cannot be kept: {e}"), None);
        let mut requests = InputRequests::new();
        for (key, request) in &round {
            if able(request, self.capabilities.as_ref()).is_err() {
                continue;
            }
            let wire = json!({"method": request.method(), "params": params(request)});
            let request: InputRequest = serde_json::from_value(wire)
                .map_err(|e| ErrorData::internal_error(format!("`{key}` is not a request MCP can carry: {e}"), None))?;
            requests.insert(key.clone(), request);
        }
        let timeout = Duration::from_secs(engine.settings().human.timeout_seconds);
        // A round of an approved call lives no longer than the approval: a retry never
        // extends it.
        let approval = self.approval.lock().clone();
        let expires_at = match &approval {
            Some((_, until)) => (SystemTime::now() + timeout).min(*until),
            None => SystemTime::now() + timeout,
        };
        let keys_asked: Vec<&str> = round.iter().map(|(k, _)| k.as_str()).collect();
        let opening = Opening {
            kind: Kind::Question,
            scope: Scope {
                agent: engine.agent().to_owned(),
                surface: SURFACE.into(),
                conversation: SURFACE.into(),
                run_id: SURFACE.into(),
                deciders: Vec::new(),
            },
            expires_at,
            challenge: None,
            prompt: Some(format!("{} asks its MCP client: {}", call.name, keys_asked.join(", "))),
            choices: Vec::new(),
            presentation: json!({"call": call.name, "requests": round, "recorded": recorded}),
            resumable: None,
            watch: None,
        };
        let entry = engine.broker().post(opening).await.map_err(|e| unavailable(e.to_string()))?;
        let claims = Claims {
            entry: entry.id,
            tool: call.name.clone(),
            arguments: arguments_hash(call.arguments),
            expires: expires_at.duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0),
            inquiry: true,
            approval: approval.map(|(entry, _)| entry),
        };
        let state = keys.sign(&claims).await.map_err(|e| unavailable(e.to_string()))?;
        Ok(Some(InputRequiredResult::new(Some(requests), Some(state))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::person::Sampling;

    #[test]
    fn answers_are_read_by_the_kind_of_request_and_refused_when_they_do_not_fit() {
        let form = Request::Form { message: "Name?".into(), schema: json!({"type": "object"}) };
        let accepted = read(&form, &json!({"action": "accept", "content": {"name": "Alice"}})).unwrap();
        assert_eq!(accepted, Reply::Form { action: FormAction::Accept, content: Some(json!({"name": "Alice"})) });
        assert!(read(&form, &json!(12345)).is_err(), "not an elicitation result");
        assert!(read(&form, &json!({"action": "accept"})).is_err(), "accepted without content");
        let declined = read(&form, &json!({"action": "decline"})).unwrap();
        assert_eq!(declined, Reply::Form { action: FormAction::Decline, content: None });
        let sampling = Request::Sampling(Sampling { messages: Vec::new(), system_prompt: None, max_tokens: 5 });
        let sampled = json!({"role": "assistant", "content": {"type": "text", "text": "Paris"}, "model": "m", "stopReason": "endTurn"});
        assert_eq!(
            read(&sampling, &sampled).unwrap(),
            Reply::Sampled { text: "Paris".into(), model: "m".into(), stop_reason: Some("endTurn".into()) }
        );
        assert!(read(&sampling, &json!({"action": "accept"})).is_err());
        let roots = read(&Request::Roots, &json!({"roots": [{"uri": "file:///r", "name": "R"}]})).unwrap();
        assert_eq!(roots, Reply::Roots { roots: vec![Root { uri: "file:///r".into(), name: Some("R".into()) }] });
    }

    #[test]
    fn a_run_is_answered_from_the_record_then_the_retry_and_stops_at_the_next_round() {
        let form = |m: &str| Request::Form { message: m.into(), schema: json!({"type": "object"}) };
        let capabilities: ClientCapabilities =
            serde_json::from_value(json!({"elicitation": {"form": {}}, "sampling": {}})).unwrap();
        let step1 = (FormAction::Accept, json!({"name": "Alice"}));
        let recorded = vec![vec![("step1".to_owned(), Reply::Form { action: step1.0, content: Some(step1.1) })]];
        let responses =
            InputResponses::from([("step2".to_owned(), json!({"action": "accept", "content": {"color": "blue"}}))]);
        let rounds = Rounds {
            capabilities: Some(capabilities),
            answered: Mutex::new(recorded.clone()),
            next: Mutex::new(0),
            responses: Some(responses),
            retried: 1,
            stop: Mutex::default(),
            approval: Mutex::default(),
        };
        assert_eq!(rounds.inquire(vec![("step1".into(), form("1"))]).unwrap(), recorded[0]);
        let second = rounds.inquire(vec![("step2".into(), form("2")), ("roots".into(), Request::Roots)]).unwrap();
        assert!(matches!(second[1].1, Reply::Unavailable { .. }), "no roots capability: not asked");
        assert_eq!(rounds.inquire(vec![("step3".into(), form("3"))]), Err(Unanswered::Suspended));
        match rounds.stop.lock().take() {
            Some(Stop::Ask(round, answered)) => {
                assert_eq!(round[0].0, "step3");
                assert_eq!(answered.len(), 2, "both earlier rounds travel with the next question");
            }
            _ => panic!("the run stops at the third round"),
        }
    }
}
