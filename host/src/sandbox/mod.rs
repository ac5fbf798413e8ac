//! The sandbox: a wasmtime engine (pooling allocator, fuel that also paces deadlines), the linker
//! holding the host imports, the compiled-component cache, and [`SkillComponent`], a
//! pre-instantiated skill whose every call runs in a fresh `Store`.
//!
//! The sandbox knows nothing of engines, LLMs or HTTP APIs: it loads components and runs
//! calls under limits.

pub mod bindings;
mod cache;
pub mod capabilities;
mod capture;
pub mod clock;
mod command;
mod component;
mod error;
mod failure;
mod functions;
mod host;
mod host_state;
pub mod inquirer;
pub mod limits;
pub mod observer;
pub mod output;
mod warm;

pub use cache::ComponentCache;
pub use capabilities::{
    Capabilities, HostList, ListKind, ListsWatcher, McpBridge, McpCallError, Notice, Notifier, NotifyError,
    NotifyFuture, NotifyGrant, SKILL_FOLDER, SkillFiles,
};
pub use clock::Clock;
pub use command::{CommandComponent, Exit, Invocation};
pub use component::{
    CallEnv, Described, Handled, Hooks, Outcome, ServedLists, SkillComponent, TOOLS_INTERFACE, wit_context,
};
pub use error::{CallError, LoadError};
pub use failure::YIELD_FUEL;
pub use host_state::{CallContext, ConversationBy, Detacher, HostState, RouteAttributes};
pub use inquirer::{Inquirer, Inquiries};
pub use limits::{LimitPolicy, Limits};
pub use observer::{CallObserver, Observer};
pub use warm::WARM_INSTANCES;

use parking_lot::Mutex;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;
use wasmtime::component::{Component, HasSelf, Linker};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

/// Engine-wide settings.
#[derive(Debug, Clone)]
pub struct SandboxOptions {
    /// How many instances may be alive at once (sizes the pooling allocator).
    pub max_instances: u32,
    /// The largest linear memory any call may have (the operator's maximum).
    pub max_memory_bytes: u64,
    /// Where compiled components are cached; `None` disables the disk cache.
    pub cache_dir: Option<PathBuf>,
    /// How many bytes of each linear memory stay mapped between calls (reset to the
    /// component's initial image, page by page, rather than unmapped): a call then does not
    /// page-fault its way back into the memory the previous call touched. Zero unmaps all.
    pub keep_resident_bytes: usize,
    /// The most bytes all skills' memories keep resident between calls, together: when a
    /// call's memory is reset and keeping its pages would pass this, it keeps only what is
    /// left and gives the rest back to the system.
    pub resident_budget: Resident,
    /// How many fresh instances of each skill component are made ahead of need, so that a
    /// call does not wait for its instantiation (each serves one call, then is dropped:
    /// `warm.rs`). Each holds an instance slot and the memory its instantiation wrote.
    pub warm_instances: usize,
}

/// [`SandboxOptions::keep_resident_bytes`] by default: enough for a Python interpreter's
/// working set, when the kernel can tell which pages a call dirtied.
pub const KEEP_RESIDENT_BYTES: usize = 64 << 20;

/// Hands the memory that freed buffers occupied back to the system now. mimalloc (the
/// global allocator, `lib.rs`) keeps freed pages for a while (a second) and gives them back
/// only as it next allocates, so after a skill made the host buffer tens of MiB (a refused
/// result or HTTP body) an idle server would hold them until its next burst of work. Called
/// where such a buffer was just dropped: rare, and about a millisecond.
pub(crate) fn release_freed_memory() {
    // mimalloc's own entry point, linked with the allocator (`mi_collect(true)`: collect
    // every page this thread and the abandoned ones hold, and purge the arenas).
    unsafe extern "C" {
        fn mi_collect(force: bool);
    }
    // SAFETY: `mi_collect` takes no pointers and may be called from any thread at any time.
    unsafe { mi_collect(true) }
}

/// What the sandbox keeps resident of skills' memories between calls
/// ([`SandboxOptions::resident_budget`]). Without such a bound every pool slot a call ever
/// used would keep [`KEEP_RESIDENT_BYTES`]: a skill running its memory bombs 64 at a time
/// would leave 4 GiB resident for good.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resident {
    /// All skills together, in bytes.
    pub total: usize,
    /// One skill's memory (one component's), in bytes.
    pub per_skill: usize,
}

impl Resident {
    /// `sandbox.resident_mb` and `sandbox.resident_per_skill_mb` by default.
    pub const DEFAULT: Resident = Resident { total: 1 << 30, per_skill: 256 << 20 };
}

impl std::fmt::Display for Resident {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let per_skill = self.per_skill.min(self.total);
        write!(f, "at most {} MiB in all, {} MiB per skill", self.total >> 20, per_skill >> 20)
    }
}

