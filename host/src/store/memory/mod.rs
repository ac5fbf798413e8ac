//! Memory files: text files under one memory root, reached by relative paths, with
//! per-caller quotas on what the root may hold.
//!
//! One [`MemoryStore`] API over two backends: files under a directory ([`filesystem`], the
//! default: the kernel confines every path beneath the root), and rows of a PostgreSQL
//! database ([`postgres`], `learning.memory.backend: postgres`: replicas on many machines
//! share the memory). Both check paths the same way ([`target`]), cap files at
//! [`MAX_FILE_BYTES`], refuse a file where a directory is (and a directory where a file is),
//! never leave a half-written file, and let no two writers pass a quota together.

mod beneath;
pub mod filesystem;
pub mod postgres;
#[cfg(test)]
mod tests;
mod walk;

use crate::store::StateError;
use crate::store::state::postgres::{Postgres, Settings};
use filesystem::Files;
use postgres::Rows;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

/// The largest file memory reads or writes.
pub const MAX_FILE_BYTES: usize = 4 * 1024 * 1024;
/// The most hits a search returns.
pub const MAX_SEARCH_HITS: usize = 100;
/// Why a path whose file is a directory is refused.
const IS_A_DIRECTORY: &str = "is a directory";
/// Why a path through a file is refused.
const NOT_A_DIRECTORY: &str = "a parent is not a directory";

/// Why a memory operation failed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum MemoryError {
    /// The path is absolute, leaves the root, passes through a symlink it may not, or is
    /// unusable.
    #[error("invalid path `{path}`: {reason}")]
    InvalidPath {
        /// The path as given.
        path: String,
        /// Why it was refused.
        reason: &'static str,
    },
    /// A file holds invalid JSON.
    #[error("`{path}` is not valid JSON: {reason}")]
    InvalidJson {
        /// The path.
        path: String,
        /// The parser's message.
        reason: String,
    },
    /// Content or file over [`MAX_FILE_BYTES`].
    #[error("larger than the {MAX_FILE_BYTES}-byte limit")]
    TooLarge,
    /// The write would take the root past the caller's [`MemoryQuota`].
    #[error("{0}")]
    QuotaExceeded(String),
    /// An I/O or database failure.
    #[error("{0}")]
    Io(String),
}

/// How much the memory root may hold after a write: regular files, and their bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryQuota {
    /// The most bytes in all files together.
    pub max_bytes: u64,
    /// The most files.
    pub max_files: u64,
}

/// What the memory root holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Bytes in regular files.
    pub bytes: u64,
    /// Regular files.
    pub files: u64,
}

/// One matching line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchHit {
    /// Path relative to the root, with `/` separators.
    pub path: String,
    /// 1-based line number.
    pub line: u32,
    /// The line.
    pub text: String,
}

/// The memory root. Cheap to clone; clones share the backend (and its connections).
#[derive(Debug, Clone)]
pub struct MemoryStore {
    backend: Backend,
}

#[derive(Debug, Clone)]
enum Backend {
    Files(Files),
    Rows(Rows),
}

