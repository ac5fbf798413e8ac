//! MCP tools as the engine sees them: offered next to skill tools as `<server>__<tool>`, or
//! as `<skill>__<tool>` instead for tools a skill lists in `mcp-tools` (aliases; a call under
//! the server's name is still accepted as a direct call), and
//! every call run through the owning skill's policy (`before-mcp-call`, prerequisites with one
//! retry) and observer (`observe-mcp-result`). A tool that posts to Slack
//! (`mcp_servers.<name>.slack_posting_tools`) passes the agent's external-channel guard
//! ([`SlackPostingGuard`]) with the arguments it is about to be sent, before it is routed.
//!
//! Layout: this file (names, levels, the call), `preflight.rs` (`before-mcp-call`,
//! prerequisites), `guard.rs` (`engine.temporal_guardrails` on every set of arguments sent),
//! `coverage.rs` (`_meta` descriptors).

mod coverage;
mod guard;
mod preflight;

use super::coverage::CoverageEntry;
use super::temporal::{Guardrails, NOTE_FIELD};
use super::{CallScope, Level, Prepared, ToolCall, ToolInfo, ToolOutcome, ToolSource, ToolTarget, generically_empty};
use crate::llm::ToolDecl;
use crate::mcp::SlackPostingGuard;
use crate::mcp::client::{McpManager, result_text};
use crate::person::{Answer, Person, Question};
use crate::sandbox::CallContext;
use crate::skills::skill::{MAX_TOOL_NAME, SEPARATOR};
use crate::skills::{Skill, SkillSet};
use parking_lot::Mutex;
use preflight::Ruling;
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
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

/// The MCP tools of one agent: the servers its skills (or agent) use, over a shared manager.
pub struct McpTools {
    manager: Arc<McpManager>,
    skills: Arc<SkillSet>,
    servers: BTreeSet<String>,
    /// `<skill>__<tool>` -> (skill, server, tool).
    aliases: BTreeMap<String, (String, String, String)>,
    /// Prerequisite reads of the current batch, per channel (one turn at a time per channel).
    batches: Mutex<HashMap<String, HashMap<String, PrerequisiteResult>>>,
    /// `engine.temporal_guardrails`.
    guardrails: Guardrails,
    /// The agent's guard on tools that post to Slack.
    slack: SlackPostingGuard,
}

impl McpTools {
    /// The tools of `servers` (configured ones) for an agent over `skills`.
    pub fn new(manager: Arc<McpManager>, skills: Arc<SkillSet>, servers: BTreeSet<String>) -> Self {
        let mut aliases = BTreeMap::new();
        for skill in skills.skills.values() {
            for (server, tools) in &skill.facts.mcp_tools {
                for tool in tools.iter().filter(|t| *t != "*" && servers.contains(server)) {
                    let (name, direct) =
                        (format!("{}{SEPARATOR}{tool}", skill.name), format!("{server}{SEPARATOR}{tool}"));
                    if skill.tool(tool).is_none() && name != direct {
                        aliases.insert(name, (skill.name.clone(), server.clone(), tool.clone()));
                    }
                }
            }
        }
        let (batches, guardrails, slack) = (Mutex::default(), Guardrails::default(), SlackPostingGuard::anywhere());
        McpTools { manager, skills, servers, aliases, batches, guardrails, slack }
    }

    /// The same tools with `guardrails` normalising their calls' time arguments.
    pub fn with_guardrails(self, guardrails: Guardrails) -> Self {
        McpTools { guardrails, ..self }
    }

