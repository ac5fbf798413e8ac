//! `skillhost skill list | validate | build | new`.

use clap::Subcommand;
use skillhost::app::names;
use skillhost::sandbox::SKILL_FOLDER;
use skillhost::skills::{LoadMode, Loader, SkillSet, ToolSpec, build, loader::describe_prompt, new as build_new};
use skillhost::store::state::StateScope;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Debug, Subcommand)]
pub enum SkillCommand {
    /// List loaded skills, their tools, approval levels, schedules and source folders, and the
    /// tools declared in config (`skills.declared`).
    List,
    /// Check every skill (prompt, manifest, component, tool schemas) without running hooks.
    Validate,
    /// Build skill folders' Rust crates or Python apps into skill.wasm and validate them.
    Build {
        /// The skill folders (default: the current directory).
        dirs: Vec<PathBuf>,
        /// Never try `rustup target add`; use an installed target or the offline path.
        /// `SKILLHOST_OFFLINE` set to anything but empty, 0, false, no or off does the same.
        #[arg(long, env = "SKILLHOST_OFFLINE", action = clap::ArgAction::SetTrue, value_parser = clap::builder::FalseyValueParser::new())]
        offline: bool,
    },
    /// Publish a built skill folder to an OCI registry (prints the manifest's digest).
    Push(super::oci::PushArgs),
    /// Fetch a published skill into a folder (prints its digest).
    Pull(super::oci::PullArgs),
    /// Write a P-256 key pair for `skill sign`: OUT.key (0600) and OUT.pub.
    Keygen {
        /// The files' path without their suffix.
        #[arg(long)]
        out: PathBuf,
    },
    /// Sign a published skill in cosign's key-based layout (`sha256-<hex>.sig`).
    Sign(super::oci::SignArgs),
    /// What NEW asks for that OLD did not: tools, approval levels, capabilities (folders or
    /// references).
    Diff {
        /// The old version: a folder or a reference.
        old: String,
        /// The new version: a folder or a reference.
        new: String,
        #[command(flatten)]
        verify: super::oci::VerifyArgs,
        #[command(flatten)]
        registry: super::oci::RegistryArgs,
    },
    /// Accept skill SKILL of MCP server SERVER (`mcp_servers.<server>.skills`) as the server
    /// serves it now: its manifest (every file's digest and size) becomes the one agents use,
    /// after the server changed it since it was first seen. Recorded in the state store.
    Accept {
        /// The server's `mcp_servers` key.
        server: String,
        /// The skill's name as the server serves it.
        skill: String,
    },
    /// Write a new skill folder (one example tool, prompt.md, a commented skill.toml) that
    /// builds with `skill build` as it is. Never overwrites.
    New {
        /// The skill's name: snake_case (`[a-z][a-z0-9_]*`), no `__`, no `_` at either end.
        name: String,
        /// The language of its code.
        #[arg(long, value_enum)]
        lang: build_new::Lang,
        /// The folder to write (default: skills/NAME).
        #[arg(long)]
        dir: Option<PathBuf>,
    },
}

pub async fn run(cmd: SkillCommand, config: Option<&Path>) -> anyhow::Result<ExitCode> {
    match cmd {
        SkillCommand::List => list(config).await,
        SkillCommand::Validate => validate(config).await,
        SkillCommand::New { name, lang, dir } => new_skill(&name, lang, dir.as_deref()),
        SkillCommand::Accept { server, skill } => super::remote_skills::accept(config, &server, &skill).await,
        SkillCommand::Push(args) => super::oci::push(args, &super::loader(super::load_config(config)?)?).await,
        SkillCommand::Pull(args) => super::oci::pull(args, &super::load_config(config)?).await,
        SkillCommand::Keygen { out } => super::oci::keygen(&out),
        SkillCommand::Sign(args) => super::oci::sign_ref(args).await,
        SkillCommand::Diff { old, new, verify, registry } => {
            let loader = super::loader(super::load_config(config)?)?;
            super::oci::diff((&old, &new), (&verify, &registry), &loader).await
        }
        SkillCommand::Build { mut dirs, offline } => {
            if dirs.is_empty() {
                dirs.push(PathBuf::from("."));
            }
            // One sandbox validates every build: an engine per folder would be wasted work.
            let loader = super::loader(super::load_config(config)?)?;
            let mut code = ExitCode::SUCCESS;
            for dir in dirs {
                if !build_dir(dir, offline, &loader).await? {
                    code = ExitCode::from(1);
                }
            }
            Ok(code)
        }
    }
}

