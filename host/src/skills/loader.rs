//! Finds skills in `skills.paths`, loads each into the sandbox, and applies precedence.
//!
//! Paths are scanned in order and folders within a path by name; a later skill with the same
//! name replaces an earlier one, and an unavailable one (`is-available` false) removes it.
//! A broken skill is reported as a [`LoadProblem`] naming the skill, the file and the cause;
//! the others still load. Only the spec's fatal cases stop loading: an `is-available` that
//! traps, and a `startup` that fails.

use super::admit::{Candidate, Failure, admit, check_skill_name};
use super::builtin;
use super::files;
use super::manifest::Manifest;
use super::prompt::{self, Prompt};
use super::skill::{Skill, ToolSpec, split_exposed};
use crate::config::{Builtin, Grant, LoadedConfig};
use crate::sandbox::{
    CallEnv, Capabilities, HostList, LimitPolicy, ListsWatcher, McpBridge, Notifier, NotifyGrant, Sandbox,
    SkillComponent, SkillFiles, Wasm,
};
use crate::store::{MemoryStore, StateStore};
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The component file in a skill folder.
pub const WASM_FILE: &str = "skill.wasm";

/// One skill that failed to load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadProblem {
    /// The skill (its folder name when the name is unknown).
    pub skill: String,
    /// The file at fault.
    pub file: PathBuf,
    /// What is wrong.
    pub message: String,
}

impl std::fmt::Display for LoadProblem {
    /// One line, whatever the cause's text looks like: `skill validate` prints one problem per
    /// line, so a multi-line message (a compiler's, a parser's) is joined with `; `.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let message: Vec<&str> = self.message.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
        write!(f, "skill `{}`: {}: {}", self.skill, self.file.display(), message.join("; "))
    }
}

/// A problem that stops loading altogether (the spec's configuration errors).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct FatalLoadError(pub String);

/// How far loading goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadMode {
    /// Check artifacts only: call neither `is-available` nor `startup` (`skill validate`).
    Validate,
    /// Load to inspect or call directly (`skill list`, `call`): `is-available` decides
    /// inclusion; `startup`, which belongs to an engine starting to serve, does not run.
    Inspect,
    /// Load to serve: `is-available` decides inclusion, `startup` runs once per skill.
    Serve,
    /// [`LoadMode::Serve`] with only the components compiled already (in the cache): the
    /// others are not compiled but left in [`SkillSet::pending`], for a later full load, so
    /// that a server with an empty cache answers at once.
    ServeReady,
    /// [`LoadMode::Serve`] for the skills a [`LoadMode::ServeReady`] start left pending,
    /// joining those already serving, and for a reload: `startup` runs only for skills whose
    /// `startup` has not run in this loader as they are now (the same folder, component file,
    /// `skills.config` block and grant: [`Loader::startup_key`]).
    Join,
}

impl LoadMode {
    /// Whether the skills are loaded to serve (their `startup` runs).
    pub fn serves(self) -> bool {
        matches!(self, LoadMode::Serve | LoadMode::ServeReady | LoadMode::Join)
    }
}

/// The skills that loaded, and the problems of those that did not.
#[derive(Clone, Default)]
pub struct SkillSet {
    /// Loaded skills by name.
    pub skills: BTreeMap<String, Arc<Skill>>,
    /// Skills that failed to load.
    pub problems: Vec<LoadProblem>,
    /// Skills found but left out (`is-available` said no, or not in `skills.allowed`), with
    /// their tools' exposed names: a name in config naming one of them names something real.
    pub left_out: BTreeMap<String, Vec<String>>,
    /// The tools declared in config (`skills.declared`).
    pub declared: super::declared::DeclaredSet,
    /// What [`LoadMode::ServeReady`] left out because its component still has to be compiled:
    /// skill folders and built-ins by name, `declared` for the declared tools.
    pub pending: Vec<String>,
    /// The `SKILL.md` skills among [`SkillSet::pending`], with their folder and prompt (read
    /// without the component), so that an on-demand one can be listed before it joins.
    pub pending_prompts: Vec<PendingPrompt>,
    /// Where each skill pulled from a registry (`skills.oci`) came from, by skill name.
    pub origins: BTreeMap<String, super::oci::Origin>,
}

/// A `SKILL.md` skill whose component is still compiling.
#[derive(Debug, Clone)]
pub struct PendingPrompt {
    /// Its name, as it will load.
    pub name: String,
    /// Its folder.
    pub dir: PathBuf,
    /// Its `SKILL.md`.
    pub prompt: Prompt,
}

impl SkillSet {
    /// Finds a tool by its prefixed name.
    pub fn find_tool(&self, full_name: &str) -> Option<(&Arc<Skill>, &ToolSpec)> {
        let (skill, tool) = split_exposed(full_name)?;
        let skill = self.skills.get(skill)?;
        Some((skill, skill.tool(tool)?))
    }
}

