//! Visiting every regular file under the memory root through directory descriptors: each
//! directory is opened relative to its parent with `O_NOFOLLOW`, so a symlink (to a file or
//! a directory, inside the root or out) is never entered, and a rename mid-walk cannot lead
//! it outside the root.

use super::beneath::Root;
use rustix::fs::{AtFlags, Dir, FileType, Mode, OFlags};
use rustix::io::Errno;
use std::ops::ControlFlow;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

/// A regular file met by [`walk`].
pub struct Entry<'a> {
    /// Its directory.
    pub dir: BorrowedFd<'a>,
    /// Its name in `dir`.
    pub name: &'a str,
    /// Its path relative to the root, `/`-separated.
    pub rel: String,
}

/// Calls `visit` for every regular file, in name order within a directory and depth-first,
/// until it breaks. Unreadable directories and names that are not UTF-8 are skipped.
pub fn walk(root: &Root, mut visit: impl FnMut(&Entry<'_>) -> ControlFlow<()>) -> Result<(), Errno> {
    let first = rustix::io::fcntl_dupfd_cloexec(root.fd(), 0)?;
    let mut stack: Vec<(OwnedFd, String)> = vec![(first, String::new())];
    while let Some((dir, prefix)) = stack.pop() {
        for (name, kind) in entries(dir.as_fd()) {
            let rel = if prefix.is_empty() { name.clone() } else { format!("{prefix}/{name}") };
            match kind {
                FileType::Directory => {
                    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
                    if let Ok(sub) = rustix::fs::openat(&dir, name.as_str(), flags, Mode::empty()) {
                        stack.push((sub, rel));
                    }
                }
                FileType::RegularFile if visit(&Entry { dir: dir.as_fd(), name: &name, rel }).is_break() => {
                    return Ok(());
                }
                _ => {}
            }
        }
    }
    Ok(())
}

/// The entries of `dir` (not `.` and `..`), sorted by name, with their types (not followed).
fn entries(dir: BorrowedFd<'_>) -> Vec<(String, FileType)> {
    let Ok(reader) = Dir::read_from(dir) else { return Vec::new() };
    let mut found = Vec::new();
    for entry in reader.flatten() {
        let Ok(name) = entry.file_name().to_str() else { continue };
        if name == "." || name == ".." {
            continue;
        }
        let kind = match entry.file_type() {
            FileType::Unknown => match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(stat) => FileType::from_raw_mode(stat.st_mode),
                Err(_) => continue,
            },
            kind => kind,
        };
        found.push((name.to_string(), kind));
    }
    found.sort_by(|a, b| a.0.cmp(&b.0));
    found
}

/// The size of a regular file met by [`walk`] (0 when it vanished meanwhile).
pub fn size(entry: &Entry<'_>) -> u64 {
    rustix::fs::statat(entry.dir, entry.name, AtFlags::SYMLINK_NOFOLLOW).map_or(0, |s| s.st_size.max(0) as u64)
}
