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
            if let Some(observer) = &self.observer {
                observer.0.log(&self.caps.skill, &without_secrets(record, &self.caps.env));
            }
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

/// The shortest granted environment value that is hidden from a record an observer hears
/// (shorter ones, such as `1` or `on`, would blank ordinary words).
const MIN_SECRET: usize = 4;

/// `record` with every granted environment variable's value replaced: what leaves the host
/// (an MCP client) must not carry the credentials the operator granted the skill.
fn without_secrets(mut record: LogRecord, env: &[(String, String)]) -> LogRecord {
    for (_, value) in env.iter().filter(|(_, v)| v.len() >= MIN_SECRET) {
        let hide = |text: &mut String| {
            if text.contains(value.as_str()) {
                *text = text.replace(value.as_str(), "[redacted]");
            }
        };
        hide(&mut record.message);
        record.fields.iter_mut().for_each(|(_, v)| hide(v));
    }
    record
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn granted_values_are_hidden_from_observers() {
        let env = [("API_KEY".to_string(), "s3cr3t-key".to_string()), ("DEBUG".to_string(), "on".to_string())];
        let record = LogRecord {
            level: "info",
            source: "log",
            message: "calling with s3cr3t-key on".into(),
            fields: vec![("auth".into(), "Bearer s3cr3t-key".into())],
        };
        let shown = without_secrets(record, &env);
        assert_eq!(shown.message, "calling with [redacted] on");
        assert_eq!(shown.fields, [("auth".to_string(), "Bearer [redacted]".to_string())]);
    }
}
