//! What the chat adapters (Slack, Telegram) share: a person's message becomes a turn whose
//! progress, answer, approvals and questions appear in the conversation it came from.
//!
//! A platform implements [`Platform`] (post, edit, ask with buttons, settle a prompt, show
//! that it is working); [`Chat`] does the rest: it starts a turn per message (turns of one
//! conversation run in order: the engine's channel lock), routes a reply to the question
//! pending in that conversation, takes a click's decision (first decision wins, through
//! [`super::interactions`]), and runs each turn's [`ChatTurn`], the turn's event sink and
//! counterpart in one. The answer streams into one message edited at a bounded rate
//! ([`Platform::EDIT_EVERY`]), split at the platform's size limit; tool activity shows as
//! `→ tool` / `✓ tool 12 ms` lines in a status message, as the terminal shows them.

pub mod text;

use super::ask;
use super::interactions::{Announce, ApprovalInfo, DecideError, Interactions, Owner, QuestionInfo, Resolution};
use super::outbox::Deliver;
use super::present::{Descriptions, tool_input};
use super::runs::{Origin, Recorder, Runs};
use crate::config::Destination;
use crate::engine::checkpoint::Checkpoint;
use crate::engine::gate::new_id;
use crate::engine::{
    ApprovalOutcome, ApprovalRequest, Counterpart, Engine, EngineError, EngineEvent, EventSink, TurnRequest,
};
use crate::llm::ToolDecl;
use crate::person::{Answer, Question};
use crate::store::state::postgres::decisions::{Decided as Stored, Decisions, Entry, Kind};
use crate::store::state::postgres::waiting::{Orphan, Waiting};
use crate::tools::{CONFIRMATION_CHALLENGE, CallScope, Level, ToolCall, ToolInfo, ToolOutcome, ToolSource};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, SystemTime};
use tokio::sync::{Notify, mpsc, oneshot};

/// What a turn left waiting by a replica that stops says.
const LEFT_WAITING: &str =
    "⏸ This server is restarting. The request above still waits: once it is decided, another replica finishes this.";

/// How often a replica looks for turns that a replica gone silent left waiting, decided.
const RESUME_EVERY: Duration = Duration::from_secs(3);

/// One chat platform, as the kit drives it. Every method that talks to the platform logs its
/// own failures; the kit goes on without the message rather than failing the turn.
#[async_trait::async_trait]
pub trait Platform: Send + Sync + 'static {
    /// Where a conversation's messages go (a Slack channel and thread, a Telegram chat).
    type Place: Clone + Send + Sync + std::fmt::Debug + Serialize + DeserializeOwned + 'static;

    /// The longest message, in characters of the model's Markdown (the answer is split there).
    const LIMIT: usize;
    /// How often the message an answer streams into is edited, at most.
    const EDIT_EVERY: Duration;
    /// How often the working signal is repeated while a turn runs (Telegram's `typing` lasts
    /// five seconds); `None`: shown once.
    const WORKING_EVERY: Option<Duration>;

    /// The conversation `place` is in, as a key (free answers to a pending question).
    fn key(place: &Self::Place) -> String;

    /// Which bot this is, the same on every replica serving it (a hash of its token): the
    /// turns one replica left waiting are resumed by a replica serving the same bot.
    fn scope(&self) -> String;

    /// Posts `markdown` (converted to the platform's markup); the message's id, or `None` when
    /// it was not posted (failed, or suppressed by a guard).
    async fn post(&self, place: &Self::Place, markdown: &str) -> Option<String>;

    /// Replaces message `id`'s text with `markdown`.
    async fn edit(&self, place: &Self::Place, id: &str, markdown: &str);

    /// Shows that a turn is working (`done: None`), or that it ended (`Some(ok)`).
    async fn working(&self, place: &Self::Place, done: Option<bool>);

    /// Posts a prompt with its buttons; the message's id, or why it cannot be asked there
    /// (then the call does not run, or the question is cancelled).
    async fn ask(&self, place: &Self::Place, prompt: &Prompt<'_>) -> Result<String, String>;

    /// Replaces a prompt (buttons and all) with the line saying how it ended.
    async fn settle(&self, place: &Self::Place, id: &str, markdown: &str);

    /// Posts a skill's message (the `notify` import) as a new message in conversation `id`
    /// (a Slack channel, a Telegram chat), split at [`Platform::LIMIT`] and guarded like an
    /// answer. Returns the message as a woken turn's incoming message (no user; on Slack, in
    /// the message's thread), or why it was not posted.
    async fn notify(&self, id: &str, markdown: &str) -> Result<Incoming<Self::Place>, String>;
}

/// What a prompt asks.
#[derive(Debug)]
pub enum Prompt<'a> {
    /// A gated call: Approve / Deny, or (`confirm`) the challenge to type.
    Approval {
        /// Its id (the buttons carry it).
        id: &'a str,
        /// The prefixed tool name.
        tool: &'a str,
        /// The tool's safe description (`Action:` line).
        action: &'a str,
        /// The redacted, capped input presentation.
        input: &'a Value,
        /// `Approve` or `Confirm`.
        level: Level,
        /// How long the person has.
        timeout: Duration,
    },
    /// A question, with suggested answers as buttons; a reply answers it too.
    Question {
        /// Its id (the buttons carry it).
        id: &'a str,
        /// The question.
        prompt: &'a str,
        /// The suggested answers.
        choices: &'a [String],
    },
}

