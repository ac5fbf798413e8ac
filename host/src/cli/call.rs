//! `skillhost call <skill__tool> '<json>'`: one tool call through the engine's call path, as
//! the model's calls go: the same approval levels, overrides, promotion and tool budget.

use clap::Args;
use skillhost::app::{Agents, App, Options};
use skillhost::broker::{Decision, Entry, Kind, Scope};
use skillhost::engine::desk::Desk;
use skillhost::engine::{ApprovalOutcome, AutoApprove, Counterpart, EngineEvent, EventSink, PresentError};
use skillhost::person::{Answer, Question};
use skillhost::sandbox::CallContext;
use skillhost::skills::LoadMode;
use skillhost::tools::{CONFIRMATION_CHALLENGE, Level};
use std::io::{BufRead, IsTerminal, Write};
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Debug, Args)]
pub struct CallArgs {
    /// The tool, as the model sees it: `skill__tool`.
    tool: String,
    /// The input, a JSON object.
    #[arg(default_value = "{}")]
    input: String,
    /// Approve without asking (also for confirm-level tools).
    #[arg(long, short)]
    yes: bool,
    /// The channel id the skill sees.
    #[arg(long, default_value = "cli")]
    channel: String,
    /// The user id the skill sees.
    #[arg(long)]
    user: Option<String>,
    /// Call a tool of this agent of the config's `agents`.
    #[arg(long)]
    agent: Option<String>,
}

/// Why nobody could be asked: the call was refused before anything ran.
const NO_TERMINAL: &str = "there is no terminal to ask on; pass --yes to approve";

pub async fn run(args: CallArgs, config: Option<&Path>) -> anyhow::Result<ExitCode> {
    let input: serde_json::Value =
        serde_json::from_str(&args.input).map_err(|e| anyhow::anyhow!("the input is not valid JSON: {e}"))?;
    let config = super::load_config(config)?;
    let agents = args.agent.clone().map_or(Agents::TopLevel, Agents::One);
    let app = App::build(config, Options { mode: LoadMode::Inspect, llm: false, agents }).await?;
    let agent = app.agent();
    let engine = &agent.engine;
    if engine.tools().find(&args.tool).is_none() {
        for problem in &agent.problems {
            eprintln!("{problem}");
        }
        let known: Vec<_> = engine.tools().decls().into_iter().map(|d| d.name).collect();
        let known = if known.is_empty() { "none".into() } else { known.join(", ") };
        anyhow::bail!("no tool `{}`; loaded tools: {known}", args.tool);
    }
    let ctx = CallContext { user_id: args.user.clone(), ..CallContext::standalone(&args.channel) };
    let asking = Ask::new(engine, &args.channel, &args.tool);
    let counterpart: &dyn Counterpart = if args.yes { &AutoApprove } else { &asking };
    let call = ("cli-call".to_owned(), args.tool.clone(), input);
    // The events tell the prompt what will run: the arguments as the gate saw them (prepared).
    let record = engine.call_tool(call, &ctx, &asking, counterpart, &engine.tool_budget()).await;
    match &record.approval {
        Some(ApprovalOutcome::Unavailable(why)) => {
            anyhow::bail!("{} needs `{}` approval and {why}", args.tool, record.level.as_str())
        }
        Some(outcome) if !record.executed => {
            eprintln!("{}: {} was not run", outcome.as_str(), args.tool);
            return Ok(ExitCode::from(1));
        }
        _ => {}
    }
    println!("{}", pretty(&record.outcome.content));
    Ok(if record.outcome.is_error { ExitCode::from(1) } else { ExitCode::SUCCESS })
}

/// Asks on the terminal; refuses (rather than hangs) when there is no terminal. The gate
/// opens the approval at the person broker (surface `terminal`); this prompts for it and
/// carries the answer there.
struct Ask {
    desk: Desk,
    /// The tool called.
    tool: String,
    /// The arguments each approval asks about (prepared, as they will run), by its id.
    asked: std::sync::Mutex<std::collections::HashMap<String, serde_json::Value>>,
    user: String,
}

impl EventSink for Ask {
    fn emit(&self, event: EngineEvent) {
        if let EngineEvent::ApprovalRequested { approval_id, input, .. } = event {
            self.asked.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(approval_id, input);
        }
    }
}

