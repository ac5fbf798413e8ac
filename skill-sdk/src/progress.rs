//! Progress of a long call, for the client that asked to hear it.
//!
//! An MCP client whose `tools/call` carries a progress token receives each report as
//! `notifications/progress`; everywhere else a report is a no-op, so report freely. The host
//! forwards at most one report every 50 ms (the one reaching `total` always) and only those
//! whose `progress` grew.
//!
//! ```no_run
//! use skill_sdk::progress;
//! for step in 0..10 {
//!     // ... one step of work ...
//!     progress::report(f64::from(step + 1), Some(10.0), Some("indexing"));
//! }
//! ```

use crate::bindings::skillhost::skill::progress as wit;

/// Reports `progress` so far, out of `total` when known, with an optional message.
pub fn report(progress: f64, total: Option<f64>, message: Option<&str>) {
    wit::report_progress(progress, total, message);
}
