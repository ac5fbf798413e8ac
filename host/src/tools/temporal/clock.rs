//! Where "now" comes from: the system clock in production, a settable one in tests (so no
//! assertion depends on the wall clock and nothing sleeps).

use super::time::Seconds;
use std::sync::atomic::{AtomicI64, Ordering};

/// The current time, in whole seconds since the Unix epoch.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// Now.
    fn now(&self) -> Seconds;
}

/// The system's wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Seconds {
        let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
        since.map_or(0, |d| Seconds::try_from(d.as_secs()).unwrap_or(Seconds::MAX))
    }
}

/// A clock that stands still until it is set or advanced.
#[derive(Debug, Default)]
pub struct FixedClock(AtomicI64);

impl FixedClock {
    /// A clock showing `now`.
    pub fn at(now: Seconds) -> Self {
        FixedClock(AtomicI64::new(now))
    }

    /// Moves the clock to `now`.
    pub fn set(&self, now: Seconds) {
        self.0.store(now, Ordering::SeqCst);
    }

    /// Moves the clock forward by `seconds`.
    pub fn advance(&self, seconds: Seconds) {
        self.0.fetch_add(seconds, Ordering::SeqCst);
    }
}

impl Clock for FixedClock {
    fn now(&self) -> Seconds {
        self.0.load(Ordering::SeqCst)
    }
}
