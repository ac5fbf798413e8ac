//! The sandbox: a wasmtime engine (pooling allocator, fuel, epoch interruption), the linker
//! holding the host imports, the compiled-component cache, and [`SkillComponent`], a
//! pre-instantiated skill whose every call runs in a fresh `Store`.
//!
//! The sandbox knows nothing of engines, LLMs or HTTP APIs: it loads components and runs
//! calls under limits.

pub mod bindings;
mod cache;
pub mod capabilities;
mod capture;
mod command;
mod component;
mod error;
mod failure;
mod host;
mod host_state;
pub mod limits;
pub mod output;

pub use cache::ComponentCache;
pub use capabilities::{Capabilities, HostList, McpBridge, McpCallError};
pub use command::{CommandComponent, Exit, Invocation};
pub use component::{CallEnv, Hooks, Outcome, SkillComponent};
pub use error::{CallError, HOST_COPY_LIMIT, LoadError};
pub use host_state::{CallContext, HostState, RouteAttributes};
pub use limits::{LimitPolicy, Limits};

use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;
use wasmtime::component::{Component, HasSelf, Linker};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

/// How often the epoch advances: the granularity of deadlines and of yielding to the async
/// runtime during CPU-bound guest code.
pub const EPOCH_TICK: Duration = Duration::from_millis(5);

/// Engine-wide settings.
#[derive(Debug, Clone)]
pub struct SandboxOptions {
    /// How many instances may be alive at once (sizes the pooling allocator).
    pub max_instances: u32,
    /// The largest linear memory any call may have (the operator's maximum).
    pub max_memory_bytes: u64,
    /// Where compiled components are cached; `None` disables the disk cache.
    pub cache_dir: Option<PathBuf>,
}

impl Default for SandboxOptions {
    fn default() -> Self {
        SandboxOptions { max_instances: 256, max_memory_bytes: Limits::MAXIMUM.memory_bytes, cache_dir: None }
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
}

impl Sandbox {
    /// Builds the engine and linker and starts the epoch ticker.
    pub fn new(options: &SandboxOptions) -> anyhow::Result<Self> {
        let engine = Engine::new(&engine_config(options))?;
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
        bindings::SkillWithHooks::add_to_linker::<_, HasSelf<HostState>>(&mut linker, |s| s)?;
        let mut command_linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut command_linker)?;
        let cache = options.cache_dir.clone().map(|dir| ComponentCache::new(dir, &engine));
        spawn_ticker(engine.weak())?;
        Ok(Sandbox { engine, linker, command_linker, cache, compiled: Mutex::default() })
    }

    /// The wasmtime engine.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Compiles (or loads from the cache) and pre-instantiates a component.
    pub fn load(&self, wasm: &[u8]) -> Result<SkillComponent, LoadError> {
        let component = self.compile(wasm)?;
        SkillComponent::new(&self.linker, &component)
    }

    /// Compiles (or loads from the cache) and pre-instantiates a script's command component.
    pub fn load_command(&self, wasm: &[u8]) -> Result<CommandComponent, LoadError> {
        let component = self.compile(wasm)?;
        CommandComponent::new(&self.command_linker, &component)
    }

    fn compile(&self, wasm: &[u8]) -> Result<Component, LoadError> {
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
        if let Some(component) = self.compiled.lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
            return Ok(component.clone());
        }
        let component = match &self.cache {
            Some(cache) => cache.get_or_compile(wasm)?,
            None => Component::new(&self.engine, wasm).map_err(|e| LoadError::NotAComponent(format!("{e:#}")))?,
        };
        self.compiled.lock().unwrap_or_else(|p| p.into_inner()).insert(key, component.clone());
        Ok(component)
    }
}

/// A core module has version 1 in its header; a component has the component layer.
fn wasmparser_is_core_module(wasm: &[u8]) -> bool {
    wasm.len() >= 8 && wasm.starts_with(b"\0asm") && wasm[4..8] == [1, 0, 0, 0]
}

fn engine_config(options: &SandboxOptions) -> Config {
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
    let mut config = Config::new();
    config
        .wasm_component_model(true)
        .consume_fuel(true)
        .epoch_interruption(true)
        .max_wasm_stack(1 << 20)
        .async_stack_size(2 << 20)
        .allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    config
}

/// Advances the epoch every [`EPOCH_TICK`] for as long as the wasmtime engine lives.
///
/// Every compiled component holds the engine, so the ticker outlives the `Sandbox` value
/// itself: a command that keeps only the loaded skills (and drops the loader that owned the
/// sandbox) still has its deadlines enforced. The thread ends once the last component and
/// the sandbox are gone.
fn spawn_ticker(engine: wasmtime::EngineWeak) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("skillhost-epoch".into())
        .spawn(move || {
            loop {
                std::thread::sleep(EPOCH_TICK);
                match engine.upgrade() {
                    Some(engine) => engine.increment_epoch(),
                    None => return,
                }
            }
        })
        .map(drop)
}
