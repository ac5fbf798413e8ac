//! One file per WIT import interface: the skill's only ways out of the sandbox.

mod ask;
mod blocks;
pub(in crate::sandbox) mod http;
mod lists;
pub(super) mod log;
mod mcp;
mod memory;
mod notify;
mod progress;
mod route;
mod state;
mod tasks;

use super::bindings::skillhost::skill::types;
use super::host_state::HostState;
pub(super) use ask::Suspended;

impl types::Host for HostState {}
