//! Pending approvals and questions in the shared database, so that a decision reaching any
//! replica settles the entry where its run waits.
//!
//! One row per entry (`skillhost_interactions`), written by the replica whose run asked (its
//! `replica` id) before the person can see its id. A decision is one conditional update
//! (`WHERE outcome IS NULL`): of concurrent decisions on any replicas exactly one wins, and
//! its `NOTIFY skillhost_decisions` wakes the owner, whose listener passes the id on
//! ([`Shared::subscribe`]). Each replica beats in `skillhost_replicas` every
//! [`HEARTBEAT`]; an entry whose owner has not beaten for [`ORPHANED_AFTER`] reads as
//! `cancelled`, and one past its expiry as `timed_out` (written so by the first reader), so
//! nothing stays pending once its run is gone. Times are the database's clock, in Unix
//! seconds.

mod tasks;
mod waiting;

use super::backend::{Backend, Held};
use super::model::{Announced, Decided, Entry, Kind, Orphan, TaskEntry, TaskStep, Who};
use super::{Decision, Outcome, RETENTION};
use crate::store::StateError;
use crate::store::state::postgres::{HEARTBEAT, ORPHANED_AFTER, Postgres};
use deadpool_postgres::GenericClient;
use futures::StreamExt as _;
use serde_json::Value;
use std::sync::{Arc, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::broadcast;
use tokio::task::JoinHandle;

/// The channel decisions are announced on.
const CHANNEL: &str = "skillhost_decisions";

/// The shared entries of one database, as this replica sees them.
pub struct Shared {
    pub(super) pg: Arc<Postgres>,
    /// This process's id among the replicas.
    replica: String,
    /// This replica's entries as they are decided.
    decided: broadcast::Sender<Announced>,
    /// Any entry opened, decided or ended on any replica (every notification), for live views.
    changed: broadcast::Sender<()>,
    /// The entries this replica ended by a read or a sweep (the clock, a replica gone).
    ended: broadcast::Sender<Entry>,
    /// The replica stopped ([`Shared::retire`]): no more heartbeats.
    retired: std::sync::atomic::AtomicBool,
    /// Set once this replica's row is known to exist: an entry of a replica with no row
    /// would read as orphaned. From then on the heartbeat keeps it.
    alive: tokio::sync::OnceCell<()>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Shared({:?}, replica {})", self.pg, self.replica)
    }
}

