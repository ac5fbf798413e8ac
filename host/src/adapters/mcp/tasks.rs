//! The MCP Tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663) from 2026-07-28: a
//! call that goes on in the background, polled with `tasks/get`, answered with
//! `tasks/update`, cancelled with `tasks/cancel`, on any replica (the tasks live at the person
//! broker, [`crate::broker::tasks`]).
//!
//! Which calls become tasks, for a client that declared the extension (in the request's
//! `_meta` or at `initialize`):
//! - a tool that its skill's `task-support` export marks `optional` or `required`: the task
//!   begins with the call, or, for a tool marked `detaches`, when it calls `tasks.detach`
//!   (what it asks before that travels in the call's own `input_required` results);
//! - a call that waits on a person (its approval): the question is the task's first input
//!   request.
//!
//! A `required` tool called by a client that did not declare the extension is refused
//! (-32021, `data.requiredCapabilities.extensions`); an `optional` one is answered in the
//! call. Inside a task, each `ask` round of the tool is the task's `inputRequests` (status
//! `input_required`) until every request has its answer; the call's deadline stops while it
//! waits, as it does for a person. A task ends `completed` with the tool's result (a tool
//! error too: `isError`), `failed` with a JSON-RPC error when the sandbox stopped the call
//! (a trap, its deadline, its fuel or memory cap) or its replica went away, or `cancelled`.

use super::inquire::{self, Rounds};
use super::{NO_ELICITATION, Ran, content, elicit};
use crate::broker::tasks::TaskWake;
use crate::broker::{Entry, Kind};
use crate::broker::{TaskEntry, TaskStatus, TaskStep};
use crate::engine::desk::Desk;
use crate::engine::{ApprovalOutcome, Counterpart, Engine, PresentError};
use crate::person::{Replies, Reply, Round, Unanswered};
use crate::sandbox::Detacher;
use crate::skills::served::TaskSupport;
use crate::tools::ToolOutcome;
use parking_lot::Mutex;
use rmcp::ErrorData;
use rmcp::model::{
    ClientCapabilities, CreateTaskResult, DetailedTask, ElicitResult, JsonObject, ServerResult, Task, TaskPayload,
};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime};
use tokio::sync::oneshot;

/// How long a task is kept from its creation (`ttlMs`).
pub const TTL: Duration = Duration::from_secs(3600);
/// How often a client should poll (`pollIntervalMs`).
const POLL_INTERVAL: Duration = Duration::from_millis(200);
/// How often a runner looks at its task without a notification (lost ones).
const LOOK_AGAIN: Duration = Duration::from_secs(5);
/// The key of a gated call's approval among a task's input requests.
const APPROVAL_KEY: &str = "approval";
/// The causes ([`crate::sandbox::CallError::kind`]) for which a task's call failed rather than
/// completed with the tool's error: the sandbox stopped it.
const FAILED_KINDS: [&str; 8] =
    ["fuel_exhausted", "deadline", "memory_cap", "stack_overflow", "result_too_large", "trap", "busy", "host"];

/// How tool `name` (as the model sees it) may run as a task; `None`: never.
pub fn support(engine: &Engine, name: &str) -> Option<TaskSupport> {
    let (skill, tool) = crate::skills::skill::split_exposed(name)?;
    engine.skills().skills.get(skill)?.served.tasks.get(tool).copied()
}

/// Whether the request's client declared the extension.
pub fn declared(context: &RequestContext<RoleServer>) -> bool {
    context.client_capabilities().is_some_and(|c| c.supports_tasks())
}

/// The refusal of a `required` tool for a client without the extension.
pub fn refusal() -> ErrorData {
    ErrorData::missing_required_client_capability(ClientCapabilities::builder().enable_tasks().build())
}