impl Prompt<'_> {
    /// The prompt as Markdown text: what the platforms show above their buttons.
    pub fn markdown(&self) -> String {
        match self {
            Prompt::Approval { tool, action, input, level, timeout, .. } => {
                let input = serde_json::to_string_pretty(input).unwrap_or_default();
                let ask = match level {
                    Level::Confirm => format!("*Confirm* `{tool}`: type `{CONFIRMATION_CHALLENGE}` to run it"),
                    _ => format!("*Approve* `{tool}`?"),
                };
                format!("{ask}\nAction: {action}\n```\n{input}\n```\n_{} s to decide_", timeout.as_secs())
            }
            Prompt::Question { prompt, .. } => format!("❓ {prompt}"),
        }
    }
}

/// A person's message, as a platform hands it to [`Chat::incoming`].
#[derive(Debug, Clone)]
pub struct Incoming<P> {
    /// Where to answer.
    pub place: P,
    /// The engine channel (the platform's channel or chat id).
    pub channel_id: String,
    /// The thread, on platforms that have them.
    pub thread: Option<String>,
    /// The platform's user id (`None` for a turn a skill's message woke).
    pub user_id: Option<String>,
    /// The text, mentions of the bot removed.
    pub text: String,
    /// Route attributes for the turn's tools (`slack.thread_ts`, ...).
    pub route: Vec<(String, String)>,
}

/// A decision taken from a click (or a reply, or a modal).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// The Approve button.
    Approve,
    /// The Deny button.
    Deny,
    /// The challenge typed (a `confirm` call).
    Confirm(String),
}

/// How a decision ended, for the reply to the person who took it.
#[derive(Debug)]
pub enum Decided {
    /// Taken: the call runs (`true`) or not.
    Taken(bool),
    /// Refused, the request staying open; the reason, for the person.
    Refused(String),
}

/// One chat adapter's shared state: the platform, the engine, what waits on people.
pub struct Chat<P: Platform> {
    /// The platform.
    pub platform: Arc<P>,
    engine: Arc<Engine>,
    interactions: Arc<Interactions>,
    /// The bot, among replicas ([`Platform::scope`]).
    scope: String,
    /// Asks the resumer to look for turns to resume now (a decision was just taken).
    look: Arc<Notify>,
    /// The question each conversation waits on, for answers typed as replies.
    asking: Mutex<HashMap<String, String>>,
    descriptions: Arc<Descriptions>,
    /// The agent's recent runs, where each turn is recorded for the console.
    runs: Arc<Runs>,
    /// The platform's name there (`slack`, `telegram`).
    adapter: &'static str,
    /// Turns running, so that a stop waits for them.
    turns: tokio_util::task::TaskTracker,
    /// Names the adapter in logs (`slack (agent ops)`).
    label: String,
    /// The skills whose woken turn still runs (one at a time per skill).
    waking: Mutex<HashSet<String>>,
    this: Weak<Chat<P>>,
}

impl<P: Platform> Chat<P> {
    /// The kit for `platform` serving `engine`.
    pub fn new(
        platform: Arc<P>,
        engine: Arc<Engine>,
        label: String,
        runs: Arc<Runs>,
        adapter: &'static str,
    ) -> Arc<Self> {
        let descriptions = Arc::new(Descriptions::live(engine.clone()));
        // With the state in PostgreSQL, approvals and questions are decided on any replica,
        // and turns left waiting by a replica that is gone are resumed here.
        let interactions = Interactions::for_store(engine.history().state());
        let scope = platform.scope();
        let shared = interactions.shared().is_some();
        let chat = Arc::new_cyclic(|this| Chat {
            platform,
            engine,
            interactions,
            scope,
            look: Arc::default(),
            asking: Mutex::default(),
            descriptions,
            runs,
            adapter,
            turns: tokio_util::task::TaskTracker::new(),
            label,
            waking: Mutex::default(),
            this: this.clone(),
        });
        if shared {
            tokio::spawn(resumer(Arc::downgrade(&chat), chat.look.clone()));
        }
        chat
    }

    /// The kit as the outbox reaches it (the `notify` import's messages).
    pub fn delivery(&self) -> Weak<dyn Deliver> {
        self.this.clone()
    }

    /// The engine (its state store keeps the adapters' bookkeeping).
    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    /// A person's message: the answer to the question pending in its conversation, or else
    /// a new turn (run in the background).
    pub fn incoming(self: &Arc<Self>, message: Incoming<P::Place>) {
        let chat = self.clone();
        self.turns.spawn(async move {
            let key = P::key(&message.place);
            if let Some(id) = chat.question_in(&key).await
                && chat.answer(&id, message.text.trim()).await.is_ok()
            {
                return;
            }
            chat.turn(message).await
        });
    }

    /// The approval pending in conversation `key` whose prompt is message `prompt`, when
    /// another replica asked it (a turn written down): a reply to that prompt decides it.
    pub async fn approval_prompted_elsewhere(&self, key: &str, prompt: &str) -> Option<String> {
        let shared = self.interactions.shared()?;
        shared.approval_prompted(&self.scope, &self.conversation(key), prompt).await.unwrap_or_else(|e| {
            tracing::debug!("{}: cannot look for the approval a reply answers: {e}", self.label);
            None
        })
    }