pub(super) fn unix(t: SystemTime) -> f64 {
    t.duration_since(UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

fn from_unix(seconds: f64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs_f64(seconds.max(0.0))
}

/// The columns [`row`] reads, with the owner's liveness and the expiry judged by the
/// database's clock.
const SELECT: &str = "SELECT i.id, i.kind, i.run_id, i.channel_id, i.expires_at, i.challenge, i.prompt, i.choices,
        i.outcome, i.answer, i.agent, i.surface, i.deciders, i.presentation, i.decided_by, i.decided_token,
        i.expires_at <= extract(epoch FROM clock_timestamp())::float8 AS expired,
        (NOT i.durable AND coalesce(r.seen_at < extract(epoch FROM clock_timestamp())::float8 - $2, true)) AS orphaned
    FROM skillhost_interactions i LEFT JOIN skillhost_replicas r ON r.id = i.replica";

fn row(r: &tokio_postgres::Row) -> (Entry, bool, bool) {
    (entry(r), r.get(16), r.get(17))
}

/// The columns [`entry`] reads, in its order.
pub(super) const COLUMNS: &str =
    "id, kind, run_id, channel_id, expires_at, challenge, prompt, choices, outcome, answer,
    agent, surface, deciders, presentation, decided_by, decided_token";

/// The entry in columns 0 to 15 of `r` ([`COLUMNS`]).
pub(super) fn entry(r: &tokio_postgres::Row) -> Entry {
    let kind = if r.get::<_, &str>(1) == "question" { Kind::Question } else { Kind::Approval };
    let choices: Option<String> = r.get(7);
    Entry {
        id: r.get(0),
        kind,
        run_id: r.get(2),
        channel_id: r.get(3),
        expires_at: from_unix(r.get(4)),
        challenge: r.get(5),
        prompt: r.get(6),
        choices: choices.and_then(|c| serde_json::from_str(&c).ok()).unwrap_or_default(),
        outcome: r.get(8),
        answer: r.get(9),
        agent: r.get(10),
        surface: r.get(11),
        deciders: r.get::<_, Option<String>>(12).and_then(|d| serde_json::from_str(&d).ok()).unwrap_or_default(),
        presentation: r.get(13),
        decided_by: r.get(14),
        decided_token: r.get(15),
    }
}

/// An entry's `deciders` as stored: NULL for anyone.
pub(super) fn deciders(entry: &Entry) -> Option<String> {
    (!entry.deciders.is_empty()).then(|| serde_json::to_string(&entry.deciders).unwrap_or_default())
}

impl Shared {
    /// This process, a new replica among those of `pg`'s database; it says so once its
    /// tasks run ([`Shared::run`]).
    pub fn new(pg: Arc<Postgres>) -> Arc<Shared> {
        let replica = crate::store::random_id().unwrap_or_else(|_| format!("pid-{}", std::process::id()));
        let (decided, _) = broadcast::channel(1024);
        let changed = broadcast::channel(64).0;
        let ended = broadcast::channel(256).0;
        let (retired, alive) = (Default::default(), Default::default());
        Arc::new(Shared { pg, replica, decided, changed, ended, retired, alive })
    }

    /// Starts the heartbeat (with the sweep) and the listener, which run while these tasks
    /// and the replica live.
    pub fn run(self: &Arc<Self>) -> Vec<JoinHandle<()>> {
        vec![tokio::spawn(beat(Arc::downgrade(self))), tokio::spawn(listen(Arc::downgrade(self)))]
    }

    /// This replica's id.
    pub fn replica(&self) -> &str {
        &self.replica
    }

    /// Inserts pending `entry` of this replica (`durable`: never cancelled because the
    /// replica went silent) and announces it, through `c` (a transaction, when a turn is
    /// written down with it).
    async fn insert(&self, c: &impl GenericClient, entry: &Entry, durable: bool) -> Result<(), StateError> {
        let choices = (entry.kind == Kind::Question).then(|| serde_json::to_string(&entry.choices).unwrap_or_default());
        c.execute(
            "WITH opened AS (INSERT INTO skillhost_interactions
                (id, kind, run_id, channel_id, replica, expires_at, challenge, prompt, choices, created_at,
                 agent, surface, deciders, presentation, durable)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, extract(epoch FROM clock_timestamp())::float8,
                 $10, $11, $12, $13, $14) RETURNING id)
             SELECT pg_notify('skillhost_decisions', '* opened ' || id) FROM opened",
            &[
                &entry.id,
                &entry.kind.as_str(),
                &entry.run_id,
                &entry.channel_id,
                &self.replica,
                &unix(entry.expires_at),
                &entry.challenge,
                &entry.prompt,
                &choices,
                &entry.agent,
                &entry.surface,
                &deciders(entry),
                &entry.presentation,
                &durable,
            ],
        )
        .await
        .map(drop)
        .map_err(|e| self.pg.error(e))
    }

    pub(super) async fn settle_pending(&self, id: &str, outcome: &str) -> Result<(), StateError> {
        let c = self.pg.client().await?;
        let sql = format!(
            "UPDATE skillhost_interactions SET outcome = $2, decided_at = extract(epoch FROM clock_timestamp())::float8
             WHERE id = $1 AND outcome IS NULL RETURNING {COLUMNS}"
        );
        let ended = c.query_opt(&sql, &[&id, &outcome]).await.map_err(|e| self.pg.error(e))?;
        if let Some(row) = ended {
            let _ = self.ended.send(entry(&row));
        }
        Ok(())
    }

    /// Makes sure this replica's row exists before it records anything the others read
    /// by it: one beat, the first time (the heartbeat keeps it from then on).
    pub(super) async fn alive(&self) -> Result<(), StateError> {
        self.alive.get_or_try_init(|| self.beat()).await.map(drop)
    }

    pub(super) async fn beat(&self) -> Result<(), StateError> {
        if self.retired.load(std::sync::atomic::Ordering::SeqCst) {
            return Ok(());
        }
        let c = self.pg.client().await?;
        c.execute(
            "INSERT INTO skillhost_replicas (id, started_at, seen_at)
                VALUES ($1, extract(epoch FROM clock_timestamp())::float8, extract(epoch FROM clock_timestamp())::float8)
             ON CONFLICT (id) DO UPDATE SET seen_at = EXCLUDED.seen_at",
            &[&self.replica],
        )
        .await
        .map(drop)
        .map_err(|e| self.pg.error(e))
    }

    /// Settles what nobody will decide any more (entries past their expiry, entries of
    /// replicas gone silent) and forgets resolved entries past [`RETENTION`] and replicas
    /// silent for as long.
    async fn sweep(&self) -> Result<(), StateError> {
        let c = self.pg.client().await?;
        let (orphaned, retention) = (ORPHANED_AFTER.as_secs_f64(), RETENTION.as_secs_f64());
        let ended = c
            .query(
                &format!(
                    "UPDATE skillhost_interactions i SET outcome = CASE
                    WHEN i.expires_at <= extract(epoch FROM clock_timestamp())::float8 THEN 'timed_out' ELSE 'cancelled' END,
                decided_at = extract(epoch FROM clock_timestamp())::float8
             WHERE i.outcome IS NULL AND (i.expires_at <= extract(epoch FROM clock_timestamp())::float8
                OR NOT i.durable AND NOT EXISTS (SELECT 1 FROM skillhost_replicas r
                    WHERE r.id = i.replica AND r.seen_at >= extract(epoch FROM clock_timestamp())::float8 - $1))
             RETURNING {COLUMNS}"
                ),
                &[&orphaned],
            )
            .await
            .map_err(|e| self.pg.error(e))?;
        for row in &ended {
            let _ = self.ended.send(entry(row));
        }
        c.execute(
            "DELETE FROM skillhost_interactions i
             WHERE outcome IS NOT NULL AND decided_at < extract(epoch FROM clock_timestamp())::float8 - $1
               AND NOT EXISTS (SELECT 1 FROM skillhost_waiting_turns t WHERE t.approval_id = i.id)",
            &[&retention],
        )
        .await
        .map_err(|e| self.pg.error(e))?;
        self.sweep_waiting().await?;
        self.sweep_tasks().await?;
        c.execute(
            "DELETE FROM skillhost_replicas WHERE seen_at < extract(epoch FROM clock_timestamp())::float8 - $1",
            &[&retention],
        )
        .await
        .map(drop)
        .map_err(|e| self.pg.error(e))
    }
}

