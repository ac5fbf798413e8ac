//! The person broker: every approval and question that waits on a person, in one place.
//!
//! The engine's gate (and `human__ask`, and a question an MCP server asks mid-call) opens an
//! entry here ([`Broker::open`]) and waits on its [`Ticket`]; the adapters only present what
//! opened (the approval-v1 stream's `approval_requested`, a chat message with buttons) and
//! forward what a person does ([`Broker::decide`]). The rules live here, once:
//!
//! - **The entry exists before anyone can see it.** [`Broker::open`] returns once the entry
//!   is recorded (in the shared database, with PostgreSQL) and its waiter registered; only
//!   then does the caller show its id.
//! - **Scope.** Every entry records its agent, the surface that asked (`api`, `slack:<bot>`,
//!   `telegram:<bot>`, `mcp`), its conversation and who may decide there. A decision or a
//!   read by someone who may not ([`Who::may`]) is answered exactly as an unknown id is, so
//!   ids cannot be probed. The agent's operator (its API token: the console) may decide any
//!   entry of its agent; such a decision on a chat entry is recorded as the console's.
//! - **First decision wins**, on any replica: of concurrent decisions exactly one settles the
//!   entry; repeating it succeeds again, a different one conflicts.
//!
//! Two backends behind one trait ([`backend::Backend`]), chosen once by the app builder from
//! `state.backend` ([`Broker::start`]), which owns their background tasks: in this process
//! alone ([`local`]; processes sharing one SQLite file do not share entries), or the shared
//! PostgreSQL rows ([`postgres`]), where a decision taken on another replica reaches the
//! waiting one by `NOTIFY` (or, while its listening connection is lost, by polling). No
//! adapter branches on the backend.

pub mod audit;
mod backend;
pub mod form;
mod local;
mod model;
mod postgres;
pub mod present;
pub mod tasks;
pub mod uses;

use crate::store::StateStore;
use backend::{Backend, Held};
use futures::FutureExt as _;
use model::Announced;
pub use model::{Decided, Entry, Kind, Orphan, TaskEntry, TaskStatus, TaskStep, Waiting, Who, runner_gone};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::{Duration, SystemTime};
use tokio::sync::{broadcast, oneshot};
use tokio::task::JoinHandle;
pub use uses::{Use, UseRefused, Uses, arguments_hash};

/// How long a resolved entry stays readable through the status routes.
pub const RETENTION: Duration = Duration::from_secs(3600);
/// How long a lease that cannot be confirmed is tried again: less than the silence after
/// which another replica may take the turn over.
const LEASE_TRIES_FOR: Duration = Duration::from_secs(10);

/// How an approval or question ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The person approved; with the arguments they changed the call to (JSON text), if they
    /// edited it.
    Approved(Option<String>),
    /// The person denied; with their reason, if they gave one.
    Denied(Option<String>),
    /// The person answered.
    Answered(String),
    /// Nobody decided in time.
    TimedOut,
    /// The run ended (client disconnected, turn cut off) before a decision.
    Cancelled,
}

impl Outcome {
    /// The spec's outcome name, as stored.
    pub fn name(&self) -> &'static str {
        match self {
            Outcome::Approved(_) => "approved",
            Outcome::Denied(_) => "denied",
            Outcome::Answered(_) => "answered",
            Outcome::TimedOut => "timed_out",
            Outcome::Cancelled => "cancelled",
        }
    }

    /// A person's decision (rather than the run or the clock ending the wait).
    pub fn by_person(&self) -> bool {
        matches!(self, Outcome::Approved(_) | Outcome::Denied(_) | Outcome::Answered(_))
    }

    /// The outcome a stored name (and the text stored beside it) says.
    pub fn from_stored(outcome: &str, text: Option<&str>) -> Outcome {
        let text = text.map(str::to_owned);
        match outcome {
            "approved" => Outcome::Approved(text),
            "denied" => Outcome::Denied(text),
            "answered" => Outcome::Answered(text.unwrap_or_default()),
            "timed_out" => Outcome::TimedOut,
            _ => Outcome::Cancelled,
        }
    }

    /// The outcome `entry` records; `None` while it waits.
    pub fn of(entry: &Entry) -> Option<Outcome> {
        entry.outcome.as_deref().map(|o| Outcome::from_stored(o, entry.answer.as_deref()))
    }

    /// The answer, for a question answered.
    pub fn answer(&self) -> Option<&str> {
        match self {
            Outcome::Answered(a) => Some(a),
            _ => None,
        }
    }

    /// The text stored beside the outcome: a question's answer, an edited approval's
    /// arguments, a denial's reason.
    pub fn stored_text(&self) -> Option<&str> {
        match self {
            Outcome::Answered(text) => Some(text),
            Outcome::Approved(text) | Outcome::Denied(text) => text.as_deref(),
            Outcome::TimedOut | Outcome::Cancelled => None,
        }
    }
}

