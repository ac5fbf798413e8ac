//! Why a call failed, from wasmtime's error and what the store recorded: each cause a
//! [`CallError`] variant.

use super::clock::Clock;
use super::error::{CallError, in_mib};
use super::host_state::HostState;
use super::limits::Limits;
use std::time::Duration;
use wasmtime::{Store, Trap};

/// The error [`bounded`] ends a call with at its deadline.
#[derive(Debug)]
pub(super) struct DeadlineHit;

/// How much fuel guest code burns between two yields to the async runtime: about a
/// millisecond of compiled code. Each yield is where [`bounded`] checks the deadline, so a
/// CPU-bound loop ends within about that of its deadline, and a tokio worker running one is
/// never held for longer.
///
/// Yielding on fuel replaces epoch interruption: fuel is metered anyway (its budget is a
/// limit of every call), and an epoch check at every loop header and function entry cost
/// CPU-bound guests about a tenth on top of the metering (`cargo bench --bench sandbox`,
/// target 6).
pub const YIELD_FUEL: u64 = 2_000_000;

/// Extra wall-clock time after the deadline before a call parked in a host import is
/// dropped (the imports that wait bound themselves by the deadline first).
const DEADLINE_GRACE: Duration = Duration::from_millis(250);

/// Runs a call's `work` (instantiation and the call, or a warm instance's instantiation)
/// until `clock` runs out, ending it with [`DeadlineHit`] past it. The deadline is checked
/// whenever the call is polled, which is after every [`YIELD_FUEL`] of guest code, and after
/// every host import that waited. A call parked in a host import is not polled: a timer
/// [`DEADLINE_GRACE`] after the deadline is the backstop for that. A wait for a person (the
/// `ask` import) stops the clock.
pub(super) async fn bounded<T>(
    clock: &Clock,
    work: impl std::future::Future<Output = wasmtime::Result<T>>,
) -> wasmtime::Result<T> {
    let mut work = std::pin::pin!(work);
    let checked = std::future::poll_fn(|cx| {
        if clock.is_spent() {
            return std::task::Poll::Ready(Err(wasmtime::Error::new(DeadlineHit)));
        }
        work.as_mut().poll(cx)
    });
    clock.bound(DEADLINE_GRACE, checked).await.unwrap_or_else(|| Err(wasmtime::Error::new(DeadlineHit)))
}

/// A store holding `state` under its limits: its fuel (yielding every [`YIELD_FUEL`], where
/// [`bounded`] checks the deadline), its memory limiter and the host-copy limit
/// ([`Limits::copy_limit`]). Skill calls,
/// warm instances and scripts all get theirs here.
pub(super) fn limited_store(engine: &wasmtime::Engine, state: HostState) -> Store<HostState> {
    let (fuel, copy_limit) = (state.limits.fuel, state.limits.copy_limit());
    let mut store = Store::new(engine, state);
    store.limiter(|s| &mut s.limiter);
    store.set_fuel(fuel).expect("fuel is enabled on the engine");
    store.fuel_async_yield_interval(Some(YIELD_FUEL)).expect("fuel is enabled on the engine");
    store.set_hostcall_fuel(usize::try_from(copy_limit).unwrap_or(usize::MAX));
    store
}

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
    if error.downcast_ref::<super::host::Suspended>().is_some() {
        return CallError::Suspended;
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

/// wasmtime's words when a guest hands the host more than [`Limits::copy_limit`] bytes in one
/// go (its error type is private, so the text is matched; a test guest pins it).
const HOSTCALL_FUEL_EXHAUSTED: &str = "fuel allocated for hostcalls has been exhausted";

/// A guest handed over more than the host copies in one call. Lifting a returned value
/// happens after the guest's code returned, so the error carries no wasm backtrace; the
/// arguments of a host import are lifted while the guest's frames are still on the stack.
fn over_copy_limit(error: &wasmtime::Error, limits: &Limits) -> CallError {
    if error.downcast_ref::<wasmtime::WasmBacktrace>().is_some() {
        let limit = in_mib(limits.copy_limit());
        CallError::Trap(format!("it passed more than {limit} to a host function in one call"))
    } else {
        CallError::ResultTooLarge { size: None, limit: limits.max_result_bytes, copy_limit: limits.copy_limit() }
    }
}

fn truncate(s: &str, max: usize) -> &str {
    match s.char_indices().nth(max) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}
