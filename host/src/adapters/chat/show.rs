//! What a chat turn shows, as a state machine over the turn's [`Op`]s: the answer streamed
//! into messages edited at most every [`Platform::EDIT_EVERY`] (a new message per LLM round,
//! split at [`Platform::LIMIT`]), the tool lines in one status message, prompts settled, and
//! the working signal repeated every [`Platform::WORKING_EVERY`] while the turn runs.

use super::Platform;
use super::text;
use crate::engine::EngineError;
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

/// What a turn shows, in order, for the presenter.
#[derive(Debug)]
pub(super) enum Op {
    /// An LLM request starts: the text that follows goes in a new message.
    Round,
    /// Answer text.
    Text(String),
    /// A tool call's status line (replacing the call's earlier line).
    Status { id: String, line: String },
    /// A prompt's final line.
    Settle { message: String, text: String },
    /// Show everything now (a prompt is about to be posted below it), then say so.
    Flush(oneshot::Sender<()>),
    /// The turn ended: its answer, or its error.
    Finish(Result<String, EngineError>),
}

/// The messages of a turn and what each shows.
#[derive(Default)]
struct Shown {
    /// The current round's text.
    text: String,
    /// The current round's messages and what each shows.
    messages: Vec<(String, String)>,
    /// Tool lines by call, in order.
    status: Vec<(String, String)>,
    status_message: Option<(String, String)>,
    /// Something is not shown yet.
    dirty: bool,
}

impl Shown {
    /// Takes a line for call `id` (replacing its earlier one).
    fn status(&mut self, id: String, line: String) {
        match self.status.iter_mut().find(|(call, _)| *call == id) {
            Some(entry) => entry.1 = line,
            None => self.status.push((id, line)),
        }
        self.dirty = true;
    }

    /// The text the turn ends with: its answer (nothing more when it said nothing and
    /// nothing was shown), or its error.
    fn finish(&mut self, result: Result<String, EngineError>) {
        self.text = match result {
            Ok(answer) if answer.trim().is_empty() && self.messages.is_empty() => String::new(),
            Ok(answer) => answer,
            Err(e) => format!("⚠️ {e}"),
        };
        self.dirty = true;
    }
}

/// The presenter of one turn in one place.
struct Presenter<P: Platform> {
    platform: Arc<P>,
    place: P::Place,
    shown: Shown,
    /// No edit before this.
    next_edit: Instant,
    /// When the working signal is due again, if it repeats.
    working: Option<Instant>,
}

impl<P: Platform> Presenter<P> {
    /// When to wake without an op: the next edit (if something waits to be shown) or the
    /// next working signal.
    fn wake(&self) -> Option<Instant> {
        match (self.shown.dirty, self.working) {
            (true, Some(w)) => Some(self.next_edit.min(w)),
            (true, None) => Some(self.next_edit),
            (false, w) => w,
        }
    }

    /// Woken by the clock: repeats the working signal and shows what waits, when due.
    async fn tick(&mut self) {
        let now = Instant::now();
        if self.working.is_some_and(|w| w <= now) {
            self.platform.working(&self.place, None).await;
            self.working = P::WORKING_EVERY.map(|every| Instant::now() + every);
        }
        if self.shown.dirty && self.next_edit <= now {
            flush(&*self.platform, &self.place, &mut self.shown).await;
            self.next_edit = Instant::now() + P::EDIT_EVERY;
        }
    }

    /// Applies one op; `false` once the turn ended (`None`: its sender is gone).
    async fn apply(&mut self, op: Option<Op>) -> bool {
        let (platform, place) = (&*self.platform, &self.place);
        match op {
            Some(Op::Round) => {
                flush(platform, place, &mut self.shown).await;
                self.shown.text.clear();
                self.shown.messages.clear();
            }
            Some(Op::Text(text)) => {
                self.shown.text.push_str(&text);
                self.shown.dirty = true;
            }
            Some(Op::Status { id, line }) => self.shown.status(id, line),
            Some(Op::Settle { message, text }) => platform.settle(place, &message, &text).await,
            Some(Op::Flush(done)) => {
                flush(platform, place, &mut self.shown).await;
                let _ = done.send(());
            }
            Some(Op::Finish(result)) => {
                let ok = result.is_ok();
                self.shown.finish(result);
                flush(platform, place, &mut self.shown).await;
                platform.working(place, Some(ok)).await;
                return false;
            }
            None => {
                flush(platform, place, &mut self.shown).await;
                platform.working(place, Some(false)).await;
                return false;
            }
        }
        true
    }
}

