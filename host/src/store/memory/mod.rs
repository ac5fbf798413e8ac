//! Memory files: plain files under one root, reachable only by relative paths that the kernel
//! resolves beneath it ([`beneath`]), with per-caller quotas on what the root may hold.
//!
//! Reads follow symlinks that stay inside the root; writes replace or extend regular files
//! only (a symlink as the file written is refused), and directories on the way may be
//! symlinks that stay inside the root. Overwrites are atomic (temp file + rename in the
//! file's directory).

mod beneath;
#[cfg(test)]
mod tests;
mod walk;

use beneath::Root;
use rustix::fs::{AtFlags, FileType, OFlags};
use rustix::io::Errno;
use std::io::{Read, Write};
use std::ops::ControlFlow;
use std::os::fd::{AsFd, BorrowedFd};
use std::path::{Component, Path, PathBuf};

/// The largest file memory reads or writes.
pub const MAX_FILE_BYTES: usize = 4 * 1024 * 1024;
/// The most hits a search returns.
pub const MAX_SEARCH_HITS: usize = 100;

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
    /// An I/O failure.
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

/// The memory root.
#[derive(Debug, Clone)]
pub struct MemoryStore {
    root: PathBuf,
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
    fn rel(&self) -> String {
        let mut parts = self.dirs.clone();
        parts.push(self.name);
        parts.join("/")
    }

    fn invalid(&self, reason: &'static str) -> MemoryError {
        MemoryError::InvalidPath { path: self.path.into(), reason }
    }

    /// A refusal by the kernel, in the caller's terms.
    fn refused(&self, e: Errno) -> MemoryError {
        match e {
            Errno::XDEV => self.invalid("leaves the memory root"),
            Errno::LOOP => self.invalid("passes through a symlink that is not followed"),
            Errno::NOTDIR => self.invalid("a parent is not a directory"),
            Errno::ISDIR => self.invalid("is a directory"),
            e => io(std::io::Error::from(e)),
        }
    }
}

impl MemoryStore {
    /// A store rooted at `root` (created on first write).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        MemoryStore { root: root.into() }
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Reads a file; `None` when it does not exist.
    pub fn read(&self, path: &str) -> Result<Option<String>, MemoryError> {
        let target = target(path)?;
        let Some(root) = Root::open(&self.root, false).map_err(io)? else { return Ok(None) };
        let fd = match root.open_beneath(&target.rel(), OFlags::RDONLY | OFlags::NONBLOCK, 0) {
            Err(Errno::NOENT) => return Ok(None),
            Err(e) => return Err(target.refused(e)),
            Ok(fd) => fd,
        };
        let file = std::fs::File::from(fd);
        let meta = file.metadata().map_err(io)?;
        if meta.is_dir() {
            return Err(target.invalid("is a directory"));
        }
        if !meta.is_file() {
            return Err(target.invalid("is not a regular file"));
        }
        read_capped(file).map(Some)
    }