async fn list(config: Option<&Path>) -> anyhow::Result<ExitCode> {
    let config = super::load_config(config)?;
    let overrides = config.config.human.overrides.clone();
    let resident = skillhost::app::resident_budget(&config.config.sandbox);
    let set = super::loader(config.clone())?.load_all(LoadMode::Inspect).await?;
    for skill in set.skills.values() {
        let kind = skill.kind();
        println!("{}  ({kind}, {})", skill.name, skill.dir.display());
        if let Some(origin) = set.origins.get(&skill.name) {
            println!("    source: {} ({}; {})", origin.reference, origin.digest, origin.signer);
        }
        println!("    {}", describe_prompt(&skill.prompt));
        let hooks = skill.hook_names();
        if !hooks.is_empty() {
            println!("    hooks: {}", hooks.join(", "));
        }
        if let Some(every) = skill.schedule {
            println!("    schedule: every {} (under `skillhost run`)", skillhost::config::Interval(every));
        }
        show_capabilities(skill);
        let scripts = skill.scripts.iter().map(|s| (&s.spec, Some(s.decl.script.as_str())));
        for (tool, script) in skill.tools.iter().map(|t| (t, None)).chain(scripts) {
            let level = match skill.preapproved.contains(&tool.name) && !overrides.contains_key(&tool.full_name) {
                true => "none, pre-approved by SKILL.md allowed-tools".to_owned(),
                false => level_shown(&overrides, tool),
            };
            let script = script.map(|s| format!(" (script {s})")).unwrap_or_default();
            println!("    - {}  [approval: {level}]{script}  {}", tool.full_name, first_line(&tool.description));
        }
    }
    if !set.declared.tools.is_empty() {
        println!("declared  (skills.declared in the config)");
        for tool in &set.declared.tools {
            let spec = &tool.spec;
            let level = level_shown(&overrides, spec);
            let active = if tool.active { "active" } else { "inactive" };
            let (kind, about) = (tool.skill_type.as_str(), first_line(&spec.description));
            println!("    - {}  [{kind}, approval: {level}, {active}]  {about}", spec.full_name);
        }
    }
    println!("sandbox: skills' memory kept resident between calls: {resident}");
    super::remote_skills::list(&config).await;
    report_problems(&set);
    Ok(ExitCode::SUCCESS)
}

/// A component's state scope and own files, as its manifest asks.
fn show_capabilities(skill: &skillhost::skills::Skill) {
    let Some((_, env)) = skill.component() else { return };
    let caps = &env.caps;
    match caps.state_scope {
        StateScope::Conversation => println!(
            "    state: per conversation (a key expires {} s after its last get or set)",
            caps.state_ttl.as_secs()
        ),
        StateScope::Skill => println!("    state: the skill's own (every conversation shares it)"),
    }
    if let Some(files) = &caps.files {
        println!("    files: {SKILL_FOLDER}, read-only ({} files, {} bytes)", files.files, files.bytes);
    }
}

/// A tool's approval level as `skill list` shows it, with the operator's override.
fn level_shown<V: std::fmt::Debug>(
    overrides: &std::collections::BTreeMap<String, Option<V>>,
    tool: &ToolSpec,
) -> String {
    match overrides.get(&tool.full_name) {
        Some(o) => {
            let to = o.as_ref().map(|l| format!("{l:?}").to_lowercase()).unwrap_or_else(|| "none".into());
            format!("{}, overridden to {to}", tool.approval_name())
        }
        None => tool.approval_name().to_string(),
    }
}

