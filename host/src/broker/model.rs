//! The broker's vocabulary, whatever the backend: an entry (an approval or a question), who
//! may see and decide it (the access rule, [`Who::may`]), what a decision did, a chat turn
//! written down with its entry, and a task of the MCP Tasks extension.

use std::time::SystemTime;

/// What an entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A tool call's approval.
    Approval,
    /// A question to the person.
    Question,
}

impl Kind {
    /// Its name, as stored and recorded (`approval`, `question`).
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Approval => "approval",
            Kind::Question => "question",
        }
    }
}

/// One approval or question as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// Its id.
    pub id: String,
    /// Approval or question.
    pub kind: Kind,
    /// The run waiting on it.
    pub run_id: String,
    /// The run's channel.
    pub channel_id: String,
    /// When the run stops waiting.
    pub expires_at: SystemTime,
    /// The text a `confirm`-level approval must repeat.
    pub challenge: Option<String>,
    /// A question's text.
    pub prompt: Option<String>,
    /// A question's suggested answers.
    pub choices: Vec<String>,
    /// `None` while pending; else `approved`, `denied`, `answered`, `timed_out`, `cancelled`.
    pub outcome: Option<String>,
    /// A question's answer.
    pub answer: Option<String>,
    /// The agent whose turn asked.
    pub agent: String,
    /// The surface that asked: `api`, `slack:<bot>`, `telegram:<bot>`, `mcp`, `console`.
    pub surface: String,
    /// Who may decide on that surface (its `approvers`); empty: anyone it lets in.
    pub deciders: Vec<String>,
    /// What every view shows of it (JSON: the redacted, capped presentation).
    pub presentation: Option<String>,
    /// Who decided: a user of the surface, `api`, or `console`.
    pub decided_by: Option<String>,
    /// The name of the API token the decision came with (`default` for `ui.auth_token`).
    pub decided_token: Option<String>,
}

/// Who reads or decides: an agent's operator (its API token: the console and API
/// clients), or a person on one surface.
#[derive(Debug, Clone, Copy)]
pub struct Who<'a> {
    /// Their agent.
    pub agent: &'a str,
    /// Their surface; `None` for the agent's operator, who may decide any entry of the agent.
    pub surface: Option<&'a str>,
    /// Who they are there (recorded with the decision); for the operator, `api`.
    pub user: &'a str,
    /// The conversation they act from, for a person on a chat surface: they see only entries
    /// shown there (the conversation itself, or a thread of it: `<conversation>/<thread>`).
    pub conversation: Option<&'a str>,
    /// The name of the API token they came with (recorded with the decision).
    pub token: Option<&'a str>,
}

impl Who<'_> {
    /// Whether they may see `entry`: the operator every entry of the agent, a person those
    /// of their surface they may decide.
    pub fn sees(&self, entry: &Entry) -> bool {
        let here = |place: &str| {
            let shown = entry.channel_id.as_str();
            shown == place || shown.strip_prefix(place).is_some_and(|thread| thread.starts_with('/'))
        };
        entry.agent == self.agent
            && self.surface.is_none_or(|surface| {
                entry.surface == surface && (entry.deciders.is_empty() || entry.deciders.iter().any(|d| d == self.user))
            })
            && self.conversation.is_none_or(here)
    }

    /// Whether they may decide `entry`: what they see, but for the operator an MCP approval,
    /// whose answer only the client's retry carries.
    pub fn may(&self, entry: &Entry) -> bool {
        self.sees(entry) && (self.surface.is_some() || entry.surface != "mcp")
    }

    /// How a decision of theirs on an entry asked on `surface` is recorded.
    pub fn label(&self, surface: &str) -> String {
        match self.surface {
            None if surface != "api" => "console".to_owned(),
            _ => self.user.replace(' ', "_"),
        }
    }
}

/// What a decision did.
#[derive(Debug)]
pub enum Decided {
    /// It settled the entry.
    Won(Entry),
    /// The entry was already settled the same way (a repeated decision).
    Same(Entry),
    /// The entry was already settled otherwise by a person.
    Conflict(Entry),
    /// Unknown, expired, cancelled.
    Gone,
    /// An approval of a `confirm`-level call without its challenge repeated; the entry
    /// stays pending.
    Unconfirmed,
}