/// Everything loading needs from the host.
#[derive(Clone)]
pub struct Loader {
    /// The sandbox skills load into.
    pub sandbox: Arc<Sandbox>,
    /// The config (paths, grants, skill config, limits).
    pub config: LoadedConfig,
    /// The state store.
    pub state: StateStore,
    /// The memory root (`learning.memory`), for skills granted memory.
    pub memory: MemoryStore,
    /// The MCP bridge, when MCP servers are configured.
    pub mcp: Option<Arc<dyn McpBridge>>,
    /// Who delivers the skills' own messages (the agent's chat adapters), when serving.
    pub notifier: Option<Arc<dyn Notifier>>,
    /// Who hears that a skill's lists changed (the app, which describes it again), when
    /// serving.
    pub lists: Option<Arc<dyn ListsWatcher>>,
    policy: LimitPolicy,
    /// The skills whose `startup` ran in this loader (and its clones), for [`LoadMode::Join`].
    started: Arc<parking_lot::Mutex<HashSet<String>>>,
    /// The folders `skills.oci` entries were pulled into, and where they came from.
    pub(super) pulled: Arc<parking_lot::Mutex<BTreeMap<PathBuf, super::oci::Origin>>>,
}

/// One component a load compiles: its name (for progress lines and
/// [`SkillSet::pending`]), what it belongs to, and its bytes.
struct Job<'a> {
    name: String,
    part: Part,
    wasm: Wasm<'a>,
}

/// What a compiled component belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    /// The skill folder at this index of the scan.
    Folder(usize),
    /// An embedded built-in.
    Builtin,
    /// The function runtime of declared tools.
    FunctionRuntime,
}

/// Each folder's `skill.wasm` path.
fn wasm_files(dirs: &[PathBuf]) -> Vec<PathBuf> {
    dirs.iter().map(|dir| dir.join(WASM_FILE)).collect()
}

impl Loader {
    /// A loader for `config`: an error when its state store or memory root cannot be set
    /// up (a bad `state.postgres` URL, an unreadable `sslrootcert`, memory on PostgreSQL
    /// with no database to connect to).
    pub fn new(sandbox: Arc<Sandbox>, config: LoadedConfig) -> Result<Self, crate::store::StateError> {
        let c = &config.config;
        let policy = LimitPolicy::from_config(&c.sandbox.defaults, &c.sandbox.maximums);
        let state = StateStore::from_config(&c.state, |p| config.resolve(p))?;
        let memory = MemoryStore::from_config(&config, |name| std::env::var(name).ok())?;
        let (started, pulled) = (Arc::default(), Arc::default());
        Ok(Loader { sandbox, config, state, memory, mcp: None, notifier: None, lists: None, policy, started, pulled })
    }

    /// The operator's limit policy.
    pub fn policy(&self) -> &LimitPolicy {
        &self.policy
    }

    /// Loads the built-ins `skills.builtins` names, then scans every path.
    pub async fn load_all(&self, mode: LoadMode) -> Result<SkillSet, FatalLoadError> {
        let span = tracing::info_span!(
            "load_skills",
            skillhost.skills = tracing::field::Empty,
            skillhost.problems = tracing::field::Empty,
        );
        let loaded = tracing::Instrument::instrument(self.load_all_inner(mode), span.clone()).await;
        if let Ok(set) = &loaded {
            span.record("skillhost.skills", set.skills.len());
            span.record("skillhost.problems", set.problems.len());
        }
        loaded
    }