/// What a person does with an entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Approve, repeating the challenge of a `confirm`-level call when it has one.
    Approve(Option<String>),
    /// Approve the call with the arguments changed to `arguments` (JSON text, checked against
    /// the tool's input schema by whoever took it), repeating the challenge of a
    /// `confirm`-level call when it has one.
    Edit {
        /// The arguments the call runs with.
        arguments: String,
        /// The challenge, typed.
        confirmation: Option<String>,
    },
    /// Deny, with the person's reason if they gave one (the model reads it).
    Deny(Option<String>),
    /// Answer a question.
    Answer(String),
}

impl Decision {
    fn outcome(&self) -> Outcome {
        match self {
            Decision::Approve(_) => Outcome::Approved(None),
            Decision::Edit { arguments, .. } => Outcome::Approved(Some(arguments.clone())),
            Decision::Deny(reason) => Outcome::Denied(reason.clone()),
            Decision::Answer(a) => Outcome::Answered(a.clone()),
        }
    }

    fn kind(&self) -> Kind {
        match self {
            Decision::Answer(_) => Kind::Question,
            _ => Kind::Approval,
        }
    }

    fn confirmation(&self) -> Option<&str> {
        match self {
            Decision::Approve(typed) | Decision::Edit { confirmation: typed, .. } => typed.as_deref().map(str::trim),
            _ => None,
        }
    }
}

/// Why a decision was not taken.
#[derive(Debug, thiserror::Error)]
pub enum DecideError {
    /// Unknown, expired, cancelled, or not the decider's to take (410).
    #[error("this request is no longer waiting")]
    Gone,
    /// Already decided differently by a person (409).
    #[error("this request was already resolved as {}", .0.outcome.as_deref().unwrap_or("pending"))]
    Conflict(Box<Entry>),
    /// A `confirm`-level approval without its challenge repeated; the entry stays pending.
    #[error("the confirmation does not repeat the challenge")]
    Unconfirmed,
    /// An answer that does not fit the question's schema; the question stays open.
    #[error(transparent)]
    Invalid(#[from] form::FormError),
    /// The shared database cannot be reached (worth a retry).
    #[error("the state database is unavailable: {0}")]
    Unavailable(String),
}

/// Why an entry could not be opened or read.
#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    /// The shared database refused or could not be reached.
    #[error("the state database cannot record it ({0})")]
    Store(#[from] crate::store::StateError),
    /// No id could be made.
    #[error("no id: the OS random source failed ({0})")]
    Random(String),
    /// The record cannot be appended to, so nothing is opened.
    #[error("the record cannot be written ({0})")]
    Record(String),
}

/// Who asks, for an entry: its agent, surface, conversation and run, and who may decide.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scope {
    /// The agent (the outermost turn's, for a nested one).
    pub agent: String,
    /// The surface: `api`, `slack:<bot>`, `telegram:<bot>`, `mcp`.
    pub surface: String,
    /// The conversation (an API channel; a chat conversation of one bot).
    pub conversation: String,
    /// The run waiting on it.
    pub run_id: String,
    /// Who may decide on the surface (its `approvers`); empty: anyone it lets in.
    pub deciders: Vec<String>,
}

impl Scope {
    /// Run `run_id` of `agent`'s conversation `conversation` on `surface`, which anyone
    /// the surface lets in may decide.
    pub fn new(agent: &str, surface: &str, conversation: &str, run_id: &str) -> Scope {
        Scope {
            agent: agent.to_owned(),
            surface: surface.to_owned(),
            conversation: conversation.to_owned(),
            run_id: run_id.to_owned(),
            deciders: Vec::new(),
        }
    }
}

