//! In-flight markers: one turn at a time per channel across processes sharing a state
//! directory (two servers, or a CLI beside a server), with `engine.session.inflight_ttl_seconds`
//! as the crash-safety bound.
//!
//! Within a process a mutex per channel serialises turns (see `turn.rs`); this adds a marker,
//! a row of the state database (namespace [`NAMESPACE`], one key per channel), created only
//! if absent when a turn starts, refreshed as the turn goes on and removed when it ends (also
//! when its future is dropped). A turn that finds another process's marker waits for it to
//! go. A marker is stale, and taken over, when its TTL has passed, or when it names a process
//! on this host that no longer runs: a crash never blocks a channel for longer than the TTL,
//! and usually not at all.
//!
//! Markers were files under `<state>/inflight/` before: creating and unlinking a file per
//! turn cost a busy server more than the rest of the turn's own work (ext4 inode allocation
//! under churn), where a row is one small write to a database every turn writes anyway.

use crate::store::{StateError, StateStore, StateWrite};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::future::Future;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The state namespace holding the markers.
pub const NAMESPACE: &str = "inflight";
/// How often a waiting turn looks again.
const POLL: Duration = Duration::from_millis(100);

/// What a marker says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Marker {
    channel: String,
    host: String,
    pid: u32,
    /// Distinguishes this process from an earlier one with the same pid.
    nonce: String,
    /// Unix seconds after which the marker is stale.
    expires_at: f64,
    /// The replica holding it, when this process beats among replicas sharing PostgreSQL:
    /// a marker whose replica went silent is stale, whatever machine it ran on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    replica: Option<String>,
}

/// The markers of one state directory, as this process writes them.
#[derive(Debug, Clone)]
pub struct InFlight {
    state: StateStore,
    ttl: Duration,
    host: String,
    nonce: String,
    /// This process among the replicas, when it beats among them.
    replica: Option<String>,
}

/// A held marker; removed when dropped.
#[derive(Debug)]
pub struct Held {
    state: StateStore,
    key: String,
    marker: Marker,
    /// The marker as stored: it is removed or refreshed only while it still reads so.
    written: String,
    ttl: Duration,
    /// Removed already, by [`Held::release_with`].
    released: bool,
}

impl InFlight {
    /// Markers in `state`, stale after `ttl`, of this process, which is `replica` among
    /// those sharing a PostgreSQL database (none: judged by the TTL alone).
    pub fn new(state: StateStore, ttl: Duration, replica: Option<String>) -> Self {
        InFlight { state, ttl, host: hostname(), nonce: process_nonce().to_owned(), replica }
    }

    fn marker(&self, channel: &str) -> Marker {
        Marker {
            channel: channel.to_owned(),
            host: self.host.clone(),
            pid: std::process::id(),
            nonce: self.nonce.clone(),
            expires_at: unix_now() + self.ttl.as_secs_f64(),
            replica: self.replica.clone(),
        }
    }

    /// Whether `marker`'s replica went silent (or stopped): asked of the database.
    async fn replica_gone(&self, marker: &Marker) -> bool {
        let (Some(replica), Some(pg)) = (&marker.replica, self.state.postgres()) else { return false };
        if self.replica.as_ref() == Some(replica) {
            return false;
        }
        matches!(pg.replica_alive(replica).await, Ok(false))
    }