    /// The same tools with `slack` refusing posts to external Slack channels.
    pub fn with_slack_guard(self, slack: SlackPostingGuard) -> Self {
        McpTools { slack, ..self }
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

    /// The skill whose hooks see calls of `call`: the alias's skill, else the server's owner
    /// (the first skill, by name, listing it in `mcp-servers`).
    fn hook_skill(&self, call: &McpCall) -> Option<&Arc<Skill>> {
        match &call.alias_of {
            Some(skill) => self.skills.skills.get(skill),
            None => self.owner(&call.server),
        }
    }

    fn owner(&self, server: &str) -> Option<&Arc<Skill>> {
        self.skills.skills.values().find(|s| s.facts.mcp_servers.iter().any(|o| o == server))
    }

    /// Sends the call and reads its result; a direct call's success goes past the observer.
    async fn dispatch(&self, call: &McpCall, arguments: Map<String, Value>, ctx: &CallContext) -> ToolOutcome {
        let started = Instant::now();
        let advertised =
            self.manager.tool(&call.server, &call.tool).is_some_and(|t| coverage::advertised(t.meta.as_deref()));
        if let Err(refused) = self.slack.check(&call.server, &call.tool, &arguments).await {
            tracing::info!(server = %call.server, tool = %call.tool, "not sent: {refused}");
            return error(json!({"error": refused.to_string(), "kind": "slack_post_refused"}), started);
        }
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
            let failed = ToolOutcome::text(String::new(), started.elapsed());
            return ToolOutcome {
                content,
                is_error: true,
                error_kind: Some("mcp_tool_error".into()),
                coverage: entry,
                ..failed
            };
        }
        // Emptiness is judged on the server's result, before any observer augments it.
        let is_empty = Some(self.empty_hook(call, &content, ctx).await.unwrap_or_else(|| generically_empty(&content)));
        if call.alias_of.is_none() {
            content = self.observe(call, &args_text, content, ctx).await;
        }
        let coverage = coverage::entry(result.meta.as_deref(), advertised);
        ToolOutcome { coverage, is_empty, ..ToolOutcome::text(content, started.elapsed()) }
    }

    async fn empty_hook(&self, call: &McpCall, raw: &str, ctx: &CallContext) -> Option<bool> {
        match self.hook_skill(call)?.tool_result_empty(&call.tool, raw, ctx).await? {
            Ok(answer) => answer,
            Err(e) => {
                tracing::warn!(server = %call.server, tool = %call.tool, kind = e.kind(), "tool-result-empty failed; falling back");
                None
            }
        }
    }

    async fn observe(&self, call: &McpCall, arguments: &str, output: String, ctx: &CallContext) -> String {
        let Some(skill) = self.owner(&call.server) else { return output };
        let observed = skill.observe_mcp_result(&call.server, &call.tool, arguments, &output, ctx);
        match tokio::time::timeout(OBSERVE_TIMEOUT, observed).await {
            Ok(None) | Ok(Some(Ok(None))) => output,
            Ok(Some(Ok(Some(replaced)))) => replaced,
            Ok(Some(Err(e))) => {
                tracing::warn!(server = %call.server, tool = %call.tool, kind = e.kind(), "observe-mcp-result failed; keeping the result");
                output
            }
            Err(_) => {
                let secs = OBSERVE_TIMEOUT.as_secs();
                tracing::warn!(server = %call.server, tool = %call.tool, "observe-mcp-result took over {secs} s; keeping the result");
                output
            }
        }
    }
}

