//! A turn that waits for a person, written down so that another process can finish it.
//!
//! Approvals are asked in call order before any call of a round runs ([`super::round`]), so
//! while a person is asked nothing of the round has run: the conversation up to the model's
//! calls, the decisions already taken in the round and the call being asked about are the
//! whole state of the turn. A chat adapter on a shared store keeps it ([`Checkpoint`]); when
//! the process that asked is gone, another replica resumes the turn with the person's
//! decision ([`super::Engine::resume_turn`]): the round is run again with the decisions
//! taken, nothing is asked twice, and the turn goes on to its answer.
//!
//! A question (`human__ask`) is asked while its round's other calls run: its checkpoint
//! carries the results of the calls that ended ([`Checkpoint::results`]), rewritten as each
//! ends; a resumed round replays them, and answers a call that was still running when its
//! replica died as interrupted ([`Checkpoint::beside`]): no call runs twice.
//!
//! A nested turn (a delegation, a sub-agent skill) runs inside one call of its outer round,
//! while that round's other calls run: when it waits on a person, what is written down is
//! the outer turn's checkpoint waiting on that call ([`Waits::Nested`]) with the nested
//! turn's own checkpoint inside ([`Checkpoint::nested`]), to any depth. A resumed outer
//! round runs that call again, and its nested turn starts from its checkpoint
//! ([`Durable::take_nested`]) instead of from its task.

use super::counterpart::ApprovalOutcome;
use super::request::TurnRequest;
use crate::llm::Message;
use crate::tools::ToolOutcome;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::Arc;

/// The version [`Checkpoint`]s are written as; another is refused, not misread.
pub const VERSION: u32 = 1;

/// What the call a [`Checkpoint`] waits on waits for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Waits {
    /// A person's decision on a gated call.
    #[default]
    Approval,
    /// A person's answer to the question the call asks (`human__ask`), its round's only
    /// question.
    Answer,
    /// The nested turn the call runs waits on a person ([`Checkpoint::nested`] says how).
    Nested,
}

/// A call's result, as a checkpoint keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Recorded {
    /// What the model reads.
    pub content: String,
    /// Whether the call failed.
    pub is_error: bool,
    /// The host's cause of a failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_kind: Option<String>,
}

impl Recorded {
    fn of(outcome: &ToolOutcome) -> Self {
        Recorded {
            content: outcome.content.clone(),
            is_error: outcome.is_error,
            error_kind: outcome.error_kind.clone(),
        }
    }

    /// The result again, for the resumed round.
    pub fn outcome(&self) -> ToolOutcome {
        let mut outcome = ToolOutcome::text(self.content.clone(), std::time::Duration::ZERO);
        outcome.is_error = self.is_error;
        outcome.error_kind = self.error_kind.clone();
        outcome
    }
}

/// The result of a call whose replica died while it ran: it may have run, in part or whole;
/// it is not run again.
pub fn interrupted_outcome() -> ToolOutcome {
    let json = serde_json::json!({
        "error": "this call was interrupted: the server running it stopped while it ran; it may or may not have taken effect, and it was not run again. Check before retrying it.",
        "kind": "interrupted",
    });
    ToolOutcome::error(&json, std::time::Duration::ZERO)
}

/// The decision on the approval a written-down turn waited on, with its broker entry (the
/// record says when the call it covers ran).
#[derive(Debug, Clone, PartialEq)]
pub struct Waited {
    /// What the person decided (or how the wait ended).
    pub outcome: ApprovalOutcome,
    /// The entry it was decided on.
    pub entry: Option<String>,
}

impl From<ApprovalOutcome> for Waited {
    fn from(outcome: ApprovalOutcome) -> Self {
        Waited { outcome, entry: None }
    }
}

/// A turn a replica left written down with the entry it waited on, read to go on with: the
/// engine's checkpoint, and what the person gave, as the round that waited takes it.
#[derive(Debug)]
pub struct Written {
    /// Where the turn stopped.
    pub checkpoint: Checkpoint,
    /// The decision on the approval it waited on.
    pub waited: Option<Waited>,
    /// The answer to the question it waited on (or how the question ended), for the call
    /// that asked: given when the question is asked again.
    pub answer: Option<(String, crate::broker::Outcome)>,
}

