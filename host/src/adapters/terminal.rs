//! The terminal adapter (`skillhost chat`, `run --adapter cli`): the read–answer loop, one
//! stdin reader shared by the prompt and the approval questions, an [`EventSink`] that streams
//! the answer and shows tool calls, and a [`Counterpart`] that asks inline.

use crate::broker::{Decision, Entry, Kind, Scope};
use crate::engine::desk::Desk;
use crate::engine::{ApprovalOutcome, Counterpart, Engine, EngineEvent, EventSink, PresentError, TurnRequest};
use crate::person::{Answer, Question};
use crate::tools::{CONFIRMATION_CHALLENGE, Level};
use std::io::{BufRead, IsTerminal, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::sync::{Mutex, mpsc};

/// Lines typed on stdin. One reader for the whole session, so the prompt and an approval
/// question never race for the same line: whoever holds the lock gets the next one.
pub struct Input {
    lines: Mutex<mpsc::UnboundedReceiver<String>>,
}

impl Input {
    /// Starts the reader. A plain thread rather than `tokio::io::stdin`: a blocked read must
    /// not keep the runtime from shutting down when the session ends.
    pub fn stdin() -> Arc<Self> {
        let (tx, rx) = mpsc::unbounded_channel();
        std::thread::spawn(move || {
            let mut stdin = std::io::stdin().lock();
            loop {
                let mut line = String::new();
                match stdin.read_line(&mut line) {
                    Ok(0) | Err(_) => break, // EOF (Ctrl-D) or a closed stdin ends the session
                    Ok(_) => {
                        if tx.send(line.trim_end_matches(['\n', '\r']).to_owned()).is_err() {
                            break;
                        }
                    }
                }
            }
        });
        Arc::new(Input { lines: Mutex::new(rx) })
    }

    /// The next line; `None` at end of input.
    pub async fn line(&self) -> Option<String> {
        self.lines.lock().await.recv().await
    }
}

/// Prints a turn as it happens: answer text on stdout, tool activity on stderr (dimmed on a
/// terminal), so piping stdout keeps only what the assistant said.
pub struct Terminal {
    color: bool,
    /// The last text printed did not end with a newline.
    mid_line: AtomicBool,
    /// The text streamed during the current turn.
    streamed: parking_lot::Mutex<String>,
    /// The calls asked about, by approval id, until presented: what the prompt shows.
    asked: parking_lot::Mutex<std::collections::HashMap<String, (String, serde_json::Value, Level)>>,
}

impl Terminal {
    /// The terminal on stderr; colours only on a terminal, and never with `NO_COLOR`.
    pub fn new() -> Arc<Self> {
        let color = std::io::IsTerminal::is_terminal(&std::io::stderr()) && std::env::var_os("NO_COLOR").is_none();
        let (mid_line, streamed, asked) = (AtomicBool::new(false), Default::default(), Default::default());
        Arc::new(Terminal { color, mid_line, streamed, asked })
    }

    /// Ends the assistant's line, so what follows starts on its own.
    pub fn end_line(&self) {
        if self.mid_line.swap(false, Ordering::Relaxed) {
            println!();
        }
    }

    /// Ends a turn whose answer is `answer`. What the engine put in front of the streamed
    /// text after it streamed (the verifier's ⚠️ annotation, `<note>\n\n<answer>`) has not
    /// been seen yet, so it is shown now.
    pub fn finish(&self, answer: &str) {
        self.end_line();
        let streamed = std::mem::take(&mut *self.streamed.lock());
        if streamed.ends_with(answer) {
            return;
        }
        match answer.split_once("\n\n") {
            Some((note, rest)) if streamed.ends_with(rest) => println!("{note}"),
            _ => println!("{answer}"),
        }
    }

    /// Forgets the streamed text of a cancelled or failed turn.
    pub fn discard(&self) {
        self.end_line();
        self.streamed.lock().clear();
    }

    /// A line of tool activity or status on stderr.
    pub fn note(&self, text: &str) {
        self.end_line();
        if self.color {
            eprintln!("\x1b[2m{text}\x1b[0m");
        } else {
            eprintln!("{text}");
        }
    }

    /// Asks a question on stderr (no newline) and flushes it.
    fn ask(&self, question: &str) {
        self.end_line();
        let mut err = std::io::stderr();
        let _ = write!(err, "{question} ");
        let _ = err.flush();
    }
}

impl EventSink for Terminal {
    fn adapter(&self) -> Option<&'static str> {
        Some("cli")
    }

    fn emit(&self, event: EngineEvent) {
        match event {
            EngineEvent::TextDelta(text) => {
                let mut out = std::io::stdout().lock();
                let _ = out.write_all(text.as_bytes());
                let _ = out.flush();
                self.streamed.lock().push_str(&text);
                if !text.is_empty() {
                    self.mid_line.store(!text.ends_with('\n'), Ordering::Relaxed);
                }
            }
            EngineEvent::ToolStarted { tool_name, input, .. } => self.note(&format!("→ {tool_name} {}", short(&input))),
            // The event carries no error text; the model gets it in the tool result.
            EngineEvent::ToolCompleted { tool_name, duration, is_error, .. } => {
                let ms = duration.as_millis();
                self.note(&if is_error {
                    format!("✗ {tool_name}: error ({ms} ms)")
                } else {
                    format!("✓ {tool_name} {ms} ms")
                })
            }
            EngineEvent::ApprovalResolved { outcome: ApprovalOutcome::TimedOut, .. } => {
                self.note("(no answer in time: denied)")
            }
            EngineEvent::ApprovalRequested { approval_id, tool_name, input, level, .. } => {
                self.asked.lock().insert(approval_id, (tool_name, input, level));
            }
            EngineEvent::RoundStarted | EngineEvent::ApprovalResolved { .. } => {}
        }
    }
}