/// Where a decision or answer is announced at once, in the process where its turn waits,
/// from whichever route or replica took it (the API's stream, a chat message to update),
/// ahead of the turn, which may wait for a busy runtime to resume.
pub trait Watch: Send + Sync {
    /// `entry` was decided by `by` (a user of its surface, `api`, or `console`).
    fn decided(&self, entry: &Entry, by: &str);
}

/// An entry to open.
pub struct Opening {
    /// Approval or question.
    pub kind: Kind,
    /// Who asks.
    pub scope: Scope,
    /// When the wait ends.
    pub expires_at: SystemTime,
    /// The text a `confirm`-level approval must repeat.
    pub challenge: Option<String>,
    /// A question's text.
    pub prompt: Option<String>,
    /// A question's suggested answers.
    pub choices: Vec<String>,
    /// What every view shows (JSON object).
    pub presentation: serde_json::Value,
    /// The turn written down with it, so that another replica can resume it; kept only
    /// where entries outlive the process ([`Broker::durable`]).
    pub resumable: Option<Waiting>,
    /// Told at once of a person's decision.
    pub watch: Option<Weak<dyn Watch>>,
}

/// A waiter of this process.
struct Waiter {
    tx: oneshot::Sender<Outcome>,
    watch: Option<Weak<dyn Watch>>,
    /// The entry as opened (set when recorded): a decision announced with its outcome is
    /// delivered from it, without reading the entry back.
    entry: Option<Entry>,
}

/// The person broker of one process and state store.
pub struct Broker {
    /// Where the entries are kept.
    backend: Arc<dyn Backend>,
    /// The entries this process waits on, by id.
    waiters: Mutex<HashMap<String, Waiter>>,
    /// Every change to an entry seen here (opened, decided, ended), for live views.
    changes: broadcast::Sender<String>,
    /// What wakes each task running here, by id.
    task_wakes: Mutex<HashMap<String, Arc<tokio::sync::Notify>>>,
    /// Where the record is kept, and for how long (none: an in-process broker of a test).
    record: Option<(StateStore, Option<Duration>)>,
    /// Its background tasks (the heartbeat, the listener, the delivery of decisions taken
    /// elsewhere), stopped with it.
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

impl Drop for Broker {
    fn drop(&mut self) {
        for task in self.tasks.get_mut().drain(..) {
            task.abort();
        }
    }
}

impl std::fmt::Debug for Broker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let backend = if self.durable() { "postgres" } else { "in-process" };
        f.debug_struct("Broker").field("backend", &backend).finish_non_exhaustive()
    }
}

impl Broker {
    /// A broker whose entries live in this process alone, and which keeps no record.
    pub fn in_process() -> Arc<Broker> {
        Arc::new(Broker::with(Arc::new(local::Ledger::default()), None))
    }

    fn with(backend: Arc<dyn Backend>, record: Option<(StateStore, Option<Duration>)>) -> Broker {
        Broker {
            backend,
            waiters: Mutex::default(),
            changes: broadcast::channel(256).0,
            task_wakes: Mutex::default(),
            record,
            tasks: Mutex::default(),
        }
    }

    /// The broker of this process on `state` (the app builder makes one): shared by the
    /// replicas when it is PostgreSQL (this process then beats among them, and hands its
    /// turns the decisions taken elsewhere), else in-process. Either keeps its record
    /// ([`audit`]) in `state`, each record for `retention` (none: for good). Its background
    /// tasks run while it lives.
    pub fn start(state: &StateStore, retention: Option<Duration>) -> Arc<Broker> {
        let record = Some((state.clone(), retention));
        let (backend, mut tasks): (Arc<dyn Backend>, _) = match state.postgres() {
            Some(pg) => {
                let shared = postgres::Shared::new(pg);
                let tasks = shared.run();
                (shared, tasks)
            }
            None => (Arc::new(local::Ledger::default()), Vec::new()),
        };
        let broker = Arc::new(Broker::with(backend.clone(), record));
        if let Some(decided) = backend.announcements() {
            tasks.push(tokio::spawn(deliver(Arc::downgrade(&broker), decided)));
        }
        // What the backend ended itself (the clock, a replica gone) goes on the record.
        if broker.record.is_some() {
            tasks.push(tokio::spawn(record_ended(Arc::downgrade(&broker), backend.ended())));
        }
        // What changes on other replicas reaches this one's live views.
        if let Some(mut changes) = backend.changes() {
            let watchers = broker.changes.clone();
            tasks.push(tokio::spawn(async move {
                while let Ok(()) | Err(broadcast::error::RecvError::Lagged(_)) = changes.recv().await {
                    let _ = watchers.send(String::new());
                }
            }));
        }
        *broker.tasks.lock() = tasks;
        broker
    }

