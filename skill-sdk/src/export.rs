//! The glue between the author's traits and the generated bindings, and [`export!`].

use std::marker::PhantomData;

use crate::bindings::{self as b, skillhost::skill::types as wit};
use crate::hooks::PreflightKind;
use crate::{Context, Error, HumanLevel, Preflight, Skill, ToolResult, Value};

/// Implements every generated `Guest` trait for a skill type `S`, each only when `S`
/// implements the matching author trait. `export!` names it through a type alias, because
/// the generated export macros take an identifier.
#[doc(hidden)]
pub struct Glue<S>(PhantomData<S>);

/// Parses JSON text that the host promises is JSON.
fn parse(text: &str) -> Result<Value, Error> {
    Ok(serde_json::from_str(text)?)
}

impl<S: Skill> b::exports::skillhost::skill::tools::Guest for Glue<S> {
    fn list_tools() -> Vec<wit::ToolDef> {
        S::tools().into_iter().map(Into::into).collect()
    }

    fn handle(name: String, input: String, ctx: wit::CallContext) -> wit::ToolResult {
        let ctx = Context::from(ctx);
        let result = parse(&input).and_then(|input| S::handle(&name, input, &ctx)).unwrap_or_else(ToolResult::from);
        if let Some(blocks) = result.later_blocks() {
            crate::bindings::skillhost::skill::blocks::set_result_blocks(&blocks);
        }
        result.into()
    }

    fn info() -> wit::SkillInfo {
        S::info().into()
    }
}

impl<S: crate::ResolveHuman> b::resolve_human::exports::skillhost::skill::resolve_human::Guest for Glue<S> {
    fn resolve_human(name: String, input: String, ctx: wit::CallContext) -> Option<wit::HumanLevel> {
        let level = match parse(&input) {
            Ok(input) => S::resolve_human(&name, input, &Context::from(ctx)),
            Err(_) => Some(HumanLevel::Approve),
        };
        level.map(|level| match level {
            HumanLevel::Approve => wit::HumanLevel::Approve,
            HumanLevel::Confirm => wit::HumanLevel::Confirm,
        })
    }
}

impl<S: crate::IsAvailable> b::availability::exports::skillhost::skill::availability::Guest for Glue<S> {
    fn is_available(config: String) -> bool {
        // The host promises a JSON object; anything else is a skill that cannot check its
        // configuration, hence not available.
        parse(&config).is_ok_and(S::is_available)
    }
}

impl<S: crate::Startup> b::startup::exports::skillhost::skill::startup::Guest for Glue<S> {
    fn startup(config: String) -> Result<(), String> {
        let config = parse(&config).map_err(|e| e.to_string())?;
        S::startup(config).map_err(|e| e.to_string())
    }
}

impl<S: crate::Scheduled> b::scheduled::exports::skillhost::skill::scheduled::Guest for Glue<S> {
    fn scheduled(config: String) -> Result<(), String> {
        let config = parse(&config).map_err(|e| e.to_string())?;
        S::scheduled(config).map_err(|e| e.to_string())
    }
}

impl<S: crate::BeforeMcpCall> b::before_mcp_call::exports::skillhost::skill::before_mcp_call::Guest for Glue<S> {
    fn before_mcp_call(
        server: String,
        tool: String,
        arguments: String,
        ctx: wit::CallContext,
    ) -> wit::PreflightDecision {
        let decision = match parse(&arguments) {
            Ok(arguments) => S::before_mcp_call(&server, &tool, arguments, &Context::from(ctx)),
            Err(e) => Preflight::deny(format!("the call's arguments are not JSON: {e}")),
        };
        decision.into()
    }
}

impl From<Preflight> for wit::PreflightDecision {
    fn from(p: Preflight) -> Self {
        let kind = match p.kind {
            PreflightKind::Proceed => wit::PreflightKind::Proceed,
            PreflightKind::Deny => wit::PreflightKind::Deny,
            PreflightKind::Prerequisite { tool, arguments } => {
                let arguments = arguments.to_string();
                wit::PreflightKind::Prerequisite(wit::Prerequisite { tool, arguments })
            }
        };
        wit::PreflightDecision {
            kind,
            corrected_arguments: p.corrected_arguments.map(|v| v.to_string()),
            correction: p.correction,
            context: p.context.map(|v| v.to_string()),
        }
    }
}

