//! MCP tools as the engine sees them: offered next to skill tools as `<server>__<tool>` (and
//! as `<skill>__<tool>` for tools a skill lists in `mcp-tools`: aliases), and every call run
//! through the owning skill's policy (`before-mcp-call`, prerequisites with one retry) and
//! observer (`observe-mcp-result`).

use super::client::{McpManager, result_text};
use super::coverage;
use super::preflight::Decision;
use crate::config::OverrideLevel;
use crate::engine::approval::Level;
use crate::engine::coverage::CoverageEntry;
use crate::engine::events::ToolTarget;
use crate::engine::tool_budget::TurnBudget;
use crate::engine::tools::{ToolOutcome, generically_empty};
use crate::llm::ToolDecl;
use crate::sandbox::CallContext;
use crate::sandbox::bindings::types::HumanLevel;
use crate::skills::skill::{MAX_TOOL_NAME, SEPARATOR};
use crate::skills::{Skill, SkillSet};
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::OnceCell;

/// How long `observe-mcp-result` may take before the original result is kept.
pub const OBSERVE_TIMEOUT: Duration = Duration::from_secs(30);
/// The note the model finds in a result retried after a prerequisite.
pub const RETRY_NOTE: &str = "_mithai_prerequisite_retry";
/// Where a `before-mcp-call` decision's context reaches the model.
pub const CONTEXT_FIELD: &str = "_mithai_preflight_context";

/// One offered MCP tool name, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpCall {
    /// The server.
    pub server: String,
    /// The server's name of the tool.
    pub tool: String,
    /// The skill whose `mcp-tools` alias this is; `None` for a direct `<server>__<tool>`.
    pub alias_of: Option<String>,
}

pub(super) type PrerequisiteResult = Arc<OnceCell<Result<String, String>>>;

/// The MCP tools of one engine: the servers its skills (or agent) use, over a shared manager.
pub struct McpTools {
    pub(super) manager: Arc<McpManager>,
    pub(super) skills: Arc<SkillSet>,
    servers: BTreeSet<String>,
    /// `<skill>__<tool>` -> (skill, server, tool).
    aliases: BTreeMap<String, (String, String, String)>,
    /// `human.overrides`.
    overrides: BTreeMap<String, Option<OverrideLevel>>,
    /// Prerequisite reads of the current batch, per channel (one turn at a time per channel).
    pub(super) batches: Mutex<HashMap<String, HashMap<String, PrerequisiteResult>>>,
}

impl McpTools {
    /// The tools of `servers` (configured ones) for an engine over `skills`.
    pub fn new(
        manager: Arc<McpManager>,
        skills: Arc<SkillSet>,
        servers: BTreeSet<String>,
        overrides: BTreeMap<String, Option<OverrideLevel>>,
    ) -> Self {
        let mut aliases = BTreeMap::new();
        for skill in skills.skills.values() {
            for (server, tools) in &skill.facts.mcp_tools {
                for tool in tools.iter().filter(|t| *t != "*" && servers.contains(server)) {
                    let name = format!("{}{SEPARATOR}{tool}", skill.name);
                    if skill.tool(tool).is_none() && name != format!("{server}{SEPARATOR}{tool}") {
                        aliases.insert(name, (skill.name.clone(), server.clone(), tool.clone()));
                    }
                }
            }
        }
        McpTools { manager, skills, servers, aliases, overrides, batches: Mutex::default() }
    }

    /// The manager behind these tools.
    pub fn manager(&self) -> &Arc<McpManager> {
        &self.manager
    }

    /// Resolves an offered name; `None` when it is no MCP tool available right now.
    pub fn resolve(&self, name: &str) -> Option<McpCall> {
        if let Some((skill, server, tool)) = self.aliases.get(name) {
            self.manager.tool(server, tool)?;
            return Some(McpCall { server: server.clone(), tool: tool.clone(), alias_of: Some(skill.clone()) });
        }
        let (server, tool) = name.split_once(SEPARATOR)?;
        if !self.servers.contains(server) || self.skills.skills.contains_key(server) {
            return None;
        }
        self.manager.tool(server, tool)?;
        Some(McpCall { server: server.into(), tool: tool.into(), alias_of: None })
    }