#[async_trait::async_trait]
impl Backend for Shared {
    fn durable(&self) -> bool {
        true
    }

    fn replica(&self) -> Option<&str> {
        Some(&self.replica)
    }

    fn announcements(&self) -> Option<broadcast::Receiver<Announced>> {
        Some(self.decided.subscribe())
    }

    fn changes(&self) -> Option<broadcast::Receiver<()>> {
        Some(self.changed.subscribe())
    }

    fn ended(&self) -> broadcast::Receiver<Entry> {
        self.ended.subscribe()
    }

    /// Records a pending entry of this replica; one nobody waits on is never cancelled
    /// because the replica that asked went silent, only by its expiry; one written down is
    /// recorded with its turn, in one transaction.
    async fn open(&self, entry: &Entry, held: Held<'_>) -> Result<(), StateError> {
        self.alive().await?;
        match held {
            Held::Here => self.insert(&self.pg.client().await?, entry, false).await,
            Held::Nobody => self.insert(&self.pg.client().await?, entry, true).await,
            Held::Written(waiting) => self.wait_durably(entry, waiting).await,
        }
    }

    /// This replica stops: its entries that nobody can decide any more (those not written
    /// down) read `cancelled` at once, and its heartbeat goes (and stays gone), so that the
    /// turns it left written down are resumed by another replica at once.
    async fn retire(&self) -> Result<(), StateError> {
        self.retired.store(true, std::sync::atomic::Ordering::SeqCst);
        self.retire_tasks().await?;
        let c = self.pg.client().await?;
        c.execute(
            "UPDATE skillhost_interactions SET outcome = 'cancelled',
                decided_at = extract(epoch FROM clock_timestamp())::float8
             WHERE replica = $1 AND outcome IS NULL AND NOT durable",
            &[&self.replica],
        )
        .await
        .map_err(|e| self.pg.error(e))?;
        c.execute("DELETE FROM skillhost_replicas WHERE id = $1", &[&self.replica])
            .await
            .map(drop)
            .map_err(|e| self.pg.error(e))
    }

