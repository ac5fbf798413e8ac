//! One chat turn: its event sink (the presenter's ops), its counterpart at the person broker
//! (prompts posted when an entry opens, settled when its wait ends, a decision taken in the
//! console shown on the prompt), and its `human__ask`.

use super::show::Op;
use super::{Chat, Platform, Prompt};
use crate::adapters::ask;
use crate::broker::{Entry, Kind, Outcome as Resolution, Scope, Watch};
use crate::engine::desk::Desk;
use crate::engine::{Counterpart, EngineEvent, EventSink};
use crate::llm::ToolDecl;
use crate::tools::{CallScope, Level, ToolCall, ToolInfo, ToolOutcome, ToolSource};
use parking_lot::Mutex;
use serde::Serialize;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::SystemTime;
use tokio::sync::{Notify, mpsc, oneshot};

/// One turn in a conversation: its event sink, its counterpart, and its `human__ask`.
pub struct ChatTurn<P: Platform> {
    pub(super) chat: Arc<Chat<P>>,
    place: P::Place,
    run_id: String,
    ops: mpsc::UnboundedSender<Op>,
    /// The message that asks each approval or question, by its id.
    prompts: Mutex<HashMap<String, String>>,
    /// Another replica took the turn over (it judged this one gone): the turn stops here.
    pub(super) taken: Notify,
    /// The turn waits on an approval or question it wrote down with its checkpoint.
    pub(super) written_down: std::sync::atomic::AtomicBool,
    /// The answers a resumed turn was given, by call id.
    pub(super) given: Mutex<HashMap<String, Resolution>>,
    this: Weak<ChatTurn<P>>,
}

impl<P: Platform> ChatTurn<P> {
    pub(super) fn new(
        chat: Arc<Chat<P>>,
        place: P::Place,
        run_id: String,
        ops: mpsc::UnboundedSender<Op>,
    ) -> Arc<Self> {
        Arc::new_cyclic(|this| ChatTurn {
            chat,
            place,
            run_id,
            ops,
            prompts: Mutex::default(),
            taken: Notify::new(),
            written_down: Default::default(),
            given: Mutex::default(),
            this: this.clone(),
        })
    }

    fn op(&self, op: Op) {
        let _ = self.ops.send(op);
    }

    /// Holds the turn's lease once its entry `id` is decided: `false` when another replica
    /// took the turn over meanwhile (or the lease cannot be confirmed), and the turn's runner
    /// is told to drop it.
    async fn hold(&self, id: &str) -> bool {
        if self.chat.broker.lease(&self.run_id, id).await {
            return true;
        }
        self.taken.notify_one();
        false
    }

    /// Waits until what the turn produced so far is shown, so that a prompt comes below it.
    async fn shown(&self) {
        let (done, shown) = oneshot::channel();
        self.op(Op::Flush(done));
        let _ = shown.await;
    }

    /// The prompt that shows `entry`.
    fn prompt<'a>(entry: &'a Entry, shown: &'a Value, action: &'a str) -> Prompt<'a> {
        match entry.kind {
            Kind::Approval => Prompt::Approval {
                id: &entry.id,
                tool: shown["tool_name"].as_str().unwrap_or_default(),
                action,
                input: &shown["tool_input"],
                level: if entry.challenge.is_some() { Level::Confirm } else { Level::Approve },
                timeout: entry.expires_at.duration_since(SystemTime::now()).unwrap_or_default(),
            },
            Kind::Question => Prompt::Question {
                id: &entry.id,
                prompt: entry.prompt.as_deref().unwrap_or_default(),
                choices: &entry.choices,
                schema: shown.get("schema").filter(|s| s.is_object()),
            },
        }
    }

    /// The line a prompt is replaced with when its wait ended otherwise than by a person's
    /// decision here (a click shows its own); `None` to leave it.
    fn ended_line(entry: &Entry, outcome: &Resolution) -> Option<String> {
        let prompt = entry.prompt.as_deref().unwrap_or_default();
        match (entry.kind, outcome) {
            (Kind::Approval, Resolution::TimedOut) => Some("⌛ No decision in time: not run.".into()),
            (Kind::Approval, Resolution::Cancelled) => Some("🚫 Cancelled: not run.".into()),
            (Kind::Approval, _) => None,
            (Kind::Question, Resolution::Answered(answer)) => Some(format!("❓ {prompt}\n→ {answer}")),
            (Kind::Question, Resolution::TimedOut) => Some(format!("❓ {prompt}\n_(no answer in time)_")),
            (Kind::Question, _) => Some(format!("❓ {prompt}\n_(cancelled)_")),
        }
    }
}

impl<P: Platform> EventSink for ChatTurn<P> {
    fn emit(&self, event: EngineEvent) {
        match event {
            EngineEvent::RoundStarted => self.op(Op::Round),
            EngineEvent::TextDelta(text) => self.op(Op::Text(text)),
            EngineEvent::ToolStarted { tool_call_id, tool_name, .. } => {
                self.op(Op::Status { id: tool_call_id, line: format!("→ `{tool_name}`") })
            }
            EngineEvent::ToolCompleted { tool_call_id, tool_name, duration, is_error, .. } => {
                let ms = duration.as_millis();
                let line = if is_error {
                    format!("✗ `{tool_name}` error ({ms} ms)")
                } else {
                    format!("✓ `{tool_name}` {ms} ms")
                };
                self.op(Op::Status { id: tool_call_id, line })
            }
            // Approvals are presented when opened ([`Counterpart::present`]) and settled when
            // their wait ends ([`Counterpart::ended`]).
            EngineEvent::ApprovalRequested { .. } | EngineEvent::ApprovalResolved { .. } => {}
        }
    }
}