    /// Waits until no other live turn holds `channel`, then holds it.
    pub async fn acquire(&self, channel: &str) -> Result<Held, StateError> {
        let key = key(channel);
        let mut logged = false;
        for waited in 0u64.. {
            let marker = self.marker(channel);
            let written = encode(&marker);
            let held = |written| Held {
                state: self.state.clone(),
                key: key.clone(),
                marker,
                written,
                ttl: self.ttl,
                released: false,
            };
            if self.state.create(NAMESPACE, &key, &written).await? {
                return Ok(held(written));
            }
            // Gone meanwhile: try again at once.
            let Some(other) = self.state.get(NAMESPACE, &key).await? else { continue };
            let live = match decode(&other) {
                // Whether its replica is gone is asked of the database about once a second.
                Some(marker) if !self.is_stale(&marker) => {
                    let gone = waited.is_multiple_of(10) && self.replica_gone(&marker).await;
                    (!gone).then_some(marker)
                }
                _ => None,
            };
            match live {
                Some(marker) => {
                    if !logged {
                        tracing::info!(channel, pid = marker.pid, host = %marker.host, "waiting for the channel's turn in another process");
                        logged = true;
                    }
                    tokio::time::sleep(POLL).await;
                }
                // Stale, or unreadable: take it over, unless it changed since it was read
                // (then look again; a marker gone meanwhile is created above).
                None => {
                    tracing::warn!(channel, "taking over a stale in-flight marker ({:?})", decode(&other));
                    if self.state.replace_if(NAMESPACE, &key, &other, &written).await? {
                        return Ok(held(written));
                    }
                }
            }
        }
        unreachable!("the loop above only ends by returning")
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
    /// marker is rewritten only once a quarter of the TTL has passed since it was last: a
    /// marker always has at least three quarters of its TTL left, and a busy server does not
    /// write for every round of every turn.
    pub async fn refresh(&mut self) {
        let now = unix_now();
        let ttl = self.ttl.as_secs_f64();
        if self.marker.expires_at - now > ttl * 0.75 {
            return;
        }
        let mut marker = self.marker.clone();
        marker.expires_at = now + ttl;
        let fresh = encode(&marker);
        match self.state.replace_if(NAMESPACE, &self.key, &self.written, &fresh).await {
            Ok(true) => (self.marker, self.written) = (marker, fresh),
            Ok(false) => {
                tracing::warn!(channel = %self.marker.channel, "the in-flight marker was taken over by another process")
            }
            Err(e) => tracing::warn!(channel = %self.marker.channel, "cannot refresh the in-flight marker: {e}"),
        }
    }
}

impl Held {
    /// Makes `writes` and removes the marker (only our own, as when dropped) in one
    /// transaction: a turn's last writes and its release cost one commit. On an error
    /// nothing is written, and the marker is still removed when this is dropped.
    pub async fn release_with(&mut self, mut writes: Vec<StateWrite>) -> Result<(), StateError> {
        let key = self.key.clone();
        writes.push(StateWrite::DeleteIf { ns: NAMESPACE.into(), key, value: self.written.clone() });
        self.state.apply(&writes).await?;
        self.released = true;
        Ok(())
    }
}

impl Drop for Held {
    /// A turn whose future is dropped (a cancelled run) removes its marker here. The
    /// removal runs at once where the backend answers without waiting (SQLite); otherwise
    /// it is spawned on the runtime, and with no runtime left the marker expires after the
    /// TTL.
    fn drop(&mut self) {
        if self.released {
            return;
        }
        let (state, key, written) = (self.state.clone(), self.key.clone(), self.written.clone());
        let channel = self.marker.channel.clone();
        // Only our own marker: a process that took it over as stale now owns it.
        let removal = async move {
            if let Err(e) = state.delete_if(NAMESPACE, &key, &written).await {
                tracing::warn!(%channel, "cannot remove the in-flight marker: {e}");
            }
        };
        let mut removal = Box::pin(removal);
        let waker = futures::task::noop_waker();
        if removal.as_mut().poll(&mut std::task::Context::from_waker(&waker)).is_pending() {
            match tokio::runtime::Handle::try_current() {
                Ok(runtime) => drop(runtime.spawn(removal)),
                Err(_) => tracing::warn!(
                    channel = %self.marker.channel,
                    "the in-flight marker stays until its TTL passes: no runtime left to remove it"
                ),
            }
        }
    }
}

fn encode(marker: &Marker) -> String {
    serde_json::to_string(marker).unwrap_or_default()
}

fn decode(stored: &str) -> Option<Marker> {
    serde_json::from_str(stored).ok()
}

/// The key of a channel's marker: a readable prefix and a hash, whatever the channel id.
/// The key of `channel`'s marker in [`NAMESPACE`].
pub fn key(channel: &str) -> String {
    let readable: String =
        channel.chars().filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_')).take(40).collect();
    let hash = hex::encode(&Sha256::digest(channel.as_bytes())[..8]);
    format!("{readable}-{hash}")
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

    fn store(dir: &tempfile::TempDir) -> StateStore {
        StateStore::new(dir.path())
    }

    #[tokio::test]
    async fn one_holder_at_a_time_and_released_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let a = InFlight::new(store(&dir), Duration::from_secs(60), None);
        let b = InFlight::new(store(&dir), Duration::from_secs(60), None); // another "process"
        let held = a.acquire("c1").await.unwrap();
        assert_eq!(store(&dir).keys(NAMESPACE).await.unwrap(), [key("c1")]);
        let waiting = tokio::time::timeout(Duration::from_millis(300), b.acquire("c1")).await;
        assert!(waiting.is_err(), "b waits while a holds the channel");
        let other = b.acquire("c2").await.unwrap();
        drop(held);
        tokio::time::timeout(Duration::from_secs(2), b.acquire("c1")).await.expect("b gets it once a lets go").unwrap();
        drop(other);
        assert_eq!(store(&dir).keys(NAMESPACE).await.unwrap(), Vec::<String>::new(), "nothing left behind");
    }

    #[tokio::test]
    async fn refreshing_keeps_a_long_turn_and_writes_only_when_due() {
        let dir = tempfile::tempdir().unwrap();
        // A TTL far longer than any stall of a busy machine between two lines of this test:
        // when a refresh is due is set below, not waited for, so nothing rests on timing.
        let ttl = 600.0;
        let a = InFlight::new(store(&dir), Duration::from_secs_f64(ttl), None);
        let mut held = a.acquire("c").await.unwrap();
        let state = store(&dir);
        let written = async || decode(&state.get(NAMESPACE, &key("c")).await.unwrap().unwrap()).unwrap().expires_at;
        let first = written().await;
        held.refresh().await;
        assert_eq!(written().await, first, "a fresh marker is not rewritten");
        // Once a quarter of the TTL has gone by, a refresh pushes the expiry a whole TTL ahead.
        held.marker.expires_at = unix_now() + ttl * 0.7;
        held.refresh().await;
        let refreshed = written().await;
        assert!(refreshed >= first && refreshed > unix_now() + ttl * 0.9, "{first} -> {refreshed}");
        // A live holder's marker is not taken over, however long the other waits.
        let b = InFlight::new(store(&dir), Duration::from_secs(60), None);
        let waiting = tokio::time::timeout(Duration::from_millis(300), b.acquire("c")).await;
        assert!(waiting.is_err(), "a refreshed marker is not taken over");
        drop(held);
        tokio::time::timeout(Duration::from_secs(10), b.acquire("c")).await.expect("released").unwrap();
    }