    /// Conversation `key` of this bot, as the shared database names it (apart from every
    /// other bot's and the API's channels).
    fn conversation(&self, key: &str) -> String {
        format!("{} {key}", self.scope)
    }

    /// The question conversation `key` waits on: asked here, or, on a shared store, by
    /// any replica.
    async fn question_in(&self, key: &str) -> Option<String> {
        let here = self.asking.lock().unwrap_or_else(|p| p.into_inner()).get(key).cloned();
        if here.is_some() {
            return here;
        }
        let shared = self.interactions.shared()?;
        shared.pending_question(&self.conversation(key)).await.unwrap_or_else(|e| {
            tracing::debug!("{}: cannot look for a pending question: {e}", self.label);
            None
        })
    }

    /// Whether a question waits for an answer in conversation `key`.
    pub fn asking(&self, key: &str) -> bool {
        self.asking.lock().unwrap_or_else(|p| p.into_inner()).contains_key(key)
    }

    /// Decides approval `id` from a click by a person the platform already allowed: here,
    /// or in the shared database, where the first decision on any replica wins.
    pub async fn decide(&self, id: &str, decision: &Decision) -> Decided {
        if let Some(shared) = self.interactions.shared() {
            return self.decide_shared(shared, id, decision).await;
        }
        let resolution = if *decision == Decision::Deny { Resolution::Denied } else { Resolution::Approved };
        let check = |info: &ApprovalInfo| match (info.challenge, decision) {
            (Some(challenge), Decision::Approve) => Err(format!("type {challenge} to run it")),
            (Some(challenge), Decision::Confirm(typed)) if typed.trim() != challenge => {
                Err(format!("that is not {challenge}: the call stays waiting"))
            }
            _ => Ok(()),
        };
        match self.interactions.approvals.decide(id, resolution.clone(), check) {
            Ok(_) => Decided::Taken(resolution == Resolution::Approved),
            Err(DecideError::Invalid(why)) => Decided::Refused(why),
            Err(DecideError::Conflict(_)) => Decided::Refused("someone already decided it otherwise".into()),
            Err(DecideError::Gone) => Decided::Refused("this request is no longer waiting".into()),
        }
    }

    async fn decide_shared(&self, shared: &Decisions, id: &str, decision: &Decision) -> Decided {
        let (outcome, typed) = match decision {
            Decision::Approve => ("approved", None),
            Decision::Deny => ("denied", None),
            Decision::Confirm(typed) => ("approved", Some(typed.trim())),
        };
        match shared.decide(Kind::Approval, id, outcome, None, typed).await {
            Ok(Stored::Won(_) | Stored::Same(_)) => {
                // Its turn may wait on a replica that is gone: look for it at once.
                self.look.notify_one();
                Decided::Taken(outcome == "approved")
            }
            Ok(Stored::Conflict(_)) => Decided::Refused("someone already decided it otherwise".into()),
            Ok(Stored::Gone) => Decided::Refused("this request is no longer waiting".into()),
            Ok(Stored::Unconfirmed) => Decided::Refused(match typed {
                Some(_) => format!("that is not {CONFIRMATION_CHALLENGE}: the call stays waiting"),
                None => format!("type {CONFIRMATION_CHALLENGE} to run it"),
            }),
            Err(e) => {
                tracing::warn!(id, "{}: cannot record a decision: {e}", self.label);
                Decided::Refused("the decision could not be recorded; try again".into())
            }
        }
    }

    /// Whether approval `id` needs its challenge typed (a `confirm` call); `None` when it is
    /// not pending.
    pub async fn needs_challenge(&self, id: &str) -> Option<bool> {
        if let Some(shared) = self.interactions.shared() {
            let entry = shared.get(Kind::Approval, id).await.ok()??;
            return entry.outcome.is_none().then_some(entry.challenge.is_some());
        }
        let entry = self.interactions.approvals.get(id)?;
        entry.outcome.is_none().then_some(entry.info.challenge.is_some())
    }

    /// Answers question `id`.
    pub async fn answer(&self, id: &str, answer: &str) -> Result<(), String> {
        if answer.is_empty() {
            return Err("an empty answer".into());
        }
        if let Some(shared) = self.interactions.shared() {
            return match shared.decide(Kind::Question, id, "answered", Some(answer), None).await {
                Ok(Stored::Won(_) | Stored::Same(_)) => {
                    // Its turn may wait on a replica that is gone: look for it at once.
                    self.look.notify_one();
                    Ok(())
                }
                Ok(Stored::Conflict(_)) => Err("someone already answered it".into()),
                Ok(_) => Err("this question is no longer waiting".into()),
                Err(e) => {
                    tracing::warn!(id, "{}: cannot record an answer: {e}", self.label);
                    Err("the answer could not be recorded; try again".into())
                }
            };
        }
        match self.interactions.questions.decide(id, Resolution::Answered(answer.to_owned()), |_| Ok(())) {
            Ok(_) => Ok(()),
            Err(DecideError::Conflict(_)) => Err("someone already answered it".into()),
            Err(_) => Err("this question is no longer waiting".into()),
        }
    }