    /// The tools offered now: those of ready servers, after their `tools` filters, with names
    /// every provider accepts; then the aliases whose tool is available.
    pub fn decls(&self) -> Vec<ToolDecl> {
        let mut decls = Vec::new();
        for server in self.servers.iter().filter(|s| !self.skills.skills.contains_key(*s)) {
            for tool in self.manager.tools(server) {
                let name = format!("{server}{SEPARATOR}{}", tool.name);
                if valid_name(&name) {
                    decls.push(decl(name, &tool));
                } else {
                    tracing::debug!(server = %server, tool = %tool.name, "MCP tool not offered: its name is not a valid tool name");
                }
            }
        }
        for (name, (_, server, tool)) in &self.aliases {
            if let Some(tool) = self.manager.tool(server, tool).filter(|_| valid_name(name)) {
                decls.push(decl(name.clone(), &tool));
            }
        }
        decls
    }

    /// Forgets the prerequisite reads of the channel's previous batch.
    pub fn begin_batch(&self, channel: &str) {
        self.batches.lock().unwrap_or_else(|p| p.into_inner()).remove(channel);
    }

    /// The skill whose policy (hooks, promotion threshold) governs calls of `name`.
    pub fn policy_skill(&self, name: &str) -> Option<&Arc<Skill>> {
        self.hook_skill(&self.resolve(name)?)
    }

    /// The skill whose hooks see calls of `call`: the alias's skill, else the server's owner
    /// (the first skill, by name, listing it in `mcp-servers`).
    fn hook_skill(&self, call: &McpCall) -> Option<&Arc<Skill>> {
        match &call.alias_of {
            Some(skill) => self.skills.skills.get(skill),
            None => self.owner(&call.server),
        }
    }

    pub(super) fn owner(&self, server: &str) -> Option<&Arc<Skill>> {
        self.skills.skills.values().find(|s| s.facts.mcp_servers.iter().any(|o| o == server))
    }

    /// The approval level of a call: `human.overrides` for the offered name (then, for an
    /// alias, the direct name), else the hook skill's `resolve-human` when it exports one
    /// (failing closed to `approve`), else none. `None` when `name` is no MCP tool.
    pub async fn level(&self, name: &str, input: &Value, ctx: &CallContext) -> Option<Level> {
        let call = self.resolve(name)?;
        let direct = format!("{}{SEPARATOR}{}", call.server, call.tool);
        if let Some(level) = self.overrides.get(name).or_else(|| self.overrides.get(&direct)) {
            return Some(match level {
                None => Level::Auto,
                Some(OverrideLevel::Approve) => Level::Approve,
                Some(OverrideLevel::Confirm) => Level::Confirm,
            });
        }
        let Some(skill) = self.hook_skill(&call) else { return Some(Level::Auto) };
        let Some((component, env)) = &skill.runtime else { return Some(Level::Auto) };
        let ctx = CallContext { config: skill.config.clone(), ..ctx.clone() };
        Some(match component.resolve_human(env, &call.tool, &input.to_string(), &ctx).await {
            None => Level::Auto,
            Some(Ok(outcome)) => match outcome.value {
                None => Level::Auto,
                Some(HumanLevel::Approve) => Level::Approve,
                Some(HumanLevel::Confirm) => Level::Confirm,
            },
            Some(Err(e)) => {
                tracing::warn!(tool = %name, "resolve-human failed ({e}); asking for approval");
                Level::Approve
            }
        })
    }

