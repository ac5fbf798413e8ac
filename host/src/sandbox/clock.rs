//! A deadline that stops while somebody is waited for: a call's (the sandbox's wall clock)
//! and a turn's ([`crate::engine`]'s time budget) alike. A wait for a person ([`Clock::paused`])
//! does not count: the deadline moves back by its length once it ends, and while it lasts
//! nothing bounded by the clock is cut off. The wait itself is bounded by whoever asks
//! (`human.timeout_seconds`). Clones share one clock.

use parking_lot::Mutex;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// A pausable deadline. Clones share it.
#[derive(Debug, Clone)]
pub struct Clock(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    state: Mutex<State>,
    /// Woken when the last wait ends (the deadline moved).
    resumed: Notify,
}

#[derive(Debug, Clone, Copy)]
struct State {
    deadline: Instant,
    /// Waits going on now.
    waits: u32,
    /// When the first of them began.
    since: Instant,
}

impl Clock {
    /// A deadline `length` from now.
    pub fn starting_now(length: Duration) -> Self {
        let now = Instant::now();
        let state = State { deadline: now + length, waits: 0, since: now };
        Clock(Arc::new(Inner { state: Mutex::new(state), resumed: Notify::new() }))
    }

    /// Starts again, `length` from now, with no wait going on.
    pub fn restart(&self, length: Duration) {
        let now = Instant::now();
        *self.0.state.lock() = State { deadline: now + length, waits: 0, since: now };
    }

    /// When it runs out, as of now (during a wait: if the wait ended now).
    pub fn deadline(&self) -> Instant {
        let state = *self.0.state.lock();
        match state.waits {
            0 => state.deadline,
            _ => state.deadline + state.since.elapsed(),
        }
    }

    /// What is left of it (all of it during a wait).
    pub fn remaining(&self) -> Duration {
        self.deadline().saturating_duration_since(Instant::now())
    }

    /// Whether it has run out (never during a wait).
    pub fn is_spent(&self) -> bool {
        let state = *self.0.state.lock();
        state.waits == 0 && Instant::now() >= state.deadline
    }

    /// Gives back `waited`, time spent waiting for a person after the fact.
    pub fn pause_for(&self, waited: Duration) {
        self.0.state.lock().deadline += waited;
    }

    /// Runs `wait` (a wait for a person) with the clock stopped: its length is given back
    /// when it ends, or when it is dropped unfinished.
    pub async fn paused<T>(&self, wait: impl Future<Output = T>) -> T {
        let _pause = self.pause();
        wait.await
    }

    fn pause(&self) -> Pause<'_> {
        let mut state = self.0.state.lock();
        if state.waits == 0 {
            state.since = Instant::now();
        }
        state.waits += 1;
        Pause(self)
    }

    /// Runs `work` until it ends (`Some`) or the clock runs out `grace` past its deadline
    /// (`None`, `work` dropped); waits meanwhile push the end back.
    pub async fn bound<T>(&self, grace: Duration, work: impl Future<Output = T>) -> Option<T> {
        let mut work = std::pin::pin!(work);
        loop {
            let resumed = self.0.resumed.notified();
            let waiting = self.0.state.lock().waits > 0;
            if waiting {
                tokio::select! {
                    out = &mut work => return Some(out),
                    () = resumed => {}
                }
            } else {
                let end = tokio::time::Instant::from_std(self.deadline() + grace);
                tokio::select! {
                    out = &mut work => return Some(out),
                    () = tokio::time::sleep_until(end) => {
                        // The deadline may have moved (a wait began and ended meanwhile).
                        if self.0.state.lock().waits == 0 && Instant::now() >= self.deadline() + grace {
                            return None;
                        }
                    }
                }
            }
        }
    }
}

/// A wait going on; ending it gives its length back.
struct Pause<'a>(&'a Clock);

impl Drop for Pause<'_> {
    fn drop(&mut self) {
        let mut state = self.0.0.state.lock();
        state.waits = state.waits.saturating_sub(1);
        if state.waits == 0 {
            let waited = state.since.elapsed();
            state.deadline += waited;
            drop(state);
            self.0.0.resumed.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn waits_for_people_do_not_count() {
        let clock = Clock::starting_now(Duration::from_millis(100));
        let before = clock.deadline();
        clock.paused(tokio::time::sleep(Duration::from_millis(150))).await;
        assert!(!clock.is_spent(), "the wait was given back");
        assert!(clock.deadline() >= before + Duration::from_millis(150));
        tokio::time::sleep(Duration::from_millis(120)).await;
        assert!(clock.is_spent());
    }

    #[tokio::test]
    async fn work_that_waits_for_a_person_is_not_cut_off_by_the_wait() {
        let clock = Clock::starting_now(Duration::from_millis(50));
        let work = async {
            clock.paused(tokio::time::sleep(Duration::from_millis(200))).await;
            "done"
        };
        assert_eq!(clock.bound(Duration::ZERO, work).await, Some("done"), "the wait does not count");
        let slow = tokio::time::sleep(Duration::from_secs(5));
        assert_eq!(clock.bound(Duration::ZERO, slow).await, None, "the rest of the deadline still does");
    }

    #[tokio::test]
    async fn a_dropped_wait_still_gives_its_time_back() {
        let clock = Clock::starting_now(Duration::from_millis(100));
        let before = clock.deadline();
        let wait = clock.paused(tokio::time::sleep(Duration::from_secs(5)));
        assert!(tokio::time::timeout(Duration::from_millis(60), wait).await.is_err());
        assert!(clock.deadline() >= before + Duration::from_millis(60));
        assert!(!clock.is_spent());
    }
}
