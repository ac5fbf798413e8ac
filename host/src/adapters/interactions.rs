//! Pending approvals and questions, shared by the runs that wait on them and the routes that
//! decide them. One lock per table: of two concurrent decisions exactly one finds the entry
//! pending; the other sees its outcome (200 if the same, 409 if not).
//!
//! With the state in PostgreSQL the entries are also rows of the shared database
//! ([`Decisions`]): the routes decide there, on whichever replica the request reached, and
//! the replica whose run waits is woken by the database's notification (or, while its
//! listening connection is lost, by polling) and hands the decision to the run here.

use crate::store::StateStore;
use crate::store::state::postgres::decisions::{Announced, Decisions, Kind};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::{broadcast, oneshot};

/// How long a resolved entry stays readable through the status routes.
pub const RETENTION: Duration = Duration::from_secs(3600);

/// How an approval or question ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolution {
    /// The person approved.
    Approved,
    /// The person denied.
    Denied,
    /// The person answered.
    Answered(String),
    /// Nobody decided in time.
    TimedOut,
    /// The run ended (client disconnected, turn cut off) before a decision.
    Cancelled,
}

impl Resolution {
    /// The spec's outcome name.
    pub fn name(&self) -> &'static str {
        match self {
            Resolution::Approved => "approved",
            Resolution::Denied => "denied",
            Resolution::Answered(_) => "answered",
            Resolution::TimedOut => "timed_out",
            Resolution::Cancelled => "cancelled",
        }
    }

    /// A person's decision (rather than the run or the clock ending the wait).
    fn by_person(&self) -> bool {
        matches!(self, Resolution::Approved | Resolution::Denied | Resolution::Answered(_))
    }

    /// The resolution a stored outcome names.
    pub fn from_stored(outcome: &str, answer: Option<&str>) -> Resolution {
        match outcome {
            "approved" => Resolution::Approved,
            "denied" => Resolution::Denied,
            "answered" => Resolution::Answered(answer.unwrap_or_default().to_owned()),
            "timed_out" => Resolution::TimedOut,
            _ => Resolution::Cancelled,
        }
    }

    /// The answer, for a question answered.
    pub fn answer(&self) -> Option<&str> {
        match self {
            Resolution::Answered(a) => Some(a),
            _ => None,
        }
    }
}

/// Who an entry belongs to and when it expires.
#[derive(Debug, Clone)]
pub struct Owner {
    /// The run waiting on it.
    pub run_id: String,
    /// The run's channel.
    pub channel_id: String,
    /// When the run stops waiting.
    pub expires_at: SystemTime,
}

/// An entry as the routes show it.
#[derive(Debug, Clone)]
pub struct Snapshot<I> {
    /// Its id.
    pub id: String,
    /// What kind-specific data it holds (level; prompt and choices).
    pub info: I,
    /// Its owner.
    pub owner: Owner,
    /// `None` while pending.
    pub outcome: Option<Resolution>,
}

/// Why a decision was refused.
#[derive(Debug)]
pub enum DecideError<I> {
    /// Unknown, expired or cancelled (410).
    Gone,
    /// Already decided differently (409).
    Conflict(Snapshot<I>),
    /// The decision itself is invalid (400); the entry stays pending.
    Invalid(String),
}

enum State {
    Pending(Option<oneshot::Sender<Resolution>>),
    Done(Resolution, Instant),
}

struct Entry<I> {
    info: I,
    owner: Owner,
    state: State,
}

impl<I: Clone> Entry<I> {
    fn snapshot(&self, id: &str) -> Snapshot<I> {
        let outcome = match &self.state {
            State::Pending(_) => None,
            State::Done(r, _) => Some(r.clone()),
        };
        Snapshot { id: id.into(), info: self.info.clone(), owner: self.owner.clone(), outcome }
    }
}

/// One kind of pending interaction, by id.
pub struct Table<I> {
    inner: Mutex<Inner<I>>,
}

