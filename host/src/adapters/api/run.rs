//! One interactive (approval-v1) run: the engine's event sink, counterpart and `human__ask`
//! provider in one, feeding numbered wire events into the response body.

use super::stream::{Translator, WireEvent};
use crate::adapters::ask;
use crate::adapters::interactions::{Announce, ApprovalInfo, Interactions, Owner, QuestionInfo, Resolution};
use crate::adapters::runs::Recording;
use crate::engine::gate::new_id;
use crate::engine::{ApprovalOutcome, ApprovalRequest, Counterpart, EngineEvent, EventSink};
use crate::llm::ToolDecl;
use crate::person::{Answer, Question};
use crate::store::state::postgres::decisions::{Entry, Kind};
use crate::tools::{CONFIRMATION_CHALLENGE, CallScope, Level, ToolCall, ToolInfo, ToolOutcome, ToolSource};
use bytes::Bytes;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};
use tokio::sync::{mpsc, oneshot};

/// An approval-v1 run. Created per request; dropped with the response body.
pub struct ApiRun {
    run_id: String,
    channel_id: String,
    translator: Mutex<Translator>,
    out: mpsc::UnboundedSender<Bytes>,
    interactions: Arc<Interactions>,
    /// Decisions the engine will wait for, registered when the request is announced.
    waiters: Mutex<HashMap<String, oneshot::Receiver<Resolution>>>,
    /// With shared interactions, `approval_requested` events held back until the entry is in
    /// the database: a person never sees an id that another replica cannot decide.
    held: Mutex<HashMap<String, EngineEvent>>,
    /// This run, for the approvals and questions it opens: a person's decision or answer is
    /// announced (`approval_resolved`, `question_resolved`) by the route that took it.
    this: std::sync::Weak<ApiRun>,
    /// Counts the stream open while the run lives.
    _open: crate::metrics::Stream,
    /// The run as the console sees it (cancelled if dropped before it finished).
    recording: Recording,
}

impl ApiRun {
    /// A run whose wire events go to `out`.
    pub fn new(
        run_id: String,
        channel_id: String,
        translator: Translator,
        out: mpsc::UnboundedSender<Bytes>,
        interactions: Arc<Interactions>,
        recording: Recording,
    ) -> Arc<Self> {
        let translator = Mutex::new(translator);
        Arc::new_cyclic(|this| ApiRun {
            run_id,
            channel_id,
            translator,
            out,
            interactions,
            waiters: Mutex::default(),
            held: Mutex::default(),
            this: this.clone(),
            _open: crate::metrics::stream_open(),
            recording,
        })
    }

    /// Runs `f` on the translator and queues what it produced, under one lock so sequence
    /// numbers follow queue order.
    pub fn send(&self, f: impl FnOnce(&mut Translator) -> Vec<WireEvent>) {
        let mut translator = self.translator.lock().unwrap_or_else(|p| p.into_inner());
        for event in f(&mut translator) {
            self.recording.record(&event);
            // A closed receiver means the client left; the run is being dropped anyway.
            let _ = self.out.send(Bytes::from(event.to_sse()));
        }
    }

    fn owner(&self, expires_at: SystemTime) -> Owner {
        Owner { run_id: self.run_id.clone(), channel_id: self.channel_id.clone(), expires_at }
    }
}

impl EventSink for ApiRun {
    fn emit(&self, event: EngineEvent) {
        match &event {
            // Registered before the event is queued: a client never sees an id it cannot decide.
            EngineEvent::ApprovalRequested { approval_id, level, expires_at, .. } => {
                let challenge = (*level == Level::Confirm).then_some(CONFIRMATION_CHALLENGE);
                let rx = self.interactions.approvals.open(
                    approval_id,
                    self.owner(*expires_at),
                    ApprovalInfo { challenge, run: self.this.clone() },
                );
                self.waiters.lock().unwrap_or_else(|p| p.into_inner()).insert(approval_id.clone(), rx);
                if self.interactions.shared().is_some() {
                    // Sent by `decide` once the entry is in the database.
                    self.held.lock().unwrap_or_else(|p| p.into_inner()).insert(approval_id.clone(), event);
                    return;
                }
            }
            EngineEvent::ApprovalResolved { tool_call_id, outcome } => {
                let translator = self.translator.lock().unwrap_or_else(|p| p.into_inner());
                let id = translator.approval_id(tool_call_id).map(str::to_owned);
                drop(translator);
                if let Some(id) = id {
                    let resolution = resolution(outcome);
                    self.interactions.approvals.settle(&id, resolution.clone());
                    self.interactions.settle_shared(&id, &resolution);
                }
            }
            _ => {}
        }
        self.send(|t| t.engine(&event));
    }

    fn adapter(&self) -> Option<&'static str> {
        Some("api")
    }
}

fn resolution(outcome: &ApprovalOutcome) -> Resolution {
    match outcome {
        ApprovalOutcome::Approved => Resolution::Approved,
        ApprovalOutcome::Denied(_) => Resolution::Denied,
        ApprovalOutcome::TimedOut => Resolution::TimedOut,
        ApprovalOutcome::Cancelled | ApprovalOutcome::Unavailable(_) => Resolution::Cancelled,
    }
}