    async fn load_all_inner(&self, mode: LoadMode) -> Result<SkillSet, FatalLoadError> {
        let (started, mut set) = (Instant::now(), SkillSet::default());
        let mut dirs = self.scan(&mut set.problems);
        // After every path: an OCI entry wins over a folder of the same name.
        dirs.extend(self.pull_oci(mode, &mut set).await);
        // What is not compiled yet: compiled now, or (`ServeReady`) left for a later load.
        let mut runtime_pending = false;
        if mode == LoadMode::ServeReady {
            let uncompiled = self.uncompiled(&dirs);
            let all = dirs.clone();
            let mut index = 0;
            dirs.retain(|_| {
                index += 1;
                !uncompiled.iter().any(|(part, _)| *part == Part::Folder(index - 1))
            });
            runtime_pending = uncompiled.iter().any(|(part, _)| *part == Part::FunctionRuntime);
            self.note_pending(&mut set, uncompiled, &all);
        } else {
            self.precompile(&dirs, mode.serves());
        }
        tracing::debug!(folders = dirs.len(), took = ?started.elapsed(), "every component compiled or found in the cache");
        // The folders load concurrently (on a cold page cache each one waits for its disk
        // reads), and are admitted in order, so that what overrides what stays as written.
        let this = Arc::new(self.clone());
        let mut loads = tokio::task::JoinSet::new();
        for (index, dir) in dirs.iter().enumerate() {
            let (this, dir) = (this.clone(), dir.clone());
            loads.spawn(async move {
                let started = Instant::now();
                let loaded = this.load_dir(&dir, mode).await;
                tracing::debug!(folder = %dir.display(), took = ?started.elapsed(), "skill folder loaded");
                (index, loaded)
            });
        }
        let mut loaded = Vec::with_capacity(dirs.len());
        while let Some(done) = loads.join_next().await {
            match done {
                Ok(done) => loaded.push(done),
                Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                Err(e) => return Err(FatalLoadError(format!("loading the skills stopped: {e}"))),
            }
        }
        loaded.sort_unstable_by_key(|(index, _)| *index);
        tracing::debug!(took = ?started.elapsed(), "every skill folder loaded");
        for ((_, loaded), dir) in loaded.into_iter().zip(&dirs) {
            let loaded = match loaded {
                Ok(Some(Candidate::Loaded(skill))) => match self.check_replaces(&skill.name, dir, &set) {
                    Ok(()) => Ok(Some(Candidate::Loaded(skill))),
                    Err(problem) => Err(Failure::Problem(problem)),
                },
                other => other,
            };
            admit(&mut set, loaded, dir)?;
        }
        self.note_origins(&mut set);
        reject_bare_collisions(&mut set);
        // A folder of a built-in's name replaces it (or, unavailable, removes it): such a
        // built-in is not loaded at all.
        for builtin in &self.config.config.skills.builtins {
            let name = builtin.name();
            if set.skills.contains_key(name) || set.left_out.contains_key(name) {
                tracing::info!(skill = name, "a skill folder replaces the built-in");
                continue;
            }
            if set.pending.iter().any(|pending| pending == name) {
                continue;
            }
            let loaded = self.load_builtin(*builtin, mode).await;
            admit(&mut set, loaded, &builtin::location(name))?;
        }
        if !runtime_pending {
            set.declared = super::declared::load(&self.config, &mut set.problems);
            super::declared::check_code(&mut set.declared, self, &mut set.problems).await;
        }
        // An agent's `skills.allowed`: the others never start.
        if let Some(allowed) = &self.config.config.skills.allowed {
            let (kept, not_allowed) = std::mem::take(&mut set.skills)
                .into_iter()
                .partition::<BTreeMap<_, _>, _>(|(name, _)| allowed.iter().any(|a| a == name));
            set.skills = kept;
            for (name, skill) in not_allowed {
                set.left_out.insert(name, skill.exposed_names());
            }
        }
        self.say_who_serves_instead(&mut set);
        if mode.serves() {
            for skill in set.skills.values() {
                let key = self.startup_key(skill);
                if mode == LoadMode::Join && self.started.lock().contains(&key) {
                    continue;
                }
                self.run_startup(skill).await?;
                self.started.lock().insert(key);
            }
        }
        tracing::debug!(skills = set.skills.len(), took = ?started.elapsed(), "skills ready");
        Ok(set)
    }

    /// What makes a skill the same one whose `startup` ran: its name, folder, component
    /// file (size and modification time; a pulled skill's folder is named by its digest),
    /// `skills.config` block and grant.
    pub fn startup_key(&self, skill: &Skill) -> String {
        let wasm = std::fs::metadata(skill.dir.join(WASM_FILE))
            .map(|m| format!("{} {:?}", m.len(), m.modified().ok()))
            .unwrap_or_default();
        let grant = self.config.config.skills.grants.get(&skill.name);
        format!("{}\n{}\n{wasm}\n{}\n{grant:?}", skill.name, skill.dir.display(), skill.config)
    }

    /// The skill folders under every path, in load order.
    fn scan(&self, problems: &mut Vec<LoadProblem>) -> Vec<PathBuf> {
        let mut dirs = Vec::new();
        for path in &self.config.config.skills.paths {
            let root = self.config.resolve(path);
            // The default `./skills` is optional (the built-ins work without it); a path the
            // operator wrote must exist.
            if path.as_os_str() == crate::config::DEFAULT_SKILLS_PATH && !root.exists() {
                continue;
            }
            dirs.extend(skill_dirs(&root, problems));
        }
        dirs
    }

    /// The components of `dirs` (and of the built-ins and the function runtime) that are not
    /// compiled yet, neither in this process nor in the cache.
    fn uncompiled(&self, dirs: &[PathBuf]) -> Vec<(Part, String)> {
        let files = wasm_files(dirs);
        let jobs = self.jobs(dirs, &files);
        let wasm: Vec<Wasm<'_>> = jobs.iter().map(|job| job.wasm).collect();
        let ready = self.sandbox.compiled(&wasm);
        let pending = jobs.into_iter().zip(ready).filter(|(_, ready)| !ready);
        pending.map(|(job, _)| (job.part, job.name)).collect()
    }

