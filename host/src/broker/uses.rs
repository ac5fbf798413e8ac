//! An approval covers one call, once: the call's tool and the hash of its canonical arguments
//! ([`arguments_hash`]), and it is used up when that call completes.
//!
//! A surface that answers later (MCP at 2026-07-28, whose client retries the call with the
//! person's answer) may run the approved call more than once before it completes: a tool that
//! asks its caller a question stops at that round, and the retry that answers it runs the tool
//! again from the start. Each such run holds the approval's use ([`Uses::take`]): one run at a
//! time, on any replica sharing the state store; a run that stops at a round gives the use back
//! ([`Use::release`]), and the run that completes uses it up ([`Use::complete`]). A use taken
//! after that is refused: however often any state of the call is retried, the tool completes
//! once.

use crate::store::state::{Expiry, StateQuota};
use crate::store::{StateError, StateStore};
use serde_json::Value;
use sha2::Digest as _;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Where the uses are kept in the state store.
const NAMESPACE: &str = "skillhost.approval_uses";
/// How long a completed use is kept past the approval's deadline (after which no state of it
/// verifies anyway).
const KEPT: Duration = Duration::from_secs(3600);

/// SHA-256 (hex) of `arguments` as compact JSON (object keys in order: `serde_json` keeps
/// them sorted): what an approval, a `requestState` and the record bind a call to.
pub fn arguments_hash(arguments: &Value) -> String {
    hex::encode(sha2::Sha256::digest(arguments.to_string().as_bytes()))
}

/// Why an approval's use was not given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UseRefused {
    /// Its call completed: the approval is used up.
    #[error("the approval was already used: its call completed")]
    Used,
    /// Another run of the call holds it now.
    #[error("the approved call is running now; retry once it has answered")]
    Running,
    /// The store cannot be read or written.
    #[error("the approval's use cannot be recorded: {0}")]
    Unavailable(String),
}

/// The uses of one agent's approvals, in its state store.
#[derive(Debug, Clone)]
pub struct Uses {
    state: StateStore,
}

impl Uses {
    /// The uses kept in `state`.
    pub fn new(state: StateStore) -> Self {
        Uses { state }
    }

    /// Takes the use of approval `id` (whose deadline is `until`) for one run of its call.
    pub async fn take(&self, id: &str, until: SystemTime) -> Result<Use, UseRefused> {
        let unavailable = |e: StateError| UseRefused::Unavailable(e.to_string());
        let now = unix(SystemTime::now());
        let held = format!("running {}", unix(until));
        let mut refused = None;
        let taken = self
            .state
            .update(NAMESPACE, id, |current| {
                refused = None;
                match current.as_deref() {
                    None => Ok(Some(held.clone())),
                    Some("done") => {
                        refused = Some(UseRefused::Used);
                        Ok(current)
                    }
                    // A run whose replica died holding it: past the deadline nobody retries.
                    Some(running) => match running.strip_prefix("running ").and_then(|t| t.parse::<u64>().ok()) {
                        Some(at) if at < now => Ok(Some(held.clone())),
                        _ => {
                            refused = Some(UseRefused::Running);
                            Ok(current)
                        }
                    },
                }
            })
            .await
            .map_err(unavailable)?;
        match (refused, taken) {
            (Some(refused), _) => Err(refused),
            (None, Some(value)) if value == held => {
                Ok(Use { state: self.state.clone(), id: id.to_owned(), held, until, ended: false })
            }
            _ => Err(UseRefused::Running),
        }
    }
}

/// One run's hold on an approval. Dropped without [`Use::complete`], it is given back.
#[derive(Debug)]
pub struct Use {
    state: StateStore,
    id: String,
    held: String,
    until: SystemTime,
    ended: bool,
}

impl Use {
    /// The approval's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The call completed: the approval is used up (kept as such past its deadline).
    pub async fn complete(mut self) -> Result<(), UseRefused> {
        self.ended = true;
        let left = self.until.duration_since(SystemTime::now()).unwrap_or_default();
        let quota = StateQuota { max_bytes: u64::MAX, max_keys: u64::MAX };
        let kept = Expiry::Idle(left + KEPT);
        let done = self.state.set_within(NAMESPACE, &self.id, "done", &quota, kept).await;
        done.map_err(|e| UseRefused::Unavailable(e.to_string()))
    }

    /// The run stopped before its call completed (at a round its client answers in a retry):
    /// the next retry may take the use.
    pub async fn release(mut self) {
        self.ended = true;
        if let Err(e) = self.state.delete_if(NAMESPACE, &self.id, &self.held).await {
            tracing::warn!(approval = self.id, "cannot give an approval's use back: {e}");
        }
    }
}

impl Drop for Use {
    fn drop(&mut self) {
        if self.ended {
            return;
        }
        // A run dropped mid-way (the request was cancelled): give the use back.
        let (state, id, held) = (self.state.clone(), std::mem::take(&mut self.id), std::mem::take(&mut self.held));
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = state.delete_if(NAMESPACE, &id, &held).await;
            });
        }
    }
}

fn unix(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_use_is_held_by_one_run_given_back_and_used_up_once() {
        let dir = tempfile::tempdir().unwrap();
        let (one, two) = (Uses::new(StateStore::new(dir.path())), Uses::new(StateStore::new(dir.path())));
        let until = SystemTime::now() + Duration::from_secs(60);
        let held = one.take("a1", until).await.unwrap();
        assert_eq!(two.take("a1", until).await.unwrap_err(), UseRefused::Running, "one run at a time");
        held.release().await;
        let held = two.take("a1", until).await.expect("given back: the next retry takes it");
        held.complete().await.unwrap();
        assert_eq!(one.take("a1", until).await.unwrap_err(), UseRefused::Used);
        assert_eq!(two.take("a1", until).await.unwrap_err(), UseRefused::Used);
        // Another approval is its own.
        one.take("a2", until).await.unwrap().complete().await.unwrap();
    }

    #[tokio::test]
    async fn a_hold_left_by_a_dead_run_lapses_at_the_deadline() {
        let dir = tempfile::tempdir().unwrap();
        let uses = Uses::new(StateStore::new(dir.path()));
        let past = SystemTime::now() - Duration::from_secs(5);
        let held = uses.take("a1", past).await.unwrap();
        std::mem::forget(held);
        assert!(uses.take("a1", SystemTime::now() + Duration::from_secs(60)).await.is_ok());
    }

    #[test]
    fn the_arguments_hash_is_of_canonical_json() {
        let a: Value = serde_json::from_str(r#"{"b": 1, "a": [1, 2]}"#).unwrap();
        let b: Value = serde_json::from_str(r#"{"a":[1,2],"b":1}"#).unwrap();
        assert_eq!(arguments_hash(&a), arguments_hash(&b));
        assert_ne!(arguments_hash(&a), arguments_hash(&serde_json::json!({"a": [2, 1], "b": 1})));
    }
}
