//! The turn loop: ask the model, run the tools it asks for, feed the results back, until it
//! answers; with a per-turn time budget, one turn at a time per channel, and the history
//! persisted at the end.

use super::approver::Approver;
use super::budget::Budget;
use super::calls::{Call, Round, ToolCallRecord};
use super::events::{EngineEvent, EventSink};
use super::history::History;
use super::inflight::{Held, InFlight};
use super::promote::Promotion;
use super::tool_budget::{AfterRound, PARTIAL_ANSWER_INSTRUCTION, TurnBudget};
use super::tools::ToolRouter;
use super::{prompt, reflection, verifier};
use crate::config::{Human, Learning, LoadedConfig, Session};
use crate::llm::{Block, Delta, LlmError, Message, Provider, Request, Response, Role};
use crate::sandbox::{CallContext, RouteAttributes};
use crate::skills::SkillSet;
use crate::store::{MemoryStore, StateError, StateStore};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Appended to the last message of the forced wrap-up request.
pub const WRAPUP_INSTRUCTION: &str = "The time budget for this request is spent and no more tools can be called. \
Answer now with what you have found so far, and say briefly what is still unchecked.";
/// The answer when even the wrap-up request runs out of time.
pub const WRAPUP_FALLBACK: &str = "I ran out of time before I could finish this request.";

/// The config an [`Engine`] acts on.
#[derive(Debug, Clone)]
pub struct EngineSettings {
    /// `llm.model`.
    pub model: String,
    /// `llm.max_tokens`.
    pub max_tokens: u32,
    /// `bot.system_prompt`.
    pub system_prompt: String,
    /// The memory root (`learning.memory.filesystem.path`, resolved).
    pub memory_root: PathBuf,
    /// `human`: approval timeout and overrides.
    pub human: Human,
    /// `engine.session`: the turn budget and the wrap-up timeout.
    pub session: Session,
    /// `learning`: auto-promotion and the daily reflection.
    pub learning: Learning,
    /// `verifier.model`; the main model when absent.
    pub verifier_model: Option<String>,
    /// `engine.tool_budget` (or the legacy `log_tool_budget`); `None` when off.
    pub tool_budget: Option<super::tool_budget::ToolBudgetPolicy>,
}

impl EngineSettings {
    /// The settings `config` gives.
    pub fn from_config(config: &LoadedConfig) -> Self {
        let c = &config.config;
        EngineSettings {
            model: c.llm.model.clone(),
            max_tokens: c.llm.max_tokens,
            system_prompt: c.bot.system_prompt.clone(),
            memory_root: config.resolve(&c.learning.memory.filesystem.path),
            human: c.human.clone(),
            session: c.engine.session.clone(),
            learning: c.learning.clone(),
            verifier_model: c.verifier.model.clone(),
            tool_budget: super::tool_budget::ToolBudgetPolicy::from_config(&c.engine),
        }
    }
}

/// One message to answer.
#[derive(Debug, Clone)]
pub struct TurnRequest {
    /// The channel (conversation) it came from.
    pub channel_id: String,
    /// Who sent it, when known.
    pub user_id: Option<String>,
    /// The text.
    pub message: String,
}

/// How a turn ended.
#[derive(Debug, Clone)]
pub struct TurnResult {
    /// The final answer's text.
    pub text: String,
    /// LLM requests made, the wrap-up included.
    pub rounds: u32,
    /// Every tool call, in the order the model made them.
    pub tool_calls: Vec<ToolCallRecord>,
    /// The time budget ran out and the answer is the forced wrap-up.
    pub time_boxed: bool,
}

