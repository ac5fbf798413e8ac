//! The in-process backend: the entries of this process, under one lock, so that of two
//! concurrent decisions exactly one finds the entry pending. The same rules as the shared
//! database's one statement ([`crate::store::state::postgres::decisions::Decisions::decide`]).

use super::{Decided, Decision, Entry, Kind, Outcome, RETENTION, Who};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::time::{Instant, SystemTime};

/// The entries of this process, by id.
#[derive(Default)]
pub(super) struct Ledger {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// Each entry, with when it was resolved.
    entries: HashMap<String, (Entry, Option<Instant>)>,
    /// The ids each run opened, so that a run's end cancels its own entries without reading
    /// every entry of the last hour.
    by_run: HashMap<String, Vec<String>>,
}

impl Inner {
    /// Forgets entries resolved longer than [`RETENTION`] ago.
    fn sweep(&mut self) {
        let Inner { entries, by_run } = self;
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
        }
        Some(held)
    }
}

impl Ledger {
    pub(super) fn open(&self, entry: Entry) {
        let mut inner = self.inner.lock();
        if inner.entries.len().is_multiple_of(64) {
            inner.sweep();
        }
        inner.by_run.entry(entry.run_id.clone()).or_default().push(entry.id.clone());
        inner.entries.insert(entry.id.clone(), (entry, None));
    }

    pub(super) fn get(&self, id: &str) -> Option<Entry> {
        self.inner.lock().current(id).map(|(e, _)| e.clone())
    }

    pub(super) fn waiting(&self, agent: &str, kind: Kind) -> Vec<Entry> {
        let mut inner = self.inner.lock();
        let ids: Vec<String> = inner.entries.keys().cloned().collect();
        let mut waiting: Vec<Entry> = ids
            .iter()
            .filter_map(|id| inner.current(id).map(|(e, _)| e.clone()))
            .filter(|e| e.outcome.is_none() && e.kind == kind && e.agent == agent)
            .collect();
        waiting.sort_by_key(|e| e.expires_at);
        waiting
    }

    pub(super) fn of_run(&self, agent: &str, run_id: &str) -> Vec<Entry> {
        let mut inner = self.inner.lock();
        let ids = inner.by_run.get(run_id).cloned().unwrap_or_default();
        ids.iter().filter_map(|id| inner.current(id).map(|(e, _)| e.clone())).filter(|e| e.agent == agent).collect()
    }