async fn validate(config: Option<&Path>) -> anyhow::Result<ExitCode> {
    let config = super::load_config(config)?;
    let c = config.config.clone();
    let set = super::loader(config)?.load_all(LoadMode::Validate).await?;
    report_problems(&set);
    // The names config writes, against the skills found (MCP servers are not started here,
    // so names of their tools pass).
    let mut known = names::Known::new(&c);
    known.add(&set, None);
    let unmatched = names::unmatched(&c, &known);
    let strict = names::strict(&c);
    for line in &unmatched {
        eprintln!("{}: {line}", if strict { "error" } else { "warning" });
    }
    let broken = agent_skills_rules(&set, strict);
    let problems = set.problems.len() + if strict { unmatched.len() + broken } else { 0 };
    let tools: usize =
        set.skills.values().map(|s| s.tools.len() + s.scripts.len()).sum::<usize>() + set.declared.tools.len();
    if problems == 0 {
        println!("ok: {} skills, {tools} tools", set.skills.len());
        Ok(ExitCode::SUCCESS)
    } else {
        println!("{problems} problem(s); {} skills valid", set.skills.len());
        Ok(ExitCode::from(1))
    }
}

/// Says which open Agent Skills rule each `SKILL.md` breaks (errors when `strict`); how many.
fn agent_skills_rules(set: &SkillSet, strict: bool) -> usize {
    let mut count = 0;
    for skill in set.skills.values().filter(|s| s.prompt.file == "SKILL.md") {
        let folder = skill.dir.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
        for rule in skillhost::skills::agent_skills::broken_rules(&skill.prompt, &folder) {
            eprintln!(
                "{}: skill `{}`: SKILL.md: {rule} (Agent Skills)",
                if strict { "error" } else { "warning" },
                skill.name
            );
            count += 1;
        }
    }
    count
}

fn report_problems(set: &SkillSet) {
    for problem in &set.problems {
        eprintln!("{problem}");
    }
}

/// Builds and validates one folder; false when either failed (already reported).
async fn build_dir(dir: PathBuf, offline: bool, loader: &Loader) -> anyhow::Result<bool> {
    let dir = dir.canonicalize().map_err(|e| anyhow::anyhow!("{}: {e}", dir.display()))?;
    let progress = |m: &str| eprintln!("skillhost: {m}");
    let started = std::time::Instant::now();
    let built = {
        let dir = dir.clone();
        tokio::task::spawn_blocking(move || build::build(&dir, offline, &mut |m| eprintln!("skillhost: {m}"))).await?
    };
    let wasm = match built {
        Ok(wasm) => wasm,
        Err(e) => {
            eprintln!("error: {}: {e}", dir.display());
            return Ok(false);
        }
    };
    let wasm: Vec<String> = wasm.iter().map(|w| w.display().to_string()).collect();
    let wasm = if wasm.is_empty() { "nothing to build".to_owned() } else { wasm.join(", ") };
    progress(&format!("built {wasm} in {:.1}s; validating", started.elapsed().as_secs_f64()));
    match loader.load_one(&dir).await {
        Ok(skill) => {
            let tools = skill.tools.len() + skill.scripts.len();
            println!("ok: {} ({tools} tools) -> {wasm}", skill.name);
            Ok(true)
        }
        Err(problem) => {
            eprintln!("{problem}");
            Ok(false)
        }
    }
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or("")
}

/// `skill new`: writes the folder and says what to run next.
fn new_skill(name: &str, lang: build_new::Lang, dir: Option<&Path>) -> anyhow::Result<ExitCode> {
    match build_new::create(name, lang, dir) {
        Ok(dir) => {
            println!("created {}", dir.display());
            println!(
                "next:\n  skillhost skill build {}\n  skillhost call {name}__hello '{{\"name\": \"Ada\"}}'",
                dir.display()
            );
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            eprintln!("error: {e}");
            Ok(ExitCode::from(2))
        }
    }
}
