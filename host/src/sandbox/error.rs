//! What can go wrong loading a component or running a call, named by cause.

use std::time::Duration;

/// How much a guest returned, in words.
fn returned(size: Option<u64>, copy_limit: u64) -> String {
    match size {
        Some(size) => format!("{size} bytes"),
        None => format!("more than the {} the host copies out of a skill in one go", in_mib(copy_limit)),
    }
}

/// `bytes` in MiB, in words ("64 MiB", "0.5 MiB").
pub(super) fn in_mib(bytes: u64) -> String {
    if bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else {
        format!("{:.1} MiB", bytes as f64 / f64::from(1 << 20))
    }
}

/// Why a component could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The component file could not be read.
    #[error("cannot read the component: {0}")]
    Read(String),
    /// Not a WebAssembly component (bad bytes, a core module, failed validation).
    #[error("not a valid WebAssembly component: {0}")]
    NotAComponent(String),
    /// It imports something the host does not provide (another WIT version, wasi:http, ...).
    #[error("imports something skillhost does not provide: {0}")]
    UnsupportedImport(String),
    /// It does not export `skillhost:skill/tools@0.1.0` (or exports it with other types).
    #[error("does not export skillhost:skill/tools@0.1.0 as this host expects: {0}")]
    WrongExports(String),
    /// A script's component is not a `wasi:cli/command` (it exports no `wasi:cli/run`).
    #[error("is not a WASI command component (it exports no wasi:cli/run): {0}")]
    NotACommand(String),
    /// It trapped or ran out of a limit while describing itself.
    #[error("failed while describing itself: {0}")]
    Describe(#[from] CallError),
}

/// Why a call did not return normally. Every variant names its cause in words a model or an
/// operator can act on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// The guest used its whole fuel budget.
    #[error("the skill ran out of fuel (budget {0} units): it did too much work or looped forever")]
    FuelExhausted(u64),
    /// The wall-clock deadline passed.
    #[error("the skill did not finish within its {0:?} deadline")]
    Deadline(Duration),
    /// The guest tried to grow its memory past the cap.
    #[error("the skill exceeded its memory cap of {} MiB", .0 >> 20)]
    MemoryCap(u64),
    /// The guest's stack overflowed (unbounded recursion).
    #[error("the skill overflowed its stack (unbounded recursion?)")]
    StackOverflow,
    /// The guest returned more than the result cap.
    #[error("the skill returned {}, more than its {limit}-byte result limit", returned(*.size, *.copy_limit))]
    ResultTooLarge {
        /// What it returned, in bytes; `None` when it was more than the host copies out of a
        /// guest in one go ([`super::Limits::copy_limit`]), so it was refused uncopied.
        size: Option<u64>,
        /// The cap.
        limit: u64,
        /// What the host would have copied at most.
        copy_limit: u64,
    },
    /// The guest crashed (a panic, `unreachable`, a bad memory access).
    #[error("the skill crashed: {0}")]
    Trap(String),
    /// Too many instances are alive at once.
    #[error("the host is at its concurrent-instance limit; try again")]
    Busy,
    /// The host could not run the call.
    #[error("the host could not run the skill: {0}")]
    Host(String),
    /// The call asked a round (the `ask` import) that goes to the client in the call's
    /// result (an MCP `input_required` result): it stopped there, and runs again with the
    /// answers. Not a failure of the skill.
    #[error("the skill asked for input, which the client is given to answer")]
    Suspended,
}

impl CallError {
    /// A short machine-readable name for the cause.
    pub fn kind(&self) -> &'static str {
        match self {
            CallError::FuelExhausted(_) => "fuel_exhausted",
            CallError::Deadline(_) => "deadline",
            CallError::MemoryCap(_) => "memory_cap",
            CallError::StackOverflow => "stack_overflow",
            CallError::ResultTooLarge { .. } => "result_too_large",
            CallError::Trap(_) => "trap",
            CallError::Busy => "busy",
            CallError::Host(_) => "host",
            CallError::Suspended => "input_required",
        }
    }
}
