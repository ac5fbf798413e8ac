//! `skillhost call <skill__tool> '<json>'`: one tool call through the engine's call path, as
//! the model's calls go: the same approval levels, overrides, promotion and tool budget.

use clap::Args;
use skillhost::app::{Agents, App, Options};
use skillhost::engine::{ApprovalOutcome, ApprovalRequest, AutoApprove, Counterpart, NoEvents};
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
    let counterpart: Box<dyn Counterpart> = if args.yes { Box::new(AutoApprove) } else { Box::new(Ask) };
    let call = ("cli-call".to_owned(), args.tool.clone(), input);
    let record = engine.call_tool(call, &ctx, &NoEvents, &*counterpart, &engine.tool_budget()).await;
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

/// Asks on the terminal; refuses (rather than hangs) when there is no terminal.
struct Ask;

#[async_trait::async_trait]
impl Counterpart for Ask {
    async fn decide(&self, request: ApprovalRequest) -> ApprovalOutcome {
        if !std::io::stdin().is_terminal() {
            return ApprovalOutcome::Unavailable(NO_TERMINAL.into());
        }
        let asked = tokio::task::spawn_blocking(move || ask(&request.tool_name, &request.input, request.level)).await;
        match asked {
            Ok(Ok(true)) => ApprovalOutcome::Approved,
            Ok(Ok(false)) => ApprovalOutcome::Denied(None),
            _ => ApprovalOutcome::Cancelled,
        }
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

fn ask(tool: &str, input: &serde_json::Value, level: Level) -> std::io::Result<bool> {
    let mut err = std::io::stderr();
    writeln!(err, "{tool} needs approval ({}).\ninput: {input}", level.as_str())?;
    match level {
        Level::Confirm => write!(err, "Type {CONFIRMATION_CHALLENGE} to run it: ")?,
        _ => write!(err, "Approve? [y/N] ")?,
    }
    err.flush()?;
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer)?;
    let answer = answer.trim();
    Ok(match level {
        Level::Confirm => answer == CONFIRMATION_CHALLENGE,
        _ => matches!(answer, "y" | "Y" | "yes"),
    })
}

fn pretty(content: &str) -> String {
    serde_json::from_str::<serde_json::Value>(content)
        .ok()
        .and_then(|v| serde_json::to_string_pretty(&v).ok())
        .unwrap_or_else(|| content.to_string())
}