#[async_trait::async_trait]
impl Counterpart for ApiRun {
    async fn decide(&self, request: ApprovalRequest) -> ApprovalOutcome {
        let held = self.held.lock().unwrap_or_else(|p| p.into_inner()).remove(&request.approval_id);
        if let (Some(event), Some(shared)) = (held, self.interactions.shared()) {
            let entry = Entry {
                id: request.approval_id.clone(),
                kind: Kind::Approval,
                run_id: self.run_id.clone(),
                channel_id: self.channel_id.clone(),
                expires_at: request.expires_at,
                challenge: (request.level == Level::Confirm).then(|| CONFIRMATION_CHALLENGE.to_owned()),
                prompt: None,
                choices: Vec::new(),
                outcome: None,
                answer: None,
            };
            let published = shared.open(&entry).await;
            self.send(|t| t.engine(&event));
            if let Err(e) = published {
                tracing::error!(approval_id = %request.approval_id, "the approval cannot be shared: {e}");
                self.waiters.lock().unwrap_or_else(|p| p.into_inner()).remove(&request.approval_id);
                return ApprovalOutcome::Unavailable(format!("the state database cannot record it ({e})"));
            }
        }
        let waiter = self.waiters.lock().unwrap_or_else(|p| p.into_inner()).remove(&request.approval_id);
        match waiter {
            Some(rx) => match rx.await {
                Ok(Resolution::Approved) => ApprovalOutcome::Approved,
                Ok(Resolution::Denied) => ApprovalOutcome::Denied(None),
                _ => ApprovalOutcome::Cancelled,
            },
            None => ApprovalOutcome::Cancelled,
        }
    }

    fn tools(&self) -> Option<&dyn ToolSource> {
        Some(self)
    }

    /// A question in the stream (`question_requested`), as `human__ask` asks it.
    async fn ask(&self, question: Question, timeout: Duration) -> Answer {
        match self.question(question.prompt, question.choices, timeout).await {
            Some(Resolution::Answered(answer)) => Answer::Answered(answer),
            Some(Resolution::TimedOut) => Answer::TimedOut,
            Some(_) => Answer::Cancelled,
            None => Answer::Unavailable("no question id: the OS random source failed".into()),
        }
    }
}

impl ApiRun {
    /// Asks in the stream and waits for the decision route's answer, at most `timeout`;
    /// `None` when no id could be made.
    async fn question(&self, prompt: String, choices: Vec<String>, timeout: Duration) -> Option<Resolution> {
        let id = new_id().ok()?;
        let expires_at = SystemTime::now() + timeout;
        let info = QuestionInfo { prompt: prompt.clone(), choices: choices.clone(), run: self.this.clone() };
        let rx = self.interactions.questions.open(&id, self.owner(expires_at), info);
        if let Some(shared) = self.interactions.shared() {
            let entry = Entry {
                id: id.clone(),
                kind: Kind::Question,
                run_id: self.run_id.clone(),
                channel_id: self.channel_id.clone(),
                expires_at,
                challenge: None,
                prompt: Some(prompt.clone()),
                choices: choices.clone(),
                outcome: None,
                answer: None,
            };
            if let Err(e) = shared.open(&entry).await {
                tracing::error!(question_id = %id, "the question cannot be shared: {e}");
                self.interactions.questions.settle(&id, Resolution::Cancelled);
                return Some(Resolution::Cancelled);
            }
        }
        self.send(|t| t.question_requested(&id, &prompt, &choices, expires_at));
        let mut guard = QuestionGuard { run: self, id: id.clone(), done: false };
        let resolution = match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(resolution)) => resolution,
            Ok(Err(_)) => Resolution::Cancelled,
            Err(_) => Resolution::TimedOut,
        };
        guard.done = true;
        self.interactions.questions.settle(&id, resolution.clone());
        self.interactions.settle_shared(&id, &resolution);
        let answer = match &resolution {
            Resolution::Answered(a) => Some(a.as_str()),
            _ => None,
        };
        self.send(|t| t.question_resolved(&id, resolution.name(), answer));
        Some(resolution)
    }
}

/// Marks a question cancelled if the wait is dropped before it ends (turn cut off).
struct QuestionGuard<'a> {
    run: &'a ApiRun,
    id: String,
    done: bool,
}

impl Drop for QuestionGuard<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.run.interactions.questions.settle(&self.id, Resolution::Cancelled);
            self.run.interactions.settle_shared(&self.id, &Resolution::Cancelled);
            self.run.send(|t| t.question_resolved(&self.id, "cancelled", None));
        }
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
        ask::run("api", call.input, timeout, |prompt, choices| self.question(prompt, choices, timeout)).await
    }
}

impl Announce for ApiRun {
    /// Announces a person's decision on `approval_id` (`approval_resolved`) as soon as the
    /// route took it, ahead of the turn, which may wait for a busy runtime to resume it.
    fn decided(&self, approval_id: &str, approved: bool) {
        let outcome = if approved { ApprovalOutcome::Approved } else { ApprovalOutcome::Denied(None) };
        self.send(|t| t.resolved_by(approval_id, &outcome));
    }

    /// Announces the answer to question `question_id` (`question_resolved`) as soon as the
    /// route took it, as `decided` does for approvals.
    fn answered(&self, question_id: &str, answer: &str) {
        self.send(|t| t.question_resolved(question_id, "answered", Some(answer)));
    }
}
