//! `skillhost init [DIR] --lang rust|python|js`: writes a project to start from
//! ([`skillhost::skills::init`]), builds its example skill as `skill build` does, checks it
//! against the new config as `skill validate` will, and says what to run next.
//!
//! Exit codes: 0 written and built; 2 nothing written (a file exists, or DIR is a file);
//! 1 everything written but the skill not built (a missing toolchain: the message says what
//! to install, and `skill build skills/greeter` finishes the job once it is there).

use clap::Args;
use skillhost::config::LoadedConfig;
use skillhost::skills::build::{self, BuildError};
use skillhost::skills::init::{self, Project, SKILL};
use skillhost::skills::new::Lang;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct InitArgs {
    /// The folder to write (created when missing; default: the current folder).
    dir: Option<PathBuf>,
    /// The language of the example skill.
    #[arg(long, value_enum, default_value = "python")]
    lang: Lang,
    /// Never try `rustup target add` or an npm install; use what is installed.
    /// `SKILLHOST_OFFLINE` set to anything but empty, 0, false, no or off does the same.
    #[arg(long, env = "SKILLHOST_OFFLINE", action = clap::ArgAction::SetTrue, value_parser = clap::builder::FalseyValueParser::new())]
    offline: bool,
}

pub async fn run(args: InitArgs) -> anyhow::Result<ExitCode> {
    let dir = args.dir.unwrap_or_else(|| PathBuf::from("."));
    let project = match init::create(&dir, args.lang) {
        Ok(project) => project,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(ExitCode::from(2));
        }
    };
    for file in project.files.iter().chain([&project.skill_dir]) {
        println!("created {}", file.display());
    }
    if !build_example(&project, args.offline).await? || !validate(&dir, &project).await? {
        let at = dir.display();
        eprintln!(
            "every file is written; once that is fixed, finish in {at} with:\n  skillhost skill build skills/{SKILL}"
        );
        return Ok(ExitCode::from(1));
    }
    print_next(&dir);
    Ok(ExitCode::SUCCESS)
}

/// Builds the example skill as `skill build` does; false when it did not build (reported).
async fn build_example(project: &Project, offline: bool) -> anyhow::Result<bool> {
    // The toolchains run in the skill's folder: relative paths would point elsewhere.
    let skill_dir = project.skill_dir.canonicalize()?;
    let built =
        tokio::task::spawn_blocking(move || build::build(&skill_dir, offline, &mut |m| eprintln!("skillhost: {m}")))
            .await?;
    match built {
        Ok(_) => Ok(true),
        Err(BuildError::NoToolchain(help)) => {
            eprintln!("error: the example skill needs a toolchain that is not installed: {help}");
            Ok(false)
        }
        Err(BuildError::Failed(e)) => {
            eprintln!("error: {}: {e}", project.skill_dir.display());
            Ok(false)
        }
    }
}

/// Loads the built skill under the new config, as `skill validate` will (which also fills
/// the compile cache beside it, so the first `run` starts warm); false on a problem.
async fn validate(dir: &Path, project: &Project) -> anyhow::Result<bool> {
    let path = dir.join("config.yaml");
    let text = std::fs::read_to_string(&path)?;
    // The variables it names are the user's to set next: unset, they are not worth a warning.
    let (config, _) = skillhost::config::parse(&text, |name| std::env::var(name).ok())
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    let base_dir = std::path::absolute(dir)?;
    let loader = super::loader(LoadedConfig { config, base_dir, warnings: Vec::new() })?;
    match loader.load_one(&project.skill_dir.canonicalize()?).await {
        Ok(skill) => {
            println!("built {} ({} tool: {}__hello)", skill.name, skill.tools.len(), skill.name);
            Ok(true)
        }
        Err(problem) => {
            eprintln!("{problem}");
            Ok(false)
        }
    }
}

fn print_next(dir: &Path) {
    let cd = if dir == Path::new(".") { String::new() } else { format!("  cd {}\n", dir.display()) };
    println!(
        "next:\n{cd}  cp .env.example .env    # then set ANTHROPIC_API_KEY in .env (and SKILLHOST_UI_TOKEN, for the API)\n  \
         skillhost chat          # talk to the agent here; or `skillhost run` for the HTTP API on port 8080"
    );
}
