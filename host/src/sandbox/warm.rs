//! Instances made ahead of need: a few fresh instances per skill, instantiated in the
//! background so that a call whose component is dear to instantiate (a Python interpreter)
//! does not wait for it.
//!
//! Nothing about a call's isolation changes. Each warm instance is a fresh `Store` with a
//! fresh instance of the component, never called before; it serves exactly one call (or
//! hook) and is dropped with that call's store, as an instance made in the call would be.
//! It is made with the skill's own capabilities and limits and serves only a call with the
//! same ones. The call's deadline starts when the call takes it, and the fuel and memory the
//! instantiation used stay counted against the call, as they were when the call made it.
//! The cost is memory: each warm instance holds one pooling-allocator slot and whatever its
//! instantiation wrote ([`super::SandboxOptions::warm_instances`]).

use super::component::CallEnv;
use super::failure::bounded;
use super::host_state::HostState;
use parking_lot::Mutex;
use std::sync::Arc;
use std::time::{Duration, Instant};
use wasmtime::Store;
use wasmtime::component::{Instance, InstancePre};

/// [`super::SandboxOptions::warm_instances`] by default: one call of a dear skill finds an
/// instance ready, and a second call arriving at once usually does too.
pub const WARM_INSTANCES: usize = 2;

/// Instantiation at least this long makes a component dear: only such components get warm
/// instances (a Rust skill instantiates in tens of microseconds, where a pool costs more than
/// it saves; a Python one takes milliseconds).
pub const DEAR_INSTANTIATION: Duration = Duration::from_micros(500);

/// A fresh, never-called instance and its store.
pub(super) struct Ready {
    pub store: Store<HostState>,
    pub instance: Instance,
}

#[derive(Default)]
struct State {
    ready: Vec<Ready>,
    /// A background task is instantiating.
    filling: bool,
    /// The fastest instantiation seen (a component's first is slow with cold caches; its
    /// fastest says what it costs).
    fastest: Option<Duration>,
}

/// One skill component's warm instances (shared by its clones).
#[derive(Clone)]
pub(super) struct Warm {
    size: usize,
    state: Arc<Mutex<State>>,
    /// Calls served by a warm instance (for tests and benchmarks).
    served: Arc<std::sync::atomic::AtomicU64>,
}

impl Warm {
    /// Up to `size` instances ahead; zero makes every call instantiate its own.
    pub fn new(size: usize) -> Self {
        Warm { size, state: Arc::default(), served: Arc::default() }
    }

    fn lock(&self) -> parking_lot::MutexGuard<'_, State> {
        self.state.lock()
    }

    /// A warm instance made for `env`, if one is ready. Those made for other capabilities or
    /// limits (there are none while a skill's environment stays the same) are dropped.
    pub fn take(&self, env: &CallEnv) -> Option<Ready> {
        if self.size == 0 {
            return None;
        }
        let mut state = self.lock();
        while let Some(ready) = state.ready.pop() {
            let data = ready.store.data();
            if Arc::ptr_eq(&data.caps, &env.caps) && data.limits == env.limits {
                self.served.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                return Some(ready);
            }
        }
        None
    }

    /// Notes how long an instantiation took.
    pub fn note(&self, took: Duration) {
        if self.size > 0 {
            let mut state = self.lock();
            state.fastest = Some(state.fastest.map_or(took, |f| f.min(took)));
        }
    }

    /// Starts a background task making instances until `size` are ready, unless one runs or
    /// enough are ready. `make` builds a fresh store for `env`.
    pub fn refill(
        &self,
        pre: &InstancePre<HostState>,
        env: &CallEnv,
        make: fn(&InstancePre<HostState>, &CallEnv) -> Store<HostState>,
    ) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        {
            let mut state = self.lock();
            let dear = state.fastest.is_some_and(|f| f >= DEAR_INSTANTIATION);
            if self.size == 0 || !dear || state.filling || state.ready.len() >= self.size {
                return;
            }
            state.filling = true;
        }
        let (this, pre, env) = (self.clone(), pre.clone(), env.clone());
        runtime.spawn(async move { this.fill(&pre, &env, make).await });
    }

    async fn fill(
        &self,
        pre: &InstancePre<HostState>,
        env: &CallEnv,
        make: fn(&InstancePre<HostState>, &CallEnv) -> Store<HostState>,
    ) {
        loop {
            {
                // Checked and cleared under one lock: a call taking one now finds `filling`
                // off and starts the next fill.
                let mut state = self.lock();
                if state.ready.len() >= self.size {
                    state.filling = false;
                    return;
                }
            }
            let (started, mut store) = (Instant::now(), make(pre, env));
            // Bounded as a call's own instantiation is: by fuel, and by the timeout from now.
            let clock = store.data().deadline.clone();
            match bounded(&clock, pre.instantiate_async(&mut store)).await {
                Ok(instance) => {
                    self.note(started.elapsed());
                    self.lock().ready.push(Ready { store, instance });
                }
                Err(error) => {
                    // The call that finds none ready instantiates its own and reports this.
                    tracing::debug!(skill = %env.caps.skill, "a warm instance could not be made: {error:#}");
                    self.lock().filling = false;
                    return;
                }
            }
        }
    }

    /// How many instances are ready (for tests and benchmarks).
    pub fn ready(&self) -> usize {
        self.lock().ready.len()
    }

    /// How many calls a warm instance served (for tests and benchmarks).
    pub fn served(&self) -> u64 {
        self.served.load(std::sync::atomic::Ordering::Relaxed)
    }
}
