//! Tasks of the MCP Tasks extension (`io.modelcontextprotocol/tasks`): a tool call that goes
//! on in the background while its client polls. A task waits on its client the way an
//! approval waits on a person, so it lives here, with the same two backends: in this process,
//! or the shared rows of [`crate::store::state::postgres::tasks`], where any replica reads a
//! task, records answers to it and cancels it, and the replica running it is woken by
//! `NOTIFY` (or, while notifications are lost, by looking again every few seconds).
//!
//! The runner (the replica that took the call) alone writes its progress ([`Broker::task_set`]);
//! a client's answers ([`Broker::task_answer`]) and cancellation ([`Broker::task_cancel`])
//! reach it through its [`TaskWake`].

use super::{Backend, Broker, BrokerError};
pub use crate::store::state::postgres::tasks::{TaskEntry, TaskStatus, runner_gone};
use parking_lot::Mutex;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tokio::sync::Notify;

/// The tasks of this process, for the in-process backend.
#[derive(Default)]
pub(super) struct LocalTasks(Mutex<HashMap<String, TaskEntry>>);

impl LocalTasks {
    fn get(&self, id: &str, agent: &str) -> Option<TaskEntry> {
        let now = SystemTime::now();
        let mut tasks = self.0.lock();
        tasks.retain(|_, t| t.expires_at > now);
        tasks.get(id).filter(|t| t.agent == agent).cloned()
    }

    fn change<T>(&self, id: &str, change: impl FnOnce(&mut TaskEntry) -> T) -> Option<T> {
        let mut tasks = self.0.lock();
        let task = tasks.get_mut(id)?;
        let out = change(task);
        task.updated_at = SystemTime::now();
        Some(out)
    }
}

/// What wakes a task's runner: a client answered it or cancelled it (here, or on another
/// replica). Dropped, the runner is gone.
pub struct TaskWake {
    broker: Arc<Broker>,
    id: String,
    notify: Arc<Notify>,
}

impl TaskWake {
    /// Returns when something may have changed the task (at the latest after `poll`, in case
    /// a notification was lost).
    pub async fn changed(&self, poll: Duration) {
        let _ = tokio::time::timeout(poll, self.notify.notified()).await;
    }
}

impl Drop for TaskWake {
    fn drop(&mut self) {
        self.broker.task_wakes.lock().remove(&self.id);
    }
}

impl Broker {
    /// Records a task of `agent` running `tool` here, kept for `ttl`: once this returns,
    /// any replica finds it. With what wakes its runner.
    pub async fn task_create(
        self: &Arc<Self>,
        agent: &str,
        tool: &str,
        ttl: Duration,
    ) -> Result<(TaskEntry, TaskWake), BrokerError> {
        let id = crate::store::random_id().map_err(|e| BrokerError::Random(e.to_string()))?;
        let notify = Arc::new(Notify::new());
        self.task_wakes.lock().insert(id.clone(), notify.clone());
        let wake = TaskWake { broker: self.clone(), id: id.clone(), notify };
        let entry = match &self.backend {
            Backend::Local(_) => {
                let now = SystemTime::now();
                let entry = TaskEntry {
                    id: id.clone(),
                    agent: agent.to_owned(),
                    tool: tool.to_owned(),
                    status: TaskStatus::Working,
                    message: None,
                    created_at: now,
                    updated_at: now,
                    expires_at: now + ttl,
                    requests: None,
                    responses: None,
                    outcome: None,
                };
                self.local_tasks.0.lock().insert(id, entry.clone());
                entry
            }
            Backend::Shared(shared) => shared.task_create(&id, agent, tool, ttl).await?,
        };
        Ok((entry, wake))
    }

    /// Task `id` of `agent`, on any replica; `None` when unknown or forgotten.
    pub async fn task(&self, id: &str, agent: &str) -> Result<Option<TaskEntry>, BrokerError> {
        Ok(match &self.backend {
            Backend::Local(_) => self.local_tasks.get(id, agent),
            Backend::Shared(shared) => shared.task_get(id, agent).await?,
        })
    }

    /// The runner's word on task `id`: it waits for `requests`, goes on, or ended with
    /// `outcome`. `false` when the task was final already (cancelled meanwhile).
    pub async fn task_set(
        &self,
        id: &str,
        status: TaskStatus,
        requests: Option<&Value>,
        outcome: Option<&str>,
    ) -> Result<bool, BrokerError> {
        Ok(match &self.backend {
            Backend::Local(_) => self
                .local_tasks
                .change(id, |t| {
                    if t.status.is_final() {
                        return false;
                    }
                    t.status = status;
                    t.requests = requests.cloned();
                    t.responses = requests.map(|_| Value::Object(Default::default()));
                    t.outcome = outcome.map(str::to_owned);
                    true
                })
                .unwrap_or(false),
            Backend::Shared(shared) => shared.task_set(id, status, requests, outcome).await?,
        })
    }

