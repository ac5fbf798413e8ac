//! Write skillhost skills in Rust.
//!
//! A skill is a WebAssembly component that offers tools to an LLM agent. The host calls it
//! in a sandbox: a fresh instance per call, with fuel, memory and time limits, and only the
//! capabilities that both the skill's `skill.toml` and the operator's config grant. This
//! crate hides the component model: you implement [`Skill`] (and, if you want, some hook
//! traits) and call [`export!`].
//!
//! ```no_run
//! use serde::Deserialize;
//! use schemars::JsonSchema;
//! use skill_sdk::{http, json, Context, Error, Skill, Tool, ToolResult, Value};
//!
//! struct Status;
//!
//! /// Input of `check`.
//! #[derive(Deserialize, JsonSchema)]
//! struct Check {
//!     /// The URL to request.
//!     url: String,
//! }
//!
//! impl Skill for Status {
//!     fn tools() -> Vec<Tool> {
//!         vec![Tool::new::<Check>("check", "Request a URL and report its HTTP status.")
//!             .expose_result()]
//!     }
//!
//!     fn handle(name: &str, input: Value, _ctx: &Context) -> Result<ToolResult, Error> {
//!         match name {
//!             "check" => {
//!                 let args: Check = serde_json::from_value(input)?;
//!                 let response = http::get(&args.url)?;
//!                 Ok(ToolResult::ok(json!({ "status": response.status })))
//!             }
//!             _ => Err(Error::unknown_tool(name)),
//!         }
//!     }
//! }
//!
//! skill_sdk::export!(Status);
//! ```
//!
//! A skill crate is a `cdylib` built for `wasm32-wasip2`. Input types derive
//! [`serde::Deserialize`] and [`schemars::JsonSchema`]; those derives need `serde` and
//! `schemars` among the skill's own dependencies (or `#[serde(crate = "skill_sdk::serde")]`
//! and `#[schemars(crate = "skill_sdk::schemars")]` on each type).
//!
//! # Hooks
//!
//! Optional hooks are traits: [`ResolveHuman`], [`IsAvailable`], [`Startup`], [`Scheduled`],
//! [`BeforeMcpCall`], [`ObserveMcpResult`], [`ToolResultEmpty`] and [`ToolTarget`]. Name the
//! ones you implement in [`export!`]; the component then exports exactly those, and the
//! host treats every other hook as absent:
//!
//! ```ignore
//! skill_sdk::export!(Services, hooks: [resolve_human, startup]);
//! ```
//!
//! # The skill's own files
//!
//! With `[capabilities] files = "self"` in `skill.toml` (no operator grant needed) the
//! component reads its skill's distributable files (the folder without its sources, build
//! output and hidden files; files over 16 MiB and symlinks out of the folder left out),
//! read-only, at `/skill`, where relative paths resolve too: use [`std::fs`] as usual.
//!
//! ```no_run
//! # fn run() -> std::io::Result<()> {
//! let rates = std::fs::read_to_string("data/rates.csv")?; // the same as "/skill/data/rates.csv"
//! # Ok(()) }
//! ```
//!
//! # Layout
//!
//! - [`Skill`], [`Tool`], [`ToolResult`], [`SkillInfo`]: what a skill declares and returns.
//! - [`Context`]: who called, from where, and the skill's configuration.
//! - [`memory`], [`state`], [`http`], [`mcp`], [`notify`], [`route`], [`log`], [`progress`]:
//!   the host's imports, each with its own error type; all of them convert into [`Error`], so `?` works
//!   in handlers.
//! - [`ask`]: asking whoever drives the call (a form, sampling, roots), mid-call.
//! - [`lists`]: telling the host a list of the skill changed while it serves.
//! - [`tasks`]: going on as a task of the MCP Tasks extension.
//! - [`hooks`]: the optional hook traits and their answer types.
#![deny(missing_docs)]

pub mod ask;
#[doc(hidden)]
pub mod bindings;
mod context;
mod error;
mod export;
pub mod hooks;
pub mod http;
pub mod lists;
pub mod log;
pub mod mcp;
pub mod memory;
pub mod notify;
pub mod progress;
mod result;
pub mod route;
mod served;
pub mod state;
pub mod tasks;
mod tool;

pub use context::Context;
pub use error::Error;
pub use hooks::{
    BeforeMcpCall, HumanLevel, IsAvailable, ObserveMcpResult, Preflight, ResolveHuman, Scheduled, Startup, Target,
    ToolResultEmpty, ToolTarget,
};
pub use result::{Block, Content, Coverage, CoverageStatus, ResourceContents, ResultState, ToolResult};
pub use served::{
    ClientCapabilities, Embedded, PromptDef, PromptError, Prompted, Prompts, ReadError, ResourceDef, Resources, Task,
    TaskSupport,
};
pub use tool::{Approval, McpUse, SkillInfo, Tool};

pub use schemars;
pub use serde;
pub use serde_json;
pub use serde_json::{Value, json};

/// A skill: the tools it offers and how it runs them.
///
/// Every method is an associated function: the host makes a fresh instance of the component
/// for each call, so nothing survives between calls except what the skill keeps in
/// [`state`] or [`memory`].
pub trait Skill {
    /// The tools the skill offers. Called once when the skill loads; the host validates
    /// names (`[a-z0-9_]`, unique) and schemas then.
    fn tools() -> Vec<Tool>;

    /// Runs the tool `name` (unprefixed) with `input`, a JSON object that already passed the
    /// tool's schema.
    ///
    /// An `Err` becomes a failed result (`{"error": "..."}`, `succeeded: false`) that the
    /// model reads; a panic is reported as a crash instead. Answer an unknown `name` with
    /// [`Error::unknown_tool`].
    fn handle(name: &str, input: Value, ctx: &Context) -> Result<ToolResult, Error>;

    /// Facts about the skill: MCP servers it uses or owns, and whether to verify answers
    /// against its results. Called once when the skill loads. Defaults to none of them.
    fn info() -> SkillInfo {
        SkillInfo::default()
    }
}

/// Parses a tool's `input` into `T`, turning a mismatch into [`Error::InvalidInput`].
///
/// The same as `serde_json::from_value(input)?` inside a handler; use whichever reads better.
pub fn parse_input<T: serde::de::DeserializeOwned>(input: Value) -> Result<T, Error> {
    Ok(serde_json::from_value(input)?)
}

#[doc(hidden)]
pub mod __private {
    //! Used by [`export!`](crate::export); not part of the API.
    pub use crate::export::Glue;
}