/// A decision announced to the replica whose run waits: its id and, unless the payload could
/// not carry it (a long answer), its outcome and answer. An empty id asks the replica to look
/// again at every entry pending there (notifications may have been missed).
#[derive(Debug, Clone, PartialEq)]
pub struct Announced {
    /// The entry.
    pub id: String,
    /// Who decided, when the notification said.
    pub by: Option<String>,
    /// Its outcome and answer, when the notification carried them.
    pub outcome: Option<(String, Option<String>)>,
}

/// A chat turn waiting on an approval, as written down.
#[derive(Debug, Clone, PartialEq)]
pub struct Waiting {
    /// The run.
    pub run_id: String,
    /// Which replicas may resume it: those serving this bot of this agent.
    pub scope: String,
    /// Where its messages go (the platform's place, as JSON).
    pub place: String,
    /// The engine's checkpoint, as JSON.
    pub checkpoint: String,
}

/// A waiting turn this replica now holds, to resume.
#[derive(Debug, Clone, PartialEq)]
pub struct Orphan {
    /// The turn as written down.
    pub waiting: Waiting,
    /// The approval or question it waited on, with its outcome (`timed_out` when nobody
    /// decided in time).
    pub approval: Entry,
    /// The message that asked, if it was posted.
    pub prompt: Option<String>,
    /// The replica that held the turn's lease died holding it: the calls of the round it
    /// waited on may have run (or run in part), so they are reported as interrupted, never
    /// run again.
    pub interrupted: bool,
}

/// Where a task is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskStatus {
    /// Running.
    Working,
    /// Waiting for the client's answers (`tasks/update`).
    InputRequired,
    /// Done: the result is the tool's (a tool error too).
    Completed,
    /// The call failed (the sandbox stopped it, its runner went away): the error.
    Failed,
    /// Cancelled by the client.
    Cancelled,
}

impl TaskStatus {
    /// As the wire (and the row) says it.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Working => "working",
            TaskStatus::InputRequired => "input_required",
            TaskStatus::Completed => "completed",
            TaskStatus::Failed => "failed",
            TaskStatus::Cancelled => "cancelled",
        }
    }

    /// The status a stored name says.
    pub fn parse(name: &str) -> TaskStatus {
        match name {
            "working" => TaskStatus::Working,
            "input_required" => TaskStatus::InputRequired,
            "completed" => TaskStatus::Completed,
            "cancelled" => TaskStatus::Cancelled,
            _ => TaskStatus::Failed,
        }
    }

    /// Whether nothing changes it any more.
    pub fn is_final(self) -> bool {
        matches!(self, TaskStatus::Completed | TaskStatus::Failed | TaskStatus::Cancelled)
    }
}

/// One task as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskEntry {
    /// Its id (the client's `taskId`).
    pub id: String,
    /// The agent whose tool it runs.
    pub agent: String,
    /// The tool, as the client called it.
    pub tool: String,
    /// Where it is.
    pub status: TaskStatus,
    /// Why, when it failed or was cut short.
    pub message: Option<String>,
    /// When it was created.
    pub created_at: SystemTime,
    /// When it last changed.
    pub updated_at: SystemTime,
    /// When it is forgotten.
    pub expires_at: SystemTime,
    /// While `input_required`: the requests still unanswered (a JSON object, key to
    /// `{method, params}`).
    pub requests: Option<serde_json::Value>,
    /// The answers taken so far for the round asked (a JSON object, key to response).
    pub responses: Option<serde_json::Value>,
    /// Completed: the result; failed: the error (JSON text).
    pub outcome: Option<String>,
}

/// The runner's word on its task.
#[derive(Debug, Clone, Copy)]
pub enum TaskStep<'a> {
    /// It waits for the client's answers to `requests` (a JSON object, key to
    /// `{method, params}`).
    Asks(&'a serde_json::Value),
    /// It ended (`status`, final) with `outcome`: the result, or the error (JSON text).
    Ended(TaskStatus, &'a str),
}

impl<'a> TaskStep<'a> {
    /// Its status, pending requests and outcome, as a task records them.
    pub fn parts(self) -> (TaskStatus, Option<&'a serde_json::Value>, Option<&'a str>) {
        match self {
            TaskStep::Asks(requests) => (TaskStatus::InputRequired, Some(requests), None),
            TaskStep::Ended(status, outcome) => (status, None, Some(outcome)),
        }
    }
}

/// The error of a task whose runner went away.
pub fn runner_gone() -> String {
    serde_json::json!({"code": -32603, "message": "the server running this task stopped before it finished"})
        .to_string()
}
