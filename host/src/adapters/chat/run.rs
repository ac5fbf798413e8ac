//! A chat turn's life: begun by a person's message (or a skill's, waking the agent) or
//! resumed from a turn another replica left written down, run with its presenter, and ended:
//! what it waited on cancelled, its checkpoint forgotten, or left to another replica when
//! this one stops.

use super::show::{Op, present};
use super::turn::ChatTurn;
use super::{Chat, Incoming, LEFT_WAITING, Platform, RESUME_EVERY};
use crate::adapters::runs::{Origin, Recorder};
use crate::broker::{Kind, Orphan};
use crate::engine::checkpoint::Written;
use crate::engine::gate::new_id;
use crate::engine::{EngineError, TurnRequest};
use std::sync::{Arc, Weak};
use tokio::sync::{Notify, mpsc};

impl<P: Platform> Chat<P> {
    pub(super) async fn turn(self: Arc<Self>, message: Incoming<P::Place>) {
        let Ok(run_id) = new_id() else {
            tracing::error!("{}: no turn id: the OS random source failed", self.label);
            return;
        };
        let request = TurnRequest {
            channel_id: message.channel_id,
            thread: message.thread,
            user_id: message.user_id,
            message: message.text,
            route: message.route,
        };
        self.run(run_id, message.place, Begin::Message(request)).await;
    }

    /// Takes up a turn a replica that is gone left waiting (this replica holds its lease):
    /// its prompt is settled when nobody decided in time, and the turn goes on here.
    async fn resume(self: Arc<Self>, orphan: Orphan) {
        let run_id = orphan.waiting.run_id.clone();
        let place =
            serde_json::from_str::<P::Place>(&orphan.waiting.place).map_err(|e| format!("unreadable place: {e}"));
        let (place, written) = match place.and_then(|place| Ok((place, Written::read(&orphan)?))) {
            Ok(read) => read,
            Err(e) => {
                tracing::error!(run_id, "{}: cannot resume a turn left waiting: {e}", self.label);
                self.broker.finish(&run_id).await;
                return;
            }
        };
        let Orphan { approval, prompt, interrupted, .. } = orphan;
        let stored = approval.outcome.as_deref().unwrap_or("cancelled");
        tracing::info!(
            run_id,
            waited_on = approval.id,
            outcome = stored,
            interrupted,
            "{}: resuming a turn its replica left waiting",
            self.label
        );
        if let (Some(prompt), "timed_out") = (&prompt, stored) {
            let line = match approval.kind {
                Kind::Approval => "⌛ No decision in time: not run.",
                Kind::Question => "⌛ No answer in time.",
            };
            self.platform.settle(&place, prompt, line).await;
        }
        self.run(run_id, place, Begin::Resumed(Box::new(written))).await;
    }

    /// The turn `begin` says, recorded for the console as `origin`.
    async fn drive(
        &self,
        origin: Origin,
        begin: Begin,
        turn: &ChatTurn<P>,
    ) -> Result<crate::engine::TurnResult, EngineError> {
        let recorder = Recorder::new(&self.runs, origin, self.descriptions.clone());
        match begin {
            Begin::Message(request) => recorder.turn(&self.engine, request, turn, turn).await,
            Begin::Resumed(written) => {
                let Written { checkpoint, waited, .. } = *written;
                recorder.resume(&self.engine, checkpoint, waited, turn, turn).await
            }
        }
    }

    async fn run(self: Arc<Self>, run_id: String, place: P::Place, begin: Begin) {
        let (ops, queue) = mpsc::unbounded_channel();
        let presenter = tokio::spawn(present(self.platform.clone(), place.clone(), queue));
        let turn = ChatTurn::new(self.clone(), place, run_id.clone(), ops.clone());
        let channel_id = match &begin {
            Begin::Message(request) => request.channel_id.clone(),
            Begin::Resumed(written) => written.checkpoint.request.channel_id.clone(),
        };
        // A turn resumed on an answer gets it when its question is asked again.
        if let Begin::Resumed(written) = &begin
            && let Some((call, answer)) = &written.answer
        {
            turn.given.lock().insert(call.clone(), answer.clone());
        }
        let origin = Origin { run_id: run_id.clone(), channel_id, adapter: self.adapter, mode: "chat" };
        let running = self.drive(origin, begin, &turn);
        // A turn another replica took over (it judged this one gone) stops here, unshown:
        // that replica finishes it.
        let result = tokio::select! {
            result = running => Some(result),
            () = turn.taken.notified() => None,
        };
        // Stopped (the server stops) while waiting on an approval it wrote down: the turn
        // stays written down, and whichever replica sees the decision finishes it.
        let left = matches!(result, Some(Err(EngineError::Stopped)))
            && turn.written_down.load(std::sync::atomic::Ordering::SeqCst);
        if !left {
            self.broker.cancel_run(&run_id);
        }
        let Some(result) = result else {
            tracing::warn!(run_id, "{}: another replica took this turn over; it goes on there", self.label);
            drop((ops, turn));
            presenter.abort();
            return;
        };
        if left {
            tracing::info!(
                run_id,
                "{}: stopping: the turn waiting on an approval is left to another replica",
                self.label
            );
            let _ = ops.send(Op::Finish(Ok(LEFT_WAITING.into())));
            drop((ops, turn));
            let _ = presenter.await;
            return;
        }
        self.broker.finish(&run_id).await;
        let finish = result.map(|r| r.text).inspect_err(|e| tracing::warn!("{}: turn failed: {e}", self.label));
        let _ = ops.send(Op::Finish(finish));
        drop((ops, turn));
        let _ = presenter.await;
    }
}

/// How a chat turn begins.
enum Begin {
    /// A person's message.
    Message(TurnRequest),
    /// A turn written down elsewhere, with what it waited for.
    Resumed(Box<Written>),
}

/// Resumes, while `chat` lives and takes turns, the turns that replicas gone silent left
/// waiting on approvals since decided (or expired): every [`RESUME_EVERY`], and at once after
/// a decision here.
pub(super) async fn resumer<P: Platform>(chat: Weak<Chat<P>>, look: Arc<Notify>) {
    let mut tick = tokio::time::interval(RESUME_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = look.notified() => {}
        }
        let Some(chat) = chat.upgrade() else { return };
        while !chat.turns.is_closed() {
            let Some(orphan) = chat.broker.take_orphan(&chat.scope).await else { break };
            let resumed = chat.clone();
            chat.turns.spawn(async move { resumed.resume(orphan).await });
        }
    }
}
