//! One interactive (approval-v1) run: the engine's event sink, counterpart and `human__ask`
//! provider in one, feeding numbered wire events into the response body. Its approvals and
//! questions are opened at the person broker ([`crate::broker`]); the run presents them in
//! the stream and announces a person's decision as soon as the route took it.

use super::stream::{Translator, WireEvent};
use crate::adapters::ask;
use crate::adapters::runs::Recording;
use crate::broker::{Broker, Entry, Kind, Outcome, Scope, Watch};
use crate::engine::desk::Desk;
use crate::engine::{ApprovalOutcome, Counterpart, EngineEvent, EventSink};
use crate::llm::ToolDecl;
use crate::tools::{CallScope, Level, ToolCall, ToolInfo, ToolOutcome, ToolSource};
use bytes::Bytes;
use parking_lot::Mutex;
use std::sync::Arc;
use tokio::sync::mpsc;

/// An approval-v1 run. Created per request; dropped with the response body.
pub struct ApiRun {
    translator: Mutex<Translator>,
    out: mpsc::UnboundedSender<Bytes>,
    /// Where its approvals and questions wait, and who asks.
    broker: Arc<Broker>,
    scope: Scope,
    /// This run, as the broker's watch: a person's decision or answer is announced
    /// (`approval_resolved`, `question_resolved`) by the route that took it.
    this: std::sync::Weak<ApiRun>,
    /// Counts the stream open while the run lives.
    _open: crate::metrics::Stream,
    /// The run as the console sees it (cancelled if dropped before it finished).
    recording: Recording,
}

impl ApiRun {
    /// A run of `agent` whose wire events go to `out`.
    pub fn new(
        scope: Scope,
        translator: Translator,
        out: mpsc::UnboundedSender<Bytes>,
        broker: Arc<Broker>,
        recording: Recording,
    ) -> Arc<Self> {
        let translator = Mutex::new(translator);
        Arc::new_cyclic(|this| ApiRun {
            translator,
            out,
            broker,
            scope,
            this: this.clone(),
            _open: crate::metrics::stream_open(),
            recording,
        })
    }

    /// Runs `f` on the translator and queues what it produced, under one lock so sequence
    /// numbers follow queue order.
    pub fn send(&self, f: impl FnOnce(&mut Translator) -> Vec<WireEvent>) {
        let mut translator = self.translator.lock();
        for event in f(&mut translator) {
            self.recording.record(&event);
            // A closed receiver means the client left; the run is being dropped anyway.
            let _ = self.out.send(Bytes::from(event.to_sse()));
        }
    }

    /// Whatever the run still waits on is cancelled (the run ended or its client left).
    pub fn cancel(&self) {
        self.broker.cancel_run(&self.scope.run_id);
    }
}

impl EventSink for ApiRun {
    fn emit(&self, event: EngineEvent) {
        self.send(|t| t.engine(&event));
    }

    fn adapter(&self) -> Option<&'static str> {
        Some("api")
    }
}

#[async_trait::async_trait]
impl Counterpart for ApiRun {
    fn desk(&self) -> Option<Desk> {
        let watch: std::sync::Weak<dyn Watch> = self.this.clone();
        let (broker, scope) = (self.broker.clone(), self.scope.clone());
        Some(Desk { broker, scope, watch: Some(watch), resumable: None, answers_later: false })
    }

    /// A question appears in the stream (`question_requested`); an approval was announced
    /// by the engine's event.
    async fn present(&self, entry: &Entry, _resumable: bool) -> Result<(), crate::engine::PresentError> {
        if entry.kind == Kind::Question {
            let fields = entry.presentation.as_deref().and_then(|p| serde_json::from_str(p).ok()).unwrap_or_default();
            self.send(|t| t.question_requested(fields));
        }
        Ok(())
    }

    async fn ended(&self, entry: &Entry, outcome: &Outcome) {
        if entry.kind == Kind::Question {
            self.send(|t| t.question_resolved(&entry.id, outcome.name(), outcome.answer()));
        }
    }

    fn tools(&self) -> Option<&dyn ToolSource> {
        Some(self)
    }
}

/// `human__ask`: a question the person answers in the stream; no approval, no tool events.
#[async_trait::async_trait]
impl ToolSource for ApiRun {
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
        ask::run("api", call.input, timeout, |asked| async move { ask::put(self, &asked, timeout, None, None).await })
            .await
    }
}

impl Watch for ApiRun {
    /// Announces a person's decision (`approval_resolved`) or answer (`question_resolved`)
    /// as soon as the route took it, ahead of the turn, which may wait for a busy runtime
    /// to resume it.
    fn decided(&self, entry: &Entry, _by: &str) {
        match Outcome::of(entry) {
            Some(Outcome::Answered(answer)) => self.send(|t| t.question_resolved(&entry.id, "answered", Some(&answer))),
            Some(decided @ (Outcome::Approved(_) | Outcome::Denied(_))) => {
                self.send(|t| t.resolved_by(&entry.id, &ApprovalOutcome::from(decided)))
            }
            _ => {}
        }
    }
}
