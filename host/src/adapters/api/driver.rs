//! A streamed response that drives its run: the body polls the turn's future, so when the
//! client goes away and the body is dropped, the turn is dropped with it (no further tool
//! runs) and whatever the run still waited on is cancelled.

use crate::engine::{EngineError, TurnResult};
use bytes::Bytes;
use futures::Stream;
use futures::future::BoxFuture;
use std::convert::Infallible;
use std::time::Duration;
use tokio::sync::mpsc;

/// The turn being streamed.
pub type TurnFuture = BoxFuture<'static, Result<TurnResult, EngineError>>;

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
    _guard: Box<dyn Send>,
}

impl Driver {
    /// The next chunk: queued events first, then whatever the turn produces; a heartbeat
    /// after `heartbeat` without any; `None` once the turn ended and everything was sent.
    async fn next(&mut self) -> Option<Bytes> {
        loop {
            if let Ok(chunk) = self.queued.try_recv() {
                return Some(chunk);
            }
            let turn = self.turn.as_mut()?;
            let idle = async {
                match self.heartbeat {
                    Some(every) => tokio::time::sleep(every).await,
                    None => std::future::pending().await,
                }
            };
            enum Step {
                Chunk(Bytes),
                Done(Result<TurnResult, EngineError>),
                Idle,
            }
            let step = tokio::select! {
                biased;
                Some(chunk) = self.queued.recv() => Step::Chunk(chunk),
                result = turn => Step::Done(result),
                () = idle => Step::Idle,
            };
            match step {
                Step::Chunk(chunk) => return Some(chunk),
                Step::Done(result) => {
                    self.turn = None;
                    self.feed.finish(&result);
                }
                Step::Idle => self.feed.heartbeat(),
            }
        }
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
    let driver = Driver { turn: Some(turn), feed, queued, heartbeat, _guard: guard };
    futures::stream::unfold(driver, |mut driver| async move {
        let chunk = driver.next().await?;
        Some((Ok(chunk), driver))
    })
}
