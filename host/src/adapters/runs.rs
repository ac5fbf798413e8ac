//! The recent runs of one agent as an operator sees them (the web console, `GET /api/runs`):
//! who started each, its state, and its events in the approval-v1 wire presentation (already
//! redacted and capped: [`crate::adapters::present`]), kept for replay and streamed live.
//!
//! Bounded: at most [`KEEP_FINISHED`] finished runs holding at most [`KEEP_BYTES`] of events
//! between them are kept (the oldest go first; running ones always stay), and a run keeps at
//! most [`MAX_EVENTS`] events and [`MAX_EVENT_BYTES`] of them (consecutive text deltas are
//! merged; past the bound only the terminal event is kept, and the run says how many it
//! dropped).

use crate::adapters::api::stream::{Translator, WireEvent, unix_seconds};
use crate::adapters::present::Descriptions;
use crate::engine::{Counterpart, Engine, EngineError, EngineEvent, EventSink, TurnRequest, TurnResult};
use parking_lot::Mutex;
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::sync::{Arc, Weak};
use std::time::{Instant, SystemTime};
use tokio::sync::{broadcast, watch};

/// Finished runs kept for reading.
pub const KEEP_FINISHED: usize = 200;
/// Events one run keeps.
pub const MAX_EVENTS: usize = 2000;
/// Bytes of events (as JSON) one run keeps.
pub const MAX_EVENT_BYTES: usize = 1 << 20;
/// Bytes of events the finished runs keep between them.
pub const KEEP_BYTES: usize = 32 << 20;
/// Live events a slow reader may fall behind by before its stream ends (it reads the run
/// again and resumes from there).
const LIVE_BACKLOG: usize = 1024;

/// Where a run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    /// Working.
    Running,
    /// Waiting for a person (an approval or a question).
    Waiting,
    /// Finished with an answer.
    Completed,
    /// Finished with an error.
    Failed,
    /// Ended before it finished (its client went away, the process stopped).
    Cancelled,
}

impl State {
    fn finished(self) -> bool {
        matches!(self, State::Completed | State::Failed | State::Cancelled)
    }
}

/// Who started a run and how.
#[derive(Debug, Clone)]
pub struct Origin {
    /// The run's id (the approval-v1 `run_id`).
    pub run_id: String,
    /// Its channel.
    pub channel_id: String,
    /// The adapter that took the message (`api`, `slack`, `telegram`).
    pub adapter: &'static str,
    /// How the caller asked (`fire`, `wait`, `ndjson`, `approval-v1`, `chat`).
    pub mode: &'static str,
}

/// Every recent run of one agent.
pub struct Runs {
    agent: String,
    inner: Mutex<VecDeque<Arc<Run>>>,
    /// Bumped whenever a run starts, changes state, or its pending interactions change: the
    /// console's cue to read the lists again.
    changed: watch::Sender<u64>,
}

impl Runs {
    /// The runs of the agent called `agent`.
    pub fn new(agent: &str) -> Arc<Self> {
        Arc::new(Runs { agent: agent.to_owned(), inner: Mutex::default(), changed: watch::channel(0).0 })
    }

    fn lock(&self) -> parking_lot::MutexGuard<'_, VecDeque<Arc<Run>>> {
        self.inner.lock()
    }

    fn bump(&self) {
        self.changed.send_modify(|v| *v += 1);
    }

    /// Tells the watchers something they list changed elsewhere (an approval opened or
    /// decided on another replica).
    pub fn touch(&self) {
        self.bump();
    }

    /// Starts recording a run; the returned handle marks it cancelled when dropped before a
    /// terminal event.
    pub fn start(self: &Arc<Self>, origin: Origin) -> Recording {
        let run = Arc::new(Run {
            origin,
            started: SystemTime::now(),
            started_at: Instant::now(),
            runs: Arc::downgrade(self),
            inner: Mutex::new(Inner {
                state: State::Running,
                ended: None,
                events: Vec::new(),
                bytes: 0,
                dropped: 0,
                approvals: Vec::new(),
                questions: Vec::new(),
            }),
            live: broadcast::channel(LIVE_BACKLOG).0,
        });
        let mut runs = self.lock();
        runs.push_back(run.clone());
        // The newest finished runs that fit both bounds stay.
        let (mut kept, mut bytes) = (0, 0);
        let mut keep: Vec<bool> = runs
            .iter()
            .rev()
            .map(|r| {
                let inner = r.lock();
                if !inner.state.finished() {
                    return true;
                }
                (kept, bytes) = (kept + 1, bytes + inner.bytes);
                kept <= KEEP_FINISHED && bytes <= KEEP_BYTES
            })
            .collect();
        keep.reverse();
        let mut keep = keep.into_iter();
        runs.retain(|_| keep.next().unwrap_or(true));
        drop(runs);
        self.bump();
        Recording(run)
    }

    /// The runs, newest first.
    pub fn list(&self) -> Vec<Arc<Run>> {
        self.lock().iter().rev().cloned().collect()
    }

    /// The run with id `run_id`.
    pub fn get(&self, run_id: &str) -> Option<Arc<Run>> {
        self.lock().iter().rev().find(|r| r.origin.run_id == run_id).cloned()
    }

    /// Changes to watch (runs started, states and pending interactions changed).
    pub fn watch(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// The agent's name.
    pub fn agent(&self) -> &str {
        &self.agent
    }
}

