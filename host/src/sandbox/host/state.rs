//! `state`: the skill's own key-value namespace.

use crate::sandbox::bindings::skillhost::skill::state::{Error, Host};
use crate::sandbox::host_state::HostState;
use crate::store::{StateError, StateStore};

fn convert(e: StateError) -> Error {
    match e {
        StateError::Invalid(m) => Error::Invalid(m),
        StateError::Other(m) => Error::Other(m),
    }
}

impl HostState {
    fn state(&self) -> Result<&StateStore, Error> {
        self.caps.state.as_ref().ok_or_else(|| Error::Other("this code has no state store".into()))
    }
}

impl Host for HostState {
    async fn get(&mut self, key: String) -> Result<Option<String>, Error> {
        self.state()?.get(&self.caps.state_namespace, &key).await.map_err(convert)
    }

    /// Bounded by the skill's state quota (`state_quota_mb`, `state_quota_keys`).
    async fn set(&mut self, key: String, value: String) -> Result<(), Error> {
        let quota = self.limits.state_quota();
        self.state()?.set_within(&self.caps.state_namespace, &key, &value, &quota).await.map_err(convert)
    }

    async fn delete(&mut self, key: String) -> Result<(), Error> {
        self.state()?.delete(&self.caps.state_namespace, &key).await.map_err(convert)
    }

    async fn keys(&mut self) -> Result<Vec<String>, Error> {
        self.state()?.keys(&self.caps.state_namespace).await.map_err(convert)
    }
}