impl MemoryStore {
    /// A store on the filesystem, rooted at `root` (created on first write).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        MemoryStore { backend: Backend::Files(Files::new(root)) }
    }

    /// A store on PostgreSQL: the files in `pg` of the memory root at `root` (its
    /// [`namespace`]).
    pub fn on_postgres(pg: Arc<Postgres>, root: impl AsRef<Path>) -> Self {
        MemoryStore { backend: Backend::Rows(Rows::new(pg, namespace(root.as_ref()))) }
    }

    /// The store `config`'s `learning.memory` configures (an agent's config: its
    /// `memory.path` in place). On the filesystem, the root is `filesystem.path` resolved
    /// against the config file's folder. On PostgreSQL, `filesystem.path` as written (see
    /// [`namespace`]) names the memory in the database, which is `learning.memory.postgres`,
    /// else the state's when it is on PostgreSQL, else the one the `PG*` environment names;
    /// with none of these, an error naming the keys. Nothing is connected yet.
    pub fn from_config(
        config: &crate::config::LoadedConfig,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, StateError> {
        use crate::config::{Backend as Kind, StateBackend};
        let (memory, state) = (&config.config.learning.memory, &config.config.state);
        if memory.backend == Kind::Filesystem {
            return Ok(MemoryStore::new(config.resolve(&memory.filesystem.path)));
        }
        let (section, block) = match (&memory.postgres, state.backend) {
            (Some(block), _) => ("learning.memory.postgres", Some(block)),
            (None, StateBackend::Postgres) => ("state.postgres", state.postgres.as_ref()),
            (None, StateBackend::Filesystem) if env("PGHOST").is_some() => ("learning.memory.postgres", None),
            (None, StateBackend::Filesystem) => {
                return Err(StateError::Other(
                    "learning.memory.backend is postgres, but no database is set for it: set \
                     learning.memory.postgres.url, or put the state on PostgreSQL (state.backend: postgres; memory \
                     then uses state.postgres), or set PGHOST"
                        .into(),
                ));
            }
        };
        let settings = Settings::from_section(block, section, env)?;
        Ok(MemoryStore::on_postgres(Postgres::shared(settings)?, &memory.filesystem.path))
    }

    /// The root directory, for a store on the filesystem.
    pub fn root(&self) -> Option<&Path> {
        match &self.backend {
            Backend::Files(files) => Some(files.root()),
            Backend::Rows(_) => None,
        }
    }

    /// Where the files are, for logs and errors (never a password).
    pub fn describe(&self) -> String {
        match &self.backend {
            Backend::Files(files) => files.root().display().to_string(),
            Backend::Rows(rows) => rows.describe(),
        }
    }

    /// Reads a file; `None` when it does not exist.
    pub async fn read(&self, path: &str) -> Result<Option<String>, MemoryError> {
        match &self.backend {
            Backend::Files(files) => blocking(files, path, move |files, path| files.read(&path)).await,
            Backend::Rows(rows) => rows.read(path).await,
        }
    }

    /// Reads a JSON file and returns it re-encoded; `None` when it does not exist.
    pub async fn read_json(&self, path: &str) -> Result<Option<String>, MemoryError> {
        let Some(text) = self.read(path).await? else { return Ok(None) };
        let value: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| MemoryError::InvalidJson { path: path.into(), reason: e.to_string() })?;
        Ok(Some(value.to_string()))
    }

    /// Writes (or appends to) a file, creating parent directories, without a quota (the
    /// engine's own writes). An overwrite is atomic: a reader sees the old file or the new.
    pub async fn write(&self, path: &str, content: &str, append: bool) -> Result<(), MemoryError> {
        self.write_checked(path, content, append, None).await
    }

    /// Writes (or appends to) a file unless the root would then hold more than `quota`
    /// allows ([`MemoryError::QuotaExceeded`], nothing written). A write that does not grow
    /// the root is always allowed. Writers of one root, in any process, check the quota one
    /// at a time.
    pub async fn write_within(
        &self,
        path: &str,
        content: &str,
        append: bool,
        quota: &MemoryQuota,
    ) -> Result<(), MemoryError> {
        self.write_checked(path, content, append, Some(*quota)).await
    }

    async fn write_checked(
        &self,
        path: &str,
        content: &str,
        append: bool,
        quota: Option<MemoryQuota>,
    ) -> Result<(), MemoryError> {
        match &self.backend {
            Backend::Files(files) => {
                let content = content.to_owned();
                blocking(files, path, move |files, path| files.write(&path, &content, append, quota.as_ref())).await
            }
            Backend::Rows(rows) => rows.write(path, content, append, quota.as_ref()).await,
        }
    }

    /// What the root holds now (regular files; on the filesystem, symlinks not followed).
    pub async fn usage(&self) -> Result<Usage, MemoryError> {
        match &self.backend {
            Backend::Files(files) => blocking(files, "", |files, _| files.usage()).await,
            Backend::Rows(rows) => rows.usage().await,
        }
    }

    /// Case-insensitive substring search over every file, at most [`MAX_SEARCH_HITS`] hits,
    /// each file's in line order. Files come in path order on PostgreSQL; on the filesystem,
    /// a directory's files (by name) before its subdirectories'.
    pub async fn search(&self, query: &str) -> Result<Vec<SearchHit>, MemoryError> {
        match &self.backend {
            Backend::Files(files) => blocking(files, query, |files, query| files.search(&query)).await,
            Backend::Rows(rows) => rows.search(query).await,
        }
    }
}

/// Runs `f` on the filesystem store off the runtime: walks and large reads block.
async fn blocking<T: Send + 'static>(
    files: &Files,
    arg: &str,
    f: impl FnOnce(Files, String) -> Result<T, MemoryError> + Send + 'static,
) -> Result<T, MemoryError> {
    let (files, arg) = (files.clone(), arg.to_owned());
    tokio::task::spawn_blocking(move || f(files, arg)).await.map_err(io)?
}

