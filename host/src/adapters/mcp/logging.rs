//! `logging/setLevel` and the skill `log` records a client hears as `notifications/message`
//! during its calls: at or above the session's level (`info` until the client sets one),
//! logger = the skill's name, data = `{"message", "fields"}` with the values of fields whose
//! key names a credential or query redacted, as the API redacts tool inputs. Only `log`
//! records travel: stdout and stderr (a panic message may quote a secret) never do, and the
//! sandbox has already replaced the values of the skill's granted environment variables.
//!
//! rmcp marks logging deprecated (SEP-2577 drops it after 2025-11-25); clients of the
//! revisions that have it still use it.
#![allow(deprecated)]

use crate::adapters::present::{REDACTED, sensitive};
use crate::sandbox::output::LogRecord;
use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam};
use serde_json::{Map, Value, json};
use std::sync::atomic::{AtomicU8, Ordering};

/// A session's level: records below it are not sent.
#[derive(Debug)]
pub(super) struct Threshold(AtomicU8);

impl Default for Threshold {
    fn default() -> Self {
        Threshold(AtomicU8::new(rank(LoggingLevel::Info)))
    }
}

impl Threshold {
    /// A request's own level (2026-07-28: `io.modelcontextprotocol/logLevel` in its `_meta`);
    /// without one, nothing is sent.
    pub(super) fn of_request(level: Option<LoggingLevel>) -> Self {
        Threshold(AtomicU8::new(level.map_or(SILENT, rank)))
    }

    /// `logging/setLevel`.
    pub(super) fn set(&self, level: LoggingLevel) {
        self.0.store(rank(level), Ordering::Relaxed);
    }

    /// Whether a record at `level` is sent.
    pub(super) fn admits(&self, level: LoggingLevel) -> bool {
        rank(level) >= self.0.load(Ordering::Relaxed)
    }
}

/// Above every level: nothing is admitted.
const SILENT: u8 = 8;

/// The syslog order the spec gives the levels.
fn rank(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

/// The MCP level of a `log` record's level (`debug`, `info`, `warn`, `error`).
pub(super) fn level_of(record: &LogRecord) -> LoggingLevel {
    match record.level {
        "debug" => LoggingLevel::Debug,
        "info" => LoggingLevel::Info,
        "warn" => LoggingLevel::Warning,
        _ => LoggingLevel::Error,
    }
}

/// The notification of one record of `skill`.
pub(super) fn message(skill: &str, record: &LogRecord) -> LoggingMessageNotificationParam {
    let fields: Map<String, Value> = record
        .fields
        .iter()
        .map(|(k, v)| {
            let shown = if sensitive(k) { REDACTED } else { v.as_str() };
            (k.clone(), Value::String(shown.to_owned()))
        })
        .collect();
    let data = json!({ "message": record.message, "fields": fields });
    LoggingMessageNotificationParam::new(level_of(record), data).with_logger(skill)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(level: &'static str, fields: &[(&str, &str)]) -> LogRecord {
        let fields = fields.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        LogRecord { level, source: "log", message: "checked".into(), fields }
    }

    #[test]
    fn a_request_without_a_level_hears_nothing() {
        assert!(!Threshold::of_request(None).admits(LoggingLevel::Emergency));
        let warning = Threshold::of_request(Some(LoggingLevel::Warning));
        assert!(warning.admits(LoggingLevel::Error) && !warning.admits(LoggingLevel::Info));
    }

    #[test]
    fn the_threshold_admits_its_level_and_above() {
        let threshold = Threshold::default();
        assert!(!threshold.admits(level_of(&record("debug", &[]))));
        assert!(threshold.admits(level_of(&record("info", &[]))));
        threshold.set(LoggingLevel::Warning);
        assert!(!threshold.admits(LoggingLevel::Info) && threshold.admits(level_of(&record("warn", &[]))));
        threshold.set(LoggingLevel::Debug);
        assert!(threshold.admits(LoggingLevel::Debug));
    }

    #[test]
    fn credential_fields_are_redacted_and_the_logger_is_the_skill() {
        let note = message("probe", &record("warn", &[("url", "https://x"), ("api_token", "s3cr3t")]));
        assert_eq!(note.level, LoggingLevel::Warning);
        assert_eq!(note.logger.as_deref(), Some("probe"));
        assert_eq!(note.data, json!({"message": "checked", "fields": {"url": "https://x", "api_token": REDACTED}}));
    }
}
