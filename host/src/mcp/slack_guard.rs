//! The external-channel guard on MCP tools that post to Slack: the tools an operator lists in
//! `mcp_servers.<name>.slack_posting_tools`. When the agent's
//! `adapter.slack.allow_posting_in_external_channels` is false, a call of such a tool is
//! refused before it is routed to its server if the channel it names (argument `channel_id`,
//! else `channel`) is external, as Slack's `conversations.info` says to that agent's bot.
//! It fails closed: a call naming no channel, a failed lookup, or an agent with no bot token
//! to look up with is refused too. The model's calls ([`crate::tools::McpTools`]) and a
//! skill's own calls through the `mcp` import ([`GuardedBridge`]) pass the same guard.
//!
//! Slack itself is above this layer: the app builder fills [`SlackChannels`] with the agent's
//! Slack Web API client (the same lookup the Slack adapter guards its own posts with).

use super::McpManager;
use crate::sandbox::capabilities::{McpBridge, McpCallError, McpFuture};
use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// Whether a Slack channel is external (Slack Connect, shared with another organisation, or
/// pending such a share), as one agent's Slack app sees it.
#[async_trait::async_trait]
pub trait SlackChannels: Send + Sync {
    /// Looks `channel` up (a cached answer may do); an error when Slack could not say.
    async fn is_external(&self, channel: &str) -> Result<bool, ChannelLookupError>;
}

/// Why a channel's kind is not known.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct ChannelLookupError(pub String);

/// Why a posting call was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PostRefused {
    /// The channel is external.
    #[error(
        "`{tool}` of MCP server `{server}` posts to Slack, and channel {channel} is an external (shared) \
         channel, where this agent does not post (adapter.slack.allow_posting_in_external_channels: false): \
         the call was not sent"
    )]
    External {
        /// The server.
        server: String,
        /// Its tool.
        tool: String,
        /// The channel named.
        channel: String,
    },
    /// The channel could not be looked up: the guard fails closed.
    #[error(
        "`{tool}` of MCP server `{server}` posts to Slack, and whether channel {channel} is external could not be \
         looked up ({why}); this agent does not post in external channels \
         (adapter.slack.allow_posting_in_external_channels: false), so the call was not sent"
    )]
    Unknown {
        /// The server.
        server: String,
        /// Its tool.
        tool: String,
        /// The channel named.
        channel: String,
        /// Why the lookup failed.
        why: String,
    },
    /// The arguments name no channel to check.
    #[error(
        "`{tool}` of MCP server `{server}` posts to Slack, and its arguments name no channel (`channel_id` or \
         `channel`, a string) to check; this agent does not post in external channels \
         (adapter.slack.allow_posting_in_external_channels: false), so the call was not sent"
    )]
    NoChannel {
        /// The server.
        server: String,
        /// Its tool.
        tool: String,
    },
}

/// One agent's guard: which tools post to Slack, and whether (and with what) it checks them.
#[derive(Clone, Default)]
pub struct SlackPostingGuard {
    /// `mcp_servers.<server>.slack_posting_tools`, by server.
    posting: BTreeMap<String, BTreeSet<String>>,
    /// `None`: the agent may post anywhere (the default), nothing is checked.
    policy: Option<Lookup>,
}

/// How a guarded agent tells external channels apart.
#[derive(Clone)]
enum Lookup {
    /// With its Slack bot.
    Bot(Arc<dyn SlackChannels>),
    /// It has no bot token: nothing can be looked up, every posting call is refused.
    NoBot,
}

impl SlackPostingGuard {
    /// No guard: the agent may post anywhere (`allow_posting_in_external_channels: true`).
    pub fn anywhere() -> Self {
        Self::default()
    }

    /// The guard of an agent that does not post in external channels: `posting` tools are
    /// checked with `channels` (`None`: the agent has no Slack bot token, so every call of
    /// them is refused).
    pub fn internal_only(
        posting: BTreeMap<String, BTreeSet<String>>,
        channels: Option<Arc<dyn SlackChannels>>,
    ) -> Self {
        let policy = Some(channels.map_or(Lookup::NoBot, Lookup::Bot));
        SlackPostingGuard { posting, policy }
    }

    /// Whether the guard checks anything at all.
    pub fn is_active(&self) -> bool {
        self.policy.is_some() && self.posting.values().any(|tools| !tools.is_empty())
    }

    /// `Ok` when `tool` of `server` may be called with `arguments`: it does not post to Slack,
    /// the agent may post anywhere, or the channel it names is internal.
    pub async fn check(&self, server: &str, tool: &str, arguments: &Map<String, Value>) -> Result<(), PostRefused> {
        let Some(policy) = &self.policy else { return Ok(()) };
        if !self.posting.get(server).is_some_and(|tools| tools.contains(tool)) {
            return Ok(());
        }
        let (server, tool) = (server.to_owned(), tool.to_owned());
        let named = arguments.get("channel_id").or_else(|| arguments.get("channel"));
        let Some(channel) = named.and_then(Value::as_str).filter(|c| !c.trim().is_empty()) else {
            return Err(PostRefused::NoChannel { server, tool });
        };
        let channel = channel.to_owned();
        let looked_up = match policy {
            Lookup::Bot(channels) => channels.is_external(&channel).await,
            Lookup::NoBot => {
                Err(ChannelLookupError("the agent has no Slack bot token (adapter.slack.bot_token)".into()))
            }
        };
        match looked_up {
            Ok(false) => Ok(()),
            Ok(true) => Err(PostRefused::External { server, tool, channel }),
            Err(e) => Err(PostRefused::Unknown { server, tool, channel, why: e.0 }),
        }
    }
}

/// The `mcp` import of one agent's skills: the manager's, behind that agent's guard.
pub struct GuardedBridge {
    manager: Arc<McpManager>,
    guard: SlackPostingGuard,
}

impl GuardedBridge {
    /// `manager`'s bridge, each call checked by `guard` first.
    pub fn new(manager: Arc<McpManager>, guard: SlackPostingGuard) -> Self {
        GuardedBridge { manager, guard }
    }
}

impl McpBridge for GuardedBridge {
    fn call_tool<'a>(&'a self, skill: &'a str, server: &'a str, tool: &'a str, arguments: &'a str) -> McpFuture<'a> {
        Box::pin(async move {
            // An undeclared server, or arguments that are not an object, are the manager's to refuse.
            let parsed = serde_json::from_str::<Value>(arguments);
            if let (true, Ok(Value::Object(parsed))) = (self.manager.declares(skill, server), parsed) {
                self.guard.check(server, tool, &parsed).await.map_err(|e| McpCallError::Other(e.to_string()))?;
            }
            self.manager.call_tool(skill, server, tool, arguments).await
        })
    }
}
