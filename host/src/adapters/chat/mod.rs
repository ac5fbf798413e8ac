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

mod run;
mod show;
pub mod text;
mod turn;

use super::outbox::Deliver;
use super::present::Descriptions;
use super::runs::Runs;
pub use crate::broker::Decision;
use crate::broker::{Broker, DecideError, Kind, Who};
use crate::config::Destination;
use crate::engine::Engine;
use crate::tools::{CONFIRMATION_CHALLENGE, Level};
use parking_lot::Mutex;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Weak};
use std::time::Duration;
use tokio::sync::Notify;

pub use turn::ChatTurn;

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
    async fn ask(&self, place: &Self::Place, prompt: &Prompt<'_>) -> Result<String, ChatError>;

    /// Replaces a prompt (buttons and all) with the line saying how it ended.
    async fn settle(&self, place: &Self::Place, id: &str, markdown: &str);

    /// Posts a skill's message (the `notify` import) as a new message in conversation `id`
    /// (a Slack channel, a Telegram chat), split at [`Platform::LIMIT`] and guarded like an
    /// answer. Returns the message as a woken turn's incoming message (no user; on Slack, in
    /// the message's thread), or why it was not posted.
    async fn notify(&self, id: &str, markdown: &str) -> Result<Incoming<Self::Place>, ChatError>;
}

/// What a chat platform could not do.
#[derive(Debug, thiserror::Error)]
pub enum ChatError {
    /// The conversation is one this bot does not write to (a chat not allowed, an external
    /// channel, an id naming no conversation): why.
    #[error("{0}")]
    NotHere(String),
    /// Nothing to post.
    #[error("the text is empty")]
    Empty,
    /// The platform refused the call, or could not be reached.
    #[error(transparent)]
    Platform(Box<dyn std::error::Error + Send + Sync>),
}

/// Why a person's answer to a question was not taken (said to them as it is).
#[derive(Debug, thiserror::Error)]
pub enum AnswerError {
    /// Nothing was answered.
    #[error("an empty answer")]
    Empty,
    /// Another answer came first.
    #[error("someone already answered it")]
    Taken,
    /// The answer does not fit the question's form; it stays open.
    #[error("{0}")]
    Invalid(String),
    /// The store could not record it.
    #[error("the answer could not be recorded; try again")]
    Unrecorded,
    /// Answered, cancelled, expired, or not this person's to answer.
    #[error("this question is no longer waiting")]
    Gone,
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
        /// The JSON schema the answer must fit, if it has one.
        schema: Option<&'a serde_json::Value>,
    },
}

