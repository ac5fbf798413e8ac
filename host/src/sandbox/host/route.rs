//! `route`: attributes of the current turn, visible to later calls of the same turn.

use crate::sandbox::bindings::skillhost::skill::route::Host;
use crate::sandbox::host_state::HostState;

impl Host for HostState {
    async fn set_attribute(&mut self, key: String, value: String) {
        if !self.route.set(key.clone(), value) {
            tracing::warn!(skill = %self.caps.skill, %key, "route attribute dropped (too large or too many)");
        }
    }
}