    /// Notes in `set` what is left to compile: each skill by the name it will load under
    /// (a folder's `SKILL.md` may name it), with the prompt of a `SKILL.md` one; those
    /// `skills.allowed` leaves out are not waited for.
    fn note_pending(&self, set: &mut SkillSet, uncompiled: Vec<(Part, String)>, dirs: &[PathBuf]) {
        let allowed =
            |name: &str| self.config.config.skills.allowed.as_ref().is_none_or(|a| a.iter().any(|s| s == name));
        let max_prompt = self.config.config.skills.max_prompt_bytes;
        for (part, folder) in uncompiled {
            let Part::Folder(index) = part else {
                set.pending.push(folder);
                continue;
            };
            let dir = &dirs[index];
            // A prompt that cannot be read is the full load's to report.
            let prompt = prompt::load(dir, max_prompt).ok().flatten();
            let name = match prompt.as_ref().and_then(|p| p.name.as_deref()) {
                Some(name) => prompt::slugify(name),
                None => prompt::folder_name(&folder),
            };
            if !allowed(&name) {
                continue;
            }
            if let Some(prompt) = prompt.filter(|p| p.file == "SKILL.md") {
                set.pending_prompts.push(PendingPrompt { name: name.clone(), dir: dir.clone(), prompt });
            }
            set.pending.push(name);
        }
    }

    /// Compiles every component of the skills `skills.paths` and `skills.builtins` name that
    /// is not in the cache yet (what [`LoadMode::ServeReady`] left pending), saying so on
    /// stderr. Blocking: call it off the async runtime.
    pub fn compile_all(&self) {
        let dirs = self.scan(&mut Vec::new());
        self.precompile(&dirs, true);
    }

