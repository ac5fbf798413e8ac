//! `engine.temporal_guardrails`: the operator's normalisation of MCP tools' time arguments.
//!
//! A guarded call's arguments are rewritten once the model's arguments are parsed and before
//! anything else looks at them (tool budget, approval, `before-mcp-call`), so the person
//! approving sees what will run, the policy hook gets "prepared arguments (including resolved
//! time bounds)", and the budget judges the window that will be searched. Every further set
//! of arguments the server is sent for a guarded tool (a policy's corrected arguments, the
//! prerequisite retry, a prerequisite read) passes the same normalisation again.
//!
//! Unparseable time arguments are an error result the model reads; the call does not run.
//! docs/temporal-guardrails.md gives every rule with examples.
//!
//! Layout: this file (which tool gets what, the result note), `profiles.rs` (the rules),
//! `time.rs` (reading and writing times), `clock.rs` (where "now" comes from).

pub mod clock;
mod profiles;
#[cfg(test)]
mod tests;
pub mod time;

pub use clock::{Clock, FixedClock, SystemClock};
pub use profiles::{DEFAULT_STEP, DEFAULT_WINDOW, MAX_ALERTS_WINDOW, MAX_SAMPLES};

use super::ToolOutcome;
use crate::config::{self, TemporalProfile};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use time::Seconds;

/// Where the model reads what the guardrails changed in a call that ran.
pub const NOTE_FIELD: &str = "_mithai_temporal";
/// The error kind of a call refused for its time arguments.
pub const ERROR_KIND: &str = "invalid_time_arguments";

/// How one guarded tool's arguments are normalised.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Treatment {
    /// One of the configured profiles.
    Profile(TemporalProfile),
    /// `iso_window` fields, the window at most `lookback` seconds (and that by default).
    AttributeDiscovery {
        /// The clamp, in seconds.
        lookback: Seconds,
    },
}

impl Treatment {
    /// The name the result note and docs use.
    pub fn name(self) -> &'static str {
        match self {
            Treatment::Profile(profile) => profile.name(),
            Treatment::AttributeDiscovery { .. } => "attribute_discovery",
        }
    }

    /// The argument fields the treatment reads and writes.
    pub fn fields(self) -> &'static [&'static str] {
        match self {
            Treatment::Profile(TemporalProfile::IsoWindow) | Treatment::AttributeDiscovery { .. } => {
                &["start_time_iso", "end_time_iso", "lookback_minutes"]
            }
            Treatment::Profile(TemporalProfile::AlertsWindow) => {
                &["time_iso", "timestamp", "window", "lookback_minutes"]
            }
            Treatment::Profile(TemporalProfile::EpochRange) => &["start_time", "end_time", "step"],
            Treatment::Profile(TemporalProfile::InstantTimeIso) => &["time_iso", "lookback_minutes"],
        }
    }
}

/// Why a call's time arguments cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemporalError {
    /// A field holds something that is not a time (or not a positive span).
    #[error("`{field}` {why} (given: {given})")]
    Field {
        /// The argument.
        field: &'static str,
        /// What is wrong with it.
        why: String,
        /// What the call gave, shortened.
        given: String,
    },
    /// Start and end are the same second.
    #[error("the window is empty: it starts and ends at {start}")]
    Empty {
        /// The bound.
        start: String,
    },
    /// The whole window lies after now.
    #[error("the window starts at {start}, which is not before now")]
    Future {
        /// The start asked for.
        start: String,
    },
    /// A look-back reaches before the Unix epoch.
    #[error("the window reaches back before 1970-01-01")]
    BeforeEpoch,
}

/// A call's arguments after normalisation.
#[derive(Debug, Clone, PartialEq)]
pub struct Normalized {
    /// What the server is sent.
    pub arguments: Map<String, Value>,
    /// What the model is told in [`NOTE_FIELD`]; `None` when nothing changed.
    pub note: Option<Value>,
}