    #[tokio::test]
    async fn stale_markers_are_taken_over_and_their_old_holder_removes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let a = InFlight::new(store(&dir), Duration::from_millis(200), None);
        let held = a.acquire("c").await.unwrap();
        let b = InFlight::new(store(&dir), Duration::from_secs(60), None);
        let started = std::time::Instant::now();
        let taken = tokio::time::timeout(Duration::from_secs(2), b.acquire("c")).await.expect("taken over").unwrap();
        assert!(started.elapsed() >= Duration::from_millis(100), "not before the TTL, since a's pid is alive");
        // a's turn ends late: b's marker stays, and a refresh does not claim it back.
        let mut held = held;
        held.marker.expires_at = 0.0; // due
        held.refresh().await;
        drop(held);
        assert_eq!(decode(&store(&dir).get(NAMESPACE, &key("c")).await.unwrap().unwrap()).unwrap(), taken.marker);
        drop(taken);

        // A dead process's marker goes at once, whatever its TTL.
        let dead = Marker {
            channel: "d".into(),
            host: hostname(),
            pid: 999_999_999,
            nonce: "x".into(),
            expires_at: unix_now() + 3600.0,
            replica: None,
        };
        store(&dir).set(NAMESPACE, &key("d"), &encode(&dead)).await.unwrap();
        tokio::time::timeout(Duration::from_millis(500), b.acquire("d")).await.expect("dead owner").unwrap();
        // So does an unreadable one.
        store(&dir).set(NAMESPACE, &key("e"), "{half").await.unwrap();
        tokio::time::timeout(Duration::from_millis(500), b.acquire("e")).await.expect("corrupt").unwrap();
    }

    #[tokio::test]
    async fn release_with_writes_and_releases_in_one_go_and_only_our_marker() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (
            InFlight::new(store(&dir), Duration::from_millis(200), None),
            InFlight::new(store(&dir), Duration::from_secs(60), None),
        );
        let set = |value: &str| StateWrite::Set { ns: "h".into(), key: "messages".into(), value: value.into() };
        let mut held = a.acquire("c").await.unwrap();
        held.release_with(vec![set("1")]).await.unwrap();
        assert_eq!(store(&dir).get("h", "messages").await.unwrap().as_deref(), Some("1"));
        assert_eq!(store(&dir).keys(NAMESPACE).await.unwrap(), Vec::<String>::new(), "released");
        // The channel is free at once; dropping the released marker later removes nobody's.
        let other = tokio::time::timeout(Duration::from_millis(500), b.acquire("c")).await.expect("free").unwrap();
        drop(held);
        assert_eq!(decode(&store(&dir).get(NAMESPACE, &key("c")).await.unwrap().unwrap()).unwrap(), other.marker);
        drop(other);

        // Taken over as stale meanwhile: the writes are made, the taker's marker stays.
        let mut late = a.acquire("c").await.unwrap();
        let taken = tokio::time::timeout(Duration::from_secs(2), b.acquire("c")).await.expect("taken over").unwrap();
        late.release_with(vec![set("2")]).await.unwrap();
        assert_eq!(store(&dir).get("h", "messages").await.unwrap().as_deref(), Some("2"));
        assert_eq!(decode(&store(&dir).get(NAMESPACE, &key("c")).await.unwrap().unwrap()).unwrap(), taken.marker);
        drop(taken);

        // A refused batch writes nothing and keeps the marker, which the drop then removes.
        let mut refused = a.acquire("c").await.unwrap();
        let bad = StateWrite::Set { ns: "../h".into(), key: "k".into(), value: "v".into() };
        assert!(refused.release_with(vec![set("3"), bad]).await.is_err());
        assert_eq!(store(&dir).get("h", "messages").await.unwrap().as_deref(), Some("2"));
        assert_eq!(store(&dir).keys(NAMESPACE).await.unwrap().len(), 1, "still held");
        drop(refused);
        assert_eq!(store(&dir).keys(NAMESPACE).await.unwrap(), Vec::<String>::new());
    }

    #[test]
    fn keys_are_short_and_distinct_for_any_channel() {
        let long = "x".repeat(500);
        let keys: Vec<String> = ["a/b", "a_b", "", "C0123/thread:1.5", &long].iter().map(|c| key(c)).collect();
        assert!(keys.iter().all(|k| k.len() <= 57), "{keys:?}");
        assert_ne!(keys[0], keys[1]);
    }
}
