//! Tasks of the MCP Tasks extension in the shared database, so that any replica answers
//! `tasks/get`, `tasks/update` and `tasks/cancel` for a task another one runs.
//!
//! One row per task (`skillhost_tasks`), written by the replica that runs it (its `replica`
//! id) before the client learns the id. The running replica alone writes its progress
//! (`input_required` with the pending requests, the result); any replica records answers
//! (one conditional update: only keys still pending are taken, and each is taken once) and
//! cancellations (only from a state that is not final), then wakes the runner with a
//! notification on the decisions' channel (`<replica> task <answered|cancelled> <id>`). A
//! task whose runner has not beaten for [`super::decisions::ORPHANED_AFTER`] reads as
//! `failed`. Times are the database's clock, in Unix seconds.

use super::{ORPHANED_AFTER, Shared, from_unix};
use crate::broker::model::{TaskEntry, TaskStatus, TaskStep, runner_gone};
use crate::store::StateError;
use std::time::Duration;

const SELECT: &str = "SELECT t.id, t.agent, t.tool, t.status, t.message, t.created_at, t.updated_at, t.expires_at,
        t.requests::text, t.responses::text, t.outcome,
        (t.status IN ('working', 'input_required') AND coalesce(r.seen_at < extract(epoch FROM clock_timestamp())::float8 - $2, true)) AS orphaned
    FROM skillhost_tasks t LEFT JOIN skillhost_replicas r ON r.id = t.replica";

fn row(r: &tokio_postgres::Row) -> TaskEntry {
    let json = |i: usize| r.get::<_, Option<String>>(i).and_then(|t| serde_json::from_str(&t).ok());
    let mut entry = TaskEntry {
        id: r.get(0),
        agent: r.get(1),
        tool: r.get(2),
        status: TaskStatus::parse(r.get(3)),
        message: r.get(4),
        created_at: from_unix(r.get(5)),
        updated_at: from_unix(r.get(6)),
        expires_at: from_unix(r.get(7)),
        requests: json(8),
        responses: json(9),
        outcome: r.get(10),
    };
    if r.get::<_, bool>(11) {
        entry.status = TaskStatus::Failed;
        entry.requests = None;
        entry.outcome = Some(runner_gone());
    }
    entry
}

impl Shared {
    /// Records task `id` of `agent` running `tool` on this replica, kept for `ttl`, before
    /// anyone can see its id.
    pub(super) async fn task_create(
        &self,
        id: &str,
        agent: &str,
        tool: &str,
        ttl: Duration,
    ) -> Result<TaskEntry, StateError> {
        self.alive().await?;
        let c = self.pg.client().await?;
        c.execute(
            "INSERT INTO skillhost_tasks (id, agent, tool, replica, status, created_at, updated_at, expires_at)
             VALUES ($1, $2, $3, $4, 'working', extract(epoch FROM clock_timestamp())::float8,
                extract(epoch FROM clock_timestamp())::float8, extract(epoch FROM clock_timestamp())::float8 + $5)",
            &[&id, &agent, &tool, &self.replica(), &ttl.as_secs_f64()],
        )
        .await
        .map_err(|e| self.pg.error(e))?;
        self.task_get(id, agent).await?.ok_or_else(|| StateError::Other(format!("task {id} vanished")))
    }

    /// Task `id` of `agent` (one whose runner is gone reads `failed`); `None` when unknown
    /// or forgotten.
    pub(super) async fn task_get(&self, id: &str, agent: &str) -> Result<Option<TaskEntry>, StateError> {
        let c = self.pg.client().await?;
        let query = format!(
            "{SELECT} WHERE t.id = $1 AND t.agent = $3 AND t.expires_at > extract(epoch FROM clock_timestamp())::float8"
        );
        let found = c.query_opt(&query, &[&id, &ORPHANED_AFTER.as_secs_f64(), &agent]).await;
        Ok(found.map_err(|e| self.pg.error(e))?.as_ref().map(row))
    }

    /// The runner's word: task `id` now waits for `requests` (a JSON object), or goes on
    /// (`None`), or ended (`status` final, with `outcome`). Nothing changes a task already
    /// final (cancelled meanwhile): `false` then.
    pub(super) async fn task_set(&self, id: &str, step: TaskStep<'_>) -> Result<bool, StateError> {
        let (status, requests, outcome) = step.parts();
        let c = self.pg.client().await?;
        let requests = requests.map(|r| r.to_string());
        let responses = requests.as_ref().map(|_| "{}");
        let changed = c
            .execute(
                "UPDATE skillhost_tasks SET status = $2, requests = $3::text::jsonb, responses = $4::text::jsonb,
                    outcome = $5, updated_at = extract(epoch FROM clock_timestamp())::float8
                 WHERE id = $1 AND status IN ('working', 'input_required')",
                &[&id, &status.as_str(), &requests, &responses, &outcome],
            )
            .await
            .map_err(|e| self.pg.error(e))?;
        Ok(changed == 1)
    }

