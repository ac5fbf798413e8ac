//! What a client hears while its `tools/call` runs: the skill's `log` records as
//! `notifications/message` ([`super::logging`]) and its `report-progress` calls as
//! `notifications/progress` when the request carries a progress token.
//!
//! The sandbox calls the [`Forwarder`] from a host import, which must not wait on the
//! client: notes go into a queue that one task per call drains in order (started at the
//! first note, so a silent call costs no task), and the call's result is sent only after the
//! queue is drained ([`Forwarding::finish`]), so a client reads every note of a call before
//! its result. The log cap per call bounds the records; progress is rate-limited here.
//!
//! A call the stdio front runs itself ([`super::stdio`]) writes its notes straight to the
//! client's output instead ([`Direct`]): the same line queue its result goes to afterwards,
//! so the order holds without a task or a trip through rmcp.
#![allow(deprecated)]

use super::logging::{self, Threshold};
use crate::sandbox::output::LogRecord;
use crate::sandbox::{CallObserver, Observer};
use parking_lot::Mutex;
use rmcp::model::{
    LoggingMessageNotificationParam, Notification, ProgressNotificationParam, ProgressToken, ServerJsonRpcMessage,
    ServerNotification,
};
use rmcp::service::{Peer, RoleServer};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// At most one progress note per this interval (the one reaching `total` always goes).
pub const PROGRESS_INTERVAL: Duration = Duration::from_millis(50);

enum Note {
    Log(LoggingMessageNotificationParam),
    Progress(ProgressNotificationParam),
}

/// The progress token of the call and what was last sent.
struct Progress {
    token: ProgressToken,
    last: Option<(Instant, f64)>,
}

/// Where a call's notes go when it runs outside rmcp's session: the client's output, one
/// JSON-RPC message a line (an extension of the call's `RequestContext`).
#[derive(Clone)]
pub(super) struct Direct(pub(super) mpsc::UnboundedSender<String>);

/// The queue of a call's notes: not started, open (with the task sending them), written
/// straight out, or closed.
enum Queue {
    Idle(Peer<RoleServer>),
    Direct(mpsc::UnboundedSender<String>),
    Open(mpsc::UnboundedSender<Note>, tokio::task::JoinHandle<()>),
    Closed,
}

/// The [`CallObserver`] of one MCP call.
pub(super) struct Forwarder {
    queue: Mutex<Queue>,
    threshold: Arc<Threshold>,
    progress: Option<Mutex<Progress>>,
}

/// A running call's forwarder.
pub(super) struct Forwarding {
    forwarder: Arc<Forwarder>,
}

impl Forwarding {
    /// Forwards to `peer` (or straight out, with `direct`) the records at or above
    /// `threshold` and, with a `token`, the progress reports.
    pub(super) fn start(
        peer: Peer<RoleServer>,
        direct: Option<&Direct>,
        threshold: Arc<Threshold>,
        token: Option<ProgressToken>,
    ) -> Self {
        let progress = token.map(|token| Mutex::new(Progress { token, last: None }));
        let queue = match direct {
            Some(Direct(out)) => Queue::Direct(out.clone()),
            None => Queue::Idle(peer),
        };
        Forwarding { forwarder: Arc::new(Forwarder { queue: Mutex::new(queue), threshold, progress }) }
    }

    /// The observer the call's context carries.
    pub(super) fn observer(&self) -> Observer {
        Observer(self.forwarder.clone())
    }

    /// Stops taking notes and waits until every queued one is sent.
    pub(super) async fn finish(self) {
        let queue = std::mem::replace(&mut *self.forwarder.lock(), Queue::Closed);
        if let Queue::Open(tx, task) = queue {
            drop(tx);
            let _ = task.await;
        }
    }
}

impl Forwarder {
    fn lock(&self) -> parking_lot::MutexGuard<'_, Queue> {
        self.queue.lock()
    }

    fn send(&self, note: Note) {
        let mut queue = self.lock();
        if let Queue::Idle(peer) = &*queue {
            *queue = open(peer.clone());
        }
        match &*queue {
            Queue::Open(tx, _) => {
                let _ = tx.send(note);
            }
            Queue::Direct(out) => {
                let notification = match note {
                    Note::Log(param) => ServerNotification::LoggingMessageNotification(Notification::new(param)),
                    Note::Progress(param) => ServerNotification::ProgressNotification(Notification::new(param)),
                };
                if let Ok(line) = serde_json::to_string(&ServerJsonRpcMessage::notification(notification)) {
                    let _ = out.send(line);
                }
            }
            Queue::Idle(_) | Queue::Closed => {}
        }
    }
}

/// The queue and the task that sends its notes to `peer`, in order.
fn open(peer: Peer<RoleServer>) -> Queue {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let task = tokio::spawn(async move {
        while let Some(note) = rx.recv().await {
            // A client gone away is noticed by the call itself; a lost note is no error.
            let _ = match note {
                Note::Log(param) => peer.notify_logging_message(param).await,
                Note::Progress(param) => peer.notify_progress(param).await,
            };
        }
    });
    Queue::Open(tx, task)
}

impl CallObserver for Forwarder {
    fn log(&self, skill: &str, record: &LogRecord) {
        if self.threshold.admits(logging::level_of(record)) {
            self.send(Note::Log(logging::message(skill, record)));
        }
    }

    fn progress(&self, progress: f64, total: Option<f64>, message: Option<String>) {
        let Some(state) = &self.progress else { return };
        let mut state = state.lock();
        let now = Instant::now();
        if !admit(state.last, now, progress, total) {
            return;
        }
        state.last = Some((now, progress));
        let mut param = ProgressNotificationParam::new(state.token.clone(), progress);
        param.total = total;
        param.message = message;
        drop(state);
        self.send(Note::Progress(param));
    }
}

/// Whether a report goes out: its progress grew (the spec wants it increasing), and either
/// it reaches `total` or the last note is [`PROGRESS_INTERVAL`] old.
fn admit(last: Option<(Instant, f64)>, now: Instant, progress: f64, total: Option<f64>) -> bool {
    let Some((at, previous)) = last else { return true };
    progress > previous && (total.is_some_and(|t| progress >= t) || now.duration_since(at) >= PROGRESS_INTERVAL)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_is_increasing_and_rate_limited_but_the_last_goes() {
        let t0 = Instant::now();
        assert!(admit(None, t0, 0.0, Some(10.0)));
        let last = Some((t0, 1.0));
        assert!(!admit(last, t0 + Duration::from_millis(10), 2.0, Some(10.0)), "too soon");
        assert!(admit(last, t0 + PROGRESS_INTERVAL, 2.0, Some(10.0)));
        assert!(!admit(last, t0 + PROGRESS_INTERVAL, 1.0, None), "not increasing");
        assert!(admit(last, t0 + Duration::from_millis(1), 10.0, Some(10.0)), "the final report");
    }
}
