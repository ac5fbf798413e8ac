//! Tasks of the MCP Tasks extension (`io.modelcontextprotocol/tasks`): a tool call that goes
//! on in the background while its client polls. A task waits on its client the way an
//! approval waits on a person, so it lives here, with the same two backends: in this process,
//! or the shared rows of [`super::postgres`], where any replica reads a
//! task, records answers to it and cancels it, and the replica running it is woken by
//! `NOTIFY` (or, while notifications are lost, by looking again every few seconds).
//!
//! The runner (the replica that took the call) alone writes its progress ([`Broker::task_set`]);
//! a client's answers ([`Broker::task_answer`]) and cancellation ([`Broker::task_cancel`])
//! reach it through its [`TaskWake`].

use super::{Broker, BrokerError, TaskEntry, TaskStep};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;

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
        let entry = self.backend.task_create(&id, agent, tool, ttl).await?;
        Ok((entry, wake))
    }

    /// Task `id` of `agent`, on any replica; `None` when unknown or forgotten.
    pub async fn task(&self, id: &str, agent: &str) -> Result<Option<TaskEntry>, BrokerError> {
        Ok(self.backend.task_get(id, agent).await?)
    }

    /// The runner's word on task `id`: it waits for answers, or it ended. `false` when the
    /// task was final already (cancelled meanwhile).
    pub async fn task_set(&self, id: &str, step: TaskStep<'_>) -> Result<bool, BrokerError> {
        Ok(self.backend.task_set(id, step).await?)
    }

    /// A client's answers to task `id` of `agent` (`responses`, a JSON object): those to
    /// requests still pending are taken, each once, and the runner is woken. `false` when
    /// the task is unknown.
    pub async fn task_answer(&self, id: &str, agent: &str, responses: &Value) -> Result<bool, BrokerError> {
        let known = self.backend.task_answer(id, agent, responses).await?;
        // A runner here is woken at once (one elsewhere by the database's notification).
        self.wake_task(id);
        Ok(known)
    }

    /// The runner takes the answers of task `id`'s round once every request has one (and
    /// the task goes on); `None` while some are pending.
    pub async fn task_take_answers(&self, id: &str) -> Result<Option<Value>, BrokerError> {
        Ok(self.backend.task_take_answers(id).await?)
    }

    /// A client cancels task `id` of `agent`: one not final yet becomes `cancelled` and its
    /// runner stops. `false` when the task is unknown.
    pub async fn task_cancel(&self, id: &str, agent: &str) -> Result<bool, BrokerError> {
        let known = self.backend.task_cancel(id, agent).await?;
        self.wake_task(id);
        Ok(known)
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
