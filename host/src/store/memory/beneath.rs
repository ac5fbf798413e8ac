//! Race-free path resolution under the memory root. Every path is resolved by the kernel
//! relative to a file descriptor of the root with `openat2(RESOLVE_BENEATH |
//! RESOLVE_NO_MAGICLINKS)`: a `..` or symlink that would leave the root fails the open
//! itself (`EXDEV`), so there is no window between a check and the use. Where the kernel
//! lacks `openat2` (before Linux 5.6, or a seccomp filter refusing it), the path is walked one
//! component at a time with `O_NOFOLLOW`, which refuses every symlink instead.

use rustix::fs::{Mode, OFlags, ResolveFlags};
use rustix::io::Errno;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

/// Mode of the files and directories memory creates.
pub const FILE_MODE: u32 = 0o644;
const DIR_MODE: u32 = 0o755;

/// Set once `openat2` turned out to be unavailable.
static NO_OPENAT2: AtomicBool = AtomicBool::new(false);

/// An open memory root.
#[derive(Debug)]
pub struct Root {
    fd: OwnedFd,
}

impl Root {
    /// Opens the root directory, creating it first when `create`. `None` when it does not
    /// exist and `create` is false.
    pub fn open(path: &Path, create: bool) -> std::io::Result<Option<Root>> {
        if create {
            std::fs::create_dir_all(path)?;
        }
        match rustix::fs::open(path, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty()) {
            Ok(fd) => Ok(Some(Root { fd })),
            Err(Errno::NOENT) if !create => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// The root's descriptor.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Opens `rel` (`/`-separated normal components) beneath the root.
    pub fn open_beneath(&self, rel: &str, flags: OFlags, mode: u32) -> Result<OwnedFd, Errno> {
        open_beneath(self.fd(), rel, flags | OFlags::CLOEXEC, Mode::from_raw_mode(mode))
    }

    /// Opens the directory `dirs` (components), creating missing ones when `create`; each
    /// directory is created relative to its already-resolved parent, never by path.
    pub fn dir(&self, dirs: &[&str], create: bool) -> Result<OwnedFd, Errno> {
        let mut current = rustix::io::fcntl_dupfd_cloexec(self.fd(), 0)?;
        let mut prefix = String::new();
        for part in dirs {
            if create {
                match rustix::fs::mkdirat(&current, *part, Mode::from_raw_mode(DIR_MODE)) {
                    Ok(()) | Err(Errno::EXIST) => {}
                    Err(e) => return Err(e),
                }
            }
            if !prefix.is_empty() {
                prefix.push('/');
            }
            prefix.push_str(part);
            // From the root, not from `current`: an in-root symlink such as `a -> ../b`
            // resolves as it would for a read.
            current = self.open_beneath(&prefix, OFlags::RDONLY | OFlags::DIRECTORY, 0)?;
        }
        Ok(current)
    }

    /// Takes an exclusive advisory lock on the root, released when the guard drops, so that
    /// quota checks and the writes they admit do not interleave (across processes too).
    pub fn lock(&self) -> Result<RootLock, Errno> {
        let fd = rustix::io::fcntl_dupfd_cloexec(self.fd(), 0)?;
        rustix::fs::flock(&fd, rustix::fs::FlockOperation::LockExclusive)?;
        Ok(RootLock { _fd: fd })
    }
}

/// Holds [`Root::lock`]; the lock goes with the descriptor.
#[derive(Debug)]
pub struct RootLock {
    _fd: OwnedFd,
}

/// How often an `openat2` that raced a rename is retried before giving up.
const RACE_RETRIES: usize = 64;

fn open_beneath(dir: BorrowedFd<'_>, rel: &str, flags: OFlags, mode: Mode) -> Result<OwnedFd, Errno> {
    if !NO_OPENAT2.load(Ordering::Relaxed) {
        for _ in 0..RACE_RETRIES {
            match rustix::fs::openat2(dir, rel, flags, mode, ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS) {
                Err(Errno::NOSYS | Errno::PERM) => {
                    NO_OPENAT2.store(true, Ordering::Relaxed);
                    break;
                }
                // The kernel refuses a `..` lookup that raced any rename on the system
                // (its rename seqlock) with EAGAIN and expects the caller to try again.
                Err(Errno::AGAIN) => continue,
                result => return result,
            }
        }
        if !NO_OPENAT2.load(Ordering::Relaxed) {
            return Err(Errno::AGAIN);
        }
    }
    open_by_components(dir, rel, flags, mode)
}

/// The fallback: every component opened relative to its parent with `O_NOFOLLOW`.
fn open_by_components(dir: BorrowedFd<'_>, rel: &str, flags: OFlags, mode: Mode) -> Result<OwnedFd, Errno> {
    let parts: Vec<&str> = rel.split('/').collect();
    let (last, dirs) = parts.split_last().ok_or(Errno::INVAL)?;
    let mut current = rustix::io::fcntl_dupfd_cloexec(dir, 0)?;
    for part in dirs {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        current = rustix::fs::openat(&current, *part, flags, Mode::empty()).map_err(|e| match e {
            Errno::NOTDIR => Errno::XDEV,
            e => e,
        })?;
    }
    rustix::fs::openat(&current, *last, flags | OFlags::NOFOLLOW, mode)
}

/// Writes `name` in `dir` atomically: a new temp file beside it, fsync, `renameat`. Rename
/// replaces the directory entry itself, so even a symlink swapped in at `name` is replaced,
/// never followed.
pub fn write_atomic(dir: BorrowedFd<'_>, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let tmp = format!(".{name}.{}.tmp", temp_suffix());
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = rustix::fs::openat(dir, tmp.as_str(), flags, Mode::from_raw_mode(FILE_MODE))?;
    let mut file = std::fs::File::from(fd);
    let written = file.write_all(bytes).and_then(|()| file.sync_all());
    let renamed = written.and_then(|()| Ok(rustix::fs::renameat(dir, tmp.as_str(), dir, name)?));
    if renamed.is_err() {
        let _ = rustix::fs::unlinkat(dir, tmp.as_str(), rustix::fs::AtFlags::empty());
    }
    renamed
}

/// A suffix no other writer picks: process id, a counter, and the clock.
fn temp_suffix() -> String {
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    format!("{}-{n}-{nanos:08x}", std::process::id())
}
