//! What the chat adapters (Slack, Telegram) share: a person's message becomes a turn whose
//! progress, answer, approvals and questions appear in the conversation it came from.
//!
//! A platform implements [`Platform`] (post, edit, ask with buttons, settle a prompt, show
//! that it is working); [`Chat`] does the rest: it starts a turn per message (turns of one
//! conversation run in order: the engine's channel lock), routes a reply to the question
//! pending in that conversation, takes a click's decision (first decision wins, through
//! [`crate::broker`]), and runs each turn's [`ChatTurn`], the turn's event sink and
//! counterpart in one. The answer streams into one message edited at a bounded rate
//! ([`Platform::EDIT_EVERY`]), split at the platform's size limit; tool activity shows as
//! `→ tool` / `✓ tool 12 ms` lines in a status message, as the terminal shows them.

pub mod text;

use super::ask;
use super::outbox::Deliver;
use super::present::Descriptions;
use super::runs::{Origin, Recorder, Runs};
use crate::broker::{Broker, DecideError, Entry, Kind, Orphan, Outcome as Resolution, Scope, Watch, Who};
use crate::config::Destination;
use crate::engine::checkpoint::Checkpoint;
use crate::engine::desk::Desk;
use crate::engine::gate::new_id;
use crate::engine::{ApprovalOutcome, Counterpart, Engine, EngineError, EngineEvent, EventSink, TurnRequest};
use crate::llm::ToolDecl;
use crate::tools::{CONFIRMATION_CHALLENGE, CallScope, Level, ToolCall, ToolInfo, ToolOutcome, ToolSource};
use parking_lot::Mutex;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Weak};
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

    /// Who may decide this bot's approvals and answer its questions (its `approvers`, as
    /// the platform's user ids); empty: anyone the platform lets decide.
    fn approvers(&self) -> Vec<String> {
        Vec::new()
    }

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
    /// Where the turns' approvals and questions wait.
    broker: Arc<Broker>,
    /// The bot, among replicas ([`Platform::scope`]).
    scope: String,
    /// The surface its entries record: `<adapter>:<scope>`.
    surface: String,
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
        // With a durable broker (the state in PostgreSQL), turns left waiting by a replica
        // that is gone are resumed here.
        let broker = engine.broker();
        let scope = platform.scope();
        let surface = scope.replacen(' ', ":", 1);
        let durable = broker.durable();
        let chat = Arc::new_cyclic(|this| Chat {
            platform,
            engine,
            broker,
            scope,
            surface,
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
        if durable {
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
            let user = message.user_id.clone().unwrap_or_default();
            if let Some(id) = chat.question_in(&key, &user).await
                && chat.answer(&id, message.text.trim(), &user).await.is_ok()
            {
                return;
            }
            chat.turn(message).await
        });
    }

    /// The approval pending in conversation `key` whose prompt is message `prompt`, when
    /// another replica asked it (a turn written down): a reply to that prompt decides it.
    pub async fn approval_prompted_elsewhere(&self, key: &str, prompt: &str) -> Option<String> {
        self.broker.approval_prompted(&self.scope, &self.conversation(key), prompt).await
    }

    /// Conversation `key` of this bot, as entries name it (apart from every other bot's and
    /// the API's channels).
    fn conversation(&self, key: &str) -> String {
        format!("{} {key}", self.scope)
    }

    /// `user` of this bot's platform, as the broker knows deciders.
    fn who<'a>(&'a self, user: &'a str) -> Who<'a> {
        Who { agent: self.engine.agent(), surface: Some(&self.surface), user }
    }

    /// The question conversation `key` waits on that `user` may answer: asked here, or, on
    /// a shared store, by any replica.
    async fn question_in(&self, key: &str, user: &str) -> Option<String> {
        let here = self.asking.lock().get(key).cloned();
        if here.is_some() {
            return here;
        }
        self.broker.question_in(&self.conversation(key), self.who(user)).await
    }

    /// Whether a question waits for an answer in conversation `key`.
    pub fn asking(&self, key: &str) -> bool {
        self.asking.lock().contains_key(key)
    }

    /// Decides approval `id` from a click by `user`, whom the platform already allowed: the
    /// first decision on any replica wins; an approval of another bot or agent, or one
    /// `user` may not decide, is refused as no longer waiting.
    pub async fn decide(&self, id: &str, decision: &Decision, user: &str) -> Decided {
        let (taken, challenge) = match decision {
            Decision::Approve => (crate::broker::Decision::Approve(None), None),
            Decision::Deny => (crate::broker::Decision::Deny, None),
            Decision::Confirm(typed) => (crate::broker::Decision::Approve(Some(typed.trim().to_owned())), Some(typed)),
        };
        let approved = !matches!(taken, crate::broker::Decision::Deny);
        match self.broker.decide(id, self.who(user), taken).await {
            Ok(_) => {
                // Its turn may wait on a replica that is gone: look for it at once.
                self.look.notify_one();
                Decided::Taken(approved)
            }
            Err(DecideError::Conflict(_)) => Decided::Refused("someone already decided it otherwise".into()),
            Err(DecideError::Gone) => Decided::Refused("this request is no longer waiting".into()),
            Err(DecideError::Unconfirmed) => Decided::Refused(match challenge {
                Some(_) => format!("that is not {CONFIRMATION_CHALLENGE}: the call stays waiting"),
                None => format!("type {CONFIRMATION_CHALLENGE} to run it"),
            }),
            Err(DecideError::Unavailable(e)) => {
                tracing::warn!(id, "{}: cannot record a decision: {e}", self.label);
                Decided::Refused("the decision could not be recorded; try again".into())
            }
        }
    }

    /// Whether approval `id` needs its challenge typed (a `confirm` call); `None` when it is
    /// not waiting for `user`.
    pub async fn needs_challenge(&self, id: &str, user: &str) -> Option<bool> {
        let entry = self.broker.get(id, Kind::Approval, self.who(user)).await.ok()??;
        entry.outcome.is_none().then_some(entry.challenge.is_some())
    }

    /// `user` answers question `id`.
    pub async fn answer(&self, id: &str, answer: &str, user: &str) -> Result<(), String> {
        if answer.is_empty() {
            return Err("an empty answer".into());
        }
        match self.broker.decide(id, self.who(user), crate::broker::Decision::Answer(answer.to_owned())).await {
            Ok(_) => {
                // Its turn may wait on a replica that is gone: look for it at once.
                self.look.notify_one();
                Ok(())
            }
            Err(DecideError::Conflict(_)) => Err("someone already answered it".into()),
            Err(DecideError::Unavailable(e)) => {
                tracing::warn!(id, "{}: cannot record an answer: {e}", self.label);
                Err("the answer could not be recorded; try again".into())
            }
            Err(_) => Err("this question is no longer waiting".into()),
        }
    }

    /// The choices of question `id`, while it waits for `user`.
    pub async fn choices(&self, id: &str, user: &str) -> Option<Vec<String>> {
        let entry = self.broker.get(id, Kind::Question, self.who(user)).await.ok()??;
        entry.outcome.is_none().then_some(entry.choices)
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
                self.broker.finish(&run_id).await;
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
            turn.given.lock().insert(checkpoint.waiting.clone(), resolution.clone());
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
        while !chat.turns.is_closed() {
            let Some(orphan) = chat.broker.take_orphan(&chat.scope).await else { break };
            let resumed = chat.clone();
            chat.turns.spawn(async move { resumed.resume(orphan).await });
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
        if !self.waking.lock().insert(skill.to_owned()) {
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
            chat.waking.lock().remove(&skill);
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
    /// The message that asks each approval or question, by its id.
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
            prompts: Mutex::default(),
            taken: Notify::new(),
            written_down: Default::default(),
            given: Mutex::default(),
            this: this.clone(),
        })
    }

    fn op(&self, op: Op) {
        let _ = self.ops.send(op);
    }

    /// Holds the turn's lease once its entry `id` is decided: `false` when another replica
    /// took the turn over meanwhile (then it stops here).
    async fn hold(&self, id: &str) -> bool {
        if self.chat.broker.lease(&self.run_id, id).await {
            return true;
        }
        self.taken.notify_one();
        false
    }

    /// Waits until what the turn produced so far is shown, so that a prompt comes below it.
    async fn shown(&self) {
        let (done, shown) = oneshot::channel();
        self.op(Op::Flush(done));
        let _ = shown.await;
    }

    /// The prompt that shows `entry`.
    fn prompt<'a>(entry: &'a Entry, shown: &'a Value, action: &'a str) -> Prompt<'a> {
        match entry.kind {
            Kind::Approval => Prompt::Approval {
                id: &entry.id,
                tool: shown["tool_name"].as_str().unwrap_or_default(),
                action,
                input: &shown["tool_input"],
                level: if entry.challenge.is_some() { Level::Confirm } else { Level::Approve },
                timeout: entry.expires_at.duration_since(SystemTime::now()).unwrap_or_default(),
            },
            Kind::Question => Prompt::Question {
                id: &entry.id,
                prompt: entry.prompt.as_deref().unwrap_or_default(),
                choices: &entry.choices,
            },
        }
    }

    /// The line a prompt is replaced with when its wait ended otherwise than by a person's
    /// decision here (a click shows its own); `None` to leave it.
    fn ended_line(entry: &Entry, outcome: &Resolution) -> Option<String> {
        let prompt = entry.prompt.as_deref().unwrap_or_default();
        match (entry.kind, outcome) {
            (Kind::Approval, Resolution::TimedOut) => Some("⌛ No decision in time: not run.".into()),
            (Kind::Approval, Resolution::Cancelled) => Some("🚫 Cancelled: not run.".into()),
            (Kind::Approval, _) => None,
            (Kind::Question, Resolution::Answered(answer)) => Some(format!("❓ {prompt}\n→ {answer}")),
            (Kind::Question, Resolution::TimedOut) => Some(format!("❓ {prompt}\n_(no answer in time)_")),
            (Kind::Question, _) => Some(format!("❓ {prompt}\n_(cancelled)_")),
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
            // Approvals are presented when opened ([`Counterpart::present`]) and settled when
            // their wait ends ([`Counterpart::ended`]).
            EngineEvent::ApprovalRequested { .. } | EngineEvent::ApprovalResolved { .. } => {}
        }
    }
}

