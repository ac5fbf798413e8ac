//! A pre-instantiated skill component. Every call gets a fresh `Store` with its own fuel,
//! deadline, memory cap and log buffer; the store is dropped afterwards, so nothing leaks
//! between calls, channels or users.

use super::bindings::guest;
use super::bindings::guest::prompts::{PromptError, PromptResult};
use super::bindings::guest::resources::ReadError;
use super::bindings::skillhost::skill::blocks::{Block as ResultBlock, EmbeddedResource, ResourceContents};
use super::bindings::types::{
    CallContext as WitContext, HumanLevel, PreflightDecision, SkillInfo, Target, ToolDef, ToolResult,
};
use super::capabilities::Capabilities;
use super::error::{CallError, LoadError};
use super::failure::{bounded, classify, limited_store};
use super::host_state::{CallContext, HostState, RouteAttributes};
use super::inquirer::Inquirer;
use super::limits::Limits;
use super::observer::Observer;
use super::output::LogRecord;
use super::warm::{Ready, Warm};
use crate::store::state::Conversation;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use wasmtime::Store;
use wasmtime::component::{Component, ComponentExportIndex, Instance, InstancePre, Linker, TypedFunc};

/// Which optional hooks a component exports.
#[derive(Clone, Default)]
pub struct Hooks {
    resolve_human: Option<guest::resolve_human::GuestIndices>,
    availability: Option<guest::availability::GuestIndices>,
    startup: Option<guest::startup::GuestIndices>,
    scheduled: Option<guest::scheduled::GuestIndices>,
    before_mcp_call: Option<guest::before_mcp_call::GuestIndices>,
    observe_mcp_result: Option<guest::observe_mcp_result::GuestIndices>,
    tool_result_empty: Option<guest::tool_result_empty::GuestIndices>,
    tool_target: Option<guest::tool_target::GuestIndices>,
    resources: Option<guest::resources::GuestIndices>,
    prompts: Option<guest::prompts::GuestIndices>,
    client_capabilities: Option<guest::client_capabilities::GuestIndices>,
    task_support: Option<guest::task_support::GuestIndices>,
}

impl std::fmt::Debug for Hooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.names()).finish()
    }
}

impl Hooks {
    /// The WIT names of the exported hooks.
    pub fn names(&self) -> Vec<&'static str> {
        let all = [
            ("resolve-human", self.resolve_human.is_some()),
            ("availability", self.availability.is_some()),
            ("startup", self.startup.is_some()),
            ("scheduled", self.scheduled.is_some()),
            ("before-mcp-call", self.before_mcp_call.is_some()),
            ("observe-mcp-result", self.observe_mcp_result.is_some()),
            ("tool-result-empty", self.tool_result_empty.is_some()),
            ("tool-target", self.tool_target.is_some()),
            ("resources", self.resources.is_some()),
            ("prompts", self.prompts.is_some()),
            ("client-capabilities", self.client_capabilities.is_some()),
            ("task-support", self.task_support.is_some()),
        ];
        all.into_iter().filter(|(_, present)| *present).map(|(name, _)| name).collect()
    }
}

/// Where and under which limits a skill's calls run.
#[derive(Clone)]
pub struct CallEnv {
    /// What the skill may reach.
    pub caps: Arc<Capabilities>,
    /// Per-call limits.
    pub limits: Limits,
}

/// A call's value plus what the call left behind.
#[derive(Debug, Clone)]
pub struct Outcome<T> {
    /// What the guest returned.
    pub value: T,
    /// Log records kept (capped).
    pub logs: Vec<LogRecord>,
    /// Log records dropped past the cap.
    pub logs_dropped: u64,
    /// Fuel consumed.
    pub fuel_used: u64,
    /// Wall-clock time, instantiation included.
    pub elapsed: Duration,
    /// The linear memory the call's instance grew to (its peak: memory never shrinks).
    pub memory_bytes: u64,
}

impl<T> Outcome<T> {
    /// The same outcome with its value converted.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Outcome<U> {
        let Outcome { value, logs, logs_dropped, fuel_used, elapsed, memory_bytes } = self;
        Outcome { value: f(value), logs, logs_dropped, fuel_used, elapsed, memory_bytes }
    }
}

