//! The tools declared in config (`skills.declared`, checked by [`crate::skills::declared`]):
//! `declared__<name>`, one source under the same gate, budget, events, deadline and
//! cancellation as every other tool.
//!
//! - `http`: the record's URL, never the model's: GET sends the arguments as query
//!   parameters, POST as a JSON body; the host must be granted
//!   (`skills.grants.declared__<name>.http_hosts`, deny by default); a redirect is followed
//!   only on the same scheme, host and port; the body is read up to the result cap.
//! - `mcp`: the spec's `POST {url}/call` JSON-RPC `tools/call`; the first text content.
//! - `database`: one read-only statement on a configured database, refused twice over for
//!   anything that writes (`declared/database.rs`), and the companion `_schema` tool.
//! - `function`: the record's Python `run(args)`, in the function runtime (a component with
//!   no capability, under its deadline, fuel and memory cap).
//! - `builtin`: `web_search` (DuckDuckGo's Instant Answer API), `journal_write` and
//!   `text_to_chart` (files under the memory root, confined as the memory skill's), and
//!   `code_execution` (the model's Python, in the function runtime), and `delegate_to_agent`
//!   (a nested turn on another agent of this process, through [`CallScope::nested`]), and
//!   `whatsapp_send` and `instagram_post` (Meta's Graph API, `declared/social.rs`, under the
//!   `http` records' grant and discipline).

mod chart;
mod database;
mod social;

use super::skill::static_level;
use super::{CallScope, Level, ToolCall, ToolInfo, ToolOutcome, ToolSource};
use crate::llm::ToolDecl;
use crate::sandbox::HostList;
use crate::skills::SkillSet;
use crate::skills::ToolError;
use crate::skills::declared::{Builtin, Declared, HttpMethod, HttpTool, Kind, McpTool};
use crate::store::MemoryStore;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};

/// What the declared tools of one agent may use.
#[derive(Clone)]
pub struct DeclaredTools {
    skills: Arc<SkillSet>,
    /// `skills.grants.declared__<name>.http_hosts`, by tool name.
    grants: BTreeMap<String, HostList>,
    /// The memory root (`journal_write`, `text_to_chart`).
    memory: MemoryStore,
    /// The largest result, in bytes (`sandbox.defaults.max_result_bytes`).
    max_result: usize,
    /// The longest call (`sandbox.maximums.timeout_ms`).
    max_timeout: Duration,
}

/// Where and how far the declared tools reach.
pub struct Reach {
    /// `skills.grants.<tool>.http_hosts`, by tool name.
    pub grants: BTreeMap<String, HostList>,
    /// The memory root.
    pub memory: MemoryStore,
    /// The largest result, in bytes.
    pub max_result: usize,
    /// The longest call.
    pub max_timeout: Duration,
}

impl DeclaredTools {
    /// The declared tools of `skills`.
    pub fn new(skills: Arc<SkillSet>, reach: Reach) -> Self {
        let Reach { grants, memory, max_result, max_timeout } = reach;
        DeclaredTools { skills, grants, memory, max_result, max_timeout }
    }

    fn find(&self, name: &str) -> Option<&Arc<Declared>> {
        self.skills.declared.get(name).filter(|t| t.active)
    }
}

#[async_trait::async_trait]
impl ToolSource for DeclaredTools {
    fn decls(&self) -> Vec<ToolDecl> {
        let active = self.skills.declared.tools.iter().filter(|t| t.active);
        active
            .map(|t| ToolDecl {
                name: t.spec.full_name.clone(),
                description: t.spec.description.clone(),
                input_schema: crate::llm::Schema::from_parts(t.spec.schema.clone(), t.spec.schema_json.clone()),
            })
            .collect()
    }