struct Inner<I> {
    entries: HashMap<String, Entry<I>>,
    /// The ids each run opened, so that a run's end cancels its own entries without reading
    /// every entry of the last hour.
    by_run: HashMap<String, Vec<String>>,
}

impl<I> Default for Table<I> {
    fn default() -> Self {
        Table { inner: Mutex::new(Inner { entries: HashMap::new(), by_run: HashMap::new() }) }
    }
}

impl<I: Clone> Table<I> {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner<I>> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers a pending entry; the receiver gets the person's decision, or an error when
    /// the entry is cancelled.
    pub fn open(&self, id: &str, owner: Owner, info: I) -> oneshot::Receiver<Resolution> {
        let (tx, rx) = oneshot::channel();
        let mut inner = self.lock();
        let Inner { entries, by_run } = &mut *inner;
        if entries.len().is_multiple_of(64) {
            entries.retain(|_, e| !matches!(e.state, State::Done(_, at) if at.elapsed() > RETENTION));
            by_run.retain(|_, ids| {
                ids.retain(|id| entries.contains_key(id));
                !ids.is_empty()
            });
        }
        by_run.entry(owner.run_id.clone()).or_default().push(id.into());
        entries.insert(id.into(), Entry { info, owner, state: State::Pending(Some(tx)) });
        rx
    }

    /// The entry, if known.
    pub fn get(&self, id: &str) -> Option<Snapshot<I>> {
        self.lock().entries.get(id).map(|e| e.snapshot(id))
    }

    /// A person's decision. `check` validates it against the entry (the confirmation
    /// challenge); repeating the recorded decision succeeds again.
    pub fn decide(
        &self,
        id: &str,
        decision: Resolution,
        check: impl FnOnce(&I) -> Result<(), String>,
    ) -> Result<Snapshot<I>, DecideError<I>> {
        let mut inner = self.lock();
        let entry = inner.entries.get_mut(id).ok_or(DecideError::Gone)?;
        check(&entry.info).map_err(DecideError::Invalid)?;
        match &mut entry.state {
            State::Done(recorded, _) if *recorded == decision => return Ok(entry.snapshot(id)),
            State::Done(recorded, _) if recorded.by_person() => return Err(DecideError::Conflict(entry.snapshot(id))),
            State::Done(..) => return Err(DecideError::Gone),
            State::Pending(tx) => {
                let delivered = SystemTime::now() < entry.owner.expires_at
                    && tx.take().is_some_and(|tx| tx.send(decision.clone()).is_ok());
                if !delivered {
                    let ended = if SystemTime::now() < entry.owner.expires_at {
                        Resolution::Cancelled
                    } else {
                        Resolution::TimedOut
                    };
                    entry.state = State::Done(ended, Instant::now());
                    return Err(DecideError::Gone);
                }
                entry.state = State::Done(decision, Instant::now());
            }
        }
        Ok(entry.snapshot(id))
    }

    /// Hands a decision taken elsewhere (another replica) to the run waiting on `id`; the
    /// entry's data when it was pending here, so that the caller announces it.
    pub fn deliver(&self, id: &str, resolution: Resolution) -> Option<I> {
        let mut inner = self.lock();
        let entry = inner.entries.get_mut(id)?;
        let State::Pending(tx) = &mut entry.state else { return None };
        if let Some(tx) = tx.take() {
            let _ = tx.send(resolution.clone());
        }
        entry.state = State::Done(resolution, Instant::now());
        Some(entry.info.clone())
    }

    /// Whether `id` is pending here.
    pub fn is_pending(&self, id: &str) -> bool {
        self.lock().entries.get(id).is_some_and(|e| matches!(e.state, State::Pending(_)))
    }

    /// The ids of the entries still pending here.
    pub fn pending(&self) -> Vec<String> {
        let inner = self.lock();
        inner.entries.iter().filter(|(_, e)| matches!(e.state, State::Pending(_))).map(|(id, _)| id.clone()).collect()
    }

