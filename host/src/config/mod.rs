//! The typed `config.yaml`: every section of the spec, unknown keys rejected.
//!
//! Loading reads `.env` (if present) into the environment, then parses, expanding `${VAR}`
//! references in string values as it goes (never in keys, comments or the text itself, so
//! a variable's value cannot change the config's structure; see `interp.rs` for how a value
//! that is exactly one reference is typed). Sections that later parts of the host act on (llm, engine, mcp_servers, ...)
//! are parsed and checked here already, so a typo fails at start-up, not at first use.

mod agents;
mod chat;
mod declared;
mod env;
mod interp;
mod names;
mod notify;
mod oci;
mod sections;
mod temporal;

pub use chat::{ChatId, Respond, SLACK_API, SlackSettings, TELEGRAM_API, TelegramSettings};
pub use declared::{Database, DatabaseUrl, DeclaredLevel, DeclaredRecord, SkillType};
pub use names::{check_env_name, check_name};
pub use notify::{DEFAULT_SCHEDULE_MINIMUM, Destination, Interval, Platform};
pub use oci::{OciSkill, Verify, repository_of};
pub use sections::*;
pub use temporal::{DEFAULT_ATTRIBUTE_LOOKBACK_MINUTES, TemporalGuardrails, TemporalProfile};

use std::path::{Path, PathBuf};

/// Why a configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A line of `.env` is not `NAME=value`: nothing of the file was loaded.
    #[error(
        "invalid {path}: line {line} is not NAME=value (a name of letters, digits and `_`, `=`, then the value, \
         quoted if it holds spaces or `#`); no variable of the file was loaded"
    )]
    Dotenv {
        /// The file.
        path: PathBuf,
        /// The line, from 1.
        line: usize,
    },
    /// The file is not valid YAML, or does not fit the schema (unknown key, wrong type).
    #[error("invalid config {path}: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// The parser's message, naming the key and line.
        message: String,
    },
}

/// A loaded configuration and where it came from.
#[derive(Debug, Clone)]
pub struct LoadedConfig {
    /// The parsed configuration.
    pub config: Config,
    /// The directory relative paths in the config are resolved against.
    pub base_dir: PathBuf,
    /// Warnings found while loading (unset variables), already logged.
    pub warnings: Vec<String>,
}

impl LoadedConfig {
    /// Resolves a path from the config against the config file's directory.
    pub fn resolve(&self, path: &Path) -> PathBuf {
        let path: PathBuf = path.components().filter(|c| *c != std::path::Component::CurDir).collect();
        if path.is_absolute() { path } else { self.base_dir.join(path) }
    }
}

/// Loads `path`, or the defaults when `path` is `None` and `./config.yaml` does not exist.
pub fn load(path: Option<&Path>) -> Result<LoadedConfig, ConfigError> {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    load_dotenv(&cwd.join(".env"))?;
    let path = match path {
        Some(p) => p.to_path_buf(),
        None if cwd.join("config.yaml").exists() => cwd.join("config.yaml"),
        None => {
            return Ok(LoadedConfig { config: Config::default(), base_dir: cwd, warnings: vec![] });
        }
    };
    let text = std::fs::read_to_string(&path).map_err(|source| ConfigError::Read { path: path.clone(), source })?;
    let base_dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let base_dir = if base_dir.as_os_str().is_empty() { cwd } else { base_dir };
    let (config, warnings) = parse(&text, |name| std::env::var(name).ok())
        .map_err(|message| ConfigError::Invalid { path: path.clone(), message })?;
    for w in &warnings {
        tracing::warn!("{}: {w}", path.display());
    }
    Ok(LoadedConfig { config, base_dir, warnings })
}

/// Loads `path` (`.env` in the working directory), when it exists, into the environment:
/// variables already set keep their values, and the first of two declarations wins. Every
/// line is checked first: a malformed one names the file and the line, and loads nothing
/// (not the lines before it either), so a variable is never silently left unset. The
/// line's text is not repeated: it may hold a secret.
fn load_dotenv(path: &Path) -> Result<(), ConfigError> {
    let contents = match std::fs::read_to_string(path) {
        Ok(contents) => contents,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(source) => return Err(ConfigError::Read { path: path.to_owned(), source }),
    };
    let invalid = |e: dotenvy::Error| ConfigError::Invalid { path: path.to_owned(), message: e.to_string() };
    for item in dotenvy::from_read_iter(contents.as_bytes()) {
        match item {
            Ok(_) => {}
            // A byte-order mark: the loader below strips it before parsing, the iterator not.
            Err(dotenvy::Error::LineParse(text, _)) if text.starts_with('\u{feff}') => {}
            Err(dotenvy::Error::LineParse(text, _)) => {
                let first = text.lines().next().unwrap_or_default().trim_end();
                let line = contents.lines().position(|l| l.trim_end() == first).map_or(0, |i| i + 1);
                return Err(ConfigError::Dotenv { path: path.to_owned(), line });
            }
            Err(e) => return Err(invalid(e)),
        }
    }
    dotenvy::from_read(contents.as_bytes()).map_err(invalid)
}

/// Parses config text, looking variables up with `lookup`. Returns the config and warnings
/// (one per variable referenced but not set, naming its lines).
pub fn parse(text: &str, lookup: impl Fn(&str) -> Option<String>) -> Result<(Config, Vec<String>), String> {
    if text.trim().is_empty() {
        return Ok((Config::default(), Vec::new()));
    }
    let marked = env::mark(text)?;
    let vars = env::Vars::new(text, &marked, &lookup);
    let yaml = serde_yaml_ng::Deserializer::from_str(&marked);
    let mut config = <Config as serde::Deserialize>::deserialize(interp::Interp::new(yaml, &vars))
        .map_err(|e| with_location(text, env::restore(&e.to_string()).into_owned()))?;
    if !config.agents.is_empty() {
        // The same interpolated document, untyped, for merging each agent's blocks.
        let yaml = serde_yaml_ng::Deserializer::from_str(&marked);
        let document = <serde_json::Value as serde::Deserialize>::deserialize(interp::Interp::new(yaml, &vars))
            .map_err(|e| env::restore(&e.to_string()).into_owned())?;
        agents::apply_defaults(&document, &mut config)?;
    }
    config.check()?;
    Ok((config, vars.warnings()))
}

/// The YAML parser gives no location for unknown top-level keys: find the key's line.
fn with_location(text: &str, message: String) -> String {
    if message.contains(" line ") {
        return message;
    }
    let key = message.strip_prefix("unknown field `").and_then(|rest| rest.split_once('`')).map(|(key, _)| key);
    let line =
        key.and_then(|key| text.lines().position(|l| l.split_once(':').is_some_and(|(k, _)| k.trim_end() == key)));
    match line {
        Some(index) => format!("{message} at line {}", index + 1),
        None => message,
    }
}

#[cfg(test)]
mod tests;
