//! Who hears of a call while it runs: the front door that asked for it (an MCP client's
//! session), through [`CallObserver`]. The sandbox knows nothing of MCP; it hands on the
//! records the `log` import kept and the `progress` import's reports, as they happen.

use super::output::LogRecord;
use std::sync::Arc;

/// Hears a running call's log records and progress reports. Called from the host imports,
/// so it must not block: queue and return.
pub trait CallObserver: Send + Sync {
    /// A record of the `log` import that the call's log buffer kept (stdout and stderr are
    /// never handed on: a panic message there may quote a secret).
    fn log(&self, skill: &str, record: &LogRecord);

    /// A `report-progress` call, unfiltered (the observer rate-limits).
    fn progress(&self, progress: f64, total: Option<f64>, message: Option<String>);
}

/// A shared [`CallObserver`], carried by a call's context.
#[derive(Clone)]
pub struct Observer(pub Arc<dyn CallObserver>);

impl std::fmt::Debug for Observer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Observer")
    }
}
