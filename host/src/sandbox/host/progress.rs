//! `progress`: a long call's reports, handed to whoever observes the call (a no-op when
//! nobody does: no progress token, or not an MCP call).

use crate::sandbox::bindings::skillhost::skill::progress::Host;
use crate::sandbox::host_state::HostState;

/// The longest progress message handed on, in bytes; longer ones are cut at a char boundary.
const MAX_MESSAGE: usize = 1024;

impl Host for HostState {
    async fn report_progress(&mut self, progress: f64, total: Option<f64>, message: Option<String>) {
        let Some(observer) = &self.observer else { return };
        if !progress.is_finite() || total.is_some_and(|t| !t.is_finite()) {
            return;
        }
        let message = message.map(|mut m| {
            if m.len() > MAX_MESSAGE {
                let mut end = MAX_MESSAGE;
                while !m.is_char_boundary(end) {
                    end -= 1;
                }
                m.truncate(end);
            }
            m
        });
        observer.0.progress(progress, total, message);
    }
}
