//! `tasks`: a call goes on as a task of the MCP Tasks extension ([`crate::sandbox::Detacher`],
//! which the MCP adapter gives a call that may). Once per call; `false` everywhere else. The
//! call's deadline stops while the task is recorded.

use crate::sandbox::bindings::skillhost::skill::tasks::Host;
use crate::sandbox::host_state::HostState;

impl Host for HostState {
    async fn detach(&mut self) -> bool {
        let Some(detacher) = self.detacher.take() else { return false };
        self.deadline.clone().paused(detacher.detach()).await
    }
}