    fn kind(&self, _name: &str) -> &'static str {
        "declared"
    }

    fn info(&self, name: &str) -> Option<ToolInfo> {
        let nests = |t: &Arc<Declared>| matches!(t.kind, Kind::Builtin(Builtin::Delegate { .. }));
        self.find(name).map(|t| ToolInfo { nests: nests(t), ..ToolInfo::default() })
    }

    fn check(&self, name: &str, input: &Value) -> Result<(), ToolOutcome> {
        let Some(tool) = self.find(name) else { return Ok(()) };
        tool.spec.validate(input).map_err(|problems| {
            let error = ToolError::InvalidInput { tool: tool.spec.full_name.clone(), problems };
            ToolOutcome::error(&error.to_model_json(), Duration::ZERO)
        })
    }

    async fn level(&self, call: ToolCall<'_>) -> Level {
        // A declared tool's level is static (never `dynamic`); an unknown one fails closed.
        self.find(call.name).and_then(|t| static_level(t.spec.human)).unwrap_or(Level::Approve)
    }

    async fn execute(&self, call: ToolCall<'_>, scope: &dyn CallScope) -> ToolOutcome {
        let started = Instant::now();
        let Some(tool) = self.find(call.name) else {
            let error = ToolError::UnknownTool(call.name.to_owned());
            return ToolOutcome::error(&error.to_model_json(), started.elapsed());
        };
        let result = match &tool.kind {
            Kind::Http(http) => self.http(call.name, http, call.input).await,
            Kind::Mcp(mcp) => self.mcp(mcp, call.input).await,
            Kind::Builtin(Builtin::WebSearch { base_url }) => self.web_search(base_url, call.input).await,
            Kind::Builtin(Builtin::JournalWrite) => self.journal(call).await,
            Kind::Builtin(Builtin::TextToChart) => chart::write(&self.memory, call.input).await,
            Kind::Builtin(Builtin::WhatsappSend(account)) => self.whatsapp_send(call.name, account, call.input).await,
            Kind::Builtin(Builtin::InstagramPost(account)) => self.instagram_post(call.name, account, call.input).await,
            Kind::Database(database) => database::run(database, call.input).await,
            Kind::Function(function) => {
                let input = json!({"code": &*function.code, "args": call.input.to_string()});
                return self.in_runtime("run", &input, call, started).await;
            }
            Kind::Builtin(Builtin::Delegate { to }) => {
                let to = to.as_deref().or(call.input["to_agent_slug"].as_str()).unwrap_or_default();
                let mut task = call.input["task"].as_str().unwrap_or_default().to_owned();
                if let Some(context) = call.input["context"].as_str().filter(|c| !c.trim().is_empty()) {
                    task = format!("{task}\n\nContext:\n{context}");
                }
                let target = super::NestedTarget::Agent(to.to_owned());
                let turn = super::NestedTurn { target, task, call_id: call.id.to_owned() };
                scope.nested(turn).await.map(Value::String).map_err(|why| (why, "nested_refused"))
            }
            Kind::Builtin(Builtin::CodeExecution) => {
                let input = json!({"code": call.input["code"].as_str().unwrap_or_default()});
                return self.in_runtime("execute", &input, call, started).await;
            }
        };
        match result {
            Ok(value) => {
                let text = match value {
                    Value::String(text) => text,
                    other => other.to_string(),
                };
                if text.len() > self.max_result {
                    let why = format!("the result is {} bytes; at most {}", text.len(), self.max_result);
                    return failed(why, "result_too_large", started);
                }
                ToolOutcome::text(text, started.elapsed())
            }
            Err((message, kind)) => {
                tracing::warn!(tool = %call.name, kind, "declared tool failed: {message}");
                failed(message, kind, started)
            }
        }
    }
}

impl DeclaredTools {
    /// Runs `tool` of the function runtime: its result, or the sandbox's refusal (deadline,
    /// fuel, memory, trap) as the model reads any skill's.
    async fn in_runtime(&self, tool: &str, input: &Value, call: ToolCall<'_>, started: Instant) -> ToolOutcome {
        let Some(runtime) = &self.skills.declared.runtime else {
            let why = "the function runtime is not loaded".to_owned();
            return failed(why, "unavailable", started);
        };
        match runtime.call(tool, input, call.ctx).await {
            Ok(outcome) => {
                let result = outcome.value;
                if result.succeeded != Some(false) {
                    return ToolOutcome::text(result.content, started.elapsed());
                }
                tracing::info!(tool = %call.name, "declared code raised: {}", result.content);
                let error = serde_json::from_str(&result.content).unwrap_or_else(|_| json!({"error": result.content}));
                ToolOutcome::error(&error, started.elapsed())
            }
            Err(e) => {
                tracing::warn!(tool = %call.name, kind = e.kind(), "declared code stopped: {e}");
                ToolOutcome::error(&e.to_model_json(), started.elapsed())
            }
        }
    }
}