    /// Compiles every component not in the cache yet, in parallel, before the skills load one
    /// by one (a cold start), saying on stderr which skill compiles when `tell` (when serving:
    /// `skill validate` prints one line per problem and nothing else).
    fn precompile(&self, dirs: &[PathBuf], tell: bool) {
        let files = wasm_files(dirs);
        let jobs: Vec<(String, Wasm<'_>)> =
            self.jobs(dirs, &files).into_iter().map(|job| (job.name, job.wasm)).collect();
        self.sandbox.precompile(&jobs, &|line| {
            if tell {
                eprintln!("{line}");
            }
        });
    }

    /// Every component a load of `dirs` compiles (`files`: their [`wasm_files`]): the
    /// embedded built-ins no folder replaces, the function runtime when declared tools need
    /// it, and each folder's `skill.wasm`.
    fn jobs<'a>(&self, dirs: &[PathBuf], files: &'a [PathBuf]) -> Vec<Job<'a>> {
        let folder = |dir: &PathBuf| dir.file_name().map(|n| prompt::folder_name(&n.to_string_lossy()));
        let folders: std::collections::BTreeSet<String> = dirs.iter().filter_map(folder).collect();
        let mut jobs = Vec::new();
        for builtin in &self.config.config.skills.builtins {
            // A folder of its name replaces it (see `load_all`).
            if folders.contains(builtin.name()) {
                continue;
            }
            if let Some(embedded) = builtin::embedded(builtin.name()) {
                jobs.push(Job { name: builtin.name().into(), part: Part::Builtin, wasm: Wasm::Bytes(embedded.wasm) });
            }
        }
        if let (true, Ok(wasm)) = (super::declared::wants_runtime(&self.config), builtin::FUNCTION_RUNTIME) {
            let name = super::declared::DECLARED.to_string();
            jobs.push(Job { name, part: Part::FunctionRuntime, wasm: Wasm::Bytes(wasm) });
        }
        for (index, (dir, file)) in dirs.iter().zip(files).enumerate() {
            if file.is_file() {
                let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                jobs.push(Job { name, part: Part::Folder(index), wasm: Wasm::File(file) });
            }
        }
        jobs
    }

    /// Loads a built-in skill: the native shell, or a component embedded in the binary.
    async fn load_builtin(&self, which: Builtin, mode: LoadMode) -> Result<Option<Candidate>, Failure> {
        let name = which.name();
        let problem = |message: String| {
            Failure::Problem(LoadProblem { skill: name.into(), file: builtin::location(name), message })
        };
        // A grant pinned to an artifact never holds for the built-in.
        self.check_pin(name, &builtin::location(name), &Manifest::default()).map_err(problem)?;
        if which == Builtin::Shell {
            let skill = builtin::shell(self.skill_config(name)).map_err(problem)?;
            return Ok(Some(Candidate::Loaded(Box::new(skill))));
        }
        let Some(embedded) = builtin::embedded(name) else {
            let why = builtin::MISSING.unwrap_or("unknown reason");
            return Err(problem(format!(
                "this skillhost binary has no embedded `{name}` skill ({why}); use a skills folder instead"
            )));
        };
        let manifest = Manifest::parse(embedded.manifest).map_err(problem)?;
        let prompt = builtin::prompt(embedded.prompt);
        let skill = self.new_skill(name, builtin::location(name), prompt);
        // The memory built-in is the spec's memory: the operator's memory root is its own
        // unless the operator says otherwise in `skills.grants.memory`. No built-in gets
        // network access the operator did not grant.
        let default_grant = Grant { memory: which == Builtin::Memory, ..Grant::default() };
        self.instantiate(skill, &manifest, Wasm::Bytes(embedded.wasm), mode, Some(default_grant)).await
    }

    /// Loads and checks one skill folder without running its hooks (`skill build`).
    pub async fn load_one(&self, dir: &Path) -> Result<Skill, LoadProblem> {
        self.one_folder(dir, LoadMode::Validate).await
    }

    /// Loads one skill folder again as serving does (its `is-available` asked, its
    /// `startup` not run): a skill that said its lists changed, described anew.
    pub async fn relist(&self, dir: &Path) -> Result<Skill, LoadProblem> {
        self.one_folder(dir, LoadMode::Join).await
    }

    /// One skill folder loaded in `mode`, or why not.
    async fn one_folder(&self, dir: &Path, mode: LoadMode) -> Result<Skill, LoadProblem> {
        let unnamed =
            |message: String| LoadProblem { skill: dir.display().to_string(), file: dir.to_path_buf(), message };
        match self.load_dir(dir, mode).await {
            Ok(Some(Candidate::Loaded(skill))) => Ok(*skill),
            Ok(Some(Candidate::Unavailable(name))) => Err(unnamed(format!("skill `{name}` is not available"))),
            Ok(None) => Err(unnamed("not a skill folder: no prompt.md or SKILL.md".into())),
            Err(Failure::Problem(problem)) => Err(problem),
            Err(Failure::Fatal(e)) => Err(unnamed(e.0)),
        }
    }

    /// The function runtime (`host/runtime/function`), embedded in the binary, that runs the
    /// code of declared `function` and `code_execution` records: no capability at all (no
    /// memory, state, network, environment, MCP or notify, whatever the grants say), the
    /// limits of its manifest (a 5 s deadline) within the operator's maximums.
    pub async fn function_runtime(&self) -> Result<Skill, String> {
        const NAME: &str = super::declared::DECLARED;
        let wasm = builtin::FUNCTION_RUNTIME.map_err(|why| format!("this skillhost binary has none ({why})"))?;
        let manifest = Manifest::parse(builtin::FUNCTION_RUNTIME_MANIFEST)?;
        let component = self.sandbox.load(wasm).map_err(|e| e.to_string())?;
        let caps = Capabilities {
            skill: NAME.into(),
            memory: None,
            state: None,
            state_scope: Default::default(),
            state_ttl: Duration::ZERO,
            http_requested: HostList::new(Vec::<String>::new()),
            http_granted: HostList::new(Vec::<String>::new()),
            mcp: None,
            env: Vec::new(),
            notify: NotifyGrant { asked: false, granted: Vec::new(), notifier: None },
            files: None,
            lists: None,
        };
        let env = CallEnv { caps: Arc::new(caps), limits: self.policy.for_skill(&manifest.limits) };
        let (defs, info, _) = component.describe(&env).await.map_err(|e| e.to_string())?.value;
        let tools = defs.into_iter().map(|def| ToolSpec::new(NAME, def.into())).collect::<Result<Vec<_>, _>>()?;
        let location = builtin::location("function runtime");
        let skill = Skill::new(NAME.into(), location, builtin::prompt(""), serde_json::json!({}));
        Ok(skill.with_component(component, env, tools, info.into()))
    }

    /// Loads one skill folder. `Ok(None)`: not a skill folder.
    async fn load_dir(&self, dir: &Path, mode: LoadMode) -> Result<Option<Candidate>, Failure> {
        let folder = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let problem = |file: &str, message: String| {
            Failure::Problem(LoadProblem { skill: folder.clone(), file: dir.join(file), message })
        };
        let max_prompt = self.config.config.skills.max_prompt_bytes;
        let prompt = prompt::load(dir, max_prompt).map_err(|e| problem(e.file, e.message))?;
        let wasm_path = dir.join(WASM_FILE);
        let has_wasm = wasm_path.is_file();
        let has_source =
            ["Cargo.toml", "app.py", "tools.py", "app.js", "package.json"].iter().any(|f| dir.join(f).is_file());
        let Some(prompt) = prompt else {
            if has_wasm || has_source {
                return Err(problem("prompt.md", "missing: a skill needs prompt.md or SKILL.md".into()));
            }
            return Ok(None);
        };
        let name = prompt.name.as_deref().map(prompt::slugify).unwrap_or_else(|| prompt::folder_name(&folder));
        let problem = |file: &str, message: String| {
            Failure::Problem(LoadProblem { skill: name.clone(), file: dir.join(file), message })
        };
        let source = if prompt.name.is_some() { "its `name`, slugified" } else { "the folder's name" };
        check_skill_name(&name).map_err(|e| problem(prompt.file, format!("{e} (the name is {source})")))?;
        let manifest = Manifest::load(dir).map_err(|e| problem("skill.toml", e))?;
        self.check_name_claim(&name, dir).map_err(Failure::Problem)?;
        self.check_pin(&name, dir, &manifest).map_err(|e| problem("skill.toml", e))?;
        let mut skill = self.with_scripts(self.new_skill(&name, dir.to_path_buf(), prompt), &manifest)?;
        skill.mcp_names = manifest.mcp.names;
        if !has_wasm {
            if has_source {
                let fix = format!("not built: run `skillhost skill build {}`", dir.display());
                return Err(problem(WASM_FILE, fix));
            }
            if manifest.schedule.is_some() {
                let why = "[schedule] needs a component that exports `scheduled`; this skill has none";
                return Err(problem("skill.toml", why.into()));
            }
            return Ok(Some(Candidate::Loaded(Box::new(self.allowed_tools(skill)))));
        }
        let loaded = self.instantiate(skill, &manifest, Wasm::File(&wasm_path), mode, None).await?;
        Ok(loaded.map(|candidate| match candidate {
            Candidate::Loaded(skill) => Candidate::Loaded(Box::new(self.allowed_tools(*skill))),
            other => other,
        }))
    }

    /// `skill` with the tools its `SKILL.md`'s `allowed-tools` pre-approves, when the
    /// operator honours it (`skills.honour_allowed_tools`).
    fn allowed_tools(&self, mut skill: Skill) -> Skill {
        if self.config.config.skills.honour_allowed_tools {
            skill.preapproved = super::agent_skills::preapproved(&skill);
        }
        skill
    }

    /// A skill with no tools yet, with its `skills.config` block.
    fn new_skill(&self, name: &str, dir: PathBuf, prompt: Prompt) -> Skill {
        Skill::new(name.into(), dir, prompt, self.skill_config(name))
    }

    /// The skill's `skills.config` block (`{}` when the operator configured nothing).
    fn skill_config(&self, name: &str) -> serde_json::Value {
        self.config.config.skills.config.get(name).cloned().unwrap_or_else(|| serde_json::json!({}))
    }

    /// Compiles `wasm`, asks `is-available` (when serving) and `list-tools`, and checks the
    /// tools. `default_grant` (a built-in's) applies when the operator wrote no grant for the
    /// skill.
    async fn instantiate(
        &self,
        skill: Skill,
        manifest: &Manifest,
        wasm: Wasm<'_>,
        mode: LoadMode,
        default_grant: Option<Grant>,
    ) -> Result<Option<Candidate>, Failure> {
        let name = skill.name.clone();
        let problem = |message: String| {
            Failure::Problem(LoadProblem { skill: name.clone(), file: skill.dir.join(WASM_FILE), message })
        };
        let component = match wasm {
            Wasm::Bytes(bytes) => self.sandbox.load(bytes),
            Wasm::File(path) => self.sandbox.load_file(path),
        };
        let component = component.map_err(|e| problem(e.to_string()))?;
        let files = own_files(&skill, manifest, &wasm, mode)?;
        let env = self.call_env((&name, &skill.dir), manifest, default_grant, files);
        if mode != LoadMode::Validate && !self.check_available(&name, &component, &env, &skill.config).await? {
            return Ok(Some(Candidate::Unavailable(name)));
        }
        let described = component.describe(&env).await.map_err(|e| problem(e.to_string()))?;
        let (defs, info, served) = described.value;
        let served = super::served::Served::checked(served).map_err(&problem)?;
        let mut seen = HashSet::new();
        let mut tools = Vec::new();
        for def in defs {
            if !seen.insert(def.name.clone()) {
                return Err(problem(format!("duplicate tool name `{}`", def.name)));
            }
            tools.push(ToolSpec::new(&name, def.into()).map_err(&problem)?);
        }
        if let Some(stray) = served.client_needs.keys().find(|t| !seen.contains(*t)) {
            return Err(problem(format!("client-capabilities names tool `{stray}`, which the skill does not have")));
        }
        if let Some(stray) = served.tasks.keys().find(|t| !seen.contains(*t)) {
            return Err(problem(format!("task-support names tool `{stray}`, which the skill does not have")));
        }
        let exports_scheduled = component.hooks().names().contains(&"scheduled");
        let schedule = self.schedule(&name, manifest, exports_scheduled).map_err(problem)?;
        let mut skill = skill.with_component(component, env, tools, info.into());
        (skill.schedule, skill.served) = (schedule, served);
        Ok(Some(Candidate::Loaded(Box::new(skill))))
    }

    /// How often the skill's `scheduled` runs: its manifest's `[schedule] every`, raised to
    /// `skills.schedule_minimum` (with a warning). A schedule without the export is a
    /// problem; the export without a schedule never runs (a warning).
    fn schedule(&self, name: &str, manifest: &Manifest, exported: bool) -> Result<Option<Duration>, String> {
        let minimum = self.config.config.skills.schedule_minimum;
        match (manifest.schedule, exported) {
            (None, false) => Ok(None),
            (None, true) => {
                tracing::warn!(skill = name, "exports `scheduled` but its skill.toml has no [schedule]: it never runs");
                Ok(None)
            }
            (Some(_), false) => Err("skill.toml has [schedule], but the component does not export `scheduled`".into()),
            (Some(schedule), true) if schedule.every < minimum => {
                tracing::warn!(
                    skill = name,
                    "[schedule] every = \"{}\" is below skills.schedule_minimum; it runs every {minimum}",
                    schedule.every
                );
                Ok(Some(minimum.0))
            }
            (Some(schedule), true) => Ok(Some(schedule.every.0)),
        }
    }

    /// The spec's `is-available`: absent means available; a trap is fatal, with no details.
    async fn check_available(
        &self,
        name: &str,
        component: &SkillComponent,
        env: &CallEnv,
        config: &serde_json::Value,
    ) -> Result<bool, Failure> {
        match component.is_available(env, config).await {
            None => Ok(true),
            Some(Ok(outcome)) => Ok(outcome.value),
            Some(Err(e)) => {
                tracing::debug!(skill = name, "is-available failed: {e}");
                Err(Failure::Fatal(FatalLoadError(format!(
                    "configuration error: skill `{name}`: its is-available hook failed; fix the skill or remove it"
                ))))
            }
        }
    }

    async fn run_startup(&self, skill: &Skill) -> Result<(), FatalLoadError> {
        let Some((component, env)) = skill.component() else { return Ok(()) };
        match component.startup(env, &skill.config).await {
            None => Ok(()),
            Some(Ok(crate::sandbox::Outcome { value: Ok(()), .. })) => {
                tracing::info!("skill `{}`: startup ran", skill.name);
                Ok(())
            }
            Some(Ok(outcome)) => {
                Err(FatalLoadError(format!("skill `{}`: startup failed: {}", skill.name, outcome.value.unwrap_err())))
            }
            Some(Err(e)) => Err(FatalLoadError(format!("skill `{}`: startup failed: {e}", skill.name))),
        }
    }

    /// The capabilities and limits of a skill: what its manifest asks for and the operator
    /// grants, both.
    pub(super) fn call_env(
        &self,
        (name, dir): (&str, &Path),
        manifest: &Manifest,
        default_grant: Option<Grant>,
        files: Option<SkillFiles>,
    ) -> CallEnv {
        let config = &self.config.config;
        let written = self.written_grant(name, dir);
        // A built-in left at its default grant is the default, not a mistake worth a warning
        // on every start.
        let quiet = written.is_none() && default_grant.is_some();
        let grant = written.or(default_grant).unwrap_or_default();
        let asked = &manifest.capabilities;
        if asked.memory && !grant.memory && !quiet {
            tracing::warn!(skill = name, "asks for memory; not granted (skills.grants.{name}.memory)");
        }
        if asked.notify && grant.notify.is_empty() && !quiet {
            tracing::warn!(skill = name, "asks for notify; no destinations granted (skills.grants.{name}.notify)");
        }
        if !asked.notify && !grant.notify.is_empty() {
            tracing::warn!(
                skill = name,
                "skills.grants.{name}.notify is set, but the skill's manifest does not ask for notify: it cannot send"
            );
        }
        if !asked.http_hosts.is_empty() && grant.http_hosts.is_empty() && !quiet {
            tracing::warn!(skill = name, "asks for HTTP; no hosts granted (skills.grants.{name}.http_hosts)");
        }
        let env = granted_env(name, &asked.env, &grant.env, quiet);
        let caps = Capabilities {
            skill: name.to_string(),
            memory: (asked.memory && grant.memory).then(|| self.memory.clone()),
            state: Some(self.state.clone()),
            state_scope: asked.state,
            state_ttl: Duration::from_secs(config.skills.state_ttl_seconds),
            http_requested: HostList::new(asked.http_hosts.clone()),
            http_granted: HostList::new(grant.http_hosts),
            mcp: self.mcp.clone(),
            env,
            notify: NotifyGrant { asked: asked.notify, granted: grant.notify.clone(), notifier: self.notifier.clone() },
            files,
            lists: self.lists.clone(),
        };
        CallEnv { caps: Arc::new(caps), limits: self.policy.for_skill(&manifest.limits) }
    }
}

