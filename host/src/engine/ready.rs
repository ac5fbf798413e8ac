//! Turns and calls that wait for skills still compiling.
//!
//! A server with an empty compile cache answers at once and compiles in the background
//! ([`crate::skills::LoadMode::ServeReady`]); what it left out is [`SkillSet::pending`] until
//! the agent's skills are swapped in whole (`Engine::swap_skills`). A turn started meanwhile
//! waits until the skills it may be offered are there, so the model never sees a partial tool
//! set, and a call of a compiling skill's tool waits the same way instead of answering
//! `unknown tool`. The wait is bounded by `engine.session.skills_wait_seconds` and comes
//! before the turn's deadline starts, so it is not charged to it.
//!
//! [`SkillSet::pending`]: crate::skills::SkillSet::pending

use crate::skills::skill::split_exposed;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// A turn or call that gave up waiting for skills still compiling.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{} still compiling after {} s (engine.session.skills_wait_seconds); try again once it is ready (/readyz answers 200)",
    names(.compiling),
    .waited.as_secs()
)]
pub struct NotReady {
    /// The skills it waited for, by name.
    pub compiling: Vec<String>,
    /// How long it waited.
    pub waited: Duration,
}

fn names(compiling: &[String]) -> String {
    let quoted: Vec<String> = compiling.iter().map(|name| format!("`{name}`")).collect();
    match quoted.as_slice() {
        [one] => format!("the skill {one} is"),
        _ => format!("the skills {} are", quoted.join(", ")),
    }
}

/// Waits until `look` names no skill still compiling (then returns what it looked at), or
/// `gave_up` is set, or `bound` has passed since the wait began. `changed` is told at every
/// swap of the skills; subscribed before the first look, so a swap between a look and the
/// wait is seen.
pub(super) async fn wait<T>(
    bound: Duration,
    mut changed: tokio::sync::watch::Receiver<u64>,
    gave_up: &AtomicBool,
    look: impl Fn() -> (T, Vec<String>),
) -> Result<T, NotReady> {
    let started = Instant::now();
    loop {
        let (now, compiling) = look();
        if compiling.is_empty() || gave_up.load(Ordering::SeqCst) {
            return Ok(now);
        }
        let left = bound.saturating_sub(started.elapsed());
        let swapped = !left.is_zero() && matches!(tokio::time::timeout(left, changed.changed()).await, Ok(Ok(())));
        if !swapped {
            return Err(NotReady { compiling, waited: started.elapsed() });
        }
    }
}

/// The compiling skill among `pending` that would offer the tool `name`: the skill its
/// prefix names (`declared` for a declared tool, whose runtime compiles).
pub(super) fn compiling_owner(pending: &[String], name: &str) -> Vec<String> {
    let Some((prefix, _)) = split_exposed(name) else { return Vec::new() };
    pending.iter().filter(|pending| *pending == prefix).cloned().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_wait_ends_with_the_swap_that_brings_the_skills_or_at_its_bound() {
        let (tx, _) = tokio::sync::watch::channel(0u64);
        let compiling = parking_lot::Mutex::new(vec!["slow".to_owned()]);
        let gave_up = AtomicBool::new(false);
        let look = || ((), compiling.lock().clone());
        let waiting = wait(Duration::from_secs(3600), tx.subscribe(), &gave_up, look);
        let joined = async {
            tokio::task::yield_now().await;
            compiling.lock().clear();
            tx.send_modify(|n| *n += 1);
        };
        let (waited, ()) = tokio::join!(waiting, joined);
        assert_eq!(waited, Ok(()));
        // Still compiling at the bound: the error names it.
        *compiling.lock() = vec!["slow".into()];
        let look = || ((), compiling.lock().clone());
        let err = wait(Duration::ZERO, tx.subscribe(), &gave_up, look).await.unwrap_err();
        assert_eq!(err.compiling, ["slow"]);
        // Given up: nothing waits any more.
        gave_up.store(true, Ordering::SeqCst);
        let look = || ((), compiling.lock().clone());
        assert_eq!(wait(Duration::ZERO, tx.subscribe(), &gave_up, look).await, Ok(()));
        assert_eq!(compiling_owner(&["word_stats".into()], "word_stats__count"), ["word_stats"]);
        assert!(compiling_owner(&["word_stats".into()], "probe__echo").is_empty());
    }

    #[test]
    fn the_message_names_what_is_compiling() {
        let one = NotReady { compiling: vec!["word_stats".into()], waited: Duration::from_secs(120) };
        assert_eq!(
            one.to_string(),
            "the skill `word_stats` is still compiling after 120 s (engine.session.skills_wait_seconds); \
             try again once it is ready (/readyz answers 200)"
        );
        let two = NotReady { compiling: vec!["a".into(), "b".into()], waited: Duration::from_secs(3) };
        assert!(two.to_string().starts_with("the skills `a`, `b` are still compiling after 3 s"), "{two}");
    }
}