    /// Whether entries (and turns written down with them) outlive this process.
    pub fn durable(&self) -> bool {
        self.backend.durable()
    }

    /// This process's id among the replicas sharing the database, when there are replicas.
    pub fn replica(&self) -> Option<&str> {
        self.backend.replica()
    }

    /// This process stops: what waits here on a person and can be decided nowhere else reads
    /// `cancelled`, the tasks it runs fail, and the other replicas stop counting on it (the
    /// turns it left written down are resumed elsewhere at once).
    pub async fn retire(&self) -> Result<(), BrokerError> {
        Ok(self.backend.retire().await?)
    }

    /// Changes to entries seen by this process (the id of each), for live views.
    pub fn changes(&self) -> broadcast::Receiver<String> {
        self.changes.subscribe()
    }

    /// Opens an entry: once this returns, it is recorded and its waiter registered, and its
    /// id may be shown.
    pub async fn open(self: &Arc<Self>, opening: Opening) -> Result<Ticket, BrokerError> {
        let (tx, rx) = oneshot::channel();
        let watch = opening.watch.clone();
        let resumable = opening.resumable.is_some() && self.durable();
        let entry = self.record(opening, Some(Waiter { tx, watch, entry: None })).await?;
        Ok(Ticket { broker: self.clone(), entry, rx: Some(rx), resumable })
    }

    /// Records an entry that nobody in this process waits on: its answer comes back with a
    /// request to any replica (an MCP approval at 2026-07-28), which decides it.
    pub async fn post(&self, opening: Opening) -> Result<Entry, BrokerError> {
        self.record(opening, None).await
    }

    async fn record(&self, opening: Opening, waiter: Option<Waiter>) -> Result<Entry, BrokerError> {
        let id = crate::store::random_id().map_err(|e| BrokerError::Random(e.to_string()))?;
        let unowned = waiter.is_none();
        let Opening { kind, scope, expires_at, challenge, prompt, choices, mut presentation, resumable, watch: _ } =
            opening;
        if let Some(fields) = presentation.as_object_mut() {
            let key = if kind == Kind::Question { "question_id" } else { "approval_id" };
            fields.insert(key.into(), id.clone().into());
        }
        let entry = Entry {
            id: id.clone(),
            kind,
            run_id: scope.run_id,
            channel_id: scope.conversation,
            expires_at,
            challenge,
            prompt,
            choices,
            outcome: None,
            answer: None,
            agent: scope.agent,
            surface: scope.surface,
            deciders: scope.deciders,
            presentation: Some(presentation.to_string()),
            decided_by: None,
            decided_token: None,
        };
        if let Some(waiter) = waiter {
            self.waiters.lock().insert(id.clone(), Waiter { entry: Some(entry.clone()), ..waiter });
        }
        let held = match &resumable {
            Some(waiting) => Held::Written(waiting),
            None if unowned => Held::Nobody,
            None => Held::Here,
        };
        let recorded = self.backend.open(&entry, held).await;
        if let Err(e) = recorded {
            self.waiters.lock().remove(&id);
            return Err(e.into());
        }
        // Not on the record, not shown: the entry ends at once.
        if let Err(e) = self.note(&entry, "opened", None).await {
            self.settle(&id, &Outcome::Cancelled);
            return Err(e);
        }
        let _ = self.changes.send(id.clone());
        Ok(entry)
    }