/// One run.
pub struct Run {
    origin: Origin,
    started: SystemTime,
    started_at: Instant,
    runs: Weak<Runs>,
    inner: Mutex<Inner>,
    live: broadcast::Sender<Value>,
}

struct Inner {
    state: State,
    ended: Option<Instant>,
    events: Vec<Value>,
    bytes: usize,
    dropped: u64,
    /// The `approval_requested` events not resolved yet.
    approvals: Vec<Value>,
    /// The `question_requested` events not resolved yet.
    questions: Vec<Value>,
}

impl Inner {
    fn keep(&mut self, event: &Value, terminal: bool) {
        // Text deltas of one block are one event for replay.
        if event["type"] == "assistant_text"
            && let Some(last) = self.events.last_mut()
            && last["type"] == "assistant_text"
            && let (Some(more), Some(text)) = (event["text"].as_str(), last["text"].as_str())
        {
            let joined = format!("{text}{more}");
            if self.bytes + more.len() <= MAX_EVENT_BYTES {
                self.bytes += more.len();
                last["text"] = joined.into();
                return;
            }
        }
        let size = event.to_string().len();
        if terminal || (self.events.len() < MAX_EVENTS && self.bytes + size <= MAX_EVENT_BYTES) {
            self.bytes += size;
            self.events.push(event.clone());
        } else {
            self.dropped += 1;
        }
    }
}

impl Run {
    fn lock(&self) -> parking_lot::MutexGuard<'_, Inner> {
        self.inner.lock()
    }

    /// Its origin.
    pub fn origin(&self) -> &Origin {
        &self.origin
    }

    /// Its state now.
    pub fn state(&self) -> State {
        self.lock().state
    }

    /// Records one wire event (heartbeats are not kept).
    pub fn record(&self, event: &WireEvent) {
        if event.kind == "heartbeat" {
            return;
        }
        let mut inner = self.lock();
        if inner.state.finished() {
            return;
        }
        let before = (inner.state, inner.approvals.len(), inner.questions.len());
        let id = |key: &str| event.data[key].as_str().map(str::to_owned);
        match event.kind {
            "approval_requested" => inner.approvals.push(event.data.clone()),
            "approval_resolved" => {
                let done = id("approval_id");
                inner.approvals.retain(|a| a["approval_id"].as_str().map(str::to_owned) != done);
            }
            "question_requested" => inner.questions.push(event.data.clone()),
            "question_resolved" => {
                let done = id("question_id");
                inner.questions.retain(|q| q["question_id"].as_str().map(str::to_owned) != done);
            }
            _ => {}
        }
        let terminal = match event.kind {
            "run_completed" => Some(State::Completed),
            "run_failed" => Some(State::Failed),
            _ => None,
        };
        inner.state = match terminal {
            Some(state) => state,
            None if inner.approvals.is_empty() && inner.questions.is_empty() => State::Running,
            None => State::Waiting,
        };
        if terminal.is_some() {
            inner.ended = Some(Instant::now());
            inner.approvals.clear();
            inner.questions.clear();
        }
        inner.keep(&event.data, terminal.is_some());
        // Sent under the lock: a reader that took the events and subscribed under it sees
        // each event once, in order.
        let _ = self.live.send(event.data.clone());
        let after = (inner.state, inner.approvals.len(), inner.questions.len());
        drop(inner);
        if before != after {
            self.bump();
        }
    }

    fn bump(&self) {
        if let Some(runs) = self.runs.upgrade() {
            runs.bump();
        }
    }

    /// Ends the run as cancelled unless it already finished.
    fn cancel(&self) {
        let mut inner = self.lock();
        if inner.state.finished() {
            return;
        }
        inner.state = State::Cancelled;
        inner.ended = Some(Instant::now());
        inner.approvals.clear();
        inner.questions.clear();
        let event =
            json!({"type": "run_cancelled", "run_id": self.origin.run_id, "channel_id": self.origin.channel_id});
        inner.keep(&event, true);
        let _ = self.live.send(event);
        drop(inner);
        self.bump();
    }

    /// The events kept so far, and the live ones after them (`None` once the run finished:
    /// nothing more will come).
    pub fn follow(&self) -> (Vec<Value>, Option<broadcast::Receiver<Value>>) {
        let inner = self.lock();
        let live = (!inner.state.finished()).then(|| self.live.subscribe());
        (inner.events.clone(), live)
    }

    /// Its pending approvals, as `approval_requested` presented them.
    pub fn pending_approvals(&self) -> Vec<Value> {
        self.lock().approvals.clone()
    }

    /// Its pending questions, as `question_requested` presented them.
    pub fn pending_questions(&self) -> Vec<Value> {
        self.lock().questions.clone()
    }

    /// The run as the list shows it.
    pub fn summary(&self, agent: &str) -> Value {
        let inner = self.lock();
        let duration = inner.ended.unwrap_or_else(Instant::now).duration_since(self.started_at);
        let tools = inner.events.iter().filter(|e| e["type"] == "tool_completed").count();
        json!({
            "run_id": self.origin.run_id,
            "agent": agent,
            "channel_id": self.origin.channel_id,
            "adapter": self.origin.adapter,
            "mode": self.origin.mode,
            "state": inner.state,
            "started_at": unix_seconds(self.started),
            "duration": duration.as_secs_f64(),
            "pending_approvals": inner.approvals.len(),
            "pending_questions": inner.questions.len(),
            "tool_calls": tools,
            "events": inner.events.len(),
            "events_dropped": inner.dropped,
        })
    }
}