/// Why a turn failed.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The LLM request failed (after the provider's retries).
    #[error(transparent)]
    Llm(#[from] LlmError),
    /// The history could not be read or written.
    #[error("conversation history: {0}")]
    History(#[from] StateError),
    /// The channel's in-flight marker could not be written.
    #[error("{0}")]
    InFlight(StateError),
}

/// The agent engine: skills, a provider, the config, and the per-channel histories.
pub struct Engine {
    router: ToolRouter,
    /// Shared with background reflections, which outlive the turn.
    provider: Arc<dyn Provider>,
    settings: EngineSettings,
    history: History,
    promotion: Promotion,
    /// Reflections still running; see [`Engine::wait_for_background`].
    background: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    /// One lock per channel with a turn running or waiting; removed when none is left.
    channels: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// The same, across processes sharing the state directory.
    inflight: InFlight,
}

impl Engine {
    /// An engine over `skills`, configured by `config`, keeping histories in `state`.
    pub fn new(skills: Arc<SkillSet>, provider: Box<dyn Provider>, config: &LoadedConfig, state: StateStore) -> Self {
        Self::with_settings(skills, provider, EngineSettings::from_config(config), state)
    }

    /// An engine with explicit settings.
    pub fn with_settings(
        skills: Arc<SkillSet>,
        provider: Box<dyn Provider>,
        settings: EngineSettings,
        state: StateStore,
    ) -> Self {
        let promotion = Promotion::new(state.clone(), &settings.learning);
        let inflight = InFlight::new(state.root(), Duration::from_secs(settings.session.inflight_ttl_seconds));
        let (router, history, provider) = (ToolRouter::new(skills), History::new(state), Arc::from(provider));
        Engine {
            router,
            provider,
            settings,
            history,
            promotion,
            background: Mutex::default(),
            channels: Mutex::default(),
            inflight,
        }
    }

    /// Also offers the tools of MCP servers (see [`crate::mcp::start_for`]).
    pub fn with_mcp(mut self, mcp: Arc<crate::mcp::McpTools>) -> Self {
        self.router = self.router.with_mcp(mcp);
        self
    }

    /// The approval counts behind auto-promotion.
    pub fn promotion(&self) -> &Promotion {
        &self.promotion
    }

    /// Waits for the background work started by finished turns (the daily reflections).
    pub async fn wait_for_background(&self) {
        let handles = std::mem::take(&mut *self.background.lock().unwrap_or_else(|p| p.into_inner()));
        for handle in handles {
            if let Err(e) = handle.await {
                tracing::warn!("background task failed: {e}");
            }
        }
    }

    /// The settings in force.
    pub fn settings(&self) -> &EngineSettings {
        &self.settings
    }

    /// The skills it routes calls to.
    pub fn skills(&self) -> &SkillSet {
        self.router.skills()
    }

    /// The persisted histories.
    pub fn history(&self) -> &History {
        &self.history
    }

    /// Answers one message. Turns on the same channel run one after the other (the history
    /// is read at the start and written at the end); other channels run concurrently.
    pub async fn run_turn(
        &self,
        req: TurnRequest,
        events: &dyn EventSink,
        approver: &dyn Approver,
    ) -> Result<TurnResult, EngineError> {
        let lock = self.channel_lock(&req.channel_id);
        let result = {
            let _turn = lock.lock().await;
            match self.inflight.acquire(&req.channel_id).await {
                Ok(mut held) => self.turn(&req, events, approver, &mut held).await,
                Err(e) => Err(EngineError::InFlight(e)),
            }
        };
        self.release(&req.channel_id, lock);
        result
    }

    fn channel_lock(&self, channel: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut channels = self.channels.lock().unwrap_or_else(|p| p.into_inner());
        channels.entry(channel.to_owned()).or_default().clone()
    }

    /// Forgets the channel's lock when no other turn holds or awaits it. Clones are only
    /// made under the map lock, so the count is exact here.
    fn release(&self, channel: &str, lock: Arc<tokio::sync::Mutex<()>>) {
        let mut channels = self.channels.lock().unwrap_or_else(|p| p.into_inner());
        if Arc::strong_count(&lock) == 2 {
            channels.remove(channel);
        }
    }

    /// The turn itself, under the channel lock. The budget starts once the lock is held, so
    /// a turn queued behind another is not born late.
    async fn turn(
        &self,
        req: &TurnRequest,
        events: &dyn EventSink,
        approver: &dyn Approver,
        held: &mut Held,
    ) -> Result<TurnResult, EngineError> {
        let deadline = Budget::starting_now(Duration::from_secs(self.settings.session.deadline_seconds));
        let mut messages = self.history.load(&req.channel_id)?;
        messages.push(Message::user(req.message.clone()));
        let system =
            prompt::system_prompt(&self.settings.system_prompt, self.router.skills(), &self.settings.memory_root);
        let ctx = CallContext {
            config: serde_json::json!({}),
            channel_id: req.channel_id.clone(),
            user_id: req.user_id.clone(),
            route: RouteAttributes::default(),
        };
        let tool_budget = TurnBudget::new(self.settings.tool_budget.clone());
        let round = Round {
            router: &self.router,
            overrides: &self.settings.human.overrides,
            approval_timeout: Duration::from_secs(self.settings.human.timeout_seconds),
            deadline: deadline.clone(),
            ctx: &ctx,
            events,
            approver,
            promotion: &self.promotion,
            tool_budget: &tool_budget,
        };
        let mut result = TurnResult { text: String::new(), rounds: 0, tool_calls: Vec::new(), time_boxed: false };
        result.text = loop {
            held.refresh();
            if deadline.is_spent() {
                result.time_boxed = true;
                break self.wrap_up(&system, &mut messages, events, &mut result, WRAPUP_INSTRUCTION).await?;
            }
            result.rounds += 1;
            events.emit(EngineEvent::RoundStarted);
            let request = self.request(&system, &messages, tool_budget.offered(decls(&self.router, approver)));
            let Ok(response) =
                tokio::time::timeout_at(deadline.deadline().into(), self.complete(&request, events)).await
            else {
                continue; // the budget ran out mid-answer: the next pass wraps up
            };
            let response = response?;
            push_assistant(&mut messages, response.content.clone());
            let calls: Vec<Call> =
                response.tool_uses().into_iter().map(|(i, n, v)| (i.into(), n.into(), v.clone())).collect();
            if calls.is_empty() {
                break response.text();
            }
            let records = round.run(calls).await;
            messages
                .push(Message { role: Role::User, content: records.iter().map(ToolCallRecord::to_block).collect() });
            result.tool_calls.extend(records);
            // A refused call either gets one corrective round (the next request offers only
            // tools that can still run) or ends the loop with an honest partial answer.
            if tool_budget.after_round() == AfterRound::Synthesize {
                break self.wrap_up(&system, &mut messages, events, &mut result, PARTIAL_ANSWER_INSTRUCTION).await?;
            }
        };
        if verifier::needed(self.router.skills(), &result.tool_calls) {
            self.verify(&mut messages, &mut result).await;
        }
        self.history.save(&req.channel_id, &messages)?;
        if self.settings.learning.enabled && self.settings.learning.reflection {
            self.reflect(req, &result);
        }
        Ok(result)
    }

    /// Fact-checks the answer; an annotation replaces the text of the persisted answer too,
    /// so later turns see the warning the person saw. The annotation is not streamed: the
    /// answer has already gone out by the time it is checked.
    async fn verify(&self, messages: &mut [Message], result: &mut TurnResult) {
        let model = self.settings.verifier_model.as_deref().unwrap_or(&self.settings.model);
        let timeout = Duration::from_secs(self.settings.session.wrapup_timeout_seconds);
        let checked =
            verifier::check(self.provider.as_ref(), model, timeout, result.text.clone(), &result.tool_calls).await;
        if checked != result.text {
            verifier::replace_answer(messages, &checked);
            result.text = checked;
        }
    }

    /// Starts the daily reflection on the finished exchange, without waiting for it.
    fn reflect(&self, req: &TurnRequest, result: &TurnResult) {
        let exchange = reflection::Exchange::new(&req.channel_id, &req.message, result);
        let memory = MemoryStore::new(self.settings.memory_root.clone());
        let handle = reflection::spawn(self.provider.clone(), self.settings.model.clone(), memory, exchange);
        let mut background = self.background.lock().unwrap_or_else(|p| p.into_inner());
        background.retain(|h| !h.is_finished());
        background.push(handle);
    }

    /// The forced tools-free answer (tools declared, `tool_choice: none`) once the time budget
    /// or a tool budget is spent, asked with `instruction` and bounded by
    /// `wrapup_timeout_seconds`. Its tool calls, if the model makes any anyway, are dropped:
    /// nothing would answer them.
    async fn wrap_up(
        &self,
        system: &str,
        messages: &mut Vec<Message>,
        events: &dyn EventSink,
        result: &mut TurnResult,
        instruction: &str,
    ) -> Result<String, EngineError> {
        result.rounds += 1;
        let mut sent = messages.clone();
        match sent.last_mut() {
            Some(last) if last.role == Role::User => last.content.push(Block::Text(instruction.into())),
            _ => sent.push(Message::user(instruction)),
        }
        events.emit(EngineEvent::RoundStarted);
        let mut request = self.request(system, &sent, self.router.decls());
        request.tool_choice = crate::llm::ToolChoice::None;
        let limit = Duration::from_secs(self.settings.session.wrapup_timeout_seconds);
        let content = match tokio::time::timeout(limit, self.complete(&request, events)).await {
            Ok(response) => response?.content.into_iter().filter(|b| !matches!(b, Block::ToolUse { .. })).collect(),
            Err(_) => Vec::new(),
        };
        let text: String =
            content.iter().filter_map(|b| if let Block::Text(t) = b { Some(t.as_str()) } else { None }).collect();
        if text.is_empty() {
            events.emit(EngineEvent::TextDelta(WRAPUP_FALLBACK.into()));
            push_assistant(messages, vec![Block::Text(WRAPUP_FALLBACK.into())]);
            return Ok(WRAPUP_FALLBACK.into());
        }
        push_assistant(messages, content);
        Ok(text)
    }

    fn request(&self, system: &str, messages: &[Message], tools: Vec<crate::llm::ToolDecl>) -> Request {
        let (model, max_tokens) = (self.settings.model.clone(), self.settings.max_tokens);
        let tool_choice = crate::llm::ToolChoice::Auto;
        Request { model, system: system.to_owned(), messages: messages.to_vec(), tools, tool_choice, max_tokens }
    }

    /// One LLM request, streaming its text to `events`.
    async fn complete(&self, request: &Request, events: &dyn EventSink) -> Result<Response, LlmError> {
        let mut sink = |Delta::Text(text)| events.emit(EngineEvent::TextDelta(text));
        self.provider.complete(request, &mut sink).await
    }
}

/// The skills' tools plus the adapter's own (see [`super::Interaction`]).
fn decls(router: &ToolRouter, approver: &dyn Approver) -> Vec<crate::llm::ToolDecl> {
    let mut decls = router.decls();
    decls.extend(approver.interaction().map(|i| i.tools()).unwrap_or_default());
    decls
}

/// Appends an assistant message unless it is empty: providers refuse empty messages.
fn push_assistant(messages: &mut Vec<Message>, content: Vec<Block>) {
    if !content.is_empty() {
        messages.push(Message::assistant(content));
    }
}