    /// `agent`'s record, where this broker keeps one.
    pub fn audit(&self, agent: &str) -> Option<audit::Audit> {
        self.record.as_ref().map(|(state, retention)| audit::Audit::new(state.clone(), agent, *retention))
    }

    /// Records that a call of `tool` with `input`, asked in `scope`, ran approved by
    /// auto-promotion (nobody was asked); a record that cannot be appended is warned of.
    pub async fn note_promoted(&self, scope: &Scope, tool: &str, input: &serde_json::Value) {
        let Some(audit) = self.audit(&scope.agent) else { return };
        let record = audit::Record {
            outcome: Some(Outcome::Approved(None).name().into()),
            by: Some("promotion".into()),
            ..audit::Record::of_call(scope, "promoted", (tool, input))
        };
        audit.append_or_warn(record).await;
    }

    /// Records that the call approval `entry` covered (`tool` with `input`, asked in `scope`)
    /// ran and completed (`failed`: with an error): the approval is used up.
    pub async fn note_consumed(&self, scope: &Scope, entry: &str, call: (&str, &serde_json::Value), failed: bool) {
        let Some(audit) = self.audit(&scope.agent) else { return };
        let record = audit::Record {
            entry: Some(entry.into()),
            outcome: Some(if failed { "failed" } else { "completed" }.into()),
            ..audit::Record::of_call(scope, "consumed", call)
        };
        audit.append_or_warn(record).await;
    }

    /// Appends what happened to `entry` (`event`, and how it ended) to its agent's record.
    async fn note(&self, entry: &Entry, event: &str, outcome: Option<&Outcome>) -> Result<(), BrokerError> {
        let Some(audit) = self.audit(&entry.agent) else { return Ok(()) };
        audit.append(audit::Record::of(entry, event, outcome)).await.map(drop).map_err(|e| {
            tracing::warn!(entry = entry.id, event, "cannot append to the record: {e}");
            BrokerError::Record(e.to_string())
        })
    }

    /// Entry `id` as `who` may see it: `None` when unknown or not theirs.
    pub async fn get(&self, id: &str, kind: Kind, who: Who<'_>) -> Result<Option<Entry>, BrokerError> {
        let entry = self.backend.get(kind, id).await?;
        Ok(entry.filter(|e| who.sees(e)))
    }

    /// The entries of `kind` waiting for a person that `who` may decide (with PostgreSQL, on
    /// every replica), oldest first.
    pub async fn waiting(&self, kind: Kind, who: Who<'_>) -> Result<Vec<Entry>, BrokerError> {
        let entries = self.backend.waiting(who.agent, kind).await?;
        Ok(entries.into_iter().filter(|e| who.sees(e)).collect())
    }

    /// Every entry of run `run_id` that `who` may see (with PostgreSQL, asked on any
    /// replica; a pending one whose replica is gone reads `cancelled`), oldest first.
    pub async fn of_run(&self, run_id: &str, who: Who<'_>) -> Result<Vec<Entry>, BrokerError> {
        let entries = self.backend.of_run(who.agent, run_id).await?;
        Ok(entries.into_iter().filter(|e| who.sees(e)).collect())
    }

    /// `who`'s decision on entry `id`: the entry as decided, and whether this decision
    /// settled it (`false`: the same decision was taken before). The turn waiting on it
    /// (here, or on the replica that holds it) is woken and its watch told.
    pub async fn decide(&self, id: &str, who: Who<'_>, decision: Decision) -> Result<(Entry, bool), DecideError> {
        let decision = self.conform(id, who, decision).await?;
        let outcome = decision.outcome();
        let decided =
            self.backend.decide(id, who, &decision).await.map_err(|e| DecideError::Unavailable(e.to_string()))?;
        match decided {
            Decided::Won(entry) => {
                self.deliver_here(&entry, &outcome, entry.decided_by.as_deref().unwrap_or_default());
                let _ = self.changes.send(id.to_owned());
                // Taken either way; a record that cannot be appended is warned of.
                let _ = self.note(&entry, "decided", Some(&outcome)).await;
                Ok((entry, true))
            }
            Decided::Same(entry) => Ok((entry, false)),
            Decided::Conflict(entry) => Err(DecideError::Conflict(Box::new(entry))),
            Decided::Gone => Err(DecideError::Gone),
            Decided::Unconfirmed => Err(DecideError::Unconfirmed),
        }
    }