    /// `who`'s decision, by the rules of the shared database's statement.
    pub(super) fn decide(&self, id: &str, who: Who<'_>, decision: &Decision) -> Decided {
        let mut inner = self.inner.lock();
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

    /// Records how the run ended the wait (the engine's word is final).
    pub(super) fn settle(&self, id: &str, outcome: Outcome) {
        if let Some((entry, done)) = self.inner.lock().entries.get_mut(id) {
            entry.outcome = Some(outcome.name().to_owned());
            entry.answer = outcome.stored_text().map(str::to_owned);
            *done = Some(Instant::now());
        }
    }

    /// Cancels every pending entry of `run_id`.
    pub(super) fn cancel_run(&self, run_id: &str) {
        let mut inner = self.inner.lock();
        for id in inner.by_run.remove(run_id).unwrap_or_default() {
            if let Some((entry, done)) = inner.entries.get_mut(&id)
                && entry.outcome.is_none()
            {
                entry.outcome = Some(Outcome::Cancelled.name().to_owned());
                *done = Some(Instant::now());
            }
        }
    }

    /// The newest question pending in `conversation`.
    pub(super) fn question_in(&self, conversation: &str) -> Option<String> {
        let inner = self.inner.lock();
        let waiting = inner.entries.values().filter(|(e, done)| {
            done.is_none()
                && e.kind == Kind::Question
                && e.channel_id == conversation
                && e.expires_at > SystemTime::now()
        });
        waiting.max_by_key(|(e, _)| e.expires_at).map(|(e, _)| e.id.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn entry(id: &str, run: &str, secs: u64) -> Entry {
        Entry {
            id: id.into(),
            kind: Kind::Approval,
            run_id: run.into(),
            channel_id: "c".into(),
            expires_at: SystemTime::now() + Duration::from_secs(secs),
            challenge: None,
            prompt: None,
            choices: Vec::new(),
            outcome: None,
            answer: None,
            agent: "a".into(),
            surface: "api".into(),
            deciders: Vec::new(),
            presentation: None,
            decided_by: None,
            decided_token: None,
        }
    }

    const OPERATOR: Who<'static> = Who { agent: "a", surface: None, user: "api", conversation: None, token: None };

    #[test]
    fn first_decision_wins_same_repeats_differing_conflicts() {
        let ledger = Ledger::default();
        ledger.open(entry("x", "r", 60));
        assert!(matches!(ledger.decide("x", OPERATOR, &Decision::Approve(None)), Decided::Won(_)));
        assert!(matches!(ledger.decide("x", OPERATOR, &Decision::Approve(None)), Decided::Same(_)));
        assert!(matches!(ledger.decide("x", OPERATOR, &Decision::Deny(None)), Decided::Conflict(_)));
        assert!(matches!(ledger.decide("nope", OPERATOR, &Decision::Deny(None)), Decided::Gone));
        assert_eq!(ledger.get("x").unwrap().decided_by.as_deref(), Some("api"));
    }

    #[test]
    fn an_edit_and_a_reason_are_kept_and_repeat_only_as_given() {
        let ledger = Ledger::default();
        ledger.open(entry("e", "r", 60));
        let edit = Decision::Edit { arguments: r#"{"a":2}"#.into(), confirmation: None };
        let Decided::Won(won) = ledger.decide("e", OPERATOR, &edit) else { panic!("an edit approves") };
        assert_eq!((won.outcome.as_deref(), won.answer.as_deref()), (Some("approved"), Some(r#"{"a":2}"#)));
        assert!(matches!(ledger.decide("e", OPERATOR, &edit), Decided::Same(_)));
        assert!(
            matches!(ledger.decide("e", OPERATOR, &Decision::Approve(None)), Decided::Conflict(_)),
            "not that edit"
        );
        ledger.open(entry("d", "r", 60));
        let deny = Decision::Deny(Some("not now".into()));
        let Decided::Won(won) = ledger.decide("d", OPERATOR, &deny) else { panic!("a denial with its reason") };
        assert_eq!(super::Outcome::of(&won), Some(super::Outcome::Denied(Some("not now".into()))));
    }

    #[test]
    fn another_agent_surface_or_person_finds_nothing() {
        let ledger = Ledger::default();
        ledger.open(Entry { surface: "slack:b1".into(), deciders: vec!["U1".into()], ..entry("x", "r", 60) });
        let other_agent = Who { agent: "b", ..OPERATOR };
        assert!(matches!(ledger.decide("x", other_agent, &Decision::Approve(None)), Decided::Gone));
        let other_bot = Who { agent: "a", surface: Some("slack:b2"), user: "U1", conversation: None, token: None };
        assert!(matches!(ledger.decide("x", other_bot, &Decision::Approve(None)), Decided::Gone));
        let outsider = Who { agent: "a", surface: Some("slack:b1"), user: "U2", conversation: None, token: None };
        assert!(matches!(ledger.decide("x", outsider, &Decision::Approve(None)), Decided::Gone));
        // Its approver, from another conversation of the bot than the one it was shown in.
        let elsewhere =
            Who { agent: "a", surface: Some("slack:b1"), user: "U1", conversation: Some("slack b1 C2"), token: None };
        assert!(matches!(ledger.decide("x", elsewhere, &Decision::Approve(None)), Decided::Gone));
        assert!(ledger.get("x").unwrap().outcome.is_none(), "nothing changed");
        // The agent's operator (the console) may decide it, and is recorded so.
        let Decided::Won(won) = ledger.decide("x", OPERATOR, &Decision::Deny(None)) else {
            panic!("the console decides")
        };
        assert_eq!(won.decided_by.as_deref(), Some("console"));
    }

    #[test]
    fn an_unconfirmed_approval_stays_pending() {
        let ledger = Ledger::default();
        ledger.open(Entry { challenge: Some("CONFIRM".into()), ..entry("x", "r", 60) });
        assert!(matches!(ledger.decide("x", OPERATOR, &Decision::Approve(None)), Decided::Unconfirmed));
        assert!(matches!(ledger.decide("x", OPERATOR, &Decision::Approve(Some("nope".into()))), Decided::Unconfirmed));
        assert!(ledger.get("x").unwrap().outcome.is_none());
        assert!(matches!(ledger.decide("x", OPERATOR, &Decision::Approve(Some(" CONFIRM ".into()))), Decided::Won(_)));
    }

    #[test]
    fn a_run_ending_cancels_only_its_own_and_expired_entries_time_out() {
        let ledger = Ledger::default();
        ledger.open(entry("r1-a", "r1", 60));
        ledger.open(entry("r1-b", "r1", 60));
        ledger.open(entry("r2-a", "r2", 60));
        ledger.open(entry("old", "r3", 0));
        ledger.decide("r1-a", OPERATOR, &Decision::Approve(None));
        ledger.cancel_run("r1");
        let outcome = |id: &str| ledger.get(id).unwrap().outcome;
        assert_eq!(outcome("r1-a").as_deref(), Some("approved"), "a decided entry keeps its outcome");
        assert_eq!(outcome("r1-b").as_deref(), Some("cancelled"));
        assert_eq!(outcome("r2-a"), None);
        assert_eq!(outcome("old").as_deref(), Some("timed_out"));
        assert!(matches!(ledger.decide("old", OPERATOR, &Decision::Approve(None)), Decided::Gone));
        assert_eq!(ledger.waiting("a", Kind::Approval).len(), 1);
        assert!(ledger.waiting("b", Kind::Approval).is_empty());
    }
}
