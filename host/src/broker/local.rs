//! The in-process backend: the entries and tasks of this process, each under one lock, so
//! that of two concurrent decisions exactly one finds the entry pending. The same rules as
//! the shared database's one statement ([`super::postgres::Shared`]); nothing is written
//! down, so no other process resumes a turn.

use super::backend::{Backend, Held};
use super::{Decided, Decision, Entry, Kind, Outcome, RETENTION, TaskEntry, TaskStatus, TaskStep, Who};
use crate::store::StateError;
use parking_lot::Mutex;
use serde_json::Value;
use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::broadcast;

/// The entries and tasks of this process, by id.
#[derive(Default)]
pub(super) struct Ledger {
    inner: Mutex<Inner>,
    tasks: Mutex<HashMap<String, TaskEntry>>,
}

struct Inner {
    /// Each entry, with when it was resolved.
    entries: HashMap<String, (Entry, Option<Instant>)>,
    /// The ids each run opened, so that a run's end cancels its own entries without reading
    /// every entry of the last hour.
    by_run: HashMap<String, Vec<String>>,
    /// Told of each entry the clock ended.
    ended: broadcast::Sender<Entry>,
}

impl Default for Inner {
    fn default() -> Self {
        Inner { entries: HashMap::new(), by_run: HashMap::new(), ended: broadcast::channel(256).0 }
    }
}

impl Inner {
    /// Forgets entries resolved longer than [`RETENTION`] ago.
    fn sweep(&mut self) {
        let Inner { entries, by_run, .. } = self;
        entries.retain(|_, (_, done)| done.is_none_or(|at| at.elapsed() <= RETENTION));
        by_run.retain(|_, ids| {
            ids.retain(|id| entries.contains_key(id));
            !ids.is_empty()
        });
    }

    /// Entry `id`, settled `timed_out` first when it waited past its expiry.
    fn current(&mut self, id: &str) -> Option<&mut (Entry, Option<Instant>)> {
        let held = self.entries.get_mut(id)?;
        if held.0.outcome.is_none() && held.0.expires_at <= SystemTime::now() {
            held.0.outcome = Some(Outcome::TimedOut.name().to_owned());
            held.1 = Some(Instant::now());
            let _ = self.ended.send(held.0.clone());
        }
        Some(held)
    }
}

#[async_trait::async_trait]
impl Backend for Ledger {
    fn durable(&self) -> bool {
        false
    }

    fn ended(&self) -> broadcast::Receiver<Entry> {
        self.inner.lock().ended.subscribe()
    }

    async fn open(&self, entry: &Entry, _held: Held<'_>) -> Result<(), StateError> {
        let entry = entry.clone();
        let mut inner = self.inner.lock();
        if inner.entries.len().is_multiple_of(64) {
            inner.sweep();
        }
        inner.by_run.entry(entry.run_id.clone()).or_default().push(entry.id.clone());
        inner.entries.insert(entry.id.clone(), (entry, None));
        Ok(())
    }

    async fn get(&self, kind: Kind, id: &str) -> Result<Option<Entry>, StateError> {
        Ok(self.inner.lock().current(id).map(|(e, _)| e.clone()).filter(|e| e.kind == kind))
    }

    async fn waiting(&self, agent: &str, kind: Kind) -> Result<Vec<Entry>, StateError> {
        let mut inner = self.inner.lock();
        let ids: Vec<String> = inner.entries.keys().cloned().collect();
        let mut waiting: Vec<Entry> = ids
            .iter()
            .filter_map(|id| inner.current(id).map(|(e, _)| e.clone()))
            .filter(|e| e.outcome.is_none() && e.kind == kind && e.agent == agent)
            .collect();
        waiting.sort_by_key(|e| e.expires_at);
        Ok(waiting)
    }

    async fn of_run(&self, agent: &str, run_id: &str) -> Result<Vec<Entry>, StateError> {
        let mut inner = self.inner.lock();
        let ids = inner.by_run.get(run_id).cloned().unwrap_or_default();
        Ok(ids.iter().filter_map(|id| inner.current(id).map(|(e, _)| e.clone())).filter(|e| e.agent == agent).collect())
    }

    async fn decide(&self, id: &str, who: Who<'_>, decision: &Decision) -> Result<Decided, StateError> {
        Ok(decide(&mut self.inner.lock(), id, who, decision))
    }

    async fn settle(&self, id: &str, outcome: &Outcome) -> Result<bool, StateError> {
        let mut inner = self.inner.lock();
        let Some((entry, done)) = inner.entries.get_mut(id) else { return Ok(false) };
        if entry.outcome.as_deref() == Some(outcome.name()) {
            return Ok(false);
        }
        entry.outcome = Some(outcome.name().to_owned());
        entry.answer = outcome.stored_text().map(str::to_owned);
        *done = Some(Instant::now());
        Ok(true)
    }