    /// The choices of pending question `id`.
    pub async fn choices(&self, id: &str) -> Option<Vec<String>> {
        if let Some(shared) = self.interactions.shared() {
            let entry = shared.get(Kind::Question, id).await.ok()??;
            return entry.outcome.is_none().then_some(entry.choices);
        }
        self.interactions.questions.get(id).filter(|q| q.outcome.is_none()).map(|q| q.info.choices)
    }

    /// Waits for the turns still running (after the adapter stopped taking messages).
    pub async fn drain(&self) {
        self.turns.close();
        self.turns.wait().await;
    }

    async fn turn(self: Arc<Self>, message: Incoming<P::Place>) {
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
        let Orphan { waiting, approval, prompt } = orphan;
        let run_id = waiting.run_id.clone();
        let place = serde_json::from_str::<P::Place>(&waiting.place).map_err(|e| e.to_string());
        let checkpoint = serde_json::from_str::<Checkpoint>(&waiting.checkpoint).map_err(|e| e.to_string());
        let (place, checkpoint) = match (place, checkpoint) {
            (Ok(place), Ok(checkpoint)) => (place, checkpoint),
            (Err(e), _) | (_, Err(e)) => {
                tracing::error!(
                    run_id,
                    "{}: cannot resume a turn left waiting: unreadable checkpoint: {e}",
                    self.label
                );
                self.finish_shared(&run_id).await;
                return;
            }
        };
        let stored = approval.outcome.as_deref().unwrap_or("cancelled");
        tracing::info!(
            run_id,
            waited_on = approval.id,
            outcome = stored,
            "{}: resuming a turn its replica left waiting",
            self.label
        );
        let given = match approval.kind {
            Kind::Approval => Given::Decision(match stored {
                "approved" => ApprovalOutcome::Approved,
                "denied" => ApprovalOutcome::Denied(None),
                "timed_out" => ApprovalOutcome::TimedOut,
                _ => ApprovalOutcome::Cancelled,
            }),
            Kind::Question => Given::Answer(Resolution::from_stored(stored, approval.answer.as_deref())),
        };
        if let (Some(prompt), "timed_out") = (&prompt, stored) {
            let line = match approval.kind {
                Kind::Approval => "⌛ No decision in time: not run.",
                Kind::Question => "⌛ No answer in time.",
            };
            self.platform.settle(&place, prompt, line).await;
        }
        self.run(run_id, place, Begin::Resumed(Box::new(checkpoint), given)).await;
    }

    async fn run(self: Arc<Self>, run_id: String, place: P::Place, begin: Begin) {
        let (ops, queue) = mpsc::unbounded_channel();
        let presenter = tokio::spawn(present(self.platform.clone(), place.clone(), queue));
        let turn = ChatTurn::new(self.clone(), place, run_id.clone(), ops.clone());
        let channel_id = match &begin {
            Begin::Message(request) => request.channel_id.clone(),
            Begin::Resumed(checkpoint, _) => checkpoint.request.channel_id.clone(),
        };
        // A turn resumed on an answer gets it when its question is asked again.
        if let Begin::Resumed(checkpoint, Given::Answer(resolution)) = &begin {
            turn.given.lock().unwrap_or_else(|p| p.into_inner()).insert(checkpoint.waiting.clone(), resolution.clone());
        }
        let origin = Origin { run_id: run_id.clone(), channel_id, adapter: self.adapter, mode: "chat" };
        let recorder = Recorder::new(&self.runs, origin, self.descriptions.clone());
        let running = async {
            match begin {
                Begin::Message(request) => recorder.turn(&self.engine, request, &*turn, &*turn).await,
                Begin::Resumed(checkpoint, given) => {
                    let outcome = match given {
                        Given::Decision(outcome) => Some(outcome),
                        Given::Answer(_) => None,
                    };
                    recorder.resume(&self.engine, *checkpoint, outcome, &*turn, &*turn).await
                }
            }
        };
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
        match left {
            true => self.interactions.cancel_run_here(&run_id),
            false => self.interactions.cancel_run(&run_id),
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
        self.finish_shared(&run_id).await;
        let finish = match result {
            Ok(result) => Ok(result.text),
            Err(e) => {
                tracing::warn!("{}: turn failed: {e}", self.label);
                Err(e.to_string())
            }
        };
        let _ = ops.send(Op::Finish(finish));
        drop((ops, turn));
        let _ = presenter.await;
    }

    /// Forgets the turn's checkpoint in the shared database, if it has one.
    async fn finish_shared(&self, run_id: &str) {
        if let Some(shared) = self.interactions.shared()
            && let Err(e) = shared.finish(run_id).await
        {
            tracing::warn!(run_id, "{}: cannot forget the turn's checkpoint: {e}", self.label);
        }
    }
}

/// How a chat turn begins.
enum Begin {
    /// A person's message.
    Message(TurnRequest),
    /// A turn written down elsewhere, with what it waited for.
    Resumed(Box<Checkpoint>, Given),
}

/// What a written-down turn waited for, as a person gave it.
enum Given {
    /// The decision on its approval.
    Decision(ApprovalOutcome),
    /// The answer to its question (or how the question ended).
    Answer(Resolution),
}

/// Resumes, while `chat` lives and takes turns, the turns that replicas gone silent left
/// waiting on approvals since decided (or expired): every [`RESUME_EVERY`], and at once after
/// a decision here.
async fn resumer<P: Platform>(chat: Weak<Chat<P>>, look: Arc<Notify>) {
    let mut tick = tokio::time::interval(RESUME_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = look.notified() => {}
        }
        let Some(chat) = chat.upgrade() else { return };
        let Some(shared) = chat.interactions.shared().cloned() else { return };
        while !chat.turns.is_closed() {
            match shared.take_orphan(&chat.scope).await {
                Ok(Some(orphan)) => {
                    let resumed = chat.clone();
                    chat.turns.spawn(async move { resumed.resume(orphan).await });
                }
                Ok(None) => break,
                Err(e) => {
                    tracing::debug!("{}: cannot look for turns left waiting: {e}", chat.label);
                    break;
                }
            }
        }
    }
}

