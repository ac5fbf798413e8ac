//! Telling the host that one of the skill's lists changed while it serves: the host
//! describes the skill again (its [`crate::Skill::tools`], its prompts and resources asked
//! anew) and tells MCP clients (`notifications/tools/list_changed`, ...). A no-op where
//! nothing serves (`skillhost call`).
//!
//! ```no_run
//! use skill_sdk::lists::{self, List};
//! lists::changed(List::Tools);
//! ```

use crate::bindings::skillhost::skill::lists as wit;

/// Which list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum List {
    /// The tools.
    Tools,
    /// The prompts.
    Prompts,
    /// The resources.
    Resources,
}

/// The skill's `which` list changed.
pub fn changed(which: List) {
    wit::changed(match which {
        List::Tools => wit::WhichList::Tools,
        List::Prompts => wit::WhichList::Prompts,
        List::Resources => wit::WhichList::Resources,
    });
}