/// Whom one run serves: what the host imports see of the call's turn.
#[derive(Default)]
struct Serving {
    route: RouteAttributes,
    /// Who hears the call's logs and progress (`handle` calls from MCP only).
    observer: Option<Observer>,
    /// The conversation (the `state` import's namespace); `None` for the lifecycle hooks
    /// (`describe`, `is-available`, `startup`, `scheduled`), which serve none.
    conversation: Option<Conversation>,
    /// Who answers the call's `ask` rounds (tool calls, resource reads and prompts only).
    inquirer: Option<Inquirer>,
    /// Who takes the call on as a task (tool calls from MCP clients only).
    detacher: Option<Arc<dyn super::host_state::Detacher>>,
}

impl Serving {
    /// A run for a call made in `ctx`, with its route attributes.
    fn call(ctx: &CallContext) -> Self {
        let (route, conversation, inquirer) = (ctx.route.clone(), Some(ctx.conversation()), ctx.inquirer.clone());
        Serving { route, observer: None, conversation, inquirer, detacher: ctx.detacher.clone() }
    }

    /// A run for a hook about a call made in `ctx`, which gets no route attributes.
    fn about(ctx: &CallContext) -> Self {
        Serving { conversation: Some(ctx.conversation()), ..Serving::default() }
    }
}

/// A compiled, linked skill component.
#[derive(Clone)]
pub struct SkillComponent {
    pre: InstancePre<HostState>,
    tools: guest::tools::GuestIndices,
    /// `tools.handle`, looked up once: a call finds the function without a name lookup.
    handle_export: ComponentExportIndex,
    /// Whether `tools` was type-checked against an instance (once per component suffices:
    /// every instance of it has the same exports).
    typechecked: Arc<AtomicBool>,
    hooks: Hooks,
    warm: Warm,
}

type CallFuture<'s, R> = Pin<Box<dyn Future<Output = wasmtime::Result<R>> + Send + 's>>;

/// The `handle` export as the host calls it.
type HandleFunc<'a> = TypedFunc<(&'a str, &'a str, &'a WitContext), (ToolResult,)>;

/// A refused result at least this large is handed back to the system at once
/// ([`super::release_freed_memory`]).
pub(super) const RELEASE_AFTER_BYTES: u64 = 4 << 20;

/// The interface a skill's tools are exported in.
pub const TOOLS_INTERFACE: &str = "skillhost:skill/tools@0.1.0";

impl SkillComponent {
    pub(super) fn new(linker: &Linker<HostState>, component: &Component, warm: usize) -> Result<Self, LoadError> {
        let pre = linker.instantiate_pre(component).map_err(|e| LoadError::UnsupportedImport(format!("{e:#}")))?;
        let tools = guest::tools::GuestIndices::new(&pre).map_err(|e| wrong_exports(component, pre.engine(), e))?;
        let handle_export = component
            .get_export_index(None, TOOLS_INTERFACE)
            .and_then(|tools| component.get_export_index(Some(&tools), "handle"))
            .ok_or_else(|| LoadError::WrongExports(format!("no `handle` in `{TOOLS_INTERFACE}`")))?;
        let hooks = Hooks {
            resolve_human: guest::resolve_human::GuestIndices::new(&pre).ok(),
            availability: guest::availability::GuestIndices::new(&pre).ok(),
            startup: guest::startup::GuestIndices::new(&pre).ok(),
            scheduled: guest::scheduled::GuestIndices::new(&pre).ok(),
            before_mcp_call: guest::before_mcp_call::GuestIndices::new(&pre).ok(),
            observe_mcp_result: guest::observe_mcp_result::GuestIndices::new(&pre).ok(),
            tool_result_empty: guest::tool_result_empty::GuestIndices::new(&pre).ok(),
            tool_target: guest::tool_target::GuestIndices::new(&pre).ok(),
            resources: guest::resources::GuestIndices::new(&pre).ok(),
            prompts: guest::prompts::GuestIndices::new(&pre).ok(),
            client_capabilities: guest::client_capabilities::GuestIndices::new(&pre).ok(),
            task_support: guest::task_support::GuestIndices::new(&pre).ok(),
        };
        let typechecked = Arc::default();
        Ok(SkillComponent { pre, tools, handle_export, typechecked, hooks, warm: Warm::new(warm) })
    }