#[async_trait::async_trait]
impl ToolSource for McpTools {
    /// The tools of ready servers, after their `tools` filters, with names every provider
    /// accepts; then the aliases whose tool is up. A tool is offered once: one a skill lists
    /// in `mcp-tools` only as its alias `<skill>__<tool>` (the spec namespaces it like the
    /// skill's own tools). A call under its server name is still a direct call (`resolve`).
    fn decls(&self) -> Vec<ToolDecl> {
        let mut decls = Vec::new();
        let aliased: BTreeSet<(&str, &str)> = self.aliases.values().map(|(_, s, t)| (s.as_str(), t.as_str())).collect();
        for server in self.servers.iter().filter(|s| !self.skills.skills.contains_key(*s)) {
            for tool in self.manager.tools(server) {
                if aliased.contains(&(server.as_str(), tool.name.as_ref())) {
                    continue;
                }
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

    fn kind(&self, _name: &str) -> &'static str {
        "mcp"
    }

    fn info(&self, name: &str) -> Option<ToolInfo> {
        let call = self.resolve(name)?;
        let advertised =
            self.manager.tool(&call.server, &call.tool).is_some_and(|t| coverage::advertised(t.meta.as_deref()));
        let skill = self.hook_skill(&call);
        let override_alias = call.alias_of.is_some().then(|| format!("{}{SEPARATOR}{}", call.server, call.tool));
        Some(ToolInfo {
            declares_coverage: advertised,
            verify: skill.is_some_and(|s| s.facts.verify),
            override_alias,
            promotion_threshold: skill.and_then(|s| super::skill::promotion_threshold(s)),
            ..ToolInfo::default()
        })
    }

    /// `engine.temporal_guardrails`: a guarded tool's time arguments, normalised.
    fn prepare(&self, name: &str, input: &Value) -> Result<Option<Prepared>, ToolOutcome> {
        self.prepare_call(name, input)
    }

    fn check(&self, name: &str, input: &Value) -> Result<(), ToolOutcome> {
        if input.is_object() {
            return Ok(());
        }
        let json =
            json!({"error": format!("invalid input for `{name}`: it must be a JSON object"), "kind": "invalid_input"});
        Err(ToolOutcome::error(&json, Duration::ZERO))
    }

    /// The hook skill's `resolve-human` when it has one (failing closed to `approve`), else
    /// auto: MCP tools have no static level of their own.
    async fn level(&self, call: ToolCall<'_>) -> Level {
        let Some(mcp) = self.resolve(call.name) else { return Level::Approve };
        let Some(skill) = self.hook_skill(&mcp) else { return Level::Auto };
        super::skill::skill_level(skill, &mcp.tool, crate::skills::contract::Human::None, call.input, &call).await
    }

    async fn target(&self, call: ToolCall<'_>) -> Option<ToolTarget> {
        let mcp = self.resolve(call.name)?;
        match self.hook_skill(&mcp)?.tool_target(&mcp.tool, call.input, call.ctx).await? {
            Ok(answer) => answer.and_then(|t| ToolTarget::checked(t.target, t.query_kind)),
            Err(e) => {
                tracing::warn!(tool = %call.name, kind = e.kind(), "tool-target failed; no target");
                None
            }
        }
    }

    /// The call, with the server's elicitations meanwhile asked of the scope's person.
    async fn execute(&self, call: ToolCall<'_>, scope: &dyn CallScope) -> ToolOutcome {
        let Some(mcp) = self.resolve(call.name) else { return super::unknown_tool(call.name) };
        self.manager.asking(&mcp.server, &ScopePerson(scope), self.run(call, scope)).await
    }

    /// Decided when the call ran, on the server's result before any observer augmented it.
    async fn is_empty(&self, _call: ToolCall<'_>, outcome: &ToolOutcome) -> bool {
        !outcome.is_error && outcome.is_empty.unwrap_or_else(|| generically_empty(&outcome.content))
    }

    fn begin_round(&self, channel: &str) {
        self.batches.lock().remove(channel);
    }
}

impl McpTools {
    /// The guardrails (a no-op for prepared input), the owning skill's preflight, the call
    /// (or its prerequisite and one retry), then its observer.
    async fn run(&self, call: ToolCall<'_>, scope: &dyn CallScope) -> ToolOutcome {
        let started = Instant::now();
        let Some(mcp) = self.resolve(call.name) else { return super::unknown_tool(call.name) };
        if let Err(refusal) = self.check(call.name, call.input) {
            return refusal;
        }
        let (arguments, note) = match self.guard(call.name, &mcp, call.input.as_object().cloned().unwrap_or_default()) {
            Ok(guarded) => guarded,
            Err(why) => return super::temporal::refusal(&why),
        };
        let outcome = match self.preflight(&mcp, &arguments, call.ctx).await {
            Ruling::Deny { correction, context } => refused(&correction, "mcp_preflight_denied", context, started),
            Ruling::Proceed { arguments, context } => {
                let outcome = self.send(call.name, &mcp, arguments, call.ctx).await;
                with_field(outcome, CONTEXT_FIELD, context)
            }
            Ruling::Prerequisite { tool, arguments: pre_args, retry, correction, context } => {
                if let Err(why) = self.check_prerequisite(&mcp, &tool) {
                    tracing::warn!(tool = %call.name, "prerequisite refused: {why}");
                    return refused(&correction, "mcp_prerequisite_refused", context, started);
                }
                if let Err(why) = self.prerequisite(&call.ctx.channel_id, &mcp.server, &tool, pre_args).await {
                    tracing::info!(tool = %call.name, "prerequisite `{tool}` failed: {why}");
                    return refused(&correction, "mcp_prerequisite_failed", context, started);
                }
                // The spec's span attribute, on the call's `execute_tool` span when traced.
                tracing::Span::current().record("mithai.tool.retried_after_prerequisite", true);
                let outcome = match self.retry(&mcp, call, retry, scope, started).await {
                    Ok(outcome) => outcome,
                    Err(refusal) => return refusal,
                };
                let note = Some(json!(format!("retried once after the prerequisite `{tool}` succeeded")));
                with_field(with_field(outcome, RETRY_NOTE, note), CONTEXT_FIELD, context)
            }
        };
        // A later normalisation (of a policy's corrected arguments) wrote its own note.
        let note = note.filter(|_| !outcome.has_field(NOTE_FIELD));
        let mut outcome = with_field(outcome, NOTE_FIELD, note);
        outcome.duration = started.elapsed();
        outcome
    }
}

/// The person of a call's scope, as the MCP client asks them.
struct ScopePerson<'a>(&'a dyn CallScope);

#[async_trait::async_trait]
impl Person for ScopePerson<'_> {
    async fn ask(&self, question: Question) -> Answer {
        self.0.ask(question).await
    }
}