    /// A client's answers to task `id` of `agent`: the keys still pending are taken (each
    /// once; others are ignored) and the runner is woken. `false` when the task is unknown.
    pub(super) async fn task_answer(
        &self,
        id: &str,
        agent: &str,
        responses: &serde_json::Value,
    ) -> Result<bool, StateError> {
        let c = self.pg.client().await?;
        let answered = c
            .query_opt(
                "UPDATE skillhost_tasks s SET
                    responses = coalesce(s.responses, '{}'::jsonb) || coalesce((SELECT jsonb_object_agg(e.key, e.value)
                        FROM jsonb_each($3::text::jsonb) e WHERE s.requests ? e.key), '{}'::jsonb),
                    requests = s.requests - ARRAY(SELECT jsonb_object_keys($3::text::jsonb)),
                    updated_at = extract(epoch FROM clock_timestamp())::float8
                 WHERE s.id = $1 AND s.agent = $2 AND s.status = 'input_required'
                 RETURNING s.replica",
                &[&id, &agent, &responses.to_string()],
            )
            .await
            .map_err(|e| self.pg.error(e))?;
        match answered {
            Some(r) => {
                self.wake_runner(r.get(0), "answered", id).await?;
                Ok(true)
            }
            None => Ok(self.task_get(id, agent).await?.is_some()),
        }
    }

    /// The runner takes the answers of task `id`'s round once every request has one: the
    /// answers, and the task goes on (`working`); `None` while some are pending.
    pub(super) async fn task_take_answers(&self, id: &str) -> Result<Option<serde_json::Value>, StateError> {
        let c = self.pg.client().await?;
        let taken = c
            .query_opt(
                "UPDATE skillhost_tasks t SET status = 'working', requests = NULL, responses = NULL,
                    updated_at = extract(epoch FROM clock_timestamp())::float8
                 FROM (SELECT id, responses FROM skillhost_tasks WHERE id = $1 FOR UPDATE) old
                 WHERE t.id = old.id AND t.status = 'input_required' AND t.requests = '{}'::jsonb
                 RETURNING old.responses::text",
                &[&id],
            )
            .await
            .map_err(|e| self.pg.error(e))?;
        Ok(taken.and_then(|r| r.get::<_, Option<String>>(0)).and_then(|t| serde_json::from_str(&t).ok()))
    }

    /// A client cancels task `id` of `agent`: from a state that is not final it becomes
    /// `cancelled`, and its runner is woken to stop it. `false` when the task is unknown (a
    /// final one is acknowledged as it is).
    pub(super) async fn task_cancel(&self, id: &str, agent: &str) -> Result<bool, StateError> {
        let c = self.pg.client().await?;
        let cancelled = c
            .query_opt(
                "UPDATE skillhost_tasks SET status = 'cancelled', requests = NULL, responses = NULL,
                    message = 'cancelled by the client', updated_at = extract(epoch FROM clock_timestamp())::float8
                 WHERE id = $1 AND agent = $2 AND status IN ('working', 'input_required')
                 RETURNING replica",
                &[&id, &agent],
            )
            .await
            .map_err(|e| self.pg.error(e))?;
        match cancelled {
            Some(r) => {
                self.wake_runner(r.get(0), "cancelled", id).await?;
                Ok(true)
            }
            None => Ok(self.task_get(id, agent).await?.is_some()),
        }
    }

    async fn wake_runner(&self, replica: String, what: &str, id: &str) -> Result<(), StateError> {
        let c = self.pg.client().await?;
        let payload = format!("{replica} task {what} {id}");
        c.execute("SELECT pg_notify('skillhost_decisions', $1)", &[&payload]).await.map_err(|e| self.pg.error(e))?;
        Ok(())
    }

    /// This replica stops: the tasks it runs fail (their runs end with it).
    pub(super) async fn retire_tasks(&self) -> Result<(), StateError> {
        let c = self.pg.client().await?;
        c.execute(
            "UPDATE skillhost_tasks SET status = 'failed', requests = NULL, outcome = $2,
                updated_at = extract(epoch FROM clock_timestamp())::float8
             WHERE replica = $1 AND status IN ('working', 'input_required')",
            &[&self.replica(), &runner_gone()],
        )
        .await
        .map(drop)
        .map_err(|e| self.pg.error(e))
    }

    /// Forgets the tasks past their time to live.
    pub(super) async fn sweep_tasks(&self) -> Result<(), StateError> {
        let c = self.pg.client().await?;
        c.execute("DELETE FROM skillhost_tasks WHERE expires_at <= extract(epoch FROM clock_timestamp())::float8", &[])
            .await
            .map(drop)
            .map_err(|e| self.pg.error(e))
    }
}