    /// Runs a call: the owning skill's preflight, the call (or its prerequisite and one
    /// retry, which passes the policy, the approval level and the turn's `budget` again), then
    /// its observer. Never fails: every problem is an error result.
    pub async fn execute(
        &self,
        name: &str,
        input: &Value,
        ctx: &CallContext,
        budget: Option<&TurnBudget>,
    ) -> ToolOutcome {
        let started = Instant::now();
        let Some(call) = self.resolve(name) else {
            return error(json!({"error": format!("unknown tool `{name}`"), "kind": "unknown_tool"}), started);
        };
        let Some(arguments) = input.as_object().cloned() else {
            return error(
                json!({"error": format!("invalid input for `{name}`: it must be a JSON object"), "kind": "invalid_input"}),
                started,
            );
        };
        let mut outcome = match self.preflight(&call, &arguments, ctx).await {
            Decision::Deny { correction, context } => refused(&correction, "mcp_preflight_denied", context, started),
            Decision::Proceed { arguments, context } => {
                let outcome = self.dispatch(&call, arguments, ctx).await;
                with_field(outcome, CONTEXT_FIELD, context)
            }
            Decision::Prerequisite { tool, arguments: pre_args, retry, correction, context } => {
                if let Err(why) = self.check_prerequisite(&call, &tool) {
                    tracing::warn!(tool = %name, "prerequisite refused: {why}");
                    return refused(&correction, "mcp_prerequisite_refused", context, started);
                }
                if let Err(why) = self.prerequisite(&ctx.channel_id, &call.server, &tool, pre_args).await {
                    tracing::info!(tool = %name, "prerequisite `{tool}` failed: {why}");
                    return refused(&correction, "mcp_prerequisite_failed", context, started);
                }
                // The retry passes the owner's policy again; a refusal (or another prerequisite)
                // returns its new correction, and no second prerequisite runs.
                let retry = match self.preflight(&call, &retry, ctx).await {
                    Decision::Proceed { arguments, .. } => arguments,
                    Decision::Deny { correction, context } | Decision::Prerequisite { correction, context, .. } => {
                        return refused(&correction, "mcp_retry_refused", context, started);
                    }
                };
                // The retry passes the approval level again: a call that now needs a person
                // (other than the one already approved) is refused rather than run unasked.
                let (before, after) =
                    (self.level(name, input, ctx).await, self.level(name, &Value::Object(retry.clone()), ctx).await);
                if after.is_none() || (after != Some(Level::Auto) && (after != before || retry != arguments)) {
                    let why = "the retried call needs a person's approval; call the tool again to ask for it";
                    return refused(why, "mcp_retry_refused", context, started);
                }
                if budget.and_then(|b| b.admit(name, &Value::Object(retry.clone()))).is_some() {
                    let why = "the retried call was not run: the budget for this tool in this request is spent";
                    return refused(why, "mcp_retry_refused", context, started);
                }
                let outcome = self.dispatch(&call, retry, ctx).await;
                let note = Some(json!(format!("retried once after the prerequisite `{tool}` succeeded")));
                with_field(with_field(outcome, RETRY_NOTE, note), CONTEXT_FIELD, context)
            }
        };
        outcome.duration = started.elapsed();
        outcome
    }

    /// Sends the call and reads its result; a direct call's success goes past the observer.
    async fn dispatch(&self, call: &McpCall, arguments: Map<String, Value>, ctx: &CallContext) -> ToolOutcome {
        let started = Instant::now();
        let advertised =
            self.manager.tool(&call.server, &call.tool).is_some_and(|t| coverage::advertised(t.meta.as_deref()));
        let args_text = Value::Object(arguments.clone()).to_string();
        let result = match self.manager.call(&call.server, &call.tool, arguments).await {
            Ok(result) => result,
            Err(e) => {
                let entry = advertised.then_some(CoverageEntry::Unverified);
                return ToolOutcome {
                    coverage: entry,
                    ..error(json!({"error": e, "kind": "mcp_unavailable"}), started)
                };
            }
        };
        let mut content = result_text(&result);
        if result.is_error == Some(true) {
            let entry = advertised.then_some(CoverageEntry::Unverified);
            return ToolOutcome {
                content,
                is_error: true,
                error_kind: Some("mcp_tool_error".into()),
                coverage: entry,
                ..ToolOutcome::text(String::new(), started.elapsed())
            };
        }
        // Emptiness is judged on the server's result, before any observer augments it.
        let is_empty = Some(self.empty_hook(call, &content).await.unwrap_or_else(|| generically_empty(&content)));
        if call.alias_of.is_none() {
            content = self.observe(call, &args_text, content, ctx).await;
        }
        let coverage = coverage::entry(result.meta.as_deref(), advertised);
        ToolOutcome { coverage, is_empty, ..ToolOutcome::text(content, started.elapsed()) }
    }