/// The longest schema shown under a question, in characters.
const SHOWN_SCHEMA: usize = 600;

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
            Prompt::Question { prompt, schema: None, .. } => format!("❓ {prompt}"),
            Prompt::Question { prompt, schema: Some(schema), .. } => {
                let mut shown = schema.to_string();
                if shown.chars().count() > SHOWN_SCHEMA {
                    shown = shown.chars().take(SHOWN_SCHEMA).chain("…".chars()).collect();
                }
                format!(
                    "❓ {prompt}\n_Reply with JSON (or plain text where a string fits) matching:_\n```\n{shown}\n```"
                )
            }
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
            tokio::spawn(run::resumer(Arc::downgrade(&chat), chat.look.clone()));
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
                && chat.answer(&id, message.text.trim(), &user, &key).await.is_ok()
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

    /// `user` of this bot's platform acting from `conversation` (as [`Chat::conversation`]
    /// names it), as the broker knows deciders: they see only what was shown there.
    fn who<'a>(&'a self, user: &'a str, conversation: &'a str) -> Who<'a> {
        Who {
            agent: self.engine.agent(),
            surface: Some(&self.surface),
            user,
            conversation: Some(conversation),
            token: None,
        }
    }

    /// The question conversation `key` waits on that `user` may answer: asked here, or, on
    /// a shared store, by any replica.
    async fn question_in(&self, key: &str, user: &str) -> Option<String> {
        let here = self.asking.lock().get(key).cloned();
        if here.is_some() {
            return here;
        }
        let conversation = self.conversation(key);
        self.broker.question_in(&conversation, self.who(user, &conversation)).await
    }

    /// Whether a question waits for an answer in conversation `key`.
    pub fn asking(&self, key: &str) -> bool {
        self.asking.lock().contains_key(key)
    }

    /// Decides approval `id` from a click by `user` in conversation `key` (a chat; on Slack a
    /// channel, whose threads it holds), whom the platform already allowed: the first decision
    /// on any replica wins; an approval of another bot or agent, one not shown in `key`, or
    /// one `user` may not decide, is refused as no longer waiting.
    pub async fn decide(&self, id: &str, decision: Decision, user: &str, key: &str) -> Decided {
        let conversation = self.conversation(key);
        let approved = !matches!(decision, Decision::Deny(_));
        let typed = matches!(decision, Decision::Approve(Some(_)));
        match self.broker.decide(id, self.who(user, &conversation), decision).await {
            // Taken before (in the console, or by another click): nothing changes.
            Ok((_, false)) => Decided::Refused("this request was already decided".into()),
            Ok(_) => {
                // Its turn may wait on a replica that is gone: look for it at once.
                self.look.notify_one();
                Decided::Taken(approved)
            }
            Err(DecideError::Conflict(_)) => Decided::Refused("someone already decided it otherwise".into()),
            Err(DecideError::Gone) => Decided::Refused("this request is no longer waiting".into()),
            Err(DecideError::Unconfirmed) => Decided::Refused(if typed {
                format!("that is not {CONFIRMATION_CHALLENGE}: the call stays waiting")
            } else {
                format!("type {CONFIRMATION_CHALLENGE} to run it")
            }),
            Err(DecideError::Invalid(why)) => Decided::Refused(why.to_string()),
            Err(DecideError::Unavailable(e)) => {
                tracing::warn!(id, "{}: cannot record a decision: {e}", self.label);
                Decided::Refused("the decision could not be recorded; try again".into())
            }
        }
    }

    /// Whether approval `id` needs its challenge typed (a `confirm` call); `None` when it is
    /// not waiting for `user` in conversation `key`.
    pub async fn needs_challenge(&self, id: &str, user: &str, key: &str) -> Option<bool> {
        let conversation = self.conversation(key);
        let entry = self.broker.get(id, Kind::Approval, self.who(user, &conversation)).await.ok()??;
        entry.outcome.is_none().then_some(entry.challenge.is_some())
    }

    /// `user` answers question `id` from conversation `key`.
    pub async fn answer(&self, id: &str, answer: &str, user: &str, key: &str) -> Result<(), AnswerError> {
        if answer.is_empty() {
            return Err(AnswerError::Empty);
        }
        let (conversation, answer) = (self.conversation(key), Decision::Answer(answer.to_owned()));
        match self.broker.decide(id, self.who(user, &conversation), answer).await {
            Ok(_) => {
                // Its turn may wait on a replica that is gone: look for it at once.
                self.look.notify_one();
                Ok(())
            }
            Err(DecideError::Conflict(_)) => Err(AnswerError::Taken),
            // It stays open: the person may answer again.
            Err(DecideError::Invalid(why)) => Err(AnswerError::Invalid(why.to_string())),
            Err(DecideError::Unavailable(e)) => {
                tracing::warn!(id, "{}: cannot record an answer: {e}", self.label);
                Err(AnswerError::Unrecorded)
            }
            Err(_) => Err(AnswerError::Gone),
        }
    }

    /// The choices of question `id`, while it waits for `user` in conversation `key`.
    pub async fn choices(&self, id: &str, user: &str, key: &str) -> Option<Vec<String>> {
        let conversation = self.conversation(key);
        let entry = self.broker.get(id, Kind::Question, self.who(user, &conversation)).await.ok()??;
        entry.outcome.is_none().then_some(entry.choices)
    }

    /// Waits for the turns still running (after the adapter stopped taking messages).
    pub async fn drain(&self) {
        self.turns.close();
        self.turns.wait().await;
    }
}

/// A skill's message: posted by the platform; with `wake`, a turn on it (one at a time per
/// skill: while the agent still works on the skill's last message, the next is posted only).
#[async_trait::async_trait]
impl<P: Platform> Deliver for Chat<P> {
    async fn deliver(&self, skill: &str, destination: &Destination, text: &str, wake: bool) -> Result<(), ChatError> {
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