    /// The entry `id` of `kind`, with a pending one past its expiry or whose owner is gone
    /// settled first (`timed_out`, `cancelled`).
    async fn get(&self, kind: Kind, id: &str) -> Result<Option<Entry>, StateError> {
        let query = format!("{SELECT} WHERE i.id = $1 AND i.kind = $3");
        let orphaned = ORPHANED_AFTER.as_secs_f64();
        loop {
            let c = self.pg.client().await?;
            let found = c.query_opt(&query, &[&id, &orphaned, &kind.as_str()]).await.map_err(|e| self.pg.error(e))?;
            let Some(found) = found else { return Ok(None) };
            let (entry, expired, orphaned) = row(&found);
            if entry.outcome.is_some() || !(expired || orphaned) {
                return Ok(Some(entry));
            }
            // Settled now, by whoever reads it first; read again (a decision may have won).
            self.settle_pending(id, if expired { "timed_out" } else { "cancelled" }).await?;
        }
    }

    /// A person's decision (`approved`, `denied`, or `answered` with `answer`) taken by
    /// `who`, with the `confirmation` a `confirm`-level approval must repeat. One statement
    /// when it wins (pending, not expired, its replica alive, confirmed, `who` may decide
    /// it): the update and the notification to the owner. Repeating the recorded decision
    /// is [`Decided::Same`]; an entry `who` may not decide is [`Decided::Gone`], as an
    /// unknown one.
    async fn decide(&self, id: &str, who: Who<'_>, decision: &Decision) -> Result<Decided, StateError> {
        let (kind, confirmation, outcome) = (decision.kind(), decision.confirmation(), decision.outcome());
        let (answer, outcome) = (outcome.stored_text(), outcome.name());
        let c = self.pg.client().await?;
        let orphaned = ORPHANED_AFTER.as_secs_f64();
        let user = who.user.replace(' ', "_");
        let won = c
            .query_opt(
                "WITH won AS (
                    UPDATE skillhost_interactions i SET outcome = $2, answer = $3,
                        decided_at = extract(epoch FROM clock_timestamp())::float8,
                        decided_by = CASE WHEN $9::text IS NULL AND i.surface <> 'api' THEN 'console' ELSE $10 END,
                        decided_token = $12
                    WHERE i.id = $1 AND i.kind = $5 AND i.outcome IS NULL
                      AND i.expires_at > extract(epoch FROM clock_timestamp())::float8
                      AND (i.challenge IS NULL OR $2 <> 'approved' OR i.challenge = $6)
                      AND i.agent = $8
                      AND ($9::text IS NULL AND i.surface <> 'mcp' OR (i.surface = $9
                          AND (i.deciders IS NULL OR i.deciders::jsonb ? $10)))
                      AND ($11::text IS NULL OR i.channel_id = $11 OR starts_with(i.channel_id, $11 || '/'))
                      AND (i.durable OR EXISTS (SELECT 1 FROM skillhost_replicas r WHERE r.id = i.replica
                          AND r.seen_at >= extract(epoch FROM clock_timestamp())::float8 - $7))
                    RETURNING i.id, i.kind, i.run_id, i.channel_id, i.expires_at, i.challenge, i.prompt,
                        i.choices, i.outcome, i.answer, i.agent, i.surface, i.deciders, i.presentation,
                        i.decided_by, i.decided_token, i.replica)
                 SELECT won.*, pg_notify($4, won.replica || ' ' || won.decided_by || ' ' || CASE
                        WHEN won.answer IS NULL THEN won.outcome || ' ' || won.id
                        WHEN octet_length(won.answer) < 7000 THEN won.outcome || ' ' || won.id || ' ' || won.answer
                        ELSE 'unsaid ' || won.id END)
                 FROM won",
                &[
                    &id,
                    &outcome,
                    &answer,
                    &CHANNEL,
                    &kind.as_str(),
                    &confirmation,
                    &orphaned,
                    &who.agent,
                    &who.surface,
                    &user,
                    &who.conversation,
                    &who.token,
                ],
            )
            .await
            .map_err(|e| self.pg.error(e))?;
        if let Some(won) = won {
            return Ok(Decided::Won(entry(&won)));
        }
        // Not won: not theirs, settled before (the same, another person's, the run's end),
        // expired, its replica gone, or not confirmed.
        let Some(entry) = self.get(kind, id).await? else { return Ok(Decided::Gone) };
        if !who.may(&entry) {
            return Ok(Decided::Gone);
        }
        Ok(match entry.outcome.as_deref() {
            None if entry.challenge.is_some() && outcome == "approved" => Decided::Unconfirmed,
            // Pending still: it was settled and read again between the two statements.
            None => Decided::Gone,
            Some(o) if o == outcome && entry.answer.as_deref() == answer => Decided::Same(entry),
            Some("approved" | "denied" | "answered") => Decided::Conflict(entry),
            _ => Decided::Gone,
        })
    }

    /// The entries of `agent` of `kind` still waiting for a person, on every replica, oldest
    /// first.
    async fn waiting(&self, agent: &str, kind: Kind) -> Result<Vec<Entry>, StateError> {
        let query = format!("{SELECT} WHERE i.agent = $1 AND i.kind = $3 AND i.outcome IS NULL ORDER BY i.created_at");
        let c = self.pg.client().await?;
        let rows = c
            .query(&query, &[&agent, &ORPHANED_AFTER.as_secs_f64(), &kind.as_str()])
            .await
            .map_err(|e| self.pg.error(e))?;
        Ok(rows.iter().map(row).filter(|(_, expired, orphaned)| !expired && !orphaned).map(|(e, ..)| e).collect())
    }

    /// Every entry of `agent`'s run `run_id`, on every replica, oldest first, each read as
    /// [`Shared::get`] reads it (a pending one whose replica is gone reads `cancelled`).
    async fn of_run(&self, agent: &str, run_id: &str) -> Result<Vec<Entry>, StateError> {
        let ids = {
            let c = self.pg.client().await?;
            let rows = c
                .query(
                    "SELECT id, kind FROM skillhost_interactions WHERE agent = $1 AND run_id = $2 ORDER BY created_at",
                    &[&agent, &run_id],
                )
                .await
                .map_err(|e| self.pg.error(e))?;
            rows.iter().map(|r| (r.get::<_, String>(0), r.get::<_, String>(1))).collect::<Vec<_>>()
        };
        let mut entries = Vec::with_capacity(ids.len());
        for (id, kind) in ids {
            let kind = if kind == "question" { Kind::Question } else { Kind::Approval };
            entries.extend(self.get(kind, &id).await?);
        }
        Ok(entries)
    }

    /// Records how the run ended the wait (the engine's word is final).
    async fn settle(&self, id: &str, outcome: &Outcome) -> Result<bool, StateError> {
        let (outcome, answer) = (outcome.name(), outcome.stored_text());
        let c = self.pg.client().await?;
        c.execute(
            "WITH ended AS (UPDATE skillhost_interactions SET outcome = $2, answer = $3,
                decided_at = coalesce(decided_at, extract(epoch FROM clock_timestamp())::float8)
             WHERE id = $1 AND outcome IS DISTINCT FROM $2 RETURNING id)
             SELECT pg_notify('skillhost_decisions', '* ended ' || id) FROM ended",
            &[&id, &outcome, &answer],
        )
        .await
        .map(|ended| ended > 0)
        .map_err(|e| self.pg.error(e))
    }

    /// Cancels every pending entry of `run_id`.
    async fn cancel_run(&self, run_id: &str) -> Result<(), StateError> {
        let c = self.pg.client().await?;
        c.execute(
            "WITH ended AS (UPDATE skillhost_interactions SET outcome = 'cancelled',
                decided_at = extract(epoch FROM clock_timestamp())::float8
             WHERE run_id = $1 AND outcome IS NULL RETURNING id)
             SELECT pg_notify('skillhost_decisions', '* ended ' || id) FROM ended",
            &[&run_id],
        )
        .await
        .map(drop)
        .map_err(|e| self.pg.error(e))
    }

    /// Which of `ids` (this replica's pending ones) have been decided: the polling side of
    /// the wake-up, for notifications a lost connection missed.
    async fn decided_among(&self, ids: &[String]) -> Result<Vec<String>, StateError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let c = self.pg.client().await?;
        let rows = c
            .query("SELECT id FROM skillhost_interactions WHERE id = ANY($1) AND outcome IS NOT NULL", &[&ids])
            .await
            .map_err(|e| self.pg.error(e))?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }

    async fn pending_question(&self, conversation: &str) -> Result<Option<String>, StateError> {
        self.pending_question(conversation).await
    }

    async fn prompted(&self, run_id: &str, prompt: &str) -> Result<(), StateError> {
        self.prompted(run_id, prompt).await
    }

    async fn rewrite(&self, run_id: &str, checkpoint: &str) -> Result<(), StateError> {
        self.rewrite(run_id, checkpoint).await
    }

    async fn lease(&self, run_id: &str, id: &str) -> Result<bool, StateError> {
        self.lease(run_id, id).await
    }

    async fn finish(&self, run_id: &str) -> Result<(), StateError> {
        self.finish(run_id).await
    }

    async fn take_orphan(&self, scope: &str) -> Result<Option<Orphan>, StateError> {
        self.take_orphan(scope).await
    }

    async fn approval_prompted(
        &self,
        scope: &str,
        conversation: &str,
        prompt: &str,
    ) -> Result<Option<String>, StateError> {
        self.approval_prompted(scope, conversation, prompt).await
    }

    async fn task_create(&self, id: &str, agent: &str, tool: &str, ttl: Duration) -> Result<TaskEntry, StateError> {
        self.task_create(id, agent, tool, ttl).await
    }

    async fn task_get(&self, id: &str, agent: &str) -> Result<Option<TaskEntry>, StateError> {
        self.task_get(id, agent).await
    }

    async fn task_set(&self, id: &str, step: TaskStep<'_>) -> Result<bool, StateError> {
        self.task_set(id, step).await
    }

    async fn task_answer(&self, id: &str, agent: &str, responses: &Value) -> Result<bool, StateError> {
        self.task_answer(id, agent, responses).await
    }

    async fn task_take_answers(&self, id: &str) -> Result<Option<Value>, StateError> {
        self.task_take_answers(id).await
    }

    async fn task_cancel(&self, id: &str, agent: &str) -> Result<bool, StateError> {
        self.task_cancel(id, agent).await
    }
}

