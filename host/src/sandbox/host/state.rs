//! `state`: the skill's own key-value namespace, or the conversation's
//! ([`crate::sandbox::Capabilities::state_namespace`]).

use crate::sandbox::bindings::skillhost::skill::state::{Error, Host};
use crate::sandbox::host_state::HostState;
use crate::store::state::{Expiry, Namespace};
use crate::store::{StateError, StateStore};

fn convert(e: StateError) -> Error {
    match e {
        StateError::Invalid(m) => Error::Invalid(m),
        StateError::Other(m) => Error::Other(m),
    }
}

impl HostState {
    /// The store, and the namespace this call sees in it.
    fn state(&self) -> Result<(&StateStore, Namespace), Error> {
        let store = self.caps.state.as_ref().ok_or_else(|| Error::Other("this code has no state store".into()))?;
        Ok((store, self.caps.state_namespace(self.conversation.as_ref())))
    }
}

impl Host for HostState {
    /// A get keeps a per-conversation entry alive as a set does.
    async fn get(&mut self, key: String) -> Result<Option<String>, Error> {
        let (store, ns) = self.state()?;
        let value = match ns.expiry {
            Expiry::Never => store.get(&ns.name, &key).await,
            Expiry::Idle(ttl) => store.get_touching(&ns.name, &key, ttl).await,
        };
        value.map_err(convert)
    }

    /// Bounded by the skill's state quota (`state_quota_mb`, `state_quota_keys`), per namespace.
    async fn set(&mut self, key: String, value: String) -> Result<(), Error> {
        let quota = self.limits.state_quota();
        let (store, ns) = self.state()?;
        store.set_within(&ns.name, &key, &value, &quota, ns.expiry).await.map_err(convert)
    }

    async fn delete(&mut self, key: String) -> Result<(), Error> {
        let (store, ns) = self.state()?;
        store.delete(&ns.name, &key).await.map_err(convert)
    }

    async fn keys(&mut self) -> Result<Vec<String>, Error> {
        let (store, ns) = self.state()?;
        store.keys(&ns.name).await.map_err(convert)
    }
}