    /// Records how the run ended the wait (the engine's word is final).
    pub fn settle(&self, id: &str, resolution: Resolution) {
        if let Some(entry) = self.lock().entries.get_mut(id) {
            entry.state = State::Done(resolution, Instant::now());
        }
    }

    /// Cancels every pending entry of `run_id`.
    pub fn cancel_run(&self, run_id: &str) {
        let mut inner = self.lock();
        let Inner { entries, by_run } = &mut *inner;
        for id in by_run.remove(run_id).unwrap_or_default() {
            if let Some(entry) = entries.get_mut(&id)
                && matches!(entry.state, State::Pending(_))
            {
                entry.state = State::Done(Resolution::Cancelled, Instant::now());
            }
        }
    }

    /// How many entries are held (pending and recently resolved).
    pub fn len(&self) -> usize {
        self.lock().entries.len()
    }

    /// No entry is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// What an approval entry holds besides its owner.
#[derive(Clone)]
pub struct ApprovalInfo {
    /// The challenge an approval must repeat (`confirm` level), if any.
    pub challenge: Option<&'static str>,
    /// The run that asked, to announce the decision where the person sees it.
    pub run: std::sync::Weak<dyn Announce>,
}

/// Where a run announces a person's decision or answer at once, from the route (or the
/// click) that took it, rather than when its turn next runs: the API's stream, a chat
/// message to update.
pub trait Announce: Send + Sync {
    /// Approval `approval_id` was decided by a person.
    fn decided(&self, approval_id: &str, approved: bool);
    /// Question `question_id` was answered by a person.
    fn answered(&self, question_id: &str, answer: &str);
}

impl std::fmt::Debug for ApprovalInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApprovalInfo").field("challenge", &self.challenge).finish_non_exhaustive()
    }
}

/// What a question entry holds besides its owner.
#[derive(Clone)]
pub struct QuestionInfo {
    /// The question.
    pub prompt: String,
    /// The suggested answers.
    pub choices: Vec<String>,
    /// The run that asked, to announce the answer where the person sees it.
    pub run: std::sync::Weak<dyn Announce>,
}

impl std::fmt::Debug for QuestionInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QuestionInfo")
            .field("prompt", &self.prompt)
            .field("choices", &self.choices)
            .finish_non_exhaustive()
    }
}

/// Every pending approval and question of the server.
#[derive(Default)]
pub struct Interactions {
    /// Approvals by id.
    pub approvals: Table<ApprovalInfo>,
    /// Questions by id.
    pub questions: Table<QuestionInfo>,
    /// The database the entries are shared through, with `state.backend: postgres`.
    shared: Option<Arc<Decisions>>,
}

impl Interactions {
    /// Interactions of this process alone, unless `state` is PostgreSQL: then shared by the
    /// replicas, with a task that hands this replica's runs the decisions taken elsewhere.
    pub fn for_store(state: &StateStore) -> Arc<Self> {
        let Some(pg) = state.postgres() else { return Arc::default() };
        let decisions = Decisions::of(&pg);
        let decided = decisions.subscribe();
        let interactions = Arc::new(Interactions { shared: Some(decisions), ..Interactions::default() });
        tokio::spawn(deliver(Arc::downgrade(&interactions), decided));
        interactions
    }

    /// The shared database, if the entries are shared.
    pub fn shared(&self) -> Option<&Arc<Decisions>> {
        self.shared.as_ref()
    }

    /// Cancels whatever `run_id` still waits on.
    pub fn cancel_run(&self, run_id: &str) {
        self.approvals.cancel_run(run_id);
        self.questions.cancel_run(run_id);
        if let Some(shared) = self.shared.clone() {
            let run_id = run_id.to_owned();
            tokio::spawn(async move {
                if let Err(e) = shared.cancel_run(&run_id).await {
                    tracing::warn!(run_id, "cannot cancel the run's approvals and questions in the database: {e}");
                }
            });
        }
    }

