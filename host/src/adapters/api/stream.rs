//! The approval-v1 wire protocol as a pure state machine: engine events in, numbered wire
//! events out. It owns the ordering rules: text blocks per LLM round, whitespace held back
//! until printable text arrives, every block closed before tool events and the terminal
//! event, one bare `assistant_text` for a run that streamed nothing.

use crate::adapters::present::{self, Descriptions};
use crate::engine::{ApprovalOutcome, EngineEvent};
use serde_json::{Map, Value, json};
use std::collections::HashMap;
use std::sync::Arc;

/// The protocol version every event carries.
pub const PROTOCOL_VERSION: &str = "v2";

/// One event on the wire: its type and its JSON (envelope included).
#[derive(Debug, Clone, PartialEq)]
pub struct WireEvent {
    /// The `event:` line, also the JSON's `type`.
    pub kind: &'static str,
    /// The `data:` line.
    pub data: Value,
}

impl WireEvent {
    /// The SSE frame: `event: <type>\ndata: <json>\n\n`.
    pub fn to_sse(&self) -> String {
        format!("event: {}\ndata: {}\n\n", self.kind, self.data)
    }
}

/// Turns one run's events into wire events. Not thread-safe by itself: the run keeps it
/// behind a lock, so sequence numbers follow the order events are queued in.
pub struct Translator {
    run_id: String,
    channel_id: String,
    descriptions: Arc<Descriptions>,
    sequence: u64,
    /// A text block is open.
    open: bool,
    /// Whitespace received in this round before any printable text.
    held: String,
    /// Some round opened a block.
    streamed: bool,
    /// tool_call_id -> approval_id, for the approval and tool events that follow.
    approvals: HashMap<String, String>,
    /// Approvals and questions whose `approval_resolved` / `question_resolved` was sent.
    resolved: std::collections::HashSet<String>,
}

impl Translator {
    /// A translator for run `run_id` on `channel_id`.
    pub fn new(run_id: &str, channel_id: &str, descriptions: Arc<Descriptions>) -> Self {
        Translator {
            run_id: run_id.into(),
            channel_id: channel_id.into(),
            descriptions,
            sequence: 0,
            open: false,
            held: String::new(),
            streamed: false,
            approvals: HashMap::new(),
            resolved: Default::default(),
        }
    }

    /// The approval id of a call that asked for one.
    pub fn approval_id(&self, tool_call_id: &str) -> Option<&str> {
        self.approvals.get(tool_call_id).map(String::as_str)
    }

    fn event(&mut self, kind: &'static str, fields: Value) -> WireEvent {
        self.sequence += 1;
        let mut data = Map::new();
        data.insert("protocol_version".into(), PROTOCOL_VERSION.into());
        data.insert("sequence".into(), self.sequence.into());
        data.insert("run_id".into(), self.run_id.clone().into());
        data.insert("channel_id".into(), self.channel_id.clone().into());
        data.insert("type".into(), kind.into());
        if let Value::Object(fields) = fields {
            data.extend(fields);
        }
        WireEvent { kind, data: Value::Object(data) }
    }

    /// `run_started`.
    pub fn started(&mut self) -> WireEvent {
        self.event("run_started", json!({}))
    }

    /// `heartbeat`.
    pub fn heartbeat(&mut self) -> WireEvent {
        self.event("heartbeat", json!({}))
    }

    /// Closes the open block, if any.
    fn close(&mut self, out: &mut Vec<WireEvent>) {
        if self.open {
            self.open = false;
            out.push(self.event("assistant_text_end", json!({})));
        }
    }

    fn text(&mut self, text: &str, out: &mut Vec<WireEvent>) {
        if self.open {
            out.push(self.event("assistant_text", json!({ "text": text })));
            return;
        }
        self.held.push_str(text);
        if self.held.chars().all(char::is_whitespace) {
            return;
        }
        let text = std::mem::take(&mut self.held);
        (self.open, self.streamed) = (true, true);
        out.push(self.event("assistant_text_start", json!({})));
        out.push(self.event("assistant_text", json!({ "text": text })));
    }

