//! The skills that ship inside the binary and load unless `skills.builtins` leaves them out:
//! the native [`shell`], and the `memory` and `http_checker` components from `skills/`,
//! compiled by `host/build.rs` and embedded as bytes (they run sandboxed like any other).
//!
//! They load before `skills.paths`, so a skill folder of the same name replaces one.

pub mod shell;

use super::prompt::Prompt;
use super::skill::Skill;
use std::path::PathBuf;
use std::sync::Arc;

/// A component skill embedded in the binary: its folder's files, as bytes.
#[derive(Debug, Clone, Copy)]
pub struct Embedded {
    /// The skill's name.
    pub name: &'static str,
    /// Its `prompt.md`.
    pub prompt: &'static str,
    /// Its `skill.toml`.
    pub manifest: &'static str,
    /// Its component.
    pub wasm: &'static [u8],
}

mod generated {
    use super::Embedded;
    include!(concat!(env!("OUT_DIR"), "/builtins.rs"));
}

/// Why this binary has no embedded component skills (built without the wasm toolchain, or
/// with `SKILLHOST_NO_EMBED`); `None` when it has them.
pub const MISSING: Option<&str> = generated::MISSING;

/// The function runtime's component (`host/runtime/function`), or why this binary has none.
pub const FUNCTION_RUNTIME: Result<&[u8], &str> = generated::FUNCTION_RUNTIME;
/// Its `skill.toml` (its limits).
pub const FUNCTION_RUNTIME_MANIFEST: &str = include_str!("../../../runtime/function/skill.toml");

/// The embedded component skill called `name`, when this binary has it.
pub fn embedded(name: &str) -> Option<Embedded> {
    [generated::MEMORY, generated::HTTP_CHECKER].into_iter().flatten().find(|e| e.name == name)
}

/// Where built-in skills say they come from (their `dir`).
pub fn location(name: &str) -> PathBuf {
    PathBuf::from(format!("(built in: {name})"))
}

/// The prompt of an embedded skill.
pub fn prompt(text: &str) -> Prompt {
    Prompt::prompt_md(text)
}

/// The `shell` skill configured by its `skills.config.shell` block.
pub fn shell(config: serde_json::Value) -> Result<Skill, String> {
    let settings = shell::ShellSettings::from_config(&config)?;
    let native = Arc::new(shell::Shell::new(settings));
    Skill::native(shell::NAME, location(shell::NAME), prompt(shell::PROMPT), config, native)
}