/// A failed call, as the model reads it: the message and its kind.
type Failure = (String, &'static str);

fn failed(message: String, kind: &str, started: Instant) -> ToolOutcome {
    ToolOutcome::error(&json!({"error": message, "kind": kind}), started.elapsed())
}

/// The client of `http`, `mcp` and `web_search`: redirects only on the same origin (five at
/// most), no proxy from the environment.
fn client() -> &'static reqwest::Client {
    static CLIENT: LazyLock<reqwest::Client> = LazyLock::new(|| {
        let policy = reqwest::redirect::Policy::custom(|attempt| {
            let first = attempt.previous().first().cloned();
            let same = first.is_some_and(|f| f.origin() == attempt.url().origin());
            if attempt.previous().len() > 5 {
                attempt.error("more than 5 redirects")
            } else if same {
                attempt.follow()
            } else {
                let to = attempt.url().host_str().unwrap_or_default().to_owned();
                attempt.error(format!("a redirect to another host ({to}) is refused"))
            }
        });
        reqwest::Client::builder()
            .redirect(policy)
            .no_proxy()
            .connect_timeout(Duration::from_secs(10))
            .user_agent(concat!("skillhost/", env!("CARGO_PKG_VERSION")))
            .build()
            .expect("a client with static settings builds")
    });
    &CLIENT
}

/// A request's failure, said without its URL's query (which may hold arguments).
fn transport(e: reqwest::Error) -> Failure {
    let timeout = e.is_timeout();
    let what = if timeout {
        "no answer in time".to_owned()
    } else if e.is_redirect() {
        std::error::Error::source(&e).map(|s| s.to_string()).unwrap_or_else(|| "a refused redirect".into())
    } else if e.is_connect() {
        "the connection failed".to_owned()
    } else {
        e.without_url().to_string()
    };
    (what, if timeout { "timeout" } else { "connection" })
}

impl DeclaredTools {
    /// Sends `request` and reads the body, at most the result cap.
    async fn send(&self, request: reqwest::RequestBuilder, timeout: Duration) -> Result<(u16, String), Failure> {
        let timeout = timeout.min(self.max_timeout);
        let read = async {
            let mut response = request.send().await.map_err(transport)?;
            let status = response.status().as_u16();
            let mut body = Vec::new();
            while let Some(chunk) = response.chunk().await.map_err(transport)? {
                if body.len() + chunk.len() > self.max_result {
                    return Err((format!("the response is larger than {} bytes", self.max_result), "result_too_large"));
                }
                body.extend_from_slice(&chunk);
            }
            Ok((status, String::from_utf8_lossy(&body).into_owned()))
        };
        match tokio::time::timeout(timeout, read).await {
            Ok(result) => result,
            Err(_) => Err((format!("no answer within {} s", timeout.as_secs_f64()), "timeout")),
        }
    }

    /// Whether tool `name` may reach `url`'s host and port (deny by default).
    fn granted(&self, name: &str, url: &url::Url) -> Result<(), Failure> {
        let (host, port) = (url.host_str().unwrap_or_default(), url.port_or_known_default().unwrap_or(0));
        let host = host.trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase();
        if !self.grants.get(name).is_some_and(|g| g.matches(&host, port)) {
            let why = format!("{host}:{port} is not granted (skills.grants.{name}.http_hosts)");
            return Err((why, "denied"));
        }
        Ok(())
    }

    async fn http(&self, name: &str, tool: &HttpTool, input: &Value) -> Result<Value, Failure> {
        let url = &tool.url;
        self.granted(name, url)?;
        let request = match tool.method {
            HttpMethod::Get => {
                let mut url = url.clone();
                if let Some(arguments) = input.as_object() {
                    let mut pairs = url.query_pairs_mut();
                    for (key, value) in arguments {
                        match value {
                            Value::String(text) => pairs.append_pair(key, text),
                            other => pairs.append_pair(key, &other.to_string()),
                        };
                    }
                }
                client().get(url)
            }
            HttpMethod::Post => client().post(url.clone()).json(input),
        };
        let request = tool.headers.iter().fold(request, |r, (k, v)| r.header(k, v));
        let (status, body) = self.send(request, tool.timeout).await?;
        let result = json!({"status": status, "body": body});
        if status >= 400 {
            return Err((result.to_string(), "http_status"));
        }
        Ok(result)
    }