impl Written {
    /// `orphan`'s turn: its checkpoint (`interrupted` when the replica holding its lease
    /// died), and the outcome its entry records (`cancelled` while none is).
    pub fn read(orphan: &crate::broker::Orphan) -> Result<Written, String> {
        let checkpoint: Checkpoint =
            serde_json::from_str(&orphan.waiting.checkpoint).map_err(|e| format!("unreadable checkpoint: {e}"))?;
        let checkpoint = Checkpoint { interrupted: orphan.interrupted, ..checkpoint };
        let entry = &orphan.approval;
        let outcome = crate::broker::Outcome::of(entry).unwrap_or(crate::broker::Outcome::Cancelled);
        Ok(match entry.kind {
            crate::broker::Kind::Approval => {
                let waited = Waited { outcome: outcome.into(), entry: Some(entry.id.clone()) };
                Written { checkpoint, waited: Some(waited), answer: None }
            }
            crate::broker::Kind::Question => {
                let call = checkpoint.innermost().waiting.clone();
                Written { checkpoint, waited: None, answer: Some((call, outcome)) }
            }
        })
    }
}

/// What a resumed round is given instead of asking or running again.
#[derive(Debug, Default)]
pub struct Given {
    /// The people's decisions, by call id (with the entry each was taken on, where known).
    pub decisions: HashMap<String, Waited>,
    /// The results of calls that ran (or were cut off) before the turn was written down.
    pub results: HashMap<String, ToolOutcome>,
    /// The nested turn that waited: the call running it, its checkpoint, and the decision
    /// on the approval it waited on.
    pub nested: Option<Box<Nested>>,
}

/// A nested turn to resume ([`Given::nested`]).
#[derive(Debug)]
pub struct Nested {
    /// The outer call that runs it.
    pub call: String,
    /// Where it stopped.
    pub checkpoint: Checkpoint,
    /// The decision on the approval it waited on, if it waited on one.
    pub outcome: Option<Waited>,
}

/// A turn waiting on one approval, or on the answer to its round's one question.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// [`VERSION`].
    pub version: u32,
    /// The message the turn answers.
    pub request: TurnRequest,
    /// The conversation, ending with the model's message whose calls the round answers.
    pub messages: Vec<Message>,
    /// The people's decisions already taken in this round, by call id.
    pub decided: Vec<(String, ApprovalOutcome)>,
    /// The call the person is asked about.
    pub waiting: String,
    /// What it waits for.
    #[serde(default)]
    pub waits: Waits,
    /// Set when it is resumed after the replica running its round died: the round's calls
    /// may have run, so each is answered as interrupted instead of run again.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
    /// The results of the round's calls that ended before (or while) it waited on a
    /// question, by call id.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub results: Vec<(String, Recorded)>,
    /// The question was asked beside other calls: a resumed round answers those without a
    /// result as interrupted (they were running when the replica went).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub beside: bool,
    /// [`Waits::Nested`]: the checkpoint of the nested turn the waiting call runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nested: Option<Box<Checkpoint>>,
}

impl Checkpoint {
    /// What the resumed round is given: the decisions ([`Checkpoint::decisions`]), the
    /// results kept, and, for calls that ran beside the question without a kept result,
    /// `interrupted` (of `calls`, the round's call ids).
    pub fn given(&self, waited: Option<Waited>, calls: &[String]) -> Given {
        let mut results: HashMap<String, ToolOutcome> =
            self.results.iter().map(|(id, recorded)| (id.clone(), recorded.outcome())).collect();
        if self.beside {
            for id in calls.iter().filter(|id| **id != self.waiting) {
                results.entry(id.clone()).or_insert_with(interrupted_outcome);
            }
        }
        match &self.nested {
            // The decision is the nested turn's: its call is what waited.
            Some(nested) => Given {
                decisions: self.decisions(None),
                results,
                nested: Some(Box::new(Nested {
                    call: self.waiting.clone(),
                    checkpoint: (**nested).clone(),
                    outcome: waited,
                })),
            },
            None => Given { decisions: self.decisions(waited), results, nested: None },
        }
    }

    /// The checkpoint of the turn that waits on a person: this one, or the nested turn's
    /// (innermost) that its call runs.
    pub fn innermost(&self) -> &Checkpoint {
        match &self.nested {
            Some(nested) => nested.innermost(),
            None => self,
        }
    }