/// Whether the kernel has the `PAGEMAP_SCAN` ioctl (Linux 6.7). With it wasmtime resets only
/// the pages a call dirtied; without it, keeping memory resident means resetting all of it at
/// every call, which costs more than the page faults it saves.
fn has_pagemap_scan() -> bool {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mut parts = release.trim().split(['.', '-']).map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    (major, minor) >= (6, 7)
}

impl Default for SandboxOptions {
    fn default() -> Self {
        SandboxOptions {
            max_instances: 256,
            max_memory_bytes: Limits::MAXIMUM.memory_bytes,
            cache_dir: None,
            keep_resident_bytes: if has_pagemap_scan() { KEEP_RESIDENT_BYTES } else { 0 },
            resident_budget: Resident::DEFAULT,
            warm_instances: WARM_INSTANCES,
        }
    }
}

/// The engine, linker and cache shared by every skill.
pub struct Sandbox {
    engine: Engine,
    linker: Linker<HostState>,
    /// WASI alone, for script tools' command components: a script gets none of the skill
    /// imports.
    command_linker: Linker<HostState>,
    cache: Option<ComponentCache>,
    /// Components compiled by this process, by content hash: loading the same bytes twice
    /// (a reload, two folders sharing a build) compiles once.
    compiled: Mutex<HashMap<[u8; 32], Component>>,
    /// [`SandboxOptions::warm_instances`].
    warm_instances: usize,
}