    /// How many instances made ahead of need are ready now.
    pub fn warm_instances(&self) -> usize {
        self.warm.ready()
    }

    /// How many calls (and hooks) of this component a warm instance served.
    pub fn warm_served(&self) -> u64 {
        self.warm.served()
    }

    /// The optional hooks this component exports.
    pub fn hooks(&self) -> &Hooks {
        &self.hooks
    }

    /// Lists the tools and skill info, type-checking every export on the way, so a hook with
    /// the wrong signature fails at load rather than at its first call.
    pub async fn describe(&self, env: &CallEnv) -> Result<Outcome<Described>, LoadError> {
        let this = self.clone();
        let outcome = self
            .run(env, Serving::default(), "describe".into(), move |store, instance| {
                Box::pin(async move {
                    this.typecheck_hooks(&mut *store, &instance)?;
                    let tools = this.tools.load(&mut *store, &instance)?;
                    let list = tools.call_list_tools(&mut *store).await?;
                    let info = tools.call_info(&mut *store).await?;
                    let mut served = ServedLists::default();
                    if let Some(resources) = &this.hooks.resources {
                        let resources = resources.load(&mut *store, &instance)?;
                        served.resources = resources.call_list_resources(&mut *store).await?;
                        served.templates = resources.call_list_templates(&mut *store).await?;
                    }
                    if let Some(prompts) = &this.hooks.prompts {
                        served.prompts = prompts.load(&mut *store, &instance)?.call_list_prompts(&mut *store).await?;
                    }
                    if let Some(needs) = &this.hooks.client_capabilities {
                        served.client_needs = needs.load(&mut *store, &instance)?.call_required(&mut *store).await?;
                    }
                    if let Some(tasks) = &this.hooks.task_support {
                        served.task_tools = tasks.load(&mut *store, &instance)?.call_tools(&mut *store).await?;
                    }
                    Ok((list, info, served))
                })
            })
            .await;
        outcome.map_err(|e| match e {
            CallError::Host(m) if m.contains("type mismatch") || m.contains("expected") => LoadError::WrongExports(m),
            other => LoadError::Describe(other),
        })
    }

    fn typecheck_hooks(&self, store: &mut Store<HostState>, instance: &Instance) -> wasmtime::Result<()> {
        let h = &self.hooks;
        macro_rules! check {
            ($($field:ident),*) => {$(
                if let Some(indices) = &h.$field {
                    indices.load(&mut *store, instance)?;
                }
            )*};
        }
        check!(
            resolve_human,
            availability,
            startup,
            scheduled,
            before_mcp_call,
            observe_mcp_result,
            tool_result_empty,
            tool_target,
            resources,
            prompts,
            client_capabilities,
            task_support
        );
        Ok(())
    }

    /// Runs `handle` for one tool call.
    pub async fn handle(
        &self,
        env: &CallEnv,
        name: &str,
        input: &str,
        ctx: &CallContext,
    ) -> Result<Outcome<Handled>, CallError> {
        let operation = format!("handle {name}");
        let (name, input, wit_ctx) = (name.to_string(), input.to_string(), wit_context(ctx));
        let this = self.clone();
        let (limit, copy_limit) = (env.limits.max_result_bytes, env.limits.copy_limit());
        let accept = |(result, blocks): &Handled| match result_size(result) + blocks.as_deref().map_or(0, blocks_size) {
            size if size > limit => Err(CallError::ResultTooLarge { size: Some(size), limit, copy_limit }),
            _ => Ok(()),
        };
        let serving = Serving { observer: ctx.observer.clone(), ..Serving::call(ctx) };
        let outcome = self
            .run_accepting(
                env,
                serving,
                operation,
                move |store, instance| {
                    Box::pin(async move {
                        let handle = this.handle_func(&mut *store, &instance)?;
                        let (result,) = handle.call_async(&mut *store, (&name, &input, &wit_ctx)).await?;
                        Ok((result, store.data_mut().result_blocks.take()))
                    })
                },
                accept,
            )
            .await;
        // The refused result is dropped by now: a large one's pages go back to the system.
        if let Err(CallError::ResultTooLarge { size: Some(size), .. }) = &outcome
            && *size >= RELEASE_AFTER_BYTES
        {
            crate::sandbox::release_freed_memory();
        }
        outcome
    }

