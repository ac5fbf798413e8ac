//! What a turn reports while it runs, for an adapter to show (CLI, SSE stream).

use super::counterpart::ApprovalOutcome;
use crate::tools::Level;
pub use crate::tools::ToolTarget;
use parking_lot::Mutex;
use serde_json::Value;
use std::time::{Duration, SystemTime};

/// One thing that happened during a turn.
#[derive(Debug, Clone, PartialEq)]
pub enum EngineEvent {
    /// An LLM request starts (the first, one after each round of tool calls, the wrap-up).
    /// Text deltas that follow belong to this round.
    RoundStarted,
    /// Assistant text, as it streams.
    TextDelta(String),
    /// An approved (or ungated) tool call starts.
    ToolStarted {
        /// The model's call id.
        tool_call_id: String,
        /// The prefixed tool name.
        tool_name: String,
        /// The call's arguments.
        input: Value,
        /// What the skill's `tool-target` hook said the call queries, when it gave a valid answer.
        target: Option<ToolTarget>,
    },
    /// A tool call finished (successfully or not).
    ToolCompleted {
        /// The model's call id.
        tool_call_id: String,
        /// The prefixed tool name.
        tool_name: String,
        /// How long it ran.
        duration: Duration,
        /// Always `true` for a call that ran: it was allowed to run (no approval needed,
        /// promoted, or approved by a person). The approval-v1 stream's `tool_completed`
        /// carries it as the record of that decision, not of success; a refused call never
        /// starts, so it has no `ToolCompleted`.
        approved: bool,
        /// Whether the result is an error.
        is_error: bool,
        /// Whether a successful result is empty (`tool-result-empty`, the handler's flag,
        /// then the content); `false` for errors.
        is_empty: bool,
    },
    /// A call waits for a person's decision.
    ApprovalRequested {
        /// The broker entry's id (one per approval).
        approval_id: String,
        /// The model's call id.
        tool_call_id: String,
        /// The prefixed tool name.
        tool_name: String,
        /// The call's arguments.
        input: Value,
        /// The level asked for.
        level: Level,
        /// When the engine stops waiting.
        expires_at: SystemTime,
    },
    /// The decision on a call arrived (or the wait ended).
    ApprovalResolved {
        /// The model's call id.
        tool_call_id: String,
        /// The decision.
        outcome: ApprovalOutcome,
    },
}

/// Where a turn sends its [`EngineEvent`]s. Called from the turn's task; keep it quick.
pub trait EventSink: Send + Sync {
    /// Receives one event.
    fn emit(&self, event: EngineEvent);

    /// The adapter the events go to (`api`, `slack`, `cli`, ...), for traces; `None` when
    /// no adapter is behind it.
    fn adapter(&self) -> Option<&'static str> {
        None
    }
}

/// Discards every event (fire-and-forget runs).
pub struct NoEvents;

impl EventSink for NoEvents {
    fn emit(&self, _event: EngineEvent) {}
}

/// Collects events in order (tests, buffered adapters).
impl EventSink for Mutex<Vec<EngineEvent>> {
    fn emit(&self, event: EngineEvent) {
        self.lock().push(event);
    }
}

/// Collects events in order (tests with the standard library's lock; a test that panicked
/// while holding it has failed already).
impl EventSink for std::sync::Mutex<Vec<EngineEvent>> {
    fn emit(&self, event: EngineEvent) {
        if let Ok(mut events) = self.lock() {
            events.push(event);
        }
    }
}
