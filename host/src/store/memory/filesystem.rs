//! The filesystem backend: plain files under one root, reachable only by relative paths
//! that the kernel resolves beneath it ([`super::beneath`]).
//!
//! Reads follow symlinks that stay inside the root; writes replace or extend regular files
//! only (a symlink as the file written is refused), and directories on the way may be
//! symlinks that stay inside the root. Overwrites are atomic (temp file + rename in the
//! file's directory). Every method blocks: [`super::MemoryStore`] calls them off the runtime.

use super::beneath::{self, Root};
use super::walk;
use super::{
    MAX_FILE_BYTES, MAX_SEARCH_HITS, MemoryError, MemoryQuota, SearchHit, Target, Usage, check_quota, io, search_text,
    target,
};
use rustix::fs::{AtFlags, FileType, OFlags};
use rustix::io::Errno;
use std::io::{Read, Write};
use std::ops::ControlFlow;
use std::os::fd::{AsFd, BorrowedFd};
use std::path::{Path, PathBuf};

/// The memory root on disk.
#[derive(Debug, Clone)]
pub struct Files {
    root: PathBuf,
}

/// A refusal by the kernel, in the caller's terms.
fn refused(target: &Target<'_>, e: Errno) -> MemoryError {
    match e {
        Errno::XDEV => target.invalid("leaves the memory root"),
        Errno::LOOP => target.invalid("passes through a symlink that is not followed"),
        Errno::NOTDIR => target.invalid(super::NOT_A_DIRECTORY),
        Errno::ISDIR => target.invalid(super::IS_A_DIRECTORY),
        e => io(std::io::Error::from(e)),
    }
}

impl Files {
    /// A store rooted at `root` (created on first write).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Files { root: root.into() }
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
            Err(e) => return Err(refused(&target, e)),
            Ok(fd) => fd,
        };
        let file = std::fs::File::from(fd);
        let meta = file.metadata().map_err(io)?;
        if meta.is_dir() {
            return Err(target.invalid(super::IS_A_DIRECTORY));
        }
        if !meta.is_file() {
            return Err(target.invalid("is not a regular file"));
        }
        read_capped(file).map(Some)
    }

    /// Writes (or appends to) a file, creating parent directories; with a `quota`, only if
    /// the root would not then hold more than it allows ([`MemoryError::QuotaExceeded`],
    /// nothing written: a write that does not grow the root is always allowed).
    pub fn write(
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
        let dir = root.dir(&target.dirs, true).map_err(|e| refused(&target, e))?;
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
        let fd =
            rustix::fs::openat(&dir, target.name, flags | OFlags::CLOEXEC, mode).map_err(|e| refused(&target, e))?;
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
        Err(e) => return Err(refused(target, e)),
        Ok(stat) => stat,
    };
    match FileType::from_raw_mode(stat.st_mode) {
        FileType::RegularFile => Ok(Some(stat.st_size.max(0) as u64)),
        FileType::Symlink => Err(target.invalid("is a symlink; memory writes only replace or extend regular files")),
        FileType::Directory => Err(target.invalid(super::IS_A_DIRECTORY)),
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
    search_text(&entry.rel, &text, needle, hits);
}