/// Beats every [`HEARTBEAT`] and sweeps every tenth beat, while the decisions live.
async fn beat(decisions: Weak<Shared>) {
    let mut tick = tokio::time::interval(HEARTBEAT);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    for n in 0u64.. {
        tick.tick().await;
        let Some(d) = decisions.upgrade() else { return };
        if let Err(e) = d.beat().await {
            tracing::warn!("replica heartbeat: {e}");
        }
        if n.is_multiple_of(10)
            && let Err(e) = d.sweep().await
        {
            tracing::warn!("sweeping approvals and questions nobody will decide: {e}");
        }
    }
}

/// Listens for decisions on a connection of its own, and passes this replica's ids on;
/// after a lost connection, reconnects (every second) and asks for a look at every pending
/// entry, since notifications sent meanwhile are lost.
async fn listen(decisions: Weak<Shared>) {
    let mut first = true;
    loop {
        let Some(d) = decisions.upgrade() else { return };
        let (pg, replica, decided, changed) = (d.pg.clone(), d.replica.clone(), d.decided.clone(), d.changed.clone());
        drop(d);
        match pg.listen(CHANNEL).await {
            Ok((client, mut notes)) => {
                if !first {
                    tracing::info!("listening for decisions again");
                }
                let _ = decided.send(Announced { id: String::new(), by: None, outcome: None });
                while let Some(payload) = notes.next().await {
                    let _ = changed.send(());
                    if let Some(announced) = announced(&payload, &replica) {
                        let _ = decided.send(announced);
                    }
                }
                drop(client);
                tracing::warn!("the connection listening for decisions was lost; polling until it is back");
            }
            Err(e) if first => tracing::warn!("cannot listen for decisions yet: {e}"),
            Err(_) => {}
        }
        first = false;
        let _ = decided.send(Announced { id: String::new(), by: None, outcome: None });
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// A notification's payload (`<replica> <by> <outcome> <id>[ <answer>]`, or `<replica> <by>
/// unsaid <id>` when the answer was too long to carry), if it is for `replica`.
fn announced(payload: &str, replica: &str) -> Option<Announced> {
    let (to, rest) = payload.split_once(' ')?;
    if to != replica {
        return None;
    }
    let (by, rest) = rest.split_once(' ')?;
    let (outcome, rest) = rest.split_once(' ')?;
    let (id, answer) = match rest.split_once(' ') {
        Some((id, answer)) => (id, Some(answer.to_owned())),
        None => (rest, None),
    };
    let outcome = (outcome != "unsaid").then(|| (outcome.to_owned(), answer));
    Some(Announced { id: id.to_owned(), by: Some(by.to_owned()), outcome })
}