    /// An answer to a question with a schema, checked against it and stored as its JSON
    /// text ([`form::conform`]); any other decision as it is.
    async fn conform(&self, id: &str, who: Who<'_>, decision: Decision) -> Result<Decision, DecideError> {
        let Decision::Answer(answer) = decision else { return Ok(decision) };
        let entry = self.get(id, Kind::Question, who).await.map_err(|e| DecideError::Unavailable(e.to_string()))?;
        let entry = entry.ok_or(DecideError::Gone)?;
        match form::schema_of(entry.presentation.as_deref()) {
            Some(schema) if entry.outcome.is_none() => {
                form::conform(&schema, &answer).map(Decision::Answer).map_err(DecideError::Invalid)
            }
            _ => Ok(Decision::Answer(answer)),
        }
    }

    /// Hands `outcome` to the waiter of `entry` in this process, if there is one, and tells
    /// its watch who decided; `false` when nothing here waited on it.
    fn deliver_here(&self, entry: &Entry, outcome: &Outcome, by: &str) -> bool {
        let Some(waiter) = self.waiters.lock().remove(&entry.id) else { return false };
        let _ = waiter.tx.send(outcome.clone());
        if outcome.by_person()
            && let Some(watch) = waiter.watch.and_then(|w| w.upgrade())
        {
            watch.decided(entry, by);
        }
        true
    }

    /// Records how the turn ended the wait on `id` (the engine's word is final): locally at
    /// once, in the database in the background (an entry left pending is settled by its
    /// expiry).
    pub fn settle(&self, id: &str, outcome: &Outcome) {
        let waiter = self.waiters.lock().remove(id);
        let _ = self.changes.send(id.to_owned());
        // The clock or the run ended the wait (a person's decision is on the record already),
        // unless the backend ended it so first (and recorded it).
        let record = match waiter.and_then(|w| w.entry) {
            Some(entry) if !outcome.by_person() => self
                .audit(&entry.agent)
                .map(|audit| (audit, audit::Record::of(&entry, ended_event(outcome), Some(outcome)))),
            _ => None,
        };
        let (backend, id, outcome) = (self.backend.clone(), id.to_owned(), outcome.clone());
        now_or_later(async move {
            match backend.settle(&id, &outcome).await {
                Ok(true) => {
                    if let Some((audit, record)) = record {
                        audit.append_or_warn(record).await;
                    }
                }
                Ok(false) => {}
                Err(e) => tracing::warn!(id, "cannot record the outcome in the database: {e}"),
            }
        });
    }

    /// Cancels whatever `run_id` still waits on.
    pub fn cancel_run(&self, run_id: &str) {
        let (backend, run_id) = (self.backend.clone(), run_id.to_owned());
        now_or_later(async move {
            if let Err(e) = backend.cancel_run(&run_id).await {
                tracing::warn!(run_id, "cannot cancel the run's approvals and questions: {e}");
            }
        });
    }

    /// Takes the decisions the database announced for this replica's waiters.
    async fn take(&self, announced: Vec<Announced>) {
        for Announced { id, by, outcome } in announced {
            // A task running here was answered or cancelled.
            if by.as_deref() == Some("task") {
                self.wake_task(&id);
                continue;
            }
            let opened = match self.waiters.lock().get(&id) {
                None => continue,
                Some(waiter) => waiter.entry.clone(),
            };
            let entry = match (opened, &outcome) {
                // Announced with its outcome: the entry as opened, decided as announced (one
                // read per decision would queue every wake-up behind the others).
                (Some(opened), Some((decided, answer))) => Some(Entry {
                    outcome: Some(decided.clone()),
                    answer: answer.clone(),
                    decided_by: by.clone(),
                    ..opened
                }),
                // Read the entry: the notification does not say how it ended.
                _ => match self.backend.get(Kind::Approval, &id).await {
                    Ok(Some(entry)) => Some(entry),
                    Ok(None) => self.backend.get(Kind::Question, &id).await.ok().flatten(),
                    Err(e) => {
                        tracing::warn!(id, "cannot read a decision: {e}");
                        continue;
                    }
                },
            };
            let Some(entry) = entry else { continue };
            let Some(stored) = outcome.map(|(o, a)| Outcome::from_stored(&o, a.as_deref())).or(Outcome::of(&entry))
            else {
                continue;
            };
            let by = by.or_else(|| entry.decided_by.clone()).unwrap_or_default();
            self.deliver_here(&entry, &stored, &by);
            let _ = self.changes.send(id);
        }
    }

