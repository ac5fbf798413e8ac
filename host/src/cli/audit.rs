//! `skillhost audit`: the head of an agent's record of approvals and questions, to keep
//! elsewhere, and the check that the record is whole ([`skillhost::broker::audit`]).

use clap::Subcommand;
use skillhost::broker::audit::{Audit, Head};
use skillhost::store::StateStore;
use std::path::Path;
use std::process::ExitCode;

/// `skillhost audit`'s commands.
#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// Print the record's head (`<seq>:<hash>`): keep it elsewhere, and check against it
    /// later with `verify --expect`.
    Head {
        /// The agent of the config's `agents` (default: the top-level agent).
        #[arg(long)]
        agent: Option<String>,
    },
    /// Walk the record from its first kept record to its head; exit 1 naming the first record
    /// changed, removed or out of place (or, with `--expect`, a head the record no longer
    /// reaches: records removed or rewritten at the tail).
    Verify {
        /// The agent of the config's `agents` (default: the top-level agent).
        #[arg(long)]
        agent: Option<String>,
        /// A head printed earlier by `audit head` (`<seq>:<hash>`).
        #[arg(long)]
        expect: Option<String>,
    },
}

/// Runs an `audit` command.
pub async fn run(command: AuditCommand, config: Option<&Path>) -> anyhow::Result<ExitCode> {
    match command {
        AuditCommand::Head { agent } => {
            println!("{}", open(config, agent.as_deref())?.head().await?);
            Ok(ExitCode::SUCCESS)
        }
        AuditCommand::Verify { agent, expect } => {
            let expected = match &expect {
                Some(text) => {
                    Some(Head::parse(text).ok_or_else(|| anyhow::anyhow!("--expect `{text}` is not <seq>:<hash>"))?)
                }
                None => None,
            };
            match open(config, agent.as_deref())?.verify(expected.as_ref()).await? {
                Ok(head) => {
                    println!("intact: {head}");
                    Ok(ExitCode::SUCCESS)
                }
                Err(broken) => {
                    eprintln!("broken: {broken}");
                    Ok(ExitCode::from(1))
                }
            }
        }
    }
}

/// The record of `agent` (none: the top-level agent) in the state store its config names.
fn open(config: Option<&Path>, agent: Option<&str>) -> anyhow::Result<Audit> {
    let loaded = super::load_config(config)?;
    let effective = match agent {
        Some(name) if loaded.config.agents.contains_key(name) => skillhost::app::for_agent(&loaded, name),
        Some(name) => {
            let names: Vec<&str> = loaded.config.agents.keys().map(String::as_str).collect();
            anyhow::bail!("no agent `{name}` in agents (configured: {})", names.join(", "))
        }
        None => loaded,
    };
    let state = StateStore::from_config(&effective.config.state, |p| effective.resolve(p))?;
    Ok(Audit::new(state, agent.unwrap_or_default(), None))
}
