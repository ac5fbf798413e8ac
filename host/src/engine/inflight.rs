//! In-flight markers: one turn at a time per channel across processes sharing a state
//! directory (two servers, or a CLI beside a server), with `engine.session.inflight_ttl_seconds`
//! as the crash-safety bound.
//!
//! Within a process a mutex per channel serialises turns (see `turn.rs`); this adds a marker
//! file, `<state>/inflight/<channel>.json`, created exclusively when a turn starts, refreshed
//! every round and removed when the turn ends (also when its future is dropped). A turn that
//! finds another process's marker waits for it to go. A marker is stale, and taken over, when
//! its TTL has passed, or when it names a process on this host that no longer runs: a crash
//! never blocks a channel for longer than the TTL, and usually not at all.

use crate::store::StateError;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How often a waiting turn looks again.
const POLL: Duration = Duration::from_millis(100);

/// What a marker file says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Marker {
    channel: String,
    host: String,
    pid: u32,
    /// Distinguishes this process from an earlier one with the same pid.
    nonce: String,
    /// Unix seconds after which the marker is stale.
    expires_at: f64,
}

/// The markers of one state directory, as this process writes them.
#[derive(Debug, Clone)]
pub struct InFlight {
    dir: PathBuf,
    ttl: Duration,
    host: String,
    nonce: String,
}

/// A held marker; removed when dropped.
#[derive(Debug)]
pub struct Held {
    path: PathBuf,
    marker: Marker,
    ttl: Duration,
}

impl InFlight {
    /// Markers under `state_root/inflight`, stale after `ttl`.
    pub fn new(state_root: &Path, ttl: Duration) -> Self {
        InFlight { dir: state_root.join("inflight"), ttl, host: hostname(), nonce: process_nonce().to_owned() }
    }

    /// Waits until no other live turn holds `channel`, then holds it.
    pub async fn acquire(&self, channel: &str) -> Result<Held, StateError> {
        let io = |e: std::io::Error| StateError::Other(format!("in-flight marker in {}: {e}", self.dir.display()));
        std::fs::create_dir_all(&self.dir).map_err(io)?;
        let path = self.dir.join(file_name(channel));
        let mut logged = false;
        loop {
            let marker = Marker {
                channel: channel.to_owned(),
                host: self.host.clone(),
                pid: std::process::id(),
                nonce: self.nonce.clone(),
                expires_at: unix_now() + self.ttl.as_secs_f64(),
            };
            match create_new(&path, &marker) {
                Ok(()) => return Ok(Held { path, marker, ttl: self.ttl }),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(io(e)),
            }
            match read(&path) {
                // Gone meanwhile: try again at once.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Ok(other) if !self.is_stale(&other) => {
                    if !logged {
                        tracing::info!(channel, pid = other.pid, host = %other.host, "waiting for the channel's turn in another process");
                        logged = true;
                    }
                    tokio::time::sleep(POLL).await;
                }
                // Stale, or unreadable (a crash mid-write): take it over.
                stale => {
                    tracing::warn!(channel, "taking over a stale in-flight marker ({stale:?})");
                    match std::fs::remove_file(&path) {
                        Ok(()) => {}
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                        Err(e) => return Err(io(e)),
                    }
                }
            }
        }
    }

    fn is_stale(&self, marker: &Marker) -> bool {
        if unix_now() > marker.expires_at {
            return true;
        }
        if marker.host != self.host {
            return false; // another machine sharing the directory: only the TTL can tell
        }
        if marker.pid == std::process::id() {
            return marker.nonce != self.nonce; // an earlier process that had our pid
        }
        !process_alive(marker.pid)
    }
}

