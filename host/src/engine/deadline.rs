//! The turn's time budget (`engine.session.deadline_seconds`), shared by the turn loop and its
//! tool rounds.
//!
//! Time spent waiting for a person (an approval, a question) does not count: the budget exists
//! to bound the agent's own work, and a person who takes two minutes to read a request should
//! not find that the approved call is cut off at once. Each wait pushes the deadline back by
//! its length; the wait itself is bounded by `human.timeout_seconds`.

/// Why the tool loop ends before the model answers: what the forced wrap-up request asks
/// (appended to its last message), and the fixed answer when that request yields no text.
#[derive(Debug, Clone, Copy)]
pub struct WrapUp {
    /// Appended to the last message of the wrap-up request.
    pub instruction: &'static str,
    /// The answer when the wrap-up gives no text (it ran out of time, or the model said nothing).
    pub fallback: &'static str,
}

/// The turn's time budget is spent.
pub const TIME_SPENT: WrapUp = WrapUp {
    instruction: "The time budget for this request is spent and no more tools can be called. \
        Answer now with what you have found so far, and say briefly what is still unchecked.",
    fallback: "I ran out of time before I could finish this request.",
};

/// The turn's budget: a deadline that waits for people push back ([`crate::sandbox::Clock`],
/// the clock a call's sandbox deadline keeps too).
pub use crate::sandbox::Clock as Deadline;