    /// The wire events for one engine event.
    pub fn engine(&mut self, event: &EngineEvent) -> Vec<WireEvent> {
        let mut out = Vec::new();
        match event {
            EngineEvent::RoundStarted => {
                self.close(&mut out);
                self.held.clear();
            }
            EngineEvent::TextDelta(text) => self.text(text, &mut out),
            EngineEvent::ToolStarted { tool_call_id, tool_name, input, target } => {
                self.close(&mut out);
                let mut fields = json!({
                    "approval_id": self.approval_id(tool_call_id),
                    "tool_name": tool_name,
                    "tool_call_id": tool_call_id,
                    "tool_input": present::tool_input(input),
                });
                if let Some(t) = target {
                    if let Some(target) = &t.target {
                        fields["target"] = target.clone().into();
                    }
                    if let Some(kind) = &t.query_kind {
                        fields["query_kind"] = kind.clone().into();
                    }
                }
                out.push(self.event("tool_started", fields));
            }
            EngineEvent::ToolCompleted { tool_call_id, tool_name, duration, approved, is_empty, .. } => {
                self.close(&mut out);
                let fields = json!({
                    "approval_id": self.approval_id(tool_call_id),
                    "tool_name": tool_name,
                    "tool_call_id": tool_call_id,
                    "duration": duration.as_secs_f64(),
                    "approved": approved,
                    "is_empty": is_empty,
                });
                out.push(self.event("tool_completed", fields));
            }
            EngineEvent::ApprovalRequested { approval_id, tool_call_id, tool_name, input, level, expires_at } => {
                self.close(&mut out);
                self.approvals.insert(tool_call_id.clone(), approval_id.clone());
                let fields = crate::broker::present::Approval {
                    tool_name,
                    tool_call_id,
                    input,
                    level: *level,
                    safe_description: self.descriptions.safe_description(tool_name),
                    expires_at: *expires_at,
                }
                .json(approval_id);
                out.push(self.event("approval_requested", fields));
            }
            EngineEvent::ApprovalResolved { tool_call_id, outcome } => {
                let approval_id = self.approvals.get(tool_call_id).cloned();
                return self.approval_resolved(approval_id.as_deref(), Some(tool_call_id), outcome);
            }
        }
        out
    }

    /// `approval_resolved` for `approval_id`, once: nothing if it was already sent (a
    /// person's decision is announced by the route that took it, before the engine's word).
    pub fn resolved_by(&mut self, approval_id: &str, outcome: &ApprovalOutcome) -> Vec<WireEvent> {
        let tool_call_id = self.approvals.iter().find(|(_, a)| *a == approval_id).map(|(t, _)| t.clone());
        self.approval_resolved(Some(approval_id), tool_call_id.as_deref(), outcome)
    }

    /// `approval_resolved`, once per approval id.
    fn approval_resolved(
        &mut self,
        approval_id: Option<&str>,
        tool_call_id: Option<&str>,
        outcome: &ApprovalOutcome,
    ) -> Vec<WireEvent> {
        let mut out = Vec::new();
        if approval_id.is_some_and(|id| !self.resolved.insert(id.to_owned())) {
            return out;
        }
        self.close(&mut out);
        let fields = json!({
            "approval_id": approval_id,
            "tool_call_id": tool_call_id,
            "outcome": outcome_name(outcome),
        });
        out.push(self.event("approval_resolved", fields));
        out
    }

    /// `question_requested`.
    /// `fields`: the question's presentation ([`crate::broker::present::question`]).
    pub fn question_requested(&mut self, fields: Value) -> Vec<WireEvent> {
        let mut out = Vec::new();
        self.close(&mut out);
        out.push(self.event("question_requested", fields));
        out
    }

    /// `question_resolved`, once per question (an answer is announced by the route that took
    /// it, before the turn's own word); `answer` only with outcome `answered`.
    pub fn question_resolved(&mut self, id: &str, outcome: &str, answer: Option<&str>) -> Vec<WireEvent> {
        if !self.resolved.insert(id.to_owned()) {
            return Vec::new();
        }
        let mut fields = json!({ "question_id": id, "outcome": outcome });
        if let Some(answer) = answer {
            fields["answer"] = answer.into();
        }
        vec![self.event("question_resolved", fields)]
    }

    /// The end of a successful run: closes the block, sends the whole answer as one bare
    /// `assistant_text` if nothing streamed, then `run_completed`.
    pub fn completed(&mut self, text: &str, time_boxed: bool) -> Vec<WireEvent> {
        self.completed_with(text, time_boxed, None)
    }

    /// [`Translator::completed`], with the run's token usage as an added field.
    pub fn completed_with(
        &mut self,
        text: &str,
        time_boxed: bool,
        usage: Option<&crate::llm::Usage>,
    ) -> Vec<WireEvent> {
        let mut out = Vec::new();
        self.close(&mut out);
        if !self.streamed && !text.trim().is_empty() {
            out.push(self.event("assistant_text", json!({ "text": text })));
        }
        let mut fields = json!({ "text": text, "time_boxed": time_boxed });
        if let Some(usage) = usage {
            fields["usage"] = json!(usage);
        }
        out.push(self.event("run_completed", fields));
        out
    }

