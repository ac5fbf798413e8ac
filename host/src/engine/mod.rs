//! The agent engine: approval-level resolution shared by every adapter, and the turn loop
//! (system prompt, per-channel history, tool routing, approvals, the turn's time budget).

pub mod approval;
pub mod approver;
pub mod budget;
pub mod calls;
pub mod coverage;
pub mod events;
pub mod history;
pub mod inflight;
pub mod interaction;
pub mod promote;
pub mod prompt;
pub mod reflection;
pub mod tool_budget;
pub mod tools;
pub mod turn;
pub mod verifier;

pub use approver::{ApprovalOutcome, ApprovalRequest, Approver, AutoApprove, NonInteractive};
pub use calls::{MAX_PARALLEL, ToolCallRecord};
pub use events::{EngineEvent, EventSink, NoEvents, ToolTarget};
pub use history::History;
pub use interaction::{Interaction, InteractionCall};
pub use promote::{Promotion, PromotionKey};
pub use tools::{ToolOutcome, ToolRouter};
pub use turn::{Engine, EngineError, EngineSettings, TurnRequest, TurnResult};
