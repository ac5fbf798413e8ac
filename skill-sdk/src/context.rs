//! The context of one call.

use serde::de::DeserializeOwned;

use crate::bindings::skillhost::skill::types as wit;
use crate::{Error, Value};

/// Who made a call, from where, and the skill's configuration.
///
/// Handlers and the hooks that run for a call receive it; it is a snapshot taken when the
/// call started (a [`route::set`](crate::route::set) during the call shows up in later calls
/// of the same turn, not in this one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Context {
    config: String,
    channel_id: String,
    user_id: Option<String>,
    route: Vec<(String, String)>,
    user_message: Option<String>,
}

impl Context {
    /// A context built by hand, for unit tests of handlers. `config` is a JSON object.
    pub fn new(config: &Value, channel_id: impl Into<String>, user_id: Option<String>) -> Self {
        Context {
            config: config.to_string(),
            channel_id: channel_id.into(),
            user_id,
            route: Vec::new(),
            user_message: None,
        }
    }

    /// Sets the turn's incoming message (for unit tests, like [`Context::new`]).
    pub fn with_user_message(mut self, message: impl Into<String>) -> Self {
        self.user_message = Some(message.into());
        self
    }

    /// Adds a route attribute (for unit tests, like [`Context::new`]).
    pub fn with_route(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.route.push((key.into(), value.into()));
        self
    }

    /// The skill's block from `skills.config.<skill>`, decoded into `T`.
    ///
    /// The block is `{}` when the operator configured nothing, so give `T`'s fields
    /// defaults (`#[serde(default)]`) unless the skill cannot work without them.
    pub fn config<T: DeserializeOwned>(&self) -> Result<T, Error> {
        serde_json::from_str(&self.config).map_err(|e| Error::Config(e.to_string()))
    }

    /// The skill's configuration block as JSON (`{}` when absent).
    pub fn config_value(&self) -> Value {
        serde_json::from_str(&self.config).unwrap_or_else(|_| Value::Object(Default::default()))
    }

    /// The channel or chat the message came from (`cli` in the terminal).
    pub fn channel_id(&self) -> &str {
        &self.channel_id
    }

    /// The user who sent the message, when known.
    pub fn user_id(&self) -> Option<&str> {
        self.user_id.as_deref()
    }

    /// The value of the current turn's route attribute `key`, if set.
    pub fn route(&self, key: &str) -> Option<&str> {
        self.route.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    /// Every route attribute of the current turn, in the order the host gave them.
    pub fn routes(&self) -> &[(String, String)] {
        &self.route
    }

    /// The text of the turn's incoming message; `None` for a call outside any turn
    /// (`skillhost call`, a tool called by an MCP client).
    pub fn user_message(&self) -> Option<&str> {
        self.user_message.as_deref()
    }
}

impl From<wit::CallContext> for Context {
    fn from(ctx: wit::CallContext) -> Self {
        Context {
            config: ctx.config,
            channel_id: ctx.channel_id,
            user_id: ctx.user_id,
            route: ctx.route,
            user_message: ctx.user_message,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json;

    #[derive(Debug, serde::Deserialize, PartialEq)]
    struct Config {
        #[serde(default)]
        services: std::collections::BTreeMap<String, Value>,
    }

    #[test]
    fn config_decodes_into_a_type_and_reports_mismatches() {
        let ctx = Context::new(&json!({ "services": { "a": 1 } }), "cli", None);
        assert_eq!(ctx.config::<Config>().unwrap().services.len(), 1);
        let bad = Context::new(&json!({ "services": 3 }), "cli", None);
        let err = bad.config::<Config>().unwrap_err().to_string();
        assert!(err.starts_with("invalid skill configuration: invalid type"), "{err}");
    }

    #[test]
    fn route_looks_up_attributes() {
        let ctx = Context::new(&json!({}), "c1", Some("u1".into())).with_route("intent", "ops");
        assert_eq!(ctx.route("intent"), Some("ops"));
        assert_eq!(ctx.route("other"), None);
        assert_eq!(ctx.user_id(), Some("u1"));
        assert_eq!(ctx.user_message(), None);
        assert_eq!(ctx.with_user_message("hi").user_message(), Some("hi"));
    }
}