impl Held {
    /// Pushes the expiry back by the TTL (called every round, so long turns keep it). The
    /// file is rewritten only once a quarter of the TTL has passed since it was last: a
    /// marker always has at least three quarters of its TTL left, and a busy server does not
    /// write and rename a file for every round of every turn.
    pub fn refresh(&mut self) {
        let now = unix_now();
        let ttl = self.ttl.as_secs_f64();
        if self.marker.expires_at - now > ttl * 0.75 {
            return;
        }
        self.marker.expires_at = now + ttl;
        let tmp = self.path.with_extension(format!("{}.tmp", self.marker.nonce));
        let written = serde_json::to_vec(&self.marker).map_err(std::io::Error::other).and_then(|bytes| {
            std::fs::write(&tmp, bytes)?;
            std::fs::rename(&tmp, &self.path)
        });
        if let Err(e) = written {
            tracing::warn!(path = %self.path.display(), "cannot refresh the in-flight marker: {e}");
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        // Only our own marker: a process that took it over as stale now owns the file.
        if read(&self.path).is_ok_and(|m| m.nonce == self.marker.nonce && m.pid == self.marker.pid) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

fn create_new(path: &Path, marker: &Marker) -> std::io::Result<()> {
    let mut file = std::fs::OpenOptions::new().write(true).create_new(true).open(path)?;
    let written = serde_json::to_vec(marker).map_err(std::io::Error::other).and_then(|b| file.write_all(&b));
    if written.is_err() {
        let _ = std::fs::remove_file(path);
    }
    written
}

fn read(path: &Path) -> std::io::Result<Marker> {
    let bytes = std::fs::read(path)?;
    serde_json::from_slice(&bytes).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

/// A file name for any channel id: a readable prefix and a hash.
fn file_name(channel: &str) -> String {
    let readable: String =
        channel.chars().filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_')).take(40).collect();
    let hash = hex::encode(&Sha256::digest(channel.as_bytes())[..8]);
    format!("{readable}-{hash}.json")
}

/// One per process: tells this process from an earlier one with the same pid (containers
/// restart as pid 1).
fn process_nonce() -> &'static str {
    static NONCE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    NONCE.get_or_init(|| {
        let seed = format!("{:?}{}", SystemTime::now(), std::process::id());
        hex::encode(&Sha256::digest(seed.as_bytes())[..8])
    })
}

fn unix_now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

fn process_alive(pid: u32) -> bool {
    let Ok(pid) = i32::try_from(pid) else { return false };
    // SAFETY: signal 0 only checks that the process exists; nothing is sent.
    let result = unsafe { libc::kill(pid, 0) };
    result == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn one_holder_at_a_time_and_released_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let a = InFlight::new(dir.path(), Duration::from_secs(60));
        let b = InFlight::new(dir.path(), Duration::from_secs(60)); // another "process"
        let held = a.acquire("c1").await.unwrap();
        let waiting = tokio::time::timeout(Duration::from_millis(300), b.acquire("c1")).await;
        assert!(waiting.is_err(), "b waits while a holds the channel");
        let _other = b.acquire("c2").await.unwrap();
        drop(held);
        tokio::time::timeout(Duration::from_secs(2), b.acquire("c1")).await.expect("b gets it once a lets go").unwrap();
    }

    #[tokio::test]
    async fn refreshing_keeps_a_long_turn_and_writes_only_when_due() {
        let dir = tempfile::tempdir().unwrap();
        let a = InFlight::new(dir.path(), Duration::from_millis(400));
        let mut held = a.acquire("c").await.unwrap();
        let path = held.path.clone();
        let written = || read(&path).unwrap().expires_at;
        let first = written();
        held.refresh();
        assert_eq!(written(), first, "a fresh marker is not rewritten");
        // Refreshed every 50 ms for three TTLs: never stale, so nobody takes it over.
        let b = InFlight::new(dir.path(), Duration::from_secs(60));
        let taker = tokio::spawn(async move { b.acquire("c").await.map(|_| ()) });
        for _ in 0..24 {
            tokio::time::sleep(Duration::from_millis(50)).await;
            held.refresh();
        }
        assert!(!taker.is_finished(), "a refreshed marker is not taken over");
        assert!(written() > first + 0.5, "the expiry moved on as the turn went on");
        drop(held);
        tokio::time::timeout(Duration::from_secs(2), taker).await.expect("released").unwrap().unwrap();
    }

    #[tokio::test]
    async fn stale_markers_are_taken_over() {
        let dir = tempfile::tempdir().unwrap();
        let a = InFlight::new(dir.path(), Duration::from_millis(200));
        let held = a.acquire("c").await.unwrap();
        std::mem::forget(held); // a crash: nobody removes it
        let b = InFlight::new(dir.path(), Duration::from_secs(60));
        let started = std::time::Instant::now();
        tokio::time::timeout(Duration::from_secs(2), b.acquire("c")).await.expect("taken over after the TTL").unwrap();
        assert!(started.elapsed() >= Duration::from_millis(100), "not before the TTL, since a's pid is alive");

        // A dead process's marker goes at once, whatever its TTL.
        let path = dir.path().join("inflight").join(file_name("d"));
        let dead = Marker {
            channel: "d".into(),
            host: hostname(),
            pid: 999_999_999,
            nonce: "x".into(),
            expires_at: unix_now() + 3600.0,
        };
        std::fs::write(&path, serde_json::to_vec(&dead).unwrap()).unwrap();
        tokio::time::timeout(Duration::from_millis(500), b.acquire("d")).await.expect("dead owner").unwrap();
        // So does a corrupt one.
        std::fs::write(dir.path().join("inflight").join(file_name("e")), "{half").unwrap();
        tokio::time::timeout(Duration::from_millis(500), b.acquire("e")).await.expect("corrupt").unwrap();
    }
}