    /// The instance's `handle`: type-checked the first time (the bindings' own lookup), then
    /// found by its index alone.
    fn handle_func<'a>(&self, store: &mut Store<HostState>, instance: &Instance) -> wasmtime::Result<HandleFunc<'a>> {
        if !self.typechecked.load(Ordering::Acquire) {
            self.tools.load(&mut *store, instance)?;
            self.typechecked.store(true, Ordering::Release);
        }
        let func = instance
            .get_func(&mut *store, self.handle_export)
            .ok_or_else(|| wasmtime::Error::msg("the instance has no `handle`"))?;
        // SAFETY: `tools.load` above checked `handle` against exactly this signature on an
        // instance of this component, and every instance of a component has the same types.
        Ok(unsafe { TypedFunc::new_unchecked(func) })
    }

    /// `resolve-human`, or `None` when the component does not export it.
    pub async fn resolve_human(
        &self,
        env: &CallEnv,
        name: &str,
        input: &str,
        ctx: &CallContext,
    ) -> Option<Result<Outcome<Option<HumanLevel>>, CallError>> {
        let indices = self.hooks.resolve_human.clone()?;
        let (name, input, wit_ctx) = (name.to_string(), input.to_string(), wit_context(ctx));
        Some(
            self.run(env, Serving::call(ctx), "resolve-human".into(), move |store, instance| {
                Box::pin(async move {
                    let g = indices.load(&mut *store, &instance)?;
                    g.call_resolve_human(&mut *store, &name, &input, &wit_ctx).await
                })
            })
            .await,
        )
    }

    /// `is-available` with the skill's config block, or `None` when the component does not
    /// export it.
    pub async fn is_available(
        &self,
        env: &CallEnv,
        config: &serde_json::Value,
    ) -> Option<Result<Outcome<bool>, CallError>> {
        let indices = self.hooks.availability.clone()?;
        let config = config.to_string();
        Some(
            self.run(env, Serving::default(), "is-available".into(), move |store, instance| {
                Box::pin(
                    async move { indices.load(&mut *store, &instance)?.call_is_available(&mut *store, &config).await },
                )
            })
            .await,
        )
    }

    /// `startup`, or `None` when the component does not export it.
    pub async fn startup(
        &self,
        env: &CallEnv,
        config: &serde_json::Value,
    ) -> Option<Result<Outcome<Result<(), String>>, CallError>> {
        let indices = self.hooks.startup.clone()?;
        let config = config.to_string();
        Some(
            self.run(env, Serving::default(), "startup".into(), move |store, instance| {
                Box::pin(async move { indices.load(&mut *store, &instance)?.call_startup(&mut *store, &config).await })
            })
            .await,
        )
    }

    /// `scheduled`, or `None` when the component does not export it.
    pub async fn scheduled(
        &self,
        env: &CallEnv,
        config: &serde_json::Value,
    ) -> Option<Result<Outcome<Result<(), String>>, CallError>> {
        let indices = self.hooks.scheduled.clone()?;
        let config = config.to_string();
        Some(
            self.run(env, Serving::default(), "scheduled".into(), move |store, instance| {
                Box::pin(
                    async move { indices.load(&mut *store, &instance)?.call_scheduled(&mut *store, &config).await },
                )
            })
            .await,
        )
    }

    /// `before-mcp-call`, or `None` when the component does not export it.
    pub async fn before_mcp_call(
        &self,
        env: &CallEnv,
        server: &str,
        tool: &str,
        arguments: &str,
        ctx: &CallContext,
    ) -> Option<Result<Outcome<PreflightDecision>, CallError>> {
        let indices = self.hooks.before_mcp_call.clone()?;
        let (server, tool, arguments, wit_ctx) =
            (server.to_string(), tool.to_string(), arguments.to_string(), wit_context(ctx));
        Some(
            self.run(env, Serving::call(ctx), "before-mcp-call".into(), move |store, instance| {
                Box::pin(async move {
                    let g = indices.load(&mut *store, &instance)?;
                    g.call_before_mcp_call(&mut *store, &server, &tool, &arguments, &wit_ctx).await
                })
            })
            .await,
        )
    }

