//! Shared helpers for the integration tests: components built from source by `build.rs`,
//! skill folders made from them, and a host wired as the CLI wires it.

use skillhost::config::{self, LoadedConfig};
use skillhost::sandbox::{CallContext, Sandbox, SandboxOptions};
use skillhost::skills::{LoadMode, Loader, SkillSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

pub mod api_client;
pub mod browser;
pub mod graph_server;
pub mod llm_server;
pub mod person;
pub mod postgres;
pub mod slack_server;
pub mod telegram_server;

/// Paths of every component built from source (`HOSTILE`, `PROBE`, `HTTP_CHECKER`, ...).
pub mod guests {
    include!(concat!(env!("OUT_DIR"), "/guests.rs"));
}

/// A scratch directory holding skill folders, a memory root, a state root and a config.
pub struct Workspace {
    /// Kept alive for the test's duration.
    pub dir: tempfile::TempDir,
}

impl Default for Workspace {
    fn default() -> Self {
        Self::new()
    }
}

impl Workspace {
    /// An empty workspace.
    pub fn new() -> Self {
        Workspace { dir: tempfile::tempdir().expect("tempdir") }
    }

    /// The workspace root.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Makes `<root>/<skills_dir>/<name>/` with the component, a prompt and `skill.toml`.
    pub fn add_skill(&self, skills_dir: &str, name: &str, wasm: &str, manifest: &str) -> PathBuf {
        let dir = self.path().join(skills_dir).join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::copy(wasm, dir.join("skill.wasm")).unwrap_or_else(|e| panic!("copy {wasm}: {e}"));
        std::fs::write(dir.join("prompt.md"), format!("You can use the {name} skill.\n")).unwrap();
        if !manifest.is_empty() {
            std::fs::write(dir.join("skill.toml"), manifest).unwrap();
        }
        dir
    }

    /// Writes `config.yaml` (YAML text) and parses it.
    pub fn config(&self, yaml: &str) -> LoadedConfig {
        let path = self.path().join("config.yaml");
        std::fs::write(&path, yaml).unwrap();
        config::load(Some(&path)).unwrap_or_else(|e| panic!("config: {e}"))
    }

    /// A loader over this workspace with `yaml` as config.
    pub fn loader(&self, yaml: &str) -> Loader {
        Loader::new(sandbox(), self.config(yaml)).unwrap()
    }

    /// Loads every skill in serve mode.
    pub async fn load(&self, yaml: &str) -> SkillSet {
        self.loader(yaml).load_all(LoadMode::Serve).await.unwrap_or_else(|e| panic!("load: {e}"))
    }
}

/// Loads the skills of `ws` under `yaml` (which must configure `llm`) and builds an engine on
/// them, failing the test on any load problem.
pub async fn engine_from(ws: &Workspace, yaml: &str) -> skillhost::engine::Engine {
    let app = app_from(ws, yaml).await;
    let agent = app.agents.into_iter().next().expect("one agent");
    Arc::try_unwrap(agent.engine).unwrap_or_else(|_| panic!("the engine is not shared yet"))
}

/// An engine over `set` with `provider` (a test double), configured as `loader` is.
pub fn engine_over(
    loader: &Loader,
    set: SkillSet,
    provider: Box<dyn skillhost::llm::Provider>,
) -> skillhost::engine::Engine {
    use skillhost::tools::{SkillTools, Tools};
    let set = Arc::new(set);
    let tools = Tools::new(vec![Arc::new(SkillTools::new(set.clone()))]);
    let settings = skillhost::engine::EngineSettings::from_config(&loader.config, loader.memory.clone());
    let broker = skillhost::broker::Broker::start(&loader.state, settings.human.audit_retention());
    skillhost::engine::Engine::new(set, tools, Some(provider), settings, loader.state.clone(), broker)
}

/// Builds the app as `skillhost run` does (skills served, LLM providers required), failing
/// the test on any load problem.
pub async fn app_from(ws: &Workspace, yaml: &str) -> skillhost::app::App {
    use skillhost::app::{Agents, Options};
    app_with(ws, yaml, Options { mode: LoadMode::Serve, llm: true, agents: Agents::All }).await
}

/// Builds the app with `options`, failing the test on any load problem.
pub async fn app_with(ws: &Workspace, yaml: &str, options: skillhost::app::Options) -> skillhost::app::App {
    let app = skillhost::app::App::build(ws.config(yaml), options).await.unwrap_or_else(|e| panic!("app: {e:#}"));
    for agent in &app.agents {
        assert!(agent.problems.is_empty(), "{:?}", agent.problems);
    }
    app
}

/// Starts `command` (a shell command line) on a pseudo-terminal with util-linux `script`, in
/// `dir`, with stdin and stdout piped: what is written to stdin is typed at the terminal.
///
/// The command is `exec`ed so no shell sits between `script` and the program: a
/// non-interactive dash (the `/bin/sh` `script` falls back to) dies of the first Ctrl-C typed
/// at the terminal even when the program handles it, and `script -e` then reports 130.
pub fn spawn_on_terminal(dir: &Path, command: &str) -> std::process::Child {
    use std::process::{Command, Stdio};
    Command::new("script")
        .current_dir(dir)
        .env("SHELL", "/bin/sh")
        .args(["-qec", &format!("exec {command}"), "/dev/null"])
        .env_remove("RUST_LOG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("util-linux `script`")
}

/// Runs `command` on a pseudo-terminal typing `typed`; returns the exit code and everything
/// the terminal showed.
pub fn run_on_terminal(dir: &Path, command: &str, typed: &str) -> (i32, String) {
    use std::io::Write;
    let mut child = spawn_on_terminal(dir, command);
    child.stdin.take().unwrap().write_all(typed.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into_owned())
}

/// One sandbox for the whole test binary (each engine reserves a large pool of memory),
/// compiling into the cache `SKILLHOST_CACHE_DIR` names (the repository's `.cargo/config.toml`
/// sets one under `target/` for `cargo test`), as `skillhost` itself would: a component
/// compiled by one test binary is loaded by the next, and a new one compiles only the
/// functions no skill compiled before.
pub fn sandbox() -> Arc<Sandbox> {
    static SANDBOX: OnceLock<Arc<Sandbox>> = OnceLock::new();
    SANDBOX
        .get_or_init(|| {
            let cache_dir = skillhost::app::cache_dir_from_env();
            Arc::new(Sandbox::new(&SandboxOptions { cache_dir, ..SandboxOptions::default() }).expect("sandbox"))
        })
        .clone()
}

/// A context for a call on channel `test`.
pub fn ctx() -> CallContext {
    CallContext::standalone("test")
}

/// Parses a tool result's content as JSON, failing the test with the content otherwise.
pub fn json(content: &str) -> serde_json::Value {
    serde_json::from_str(content).unwrap_or_else(|e| panic!("not JSON ({e}): {content}"))
}

/// A minimal HTTP server on 127.0.0.1 answering every request with `status` and `body`;
/// returns its port. It serves until the process ends.
pub fn http_server(status: u16, body: &'static str) -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        use std::io::{Read, Write};
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf);
            let response = format!(
                "HTTP/1.1 {status} X\r\ncontent-length: {}\r\ncontent-type: text/plain\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(response.as_bytes());
        }
    });
    port
}
