//! Where the broker keeps its entries, behind one trait: in this process ([`super::local`]),
//! or in the shared PostgreSQL rows ([`super::postgres`]). Both follow the same rules (the
//! suite in `host/tests/broker_backends.rs` runs every case on each); the [`super::Broker`]
//! above them holds the waiters, the record and the wake-ups, and never asks which backend it
//! has but through [`Backend::durable`].

use super::model::{Announced, Decided, Entry, Kind, Orphan, TaskEntry, TaskStep, Waiting, Who};
use super::{Decision, Outcome};
use crate::store::StateError;
use serde_json::Value;
use std::time::Duration;
use tokio::sync::broadcast;

/// Who waits on an entry being opened.
pub enum Held<'a> {
    /// A turn of this process (cancelled with it).
    Here,
    /// Nobody: its answer comes back with a request to any replica (an MCP approval at
    /// 2026-07-28); it ends only by its expiry.
    Nobody,
    /// A turn of this process, written down beside it so that another replica can resume it.
    Written(&'a Waiting),
}

/// The entries, turns and tasks of one broker.
#[async_trait::async_trait]
pub trait Backend: Send + Sync {
    /// Whether entries (and the turns written down with them) outlive this process.
    fn durable(&self) -> bool;

    /// This process's id among the replicas, where there are replicas.
    fn replica(&self) -> Option<&str> {
        None
    }

    /// This replica's entries as they are decided elsewhere (an empty id: look again at
    /// every one, notifications may have been missed); `None` where every decision is taken
    /// in this process.
    fn announcements(&self) -> Option<broadcast::Receiver<Announced>> {
        None
    }

    /// Which of `ids` have been decided: the polling side of [`Backend::announcements`],
    /// for notifications a lost connection missed (nothing where there are none).
    async fn decided_among(&self, _ids: &[String]) -> Result<Vec<String>, StateError> {
        Ok(Vec::new())
    }

    /// Told of any change to any entry on another replica, for live views.
    fn changes(&self) -> Option<broadcast::Receiver<()>> {
        None
    }

    /// The entries the backend ended itself, as they end: past their expiry (`timed_out`),
    /// or their replica gone silent (`cancelled`), found by a read or a sweep. Each is told
    /// once, by the backend (the replica) that ended it.
    fn ended(&self) -> broadcast::Receiver<Entry>;

    /// Records a pending entry, before anyone can see its id.
    async fn open(&self, entry: &Entry, held: Held<'_>) -> Result<(), StateError>;

    /// Entry `id` of `kind`, a pending one past its expiry read `timed_out` (and one whose
    /// replica is gone `cancelled`).
    async fn get(&self, kind: Kind, id: &str) -> Result<Option<Entry>, StateError>;

    /// `agent`'s entries of `kind` still waiting for a person, oldest first.
    async fn waiting(&self, agent: &str, kind: Kind) -> Result<Vec<Entry>, StateError>;

    /// Every entry of `agent`'s run `run_id`, oldest first, each read as [`Backend::get`]
    /// reads it.
    async fn of_run(&self, agent: &str, run_id: &str) -> Result<Vec<Entry>, StateError>;

    /// `who`'s `decision` on entry `id`: exactly one of concurrent decisions wins; repeating
    /// the recorded one is [`Decided::Same`]; an entry `who` may not decide is
    /// [`Decided::Gone`], as an unknown one.
    async fn decide(&self, id: &str, who: Who<'_>, decision: &Decision) -> Result<Decided, StateError>;

    /// Records how the run ended the wait (the engine's word is final): `false` when the
    /// entry already ended so (or is unknown).
    async fn settle(&self, id: &str, outcome: &Outcome) -> Result<bool, StateError>;

    /// Cancels every pending entry of `run_id`.
    async fn cancel_run(&self, run_id: &str) -> Result<(), StateError>;

    /// The newest question pending in `conversation`.
    async fn pending_question(&self, conversation: &str) -> Result<Option<String>, StateError>;

    /// Notes message `prompt` as the one asking `run_id`'s written-down entry.
    async fn prompted(&self, _run_id: &str, _prompt: &str) -> Result<(), StateError> {
        Ok(())
    }

    /// Writes `run_id`'s checkpoint again while this process holds it waiting.
    async fn rewrite(&self, _run_id: &str, _checkpoint: &str) -> Result<(), StateError> {
        Ok(())
    }

    /// Takes the lease of `run_id`, waiting on `id`: `false` when another replica took the
    /// turn over. A turn not written down is this process's alone.
    async fn lease(&self, _run_id: &str, _id: &str) -> Result<bool, StateError> {
        Ok(true)
    }

    /// Forgets `run_id`'s written-down turn once it ended here.
    async fn finish(&self, _run_id: &str) -> Result<(), StateError> {
        Ok(())
    }

    /// Takes one turn of `scope` left by a replica that is gone, decided or expired.
    async fn take_orphan(&self, _scope: &str) -> Result<Option<Orphan>, StateError> {
        Ok(None)
    }

    /// The approval of `scope` pending in `conversation` whose prompt is message `prompt`.
    async fn approval_prompted(
        &self,
        _scope: &str,
        _conversation: &str,
        _prompt: &str,
    ) -> Result<Option<String>, StateError> {
        Ok(None)
    }

    /// Records task `id` of `agent` running `tool` here, kept for `ttl`.
    async fn task_create(&self, id: &str, agent: &str, tool: &str, ttl: Duration) -> Result<TaskEntry, StateError>;

    /// Task `id` of `agent`; `None` when unknown or forgotten.
    async fn task_get(&self, id: &str, agent: &str) -> Result<Option<TaskEntry>, StateError>;

    /// The runner's word on task `id`; `false` when it was final already.
    async fn task_set(&self, id: &str, step: TaskStep<'_>) -> Result<bool, StateError>;

    /// A client's answers to task `id` of `agent`: those to requests still pending are taken,
    /// each once. `false` when the task is unknown.
    async fn task_answer(&self, id: &str, agent: &str, responses: &Value) -> Result<bool, StateError>;

    /// The answers of task `id`'s round once every request has one; `None` while some wait.
    async fn task_take_answers(&self, id: &str) -> Result<Option<Value>, StateError>;

    /// A client cancels task `id` of `agent`; `false` when the task is unknown.
    async fn task_cancel(&self, id: &str, agent: &str) -> Result<bool, StateError>;

    /// This process stops: what nobody can decide any more ends, its tasks fail.
    async fn retire(&self) -> Result<(), StateError> {
        Ok(())
    }
}
