//! `blocks`: a call's result blocks beyond `types.content-block` (audio, embedded resources),
//! kept in the store until `handle` returns; the result's size cap counts them.

use crate::sandbox::bindings::skillhost::skill::blocks::{Block, Host};
use crate::sandbox::host_state::HostState;

impl Host for HostState {
    async fn set_result_blocks(&mut self, blocks: Vec<Block>) {
        self.result_blocks = Some(blocks);
    }
}