    /// `observe-mcp-result`, or `None` when the component does not export it.
    pub async fn observe_mcp_result(
        &self,
        env: &CallEnv,
        server: &str,
        tool: &str,
        arguments: &str,
        output: &str,
        ctx: &CallContext,
    ) -> Option<Result<Outcome<Option<String>>, CallError>> {
        let indices = self.hooks.observe_mcp_result.clone()?;
        let (server, tool, arguments, output, wit_ctx) =
            (server.to_string(), tool.to_string(), arguments.to_string(), output.to_string(), wit_context(ctx));
        Some(
            self.run(env, Serving::call(ctx), "observe-mcp-result".into(), move |store, instance| {
                Box::pin(async move {
                    let g = indices.load(&mut *store, &instance)?;
                    g.call_observe_mcp_result(&mut *store, &server, &tool, &arguments, &output, &wit_ctx).await
                })
            })
            .await,
        )
    }

    /// `tool-result-empty` for a result of a call made in `ctx`, or `None` when the
    /// component does not export it.
    pub async fn tool_result_empty(
        &self,
        env: &CallEnv,
        tool: &str,
        raw_result: &str,
        ctx: &CallContext,
    ) -> Option<Result<Outcome<Option<bool>>, CallError>> {
        let indices = self.hooks.tool_result_empty.clone()?;
        let (tool, raw) = (tool.to_string(), raw_result.to_string());
        Some(
            self.run(env, Serving::about(ctx), "tool-result-empty".into(), move |store, instance| {
                Box::pin(async move {
                    indices.load(&mut *store, &instance)?.call_tool_result_empty(&mut *store, &tool, &raw).await
                })
            })
            .await,
        )
    }

    /// `tool-target` for a call made in `ctx`, or `None` when the component does not
    /// export it.
    pub async fn tool_target(
        &self,
        env: &CallEnv,
        tool: &str,
        input: &str,
        ctx: &CallContext,
    ) -> Option<Result<Outcome<Option<Target>>, CallError>> {
        let indices = self.hooks.tool_target.clone()?;
        let (tool, input) = (tool.to_string(), input.to_string());
        Some(
            self.run(env, Serving::about(ctx), "tool-target".into(), move |store, instance| {
                Box::pin(async move {
                    indices.load(&mut *store, &instance)?.call_tool_target(&mut *store, &tool, &input).await
                })
            })
            .await,
        )
    }

    /// `resources.read-resource` of `uri`, or `None` when the component does not export it.
    pub async fn read_resource(
        &self,
        env: &CallEnv,
        uri: &str,
        ctx: &CallContext,
    ) -> Option<Result<Outcome<Result<Vec<EmbeddedResource>, ReadError>>, CallError>> {
        let indices = self.hooks.resources.clone()?;
        let (uri, wit_ctx) = (uri.to_string(), wit_context(ctx));
        Some(
            self.run(env, Serving::call(ctx), format!("read-resource {uri}"), move |store, instance| {
                Box::pin(async move {
                    indices.load(&mut *store, &instance)?.call_read_resource(&mut *store, &uri, &wit_ctx).await
                })
            })
            .await,
        )
    }

    /// `prompts.get-prompt` of `name` with `arguments`, or `None` when the component does not
    /// export it.
    pub async fn get_prompt(
        &self,
        env: &CallEnv,
        name: &str,
        arguments: Vec<(String, String)>,
        ctx: &CallContext,
    ) -> Option<Result<Outcome<Result<PromptResult, PromptError>>, CallError>> {
        let indices = self.hooks.prompts.clone()?;
        let (name, wit_ctx) = (name.to_string(), wit_context(ctx));
        Some(
            self.run(env, Serving::call(ctx), format!("get-prompt {name}"), move |store, instance| {
                Box::pin(async move {
                    let prompts = indices.load(&mut *store, &instance)?;
                    prompts.call_get_prompt(&mut *store, &name, &arguments, &wit_ctx).await
                })
            })
            .await,
        )
    }

