//! One agent's external-channel guard on the MCP tools that post to Slack
//! ([`SlackPostingGuard`]), built from its `adapter.slack` and every server's
//! `mcp_servers.<name>.slack_posting_tools`, its lookups made with the agent's own Slack bot
//! through the Slack adapter's `conversations.info` client.
//!
//! The guard follows the setting: with `allow_posting_in_external_channels` true (its
//! default, so also with no `adapter.slack` at all) nothing is checked. With it false, the
//! spec fails closed whenever Slack's metadata cannot be fetched; an agent with no bot token
//! can fetch none, so every call of a posting tool is refused (and the start says so).

use crate::adapters::slack::api::WebApi;
use crate::adapters::slack::channels::ChannelKinds;
use crate::config::LoadedConfig;
use crate::mcp::{GuardedBridge, McpManager, SlackChannels, SlackPostingGuard};
use crate::sandbox::McpBridge;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// The guard of the agent `config` describes; `agent` names it in messages.
pub fn slack_guard(config: &LoadedConfig, agent: Option<&str>) -> SlackPostingGuard {
    let c = &config.config;
    let slack = c.adapter.slack.clone().unwrap_or_default();
    if slack.allow_posting_in_external_channels {
        return SlackPostingGuard::anywhere();
    }
    let posting =
        c.mcp_servers.iter().map(|(name, s)| (name.clone(), s.slack_posting_tools().iter().cloned().collect()));
    let posting: BTreeMap<String, BTreeSet<String>> = posting.collect();
    let label = agent.map_or("slack".to_owned(), |a| format!("slack (agent `{a}`)"));
    let channels = (!slack.bot_token.is_empty()).then(|| {
        let api = Arc::new(WebApi::new(&slack.base_url, &slack.bot_token, &slack.app_token));
        Arc::new(ChannelKinds::new(api, &label)) as Arc<dyn SlackChannels>
    });
    let guard = SlackPostingGuard::internal_only(posting, channels.clone());
    if channels.is_none() && guard.is_active() {
        let at = agent.map_or("adapter".to_owned(), |a| format!("agents.{a}.adapter"));
        eprintln!(
            "warning: {at}.slack.allow_posting_in_external_channels is false but {at}.slack.bot_token is not set: \
             no channel can be looked up, so every call of an MCP tool in slack_posting_tools is refused"
        );
    }
    guard
}

/// The `mcp` import of an agent's skills: `mcp`'s own, behind `guard` when it checks anything.
pub fn bridge(mcp: &Arc<McpManager>, guard: &SlackPostingGuard) -> Arc<dyn McpBridge> {
    if guard.is_active() { Arc::new(GuardedBridge::new(mcp.clone(), guard.clone())) } else { mcp.clone() }
}