/// A skill's message: posted by the platform; with `wake`, a turn on it (one at a time per
/// skill: while the agent still works on the skill's last message, the next is posted only).
#[async_trait::async_trait]
impl<P: Platform> Deliver for Chat<P> {
    async fn deliver(&self, skill: &str, destination: &Destination, text: &str, wake: bool) -> Result<(), String> {
        let mut incoming = self.platform.notify(&destination.id, text).await?;
        if !wake {
            return Ok(());
        }
        let Some(chat) = self.this.upgrade() else { return Ok(()) };
        if !self.waking.lock().unwrap_or_else(|p| p.into_inner()).insert(skill.to_owned()) {
            tracing::warn!(
                skill,
                %destination,
                "{}: the agent still works on this skill's previous message: posted without waking it",
                self.label
            );
            return Ok(());
        }
        incoming.route.push(("notify.skill".into(), skill.to_owned()));
        let skill = skill.to_owned();
        self.turns.spawn(async move {
            chat.clone().turn(incoming).await;
            chat.waking.lock().unwrap_or_else(|p| p.into_inner()).remove(&skill);
        });
        Ok(())
    }
}

/// One turn in a conversation: its event sink, its counterpart, and its `human__ask`.
pub struct ChatTurn<P: Platform> {
    chat: Arc<Chat<P>>,
    place: P::Place,
    run_id: String,
    ops: mpsc::UnboundedSender<Op>,
    /// Decisions the engine will wait for, registered when the request is announced.
    waiters: Mutex<HashMap<String, oneshot::Receiver<Resolution>>>,
    /// The approval id of each gated call, and the message that asks it.
    approvals: Mutex<HashMap<String, String>>,
    prompts: Mutex<HashMap<String, String>>,
    /// Another replica took the turn over (it judged this one gone): the turn stops here.
    taken: Notify,
    /// The turn waits on an approval or question it wrote down with its checkpoint.
    written_down: std::sync::atomic::AtomicBool,
    /// The answers a resumed turn was given, by call id.
    given: Mutex<HashMap<String, Resolution>>,
    this: Weak<ChatTurn<P>>,
}

impl<P: Platform> ChatTurn<P> {
    fn new(chat: Arc<Chat<P>>, place: P::Place, run_id: String, ops: mpsc::UnboundedSender<Op>) -> Arc<Self> {
        Arc::new_cyclic(|this| ChatTurn {
            chat,
            place,
            run_id,
            ops,
            waiters: Mutex::default(),
            approvals: Mutex::default(),
            prompts: Mutex::default(),
            taken: Notify::new(),
            written_down: Default::default(),
            given: Mutex::default(),
            this: this.clone(),
        })
    }

    fn owner(&self, expires_at: SystemTime) -> Owner {
        Owner { run_id: self.run_id.clone(), channel_id: P::key(&self.place), expires_at }
    }

    fn op(&self, op: Op) {
        let _ = self.ops.send(op);
    }

    /// The shared database's entry for this turn's approval or question `id`.
    fn entry(&self, id: &str, kind: Kind, expires_at: SystemTime, challenge: Option<&str>) -> Entry {
        Entry {
            id: id.to_owned(),
            kind,
            run_id: self.run_id.clone(),
            channel_id: self.chat.conversation(&P::key(&self.place)),
            expires_at,
            challenge: challenge.map(str::to_owned),
            prompt: None,
            choices: Vec::new(),
            outcome: None,
            answer: None,
        }
    }

    /// Records approval `request` in the shared database before anyone can see its id: with
    /// the turn's checkpoint when the engine gave one, so that any replica can finish it.
    async fn record(&self, shared: &Decisions, request: &ApprovalRequest) -> Result<(), String> {
        let challenge = (request.level == Level::Confirm).then_some(CONFIRMATION_CHALLENGE);
        let entry = self.entry(&request.approval_id, Kind::Approval, request.expires_at, challenge);
        let written = match &request.checkpoint {
            Some(checkpoint) => {
                let waiting = Waiting {
                    run_id: self.run_id.clone(),
                    scope: self.chat.scope.clone(),
                    place: json(&self.place)?,
                    checkpoint: checkpoint.clone(),
                };
                let written = shared.wait_durably(&entry, &waiting).await;
                self.written_down.store(written.is_ok(), std::sync::atomic::Ordering::SeqCst);
                written
            }
            None => shared.open(&entry).await,
        };
        written.map_err(|e| format!("the approval cannot be recorded in the state database ({e})"))
    }