/// The skill's own files when its manifest asks (`files = "self"`): a folder skill's
/// distributable files, copied for its component ([`files::stage`]); only listed, for what
/// they refuse, when nothing will run (`LoadMode::Validate`). A built-in has no folder.
fn own_files(
    skill: &Skill,
    manifest: &Manifest,
    wasm: &Wasm<'_>,
    mode: LoadMode,
) -> Result<Option<SkillFiles>, Failure> {
    if manifest.capabilities.files.is_none() || matches!(wasm, Wasm::Bytes(_)) {
        return Ok(None);
    }
    let staged = match mode {
        LoadMode::Validate => files::distributable(&skill.dir).map(|set| {
            files::warn_refused(&skill.name, &set);
            None
        }),
        _ => files::stage(&skill.name, &skill.dir).map(Some),
    };
    staged.map_err(|e| {
        let message = format!("files = \"self\": {e}");
        Failure::Problem(LoadProblem { skill: skill.name.clone(), file: skill.dir.join("skill.toml"), message })
    })
}

/// The variables `asked` (the manifest) and `granted` (the operator) both name, with their
/// values in skillhost's environment now (a variable that is not set stays unset). Values
/// are never logged: they are often credentials.
fn granted_env(skill: &str, asked: &[String], granted: &[String], quiet: bool) -> Vec<(String, String)> {
    let mut env = Vec::new();
    for name in asked {
        if !granted.contains(name) {
            if !quiet {
                tracing::warn!(skill, "asks for environment variable {name}; not granted (skills.grants.{skill}.env)");
            }
            continue;
        }
        match std::env::var(name) {
            Ok(value) => env.push((name.clone(), value)),
            Err(_) => tracing::debug!(skill, "environment variable {name} is granted but not set"),
        }
    }
    env
}