impl Sandbox {
    /// Builds the engine and the linkers.
    pub fn new(options: &SandboxOptions) -> anyhow::Result<Self> {
        let engine = Engine::new(&engine_config(options))?;
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
        bindings::SkillWithHooks::add_to_linker::<_, HasSelf<HostState>>(&mut linker, |s| s)?;
        let mut command_linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut command_linker)?;
        let cache = options.cache_dir.clone().map(|dir| ComponentCache::new(dir, &engine));
        let warm_instances = options.warm_instances;
        Ok(Sandbox { engine, linker, command_linker, cache, compiled: Mutex::default(), warm_instances })
    }

    /// The wasmtime engine.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The cache folder (`sandbox.cache_dir`), when the sandbox has one: skills pulled from
    /// registries are kept under its `oci/`.
    pub fn cache_dir(&self) -> Option<&Path> {
        self.cache.as_ref().map(ComponentCache::dir)
    }

    /// Compiles (or loads from the cache) and pre-instantiates a component.
    pub fn load(&self, wasm: &[u8]) -> Result<SkillComponent, LoadError> {
        let component = self.compile(wasm)?;
        SkillComponent::new(&self.linker, &component, self.warm_instances)
    }

    /// Compiles (or loads from the cache) and pre-instantiates a script's command component.
    pub fn load_command(&self, wasm: &[u8]) -> Result<CommandComponent, LoadError> {
        let component = self.compile(wasm)?;
        CommandComponent::new(&self.command_linker, &component)
    }

    /// [`Sandbox::load`] from a file. With a cache, an unchanged file whose compiled entry is
    /// sound is neither read nor hashed: the entry is memory-mapped.
    pub fn load_file(&self, path: &Path) -> Result<SkillComponent, LoadError> {
        let component = self.compile_file(path)?;
        SkillComponent::new(&self.linker, &component, self.warm_instances)
    }

    /// Compiles, in parallel, the components not compiled yet (not in this process, not in
    /// the cache), calling `progress` with a line as each starts and ends, so the loads that
    /// follow find them ready. A component that fails is left for its load to report.
    pub fn precompile(&self, jobs: &[(String, Wasm<'_>)], progress: &(dyn Fn(&str) + Sync)) {
        // Checked in parallel too: a check maps the cached image and reads its metadata, which
        // after a reboot is a disk read per skill.
        let wasm: Vec<Wasm<'_>> = jobs.iter().map(|(_, wasm)| *wasm).collect();
        let ready = self.compiled(&wasm);
        let pending: Vec<_> = jobs.iter().zip(ready).filter(|(_, ready)| !ready).map(|(j, _)| j).collect();
        in_parallel(&pending, |(name, wasm)| {
            let _span = tracing::info_span!("compile", otel.name = %format!("compile {name}"), skillhost.skill = %name)
                .entered();
            progress(&format!("compiling skill `{name}`..."));
            let started = Instant::now();
            if self.compile_wasm(*wasm).is_ok() {
                let took = started.elapsed().as_secs_f64();
                progress(&format!("compiled skill `{name}` in {took:.1} s"));
            }
        });
    }

    /// Whether each of `wasm` is compiled already (in this process or in the cache), checked
    /// in parallel; nothing is compiled.
    pub fn compiled(&self, wasm: &[Wasm<'_>]) -> Vec<bool> {
        in_parallel(wasm, |w| self.is_ready(*w))
    }

    /// Whether `wasm` is compiled already (loading it from the cache if it is there).
    fn is_ready(&self, wasm: Wasm<'_>) -> bool {
        let digest = match (wasm, &self.cache) {
            (_, None) => return false,
            (Wasm::Bytes(bytes), Some(_)) => Sha256::digest(bytes).into(),
            (Wasm::File(path), Some(cache)) => match cache.digest_of_file(path) {
                Ok((digest, _)) => digest,
                Err(_) => return true, // Nothing to compile: its load reports the error.
            },
        };
        self.memoised(&digest).is_some() || self.cached(&digest).is_some()
    }

    fn compile_wasm(&self, wasm: Wasm<'_>) -> Result<Component, LoadError> {
        match wasm {
            Wasm::Bytes(bytes) => self.compile(bytes),
            Wasm::File(path) => self.compile_file(path),
        }
    }

    fn compile_file(&self, path: &Path) -> Result<Component, LoadError> {
        let read = |path: &Path| std::fs::read(path).map_err(|e| LoadError::Read(format!("{}: {e}", path.display())));
        let Some(cache) = &self.cache else { return self.compile(&read(path)?) };
        let (digest, bytes) =
            cache.digest_of_file(path).map_err(|e| LoadError::Read(format!("{}: {e}", path.display())))?;
        if let Some(component) = self.memoised(&digest) {
            return Ok(component);
        }
        if bytes.is_none()
            && let Some(component) = self.cached(&digest)
        {
            return Ok(component);
        }
        // Compiling needs the bytes (and checks them, hashing them again).
        match bytes {
            Some(bytes) => self.compile(&bytes),
            None => self.compile(&read(path)?),
        }
    }

    /// Compiles `wasm` (or loads it from the cache); the same bytes compile once per process.
    pub fn compile(&self, wasm: &[u8]) -> Result<Component, LoadError> {
        if wasmparser_is_core_module(wasm) {
            return Err(LoadError::NotAComponent(
                "this is a core wasm module, not a component; build for wasm32-wasip2 \
                 (or run `wasm-tools component new`)"
                    .into(),
            ));
        }
        if !wasm.starts_with(b"\0asm") {
            return Err(LoadError::NotAComponent("not a WebAssembly binary (bad magic number)".into()));
        }
        let key: [u8; 32] = Sha256::digest(wasm).into();
        if let Some(component) = self.memoised(&key) {
            return Ok(component);
        }
        let component = match &self.cache {
            Some(cache) => match cache.lookup(&key) {
                Some(component) => component,
                None => cache.compile_and_store(&key, wasm)?,
            },
            None => Component::new(&self.engine, wasm).map_err(|e| LoadError::NotAComponent(format!("{e:#}")))?,
        };
        self.memoise(key, &component);
        Ok(component)
    }

    fn memoised(&self, digest: &[u8; 32]) -> Option<Component> {
        self.compiled.lock().get(digest).cloned()
    }

    fn memoise(&self, digest: [u8; 32], component: &Component) {
        self.compiled.lock().insert(digest, component.clone());
    }

    /// The cache's entry for `digest`, memoised.
    fn cached(&self, digest: &[u8; 32]) -> Option<Component> {
        let component = self.cache.as_ref()?.lookup(digest)?;
        self.memoise(*digest, &component);
        Some(component)
    }
}

/// `work` on every item, on one thread per core, each taking the next item as it is done;
/// the results in the items' order.
fn in_parallel<T: Sync, R: Send>(items: &[T], work: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(items.len());
    if threads <= 1 {
        return items.iter().map(work).collect();
    }
    let next = AtomicUsize::new(0);
    let mut done: Vec<(usize, R)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let index = next.fetch_add(1, Ordering::Relaxed);
                        let Some(item) = items.get(index) else { return done };
                        done.push((index, work(item)));
                    }
                })
            })
            .collect();
        // A worker that panicked re-raises its panic here, as a sequential loop would.
        workers.into_iter().flat_map(|w| w.join().unwrap_or_else(|p| std::panic::resume_unwind(p))).collect()
    });
    done.sort_unstable_by_key(|(index, _)| *index);
    done.into_iter().map(|(_, result)| result).collect()
}