fn iso(t: SystemTime) -> String {
    chrono::DateTime::<chrono::Utc>::from(t).to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// The task as the wire carries its base fields.
fn wire(entry: &TaskEntry) -> Task {
    let ttl = entry.expires_at.duration_since(entry.created_at).unwrap_or(TTL);
    let mut task = Task::new(entry.id.clone(), entry.status_wire(), iso(entry.created_at), iso(entry.updated_at))
        .with_ttl_ms(ttl.as_millis() as u64)
        .with_poll_interval_ms(POLL_INTERVAL.as_millis() as u64);
    if let Some(message) = &entry.message {
        task = task.with_status_message(message.clone());
    }
    task
}

trait StatusWire {
    fn status_wire(&self) -> rmcp::model::TaskStatus;
}

impl StatusWire for TaskEntry {
    fn status_wire(&self) -> rmcp::model::TaskStatus {
        match self.status {
            TaskStatus::Working => rmcp::model::TaskStatus::Working,
            TaskStatus::InputRequired => rmcp::model::TaskStatus::InputRequired,
            TaskStatus::Completed => rmcp::model::TaskStatus::Completed,
            TaskStatus::Failed => rmcp::model::TaskStatus::Failed,
            TaskStatus::Cancelled => rmcp::model::TaskStatus::Cancelled,
        }
    }
}

/// The `CreateTaskResult` of a task just created.
pub fn created(entry: &TaskEntry) -> CreateTaskResult {
    CreateTaskResult::new(wire(entry))
}

/// `tasks/get`: the task with what its status carries.
pub fn detailed(entry: &TaskEntry) -> DetailedTask {
    let object = |text: Option<&str>| -> JsonObject {
        text.and_then(|t| serde_json::from_str(t).ok()).unwrap_or_else(|| {
            let mut error = JsonObject::new();
            error.insert("code".into(), json!(-32603));
            error.insert("message".into(), json!("the task's outcome was lost"));
            error
        })
    };
    let payload = match entry.status {
        TaskStatus::Working => TaskPayload::Working,
        TaskStatus::InputRequired => {
            let requests = entry.requests.clone().and_then(|r| serde_json::from_value(r).ok()).unwrap_or_default();
            TaskPayload::InputRequired { input_requests: requests }
        }
        TaskStatus::Completed => TaskPayload::Completed { result: object(entry.outcome.as_deref()) },
        TaskStatus::Failed => TaskPayload::Failed { error: object(entry.outcome.as_deref()) },
        TaskStatus::Cancelled => TaskPayload::Cancelled,
    };
    DetailedTask::new(wire(entry), payload)
}

/// The task's final status and outcome (JSON text) for a call that ended with `outcome`.
fn ended(engine: &Engine, name: &str, outcome: &ToolOutcome) -> (TaskStatus, String) {
    let stopped = outcome.is_error && outcome.error_kind.as_deref().is_some_and(|k| FAILED_KINDS.contains(&k));
    if stopped {
        let message = serde_json::from_str::<Value>(&outcome.content)
            .ok()
            .and_then(|v| v.get("error").and_then(Value::as_str).map(str::to_owned))
            .unwrap_or_else(|| outcome.content.clone());
        let error = json!({"code": -32603, "message": message, "data": {"kind": outcome.error_kind}});
        return (TaskStatus::Failed, error.to_string());
    }
    let skills = engine.skills();
    let result = content::result(outcome, content::spec_of(&skills, name));
    (TaskStatus::Completed, serde_json::to_string(&result).unwrap_or_default())
}

/// The task a call runs as, once it is one.
struct Running {
    id: String,
    wake: TaskWake,
}

/// Who a call that is (or may become) a task asks: before it is a task, as a call at
/// 2026-07-28 does (the retry's answers, [`Rounds`]); once it is one, the client through
/// the task's input requests.
pub struct TaskSide {
    engine: Arc<Engine>,
    /// The tool, as the client called it.
    tool: String,
    /// Its arguments (what the approval's elicitation shows).
    input: Value,
    /// Who asks, at the broker: the session's conversation, the call as its run.
    scope: crate::broker::Scope,
    /// Who keeps its task: the agent, or the agent and the caller's token.
    owner: String,
    capabilities: Option<ClientCapabilities>,
    /// The call's rounds before it became a task.
    rounds: Option<Box<Rounds>>,
    /// The task, once there is one.
    task: Mutex<Option<Arc<Running>>>,
    /// Told once the call became a task by detaching: the result to answer the call with.
    detached: Mutex<Option<oneshot::Sender<Result<CreateTaskResult, ErrorData>>>>,
    /// How many rounds the task asked (keys stay unique over its lifetime).
    asked: AtomicUsize,
    /// `true` once the call is a task.
    begun: tokio::sync::watch::Sender<bool>,
}

impl std::fmt::Debug for TaskSide {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskSide").field("tool", &self.tool).finish_non_exhaustive()
    }
}