#[async_trait::async_trait]
impl<P: Platform> Counterpart for ChatTurn<P> {
    fn desk(&self) -> Option<Desk> {
        let chat = &self.chat;
        let key = P::key(&self.place);
        let scope = Scope {
            agent: chat.engine.agent().to_owned(),
            surface: chat.surface.clone(),
            conversation: chat.conversation(&key),
            run_id: self.run_id.clone(),
            deciders: chat.platform.approvers(),
        };
        let watch: Weak<dyn Watch> = self.this.clone();
        let resumable = json(&self.place).ok().map(|place| (chat.scope.clone(), place));
        Some(Desk { broker: chat.broker.clone(), scope, watch: Some(watch), resumable })
    }

    /// Posts the prompt below what the turn showed so far; a question is also what a reply
    /// in the conversation answers.
    async fn present(&self, entry: &Entry, resumable: bool) -> Result<(), String> {
        self.written_down.store(resumable, std::sync::atomic::Ordering::SeqCst);
        let shown: Value = entry.presentation.as_deref().and_then(|p| serde_json::from_str(p).ok()).unwrap_or_default();
        let action = shown["safe_description"].as_str().unwrap_or_default().to_owned();
        self.shown().await;
        let message = self.chat.platform.ask(&self.place, &Self::prompt(entry, &shown, &action)).await.inspect_err(|why| {
            tracing::warn!("{}: cannot ask here: {why}", self.chat.label);
        })?;
        if resumable {
            self.chat.broker.prompted(&self.run_id, &message).await;
        }
        self.prompts.lock().insert(entry.id.clone(), message);
        if entry.kind == Kind::Question {
            self.chat.asking.lock().insert(P::key(&self.place), entry.id.clone());
        }
        Ok(())
    }