    /// The ids this process waits on that the database says are decided.
    async fn decided_here(&self) -> Vec<String> {
        let pending: Vec<String> = self.waiters.lock().keys().cloned().collect();
        self.backend.decided_among(&pending).await.unwrap_or_else(|e| {
            tracing::debug!("cannot look for decisions: {e}");
            Vec::new()
        })
    }
}

/// The durable side: chat turns written down with the entry they wait on, resumed by any
/// replica serving the same bot. In-process, nothing is written down: these find nothing and
/// every lease is this process's.
impl Broker {
    /// Notes message `prompt` as the one asking `run_id`'s entry, so that whoever resumes the
    /// turn can settle it.
    pub async fn prompted(&self, run_id: &str, prompt: &str) {
        if let Err(e) = self.backend.prompted(run_id, prompt).await {
            tracing::debug!(run_id, "cannot note the prompt's message: {e}");
        }
    }

    /// Writes `run_id`'s checkpoint again while it waits here (a call beside its question
    /// ended); a turn not written down has no row, and nothing changes.
    pub async fn rewrite(&self, run_id: &str, checkpoint: &str) {
        if let Err(e) = self.backend.rewrite(run_id, checkpoint).await {
            tracing::warn!(run_id, "cannot write the waiting turn again: {e}");
        }
    }

    /// Takes `run_id`'s lease once its entry `id` is decided: `false` when another replica
    /// took the turn over meanwhile, or when the lease cannot be confirmed (then it stops
    /// here and runs nothing: a replica cut off from the database stops beating too, and
    /// another one may already resume the turn). A failed confirmation is tried again, every
    /// second, while the replica could still be seen alive.
    pub async fn lease(&self, run_id: &str, id: &str) -> bool {
        let give_up = tokio::time::Instant::now() + LEASE_TRIES_FOR;
        loop {
            match self.backend.lease(run_id, id).await {
                Ok(held) => return held,
                Err(e) if tokio::time::Instant::now() >= give_up => {
                    tracing::warn!(run_id, "cannot confirm the turn's lease, so it does not run here: {e}");
                    return false;
                }
                Err(e) => tracing::debug!(run_id, "cannot confirm the turn's lease yet: {e}"),
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }

    /// Forgets `run_id`'s written-down turn once it ended here.
    pub async fn finish(&self, run_id: &str) {
        if let Err(e) = self.backend.finish(run_id).await {
            tracing::warn!(run_id, "cannot forget the turn's checkpoint: {e}");
        }
    }

    /// One turn of bot `scope` left waiting by a replica that is gone, decided (or
    /// expired), now held here to resume.
    pub async fn take_orphan(&self, scope: &str) -> Option<Orphan> {
        self.backend.take_orphan(scope).await.unwrap_or_else(|e| {
            tracing::debug!("cannot look for turns left waiting: {e}");
            None
        })
    }

    /// The approval pending in `conversation` of bot `scope` whose prompt is message
    /// `prompt` (asked by another replica: a reply to it decides it).
    pub async fn approval_prompted(&self, scope: &str, conversation: &str, prompt: &str) -> Option<String> {
        self.backend.approval_prompted(scope, conversation, prompt).await.unwrap_or_else(|e| {
            tracing::debug!("cannot look for the approval a reply answers: {e}");
            None
        })
    }

    /// The newest question waiting in `conversation` (of `who`'s surface), asked anywhere.
    pub async fn question_in(&self, conversation: &str, who: Who<'_>) -> Option<String> {
        let found = self.backend.pending_question(conversation).await.unwrap_or_else(|e| {
            tracing::debug!("cannot look for a pending question: {e}");
            None
        })?;
        let entry = self.get(&found, Kind::Question, who).await.ok()??;
        entry.outcome.is_none().then_some(found)
    }
}

/// Runs `work` to its end now when it needs no wait (the in-process backend's), else in
/// the background (a database's), so that a synchronous caller never blocks on it (outside
/// a runtime, what is left is dropped).
fn now_or_later(work: impl std::future::Future<Output = ()> + Send + 'static) {
    let mut work = Box::pin(work);
    if (&mut work).now_or_never().is_none()
        && let Ok(runtime) = tokio::runtime::Handle::try_current()
    {
        runtime.spawn(work);
    }
}

/// The record's event for a wait the clock (`expired`) or the run (`cancelled`) ended.
fn ended_event(outcome: &Outcome) -> &'static str {
    if *outcome == Outcome::TimedOut { "expired" } else { "cancelled" }
}

/// Appends to the record each entry the backend ended itself, while `broker` lives.
async fn record_ended(broker: Weak<Broker>, mut ended: broadcast::Receiver<Entry>) {
    loop {
        let entry = match ended.recv().await {
            Ok(entry) => entry,
            Err(broadcast::error::RecvError::Lagged(missed)) => {
                tracing::warn!(missed, "entries that ended unwatched are missing from the record");
                continue;
            }
            Err(broadcast::error::RecvError::Closed) => return,
        };
        let Some(broker) = broker.upgrade() else { return };
        let Some(outcome) = Outcome::of(&entry) else { continue };
        let _ = broker.note(&entry, ended_event(&outcome), Some(&outcome)).await;
    }
}

/// The wait on one entry. Dropped before it ends (the turn was cut off), the entry is
/// cancelled.
pub struct Ticket {
    broker: Arc<Broker>,
    entry: Entry,
    rx: Option<oneshot::Receiver<Outcome>>,
    resumable: bool,
}

impl Ticket {
    /// The entry as opened.
    pub fn entry(&self) -> &Entry {
        &self.entry
    }