    async fn mcp(&self, tool: &McpTool, input: &Value) -> Result<Value, Failure> {
        let body = json!({
            "jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": tool.remote_name, "arguments": input},
        });
        let mut request = client().post(tool.url.clone()).json(&body);
        if let Some((header, value)) = &tool.auth {
            request = request.header(*header, value);
        }
        let (status, text) = self.send(request, crate::skills::declared::DEFAULT_TIMEOUT).await?;
        if !(200..300).contains(&status) {
            return Err((format!("the server answered HTTP {status}"), "http_status"));
        }
        let answer: Value =
            serde_json::from_str(&text).map_err(|_| ("the server's answer is not JSON-RPC".to_owned(), "protocol"))?;
        if let Some(error) = answer.get("error") {
            let message = error.get("message").and_then(Value::as_str).unwrap_or("no message");
            return Err((format!("the server refused the call: {message}"), "tool_failed"));
        }
        let result =
            answer.get("result").ok_or_else(|| ("a JSON-RPC answer without a result".to_owned(), "protocol"))?;
        let content = result.get("content").and_then(Value::as_array).cloned().unwrap_or_default();
        let text = content
            .iter()
            .find(|c| c.get("type").and_then(Value::as_str) == Some("text"))
            .and_then(|c| c.get("text").and_then(Value::as_str))
            .unwrap_or_default()
            .to_owned();
        if result.get("isError").and_then(Value::as_bool) == Some(true) {
            return Err((text, "tool_failed"));
        }
        Ok(Value::String(text))
    }

    async fn web_search(&self, base: &url::Url, input: &Value) -> Result<Value, Failure> {
        let query = input.get("query").and_then(Value::as_str).unwrap_or_default();
        let mut url = base.clone();
        url.query_pairs_mut()
            .append_pair("q", query)
            .append_pair("format", "json")
            .append_pair("no_html", "1")
            .append_pair("skip_disambig", "1");
        let (status, text) = self.send(client().get(url), crate::skills::declared::DEFAULT_TIMEOUT).await?;
        if !(200..300).contains(&status) {
            return Err((format!("the search service answered HTTP {status}"), "http_status"));
        }
        let answer: Value = serde_json::from_str(&text)
            .map_err(|_| ("the search service's answer is not JSON".to_owned(), "protocol"))?;
        // Related topics, groups (`{"Name", "Topics": [...]}`) flattened, the first five.
        let mut topics = Vec::new();
        let mut pending: Vec<Value> =
            answer.get("RelatedTopics").and_then(Value::as_array).cloned().unwrap_or_default();
        pending.reverse();
        while let Some(topic) = pending.pop() {
            if topics.len() == 5 {
                break;
            }
            if let Some(group) = topic.get("Topics").and_then(Value::as_array) {
                pending.extend(group.iter().rev().cloned());
                continue;
            }
            let text = topic.get("Text").and_then(Value::as_str).unwrap_or_default();
            let url = topic.get("FirstURL").and_then(Value::as_str).unwrap_or_default();
            if !text.is_empty() {
                topics.push(json!({"text": text, "url": url}));
            }
        }
        let summary = answer.get("AbstractText").and_then(Value::as_str).unwrap_or_default();
        Ok(json!({"query": query, "abstract": summary, "results": topics}))
    }

    /// `journal/<channel>/<date>.md` under the memory root, the entry appended with its time.
    async fn journal(&self, call: ToolCall<'_>) -> Result<Value, Failure> {
        let entry = call.input.get("entry").and_then(Value::as_str).unwrap_or_default().trim();
        if entry.is_empty() {
            return Err(("the entry is empty".into(), "invalid_input"));
        }
        let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_secs();
        let (year, month, day) = super::temporal::time::civil_from_days((secs / 86_400) as i64);
        let date = format!("{year:04}-{month:02}-{day:02}");
        let clock = format!("{:02}:{:02}:{:02}", secs % 86_400 / 3600, secs % 3600 / 60, secs % 60);
        let channel = journal_folder(&call.ctx.channel_id);
        let path = format!("journal/{channel}/{date}.md");
        let text = format!("## {clock} UTC\n\n{entry}\n\n");
        self.memory.write(&path, &text, true).await.map_err(|e| (format!("cannot write {path}: {e}"), "io"))?;
        Ok(json!({"written": path}))
    }
}

/// A channel id as one safe folder name (`C1/1700.1` -> `C1_1700.1`).
fn journal_folder(channel: &str) -> String {
    let safe: String = channel
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') { c } else { '_' })
        .collect();
    match safe.trim_matches('.') {
        "" => "default".to_owned(),
        name => name.chars().take(100).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn journal_folders_stay_one_safe_level() {
        assert_eq!(journal_folder("C1/1700.1"), "C1_1700.1");
        assert_eq!(journal_folder("../../etc"), "_.._etc");
        assert_eq!(journal_folder(".."), "default");
        assert_eq!(journal_folder(""), "default");
    }
}