    /// Settles the prompt; a turn written down goes on only holding its lease.
    async fn ended(&self, entry: &Entry, outcome: &Resolution) -> bool {
        if entry.kind == Kind::Question {
            let key = P::key(&self.place);
            let mut asking = self.chat.asking.lock();
            if asking.get(&key) == Some(&entry.id) {
                asking.remove(&key);
            }
        }
        let written_down = self.written_down.swap(false, std::sync::atomic::Ordering::SeqCst);
        let line = Self::ended_line(entry, outcome);
        if let (Some(line), Some(message)) = (line, self.prompts.lock().remove(&entry.id)) {
            self.op(Op::Settle { message, text: line });
        }
        match outcome {
            // Decided while written down: go on only holding the turn's lease.
            _ if written_down && outcome.by_person() => self.hold(&entry.id).await,
            // Nobody decided in time: the turn goes on here, holding its lease.
            Resolution::TimedOut if written_down => {
                if let Some(turn) = self.this.upgrade() {
                    let id = entry.id.clone();
                    tokio::spawn(async move { turn.hold(&id).await });
                }
                true
            }
            _ => true,
        }
    }

    fn tools(&self) -> Option<&dyn ToolSource> {
        Some(self)
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
        let given = self.given.lock().remove(call.id);
        if let Some(resolution) = given {
            return ask::run(adapter, call.input, timeout, |_, _| async move { Some(resolution) }).await;
        }
        let checkpoint = scope.checkpoint(call.id);
        ask::run(adapter, call.input, timeout, |prompt, choices| async move {
            ask::put(self, &prompt, &choices, timeout, checkpoint).await
        })
        .await
    }
}

/// A person's decision taken elsewhere than in this conversation (the console) is shown on
/// the prompt; a click updates its own message (with who decided).
impl<P: Platform> Watch for ChatTurn<P> {
    fn decided(&self, entry: &Entry, by: &str) {
        if by != "console" {
            return;
        }
        let line = match Resolution::of(entry) {
            Some(Resolution::Approved) => "✅ Approved in the console".to_owned(),
            Some(Resolution::Denied) => "❌ Denied in the console".to_owned(),
            Some(Resolution::Answered(answer)) => {
                format!("❓ {}\n→ {answer} (answered in the console)", entry.prompt.as_deref().unwrap_or_default())
            }
            _ => return,
        };
        if let Some(message) = self.prompts.lock().remove(&entry.id) {
            self.op(Op::Settle { message, text: line });
        }
    }
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