/// The name a memory root has in the database: its configured path, lexically normalized
/// (`./memory/` and `memory` are one; `..` is kept), not resolved against the config
/// file's folder, so replicas whose configs say the same path share the memory wherever
/// their config files are, and two paths that would be two roots on disk are two here.
pub fn namespace(path: &Path) -> String {
    let mut parts = Vec::new();
    let mut absolute = false;
    for component in path.components() {
        match component {
            Component::Normal(part) => parts.push(part.to_string_lossy().into_owned()),
            Component::ParentDir => parts.push("..".into()),
            Component::RootDir | Component::Prefix(_) => absolute = true,
            Component::CurDir => {}
        }
    }
    match (absolute, parts.is_empty()) {
        (true, _) => format!("/{}", parts.join("/")),
        (false, true) => ".".into(),
        (false, false) => parts.join("/"),
    }
}

fn io(e: impl std::fmt::Display) -> MemoryError {
    MemoryError::Io(e.to_string())
}

/// A checked relative path: its directories and file name.
struct Target<'a> {
    path: &'a str,
    dirs: Vec<&'a str>,
    name: &'a str,
}

impl Target<'_> {
    /// The normalized path: `/`-separated, no `.` or empty components.
    fn rel(&self) -> String {
        let mut parts = self.dirs.clone();
        parts.push(self.name);
        parts.join("/")
    }

    /// The normalized paths of its directories, outermost first (`a`, `a/b` for `a/b/c`).
    fn parents(&self) -> Vec<String> {
        (1..=self.dirs.len()).map(|n| self.dirs[..n].join("/")).collect()
    }

    fn invalid(&self, reason: &'static str) -> MemoryError {
        MemoryError::InvalidPath { path: self.path.into(), reason }
    }
}

/// Checks a path lexically: relative, no `..`, not the root itself. What it names is then
/// resolved beneath the root (by the kernel, or as a row's key).
fn target(path: &str) -> Result<Target<'_>, MemoryError> {
    let invalid = |reason| MemoryError::InvalidPath { path: path.into(), reason };
    if path.is_empty() || path.contains('\0') {
        return Err(invalid("empty or contains NUL"));
    }
    let mut parts = Vec::new();
    for component in Path::new(path).components() {
        match component {
            Component::Normal(part) => parts.push(part.to_str().ok_or_else(|| invalid("not UTF-8"))?),
            Component::CurDir => {}
            Component::ParentDir => return Err(invalid("`..` is not allowed")),
            Component::RootDir | Component::Prefix(_) => return Err(invalid("absolute paths are not allowed")),
        }
    }
    let Some(name) = parts.pop() else { return Err(invalid("names the memory root itself")) };
    Ok(Target { path, dirs: parts, name })
}

/// Whether a write of `len` bytes (appended, or replacing the `existing` file) keeps a root
/// holding `usage` within `quota`. A write that does not grow the root is always allowed (a
/// quota lowered below what a root holds must not stop it from shrinking).
fn check_quota(
    usage: Usage,
    existing: Option<u64>,
    len: u64,
    append: bool,
    quota: &MemoryQuota,
) -> Result<(), MemoryError> {
    let files = usage.files + u64::from(existing.is_none());
    let bytes = match append {
        true => usage.bytes + len,
        false => (usage.bytes + len).saturating_sub(existing.unwrap_or(0)),
    };
    if files <= usage.files && bytes <= usage.bytes {
        return Ok(());
    }
    if files > quota.max_files {
        return Err(MemoryError::QuotaExceeded(format!(
            "memory quota exceeded: the memory root may hold at most {} files (limit memory_quota_files)",
            quota.max_files
        )));
    }
    if bytes > quota.max_bytes {
        return Err(MemoryError::QuotaExceeded(format!(
            "memory quota exceeded: the memory root may hold at most {} bytes (limit memory_quota_mb)",
            quota.max_bytes
        )));
    }
    Ok(())
}

/// Adds the lines of `text` (the file at `rel`) containing `needle` (lowercase) to `hits`,
/// up to [`MAX_SEARCH_HITS`].
fn search_text(rel: &str, text: &str, needle: &str, hits: &mut Vec<SearchHit>) {
    for (index, line) in text.lines().enumerate() {
        if hits.len() >= MAX_SEARCH_HITS {
            return;
        }
        if line.to_lowercase().contains(needle) {
            hits.push(SearchHit { path: rel.to_owned(), line: index as u32 + 1, text: line.into() });
        }
    }
}