    /// The decisions a resumed round starts from: those taken, and `waited` for the call
    /// that waited on an approval.
    pub fn decisions(&self, waited: Option<Waited>) -> HashMap<String, Waited> {
        let mut decided: HashMap<_, _> = self.decided.iter().map(|(id, o)| (id.clone(), o.clone().into())).collect();
        if let Some(waited) = waited {
            decided.insert(self.waiting.clone(), waited);
        }
        decided
    }
}

/// A turn whose waits can be written down: what its rounds need to make a [`Checkpoint`],
/// and the decisions a resumed round was given.
#[derive(Debug)]
pub struct Durable<'p> {
    /// A nested turn's: the turn it runs in, and the call of that turn's that runs it.
    parent: Option<(&'p Durable<'p>, String)>,
    /// A nested turn to resume, given to a resumed round ([`Durable::take_nested`]).
    nested: Mutex<Option<Box<Nested>>>,
    request: TurnRequest,
    /// The conversation as the current round started.
    messages: Mutex<Arc<Vec<Message>>>,
    /// Decisions given to a resumed round, used instead of asking (each once).
    given: Mutex<HashMap<String, Waited>>,
    /// Results given to a resumed round, used instead of running (each once).
    replay: Mutex<HashMap<String, ToolOutcome>>,
    /// The current round once its calls are settled.
    settled: Mutex<Settled>,
}

/// A round whose calls are settled: the people's decisions, the one question it asks, and
/// what its other calls gave so far.
#[derive(Debug, Clone, Default)]
struct Settled {
    decided: Vec<(String, ApprovalOutcome)>,
    question: Option<String>,
    /// It has calls beside its question.
    beside: bool,
    /// The results of its calls that ended.
    results: Vec<(String, Recorded)>,
    /// Its question's checkpoint was taken (written down): each result rewrites it.
    written: bool,
    /// Its waiting call runs a nested turn that waits: that turn's checkpoint.
    nested: Option<Checkpoint>,
}

impl<'p> Durable<'p> {
    /// For the turn answering `request`; `given`: a resumed turn's decisions.
    pub fn new(request: TurnRequest, given: Given) -> Self {
        Durable {
            parent: None,
            nested: Mutex::new(given.nested),
            request,
            messages: Mutex::default(),
            given: Mutex::new(given.decisions),
            replay: Mutex::new(given.results),
            settled: Mutex::default(),
        }
    }

    /// For a nested turn answering `request` inside call `call` of `parent`'s round.
    pub fn nested(parent: &'p Durable<'p>, call: &str, request: TurnRequest, given: Given) -> Self {
        Durable { parent: Some((parent, call.to_owned())), ..Durable::new(request, given) }
    }

    /// The nested turn that call `call` of a resumed round runs, taken: it starts where it
    /// stopped.
    pub fn take_nested(&self, call: &str) -> Option<Box<Nested>> {
        let mut nested = self.nested.lock();
        if nested.as_ref().is_some_and(|n| n.call == call) { nested.take() } else { None }
    }

    /// `checkpoint`, this turn's, as it is written down: inside its outer turn's, when it
    /// is nested (`None` when that round cannot be written down: it has other waits).
    fn outermost(&self, checkpoint: Checkpoint) -> Option<Checkpoint> {
        match &self.parent {
            None => Some(checkpoint),
            Some((parent, call)) => parent.outermost(parent.waits_on_nested(call, checkpoint)?),
        }
    }

    /// This round's call `call` runs a nested turn now waiting with `checkpoint`: this
    /// round's checkpoint, if `call` is its one call that may wait (written down from now on).
    fn waits_on_nested(&self, call: &str, checkpoint: Checkpoint) -> Option<Checkpoint> {
        let mut settled = self.settled.lock();
        if settled.question.as_deref() != Some(call) {
            return None;
        }
        settled.nested = Some(checkpoint);
        settled.written = true;
        Some(self.question_round(&settled))
    }

    /// The round about to run starts from `messages`.
    pub fn round_starts(&self, messages: &[Message]) {
        *self.messages.lock() = Arc::new(messages.to_vec());
        *self.settled.lock() = Default::default();
    }