/// The guardrails of one config: which tool gets which treatment, and the clock.
#[derive(Debug, Clone)]
pub struct Guardrails {
    rules: BTreeMap<String, Treatment>,
    clock: Arc<dyn Clock>,
}

impl Default for Guardrails {
    fn default() -> Self {
        Guardrails { rules: BTreeMap::new(), clock: Arc::new(SystemClock) }
    }
}

impl Guardrails {
    /// The guardrails `engine.temporal_guardrails` describes (off when `tools` is empty), on
    /// the system clock. Expects a checked config (`config::parse` checks it).
    pub fn from_config(section: &config::TemporalGuardrails) -> Self {
        let mut rules = BTreeMap::new();
        if section.is_on() {
            let lookback = Seconds::from(section.attribute_lookback_minutes()) * 60;
            rules.extend(section.tools.iter().map(|t| (t.clone(), Treatment::Profile(TemporalProfile::IsoWindow))));
            rules.extend(section.tool_profiles.iter().map(|(t, p)| (t.clone(), Treatment::Profile(*p))));
            let discovery = section.attribute_discovery_tools.iter();
            rules.extend(discovery.map(|t| (t.clone(), Treatment::AttributeDiscovery { lookback })));
        }
        Guardrails { rules, clock: Arc::new(SystemClock) }
    }

    /// The same guardrails reading `clock` (tests).
    pub fn with_clock(self, clock: Arc<dyn Clock>) -> Self {
        Guardrails { clock, ..self }
    }

    /// Whether any tool is guarded.
    pub fn is_on(&self) -> bool {
        !self.rules.is_empty()
    }

    /// The treatment of a call of `tool` on `server`, offered to the model as `offered`:
    /// the offered name, then `server__tool`, then the bare tool name (the most specific
    /// entry wins).
    pub fn treatment(&self, offered: &str, server: &str, tool: &str) -> Option<Treatment> {
        if self.rules.is_empty() {
            return None;
        }
        let direct = format!("{server}{}{tool}", crate::skills::skill::SEPARATOR);
        [offered, direct.as_str(), tool].into_iter().find_map(|name| self.rules.get(name).copied())
    }

    /// Normalises `arguments` by `treatment`, reading the clock once.
    pub fn normalize(&self, treatment: Treatment, arguments: &Map<String, Value>) -> Result<Normalized, TemporalError> {
        let mut work = profiles::Work { args: arguments.clone(), now: self.clock.now(), changes: Vec::new() };
        match treatment {
            Treatment::Profile(TemporalProfile::IsoWindow) => profiles::iso_window(&mut work, None)?,
            Treatment::AttributeDiscovery { lookback } => profiles::iso_window(&mut work, Some(lookback))?,
            Treatment::Profile(TemporalProfile::AlertsWindow) => profiles::alerts_window(&mut work)?,
            Treatment::Profile(TemporalProfile::EpochRange) => profiles::epoch_range(&mut work)?,
            Treatment::Profile(TemporalProfile::InstantTimeIso) => profiles::instant_time_iso(&mut work)?,
        }
        let note = (work.args != *arguments).then(|| {
            let sent: Map<String, Value> = treatment
                .fields()
                .iter()
                .filter_map(|f| work.args.get(*f).map(|v| ((*f).to_owned(), v.clone())))
                .collect();
            json!({"profile": treatment.name(), "sent": sent, "changes": work.changes})
        });
        Ok(Normalized { arguments: work.args, note })
    }
}

/// What the model reads about a call whose time arguments cannot be used.
pub fn message(name: &str, treatment: Treatment, error: &TemporalError) -> String {
    format!("`{name}` was not run: its time arguments cannot be used ({} profile): {error}", treatment.name())
}

/// The error result of a call whose time arguments cannot be used (it does not run).
pub fn refusal(message: &str) -> ToolOutcome {
    ToolOutcome::error(&json!({"error": message, "kind": ERROR_KIND}), Duration::ZERO)
}