    /// Cancels what `run_id` waits on in this process only, its entries in the shared
    /// database left pending: a turn written down for another replica to finish.
    pub fn cancel_run_here(&self, run_id: &str) {
        self.approvals.cancel_run(run_id);
        self.questions.cancel_run(run_id);
    }

    /// Records in the database how the run ended the wait on `id` (in the background: the
    /// run does not wait for it; an entry left pending is settled by its expiry).
    pub fn settle_shared(&self, id: &str, resolution: &Resolution) {
        if let Some(shared) = self.shared.clone() {
            let (id, resolution) = (id.to_owned(), resolution.clone());
            tokio::spawn(async move {
                if let Err(e) = shared.settle(&id, resolution.name(), resolution.answer()).await {
                    tracing::warn!(id, "cannot record the outcome in the database: {e}");
                }
            });
        }
    }

    /// Hands the runs here the decisions taken on `ids` (those still pending here), and
    /// announces each where its person sees it; what a notification did not carry is read.
    async fn take(&self, announced: Vec<Announced>) {
        let Some(shared) = &self.shared else { return };
        for Announced { id, outcome } in announced {
            let (kind, pending) = if self.approvals.is_pending(&id) {
                (Kind::Approval, true)
            } else {
                (Kind::Question, self.questions.is_pending(&id))
            };
            if !pending {
                continue;
            }
            let (outcome, answer) = match outcome {
                Some(said) => said,
                None => match shared.get(kind, &id).await {
                    Ok(Some(entry)) => match entry.outcome {
                        Some(outcome) => (outcome, entry.answer),
                        None => continue,
                    },
                    Ok(None) => continue,
                    Err(e) => {
                        tracing::warn!(id, "cannot read a decision: {e}");
                        continue;
                    }
                },
            };
            let resolution = Resolution::from_stored(&outcome, answer.as_deref());
            match kind {
                Kind::Approval => {
                    let approved = resolution == Resolution::Approved;
                    let by_person = resolution.by_person();
                    if let Some(info) = self.approvals.deliver(&id, resolution)
                        && let (true, Some(run)) = (by_person, info.run.upgrade())
                    {
                        run.decided(&id, approved);
                    }
                }
                Kind::Question => {
                    let answer = resolution.answer().map(str::to_owned);
                    if let Some(info) = self.questions.deliver(&id, resolution)
                        && let (Some(answer), Some(run)) = (answer, info.run.upgrade())
                    {
                        run.answered(&id, &answer);
                    }
                }
            }
        }
    }

    /// Every id pending here that the database says is decided.
    async fn decided_here(&self) -> Vec<String> {
        let Some(shared) = &self.shared else { return Vec::new() };
        let mut pending = self.approvals.pending();
        pending.extend(self.questions.pending());
        match shared.decided_among(&pending).await {
            Ok(decided) => decided,
            Err(e) => {
                tracing::debug!("cannot look for decisions: {e}");
                Vec::new()
            }
        }
    }
}

/// How often pending entries are looked up while notifications flow (a safety net; a lost
/// listening connection makes the listener ask for a look every second).
const POLL: Duration = Duration::from_secs(5);