/// Skills that serve their tools to MCP clients under bare names (`[mcp] names = "bare"`)
/// may not share one, nor their prompts (a full name, `<skill>__<tool>`, never equals a bare one: names
/// have no `__`): every skill involved fails to load, its problem naming the others.
fn reject_bare_collisions(set: &mut SkillSet) {
    let mut owners: BTreeMap<(&str, &str), Vec<&str>> = BTreeMap::new();
    for skill in set.skills.values().filter(|s| s.mcp_names == super::manifest::McpNames::Bare) {
        let tools =
            skill.tools.iter().map(|t| t.name.as_str()).chain(skill.scripts.iter().map(|s| s.spec.name.as_str()));
        for tool in tools {
            owners.entry(("tools", tool)).or_default().push(&skill.name);
        }
        for prompt in &skill.served.prompts {
            owners.entry(("prompts", &prompt.name)).or_default().push(&skill.name);
        }
    }
    let mut problems = Vec::new();
    for ((kind, name), skills) in owners.iter().filter(|(_, skills)| skills.len() > 1) {
        for skill in skills {
            let others: Vec<String> = skills.iter().filter(|s| *s != skill).map(|s| format!("`{s}`")).collect();
            let message = format!(
                "[mcp] names = \"bare\": MCP clients would see two {kind} named `{name}` (skills `{skill}` and {})",
                others.join(", ")
            );
            problems.push((skill.to_string(), message));
        }
    }
    for (skill, message) in problems {
        let file = set.skills.get(&skill).map(|s| s.dir.join("skill.toml")).unwrap_or_default();
        set.skills.remove(&skill);
        set.problems.push(LoadProblem { skill, file, message });
    }
}

/// The sub-folders of `root`, sorted by name. A missing root is a problem, not a crash.
fn skill_dirs(root: &Path, problems: &mut Vec<LoadProblem>) -> Vec<PathBuf> {
    let entries = match std::fs::read_dir(root) {
        Ok(entries) => entries,
        Err(e) => {
            problems.push(LoadProblem {
                skill: "*".into(),
                file: root.to_path_buf(),
                message: format!("cannot read skills path: {e}"),
            });
            return vec![];
        }
    };
    let mut dirs: Vec<PathBuf> = entries.flatten().map(|e| e.path()).filter(|p| p.is_dir()).collect();
    dirs.sort();
    dirs
}

/// The prompt of a skill, for listing.
pub fn describe_prompt(prompt: &Prompt) -> &str {
    if prompt.description.is_empty() { prompt.body.lines().next().unwrap_or("") } else { &prompt.description }
}