    /// A client's answers to task `id` of `agent` (`responses`, a JSON object): those to
    /// requests still pending are taken, each once, and the runner is woken. `false` when
    /// the task is unknown.
    pub async fn task_answer(&self, id: &str, agent: &str, responses: &Value) -> Result<bool, BrokerError> {
        match &self.backend {
            Backend::Local(_) => {
                if self.local_tasks.get(id, agent).is_none() {
                    return Ok(false);
                }
                self.local_tasks.change(id, |t| {
                    let (Some(Value::Object(pending)), Some(given)) = (&mut t.requests, responses.as_object()) else {
                        return;
                    };
                    let mut taken = match t.responses.take() {
                        Some(Value::Object(taken)) => taken,
                        _ => Default::default(),
                    };
                    for (key, answer) in given {
                        if pending.remove(key).is_some() {
                            taken.insert(key.clone(), answer.clone());
                        }
                    }
                    t.responses = Some(Value::Object(taken));
                });
                self.wake_task(id);
                Ok(true)
            }
            Backend::Shared(shared) => Ok(shared.task_answer(id, agent, responses).await?),
        }
    }

    /// The runner takes the answers of task `id`'s round once every request has one (and
    /// the task goes on); `None` while some are pending.
    pub async fn task_take_answers(&self, id: &str) -> Result<Option<Value>, BrokerError> {
        Ok(match &self.backend {
            Backend::Local(_) => self
                .local_tasks
                .change(id, |t| {
                    let all = t.status == TaskStatus::InputRequired
                        && t.requests.as_ref().and_then(Value::as_object).is_some_and(|p| p.is_empty());
                    if !all {
                        return None;
                    }
                    t.status = TaskStatus::Working;
                    t.requests = None;
                    t.responses.take()
                })
                .flatten(),
            Backend::Shared(shared) => shared.task_take_answers(id).await?,
        })
    }

    /// A client cancels task `id` of `agent`: one not final yet becomes `cancelled` and its
    /// runner stops. `false` when the task is unknown.
    pub async fn task_cancel(&self, id: &str, agent: &str) -> Result<bool, BrokerError> {
        match &self.backend {
            Backend::Local(_) => {
                if self.local_tasks.get(id, agent).is_none() {
                    return Ok(false);
                }
                self.local_tasks.change(id, |t| {
                    if !t.status.is_final() {
                        t.status = TaskStatus::Cancelled;
                        t.requests = None;
                        t.responses = None;
                        t.message = Some("cancelled by the client".into());
                    }
                });
                self.wake_task(id);
                Ok(true)
            }
            Backend::Shared(shared) => Ok(shared.task_cancel(id, agent).await?),
        }
    }

    /// Wakes the runner of task `id` if it runs here.
    pub(super) fn wake_task(&self, id: &str) {
        if let Some(notify) = self.task_wakes.lock().get(id) {
            notify.notify_one();
        }
    }

    /// Wakes every runner here (notifications may have been lost).
    pub(super) fn wake_tasks(&self) {
        for notify in self.task_wakes.lock().values() {
            notify.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[tokio::test]
    async fn answers_are_taken_once_per_pending_key_and_a_cancel_is_final() {
        let broker = Broker::in_process();
        let (task, _wake) = broker.task_create("a", "t", Duration::from_secs(60)).await.unwrap();
        assert_eq!(task.status, TaskStatus::Working);
        assert!(broker.task("nope", "a").await.unwrap().is_none());
        assert!(broker.task(&task.id, "other-agent").await.unwrap().is_none(), "another agent's task is unknown");
        let asked = json!({"x": {"method": "elicitation/create"}, "y": {"method": "elicitation/create"}});
        assert!(broker.task_set(&task.id, TaskStatus::InputRequired, Some(&asked), None).await.unwrap());
        // One key answered (and a stray one ignored): the other still pending.
        assert!(broker.task_answer(&task.id, "a", &json!({"x": 1, "stray": 2})).await.unwrap());
        assert_eq!(broker.task_take_answers(&task.id).await.unwrap(), None);
        let pending = broker.task(&task.id, "a").await.unwrap().unwrap().requests.unwrap();
        assert_eq!(pending, json!({"y": {"method": "elicitation/create"}}));
        // A second answer to `x` is not taken.
        assert!(broker.task_answer(&task.id, "a", &json!({"x": 9, "y": 3})).await.unwrap());
        assert_eq!(broker.task_take_answers(&task.id).await.unwrap(), Some(json!({"x": 1, "y": 3})));
        assert_eq!(broker.task(&task.id, "a").await.unwrap().unwrap().status, TaskStatus::Working);
        // Cancelled: final; the runner's word no longer changes it; cancelling again is fine.
        assert!(broker.task_cancel(&task.id, "a").await.unwrap());
        assert!(!broker.task_set(&task.id, TaskStatus::Completed, None, Some("{}")).await.unwrap());
        assert!(broker.task_cancel(&task.id, "a").await.unwrap());
        assert_eq!(broker.task(&task.id, "a").await.unwrap().unwrap().status, TaskStatus::Cancelled);
        assert!(!broker.task_cancel("nope", "a").await.unwrap());
    }
}
