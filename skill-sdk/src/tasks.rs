//! Going on as a task of the MCP Tasks extension: a tool that its skill's
//! [`TaskSupport`](crate::TaskSupport) marks [`Task::Detaches`](crate::Task::Detaches) gathers
//! what it needs first (its [`crate::ask`] rounds travel in the call's own results), then
//! detaches: the client gets the task at once, and the tool goes on in the background (its
//! later rounds are the task's input requests; its result is the task's).
//!
//! ```no_run
//! if skill_sdk::tasks::detach() {
//!     // From here the client polls `tasks/get`.
//! }
//! ```

use crate::bindings::skillhost::skill::tasks as wit;

/// Goes on as a task; `false` where the call cannot (the client did not declare the
/// extension, the tool is not marked to detach, outside MCP, or a second time): the call then
/// goes on as it is.
pub fn detach() -> bool {
    wit::detach()
}