/// Where a component's bytes are.
#[derive(Debug, Clone, Copy)]
pub enum Wasm<'a> {
    /// In memory (an embedded skill).
    Bytes(&'a [u8]),
    /// In a file (a skill folder's `skill.wasm`).
    File(&'a Path),
}

/// A core module has version 1 in its header; a component has the component layer.
fn wasmparser_is_core_module(wasm: &[u8]) -> bool {
    wasm.len() >= 8 && wasm.starts_with(b"\0asm") && wasm[4..8] == [1, 0, 0, 0]
}

/// A WebAssembly page.
const WASM_PAGE: u64 = 64 << 10;

/// The engine settings every skill runs under (public so benchmarks can build the same
/// engine with a setting changed).
pub fn engine_config(options: &SandboxOptions) -> Config {
    let mut pool = PoolingAllocationConfig::default();
    let n = options.max_instances.max(1);
    pool.total_component_instances(n)
        .total_core_instances(n.saturating_mul(32))
        .total_memories(n.saturating_mul(4))
        .total_tables(n.saturating_mul(8))
        .total_stacks(n)
        .max_core_instances_per_component(64)
        .max_memories_per_component(16)
        .max_tables_per_component(32)
        .max_memory_size(options.max_memory_bytes as usize);
    if options.keep_resident_bytes > 0 {
        // Reset state exactly as before (every page back to the initial image): only how.
        // What is kept is bounded in all and per component memory: past either bound a reset
        // keeps less (vendor/wasmtime/SKILLHOST-PATCH.md). Tables keep 1 MiB a slot at most,
        // and as many slots as memories: a sixty-fourth of what memories may keep.
        pool.pagemap_scan(wasmtime::Enabled::Auto)
            .linear_memory_keep_resident(options.keep_resident_bytes)
            .linear_memory_keep_resident_total(options.resident_budget.total)
            .linear_memory_keep_resident_per_module(options.resident_budget.per_skill)
            .table_keep_resident(1 << 20);
    }
    let mut config = Config::new();
    // Where memory stays resident, a fresh instance's memory is its initial image copied into
    // the slot at instantiation, not a copy-on-write mapping of the image. The copy lands in
    // pages the last instance left resident (one contiguous dirty region, which the reset
    // keeps), and the call then writes to pages it owns: no page fault per page it first
    // touches. That moves a Python interpreter's hundreds of faults from its call into its
    // instantiation, which warm instances make ahead of need: a warm Python call took half
    // the time and calls in flight went 1.7-2x faster (docs/benchmarks.md); the Rust probe,
    // a few KiB of image, is unchanged. Without the pagemap scan every instantiation would
    // fault the whole image in again, so copy-on-write stays.
    config.memory_init_cow(options.keep_resident_bytes == 0);
    config
        .wasm_component_model(true)
        .consume_fuel(true)
        .max_wasm_stack(1 << 20)
        .async_stack_size(2 << 20)
        .allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    // Explicit bounds checks instead of guard pages and signal handlers. A linear memory's
    // accessible size then never changes protection: instantiating into a pooled slot and
    // resetting it make no `mprotect` call (with guard pages, every call whose guest grows
    // its memory made one at the grow and one at the next instantiation). Each `mprotect`
    // takes the process's memory-map lock for writing and shoots down the TLB of every core
    // running one of its threads, so concurrent calls queued behind each other: 4 callers of
    // the probe's `echo` made 17k calls/s on 2 cores, 53k/s with explicit checks, and a
    // CPU-bound call touching memory on every step costs the same (docs/benchmarks.md).
    // The reservation is the memory cap: nothing relies on address space past it.
    let reservation = options.max_memory_bytes.div_ceil(WASM_PAGE) * WASM_PAGE;
    config
        .signals_based_traps(false)
        .memory_guard_size(0)
        .guard_before_linear_memory(false)
        .memory_reservation(reservation);
    // Functions compiled before (by any skill) are read back instead of compiled again.
    if let Some(dir) = &options.cache_dir
        && let Some(functions) = functions::FunctionCache::open(dir)
        && let Err(e) = config.enable_incremental_compilation(std::sync::Arc::new(functions))
    {
        tracing::warn!("compiling without the function cache: {e:#}");
    }
    config
}

#[cfg(test)]
mod tests {
    use super::in_parallel;
    use std::time::Duration;

    #[test]
    fn in_parallel_keeps_the_items_order_and_runs_them_all() {
        // Early items take longest, so on two or more cores they finish last.
        let items: Vec<u64> = (0..16).collect();
        let doubled = in_parallel(&items, |&n| {
            std::thread::sleep(Duration::from_millis(16 - n));
            n * 2
        });
        assert_eq!(doubled, items.iter().map(|n| n * 2).collect::<Vec<_>>());
        assert!(in_parallel(&[] as &[u8], |_| ()).is_empty());
    }

    #[test]
    fn a_panic_in_a_worker_reaches_the_caller() {
        let caught = std::panic::catch_unwind(|| in_parallel(&[1, 2, 3], |&n| assert_ne!(n, 2, "item two")));
        let message = caught.unwrap_err();
        let text = message.downcast_ref::<String>().map(String::as_str).unwrap_or_default();
        assert!(text.contains("item two"), "{text}");
    }
}
