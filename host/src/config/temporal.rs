//! `engine.temporal_guardrails`: which MCP tools get their time arguments normalised, by
//! which profile, and the attribute-discovery clamp. The normalisation itself lives in the
//! tools layer (`tools/temporal/`); docs/temporal-guardrails.md describes it exactly.

use serde::Deserialize;
use std::collections::BTreeMap;

/// `attribute_discovery_lookback_minutes` when attribute-discovery tools are listed without it.
pub const DEFAULT_ATTRIBUTE_LOOKBACK_MINUTES: u32 = 5;

/// `engine.temporal_guardrails`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TemporalGuardrails {
    /// Tools whose time window is normalised (profile `iso_window` unless `tool_profiles`
    /// names another); empty turns the guardrails off, and then no other key may be set.
    pub tools: Vec<String>,
    /// Tool -> the profile its arguments follow.
    pub tool_profiles: BTreeMap<String, TemporalProfile>,
    /// Tools whose window is clamped to the last `attribute_discovery_lookback_minutes`.
    pub attribute_discovery_tools: Vec<String>,
    /// The attribute-discovery clamp, in minutes (default 5).
    pub attribute_discovery_lookback_minutes: Option<u32>,
}

/// How a tool's arguments express time, and so how they are normalised.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TemporalProfile {
    /// `start_time_iso` / `end_time_iso` (RFC 3339) or `lookback_minutes`.
    IsoWindow,
    /// `time_iso` (or the older `timestamp`) and a look-back `window` in seconds, at most an hour.
    AlertsWindow,
    /// `start_time` / `end_time` as Unix seconds, with an optional sample `step`.
    EpochRange,
    /// One `time_iso` instant (or `lookback_minutes` before now).
    InstantTimeIso,
}

impl TemporalProfile {
    /// The name the config uses.
    pub fn name(self) -> &'static str {
        match self {
            TemporalProfile::IsoWindow => "iso_window",
            TemporalProfile::AlertsWindow => "alerts_window",
            TemporalProfile::EpochRange => "epoch_range",
            TemporalProfile::InstantTimeIso => "instant_time_iso",
        }
    }
}

impl TemporalGuardrails {
    /// Whether any tool is guarded (`tools` is the switch).
    pub fn is_on(&self) -> bool {
        !self.tools.is_empty()
    }

    /// The attribute-discovery clamp in force.
    pub fn attribute_lookback_minutes(&self) -> u32 {
        self.attribute_discovery_lookback_minutes.unwrap_or(DEFAULT_ATTRIBUTE_LOOKBACK_MINUTES)
    }

    /// The rules the types cannot express; errors name the key.
    pub(crate) fn check(&self) -> Result<(), String> {
        let at = "engine.temporal_guardrails";
        if !self.is_on() {
            let set = [
                ("tool_profiles", !self.tool_profiles.is_empty()),
                ("attribute_discovery_tools", !self.attribute_discovery_tools.is_empty()),
                ("attribute_discovery_lookback_minutes", self.attribute_discovery_lookback_minutes.is_some()),
            ];
            if let Some((key, _)) = set.iter().find(|(_, set)| *set) {
                return Err(format!(
                    "{at}.{key} is set but {at}.tools is empty, which turns temporal guardrails off; \
                     list the guarded tools in tools or remove {key}"
                ));
            }
            return Ok(());
        }
        let names = self.tools.iter().map(|n| ("tools", n));
        let names = names.chain(self.tool_profiles.keys().map(|n| ("tool_profiles", n)));
        for (key, name) in names.chain(self.attribute_discovery_tools.iter().map(|n| ("attribute_discovery_tools", n)))
        {
            check_tool_name(name).map_err(|e| format!("{at}.{key}: `{name}` {e}"))?;
        }
        if let Some(name) = self.attribute_discovery_tools.iter().find(|n| self.listed_elsewhere(n)) {
            return Err(format!(
                "{at}.attribute_discovery_tools: `{name}` is also listed in tools or tool_profiles; \
                 a tool gets one treatment"
            ));
        }
        if self.attribute_discovery_lookback_minutes == Some(0) {
            return Err(format!("{at}.attribute_discovery_lookback_minutes must be greater than 0"));
        }
        if self.attribute_discovery_lookback_minutes.is_some() && self.attribute_discovery_tools.is_empty() {
            return Err(format!(
                "{at}.attribute_discovery_lookback_minutes is set but attribute_discovery_tools is empty; \
                 list the tools it clamps or remove it"
            ));
        }
        Ok(())
    }

    fn listed_elsewhere(&self, name: &str) -> bool {
        self.tools.iter().any(|t| t == name) || self.tool_profiles.contains_key(name)
    }
}

/// A guarded tool is named as the server calls it (`get_logs`: that tool of any server) or
/// prefixed (`obs__get_logs`, or a skill's alias): letters, digits, `_` and `-`.
fn check_tool_name(name: &str) -> Result<(), &'static str> {
    if name.is_empty() {
        return Err("is empty");
    }
    if !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
        return Err("is not a tool name (letters, digits, `_` and `-`; `server__tool` for one server's tool)");
    }
    Ok(())
}