    /// Reads a JSON file and returns it re-encoded; `None` when it does not exist.
    pub fn read_json(&self, path: &str) -> Result<Option<String>, MemoryError> {
        let Some(text) = self.read(path)? else { return Ok(None) };
        let value: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| MemoryError::InvalidJson { path: path.into(), reason: e.to_string() })?;
        Ok(Some(value.to_string()))
    }

    /// Writes (or appends to) a file, creating parent directories, without a quota (the
    /// engine's own writes).
    pub fn write(&self, path: &str, content: &str, append: bool) -> Result<(), MemoryError> {
        self.write_checked(path, content, append, None)
    }

    /// Writes (or appends to) a file unless the root would then hold more than `quota`
    /// allows ([`MemoryError::QuotaExceeded`], nothing written). A write that does not grow
    /// the root is always allowed.
    pub fn write_within(
        &self,
        path: &str,
        content: &str,
        append: bool,
        quota: &MemoryQuota,
    ) -> Result<(), MemoryError> {
        self.write_checked(path, content, append, Some(quota))
    }

    fn write_checked(
        &self,
        path: &str,
        content: &str,
        append: bool,
        quota: Option<&MemoryQuota>,
    ) -> Result<(), MemoryError> {
        if content.len() > MAX_FILE_BYTES {
            return Err(MemoryError::TooLarge);
        }
        let target = target(path)?;
        let root = Root::open(&self.root, true).map_err(io)?.ok_or_else(|| io("the memory root vanished"))?;
        let dir = root.dir(&target.dirs, true).map_err(|e| target.refused(e))?;
        // Held until the write is done, so two writers cannot both pass the check.
        let _lock = quota.map(|_| root.lock()).transpose().map_err(|e| io(std::io::Error::from(e)))?;
        let existing = existing_size(dir.as_fd(), &target)?;
        if let Some(quota) = quota {
            let usage = usage_of(&root)?;
            check_quota(usage, existing, content.len() as u64, append, quota)?;
        }
        if !append {
            return beneath::write_atomic(dir.as_fd(), target.name, content.as_bytes()).map_err(io);
        }
        let flags = OFlags::WRONLY | OFlags::APPEND | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::NONBLOCK;
        let mode = rustix::fs::Mode::from_raw_mode(beneath::FILE_MODE);
        let fd = rustix::fs::openat(&dir, target.name, flags | OFlags::CLOEXEC, mode).map_err(|e| target.refused(e))?;
        let mut file = std::fs::File::from(fd);
        let meta = file.metadata().map_err(io)?;
        if !meta.is_file() {
            return Err(target.invalid("is not a regular file"));
        }
        if meta.len() as usize + content.len() > MAX_FILE_BYTES {
            return Err(MemoryError::TooLarge);
        }
        file.write_all(content.as_bytes()).map_err(io)
    }

    /// What the root holds now (regular files, symlinks not followed).
    pub fn usage(&self) -> Result<Usage, MemoryError> {
        match Root::open(&self.root, false).map_err(io)? {
            Some(root) => usage_of(&root),
            None => Ok(Usage::default()),
        }
    }

    /// Case-insensitive substring search over every file, at most [`MAX_SEARCH_HITS`] hits.
    pub fn search(&self, query: &str) -> Result<Vec<SearchHit>, MemoryError> {
        let needle = query.to_lowercase();
        let mut hits = Vec::new();
        if needle.is_empty() {
            return Ok(hits);
        }
        let Some(root) = Root::open(&self.root, false).map_err(io)? else { return Ok(hits) };
        walk::walk(&root, |entry| {
            search_file(entry, &needle, &mut hits);
            if hits.len() >= MAX_SEARCH_HITS { ControlFlow::Break(()) } else { ControlFlow::Continue(()) }
        })
        .map_err(|e| io(std::io::Error::from(e)))?;
        Ok(hits)
    }
}

/// The size of the regular file `name` in `dir`, `None` when there is none; a symlink,
/// directory or other kind of file there is refused.
fn existing_size(dir: BorrowedFd<'_>, target: &Target<'_>) -> Result<Option<u64>, MemoryError> {
    let stat = match rustix::fs::statat(dir, target.name, AtFlags::SYMLINK_NOFOLLOW) {
        Err(Errno::NOENT) => return Ok(None),
        Err(e) => return Err(target.refused(e)),
        Ok(stat) => stat,
    };
    match FileType::from_raw_mode(stat.st_mode) {
        FileType::RegularFile => Ok(Some(stat.st_size.max(0) as u64)),
        FileType::Symlink => Err(target.invalid("is a symlink; memory writes only replace or extend regular files")),
        FileType::Directory => Err(target.invalid("is a directory")),
        _ => Err(target.invalid("is not a regular file")),
    }
}

fn usage_of(root: &Root) -> Result<Usage, MemoryError> {
    let mut usage = Usage::default();
    walk::walk(root, |entry| {
        usage.files += 1;
        usage.bytes += walk::size(entry);
        ControlFlow::Continue(())
    })
    .map_err(|e| io(std::io::Error::from(e)))?;
    Ok(usage)
}

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

/// Reads at most [`MAX_FILE_BYTES`]; a file that is (or grew) larger is [`MemoryError::TooLarge`].
fn read_capped(file: std::fs::File) -> Result<String, MemoryError> {
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES as u64 + 1).read_to_end(&mut bytes).map_err(io)?;
    if bytes.len() > MAX_FILE_BYTES {
        return Err(MemoryError::TooLarge);
    }
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

fn search_file(entry: &walk::Entry<'_>, needle: &str, hits: &mut Vec<SearchHit>) {
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let Ok(fd) = rustix::fs::openat(entry.dir, entry.name, flags, rustix::fs::Mode::empty()) else { return };
    let file = std::fs::File::from(fd);
    if !file.metadata().is_ok_and(|m| m.is_file()) {
        return;
    }
    let Ok(text) = read_capped(file) else { return };
    for (index, line) in text.lines().enumerate() {
        if hits.len() >= MAX_SEARCH_HITS {
            return;
        }
        if line.to_lowercase().contains(needle) {
            hits.push(SearchHit { path: entry.rel.clone(), line: index as u32 + 1, text: line.into() });
        }
    }
}

/// Checks a path lexically: relative, no `..`, not the root itself. What it names is then
/// resolved by the kernel beneath the root.
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
