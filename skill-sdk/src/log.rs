//! Structured logging to the host's log, attributed to the calling skill and tool.
//!
//! The host caps what one call may log; past the cap it drops records and notes how many.
//!
//! ```no_run
//! use skill_sdk::log;
//! log::info("checked", &[("url", "https://example.com"), ("status", "200")]);
//! log::warn("slow response", &[]);
//! ```

use crate::bindings::skillhost::skill::log as wit;

/// How serious a record is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// Detail for whoever debugs the skill.
    Debug,
    /// Normal progress.
    Info,
    /// Something unexpected that the skill handled.
    Warn,
    /// Something failed.
    Error,
}

/// Writes one record with key-value `fields`.
pub fn record(level: Level, message: &str, fields: &[(&str, &str)]) {
    let level = match level {
        Level::Debug => wit::Level::Debug,
        Level::Info => wit::Level::Info,
        Level::Warn => wit::Level::Warn,
        Level::Error => wit::Level::Error,
    };
    let fields: Vec<(String, String)> = fields.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
    wit::log(level, message, &fields);
}

/// Writes a [`Level::Debug`] record.
pub fn debug(message: &str, fields: &[(&str, &str)]) {
    record(Level::Debug, message, fields);
}

/// Writes a [`Level::Info`] record.
pub fn info(message: &str, fields: &[(&str, &str)]) {
    record(Level::Info, message, fields);
}

/// Writes a [`Level::Warn`] record.
pub fn warn(message: &str, fields: &[(&str, &str)]) {
    record(Level::Warn, message, fields);
}

/// Writes a [`Level::Error`] record.
pub fn error(message: &str, fields: &[(&str, &str)]) {
    record(Level::Error, message, fields);
}