    /// Holds the turn's lease once its approval `id` is decided: `false` when another
    /// replica took the turn over meanwhile (then it stops here).
    async fn hold(&self, id: &str) -> bool {
        let Some(shared) = self.chat.interactions.shared() else { return true };
        match shared.lease(&self.run_id, id).await {
            Ok(true) => true,
            Ok(false) => {
                self.taken.notify_one();
                false
            }
            Err(e) => {
                // Nobody else can take it while this replica beats: go on.
                tracing::warn!(run_id = self.run_id, "{}: cannot confirm the turn's lease: {e}", self.chat.label);
                true
            }
        }
    }

    /// Waits until what the turn produced so far is shown, so that a prompt comes below it.
    async fn shown(&self) {
        let (done, shown) = oneshot::channel();
        self.op(Op::Flush(done));
        let _ = shown.await;
    }

    /// Asks a question in the conversation, waiting at most `timeout`.
    /// `checkpoint`: the turn written down, when this wait can be resumed elsewhere.
    async fn question(
        &self,
        prompt: String,
        choices: Vec<String>,
        timeout: Duration,
        checkpoint: Option<String>,
    ) -> Option<Resolution> {
        let id = new_id().ok()?;
        let expires_at = SystemTime::now() + timeout;
        let info = QuestionInfo { prompt: prompt.clone(), choices: choices.clone(), run: self.this.clone() };
        let rx = self.chat.interactions.questions.open(&id, self.owner(expires_at), info);
        if let Some(shared) = self.chat.interactions.shared() {
            let entry = Entry {
                prompt: Some(prompt.clone()),
                choices: choices.clone(),
                ..self.entry(&id, Kind::Question, expires_at, None)
            };
            let durable = checkpoint.is_some();
            let written = match checkpoint {
                Some(checkpoint) => match json(&self.place) {
                    Ok(place) => {
                        let (run_id, scope) = (self.run_id.clone(), self.chat.scope.clone());
                        let written = shared.wait_durably(&entry, &Waiting { run_id, scope, place, checkpoint }).await;
                        written.map_err(|e| e.to_string())
                    }
                    Err(e) => Err(e),
                },
                None => shared.open(&entry).await.map_err(|e| e.to_string()),
            };
            self.written_down.store(durable && written.is_ok(), std::sync::atomic::Ordering::SeqCst);
            if let Err(e) = written {
                tracing::warn!("{}: cannot record a question in the state database: {e}", self.chat.label);
                self.chat.interactions.questions.settle(&id, Resolution::Cancelled);
                return Some(Resolution::Cancelled);
            }
        }
        self.shown().await;
        let message = match self
            .chat
            .platform
            .ask(&self.place, &Prompt::Question { id: &id, prompt: &prompt, choices: &choices })
            .await
        {
            Ok(message) => {
                if let Some(shared) = self.chat.interactions.shared()
                    && self.written_down.load(std::sync::atomic::Ordering::SeqCst)
                    && let Err(e) = shared.prompted(&self.run_id, &message).await
                {
                    tracing::debug!("{}: cannot note the question's message: {e}", self.chat.label);
                }
                message
            }
            Err(why) => {
                tracing::warn!("{}: cannot ask a question here: {why}", self.chat.label);
                self.chat.interactions.questions.settle(&id, Resolution::Cancelled);
                return Some(Resolution::Cancelled);
            }
        };
        let key = P::key(&self.place);
        self.chat.asking.lock().unwrap_or_else(|p| p.into_inner()).insert(key.clone(), id.clone());
        let guard = Asking { chat: &self.chat, key, id: id.clone() };
        let resolution = match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(resolution)) => resolution,
            Ok(Err(_)) => Resolution::Cancelled,
            Err(_) => Resolution::TimedOut,
        };
        drop(guard);
        let written_down = self.written_down.swap(false, std::sync::atomic::Ordering::SeqCst);
        // Answered while written down: go on only holding the turn's lease.
        if written_down && matches!(resolution, Resolution::Answered(_)) && !self.hold(&id).await {
            return Some(Resolution::Cancelled);
        }
        self.chat.interactions.questions.settle(&id, resolution.clone());
        self.chat.interactions.settle_shared(&id, &resolution);
        let line = match &resolution {
            Resolution::Answered(answer) => format!("❓ {prompt}\n→ {answer}"),
            Resolution::TimedOut => format!("❓ {prompt}\n_(no answer within {} s)_", timeout.as_secs()),
            _ => format!("❓ {prompt}\n_(cancelled)_"),
        };
        self.op(Op::Settle { message, text: line });
        Some(resolution)
    }
}

/// Forgets the conversation's pending question when the wait ends, however it ends.
struct Asking<'a, P: Platform> {
    chat: &'a Chat<P>,
    key: String,
    id: String,
}