impl<S: crate::ObserveMcpResult> b::observe_mcp_result::exports::skillhost::skill::observe_mcp_result::Guest
    for Glue<S>
{
    fn observe_mcp_result(
        server: String,
        tool: String,
        arguments: String,
        output: String,
        ctx: wit::CallContext,
    ) -> Option<String> {
        let arguments = parse(&arguments).ok()?;
        S::observe_mcp_result(&server, &tool, arguments, &output, &Context::from(ctx))
    }
}

impl<S: crate::ToolResultEmpty> b::tool_result_empty::exports::skillhost::skill::tool_result_empty::Guest for Glue<S> {
    fn tool_result_empty(tool_name: String, raw_result: String) -> Option<bool> {
        S::tool_result_empty(&tool_name, &raw_result)
    }
}

impl<S: crate::ToolTarget> b::tool_target::exports::skillhost::skill::tool_target::Guest for Glue<S> {
    fn tool_target(tool_name: String, tool_input: String) -> Option<wit::Target> {
        let target = S::tool_target(&tool_name, parse(&tool_input).ok()?)?;
        Some(wit::Target { target: target.target, query_kind: target.query_kind })
    }
}

impl<S: crate::Resources> b::resources::exports::skillhost::skill::resources::Guest for Glue<S> {
    fn list_resources() -> Vec<b::resources::exports::skillhost::skill::resources::ResourceDef> {
        S::resources().into_iter().map(|r| r.into_wit()).collect()
    }

    fn list_templates() -> Vec<b::resources::exports::skillhost::skill::resources::ResourceTemplate> {
        S::templates().into_iter().map(|r| r.into_wit_template()).collect()
    }

    fn read_resource(
        uri: String,
        ctx: wit::CallContext,
    ) -> Result<
        Vec<b::skillhost::skill::blocks::EmbeddedResource>,
        b::resources::exports::skillhost::skill::resources::ReadError,
    > {
        use b::resources::exports::skillhost::skill::resources::ReadError as W;
        match S::read_resource(&uri, &Context::from(ctx)) {
            Ok(read) => Ok(read.into_iter().map(crate::served::Embedded::into_wit).collect()),
            Err(crate::ReadError::NotFound) => Err(W::NotFound),
            Err(crate::ReadError::Failed(why)) => Err(W::Failed(why)),
        }
    }
}

impl<S: crate::Prompts> b::prompts::exports::skillhost::skill::prompts::Guest for Glue<S> {
    fn list_prompts() -> Vec<b::prompts::exports::skillhost::skill::prompts::PromptDef> {
        S::prompts().into_iter().map(crate::PromptDef::into_wit).collect()
    }

    fn get_prompt(
        name: String,
        arguments: Vec<(String, String)>,
        ctx: wit::CallContext,
    ) -> Result<
        b::prompts::exports::skillhost::skill::prompts::PromptResult,
        b::prompts::exports::skillhost::skill::prompts::PromptError,
    > {
        use b::prompts::exports::skillhost::skill::prompts::PromptError as W;
        let arguments = arguments.into_iter().collect();
        match S::get_prompt(&name, &arguments, &Context::from(ctx)) {
            Ok(result) => Ok(result.into_wit()),
            Err(crate::PromptError::NotFound) => Err(W::NotFound),
            Err(crate::PromptError::InvalidArguments(why)) => Err(W::InvalidArguments(why)),
            Err(crate::PromptError::Failed(why)) => Err(W::Failed(why)),
        }
    }

    fn complete(name: String, argument: String, value: String, context: Vec<(String, String)>) -> Vec<String> {
        S::complete(&name, &argument, &value, &context.into_iter().collect())
    }
}

impl<S: crate::ClientCapabilities> b::client_capabilities::exports::skillhost::skill::client_capabilities::Guest
    for Glue<S>
{
    fn required() -> Vec<(String, Vec<String>)> {
        S::required()
            .into_iter()
            .map(|(tool, needs)| (tool.into(), needs.iter().map(|n| n.to_string()).collect()))
            .collect()
    }
}

