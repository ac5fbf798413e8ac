//! A streamed response that drives its run: the body polls the turn (a [`Spawned`] task),
//! so when the client goes away and the body is dropped, the turn is aborted with it (no
//! further tool runs) and whatever the run still waited on is cancelled.

use crate::engine::{EngineError, TurnResult};
use bytes::Bytes;
use futures::Stream;
use futures::future::BoxFuture;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::sync::mpsc;

/// The turn being streamed.
pub type TurnFuture = BoxFuture<'static, Result<TurnResult, EngineError>>;

/// A turn running as a task of its own: awaited for its result, and aborted when dropped,
/// so that a client that goes away still ends its run (no further tool runs). A panic in the
/// turn resumes in whoever awaits it, as if the turn had been polled in place.
pub struct Spawned(pub tokio::task::JoinHandle<Result<TurnResult, EngineError>>);

impl Future for Spawned {
    type Output = Result<TurnResult, EngineError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.0).poll(cx).map(|joined| match joined {
            Ok(result) => result,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(_) => Err(EngineError::Stopped),
        })
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// What a streamed mode adds to the turn's own events.
pub trait Feed: Send + Sync + 'static {
    /// Queues a keep-alive, if the mode has one.
    fn heartbeat(&self);
    /// Queues the terminal event(s).
    fn finish(&self, result: &Result<TurnResult, EngineError>);
}

/// Runs `on_drop` when dropped: cancels the run's pending interactions.
pub struct OnDrop<F: FnMut() + Send>(pub F);

impl<F: FnMut() + Send> Drop for OnDrop<F> {
    fn drop(&mut self) {
        (self.0)()
    }
}

struct Driver {
    turn: Option<TurnFuture>,
    feed: std::sync::Arc<dyn Feed>,
    queued: mpsc::UnboundedReceiver<Bytes>,
    heartbeat: Option<Duration>,
    /// When the next heartbeat is due; pushed back by every chunk sent.
    idle: Option<Pin<Box<tokio::time::Sleep>>>,
    _guard: Box<dyn Send>,
}

impl Driver {
    /// The next chunk: queued events first, then whatever the turn produces; a heartbeat
    /// after `heartbeat` without any; `None` once the turn ended and everything was sent.
    ///
    /// An event the turn emits while it is polled is returned from that same poll. Had the
    /// body waited for the queue to wake it instead, the task would wake itself, and a task
    /// woken while it runs goes to the back of the runtime's queue: under load every event
    /// of the stream (`approval_resolved` among them) waited behind every other ready task.
    fn poll_next_chunk(&mut self, cx: &mut Context<'_>) -> Poll<Option<Bytes>> {
        loop {
            if let Ok(chunk) = self.queued.try_recv() {
                return Poll::Ready(Some(self.sent(chunk)));
            }
            let Some(turn) = self.turn.as_mut() else { return Poll::Ready(None) };
            if let Poll::Ready(result) = turn.as_mut().poll(cx) {
                self.turn = None;
                self.feed.finish(&result);
                continue;
            }
            // Registers the waker for events sent from elsewhere (a decision, a heartbeat).
            if let Poll::Ready(Some(chunk)) = self.queued.poll_recv(cx) {
                return Poll::Ready(Some(self.sent(chunk)));
            }
            if let Some(every) = self.heartbeat {
                let idle = self.idle.get_or_insert_with(|| Box::pin(tokio::time::sleep(every)));
                if idle.as_mut().poll(cx).is_ready() {
                    idle.as_mut().reset(tokio::time::Instant::now() + every);
                    self.feed.heartbeat();
                    continue;
                }
            }
            return Poll::Pending;
        }
    }

    /// `chunk`, with the heartbeat pushed back.
    fn sent(&mut self, chunk: Bytes) -> Bytes {
        if let (Some(idle), Some(every)) = (self.idle.as_mut(), self.heartbeat) {
            idle.as_mut().reset(tokio::time::Instant::now() + every);
        }
        chunk
    }
}

/// The body stream of a run: `queued` receives what the run's sink and `feed` send.
pub fn body(
    turn: TurnFuture,
    feed: std::sync::Arc<dyn Feed>,
    queued: mpsc::UnboundedReceiver<Bytes>,
    heartbeat: Option<Duration>,
    guard: Box<dyn Send>,
) -> impl Stream<Item = Result<Bytes, Infallible>> + Send + 'static {
    let mut driver = Driver { turn: Some(turn), feed, queued, heartbeat, idle: None, _guard: guard };
    futures::stream::poll_fn(move |cx| driver.poll_next_chunk(cx).map(|chunk| chunk.map(Ok)))
}
