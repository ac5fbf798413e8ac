//! `log`: structured records into the call's capped log buffer and the host's log.

use crate::sandbox::bindings::skillhost::skill::log::{Host, Level};
use crate::sandbox::host_state::HostState;
use crate::sandbox::output::LogRecord;

impl Host for HostState {
    async fn log(&mut self, level: Level, message: String, fields: Vec<(String, String)>) {
        let level = match level {
            Level::Debug => "debug",
            Level::Info => "info",
            Level::Warn => "warn",
            Level::Error => "error",
        };
        let record = LogRecord { level, source: "log", message, fields };
        if self.logs.push(record.clone()) {
            emit(&self.caps.skill, &self.operation, &record);
        }
    }
}

/// Writes a kept record to the host's log, attributed to the skill and operation.
pub(crate) fn emit(skill: &str, operation: &str, record: &LogRecord) {
    let fields = record.fields.iter().map(|(k, v)| format!(" {k}={v:?}")).collect::<String>();
    let message = &record.message;
    match record.level {
        "debug" => tracing::debug!(target: "skill", skill, operation, "{message}{fields}"),
        "info" => tracing::info!(target: "skill", skill, operation, "{message}{fields}"),
        "warn" => tracing::warn!(target: "skill", skill, operation, "{message}{fields}"),
        _ => tracing::error!(target: "skill", skill, operation, "{message}{fields}"),
    }
}
