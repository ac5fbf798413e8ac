//! Where skills' own messages go (the `notify` import): each chat adapter an agent runs
//! registers here when it is made, and leaves when it stops serving. A message for a
//! platform no adapter of the agent serves is `unavailable`, never queued.

use crate::config::{Destination, Platform};
use crate::sandbox::{Notice, Notifier, NotifyError, NotifyFuture};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::{Arc, Weak};

/// A chat adapter's side of the outbox.
#[async_trait::async_trait]
pub trait Deliver: Send + Sync {
    /// Posts `text` to the conversation `id` of the platform; with `wake`, then starts a turn
    /// there with the text as the incoming message. The error says why it was not posted.
    async fn deliver(
        &self,
        skill: &str,
        destination: &Destination,
        text: &str,
        wake: bool,
    ) -> Result<(), super::chat::ChatError>;
}

/// One agent's chat adapters, by platform.
#[derive(Default)]
pub struct Outbox {
    adapters: Mutex<HashMap<Platform, Weak<dyn Deliver>>>,
}

impl Outbox {
    /// An empty outbox.
    pub fn new() -> Arc<Self> {
        Arc::default()
    }

    /// Makes `adapter` the agent's way to `platform` for as long as the guard lives.
    pub fn register(self: &Arc<Self>, platform: Platform, adapter: Weak<dyn Deliver>) -> Registered {
        self.adapters.lock().insert(platform, adapter.clone());
        Registered { outbox: Arc::downgrade(self), platform, adapter }
    }

    fn adapter(&self, platform: Platform) -> Option<Arc<dyn Deliver>> {
        self.adapters.lock().get(&platform).and_then(Weak::upgrade)
    }
}

impl Notifier for Outbox {
    fn send<'a>(&'a self, notice: Notice<'a>) -> NotifyFuture<'a> {
        Box::pin(async move {
            let platform = notice.destination.platform;
            let Some(adapter) = self.adapter(platform) else {
                return Err(NotifyError::Unavailable(format!(
                    "no {} adapter serves this agent in this process",
                    platform.name()
                )));
            };
            adapter
                .deliver(notice.skill, notice.destination, notice.text, notice.wake)
                .await
                .map_err(|e| NotifyError::Failed(e.to_string()))
        })
    }
}

/// Keeps an adapter registered; dropped when the adapter stops serving.
pub struct Registered {
    outbox: Weak<Outbox>,
    platform: Platform,
    adapter: Weak<dyn Deliver>,
}

impl Drop for Registered {
    fn drop(&mut self) {
        let Some(outbox) = self.outbox.upgrade() else { return };
        let mut adapters = outbox.adapters.lock();
        if adapters.get(&self.platform).is_some_and(|a| a.ptr_eq(&self.adapter)) {
            adapters.remove(&self.platform);
        }
    }
}