    async fn empty_hook(&self, call: &McpCall, raw: &str) -> Option<bool> {
        let (component, env) = self.hook_skill(call)?.runtime.as_ref()?;
        match component.tool_result_empty(env, &call.tool, raw).await? {
            Ok(outcome) => outcome.value,
            Err(e) => {
                tracing::warn!(server = %call.server, tool = %call.tool, "tool-result-empty failed: {e}");
                None
            }
        }
    }

    async fn observe(&self, call: &McpCall, arguments: &str, output: String, ctx: &CallContext) -> String {
        let Some(skill) = self.owner(&call.server) else { return output };
        let Some((component, env)) = &skill.runtime else { return output };
        let ctx = CallContext { config: skill.config.clone(), ..ctx.clone() };
        let observed = component.observe_mcp_result(env, &call.server, &call.tool, arguments, &output, &ctx);
        match tokio::time::timeout(OBSERVE_TIMEOUT, observed).await {
            Ok(None) | Ok(Some(Ok(crate::sandbox::Outcome { value: None, .. }))) => output,
            Ok(Some(Ok(outcome))) => outcome.value.unwrap_or(output),
            Ok(Some(Err(e))) => {
                tracing::warn!(server = %call.server, tool = %call.tool, "observe-mcp-result failed ({e}); keeping the result");
                output
            }
            Err(_) => {
                tracing::warn!(server = %call.server, tool = %call.tool, "observe-mcp-result took over {} s; keeping the result", OBSERVE_TIMEOUT.as_secs());
                output
            }
        }
    }

    /// The hook skill's `tool-target` answer, checked (see [`crate::engine::ToolRouter::target`]).
    pub async fn target(&self, name: &str, input: &Value) -> Option<ToolTarget> {
        let call = self.resolve(name)?;
        let (component, env) = self.hook_skill(&call)?.runtime.as_ref()?;
        match component.tool_target(env, &call.tool, &input.to_string()).await? {
            Ok(outcome) => outcome.value.and_then(|t| ToolTarget::checked(t.target, t.query_kind)),
            Err(e) => {
                tracing::warn!(tool = %name, "tool-target failed: {e}");
                None
            }
        }
    }

    /// Whether a successful result is empty: decided when the call ran, on the server's
    /// result before any observer augmented it (the hook skill's `tool-result-empty`, else
    /// generic emptiness). Errors are not empty.
    pub async fn is_empty(&self, _name: &str, outcome: &ToolOutcome) -> bool {
        !outcome.is_error && outcome.is_empty.unwrap_or_else(|| generically_empty(&outcome.content))
    }
}

fn valid_name(name: &str) -> bool {
    name.len() <= MAX_TOOL_NAME && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

fn decl(name: String, tool: &rmcp::model::Tool) -> ToolDecl {
    let description = tool.description.as_deref().unwrap_or_default().to_owned();
    let mut schema = Value::Object((*tool.input_schema).clone());
    if schema.get("type").is_none() {
        schema["type"] = json!("object");
    }
    ToolDecl { name, description, input_schema: schema }
}

fn error(json: Value, started: Instant) -> ToolOutcome {
    ToolOutcome::error(&json, started.elapsed())
}

fn refused(correction: &str, kind: &str, context: Option<Value>, started: Instant) -> ToolOutcome {
    let mut json = json!({"error": correction, "kind": kind});
    if let Some(context) = context {
        json[CONTEXT_FIELD] = context;
    }
    error(json, started)
}

/// Adds `field` to the model-visible result: into a JSON object result, else around it as
/// `{"result": <text>, field: value}`.
fn with_field(mut outcome: ToolOutcome, field: &str, value: Option<Value>) -> ToolOutcome {
    let Some(value) = value else { return outcome };
    let mut object = match serde_json::from_str::<Value>(&outcome.content) {
        Ok(Value::Object(map)) => map,
        _ => Map::from_iter([("result".to_owned(), Value::String(outcome.content.clone()))]),
    };
    object.insert(field.to_owned(), value);
    outcome.content = Value::Object(object).to_string();
    outcome
}