/// Starts the servers `skills` declare plus `extra` (an agent's `skills.allowed` entries that
/// name servers), waits for their first connection attempt, and returns the engine's view of
/// their tools, behind the agent's `guardrails` and `slack` guard. Servers declared but not
/// configured are reported and skipped.
pub async fn start_for(
    manager: &Arc<McpManager>,
    skills: Arc<SkillSet>,
    extra: &[String],
    guardrails: Guardrails,
    slack: SlackPostingGuard,
) -> Arc<McpTools> {
    let mut servers = BTreeSet::new();
    for skill in skills.skills.values() {
        for server in crate::mcp::client::declared_servers(skill) {
            if manager.has_server(&server) {
                servers.insert(server);
            } else {
                tracing::warn!(skill = %skill.name, "skill declares MCP server `{server}`, which mcp_servers does not configure");
            }
        }
    }
    servers.extend(extra.iter().filter(|s| manager.has_server(s)).cloned());
    manager.declare(&skills);
    start_servers(manager, &servers).await;
    Arc::new(McpTools::new(manager.clone(), skills, servers).with_guardrails(guardrails).with_slack_guard(slack))
}

/// Starts `servers` (those not started yet) and waits for their first connection attempt;
/// one that failed it is reported, and retried in the background.
pub async fn start_servers<'a>(manager: &McpManager, servers: impl IntoIterator<Item = &'a String> + Clone) {
    manager.start(servers.clone().into_iter().map(String::as_str));
    manager.wait_started(crate::mcp::client::CONNECT_TIMEOUT).await;
    for server in servers {
        if let Some(crate::mcp::Status::Down(why)) = manager.status(server) {
            eprintln!("warning: MCP server `{server}` is not available ({why}); retrying in the background");
        }
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
    ToolDecl { name, description, input_schema: schema.into() }
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
fn with_field(outcome: ToolOutcome, field: &str, value: Option<Value>) -> ToolOutcome {
    match value {
        Some(value) => outcome.with_field(field, value),
        None => outcome,
    }
}
