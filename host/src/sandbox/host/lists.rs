//! `lists`: the skill says one of its lists changed while it serves; the app's
//! [`crate::sandbox::ListsWatcher`] describes it again and tells MCP clients. A no-op where
//! nothing serves.

use crate::sandbox::bindings::skillhost::skill::lists::{Host, WhichList};
use crate::sandbox::capabilities::ListKind;
use crate::sandbox::host_state::HostState;

impl Host for HostState {
    async fn changed(&mut self, which: WhichList) {
        let Some(watcher) = self.caps.lists.clone() else { return };
        let which = match which {
            WhichList::Tools => ListKind::Tools,
            WhichList::Prompts => ListKind::Prompts,
            WhichList::Resources => ListKind::Resources,
        };
        watcher.changed(&self.caps.skill, which);
    }
}