    async fn cancel_run(&self, run_id: &str) -> Result<(), StateError> {
        let mut inner = self.inner.lock();
        for id in inner.by_run.remove(run_id).unwrap_or_default() {
            if let Some((entry, done)) = inner.entries.get_mut(&id)
                && entry.outcome.is_none()
            {
                entry.outcome = Some(Outcome::Cancelled.name().to_owned());
                *done = Some(Instant::now());
            }
        }
        Ok(())
    }

    async fn pending_question(&self, conversation: &str) -> Result<Option<String>, StateError> {
        let inner = self.inner.lock();
        let waiting = inner.entries.values().filter(|(e, done)| {
            done.is_none()
                && e.kind == Kind::Question
                && e.channel_id == conversation
                && e.expires_at > SystemTime::now()
        });
        Ok(waiting.max_by_key(|(e, _)| e.expires_at).map(|(e, _)| e.id.clone()))
    }

    async fn task_create(&self, id: &str, agent: &str, tool: &str, ttl: Duration) -> Result<TaskEntry, StateError> {
        let now = SystemTime::now();
        let entry = TaskEntry {
            id: id.to_owned(),
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
        self.tasks.lock().insert(id.to_owned(), entry.clone());
        Ok(entry)
    }

    async fn task_get(&self, id: &str, agent: &str) -> Result<Option<TaskEntry>, StateError> {
        let now = SystemTime::now();
        let mut tasks = self.tasks.lock();
        tasks.retain(|_, t| t.expires_at > now);
        Ok(tasks.get(id).filter(|t| t.agent == agent).cloned())
    }

    async fn task_set(&self, id: &str, step: TaskStep<'_>) -> Result<bool, StateError> {
        let (status, requests, outcome) = step.parts();
        let changed = self.change_task(id, |t| {
            if t.status.is_final() {
                return false;
            }
            t.status = status;
            t.requests = requests.cloned();
            t.responses = requests.map(|_| Value::Object(Default::default()));
            t.outcome = outcome.map(str::to_owned);
            true
        });
        Ok(changed.unwrap_or(false))
    }

    async fn task_answer(&self, id: &str, agent: &str, responses: &Value) -> Result<bool, StateError> {
        if self.task_get(id, agent).await?.is_none() {
            return Ok(false);
        }
        self.change_task(id, |t| {
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
        Ok(true)
    }

    async fn task_take_answers(&self, id: &str) -> Result<Option<Value>, StateError> {
        let taken = self.change_task(id, |t| {
            let all = t.status == TaskStatus::InputRequired
                && t.requests.as_ref().and_then(Value::as_object).is_some_and(|p| p.is_empty());
            if !all {
                return None;
            }
            t.status = TaskStatus::Working;
            t.requests = None;
            t.responses.take()
        });
        Ok(taken.flatten())
    }

    async fn task_cancel(&self, id: &str, agent: &str) -> Result<bool, StateError> {
        if self.task_get(id, agent).await?.is_none() {
            return Ok(false);
        }
        self.change_task(id, |t| {
            if !t.status.is_final() {
                t.status = TaskStatus::Cancelled;
                t.requests = None;
                t.responses = None;
                t.message = Some("cancelled by the client".into());
            }
        });
        Ok(true)
    }
}

impl Ledger {
    fn change_task<T>(&self, id: &str, change: impl FnOnce(&mut TaskEntry) -> T) -> Option<T> {
        let mut tasks = self.tasks.lock();
        let task = tasks.get_mut(id)?;
        let out = change(task);
        task.updated_at = SystemTime::now();
        Some(out)
    }
}

/// `who`'s decision, by the rules of the shared database's statement.
fn decide(inner: &mut Inner, id: &str, who: Who<'_>, decision: &Decision) -> Decided {
    let Some((entry, done)) = inner.current(id) else { return Decided::Gone };
    if entry.kind != decision.kind() || !who.may(entry) {
        return Decided::Gone;
    }
    let outcome = decision.outcome();
    match entry.outcome.as_deref() {
        Some(o) if o == outcome.name() && entry.answer.as_deref() == outcome.stored_text() => {
            return Decided::Same(entry.clone());
        }
        Some("approved" | "denied" | "answered") => return Decided::Conflict(entry.clone()),
        Some(_) => return Decided::Gone,
        None => {}
    }
    if let Some(challenge) = &entry.challenge
        && matches!(outcome, Outcome::Approved(_))
        && decision.confirmation() != Some(challenge.as_str())
    {
        return Decided::Unconfirmed;
    }
    entry.outcome = Some(outcome.name().to_owned());
    entry.answer = outcome.stored_text().map(str::to_owned);
    entry.decided_by = Some(who.label(&entry.surface));
    entry.decided_token = who.token.map(str::to_owned);
    *done = Some(Instant::now());
    Decided::Won(entry.clone())
}