#[async_trait::async_trait]
impl<P: Platform> Counterpart for ChatTurn<P> {
    fn desk(&self) -> Option<Desk> {
        let chat = &self.chat;
        let key = P::key(&self.place);
        let scope = Scope {
            agent: chat.engine.agent().to_owned(),
            surface: chat.surface.clone(),
            conversation: chat.conversation(&key),
            run_id: self.run_id.clone(),
            deciders: chat.platform.approvers(),
        };
        let watch: Weak<dyn Watch> = self.this.clone();
        let resumable = json(&self.place).ok().map(|place| (chat.scope.clone(), place));
        Some(Desk { broker: chat.broker.clone(), scope, watch: Some(watch), resumable, answers_later: false })
    }

    /// Posts the prompt below what the turn showed so far; a question is also what a reply
    /// in the conversation answers.
    async fn present(&self, entry: &Entry, resumable: bool) -> Result<(), crate::engine::PresentError> {
        self.written_down.store(resumable, std::sync::atomic::Ordering::SeqCst);
        let shown: Value = entry.presentation.as_deref().and_then(|p| serde_json::from_str(p).ok()).unwrap_or_default();
        let action = shown["safe_description"].as_str().unwrap_or_default().to_owned();
        self.shown().await;
        let message =
            self.chat.platform.ask(&self.place, &Self::prompt(entry, &shown, &action)).await.map_err(|why| {
                tracing::warn!("{}: cannot ask here: {why}", self.chat.label);
                crate::engine::PresentError::new(why)
            })?;
        if resumable {
            self.chat.broker.prompted(&self.run_id, &message).await;
        }
        self.prompts.lock().insert(entry.id.clone(), message);
        if entry.kind == Kind::Question {
            self.chat.asking.lock().insert(P::key(&self.place), entry.id.clone());
        }
        Ok(())
    }

    /// Settles the prompt; a turn written down goes on only holding its lease.
    async fn ended(&self, entry: &Entry, outcome: &Resolution) {
        if entry.kind == Kind::Question {
            let key = P::key(&self.place);
            let mut asking = self.chat.asking.lock();
            if asking.get(&key) == Some(&entry.id) {
                asking.remove(&key);
            }
        }
        let written_down = self.written_down.swap(false, std::sync::atomic::Ordering::SeqCst);
        let line = Self::ended_line(entry, outcome);
        if let (Some(line), Some(message)) = (line, self.prompts.lock().remove(&entry.id)) {
            self.op(Op::Settle { message, text: line });
        }
        if !written_down {
            return;
        }
        if outcome.by_person() {
            // Decided while written down: go on only holding the turn's lease; not held, the
            // turn stops here, going no further until its runner drops it.
            if !self.hold(&entry.id).await {
                std::future::pending::<()>().await;
            }
        } else if *outcome == Resolution::TimedOut
            && let Some(turn) = self.this.upgrade()
        {
            // Nobody decided in time: the turn goes on here, holding its lease.
            let id = entry.id.clone();
            tokio::spawn(async move { turn.hold(&id).await });
        }
    }

    fn tools(&self) -> Option<&dyn ToolSource> {
        Some(self)
    }
}

/// `human__ask`: the question appears in the conversation, answered by a button or a reply.
#[async_trait::async_trait]
impl<P: Platform> ToolSource for ChatTurn<P> {
    fn decls(&self) -> Vec<ToolDecl> {
        vec![ask::decl()]
    }

    fn info(&self, name: &str) -> Option<ToolInfo> {
        ask::info(name)
    }

    async fn level(&self, _call: ToolCall<'_>) -> Level {
        Level::Auto
    }

    async fn execute(&self, call: ToolCall<'_>, scope: &dyn CallScope) -> ToolOutcome {
        let timeout = scope.person_timeout();
        let adapter = self.chat.adapter;
        // A resumed turn: the answer given while it was written down.
        let given = self.given.lock().remove(call.id);
        if let Some(resolution) = given {
            return ask::run(adapter, call.input, timeout, |_| async move { Some(resolution) }).await;
        }
        let checkpoint = scope.checkpoint(call.id);
        let id = call.id;
        let opened = move || scope.opened(id);
        let opened = &opened;
        ask::run(adapter, call.input, timeout, |asked| async move {
            ask::put(self, &asked, timeout, checkpoint, Some(opened)).await
        })
        .await
    }
}

/// A person's decision taken elsewhere than in this conversation (the console) is shown on
/// the prompt; a click updates its own message (with who decided).
impl<P: Platform> Watch for ChatTurn<P> {
    fn decided(&self, entry: &Entry, by: &str) {
        if by != "console" {
            return;
        }
        let line = match Resolution::of(entry) {
            Some(Resolution::Approved(_)) => "✅ Approved in the console".to_owned(),
            Some(Resolution::Denied(_)) => "❌ Denied in the console".to_owned(),
            Some(Resolution::Answered(answer)) => {
                format!("❓ {}\n→ {answer} (answered in the console)", entry.prompt.as_deref().unwrap_or_default())
            }
            _ => return,
        };
        if let Some(message) = self.prompts.lock().remove(&entry.id) {
            self.op(Op::Settle { message, text: line });
        }
    }
}

/// JSON for what a checkpoint holds.
pub(super) fn json<T: Serialize + ?Sized>(value: &T) -> serde_json::Result<String> {
    serde_json::to_string(value)
}