    /// `prompts.complete` of argument `argument` of prompt `name`, or `None` when the
    /// component does not export it.
    pub async fn complete(
        &self,
        env: &CallEnv,
        name: &str,
        argument: &str,
        value: &str,
        context: Vec<(String, String)>,
    ) -> Option<Result<Outcome<Vec<String>>, CallError>> {
        let indices = self.hooks.prompts.clone()?;
        let (name, argument, value) = (name.to_string(), argument.to_string(), value.to_string());
        Some(
            self.run(env, Serving::default(), format!("complete {name}"), move |store, instance| {
                Box::pin(async move {
                    let prompts = indices.load(&mut *store, &instance)?;
                    prompts.call_complete(&mut *store, &name, &argument, &value, &context).await
                })
            })
            .await,
        )
    }

    /// Runs `call` in a fresh instance (one made ahead of need, or one instantiated now) for
    /// whom `serving` says, and turns every way it can fail into a [`CallError`] naming the
    /// cause. The store is dropped on return.
    async fn run<R: Send + 'static>(
        &self,
        env: &CallEnv,
        serving: Serving,
        operation: String,
        call: impl for<'s> FnOnce(&'s mut Store<HostState>, Instance) -> CallFuture<'s, R> + Send,
    ) -> Result<Outcome<R>, CallError> {
        self.run_accepting(env, serving, operation, call, |_| Ok(())).await
    }

    /// [`SkillComponent::run`], with `accept` refusing a result the guest returned (too
    /// large, say). A call that fails (refused, or stopped by a limit or a trap) has its
    /// store dropped releasing its memory: what it touched is given back, not kept resident
    /// for the next instance as the pages of a call that succeeded are (the fast path).
    async fn run_accepting<R: Send + 'static>(
        &self,
        env: &CallEnv,
        serving: Serving,
        operation: String,
        call: impl for<'s> FnOnce(&'s mut Store<HostState>, Instance) -> CallFuture<'s, R> + Send,
        accept: impl FnOnce(&R) -> Result<(), CallError> + Send,
    ) -> Result<Outcome<R>, CallError> {
        let started = Instant::now();
        let (mut store, ready) = match self.warm.take(env) {
            Some(Ready { store, instance }) => (store, Some(instance)),
            None => (fresh_store(&self.pre, env), None),
        };
        store.data_mut().begin(serving.route, serving.conversation, operation);
        store.data_mut().observer = serving.observer;
        store.data_mut().inquirer = serving.inquirer;
        store.data_mut().detacher = serving.detacher;
        let clock = store.data().deadline.clone();
        let (pre, warm) = (&self.pre, &self.warm);
        let work = async {
            let instance = match ready {
                Some(instance) => instance,
                None => {
                    let instance = pre.instantiate_async(&mut store).await?;
                    warm.note(started.elapsed());
                    instance
                }
            };
            call(&mut store, instance).await
        };
        // Classify before taking the logs: a crash report quotes the guest's last stderr.
        let result = bounded(&clock, work).await.map_err(|error| classify(&store, &env.limits, error));
        let result = result.and_then(|value| accept(&value).map(|()| value));
        let fuel_used = env.limits.fuel.saturating_sub(store.get_fuel().unwrap_or(0));
        let memory_bytes = store.data().limiter.used();
        // After the call, so that making the next call's instance does not slow this one.
        self.warm.refill(&self.pre, env, fresh_store);
        let (logs, logs_dropped) = store.data().take_logs();
        let operation = std::mem::take(&mut store.data_mut().operation);
        let operation = operation.as_str();
        if logs_dropped > 0 {
            tracing::warn!(skill = %env.caps.skill, operation, logs_dropped, "log output over the cap was dropped");
        }
        if result.is_err() {
            wasmtime::releasing_memory(|| drop(store));
        }
        match result {
            Ok(value) => Ok(Outcome { value, logs, logs_dropped, fuel_used, elapsed: started.elapsed(), memory_bytes }),
            // Not a failure: the call stopped at a question its client answers in a retry.
            Err(CallError::Suspended) => Err(CallError::Suspended),
            Err(error) => {
                // The cause's kind only: a crash report quotes the guest's stderr (a panic
                // message), which may hold a secret, so the full text is debug detail.
                tracing::warn!(skill = %env.caps.skill, operation, kind = error.kind(), "the skill's call failed");
                tracing::debug!(skill = %env.caps.skill, operation, kind = error.kind(), "{error}");
                Err(error)
            }
        }
    }
}

