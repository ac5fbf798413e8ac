//! The current turn's routing attributes.
//!
//! Read them from [`Context::route`](crate::Context::route); set them here for the tool
//! calls and hooks that come later in the same turn. Turns never share attributes.

use crate::bindings::skillhost::skill::route as wit;

/// Sets the route attribute `key` to `value` for the rest of the current turn.
pub fn set(key: &str, value: &str) {
    wit::set_attribute(key, value);
}