    /// The round's calls are settled, with `decided`; `question`: its one call that may wait
    /// on a person while it runs (a question, or a nested turn), if it has exactly one (then
    /// its wait can be written down), and `beside` whether other calls run with it.
    pub fn round_settled(&self, decided: &[(String, ApprovalOutcome)], question: Option<&str>, beside: bool) {
        let settled =
            Settled { decided: decided.to_vec(), question: question.map(str::to_owned), beside, ..Settled::default() };
        *self.settled.lock() = settled;
    }

    /// The checkpoint of the round waiting on the answer to its question `id`, if the round
    /// asks that one question.
    pub fn question_checkpoint(&self, id: &str) -> Option<Checkpoint> {
        let settled = self.settled.lock();
        let checkpoint = (settled.question.as_deref() == Some(id)).then(|| self.question_round(&settled))?;
        drop(settled);
        self.outermost(checkpoint)
    }

    /// The question `id`'s checkpoint was written down: from now on each call that ends
    /// rewrites it ([`Durable::ended`]); the checkpoint as it is now when calls ended
    /// since it was taken (to write again), else `None`.
    pub fn opened(&self, id: &str) -> Option<Checkpoint> {
        let mut settled = self.settled.lock();
        if settled.question.as_deref() != Some(id) {
            return None;
        }
        settled.written = true;
        let checkpoint = (!settled.results.is_empty()).then(|| self.question_round(&settled))?;
        drop(settled);
        self.outermost(checkpoint)
    }

    fn question_round(&self, settled: &Settled) -> Checkpoint {
        let id = settled.question.as_deref().unwrap_or_default();
        Checkpoint {
            waits: if settled.nested.is_some() { Waits::Nested } else { Waits::Answer },
            results: settled.results.clone(),
            beside: settled.beside,
            nested: settled.nested.clone().map(Box::new),
            ..self.own_checkpoint(&settled.decided, id)
        }
    }

    /// Call `id` of the round ended with `outcome`: kept, and the question's checkpoint as it
    /// now is when it was written down (to write again).
    pub fn ended(&self, id: &str, outcome: &ToolOutcome) -> Option<Checkpoint> {
        let mut settled = self.settled.lock();
        if settled.question.as_deref() == Some(id) || !settled.beside {
            return None;
        }
        settled.results.push((id.to_owned(), Recorded::of(outcome)));
        let checkpoint = settled.written.then(|| self.question_round(&settled))?;
        drop(settled);
        self.outermost(checkpoint)
    }

    /// The result given for call `id` of a resumed round, taken: it ran before the turn was
    /// written down (or was cut off), and does not run again.
    pub fn replayed(&self, id: &str) -> Option<ToolOutcome> {
        self.replay.lock().remove(id)
    }

    /// The decision given for call `id`, taken (a later round asks again), with the entry
    /// it was taken on when that is known.
    pub fn given(&self, id: &str) -> Option<Waited> {
        self.given.lock().remove(id)
    }

    /// The checkpoint of the round waiting on an approval of call `waiting`, after
    /// `decided`, as it is written down (`None`: a nested turn whose outer round cannot be).
    pub fn checkpoint(&self, decided: &[(String, ApprovalOutcome)], waiting: &str) -> Option<Checkpoint> {
        self.outermost(self.own_checkpoint(decided, waiting))
    }

    fn own_checkpoint(&self, decided: &[(String, ApprovalOutcome)], waiting: &str) -> Checkpoint {
        let messages = self.messages.lock().clone();
        Checkpoint {
            version: VERSION,
            request: self.request.clone(),
            messages: messages.as_ref().clone(),
            decided: decided.to_vec(),
            waiting: waiting.to_owned(),
            waits: Waits::Approval,
            interrupted: false,
            results: Vec::new(),
            beside: false,
            nested: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Durable, Given, Waits};
    use crate::engine::request::TurnRequest;
    use crate::tools::ToolOutcome;
    use std::time::Duration;

    fn durable() -> Durable<'static> {
        let request =
            TurnRequest { channel_id: "c".into(), thread: None, user_id: None, message: "m".into(), route: Vec::new() };
        let durable = Durable::new(request, Given::default());
        durable.round_starts(&[]);
        durable
    }