/// The input JSON on one line, cut to a readable length.
fn short(input: &serde_json::Value) -> String {
    const MAX: usize = 200;
    let text = input.to_string();
    match text.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

/// Asks the person at the terminal, reading the answer from the shared [`Input`]: the gate
/// opens each approval at the person broker (surface `terminal`), this prompts for it and
/// carries the answer there. Under `run` with the API beside it, the console may decide it
/// too; the prompt then ends.
pub struct TerminalCounterpart {
    /// Where answers are read.
    pub input: Arc<Input>,
    /// Where the question is shown.
    pub terminal: Arc<Terminal>,
    /// Where approvals are opened.
    pub desk: Desk,
    /// Who answers here (`$USER`, else `terminal`).
    pub user: String,
}

impl TerminalCounterpart {
    /// The terminal of `engine`'s conversation `channel`.
    pub fn new(engine: &Engine, channel: &str, input: Arc<Input>, terminal: Arc<Terminal>) -> Self {
        let scope = Scope::new(engine.agent(), SURFACE, channel, &format!("{SURFACE}-{channel}"));
        let user = std::env::var("USER").ok().filter(|u| !u.is_empty()).unwrap_or_else(|| SURFACE.into());
        TerminalCounterpart { input, terminal, desk: Desk::new(engine.broker(), scope), user }
    }
}

/// The surface terminal approvals record.
const SURFACE: &str = "terminal";

#[async_trait::async_trait]
impl Counterpart for TerminalCounterpart {
    fn desk(&self) -> Option<Desk> {
        Some(self.desk.clone())
    }

    /// Prompts for an approval or a question and carries the answer to the broker.
    async fn present(&self, entry: &Entry, _: bool) -> Result<(), PresentError> {
        if entry.kind == Kind::Question {
            let question =
                Question { prompt: entry.prompt.clone().unwrap_or_default(), choices: entry.choices.clone() };
            return match Counterpart::ask(self, question, Duration::ZERO).await {
                Answer::Answered(answer) => self.desk.carry(&entry.id, &self.user, Decision::Answer(answer)).await,
                _ => Err(PresentError::new(std::io::Error::other("the terminal's input ended"))),
            };
        }
        let Some((tool, input, level)) = self.terminal.asked.lock().remove(&entry.id) else { return Ok(()) };
        let input = short(&input);
        match level {
            Level::Confirm => {
                self.terminal.ask(&format!("{tool} {input}\nType {CONFIRMATION_CHALLENGE} to run {tool}:"))
            }
            _ => self.terminal.ask(&format!("Approve {tool} {input}? [y/N]")),
        }
        let decision = match self.input.line().await {
            None => {
                self.terminal.note("(end of input: cancelled)");
                return Err(PresentError::new(std::io::Error::other("the terminal's input ended")));
            }
            Some(answer) => match (level, answer.trim()) {
                (Level::Confirm, typed) if typed == CONFIRMATION_CHALLENGE => Decision::Approve(Some(typed.to_owned())),
                (Level::Confirm, _) => Decision::Deny(None),
                (_, typed) if matches!(typed.to_ascii_lowercase().as_str(), "y" | "yes") => Decision::Approve(None),
                _ => Decision::Deny(None),
            },
        };
        if decision == Decision::Deny(None) {
            self.terminal.note(&format!("✗ {tool}: denied"));
        }
        self.desk.carry(&entry.id, &self.user, decision).await
    }

    /// A question (an MCP server's elicitation) on the terminal; the answer is the next line.
    async fn ask(&self, question: Question, _timeout: Duration) -> Answer {
        let choices =
            if question.choices.is_empty() { String::new() } else { format!(" [{}]", question.choices.join(" / ")) };
        self.terminal.ask(&format!("{}{choices}", question.prompt));
        match self.input.line().await {
            Some(answer) => Answer::Answered(answer.trim().to_owned()),
            None => {
                self.terminal.note("(end of input: cancelled)");
                Answer::Cancelled
            }
        }
    }
}

/// The read–answer loop. Ends on EOF, `/exit`, `/quit` or Ctrl-C at the prompt; Ctrl-C during
/// a turn drops the turn's future (its history is not saved) and goes back to the prompt.
pub async fn chat(engine: &Engine, channel: &str) {
    let input = Input::stdin();
    let terminal = Terminal::new();
    let counterpart = TerminalCounterpart::new(engine, channel, input.clone(), terminal.clone());
    let interactive = std::io::stdin().is_terminal();
    let user_id = std::env::var("USER").ok().filter(|u| !u.is_empty());
    if interactive {
        eprintln!(
            "skillhost chat — /usage for the tokens used; /exit, Ctrl-D or Ctrl-C to leave; Ctrl-C during an answer cancels it."
        );
    }
    let (mut session, mut last, mut turns) = (crate::llm::Usage::default(), None, 0u32);
    loop {
        if interactive {
            eprint!("> ");
            let _ = std::io::stderr().flush();
        }
        let line = tokio::select! {
            line = input.line() => line,
            () = ctrl_c() => None,
        };
        let Some(line) = line else {
            if interactive {
                eprintln!();
            }
            return;
        };
        let message = line.trim();
        match message {
            "" => continue,
            "/exit" | "/quit" => return,
            "/usage" => {
                println!("{}", usage_report(turns, &session, last.as_ref()));
                continue;
            }
            _ => {}
        }
        let request = TurnRequest {
            channel_id: channel.to_owned(),
            user_id: user_id.clone(),
            message: message.to_owned(),
            route: Vec::new(),
            thread: None,
        };
        if let Some(usage) = answer(engine, request, &terminal, &counterpart).await {
            session += usage;
            (last, turns) = (Some(usage), turns + 1);
        }
    }
}

/// Runs one turn, its answer shown; Ctrl-C during it cancels it. The turn's usage, when
/// it answered.
async fn answer(
    engine: &Engine,
    request: TurnRequest,
    terminal: &Arc<Terminal>,
    counterpart: &TerminalCounterpart,
) -> Option<crate::llm::Usage> {
    tokio::select! {
        result = engine.run_turn(request, &**terminal, counterpart) => match result {
            Ok(result) => {
                terminal.finish(&result.text);
                if result.time_boxed {
                    terminal.note("(time budget spent: this is a wrap-up answer)");
                }
                Some(result.usage)
            }
            Err(e) => {
                terminal.discard();
                eprintln!("error: {e}");
                None
            }
        },
        () = ctrl_c() => {
            terminal.discard();
            terminal.note("(cancelled)");
            None
        }
    }
}

/// What `/usage` prints: the last turn's tokens and the session's.
fn usage_report(turns: u32, session: &crate::llm::Usage, last: Option<&crate::llm::Usage>) -> String {
    let tokens = |u: &crate::llm::Usage| format!("{} input + {} output tokens", u.input_tokens, u.output_tokens);
    match last {
        None => "no answer yet in this session: 0 tokens".to_owned(),
        Some(last) => {
            let answers = if turns == 1 { "1 answer".to_owned() } else { format!("{turns} answers") };
            format!("last answer: {}; this session ({answers}): {}", tokens(last), tokens(session))
        }
    }
}

/// Resolves on Ctrl-C; never, when the signal cannot be watched (rather than at once).
async fn ctrl_c() {
    if tokio::signal::ctrl_c().await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// The terminal as an adapter of `skillhost run`: one agent's chat on channel `cli`. Its
/// session is the process's: when it ends (EOF, `/exit`), the process stops; Ctrl-C cancels
/// a turn, as in `skillhost chat`, rather than stopping the other adapters.
pub struct TerminalAdapter {
    engine: Arc<Engine>,
    agent: Option<String>,
}

impl TerminalAdapter {
    /// The terminal for `engine` (of the agent `agent`, if named).
    pub fn new(engine: Arc<Engine>, agent: Option<String>) -> Self {
        TerminalAdapter { engine, agent }
    }
}

#[async_trait::async_trait]
impl super::Adapter for TerminalAdapter {
    fn describe(&self) -> String {
        match &self.agent {
            Some(agent) => format!("the terminal (agent `{agent}`)"),
            None => "the terminal".into(),
        }
    }

    fn ends_the_process(&self) -> bool {
        true
    }

    async fn serve(self: Box<Self>, _stop: super::Stop) -> anyhow::Result<()> {
        chat(&self.engine, "cli").await;
        Ok(())
    }
}