/// A run being recorded: marks it cancelled when dropped before it finished.
pub struct Recording(Arc<Run>);

impl Recording {
    /// The run.
    pub fn run(&self) -> &Arc<Run> {
        &self.0
    }

    /// Records one wire event.
    pub fn record(&self, event: &WireEvent) {
        self.0.record(event);
    }
}

impl Drop for Recording {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

/// Records a run whose adapter does not speak approval-v1 itself (the API's other modes, the
/// chat platforms): its engine events through a translator of its own ([`Recorder::turn`]).
pub struct Recorder {
    translator: Mutex<Translator>,
    recording: Recording,
}

impl Recorder {
    /// Starts recording the run `origin` names.
    pub fn new(runs: &Arc<Runs>, origin: Origin, descriptions: Arc<Descriptions>) -> Self {
        let mut translator = Translator::new(&origin.run_id, &origin.channel_id, descriptions);
        let recording = runs.start(origin);
        recording.record(&translator.started());
        Recorder { translator: Mutex::new(translator), recording }
    }

    fn with(&self, f: impl FnOnce(&mut Translator) -> Vec<WireEvent>) {
        let mut translator = self.translator.lock();
        for event in f(&mut translator) {
            self.recording.record(&event);
        }
    }

    /// Runs `request` on `engine` with the adapter's own `sink` and `counterpart`, recording
    /// its events beside the sink's and how it ended.
    pub async fn turn(
        &self,
        engine: &Engine,
        request: TurnRequest,
        sink: &dyn EventSink,
        counterpart: &dyn Counterpart,
    ) -> Result<TurnResult, EngineError> {
        let result = engine.run_turn(request, &Tee { sink, recorder: self }, counterpart).await;
        self.finish(&result);
        result
    }

    /// Resumes a turn written down elsewhere ([`Engine::resume_turn`]), recorded as
    /// [`Recorder::turn`] records a new one.
    pub async fn resume(
        &self,
        engine: &Engine,
        checkpoint: crate::engine::checkpoint::Checkpoint,
        outcome: Option<crate::engine::checkpoint::Waited>,
        sink: &dyn EventSink,
        counterpart: &dyn Counterpart,
    ) -> Result<TurnResult, EngineError> {
        let result = engine.resume_turn(checkpoint, outcome, &Tee { sink, recorder: self }, counterpart).await;
        self.finish(&result);
        result
    }

    fn note(&self, event: &EngineEvent) {
        self.with(|t| t.engine(event));
    }