impl TaskSide {
    /// The side of `call` (id, tool, arguments) of session `channel`, its task kept by
    /// `owner`, by a client that declared `capabilities`: before it is a task, its `rounds`
    /// (from the retry), if any.
    pub fn new(
        engine: Arc<Engine>,
        ((id, tool, input), owner): (&crate::engine::round::Call, String),
        channel: &str,
        capabilities: Option<ClientCapabilities>,
        rounds: Option<Box<Rounds>>,
    ) -> Arc<TaskSide> {
        let scope = crate::broker::Scope::new(engine.agent(), elicit::SURFACE, channel, id);
        Arc::new(TaskSide {
            engine,
            tool: tool.clone(),
            input: input.clone(),
            scope,
            owner,
            capabilities,
            rounds,
            task: Mutex::default(),
            detached: Mutex::default(),
            asked: AtomicUsize::new(0),
            begun: tokio::sync::watch::Sender::new(false),
        })
    }

    /// The call's rounds before it became a task.
    pub fn rounds(&self) -> Option<&Rounds> {
        self.rounds.as_deref()
    }

    /// Makes the call a task now: recorded at the broker before this returns.
    pub async fn begin(&self) -> Result<CreateTaskResult, ErrorData> {
        let broker = self.engine.broker();
        let (entry, wake) = broker
            .task_create(&self.owner, &self.tool, TTL)
            .await
            .map_err(|e| ErrorData::internal_error(format!("the task cannot be recorded: {e}"), None))?;
        *self.task.lock() = Some(Arc::new(Running { id: entry.id.clone(), wake }));
        self.begun.send_replace(true);
        Ok(created(&entry))
    }

    /// Where the answer to a call that may detach goes: the call's handler waits on it.
    pub fn on_detach(&self) -> oneshot::Receiver<Result<CreateTaskResult, ErrorData>> {
        let (tx, rx) = oneshot::channel();
        *self.detached.lock() = Some(tx);
        rx
    }

    fn running(&self) -> Option<Arc<Running>> {
        self.task.lock().clone()
    }

    /// Runs `call` as the task's work: its end is the task's (`cancelled` by the client
    /// stops it). Returns the call's outcome when it was never a task.
    pub async fn run<F: std::future::Future<Output = Ran>>(&self, call: F) -> Option<Ran> {
        let mut call = std::pin::pin!(call);
        let outcome = loop {
            let Some(running) = self.running() else {
                // Not a task (yet): the call runs until it ends or detaches.
                tokio::select! {
                    outcome = &mut call => {
                        if self.running().is_none() {
                            return Some(outcome);
                        }
                        break outcome;
                    }
                    () = self.became_task() => continue,
                }
            };
            tokio::select! {
                outcome = &mut call => break outcome,
                () = running.wake.changed(LOOK_AGAIN) => {
                    if self.is_final(&running.id).await {
                        // Cancelled (or failed elsewhere): the call stops here.
                        return None;
                    }
                }
            }
        };
        if let Some(running) = self.running() {
            let (status, outcome) = match &outcome {
                Ok((record, _)) => ended(&self.engine, &self.tool, &record.outcome),
                Err(refused) => (TaskStatus::Failed, serde_json::to_string(refused).unwrap_or_default()),
            };
            if let Err(e) = self.engine.broker().task_set(&running.id, TaskStep::Ended(status, &outcome)).await {
                tracing::warn!(task = running.id, "cannot record the task's end: {e}");
            }
        }
        None
    }

    /// Returns once the call became a task (it detached).
    async fn became_task(&self) {
        let mut begun = self.begun.subscribe();
        let _ = begun.wait_for(|begun| *begun).await;
    }

    async fn is_final(&self, id: &str) -> bool {
        match self.engine.broker().task(id, &self.owner).await {
            Ok(Some(entry)) => entry.status.is_final(),
            Ok(None) => true,
            Err(e) => {
                tracing::debug!(task = id, "cannot look at the task: {e}");
                false
            }
        }
    }

