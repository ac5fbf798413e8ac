//! The only `bindgen!`: host-side types and traits for the skill contract in `wit/`.
//! (Generated items carry the WIT's own docs where it has them.)
#![allow(missing_docs)]

wasmtime::component::bindgen!({
    path: "../wit",
    world: "skill-with-hooks",
    imports: { default: async, "skillhost:skill/ask.ask": async | trappable },
    exports: { default: async },
    additional_derives: [PartialEq, Eq],
});

pub use self::exports::skillhost::skill as guest;
pub use self::skillhost::skill::types;