impl Ask {
    fn new(engine: &skillhost::engine::Engine, channel: &str, tool: &str) -> Self {
        let desk = Desk::new(engine.broker(), Scope::new(engine.agent(), SURFACE, channel, "cli-call"));
        let user = std::env::var("USER").ok().filter(|u| !u.is_empty()).unwrap_or_else(|| SURFACE.into());
        Ask { desk, tool: tool.to_owned(), asked: Default::default(), user }
    }
}

/// The surface `call`'s approvals record.
const SURFACE: &str = "terminal";

#[async_trait::async_trait]
impl Counterpart for Ask {
    fn desk(&self) -> Option<Desk> {
        std::io::stdin().is_terminal().then(|| self.desk.clone())
    }

    fn unattended(&self) -> ApprovalOutcome {
        ApprovalOutcome::Unavailable(NO_TERMINAL.into())
    }

    async fn present(&self, entry: &Entry, _: bool) -> Result<(), PresentError> {
        let ended = || PresentError::new(std::io::Error::other("the terminal's input ended"));
        if entry.kind == Kind::Question {
            let question =
                Question { prompt: entry.prompt.clone().unwrap_or_default(), choices: entry.choices.clone() };
            let answer = match tokio::task::spawn_blocking(move || read_answer(&question)).await {
                Ok(Ok(Some(answer))) => answer,
                _ => return Err(ended()),
            };
            return self.desk.carry(&entry.id, &self.user, Decision::Answer(answer)).await;
        }
        let level = if entry.challenge.is_some() { Level::Confirm } else { Level::Approve };
        let input = self.asked.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(&entry.id);
        let (tool, input) = (self.tool.clone(), input.unwrap_or_default());
        let asked = tokio::task::spawn_blocking(move || ask(&tool, &input, level)).await;
        let decision = match asked {
            Ok(Ok(Some(true))) if level == Level::Confirm => Decision::Approve(Some(CONFIRMATION_CHALLENGE.into())),
            Ok(Ok(Some(true))) => Decision::Approve(None),
            Ok(Ok(Some(false))) => Decision::Deny(None),
            _ => return Err(ended()),
        };
        self.desk.carry(&entry.id, &self.user, decision).await
    }

    /// A question (an MCP server's elicitation) on the terminal; none without one.
    async fn ask(&self, question: Question, _timeout: Duration) -> Answer {
        if !std::io::stdin().is_terminal() {
            return Answer::Unavailable(NO_TERMINAL.into());
        }
        match tokio::task::spawn_blocking(move || read_answer(&question)).await {
            Ok(Ok(Some(answer))) => Answer::Answered(answer),
            _ => Answer::Cancelled,
        }
    }
}

/// Shows `question` on stderr and reads one line; `None` at the end of input.
fn read_answer(question: &Question) -> std::io::Result<Option<String>> {
    let mut err = std::io::stderr();
    let choices =
        if question.choices.is_empty() { String::new() } else { format!(" [{}]", question.choices.join(" / ")) };
    write!(err, "{}{choices}\n> ", question.prompt)?;
    err.flush()?;
    let mut answer = String::new();
    if std::io::stdin().lock().read_line(&mut answer)? == 0 {
        return Ok(None);
    }
    Ok(Some(answer.trim().to_owned()))
}

/// Prompts for the approval of `tool` with `input`: `None` at the end of input.
fn ask(tool: &str, input: &serde_json::Value, level: Level) -> std::io::Result<Option<bool>> {
    let mut err = std::io::stderr();
    writeln!(err, "{tool} needs approval ({}).\ninput: {input}", level.as_str())?;
    match level {
        Level::Confirm => write!(err, "Type {CONFIRMATION_CHALLENGE} to run it: ")?,
        _ => write!(err, "Approve? [y/N] ")?,
    }
    err.flush()?;
    let mut answer = String::new();
    if std::io::stdin().lock().read_line(&mut answer)? == 0 {
        return Ok(None);
    }
    let answer = answer.trim();
    Ok(Some(match level {
        Level::Confirm => answer == CONFIRMATION_CHALLENGE,
        _ => matches!(answer, "y" | "Y" | "yes"),
    }))
}

fn pretty(content: &str) -> String {
    serde_json::from_str::<serde_json::Value>(content)
        .ok()
        .and_then(|v| serde_json::to_string_pretty(&v).ok())
        .unwrap_or_else(|| content.to_string())
}
