//! The turn's time budget (`engine.session.deadline_seconds`), shared by the turn loop and its
//! tool rounds.
//!
//! Time spent waiting for a person (an approval, a question) does not count: the budget exists
//! to bound the agent's own work, and a person who takes two minutes to read a request should
//! not find that the approved call is cut off at once. Each wait pushes the deadline back by
//! its length; the wait itself is bounded by `human.timeout_seconds`.

use parking_lot::Mutex;
use std::sync::Arc;
use std::time::{Duration, Instant};

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

/// A deadline that waits for people push back. Clones share it.
#[derive(Debug, Clone)]
pub struct Deadline {
    deadline: Arc<Mutex<Instant>>,
}

impl Deadline {
    /// A budget of `length` from now.
    pub fn starting_now(length: Duration) -> Self {
        Deadline { deadline: Arc::new(Mutex::new(Instant::now() + length)) }
    }

    /// When the budget runs out, as of now.
    pub fn deadline(&self) -> Instant {
        *self.deadline.lock()
    }

    /// Whether it has run out.
    pub fn is_spent(&self) -> bool {
        Instant::now() >= self.deadline()
    }

    /// Gives back `waited`, time spent waiting for a person.
    pub fn pause_for(&self, waited: Duration) {
        *self.deadline.lock() += waited;
    }

    /// Runs `wait` (a wait for a person) without charging its length to the budget.
    pub async fn paused<T>(&self, wait: impl Future<Output = T>) -> T {
        let started = Instant::now();
        let out = wait.await;
        self.pause_for(started.elapsed());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn waits_for_people_do_not_count() {
        let budget = Deadline::starting_now(Duration::from_millis(100));
        let before = budget.deadline();
        budget.paused(tokio::time::sleep(Duration::from_millis(150))).await;
        assert!(!budget.is_spent(), "the wait was given back");
        assert!(budget.deadline() >= before + Duration::from_millis(150));
        tokio::time::sleep(Duration::from_millis(120)).await;
        assert!(budget.is_spent());
    }
}