/// A fresh store for a call under `env`'s limits.
fn fresh_store(pre: &InstancePre<HostState>, env: &CallEnv) -> Store<HostState> {
    limited_store(pre.engine(), HostState::new(env.caps.clone(), &env.limits))
}

/// The bytes a result holds: its text and every typed block (what the result cap bounds).
/// What a component serves beyond tools, listed when it loads (the `resources` and `prompts`
/// exports; empty without them).
#[derive(Debug, Default)]
pub struct ServedLists {
    /// `resources.list-resources`.
    pub resources: Vec<guest::resources::ResourceDef>,
    /// `resources.list-templates`.
    pub templates: Vec<guest::resources::ResourceTemplate>,
    /// `prompts.list-prompts`.
    pub prompts: Vec<guest::prompts::PromptDef>,
    /// `client-capabilities.required`: the tools that need client capabilities, with them.
    pub client_needs: Vec<(String, Vec<String>)>,
    /// `task-support.tools`: the tools that may run as MCP tasks.
    pub task_tools: Vec<guest::task_support::TaskTool>,
}

/// What `describe` finds: the tools, the skill's facts, and what it serves beyond tools.
pub type Described = (Vec<ToolDef>, SkillInfo, ServedLists);

/// What `handle` returned, and the blocks the call set through the `blocks` import.
pub type Handled = (ToolResult, Option<Vec<ResultBlock>>);

/// The bytes of the blocks a call set (`blocks.set-result-blocks`), as [`result_size`] counts.
fn blocks_size(blocks: &[ResultBlock]) -> u64 {
    let option = |o: &Option<String>| o.as_ref().map_or(0, String::len);
    let size = |b: &ResultBlock| match b {
        ResultBlock::Text(t) | ResultBlock::Json(t) => t.len(),
        ResultBlock::Image(i) => i.mime_type.len() + i.data.len(),
        ResultBlock::ResourceLink(l) => l.uri.len() + l.name.len() + option(&l.mime_type) + option(&l.description),
        ResultBlock::Audio(a) => a.mime_type.len() + a.data.len(),
        ResultBlock::Embedded(r) => {
            let contents = match &r.contents {
                ResourceContents::Text(t) => t.len(),
                ResourceContents::Blob(b) => b.len(),
            };
            r.uri.len() + option(&r.mime_type) + contents
        }
    };
    blocks.iter().map(size).sum::<usize>() as u64
}

fn result_size(result: &ToolResult) -> u64 {
    use super::bindings::types::ContentBlock;
    let blocks: usize = result
        .blocks
        .iter()
        .map(|b| match b {
            ContentBlock::Text(t) | ContentBlock::Json(t) => t.len(),
            ContentBlock::Image(i) => i.mime_type.len() + i.data.len(),
            ContentBlock::ResourceLink(l) => {
                let option = |o: &Option<String>| o.as_ref().map_or(0, String::len);
                l.uri.len() + l.name.len() + option(&l.mime_type) + option(&l.description)
            }
        })
        .sum();
    (result.content.len() + blocks) as u64
}

/// Names the contract version a component was built against when it is not ours.
fn wrong_exports(component: &Component, engine: &wasmtime::Engine, error: wasmtime::Error) -> LoadError {
    let ty = component.component_type();
    let theirs =
        ty.exports(engine).find_map(|(name, _)| name.strip_prefix("skillhost:skill/tools@").map(str::to_string));
    match theirs {
        Some(version) => LoadError::WrongExports(format!(
            "it was built against skillhost:skill@{version}; this host speaks skillhost:skill@0.1.0: \
             rebuild it with the current SDK or WIT"
        )),
        None => LoadError::WrongExports(format!("{error:#}")),
    }
}

/// The WIT `call-context` of a call made in `ctx`.
pub fn wit_context(ctx: &CallContext) -> WitContext {
    WitContext {
        config: ctx.config.to_string(),
        channel_id: ctx.channel_id.clone(),
        user_id: ctx.user_id.clone(),
        route: ctx.route.snapshot(),
        user_message: ctx.user_message.clone(),
    }
}