    /// Asks `round` through the task's input requests and waits until each has its answer.
    async fn ask_in_task(&self, running: &Running, round: &Round) -> Result<Replies, Unanswered> {
        let n = self.asked.fetch_add(1, Ordering::Relaxed);
        let wire_key = |key: &str| if n == 0 { key.to_owned() } else { format!("{key}.{n}") };
        let mut requests = serde_json::Map::new();
        for (key, request) in round {
            if inquire::able(request, self.capabilities.as_ref()).is_ok() {
                let asked = json!({"method": request.method(), "params": inquire::params(request)});
                requests.insert(wire_key(key), asked);
            }
        }
        let answers = match requests.is_empty() {
            true => serde_json::Map::new(),
            false => self.wait_for(running, Value::Object(requests)).await?,
        };
        Ok(round
            .iter()
            .map(|(key, request)| {
                let reply = match inquire::able(request, self.capabilities.as_ref()) {
                    Err(why) => Reply::Unavailable { why },
                    Ok(()) => match answers.get(&wire_key(key)) {
                        Some(answer) => inquire::read(request, answer).unwrap_or_else(|why| Reply::Unavailable {
                            why: format!("the MCP client's answer does not fit: {why}"),
                        }),
                        None => Reply::Unavailable { why: "the MCP client gave no answer".into() },
                    },
                };
                (key.clone(), reply)
            })
            .collect())
    }

    /// Puts `requests` to the client as the task's input requests, and waits for every
    /// answer; `Cancelled` when the task was cancelled meanwhile.
    async fn wait_for(&self, running: &Running, requests: Value) -> Result<serde_json::Map<String, Value>, Unanswered> {
        let broker = self.engine.broker();
        match broker.task_set(&running.id, TaskStep::Asks(&requests)).await {
            Ok(true) => {}
            Ok(false) => return Err(Unanswered::Cancelled),
            Err(e) => {
                tracing::warn!(task = running.id, "cannot record the task's input requests: {e}");
                return Err(Unanswered::Cancelled);
            }
        }
        loop {
            match broker.task_take_answers(&running.id).await {
                Ok(Some(Value::Object(answers))) => return Ok(answers),
                Ok(_) => {}
                Err(e) => tracing::debug!(task = running.id, "cannot take the task's answers: {e}"),
            }
            if self.is_final(&running.id).await {
                return Err(Unanswered::Cancelled);
            }
            running.wake.changed(LOOK_AGAIN).await;
        }
    }
}

#[async_trait::async_trait]
impl Detacher for TaskSide {
    async fn detach(&self) -> bool {
        let Some(tell) = self.detached.lock().take() else { return self.running().is_some() };
        let begun = self.begin().await;
        let ok = begun.is_ok();
        let _ = tell.send(begun);
        ok
    }
}

#[async_trait::async_trait]
impl Counterpart for TaskSide {
    async fn inquire(&self, round: &Round) -> Option<Result<Replies, Unanswered>> {
        Some(match (self.running(), &self.rounds) {
            (Some(running), _) => self.ask_in_task(&running, round).await,
            (None, Some(rounds)) => rounds.inquire(round.clone()),
            (None, None) => Ok(crate::person::unavailable(round, NO_ELICITATION)),
        })
    }

    fn desk(&self) -> Option<Desk> {
        let elicitation = self.capabilities.as_ref().and_then(|c| c.elicitation.as_ref());
        let can = elicitation.is_some_and(|e| e.form.is_some() || e.url.is_none());
        can.then(|| Desk::new(self.engine.broker(), self.scope.clone()))
    }

    fn unattended(&self) -> ApprovalOutcome {
        ApprovalOutcome::Unavailable(NO_ELICITATION.into())
    }