    /// The end of a failed run: closes the block, then `run_failed`.
    pub fn failed(&mut self, error: &str) -> Vec<WireEvent> {
        let mut out = Vec::new();
        self.close(&mut out);
        out.push(self.event("run_failed", json!({ "error": error })));
        out
    }
}

/// The spec's outcome names (`denied` without the reason).
pub fn outcome_name(outcome: &ApprovalOutcome) -> &'static str {
    outcome.as_str()
}

/// Seconds since the Unix epoch, as a float.
pub use crate::broker::present::unix_seconds;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::ToolTarget;
    use crate::tools::Level;
    use std::time::{Duration, SystemTime};

    fn translator() -> Translator {
        Translator::new("run-1", "chan", Arc::new(Descriptions::default()))
    }

    fn kinds(events: &[WireEvent]) -> Vec<&'static str> {
        events.iter().map(|e| e.kind).collect()
    }

    fn feed(t: &mut Translator, events: Vec<EngineEvent>) -> Vec<WireEvent> {
        events.iter().flat_map(|e| t.engine(e)).collect()
    }

    fn delta(s: &str) -> EngineEvent {
        EngineEvent::TextDelta(s.into())
    }

    fn started(id: &str) -> EngineEvent {
        EngineEvent::ToolStarted {
            tool_call_id: id.into(),
            tool_name: "s__t".into(),
            input: json!({"sql": "x"}),
            target: None,
        }
    }

    fn completed(id: &str) -> EngineEvent {
        let duration = Duration::from_millis(1500);
        EngineEvent::ToolCompleted {
            tool_call_id: id.into(),
            tool_name: "s__t".into(),
            duration,
            approved: true,
            is_error: false,
            is_empty: true,
        }
    }

    #[test]
    fn envelope_and_sequence() {
        let mut t = translator();
        let first = t.started();
        let second = t.heartbeat();
        assert_eq!(
            first.data,
            json!({"protocol_version": "v2", "sequence": 1, "run_id": "run-1", "channel_id": "chan", "type": "run_started"})
        );
        assert_eq!(second.data["sequence"], 2);
        assert_eq!(first.to_sse(), format!("event: run_started\ndata: {}\n\n", first.data));
    }

    #[test]
    fn one_block_per_round_closed_before_tools() {
        let mut t = translator();
        let mut out = feed(
            &mut t,
            vec![EngineEvent::RoundStarted, delta("Checking "), delta("logs."), started("c1"), completed("c1")],
        );
        out.extend(feed(&mut t, vec![EngineEvent::RoundStarted, delta("Done.")]));
        out.extend(t.completed("Done.", false));
        assert_eq!(
            kinds(&out),
            [
                "assistant_text_start",
                "assistant_text",
                "assistant_text",
                "assistant_text_end",
                "tool_started",
                "tool_completed",
                "assistant_text_start",
                "assistant_text",
                "assistant_text_end",
                "run_completed"
            ]
        );
        assert_eq!(out[4].data["tool_input"], json!({"sql": "[redacted]"}));
        assert_eq!(out[5].data["duration"], 1.5);
        assert_eq!((out[5].data["approved"].clone(), out[5].data["is_empty"].clone()), (json!(true), json!(true)));
        let seqs: Vec<u64> = out.iter().map(|e| e.data["sequence"].as_u64().unwrap()).collect();
        assert_eq!(seqs, (1..=10).collect::<Vec<_>>());
    }

    #[test]
    fn whitespace_is_held_back_and_flushed_with_text() {
        let mut t = translator();
        let out = feed(&mut t, vec![EngineEvent::RoundStarted, delta("\n"), delta("  "), delta("Hi")]);
        assert_eq!(kinds(&out), ["assistant_text_start", "assistant_text"]);
        assert_eq!(out[1].data["text"], "\n  Hi");
    }

    #[test]
    fn whitespace_only_round_opens_nothing_and_counts_as_silent() {
        let mut t = translator();
        let mut out = feed(&mut t, vec![EngineEvent::RoundStarted, delta(" \n ")]);
        out.extend(t.completed("Answer", false));
        assert_eq!(kinds(&out), ["assistant_text", "run_completed"]);
        assert_eq!(out[0].data["text"], "Answer");
    }

    #[test]
    fn failure_mid_block_closes_it_first() {
        let mut t = translator();
        let mut out = feed(&mut t, vec![EngineEvent::RoundStarted, delta("Half")]);
        out.extend(t.failed("the LLM request failed"));
        assert_eq!(kinds(&out), ["assistant_text_start", "assistant_text", "assistant_text_end", "run_failed"]);
        assert_eq!(out[3].data["error"], "the LLM request failed");
    }

    #[test]
    fn no_deltas_sends_one_bare_text_and_empty_answer_sends_none() {
        let mut t = translator();
        assert_eq!(kinds(&t.completed("Whole answer", true)), ["assistant_text", "run_completed"]);
        let mut t = translator();
        assert_eq!(kinds(&t.completed("", false)), ["run_completed"]);
    }

    #[test]
    fn approvals_carry_their_id_into_tool_events() {
        let mut t = translator();
        let expires_at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_732_200_000);
        let requested = EngineEvent::ApprovalRequested {
            approval_id: "a1".into(),
            tool_call_id: "c1".into(),
            tool_name: "s__t".into(),
            input: json!({"command": "ls", "script": "rm -rf /"}),
            level: Level::Confirm,
            expires_at,
        };
        let resolved = EngineEvent::ApprovalResolved { tool_call_id: "c1".into(), outcome: ApprovalOutcome::Approved };
        let target = Some(ToolTarget { target: Some("payments".into()), query_kind: Some("logs".into()) });
        let start =
            EngineEvent::ToolStarted { tool_call_id: "c1".into(), tool_name: "s__t".into(), input: json!({}), target };
        let out = feed(&mut t, vec![requested, resolved, start, completed("c1")]);
        let a = &out[0].data;
        assert_eq!((a["level"].clone(), a["confirmation_challenge"].clone()), (json!("confirm"), json!("CONFIRM")));
        assert_eq!(a["tool_input"], json!({"command": "ls", "script": "[redacted]"}));
        assert_eq!(a["expires_at"], 1_732_200_000.0);
        assert_eq!(a["safe_description"], "Tool: s__t");
        assert_eq!(out[1].data["outcome"], "approved");
        assert_eq!(out[1].data["approval_id"], "a1");
        assert_eq!(
            (out[2].data["target"].clone(), out[2].data["query_kind"].clone()),
            (json!("payments"), json!("logs"))
        );
        assert_eq!(out[2].data["approval_id"], "a1");
        assert_eq!(out[3].data["approval_id"], "a1");
    }

    /// An approve-level approval `approval_id` of call `tool_call_id`.
    fn asked(approval_id: &str, tool_call_id: &str) -> EngineEvent {
        EngineEvent::ApprovalRequested {
            approval_id: approval_id.into(),
            tool_call_id: tool_call_id.into(),
            tool_name: "s__t".into(),
            input: json!({}),
            level: Level::Approve,
            expires_at: SystemTime::UNIX_EPOCH,
        }
    }

    #[test]
    fn a_decision_announced_by_its_route_is_not_repeated_by_the_engine() {
        let mut t = translator();
        let mut out = feed(&mut t, vec![EngineEvent::RoundStarted, delta("Let me check."), asked("a1", "c1")]);
        out.extend(t.resolved_by("a1", &ApprovalOutcome::Denied(None)));
        assert!(t.resolved_by("a1", &ApprovalOutcome::Denied(None)).is_empty(), "a repeat announces nothing");
        let engine =
            EngineEvent::ApprovalResolved { tool_call_id: "c1".into(), outcome: ApprovalOutcome::Denied(None) };
        assert!(t.engine(&engine).is_empty(), "the engine's word on an announced decision adds nothing");
        assert_eq!(
            kinds(&out),
            ["assistant_text_start", "assistant_text", "assistant_text_end", "approval_requested", "approval_resolved"]
        );
        let resolved = &out[4].data;
        assert_eq!(
            (resolved["approval_id"].clone(), resolved["tool_call_id"].clone(), resolved["outcome"].clone()),
            (json!("a1"), json!("c1"), json!("denied"))
        );
        assert_eq!(resolved["sequence"], 5);
        // Without an announcement (a timeout, a cancellation) the engine's event is sent.
        let mut t = translator();
        let timed_out = EngineEvent::ApprovalResolved { tool_call_id: "c2".into(), outcome: ApprovalOutcome::TimedOut };
        let out = feed(&mut t, vec![asked("a2", "c2"), timed_out]);
        assert_eq!(
            (out[1].data["approval_id"].clone(), out[1].data["outcome"].clone()),
            (json!("a2"), json!("timed_out"))
        );
    }

    #[test]
    fn questions() {
        let mut t = translator();
        let fields =
            crate::broker::present::question("q1", "Which?", &["a".into(), "b".into()], None, SystemTime::UNIX_EPOCH);
        let mut out = t.question_requested(fields);
        out.extend(t.question_resolved("q1", "answered", Some("a")));
        assert!(t.question_resolved("q1", "answered", Some("a")).is_empty(), "announced once");
        out.extend(t.question_resolved("q2", "timed_out", None));
        assert_eq!(out[0].data["choices"], json!(["a", "b"]));
        assert_eq!(out[1].data["answer"], "a");
        assert!(out[2].data.get("answer").is_none());
    }
}
