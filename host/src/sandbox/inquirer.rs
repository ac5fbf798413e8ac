//! How a call's `ask` import reaches whoever drives the call: the import sends the round
//! through the call's [`Inquirer`], and the caller, which runs the call while answering
//! ([`Inquiries::answering`]), answers it (a person, an MCP client, the agent's model). The
//! sandbox knows nothing of who that is.

use crate::person::{Replies, Round, Unanswered};
use std::future::Future;
use tokio::sync::{mpsc, oneshot};

/// One round asked, and where its answers go.
struct Asked {
    round: Round,
    reply: oneshot::Sender<Result<Replies, Unanswered>>,
}

/// The asking end, carried by a call's context.
#[derive(Clone)]
pub struct Inquirer(mpsc::UnboundedSender<Asked>);

impl std::fmt::Debug for Inquirer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Inquirer")
    }
}

/// The answering end.
pub struct Inquiries(mpsc::UnboundedReceiver<Asked>);

impl Inquirer {
    /// A pair: the inquirer for the call's context, and the inquiries its caller answers.
    pub fn pair() -> (Inquirer, Inquiries) {
        let (tx, rx) = mpsc::unbounded_channel();
        (Inquirer(tx), Inquiries(rx))
    }

    /// Asks `round` and waits for its answers; `Cancelled` when nobody answers any more.
    pub async fn ask(&self, round: Round) -> Result<Replies, Unanswered> {
        let (reply, answer) = oneshot::channel();
        if self.0.send(Asked { round, reply }).is_err() {
            return Err(Unanswered::Cancelled);
        }
        answer.await.unwrap_or(Err(Unanswered::Cancelled))
    }
}

impl Inquiries {
    /// Runs `work`, answering each round it asks with `answer`, one at a time, until it ends.
    pub async fn answering<T, A>(mut self, work: impl Future<Output = T>, answer: impl Fn(Round) -> A) -> T
    where
        A: Future<Output = Result<Replies, Unanswered>>,
    {
        let mut work = std::pin::pin!(work);
        loop {
            let asked = tokio::select! {
                biased;
                out = &mut work => return out,
                Some(asked) = self.0.recv() => asked,
            };
            let answers = tokio::select! {
                biased;
                out = &mut work => return out,
                answers = answer(asked.round) => answers,
            };
            let _ = asked.reply.send(answers);
        }
    }
}