/// Shows a turn: the status message, the streamed answer, prompt outcomes.
pub(super) async fn present<P: Platform>(platform: Arc<P>, place: P::Place, mut ops: mpsc::UnboundedReceiver<Op>) {
    platform.working(&place, None).await;
    let working = P::WORKING_EVERY.map(|every| Instant::now() + every);
    let mut presenter = Presenter { platform, place, shown: Shown::default(), next_edit: Instant::now(), working };
    loop {
        let wake = presenter.wake();
        // Ops first: what is queued is taken before a timed edit, which then shows it all.
        tokio::select! {
            biased;
            op = ops.recv() => if !presenter.apply(op).await { return },
            () = sleep_until(wake) => presenter.tick().await,
        }
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Brings the messages up to date with what the turn produced.
async fn flush<P: Platform>(platform: &P, place: &P::Place, shown: &mut Shown) {
    if !shown.dirty {
        return;
    }
    shown.dirty = false;
    for (n, part) in text::split(&shown.text, P::LIMIT).into_iter().enumerate() {
        match shown.messages.get_mut(n) {
            Some((_, was)) if *was == part => {}
            Some((id, was)) => {
                platform.edit(place, id, &part).await;
                *was = part;
            }
            None => match platform.post(place, &part).await {
                Some(id) => shown.messages.push((id, part)),
                None => break,
            },
        }
    }
    if !shown.status.is_empty() {
        let lines: Vec<&str> = shown.status.iter().map(|(_, line)| line.as_str()).collect();
        let status = lines.join("\n");
        match &mut shown.status_message {
            Some((_, was)) if *was == status => {}
            Some((id, was)) => {
                platform.edit(place, id, &status).await;
                *was = status;
            }
            None => shown.status_message = platform.post(place, &status).await.map(|id| (id, status)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{ChatError, Incoming, Prompt};
    use super::*;
    use parking_lot::Mutex;
    use std::time::Duration;

    /// A platform that records what it was asked to do, as lines.
    #[derive(Default)]
    struct Recorded {
        calls: Mutex<Vec<String>>,
        next: Mutex<u32>,
    }

    impl Recorded {
        fn calls(&self) -> Vec<String> {
            self.calls.lock().clone()
        }

        fn note(&self, call: String) -> String {
            self.calls.lock().push(call);
            let mut next = self.next.lock();
            *next += 1;
            format!("m{next}")
        }
    }

    #[async_trait::async_trait]
    impl Platform for Recorded {
        type Place = String;
        const LIMIT: usize = 20;
        const EDIT_EVERY: Duration = Duration::from_secs(3600);
        const WORKING_EVERY: Option<Duration> = None;

        fn key(place: &String) -> String {
            place.clone()
        }
        fn scope(&self) -> String {
            "test".into()
        }
        async fn post(&self, _: &String, markdown: &str) -> Option<String> {
            Some(self.note(format!("post {markdown}")))
        }
        async fn edit(&self, _: &String, id: &str, markdown: &str) {
            self.note(format!("edit {id} {markdown}"));
        }
        async fn working(&self, _: &String, done: Option<bool>) {
            self.note(format!("working {done:?}"));
        }
        async fn ask(&self, _: &String, prompt: &Prompt<'_>) -> Result<String, ChatError> {
            Ok(self.note(format!("ask {}", prompt.markdown())))
        }
        async fn settle(&self, _: &String, id: &str, markdown: &str) {
            self.note(format!("settle {id} {markdown}"));
        }
        async fn notify(&self, _: &str, _: &str) -> Result<Incoming<String>, ChatError> {
            Err(ChatError::NotHere("not here".into()))
        }
    }

    /// Runs `ops` through a presenter; what the platform was asked.
    async fn shown(ops: Vec<Op>) -> Vec<String> {
        let platform = Arc::new(Recorded::default());
        let (tx, rx) = mpsc::unbounded_channel();
        ops.into_iter().for_each(|op| tx.send(op).unwrap());
        drop(tx);
        present(platform.clone(), "here".into(), rx).await;
        platform.calls()
    }

    fn text(t: &str) -> Op {
        Op::Text(t.into())
    }

    #[tokio::test]
    async fn text_streams_into_one_message_edited_and_the_answer_ends_it() {
        let calls =
            shown(vec![text("Hel"), Op::Flush(oneshot::channel().0), text("lo"), Op::Finish(Ok("Hello".into()))]);
        assert_eq!(calls.await, ["working None", "post Hel", "edit m2 Hello", "working Some(true)"]);
    }

    #[tokio::test]
    async fn a_round_starts_a_new_message_and_tool_lines_share_one() {
        let calls = shown(vec![
            text("Looking."),
            Op::Status { id: "c1".into(), line: "→ t".into() },
            Op::Round,
            Op::Status { id: "c1".into(), line: "✓ t".into() },
            Op::Finish(Ok("Found.".into())),
        ]);
        assert_eq!(
            calls.await,
            ["working None", "post Looking.", "post → t", "post Found.", "edit m3 ✓ t", "working Some(true)"]
        );
    }

    #[tokio::test]
    async fn a_long_answer_is_split_at_the_limit_and_an_error_is_shown() {
        let long = "word ".repeat(30); // past the smallest limit split honours (64, less its fences)
        let calls = shown(vec![Op::Finish(Ok(long.trim().into()))]).await;
        let posts: Vec<&String> = calls.iter().filter(|c| c.starts_with("post")).collect();
        assert!(posts.len() > 1 && posts.iter().all(|p| p.chars().count() <= 64 + 5), "{calls:?}");
        let joined: Vec<String> = posts.iter().map(|p| p.trim_start_matches("post ").to_owned()).collect();
        assert_eq!(joined.join(" "), long.trim(), "nothing lost at the cuts");
        let failed = shown(vec![text("Half"), Op::Finish(Err(EngineError::NoProvider))]).await;
        let said = "post ⚠️ no LLM provider is configured for this agent";
        assert_eq!(failed, ["working None", said, "working Some(false)"]);
    }

    #[tokio::test]
    async fn an_empty_answer_shows_nothing_and_a_dropped_turn_ends_unsuccessfully() {
        assert_eq!(shown(vec![Op::Finish(Ok("  ".into()))]).await, ["working None", "working Some(true)"]);
        let settled = shown(vec![Op::Settle { message: "m9".into(), text: "⌛".into() }]).await;
        assert_eq!(settled, ["working None", "settle m9 ⌛", "working Some(false)"]);
    }
}
