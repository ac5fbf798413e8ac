//! Why a call failed, from wasmtime's error and what the store recorded: each cause a
//! [`CallError`] variant.

use super::error::{CallError, HOST_COPY_LIMIT};
use super::host_state::HostState;
use super::limits::Limits;
use wasmtime::{Store, Trap};

/// The error the epoch callback and the backstop timeout end a call with.
#[derive(Debug)]
pub(super) struct DeadlineHit;

impl std::fmt::Display for DeadlineHit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("deadline reached")
    }
}

impl std::error::Error for DeadlineHit {}

/// Names the cause of a failed call: a limit, a crash (quoting the guest's last stderr line),
/// the instance limit, or the host.
pub(super) fn classify(store: &Store<HostState>, limits: &Limits, error: wasmtime::Error) -> CallError {
    if error.downcast_ref::<DeadlineHit>().is_some() {
        return CallError::Deadline(limits.timeout);
    }
    let state = store.data();
    match error.downcast_ref::<Trap>() {
        Some(Trap::OutOfFuel) => CallError::FuelExhausted(limits.fuel),
        Some(Trap::Interrupt) => CallError::Deadline(limits.timeout),
        Some(Trap::StackOverflow) => CallError::StackOverflow,
        _ if state.limiter.hit => CallError::MemoryCap(limits.memory_bytes),
        Some(trap) => {
            let detail = state.logs.crash_message();
            let detail = detail.map(|l| format!(" ({})", truncate(&l, 300))).unwrap_or_default();
            CallError::Trap(format!("{trap}{detail}"))
        }
        None => {
            let message = format!("{error:#}");
            if message.contains(HOSTCALL_FUEL_EXHAUSTED) {
                over_copy_limit(&error, limits)
            } else if message.contains("maximum concurrent") {
                CallError::Busy
            } else {
                CallError::Host(message)
            }
        }
    }
}

/// wasmtime's words when a guest hands the host more than [`HOST_COPY_LIMIT`] bytes in one
/// call (its error type is private, so the text is matched; a test guest pins it).
const HOSTCALL_FUEL_EXHAUSTED: &str = "fuel allocated for hostcalls has been exhausted";

/// A guest handed over more than the host copies in one call. Lifting a returned value
/// happens after the guest's code returned, so the error carries no wasm backtrace; the
/// arguments of a host import are lifted while the guest's frames are still on the stack.
fn over_copy_limit(error: &wasmtime::Error, limits: &Limits) -> CallError {
    if error.downcast_ref::<wasmtime::WasmBacktrace>().is_some() {
        let limit = HOST_COPY_LIMIT >> 20;
        CallError::Trap(format!("it passed more than {limit} MiB to a host function in one call"))
    } else {
        CallError::ResultTooLarge { size: None, limit: limits.max_result_bytes }
    }
}

fn truncate(s: &str, max: usize) -> &str {
    match s.char_indices().nth(max) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}
