//! `skillhost call <skill__tool> '<json>'`: one tool call through the same sandbox path the
//! engine uses, with the same approval resolution.

use clap::Args;
use skillhost::engine::approval::{self, CONFIRMATION_CHALLENGE, Level};
use skillhost::sandbox::CallContext;
use skillhost::skills::LoadMode;
use std::io::{BufRead, IsTerminal, Write};
use std::path::Path;
use std::process::ExitCode;

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
}

pub async fn run(args: CallArgs, config: Option<&Path>) -> anyhow::Result<ExitCode> {
    let input: serde_json::Value =
        serde_json::from_str(&args.input).map_err(|e| anyhow::anyhow!("the input is not valid JSON: {e}"))?;
    let config = super::load_config(config)?;
    let overrides = config.config.human.overrides.clone();
    let set = super::loader(config)?.load_all(LoadMode::Serve).await?;
    let Some((skill, tool)) = set.find_tool(&args.tool) else {
        let known: Vec<_> = set.skills.values().flat_map(|s| s.tools.iter().map(|t| t.full_name.as_str())).collect();
        for problem in &set.problems {
            eprintln!("{problem}");
        }
        anyhow::bail!(
            "no tool `{}`; loaded tools: {}",
            args.tool,
            if known.is_empty() { "none".into() } else { known.join(", ") }
        );
    };
    let caller = CallContext { user_id: args.user.clone(), ..CallContext::standalone(&args.channel) };
    let level = approval::resolve(skill, tool, &input, &caller, &overrides).await;
    if level != Level::Auto && !args.yes && !ask(&tool.full_name, &input, level)? {
        eprintln!("denied: {} was not run", tool.full_name);
        return Ok(ExitCode::from(1));
    }
    match skill.call(&tool.name, &input, &caller).await {
        Ok(outcome) => {
            println!("{}", pretty(&outcome.value.content));
            let failed = outcome.value.succeeded == Some(false);
            Ok(if failed { ExitCode::from(1) } else { ExitCode::SUCCESS })
        }
        Err(e) => {
            println!("{}", serde_json::to_string_pretty(&e.to_model_json())?);
            Ok(ExitCode::from(1))
        }
    }
}

/// Asks on the terminal; refuses (rather than hangs) when there is no terminal.
fn ask(tool: &str, input: &serde_json::Value, level: Level) -> anyhow::Result<bool> {
    if !std::io::stdin().is_terminal() {
        anyhow::bail!(
            "{tool} needs `{}` approval and there is no terminal to ask on; pass --yes to approve",
            level.as_str()
        );
    }
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
