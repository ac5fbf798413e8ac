//! Approval auto-promotion (`learning.approval_auto_promote`): once a person has approved the
//! same tool N times and never denied it, further `approve`-level calls of it run without
//! asking.
//!
//! Counts live in the state store, namespace [`NAMESPACE`], so they survive restarts. Each
//! key is a tool's prefixed name plus an optional *subject* (the shell skill will count per
//! command), see [`PromotionKey`].
//!
//! Only `approve`-level calls are ever promoted: a `confirm`-level call asks for a typed
//! challenge precisely because one mistaken yes is too costly, so habit must never replace it.

use crate::config::Learning;
use crate::store::state::MAX_KEY_BYTES;
use crate::store::{StateError, StateStore};
pub use crate::tools::PromotionKey;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The state namespace holding the counts.
pub const NAMESPACE: &str = "approvals";

/// The state key of `key`. A subject is joined with a NUL, which no tool name holds; a key
/// too long for the store keeps the tool readable and hashes the subject.
fn state_key(key: &PromotionKey) -> String {
    let Some(subject) = &key.subject else { return key.tool.clone() };
    let joined = format!("{}\0{subject}", key.tool);
    if joined.len() <= MAX_KEY_BYTES {
        return joined;
    }
    format!("{}\0sha256:{}", key.tool, hex::encode(Sha256::digest(subject.as_bytes())))
}

/// The decisions a person made on one key.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    /// Approvals.
    pub approved: u32,
    /// Denials (timeouts and cancellations are not decisions and are not counted).
    pub denied: u32,
}

/// The counts and the thresholds. Cheap to clone; clones share the store.
#[derive(Debug, Clone)]
pub struct Promotion {
    state: StateStore,
    /// [`NAMESPACE`], or `approvals-<agent>` for a named agent.
    namespace: String,
    /// `learning.enabled`: off means nothing is promoted, whatever the skills say.
    enabled: bool,
    /// `learning.approval_auto_promote`; 0 disables it unless a skill overrides it.
    default_threshold: u32,
}

impl Promotion {
    /// Promotion as `learning` configures it.
    pub fn new(state: StateStore, learning: &Learning) -> Self {
        Self::for_agent(state, learning, None)
    }

    /// Promotion of one agent's tools: a named agent counts in a namespace of its own.
    pub fn for_agent(state: StateStore, learning: &Learning, agent: Option<&str>) -> Self {
        let (enabled, default_threshold) = (learning.enabled, learning.approval_auto_promote);
        let namespace = agent.map_or_else(|| NAMESPACE.to_owned(), |a| format!("{NAMESPACE}-{a}"));
        Promotion { state, namespace, enabled, default_threshold }
    }

    /// The threshold for a skill's tools: its own (`skills.config.<skill>.approval_auto_promote`)
    /// when set, else the global one. 0 means never promote.
    pub fn threshold(&self, skill_threshold: Option<u32>) -> u32 {
        if !self.enabled {
            return 0;
        }
        skill_threshold.unwrap_or(self.default_threshold)
    }

    /// The counts recorded for `key`. A corrupt entry reads as empty.
    pub async fn counts(&self, key: &PromotionKey) -> Counts {
        match self.state.get(&self.namespace, &state_key(key)).await {
            Ok(Some(json)) => serde_json::from_str(&json).unwrap_or_default(),
            Ok(None) => Counts::default(),
            Err(e) => {
                tracing::warn!(tool = %key.tool, "reading approval counts failed: {e}");
                Counts::default()
            }
        }
    }

    /// Whether an `approve`-level call on `key` runs without asking: at least the threshold
    /// (the skill's own, else the global one) of approvals and no denial ever.
    pub async fn is_promoted(&self, skill_threshold: Option<u32>, key: &PromotionKey) -> bool {
        let threshold = self.threshold(skill_threshold);
        if threshold == 0 {
            return false;
        }
        let counts = self.counts(key).await;
        threshold > 0 && counts.denied == 0 && counts.approved >= threshold
    }

    /// Records a person's decision, where the tool can be promoted (its threshold is not 0:
    /// decisions taken while it cannot be are not counted). A failure to persist is logged:
    /// it only delays promotion.
    pub async fn record(&self, skill_threshold: Option<u32>, key: &PromotionKey, approved: bool) {
        if self.threshold(skill_threshold) == 0 {
            return;
        }
        if let Err(e) = self.try_record(key, approved).await {
            tracing::warn!(tool = %key.tool, "recording the approval decision failed: {e}");
        }
    }

    /// One atomic read-modify-write in the store, so concurrent turns, in this process or
    /// another sharing the state directory, never lose a decision.
    async fn try_record(&self, key: &PromotionKey, approved: bool) -> Result<(), StateError> {
        self.state
            .update(&self.namespace, &state_key(key), |old| {
                let mut counts: Counts = old.and_then(|json| serde_json::from_str(&json).ok()).unwrap_or_default();
                if approved {
                    counts.approved = counts.approved.saturating_add(1);
                } else {
                    counts.denied = counts.denied.saturating_add(1);
                }
                serde_json::to_string(&counts).map(Some).map_err(|e| StateError::Other(e.to_string()))
            })
            .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn promotion() -> (tempfile::TempDir, Promotion) {
        let dir = tempfile::tempdir().unwrap();
        let promotion = Promotion::new(StateStore::new(dir.path()), &Learning::default());
        (dir, promotion)
    }

    #[tokio::test]
    async fn subjects_get_their_own_counts() {
        let (_dir, p) = promotion();
        let ls = PromotionKey { tool: "shell__run".into(), subject: Some("ls".into()) };
        let rm = PromotionKey { tool: "shell__run".into(), subject: Some("rm -rf /tmp/x".into()) };
        p.record(None, &ls, true).await;
        p.record(None, &ls, true).await;
        p.record(None, &rm, false).await;
        assert_eq!(p.counts(&ls).await, Counts { approved: 2, denied: 0 });
        assert_eq!(p.counts(&rm).await, Counts { approved: 0, denied: 1 });
        assert_eq!(p.counts(&PromotionKey::tool("shell__run")).await, Counts::default());
    }

    #[tokio::test]
    async fn long_subjects_are_hashed_into_a_valid_key() {
        let (_dir, p) = promotion();
        let long = PromotionKey { tool: "shell__run".into(), subject: Some("x".repeat(1000)) };
        let key = state_key(&long);
        assert!(key.len() <= MAX_KEY_BYTES && key.starts_with("shell__run\0sha256:"));
        p.record(None, &long, true).await;
        assert_eq!(p.counts(&long).await.approved, 1);
    }

    /// Two `Promotion`s on one state directory (two processes) recording at once.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_records_across_stores_lose_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let a = Promotion::new(StateStore::new(dir.path()), &Learning::default());
        let b = Promotion::new(StateStore::new(dir.path()), &Learning::default());
        let key = PromotionKey::tool("shell__run");
        let tasks: Vec<_> = [&a, &b, &a, &b]
            .into_iter()
            .map(|p| {
                let (p, key) = (p.clone(), key.clone());
                tokio::spawn(async move {
                    for _ in 0..50 {
                        p.record(None, &key, true).await;
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
        assert_eq!(a.counts(&key).await, Counts { approved: 200, denied: 0 });
    }
}