    fn finish(&self, result: &Result<TurnResult, EngineError>) {
        match result {
            Ok(r) => self.with(|t| t.completed_with(&r.text, r.time_boxed, Some(&r.usage))),
            Err(e) => self.with(|t| t.failed(&format!("the run failed: {e}"))),
        }
    }
}

/// An adapter's own sink, with the run recorded beside it.
struct Tee<'a> {
    sink: &'a dyn EventSink,
    recorder: &'a Recorder,
}

impl EventSink for Tee<'_> {
    fn emit(&self, event: EngineEvent) {
        self.recorder.note(&event);
        self.sink.emit(event);
    }

    fn adapter(&self) -> Option<&'static str> {
        Some(self.recorder.recording.run().origin().adapter)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(kind: &'static str, fields: Value) -> WireEvent {
        let mut data = json!({"type": kind});
        if let Value::Object(fields) = fields {
            data.as_object_mut().unwrap().extend(fields);
        }
        WireEvent { kind, data }
    }

    fn origin(id: &str) -> Origin {
        Origin { run_id: id.into(), channel_id: "c".into(), adapter: "api", mode: "approval-v1" }
    }

    #[test]
    fn states_follow_the_events_and_a_dropped_recording_cancels() {
        let runs = Runs::new("a");
        let mut changes = runs.watch();
        let recording = runs.start(origin("r1"));
        assert!(changes.has_changed().unwrap());
        changes.mark_unchanged();
        let run = recording.run().clone();
        assert_eq!(run.state(), State::Running);
        recording.record(&event("approval_requested", json!({"approval_id": "x"})));
        assert_eq!(run.state(), State::Waiting);
        assert_eq!(run.pending_approvals().len(), 1);
        assert!(changes.has_changed().unwrap());
        recording.record(&event("approval_resolved", json!({"approval_id": "x"})));
        assert_eq!(run.state(), State::Running);
        assert!(run.pending_approvals().is_empty());
        let (_, live) = run.follow();
        assert!(live.is_some());
        drop(recording);
        assert_eq!(run.state(), State::Cancelled);
        let (events, live) = run.follow();
        assert!(live.is_none());
        assert_eq!(events.last().unwrap()["type"], "run_cancelled");

        let recording = runs.start(origin("r2"));
        recording.record(&event("run_completed", json!({})));
        drop(recording);
        assert_eq!(runs.get("r2").unwrap().state(), State::Completed, "a finished run stays as it ended");
        assert_eq!(runs.list()[0].origin().run_id, "r2", "newest first");
    }

    #[test]
    fn text_merges_and_events_are_bounded() {
        let runs = Runs::new("a");
        let recording = runs.start(origin("r"));
        for _ in 0..3 {
            recording.record(&event("assistant_text", json!({"text": "ab"})));
        }
        recording.record(&event("heartbeat", json!({})));
        let (events, _) = recording.run().follow();
        assert_eq!(events.len(), 1);
        assert_eq!(events[0]["text"], "ababab");
        for i in 0..MAX_EVENTS + 10 {
            recording.record(&event("tool_completed", json!({"n": i})));
        }
        recording.record(&event("run_completed", json!({})));
        let (events, _) = recording.run().follow();
        assert_eq!(events.len(), MAX_EVENTS + 1, "the terminal event is kept past the bound");
        assert_eq!(events.last().unwrap()["type"], "run_completed");
        assert_eq!(recording.run().summary("a")["events_dropped"], 11);
    }

    #[test]
    fn finished_runs_are_kept_within_a_byte_budget() {
        let runs = Runs::new("a");
        let big = "x".repeat(MAX_EVENT_BYTES / 2);
        let per_run = KEEP_BYTES / (MAX_EVENT_BYTES / 2);
        for i in 0..per_run + 10 {
            let recording = runs.start(origin(&format!("r{i}")));
            recording.record(&event("tool_completed", json!({"big": big})));
            recording.record(&event("run_completed", json!({})));
        }
        let _ = runs.start(origin("last"));
        assert!(runs.get("r0").is_none(), "the oldest went");
        assert!(runs.get(&format!("r{}", per_run + 9)).is_some(), "the newest stayed");
        assert!(runs.list().len() <= per_run + 1, "{}", runs.list().len());
    }

    #[test]
    fn only_so_many_finished_runs_are_kept() {
        let runs = Runs::new("a");
        let running = runs.start(origin("running"));
        for i in 0..KEEP_FINISHED + 5 {
            drop(runs.start(origin(&format!("f{i}"))));
        }
        let _ = runs.start(origin("last"));
        assert!(runs.get("running").is_some(), "a running run is never dropped");
        assert!(runs.get("f0").is_none());
        assert!(runs.list().len() <= KEEP_FINISHED + 2);
        drop(running);
    }
}