    /// The approval is the task's input request (the call becomes a task now if it is not
    /// one yet); the client's answer (`tasks/update`, on any replica) is carried to the
    /// broker as its decision.
    async fn present(&self, entry: &Entry, _: bool) -> Result<(), PresentError> {
        if entry.kind != Kind::Approval {
            return Err(PresentError::new(elicit::NotAsked));
        }
        if self.running().is_none() && !Detacher::detach(self).await {
            return Err(PresentError::new(Unasked("the call cannot become a task")));
        }
        let running = self.running().ok_or(PresentError::new(Unasked("the call cannot become a task")))?;
        let level = elicit::level_of(entry);
        let question = elicit::question(&self.tool, &self.input, level).map_err(PresentError::new)?;
        let asked = json!({APPROVAL_KEY: {"method": "elicitation/create", "params": question}});
        let answers =
            self.wait_for(&running, asked).await.map_err(|_| PresentError::new(Unasked("the task was cancelled")))?;
        let answer = answers.get(APPROVAL_KEY).cloned().and_then(|a| serde_json::from_value::<ElicitResult>(a).ok());
        let desk = Desk::new(self.engine.broker(), self.scope.clone());
        desk.carry(&entry.id, elicit::CLIENT, elicit::decision(answer.as_ref(), level)).await
    }
}

/// Why an approval could not be put to a task's client.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct Unasked(&'static str);

/// `tasks/update`'s `inputResponses` as the broker takes them.
pub fn responses(given: &rmcp::model::InputResponses) -> Value {
    serde_json::to_value(given).unwrap_or_else(|_| json!({}))
}

/// A `tools/call` result as it goes on the wire: a task handle also carries `"content": []`,
/// so that a client validating `tools/call` results against a schema without tasks (the
/// 2026-07-28 draft's `CallToolResult`, which the official suite checks) still reads it. The
/// stdio front applies it to the result; the HTTP front to the message ([`on_wire_text`]).
pub fn on_wire(result: ServerResult) -> ServerResult {
    match result {
        ServerResult::CreateTaskResult(task) => match serde_json::to_value(&task) {
            Ok(Value::Object(mut fields)) => {
                fields.insert("content".into(), json!([]));
                ServerResult::CustomResult(rmcp::model::CustomResult(Value::Object(fields)))
            }
            _ => ServerResult::CreateTaskResult(task),
        },
        other => other,
    }
}

/// [`on_wire`] for one JSON-RPC message as text: `Some` rewritten message when it is a task
/// handle without `content`.
pub fn on_wire_text(message: &str) -> Option<String> {
    if !message.contains("\"task\"") {
        return None;
    }
    let mut message: Value = serde_json::from_str(message).ok()?;
    let result = message.get_mut("result")?.as_object_mut()?;
    if result.get("resultType")? != "task" || result.contains_key("content") {
        return None;
    }
    result.insert("content".into(), json!([]));
    Some(message.to_string())
}

/// [`on_wire_text`] for each `data:` line of an SSE chunk, or a whole JSON body.
pub fn on_wire_chunk(chunk: &[u8]) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(chunk).ok()?;
    if let Some(rewritten) = on_wire_text(text.trim()) {
        return Some(rewritten.into_bytes());
    }
    let mut changed = false;
    let lines: Vec<String> = text
        .split('\n')
        .map(|line| match line.strip_prefix("data:").and_then(|data| on_wire_text(data.trim())) {
            Some(rewritten) => {
                changed = true;
                format!("data: {rewritten}")
            }
            None => line.to_owned(),
        })
        .collect();
    changed.then(|| lines.join("\n").into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_handle_gains_empty_content_on_the_wire_and_nothing_else_changes() {
        let handle = r#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"task","taskId":"t","status":"working"}}"#;
        let rewritten: Value = serde_json::from_str(&on_wire_text(handle).unwrap()).unwrap();
        assert_eq!(rewritten["result"]["content"], json!([]));
        assert_eq!(rewritten["result"]["taskId"], "t");
        // Already carrying content, another result, a request: untouched.
        let with = r#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"task","taskId":"t","content":[]}}"#;
        assert_eq!(on_wire_text(with), None);
        let complete = r#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","content":[{"type":"text","text":"\"task\""}]}}"#;
        assert_eq!(on_wire_text(complete), None);
        // In an event stream, only the data line changes.
        let event = format!("event: message\nid: 7\ndata: {handle}\n\n");
        let rewritten = String::from_utf8(on_wire_chunk(event.as_bytes()).unwrap()).unwrap();
        assert!(rewritten.starts_with("event: message\nid: 7\ndata: {") && rewritten.ends_with("}\n\n"), "{rewritten}");
        assert!(rewritten.contains(r#""content":[]"#), "{rewritten}");
        assert_eq!(on_wire_chunk(b"event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"x\"}\n\n"), None);
    }
}
