//! The agent engine: the turn loop (system prompt, per-channel history, the model's tool
//! calls, the turn's deadline), and the one approval path every adapter shares.
//!
//! # Layout
//! - [`turn`]: [`Engine`], `run_turn` and `call_tool`; [`round`]: one round of calls;
//!   `nested`: the nested turns of delegations and sub-agent skills.
//! - [`gate`]: the one approval path (levels with overrides, promotion, asking, refusals);
//!   [`counterpart`]: how an adapter asks a person; [`promote`]: the approval counts;
//!   [`tool_budget`]: `engine.tool_budget`; [`window`]: the time window a call asks for.
//! - [`checkpoint`]: a chat turn waiting for a person, written down and resumed elsewhere.
//! - [`ready`]: turns and calls wait for skills still compiling; [`deadline`]: the turn's time budget; [`inflight`]: one turn per channel across
//!   processes; [`history`]: persisted conversations; [`prompt`]: the system prompt;
//!   `on_demand`: the turn's view of the on-demand skills and their `load_skill`.
//! - [`events`]: what a turn reports; [`verifier`]: the fact check; [`reflection`]: the
//!   daily reflection.

// No function over 60 lines here (clippy.toml); the adapters hold the same.
#![deny(clippy::too_many_lines)]

pub mod checkpoint;
pub mod counterpart;
pub mod deadline;
pub mod desk;
pub mod events;
pub mod gate;
pub mod history;
pub mod inflight;
mod nested;
mod on_demand;
pub mod promote;
pub mod prompt;
pub mod ready;
pub mod reflection;
mod request;
pub mod resume;
pub mod round;
pub mod tool_budget;
pub mod turn;
pub mod verifier;
pub mod window;

pub use counterpart::{ApprovalOutcome, AutoApprove, Counterpart, NonInteractive, PresentError};
pub use events::{EngineEvent, EventSink, NoEvents, ToolTarget};
pub use gate::Gate;
pub use gate::Given;
pub use history::History;
pub use promote::{Promotion, PromotionKey};
pub use resume::{ResumeError, Resumed};
pub use round::{MAX_PARALLEL, NestedRunner, Peers, ToolCallRecord};
pub use turn::{Engine, EngineError, EngineSettings, Loaded, TurnRequest, TurnResult};
