//! Which Slack channels are external, as one app's bot sees them: `conversations.info`'s
//! `is_ext_shared`, `is_pending_ext_shared`, or `is_shared` without `is_org_shared` (an
//! Enterprise Grid org-shared channel is internal). The Slack adapter's own posts and the
//! MCP tools that post to Slack ([`crate::mcp::SlackPostingGuard`]) ask it. Answers are kept;
//! failed lookups are not, so a transient Slack failure recovers on the next attempt.

use super::api::{SlackError, WebApi};
use crate::mcp::slack_guard::{ChannelLookupError, SlackChannels};
use parking_lot::Mutex;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;

/// One bot's view of its channels' kinds.
pub struct ChannelKinds {
    api: Arc<WebApi>,
    /// Channels known to be external (`true`) or internal; only successful lookups are kept.
    known: Mutex<HashMap<String, bool>>,
    /// Names the bot in log lines.
    label: String,
}

impl ChannelKinds {
    /// Lookups through `api`; `label` names the bot in log lines.
    pub fn new(api: Arc<WebApi>, label: &str) -> Self {
        ChannelKinds { api, known: Mutex::default(), label: label.to_owned() }
    }

    /// Whether `channel` is external; an error (logged, as the spec words it) when Slack could
    /// not say.
    pub async fn external(&self, channel: &str) -> Result<bool, SlackError> {
        if let Some(external) = self.known.lock().get(channel) {
            return Ok(*external);
        }
        let answer = match self.api.read("conversations.info", &[("channel", channel)]).await {
            Ok(answer) => answer,
            Err(e) => {
                tracing::warn!(channel, error = %e, "Could not resolve Slack channel info for external posting guard");
                return Err(e);
            }
        };
        let info = answer.get("channel").cloned().unwrap_or_default();
        let flag = |key: &str| info.get(key).and_then(Value::as_bool).unwrap_or(false);
        let external =
            flag("is_ext_shared") || flag("is_pending_ext_shared") || (flag("is_shared") && !flag("is_org_shared"));
        self.known.lock().insert(channel.to_owned(), external);
        if external {
            tracing::info!(channel, "{}: external channel: text posts are suppressed", self.label);
        }
        Ok(external)
    }
}

#[async_trait::async_trait]
impl SlackChannels for ChannelKinds {
    async fn is_external(&self, channel: &str) -> Result<bool, ChannelLookupError> {
        self.external(channel).await.map_err(|e| ChannelLookupError(e.to_string()))
    }
}