    #[test]
    fn a_call_ending_before_the_question_is_open_is_written_when_it_opens() {
        let d = durable();
        d.round_settled(&[], Some("q"), true);
        let taken = d.question_checkpoint("q").unwrap();
        assert_eq!((taken.waits, taken.beside, taken.results.len()), (Waits::Answer, true, 0));
        // Ended while the question was being written down: kept, not yet written again.
        assert!(d.ended("w", &ToolOutcome::text("done".into(), Duration::ZERO)).is_none());
        let now = d.opened("q").expect("the newer checkpoint, to write again");
        assert_eq!(now.results[0].0, "w");
        // From now on each call that ends gives the checkpoint to write again.
        let later = d.ended("v", &ToolOutcome::text("also".into(), Duration::ZERO)).unwrap();
        assert_eq!(later.results.len(), 2);
        // The question itself is never a kept result.
        assert!(d.ended("q", &ToolOutcome::text("answer".into(), Duration::ZERO)).is_none());
    }

    #[test]
    fn a_resumed_round_replays_kept_results_and_interrupts_the_rest_beside_the_question() {
        let d = durable();
        d.round_settled(&[], Some("q"), true);
        d.opened("q");
        let written = d.ended("w", &ToolOutcome::text("done".into(), Duration::ZERO)).unwrap();
        let calls = ["w".to_owned(), "v".to_owned(), "q".to_owned()];
        let given = written.given(None, &calls);
        assert_eq!(given.results["w"].content, "done");
        assert_eq!(given.results["v"].error_kind.as_deref(), Some("interrupted"));
        assert!(!given.results.contains_key("q"), "the question is answered, not replayed");
    }

    #[test]
    fn a_nested_turns_wait_is_written_inside_its_outer_turns_and_resumed_from_there() {
        use crate::engine::counterpart::ApprovalOutcome;
        let outer = durable();
        outer.round_settled(&[], Some("d1"), true);
        let request = || TurnRequest {
            channel_id: "c".into(),
            thread: None,
            user_id: None,
            message: "task".into(),
            route: Vec::new(),
        };
        let inner = Durable::nested(&outer, "d1", request(), Given::default());
        inner.round_starts(&[]);
        let written = inner.checkpoint(&[], "w1").expect("the outer round waits only on d1");
        assert_eq!((written.waits, written.waiting.as_str()), (Waits::Nested, "d1"));
        assert_eq!(written.innermost().waiting, "w1");
        assert_eq!(written.innermost().waits, Waits::Approval);
        // A call beside the nested one ends meanwhile: the outer checkpoint keeps it, with
        // the nested turn's inside.
        let rewritten = outer.ended("x", &ToolOutcome::text("done".into(), Duration::ZERO)).unwrap();
        assert_eq!(rewritten.results[0].0, "x");
        assert_eq!(rewritten.innermost().waiting, "w1");
        // Resumed: the outer round is given the kept result, and the nested turn its decision.
        let calls = ["x".to_owned(), "d1".to_owned()];
        let given = rewritten.given(Some(ApprovalOutcome::Approved.into()), &calls);
        assert!(given.decisions.is_empty(), "the decision is the nested turn's");
        assert_eq!(given.results["x"].content, "done");
        let resumed = Durable::new(request(), given);
        assert!(resumed.take_nested("x").is_none());
        let nested = resumed.take_nested("d1").expect("d1 goes on from where it stopped");
        assert_eq!(nested.outcome, Some(ApprovalOutcome::Approved.into()));
        let inner_given = nested.checkpoint.given(nested.outcome.clone(), &["w1".to_owned()]);
        assert_eq!(inner_given.decisions["w1"].outcome, ApprovalOutcome::Approved);
        assert!(resumed.take_nested("d1").is_none(), "taken once");

        // A round with two calls that may wait is not written down, nested or not.
        let outer = durable();
        outer.round_settled(&[], None, true);
        let inner = Durable::nested(&outer, "d1", request(), Given::default());
        inner.round_starts(&[]);
        assert!(inner.checkpoint(&[], "w1").is_none());
    }

    #[test]
    fn a_question_alone_keeps_no_results_and_a_round_of_two_questions_is_not_written_down() {
        let d = durable();
        d.round_settled(&[], Some("q"), false);
        assert!(d.opened("q").is_none());
        assert!(d.ended("q", &ToolOutcome::text("x".into(), Duration::ZERO)).is_none());
        d.round_settled(&[], None, true);
        assert!(d.question_checkpoint("q").is_none());
    }
}
