//! Conversation history per channel, persisted through the [`StateStore`] so a restart
//! continues the conversation.
//!
//! Each channel gets its own namespace holding one key, the JSON of its `Vec<Message>`. The
//! store writes atomically, so a crash mid-write leaves the previous history intact.

use crate::llm::{Block, Message, Role};
use crate::store::state::MAX_VALUE_BYTES;
use crate::store::{StateError, StateStore, StateWrite};
use sha2::{Digest, Sha256};
use std::collections::BTreeSet;

/// The key holding the messages in a channel's namespace.
const KEY: &str = "messages";
/// The key holding the conversation's loaded on-demand skills (`skills.loading`): kept
/// beside the messages so that a skill stays loaded when its load is trimmed off them.
const LOADED_KEY: &str = "loaded_skills";
/// How much of the channel id a namespace keeps readable.
const READABLE_CHARS: usize = 40;

/// The histories of every channel.
#[derive(Debug, Clone)]
pub struct History {
    state: StateStore,
}

impl History {
    /// Histories kept in `state`.
    pub fn new(state: StateStore) -> Self {
        History { state }
    }

    /// The store the histories live in (adapters keep their own bookkeeping there too).
    pub fn state(&self) -> &StateStore {
        &self.state
    }

    /// The channel's messages, oldest first (empty for a new channel).
    pub async fn load(&self, channel_id: &str) -> Result<Vec<Message>, StateError> {
        match self.state.get(&namespace(channel_id), KEY).await? {
            None => Ok(Vec::new()),
            Some(json) => serde_json::from_str(&json)
                .map_err(|e| StateError::Other(format!("history of channel `{channel_id}` is corrupt: {e}"))),
        }
    }

    /// Replaces the channel's messages. When they exceed the store's value limit, the oldest
    /// whole exchanges are dropped until they fit.
    pub async fn save(&self, channel_id: &str, messages: &[Message]) -> Result<(), StateError> {
        self.state.apply(&[Self::saving(channel_id, messages)?]).await
    }

    /// [`History::save`] as a write, for a batch of the turn's writes.
    pub fn saving(channel_id: &str, messages: &[Message]) -> Result<StateWrite, StateError> {
        let mut start = 0;
        loop {
            let json = serde_json::to_string(&messages[start..]).map_err(|e| StateError::Other(e.to_string()))?;
            if json.len() <= MAX_VALUE_BYTES {
                return Ok(StateWrite::Set { ns: namespace(channel_id), key: KEY.into(), value: json });
            }
            start = next_exchange(messages, start)
                .ok_or_else(|| StateError::Invalid("the latest exchange alone exceeds the state value limit".into()))?;
        }
    }

    /// The on-demand skills loaded in the channel's conversation (empty for a new one).
    pub async fn loaded_skills(&self, channel_id: &str) -> Result<BTreeSet<String>, StateError> {
        match self.state.get(&namespace(channel_id), LOADED_KEY).await? {
            None => Ok(BTreeSet::new()),
            Some(json) => serde_json::from_str(&json)
                .map_err(|e| StateError::Other(format!("loaded skills of channel `{channel_id}` are corrupt: {e}"))),
        }
    }

    /// Replaces the channel's loaded on-demand skills.
    pub async fn save_loaded_skills(&self, channel_id: &str, skills: &BTreeSet<String>) -> Result<(), StateError> {
        self.state.apply(&[Self::saving_loaded_skills(channel_id, skills)?]).await
    }

    /// [`History::save_loaded_skills`] as a write, for a batch of the turn's writes.
    pub fn saving_loaded_skills(channel_id: &str, skills: &BTreeSet<String>) -> Result<StateWrite, StateError> {
        let json = serde_json::to_string(skills).map_err(|e| StateError::Other(e.to_string()))?;
        Ok(StateWrite::Set { ns: namespace(channel_id), key: LOADED_KEY.into(), value: json })
    }
}

/// The index of the first person-written user message after `start`: cutting there keeps
/// every tool result with its tool call.
fn next_exchange(messages: &[Message], start: usize) -> Option<usize> {
    let opens = |m: &Message| m.role == Role::User && !m.content.iter().any(|b| matches!(b, Block::ToolResult { .. }));
    (start + 1..messages.len()).find(|&i| opens(&messages[i]))
}

/// The state namespace of a channel: `history-<readable part>-<hash>`. Channel ids are
/// arbitrary (Slack ids, chat ids, `cli`), so the readable part keeps only the characters a
/// namespace allows and the hash of the whole id keeps distinct channels apart. The `-` keeps
/// it clear of skill namespaces, which are `[a-z0-9_]`.
pub fn namespace(channel_id: &str) -> String {
    let readable: String = channel_id
        .chars()
        .take(READABLE_CHARS)
        .map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' })
        .collect();
    let hash = hex::encode(&Sha256::digest(channel_id.as_bytes())[..8]);
    format!("history-{readable}-{hash}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn namespaces_are_valid_and_distinct() {
        let (a, b) = (namespace("a/b"), namespace("a_b"));
        assert!(a.starts_with("history-a_b-") && b.starts_with("history-a_b-") && a != b);
        let dir = tempfile::tempdir().unwrap();
        let history = History::new(StateStore::new(dir.path()));
        for channel in ["../etc", "", "C0123/thread:1.5", &"x".repeat(500)] {
            history.save(channel, &[Message::user(channel)]).await.unwrap();
            assert_eq!(history.load(channel).await.unwrap(), vec![Message::user(channel)]);
        }
    }

    #[tokio::test]
    async fn loaded_skills_are_kept_per_channel() {
        let dir = tempfile::tempdir().unwrap();
        let history = History::new(StateStore::new(dir.path()));
        assert!(history.loaded_skills("c").await.unwrap().is_empty());
        let skills: BTreeSet<String> = ["pdf".to_owned(), "git".to_owned()].into();
        history.save_loaded_skills("c", &skills).await.unwrap();
        history.save("c", &[Message::user("q")]).await.unwrap();
        assert_eq!(history.loaded_skills("c").await.unwrap(), skills);
        assert!(history.loaded_skills("d").await.unwrap().is_empty());
        assert_eq!(history.load("c").await.unwrap(), vec![Message::user("q")], "the messages are a key of their own");
    }

    #[tokio::test]
    async fn oversized_history_drops_oldest_exchanges_whole() {
        let dir = tempfile::tempdir().unwrap();
        let history = History::new(StateStore::new(dir.path()));
        let big = "x".repeat(MAX_VALUE_BYTES / 3);
        let call = Block::ToolUse { id: "t".into(), name: "s__t".into(), input: serde_json::json!({}) };
        let result = Block::ToolResult { tool_use_id: "t".into(), content: big.clone(), is_error: false };
        let mut messages = Vec::new();
        for _ in 0..3 {
            messages.push(Message::user("q"));
            messages.push(Message::assistant(vec![call.clone()]));
            messages.push(Message { role: Role::User, content: vec![result.clone()] });
            messages.push(Message::assistant(vec![Block::Text("a".into())]));
        }
        history.save("c", &messages).await.unwrap();
        let kept = history.load("c").await.unwrap();
        assert_eq!(kept[0], Message::user("q"));
        assert_eq!(kept.len() % 4, 0);
        assert!(kept.len() < messages.len());
    }
}