    /// Its id.
    pub fn id(&self) -> &str {
        &self.entry.id
    }

    /// Whether the turn was written down with it (another replica may resume it).
    pub fn resumable(&self) -> bool {
        self.resumable
    }

    /// Waits for the outcome until the entry expires; the outcome is recorded as final.
    pub async fn wait(mut self) -> Outcome {
        let left = self.entry.expires_at.duration_since(SystemTime::now()).unwrap_or_default();
        let outcome = match self.rx.take() {
            Some(rx) => match tokio::time::timeout(left, rx).await {
                Ok(Ok(outcome)) => outcome,
                Ok(Err(_)) => Outcome::Cancelled,
                Err(_) => Outcome::TimedOut,
            },
            None => Outcome::Cancelled,
        };
        if !outcome.by_person() {
            self.broker.settle(&self.entry.id, &outcome);
        }
        outcome
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        // Not waited on, and not decided meanwhile (a decision delivered here is final).
        if self.rx.is_some() && self.broker.waiters.lock().contains_key(&self.entry.id) {
            self.broker.settle(&self.entry.id, &Outcome::Cancelled);
        }
    }
}

/// How often pending entries are looked up while notifications flow (a safety net; a lost
/// listening connection makes the listener ask for a look every second).
const POLL: Duration = Duration::from_secs(5);

/// Takes the decisions the database announces for this replica, and looks at every entry
/// waited on here now and then, while `broker` lives.
async fn deliver(broker: Weak<Broker>, mut decided: broadcast::Receiver<Announced>) {
    let mut poll = tokio::time::interval(POLL);
    poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let one = tokio::select! {
            announced = decided.recv() => match announced {
                Ok(announced) if !announced.id.is_empty() => Some(announced),
                Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => None,
                Err(broadcast::error::RecvError::Closed) => return,
            },
            _ = poll.tick() => None,
        };
        let Some(broker) = broker.upgrade() else { return };
        let announced = match one {
            Some(announced) => vec![announced],
            None => {
                broker.wake_tasks();
                let ids = broker.decided_here().await;
                ids.into_iter().map(|id| Announced { id, by: None, outcome: None }).collect()
            }
        };
        broker.take(announced).await;
    }
}