impl<S: crate::TaskSupport> b::task_support::exports::skillhost::skill::task_support::Guest for Glue<S> {
    fn tools() -> Vec<b::task_support::exports::skillhost::skill::task_support::TaskTool> {
        use b::task_support::exports::skillhost::skill::task_support::{Support, TaskTool};
        S::tasks()
            .into_iter()
            .map(|(name, task)| {
                let (support, detaches) = match task {
                    crate::Task::Optional => (Support::Optional, false),
                    crate::Task::Required => (Support::Required, false),
                    crate::Task::Detaches => (Support::Required, true),
                    crate::Task::MayDetach => (Support::Optional, true),
                };
                TaskTool { name: name.into(), support, detaches }
            })
            .collect()
    }
}

/// Exports a [`Skill`] as the component's `tools` interface, plus the hooks you name.
///
/// ```ignore
/// skill_sdk::export!(MySkill);
/// skill_sdk::export!(MySkill, hooks: [resolve_human, is_available, startup]);
/// ```
///
/// Hook names: `resolve_human`, `is_available`, `startup`, `scheduled`, `before_mcp_call`,
/// `observe_mcp_result`, `tool_result_empty`, `tool_target`, and the MCP exports `resources`,
/// `prompts`, `client_capabilities` and `task_support`. Each needs the matching trait
/// ([`ResolveHuman`](crate::ResolveHuman), [`Resources`](crate::Resources),
/// [`Prompts`](crate::Prompts), [`ClientCapabilities`](crate::ClientCapabilities), ...) implemented on the
/// skill type. Use the macro
/// once per crate.
#[macro_export]
macro_rules! export {
    ($skill:ty $(,)?) => {
        $crate::export!($skill, hooks: []);
    };
    ($skill:ty, hooks: [$($hook:ident),* $(,)?]) => {
        const _: () = {
            type SkillExports = $crate::__private::Glue<$skill>;
            $crate::bindings::export_skill!(SkillExports with_types_in $crate::bindings);
            $( $crate::__export_hook!($hook, SkillExports); )*
        };
    };
}

/// Expands the generated export macro of one hook world.
#[doc(hidden)]
#[macro_export]
macro_rules! __export_hook {
    (resolve_human, $glue:ident) => {
        $crate::__export_hook!(@world resolve_human, export_resolve_human, $glue);
    };
    (is_available, $glue:ident) => {
        $crate::__export_hook!(@world availability, export_availability, $glue);
    };
    (startup, $glue:ident) => {
        $crate::__export_hook!(@world startup, export_startup, $glue);
    };
    (scheduled, $glue:ident) => {
        $crate::__export_hook!(@world scheduled, export_scheduled, $glue);
    };
    (before_mcp_call, $glue:ident) => {
        $crate::__export_hook!(@world before_mcp_call, export_before_mcp_call, $glue);
    };
    (observe_mcp_result, $glue:ident) => {
        $crate::__export_hook!(@world observe_mcp_result, export_observe_mcp_result, $glue);
    };
    (tool_result_empty, $glue:ident) => {
        $crate::__export_hook!(@world tool_result_empty, export_tool_result_empty, $glue);
    };
    (tool_target, $glue:ident) => {
        $crate::__export_hook!(@world tool_target, export_tool_target, $glue);
    };
    (resources, $glue:ident) => {
        $crate::__export_hook!(@world resources, export_resources, $glue);
    };
    (prompts, $glue:ident) => {
        $crate::__export_hook!(@world prompts, export_prompts, $glue);
    };
    (client_capabilities, $glue:ident) => {
        $crate::__export_hook!(@world client_capabilities, export_client_capabilities, $glue);
    };
    (task_support, $glue:ident) => {
        $crate::__export_hook!(@world task_support, export_task_support, $glue);
    };
    (@world $module:ident, $export:ident, $glue:ident) => {
        $crate::bindings::$module::$export!($glue with_types_in $crate::bindings::$module);
    };
    ($other:ident, $glue:ident) => {
        compile_error!(concat!(
            "unknown hook `", stringify!($other), "`; expected one of: resolve_human, ",
            "is_available, startup, scheduled, before_mcp_call, observe_mcp_result, tool_result_empty, ",
            "tool_target, resources, prompts, client_capabilities, task_support",
        ));
    };
}