impl<P: Platform> Drop for Asking<'_, P> {
    fn drop(&mut self) {
        let mut asking = self.chat.asking.lock().unwrap_or_else(|p| p.into_inner());
        if asking.get(&self.key) == Some(&self.id) {
            asking.remove(&self.key);
        }
        drop(asking);
        if self.chat.interactions.questions.get(&self.id).is_some_and(|q| q.outcome.is_none()) {
            self.chat.interactions.questions.settle(&self.id, Resolution::Cancelled);
        }
    }
}

impl<P: Platform> EventSink for ChatTurn<P> {
    fn emit(&self, event: EngineEvent) {
        match event {
            EngineEvent::RoundStarted => self.op(Op::Round),
            EngineEvent::TextDelta(text) => self.op(Op::Text(text)),
            EngineEvent::ToolStarted { tool_call_id, tool_name, .. } => {
                self.op(Op::Status { id: tool_call_id, line: format!("→ `{tool_name}`") })
            }
            EngineEvent::ToolCompleted { tool_call_id, tool_name, duration, is_error, .. } => {
                let ms = duration.as_millis();
                let line = if is_error {
                    format!("✗ `{tool_name}` error ({ms} ms)")
                } else {
                    format!("✓ `{tool_name}` {ms} ms")
                };
                self.op(Op::Status { id: tool_call_id, line })
            }
            // Registered before the engine asks: a click never finds an id it cannot decide.
            EngineEvent::ApprovalRequested { approval_id, tool_call_id, level, expires_at, .. } => {
                let challenge = (level == Level::Confirm).then_some(CONFIRMATION_CHALLENGE);
                let info = ApprovalInfo { challenge, run: self.this.clone() };
                let rx = self.chat.interactions.approvals.open(&approval_id, self.owner(expires_at), info);
                self.waiters.lock().unwrap_or_else(|p| p.into_inner()).insert(approval_id.clone(), rx);
                self.approvals.lock().unwrap_or_else(|p| p.into_inner()).insert(tool_call_id, approval_id);
            }
            EngineEvent::ApprovalResolved { tool_call_id, outcome } => {
                let Some(id) = self.approvals.lock().unwrap_or_else(|p| p.into_inner()).remove(&tool_call_id) else {
                    return;
                };
                self.chat.interactions.approvals.settle(&id, resolution(&outcome));
                self.chat.interactions.settle_shared(&id, &resolution(&outcome));
                self.written_down.store(false, std::sync::atomic::Ordering::SeqCst);
                // Nobody decided in time: the turn goes on here, holding its lease.
                if matches!(outcome, ApprovalOutcome::TimedOut)
                    && let Some(turn) = self.this.upgrade()
                {
                    let id = id.clone();
                    tokio::spawn(async move { turn.hold(&id).await });
                }
                // A person's decision was shown by the click that took it.
                let line = match &outcome {
                    ApprovalOutcome::TimedOut => "⌛ No decision in time: not run.".to_owned(),
                    ApprovalOutcome::Cancelled => "🚫 Cancelled: not run.".to_owned(),
                    ApprovalOutcome::Unavailable(why) => format!("🚫 Not run: {why}"),
                    ApprovalOutcome::Approved | ApprovalOutcome::Denied(_) => return,
                };
                if let Some(message) = self.prompts.lock().unwrap_or_else(|p| p.into_inner()).remove(&id) {
                    self.op(Op::Settle { message, text: line });
                }
            }
        }
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
impl<P: Platform> Counterpart for ChatTurn<P> {
    async fn decide(&self, request: ApprovalRequest) -> ApprovalOutcome {
        let waiter = self.waiters.lock().unwrap_or_else(|p| p.into_inner()).remove(&request.approval_id);
        let Some(rx) = waiter else { return ApprovalOutcome::Cancelled };
        let timeout = request.expires_at.duration_since(SystemTime::now()).unwrap_or_default();
        let action = self.chat.descriptions.safe_description(&request.tool_name);
        let input = tool_input(&request.input);
        let prompt = Prompt::Approval {
            id: &request.approval_id,
            tool: &request.tool_name,
            action: &action,
            input: &input,
            level: request.level,
            timeout,
        };
        let shared = self.chat.interactions.shared();
        if let Some(shared) = shared
            && let Err(why) = self.record(shared, &request).await
        {
            return ApprovalOutcome::Unavailable(why);
        }
        self.shown().await;
        match self.chat.platform.ask(&self.place, &prompt).await {
            Ok(message) => {
                if let (Some(shared), Some(_)) = (shared, &request.checkpoint)
                    && let Err(e) = shared.prompted(&self.run_id, &message).await
                {
                    tracing::debug!("{}: cannot note the prompt's message: {e}", self.chat.label);
                }
                self.prompts.lock().unwrap_or_else(|p| p.into_inner()).insert(request.approval_id.clone(), message);
            }
            Err(why) => return ApprovalOutcome::Unavailable(why),
        }
        let resolution = rx.await;
        self.written_down.store(false, std::sync::atomic::Ordering::SeqCst);
        let outcome = match resolution {
            Ok(Resolution::Approved) => ApprovalOutcome::Approved,
            Ok(Resolution::Denied) => ApprovalOutcome::Denied(None),
            _ => ApprovalOutcome::Cancelled,
        };
        if request.checkpoint.is_some() && !self.hold(&request.approval_id).await {
            return ApprovalOutcome::Cancelled;
        }
        outcome
    }

    /// On a shared store, a turn waiting on an approval is written down.
    fn durable(&self) -> bool {
        self.chat.interactions.shared().is_some()
    }

    fn tools(&self) -> Option<&dyn ToolSource> {
        Some(self)
    }

    /// A question in the conversation (an MCP server's elicitation).
    async fn ask(&self, question: Question, timeout: Duration) -> Answer {
        match self.question(question.prompt, question.choices, timeout, None).await {
            Some(Resolution::Answered(answer)) => Answer::Answered(answer),
            Some(Resolution::TimedOut) => Answer::TimedOut,
            Some(_) => Answer::Cancelled,
            None => Answer::Unavailable("no question id: the OS random source failed".into()),
        }
    }
}

/// `human__ask`: the question appears in the conversation, answered by a button or a reply.
#[async_trait::async_trait]
impl<P: Platform> ToolSource for ChatTurn<P> {
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
        let adapter = self.chat.adapter;
        // A resumed turn: the answer given while it was written down.
        let given = self.given.lock().unwrap_or_else(|p| p.into_inner()).remove(call.id);
        if let Some(resolution) = given {
            return ask::run(adapter, call.input, timeout, |_, _| async move { Some(resolution) }).await;
        }
        let checkpoint = scope.checkpoint(call.id);
        ask::run(adapter, call.input, timeout, |prompt, choices| self.question(prompt, choices, timeout, checkpoint))
            .await
    }
}

/// A click updates its own message (with who decided), so there is nothing to announce.
impl<P: Platform> Announce for ChatTurn<P> {
    fn decided(&self, _approval_id: &str, _approved: bool) {}
    fn answered(&self, _question_id: &str, _answer: &str) {}
}

/// JSON for what a checkpoint holds.
fn json<T: Serialize + ?Sized>(value: &T) -> Result<String, String> {
    serde_json::to_string(value).map_err(|e| format!("the turn cannot be written down: {e}"))
}

/// What a turn shows, in order, for the presenter.
#[derive(Debug)]
enum Op {
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
    Finish(Result<String, String>),
}

/// The messages of a turn, edited at most every [`Platform::EDIT_EVERY`].
struct Shown {
    /// The current round's text.
    text: String,
    /// The current round's messages and what each shows.
    messages: Vec<(String, String)>,
    /// Tool lines by call, in order.
    status: Vec<(String, String)>,
    status_message: Option<(String, String)>,
    dirty: bool,
}

/// Shows a turn: the status message, the streamed answer, prompt outcomes.
async fn present<P: Platform>(platform: Arc<P>, place: P::Place, mut ops: mpsc::UnboundedReceiver<Op>) {
    let mut shown =
        Shown { text: String::new(), messages: Vec::new(), status: Vec::new(), status_message: None, dirty: false };
    platform.working(&place, None).await;
    let mut next_edit = tokio::time::Instant::now();
    let mut working = P::WORKING_EVERY.map(|every| tokio::time::Instant::now() + every);
    loop {
        let wake = match (shown.dirty, working) {
            (true, Some(w)) => Some(next_edit.min(w)),
            (true, None) => Some(next_edit),
            (false, w) => w,
        };
        let op = tokio::select! {
            op = ops.recv() => op,
            () = sleep_until(wake) => {
                if working.is_some_and(|w| w <= tokio::time::Instant::now()) {
                    platform.working(&place, None).await;
                    working = P::WORKING_EVERY.map(|every| tokio::time::Instant::now() + every);
                }
                if shown.dirty && next_edit <= tokio::time::Instant::now() {
                    flush(&*platform, &place, &mut shown).await;
                    next_edit = tokio::time::Instant::now() + P::EDIT_EVERY;
                }
                continue;
            }
        };
        match op {
            Some(Op::Round) => {
                flush(&*platform, &place, &mut shown).await;
                shown.text.clear();
                shown.messages.clear();
            }
            Some(Op::Text(text)) => {
                shown.text.push_str(&text);
                shown.dirty = true;
            }
            Some(Op::Status { id, line }) => {
                match shown.status.iter_mut().find(|(call, _)| *call == id) {
                    Some(entry) => entry.1 = line,
                    None => shown.status.push((id, line)),
                }
                shown.dirty = true;
            }
            Some(Op::Settle { message, text }) => platform.settle(&place, &message, &text).await,
            Some(Op::Flush(done)) => {
                flush(&*platform, &place, &mut shown).await;
                let _ = done.send(());
            }
            Some(Op::Finish(result)) => {
                let ok = result.is_ok();
                shown.text = match result {
                    Ok(answer) if answer.trim().is_empty() && shown.messages.is_empty() => String::new(),
                    Ok(answer) => answer,
                    Err(e) => format!("⚠️ {e}"),
                };
                shown.dirty = true;
                flush(&*platform, &place, &mut shown).await;
                platform.working(&place, Some(ok)).await;
                return;
            }
            None => {
                flush(&*platform, &place, &mut shown).await;
                platform.working(&place, Some(false)).await;
                return;
            }
        }
    }
}

async fn sleep_until(at: Option<tokio::time::Instant>) {
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