/// Takes the decisions the database announces for this replica, and looks at every
/// pending entry now and then, while `interactions` lives.
async fn deliver(interactions: Weak<Interactions>, mut decided: broadcast::Receiver<Announced>) {
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
        let Some(interactions) = interactions.upgrade() else { return };
        let announced = match one {
            Some(announced) => vec![announced],
            None => interactions.decided_here().await.into_iter().map(|id| Announced { id, outcome: None }).collect(),
        };
        interactions.take(announced).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run that is gone: nothing to announce to.
    struct Gone;

    impl Announce for Gone {
        fn decided(&self, _: &str, _: bool) {}
        fn answered(&self, _: &str, _: &str) {}
    }

    fn nobody() -> std::sync::Weak<dyn Announce> {
        std::sync::Weak::<Gone>::new()
    }

    fn owner(secs: u64) -> Owner {
        Owner { run_id: "r".into(), channel_id: "c".into(), expires_at: SystemTime::now() + Duration::from_secs(secs) }
    }

    fn ok(_: &ApprovalInfo) -> Result<(), String> {
        Ok(())
    }

    #[test]
    fn first_decision_wins_same_repeats_differing_conflicts() {
        let table = Table::default();
        let mut rx = table.open("a", owner(60), ApprovalInfo { challenge: None, run: nobody() });
        assert!(table.get("a").unwrap().outcome.is_none());
        assert_eq!(table.decide("a", Resolution::Approved, ok).unwrap().outcome, Some(Resolution::Approved));
        assert_eq!(rx.try_recv().unwrap(), Resolution::Approved);
        assert!(table.decide("a", Resolution::Approved, ok).is_ok());
        assert!(matches!(table.decide("a", Resolution::Denied, ok), Err(DecideError::Conflict(_))));
        assert!(matches!(table.decide("nope", Resolution::Denied, ok), Err(DecideError::Gone)));
    }

    #[test]
    fn invalid_decisions_leave_it_pending() {
        let table = Table::default();
        let _rx = table.open("a", owner(60), ApprovalInfo { challenge: Some("CONFIRM"), run: nobody() });
        let err = table.decide("a", Resolution::Approved, |_| Err("confirmation mismatch".into()));
        assert!(matches!(err, Err(DecideError::Invalid(_))));
        assert!(table.get("a").unwrap().outcome.is_none());
    }

    #[test]
    fn a_run_ending_cancels_only_its_own_pending_entries() {
        let table = Table::default();
        let of = |run: &str| Owner { run_id: run.into(), ..owner(60) };
        let info = || ApprovalInfo { challenge: None, run: nobody() };
        let _rx = (table.open("r1-a", of("r1"), info()), table.open("r1-b", of("r1"), info()));
        let _other = table.open("r2-a", of("r2"), info());
        table.decide("r1-a", Resolution::Approved, ok).unwrap();
        table.cancel_run("r1");
        let outcome = |id: &str| table.get(id).unwrap().outcome;
        assert_eq!(outcome("r1-a"), Some(Resolution::Approved), "a decided entry keeps its outcome");
        assert_eq!(outcome("r1-b"), Some(Resolution::Cancelled));
        assert_eq!(outcome("r2-a"), None, "another run's entry stays pending");
        table.cancel_run("r1");
        table.cancel_run("r2");
        assert_eq!(outcome("r2-a"), Some(Resolution::Cancelled));
        assert_eq!(table.len(), 3, "resolved entries stay readable");
    }

    #[test]
    fn cancelled_expired_and_abandoned_entries_are_gone() {
        let table = Table::default();
        let _rx = table.open("a", owner(60), ApprovalInfo { challenge: None, run: nobody() });
        table.cancel_run("r");
        assert_eq!(table.get("a").unwrap().outcome, Some(Resolution::Cancelled));
        assert!(matches!(table.decide("a", Resolution::Approved, ok), Err(DecideError::Gone)));

        let _rx = table.open("b", owner(0), ApprovalInfo { challenge: None, run: nobody() });
        assert!(matches!(table.decide("b", Resolution::Approved, ok), Err(DecideError::Gone)));
        assert_eq!(table.get("b").unwrap().outcome, Some(Resolution::TimedOut));

        drop(table.open("c", owner(60), ApprovalInfo { challenge: None, run: nobody() }));
        assert!(matches!(table.decide("c", Resolution::Approved, ok), Err(DecideError::Gone)));
        assert_eq!(table.get("c").unwrap().outcome, Some(Resolution::Cancelled));
    }
}
