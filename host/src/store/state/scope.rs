//! Whose keys a skill's `state` calls read and write: the skill's one namespace, or one
//! namespace per conversation, as the skill's manifest asks (`[capabilities] state`).
//!
//! A conversation is an agent and a channel (a chat, an API channel, `skillhost call
//! --channel`, an MCP session), or an agent as a whole (MCP from revision 2026-07-28, which
//! has no sessions). Its namespace is named by a hash of both, so no agent or channel name,
//! whatever it holds, can name another's namespace or a skill's.

use super::Expiry;
use serde::Deserialize;
use sha2::{Digest, Sha256};
use std::time::Duration;

/// What a skill's manifest asks for (`[capabilities] state`); no grant is needed for either.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StateScope {
    /// One namespace per conversation; its entries expire `skills.state_ttl_seconds` after
    /// their last get or set. A skill's `startup`, `scheduled` and `is-available`, which
    /// serve no conversation, see the skill's namespace.
    #[default]
    Conversation,
    /// One namespace for the skill, shared by every conversation; nothing expires.
    Skill,
}

impl StateScope {
    /// As a manifest writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            StateScope::Conversation => "conversation",
            StateScope::Skill => "skill",
        }
    }
}

/// The conversation a call serves.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Conversation {
    /// The agent (`None`: the config's top-level agent).
    pub agent: Option<String>,
    /// The channel; `None`: the agent as a whole.
    pub channel: Option<String>,
}

/// A namespace of the state store, and how long its entries live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Namespace {
    /// The namespace's name.
    pub name: String,
    /// How long an entry lives.
    pub expiry: Expiry,
}

impl Namespace {
    /// The namespace of `skill` shared by every conversation: `skill-<name>`.
    pub fn skill(skill: &str) -> Self {
        Namespace { name: format!("skill-{skill}"), expiry: Expiry::Never }
    }

    /// The namespace of `skill` in `conversation`, whose entries live `ttl` past their last
    /// get or set: `skill-<name>.c-<hash>`. A skill name holds no `.`, so it is never another
    /// skill's; the hash (128 bits of SHA-256 over the length-prefixed agent and channel)
    /// keeps conversations apart.
    pub fn conversation(skill: &str, conversation: &Conversation, ttl: Duration) -> Self {
        let mut hash = Sha256::new();
        for part in [&conversation.agent, &conversation.channel] {
            match part {
                None => hash.update([0]),
                Some(text) => {
                    hash.update([1]);
                    hash.update((text.len() as u64).to_le_bytes());
                    hash.update(text.as_bytes());
                }
            }
        }
        let digest = hash.finalize();
        Namespace { name: format!("skill-{skill}.c-{}", hex::encode(&digest[..16])), expiry: Expiry::Idle(ttl) }
    }

    /// The namespace a call of `skill` sees: the skill's own when it asks for `skill` or the
    /// call serves no conversation (`None`), else the conversation's.
    pub fn of(skill: &str, scope: StateScope, conversation: Option<&Conversation>, ttl: Duration) -> Self {
        match (scope, conversation) {
            (StateScope::Conversation, Some(conversation)) => Namespace::conversation(skill, conversation, ttl),
            _ => Namespace::skill(skill),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ns(agent: Option<&str>, channel: Option<&str>) -> String {
        let conversation = Conversation { agent: agent.map(str::to_owned), channel: channel.map(str::to_owned) };
        Namespace::conversation("probe", &conversation, Duration::from_secs(1)).name
    }

    #[test]
    fn conversations_never_share_a_namespace() {
        let names = [
            ns(None, Some("a")),
            ns(None, Some("b")),
            ns(Some("a"), None),
            ns(Some("a"), Some("")),
            ns(Some(""), Some("a")),
            ns(None, None),
            ns(Some("x"), Some("y")),
            ns(Some("xy"), Some("")),
            ns(Some("x\0"), Some("y")),
        ];
        let distinct: std::collections::HashSet<&String> = names.iter().collect();
        assert_eq!(distinct.len(), names.len(), "{names:?}");
        assert_eq!(ns(None, Some("a")), ns(None, Some("a")), "stable");
        for name in &names {
            assert!(name.starts_with("skill-probe.c-") && name.len() == "skill-probe.c-".len() + 32, "{name}");
            super::super::check_namespace(name).unwrap();
        }
    }

    #[test]
    fn the_skill_scope_and_calls_outside_a_conversation_see_the_skill_namespace() {
        let ttl = Duration::from_secs(5);
        let conversation = Conversation { agent: None, channel: Some("c".into()) };
        assert_eq!(Namespace::of("p", StateScope::Skill, Some(&conversation), ttl), Namespace::skill("p"));
        assert_eq!(Namespace::of("p", StateScope::Conversation, None, ttl), Namespace::skill("p"));
        let own = Namespace::of("p", StateScope::Conversation, Some(&conversation), ttl);
        assert_eq!(own.expiry, Expiry::Idle(ttl));
        assert_eq!(Namespace::skill("p"), Namespace { name: "skill-p".into(), expiry: Expiry::Never });
    }
}
