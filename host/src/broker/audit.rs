//! The record: an append-only, hash-chained log of what happened to every approval and
//! question, per agent, in the state store (SQLite or PostgreSQL alike).
//!
//! Each [`Record`] holds its agent's next sequence number and the hash of the record before
//! it; its own hash is SHA-256 over its JSON with `hash` empty. The agent's head (`head`: the
//! last sequence number and hash) moves only by compare-and-swap, after the record it names
//! was created (a key created once: of replicas racing for one sequence number exactly one
//! wins, and the others go round), so the chain cannot fork. A record created by an appender
//! that died before it moved the head is adopted by the next appender.
//!
//! [`Audit::verify`] walks the chain from its base (the genesis, or where retention pruned it)
//! to the head and names the first record changed, removed or out of place; a record removed
//! at the tail together with the head's own rewrite is caught only against a head kept
//! elsewhere (`--expect`, [`Head`]). Pruning past `human.audit_retention_days` is a record
//! itself.

use crate::store::{StateError, StateStore};
use serde::{Deserialize, Serialize};
use sha2::Digest as _;
use std::collections::HashMap;
use std::sync::{Arc, LazyLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The state namespaces of the record: this, then `.` and the agent's name (none for the
/// single top-level agent).
const NAMESPACE: &str = "skillhost.audit";
/// The head's key.
const HEAD: &str = "head";
/// Where the chain starts after pruning (the last record removed).
const BASE: &str = "base";
/// The hash before the first record.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";
/// How often an agent's record is checked for what retention removes (at most).
const PRUNE_EVERY: Duration = Duration::from_secs(3600);
/// How many appenders may race for one position before an append gives up.
const TRIES: usize = 64;

/// What happened, as recorded.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// The agent's sequence number, from 1.
    pub seq: u64,
    /// When (Unix milliseconds).
    pub at: u64,
    /// `opened`, `decided`, `expired`, `cancelled`, `consumed` (the call it covers ran);
    /// `promoted` (a call approved by auto-promotion: nobody asked, no entry); `pruned`.
    pub event: String,
    /// The approval or question's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entry: Option<String>,
    /// `approval` or `question`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The tool the approval is for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// SHA-256 of the call's canonical arguments (`broker::arguments_hash`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments_sha256: Option<String>,
    /// The surface that asked: `api`, `slack:<bot>`, `telegram:<bot>`, `mcp`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub surface: Option<String>,
    /// The run that asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// How it ended: `approved`, `denied`, `answered`, `timed_out`, `cancelled`; for
    /// `consumed`, how the call did: `completed`, `failed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
    /// For an approval with changed arguments: SHA-256 of the arguments the call runs with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edited_sha256: Option<String>,
    /// Who decided (`api`, `console`, the platform user, the MCP client; `promotion`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    /// The name of the API token the decision came with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// For `pruned`: the last sequence number removed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub through: Option<u64>,
    /// The hash of the record before (for the first, [`GENESIS`]).
    pub prev: String,
    /// This record's hash.
    pub hash: String,
}

impl Record {
    /// The record of `event` on `entry`, ended by `outcome` (its sequence, time and hashes
    /// are set when it is appended).
    pub fn of(entry: &super::Entry, event: &str, outcome: Option<&super::Outcome>) -> Record {
        let shown: serde_json::Value =
            entry.presentation.as_deref().and_then(|p| serde_json::from_str(p).ok()).unwrap_or_default();
        let text = |field: &str| shown.get(field).and_then(|v| v.as_str()).map(str::to_owned);
        let edited = match outcome {
            Some(super::Outcome::Approved(Some(arguments))) => serde_json::from_str(arguments).ok(),
            _ => None,
        };
        let decided = event == "decided";
        Record {
            event: event.into(),
            entry: Some(entry.id.clone()),
            kind: Some(entry.kind.as_str().into()),
            tool: text("tool_name"),
            arguments_sha256: text("arguments_sha256"),
            surface: Some(entry.surface.clone()),
            run_id: Some(entry.run_id.clone()),
            outcome: outcome.map(|o| o.name().into()),
            edited_sha256: edited.as_ref().map(super::arguments_hash),
            by: entry.decided_by.clone().filter(|_| decided),
            token: entry.decided_token.clone().filter(|_| decided),
            ..Record::default()
        }
    }

    /// The record of `event` on a call (`tool` with `input`) asked in `scope` that no entry
    /// read here describes: an approval by promotion, or the run that used one up.
    pub fn of_call(scope: &super::Scope, event: &str, (tool, input): (&str, &serde_json::Value)) -> Record {
        Record {
            event: event.into(),
            kind: Some(super::Kind::Approval.as_str().into()),
            tool: Some(tool.into()),
            arguments_sha256: Some(super::arguments_hash(input)),
            surface: Some(scope.surface.clone()),
            run_id: Some(scope.run_id.clone()),
            ..Record::default()
        }
    }

    /// What this record hashes to: SHA-256 of its JSON with `hash` empty.
    pub fn digest(&self) -> String {
        let unhashed = Record { hash: String::new(), ..self.clone() };
        hex::encode(sha2::Sha256::digest(serde_json::to_vec(&unhashed).expect("JSON serialises")))
    }
}

/// An agent's head: the last sequence number and its record's hash (`<seq>:<hash>`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Head {
    /// The last record's sequence number (0: none yet).
    pub seq: u64,
    /// Its hash.
    pub hash: String,
}

impl Head {
    fn genesis() -> Head {
        Head { seq: 0, hash: GENESIS.into() }
    }

    /// Reads `<seq>:<hash>`, as [`Head`]'s `Display` writes it.
    pub fn parse(text: &str) -> Option<Head> {
        let (seq, hash) = text.trim().split_once(':')?;
        let valid = hash.len() == 64 && hash.bytes().all(|b| b.is_ascii_hexdigit());
        valid.then(|| Some(Head { seq: seq.parse().ok()?, hash: hash.to_ascii_lowercase() })).flatten()
    }
}

impl std::fmt::Display for Head {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.seq, self.hash)
    }
}

/// Why the record could not be written, read or trusted.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    /// The state store failed.
    #[error("the state store: {0}")]
    Store(#[from] StateError),
    /// A stored record or head that does not parse.
    #[error("{0}")]
    Corrupt(String),
    /// Too many appenders raced for one position.
    #[error("too many appenders at once; not recorded")]
    Contended,
}

/// Why [`Audit::verify`] does not trust the chain: the first fault, by sequence number.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Broken {
    /// The record is not there.
    #[error("record {0} was removed")]
    Removed(u64),
    /// It does not hash to its own hash (its content was changed).
    #[error("record {0} was changed (it does not hash to its hash)")]
    Changed(u64),
    /// Another record stands in its place, or it does not follow the one before it (records
    /// swapped, or one changed together with its hash).
    #[error("record {0} is out of place (swapped, or changed together with its hash)")]
    OutOfPlace(u64),
    /// The head names a record that hashes otherwise.
    #[error("the head ({0}) does not name the last record")]
    Head(String),
    /// The chain ends before (or differs from) the head kept elsewhere.
    #[error("the chain's head is {found}, not the expected {expected} (records removed or rewritten at the tail)")]
    Expected {
        /// What the record's head says now.
        found: String,
        /// What was kept.
        expected: String,
    },
}

/// One agent's record.
#[derive(Debug, Clone)]
pub struct Audit {
    state: StateStore,
    ns: String,
    retention: Option<Duration>,
}

impl Audit {
    /// `agent`'s record in `state`, pruned past `retention` (none: kept for good).
    pub fn new(state: StateStore, agent: &str, retention: Option<Duration>) -> Audit {
        let ns = if agent.is_empty() { NAMESPACE.to_owned() } else { format!("{NAMESPACE}.{agent}") };
        Audit { state, ns, retention }
    }

    /// Appends `record` (its `seq`, `at`, `prev` and `hash` are set here); the record as kept.
    ///
    /// Appenders of one process take turns (a lock per store and agent), and each knows the
    /// head the last one left: an append is then two statements (the record's creation and the
    /// head's compare-and-swap), and appenders on other replicas meet only at the database.
    pub async fn append(&self, record: Record) -> Result<Record, AuditError> {
        let at = unix_millis(SystemTime::now());
        let turn = appenders(&format!("{}|{}", self.state.describe(), self.ns));
        let mut known = turn.lock().await;
        for _ in 0..TRIES {
            let (head_text, head) = match known.take() {
                Some(known) => known,
                None => self.head_raw().await?,
            };
            let mut next = Record { seq: head.seq + 1, at, prev: head.hash.clone(), ..record.clone() };
            next.hash = next.digest();
            let text = serde_json::to_string(&next).expect("JSON serialises");
            if self.state.create(&self.ns, &key(next.seq), &text).await? {
                *known = Some(self.move_head(head_text.as_deref(), &next).await?);
                drop(known);
                self.prune_when_due().await;
                return Ok(next);
            }
            // Another appender (another replica) holds this position: move the head there if
            // it did not, and go round from what the database says.
            let Some(theirs) = self.record(next.seq).await? else { continue };
            if theirs.prev == head.hash && theirs.digest() == theirs.hash {
                self.move_head(head_text.as_deref(), &theirs).await?;
            } else {
                return Err(AuditError::Corrupt(format!("record {} does not follow the head", theirs.seq)));
            }
        }
        Err(AuditError::Contended)
    }

    /// Appends `record`; one that cannot be appended is warned of (what it records stands).
    pub async fn append_or_warn(&self, record: Record) {
        let (event, entry) = (record.event.clone(), record.entry.clone().unwrap_or_default());
        if let Err(e) = self.append(record).await {
            tracing::warn!(ns = self.ns, event, entry, "cannot append to the record: {e}");
        }
    }

    /// The head as stored (its text, for a compare-and-swap) and read.
    async fn head_raw(&self) -> Result<(Option<String>, Head), AuditError> {
        let text = self.state.get(&self.ns, HEAD).await?;
        let head = match &text {
            Some(text) => serde_json::from_str(text).map_err(|e| AuditError::Corrupt(format!("the head: {e}")))?,
            None => Head::genesis(),
        };
        Ok((text, head))
    }

    /// Moves the head from `from` (its stored text; `None`: absent) to `record`; one that
    /// moved meanwhile is left where it is. The head as this appender now knows it: its text
    /// and value when the move took, else unknown (read again next time).
    async fn move_head(&self, from: Option<&str>, record: &Record) -> Result<(Option<String>, Head), AuditError> {
        let head = Head { seq: record.seq, hash: record.hash.clone() };
        let to = serde_json::to_string(&head).expect("JSON serialises");
        let moved = match from {
            Some(from) => self.state.replace_if(&self.ns, HEAD, from, &to).await?,
            None => self.state.create(&self.ns, HEAD, &to).await?,
        };
        match moved {
            true => Ok((Some(to), head)),
            false => self.head_raw().await,
        }
    }

    /// The head: the last record's sequence number and hash.
    pub async fn head(&self) -> Result<Head, AuditError> {
        Ok(self.head_raw().await?.1)
    }

    /// Record `seq`, if it is there.
    pub async fn record(&self, seq: u64) -> Result<Option<Record>, AuditError> {
        let Some(text) = self.state.get(&self.ns, &key(seq)).await? else { return Ok(None) };
        serde_json::from_str(&text).map(Some).map_err(|e| AuditError::Corrupt(format!("record {seq}: {e}")))
    }

    /// Where the chain starts: the last record pruned (the genesis when none was).
    async fn base(&self) -> Result<Head, AuditError> {
        match self.state.get(&self.ns, BASE).await? {
            Some(text) => serde_json::from_str(&text).map_err(|e| AuditError::Corrupt(format!("the base: {e}"))),
            None => Ok(Head::genesis()),
        }
    }

    /// Up to `limit` records after sequence number `after`, oldest first (pruned ones are
    /// skipped), and the head.
    pub async fn page(&self, after: u64, limit: usize) -> Result<(Vec<Record>, Head), AuditError> {
        let (head, base) = (self.head().await?, self.base().await?);
        let mut records = Vec::new();
        let mut seq = after.max(base.seq) + 1;
        while seq <= head.seq && records.len() < limit {
            if let Some(record) = self.record(seq).await? {
                records.push(record);
            }
            seq += 1;
        }
        Ok((records, head))
    }

    /// Walks the chain from its base to the head; with `expected` (a head kept elsewhere),
    /// also that the chain still reaches it. The head on success.
    pub async fn verify(&self, expected: Option<&Head>) -> Result<Result<Head, Broken>, AuditError> {
        let (head, base) = (self.head().await?, self.base().await?);
        let mut prev = base.hash.clone();
        let mut last = base.clone();
        for seq in base.seq + 1..=head.seq {
            let Some(record) = self.record(seq).await? else { return Ok(Err(Broken::Removed(seq))) };
            if record.seq != seq {
                return Ok(Err(Broken::OutOfPlace(seq)));
            }
            if record.digest() != record.hash {
                return Ok(Err(Broken::Changed(seq)));
            }
            if record.prev != prev {
                return Ok(Err(Broken::OutOfPlace(seq)));
            }
            prev = record.hash.clone();
            last = Head { seq, hash: record.hash };
        }
        if last != head {
            return Ok(Err(Broken::Head(head.to_string())));
        }
        if let Some(expected) = expected {
            let reaches = match expected.seq {
                seq if seq > head.seq => false,
                // Pruned since: it cannot be checked, unless it is the base itself.
                seq if seq < base.seq => true,
                seq if seq == base.seq => expected.hash == base.hash,
                seq => self.record(seq).await?.is_some_and(|r| r.hash == expected.hash),
            };
            if !reaches {
                return Ok(Err(Broken::Expected { found: head.to_string(), expected: expected.to_string() }));
            }
        }
        Ok(Ok(head))
    }

    /// Removes the records older than the retention, at most once an hour per process and
    /// agent; the removal is itself a record.
    async fn prune_when_due(&self) {
        let Some(retention) = self.retention else { return };
        if !due(&self.ns) {
            return;
        }
        if let Err(e) = self.prune(SystemTime::now() - retention).await {
            tracing::warn!(ns = self.ns, "cannot prune the audit record: {e}");
        }
    }

    /// Removes the records made before `before` (never the head), then records that it did;
    /// how many it removed.
    pub async fn prune(&self, before: SystemTime) -> Result<u64, AuditError> {
        let (head, base) = (self.head().await?, self.base().await?);
        let cutoff = unix_millis(before);
        let mut last: Option<Record> = None;
        for seq in base.seq + 1..head.seq {
            match self.record(seq).await? {
                Some(record) if record.at < cutoff => last = Some(record),
                _ => break,
            }
        }
        let Some(last) = last else { return Ok(0) };
        let removed = last.seq - base.seq;
        // The base first: a chain whose oldest records are gone still verifies from it.
        let to = serde_json::to_string(&Head { seq: last.seq, hash: last.hash.clone() }).expect("JSON serialises");
        self.state.set(&self.ns, BASE, &to).await?;
        for seq in base.seq + 1..=last.seq {
            self.state.delete(&self.ns, &key(seq)).await?;
        }
        let record = Record { event: "pruned".into(), through: Some(last.seq), ..Record::default() };
        Box::pin(self.append(record)).await?;
        Ok(removed)
    }
}

/// A record's key: its sequence number, zero-padded so that keys sort as numbers.
fn key(seq: u64) -> String {
    format!("r.{seq:020}")
}

fn unix_millis(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The head an appender left: its stored text (none: absent), and value.
type Known = Option<(Option<String>, Head)>;

/// The turn of this process's appenders to the record `key` (a store and an agent), with
/// the head the last of them left.
fn appenders(key: &str) -> Arc<tokio::sync::Mutex<Known>> {
    static TURNS: LazyLock<parking_lot::Mutex<HashMap<String, Arc<tokio::sync::Mutex<Known>>>>> =
        LazyLock::new(Default::default);
    TURNS.lock().entry(key.to_owned()).or_default().clone()
}

/// Whether namespace `ns` is due a retention check in this process (and marks it checked).
fn due(ns: &str) -> bool {
    static CHECKED: LazyLock<parking_lot::Mutex<HashMap<String, SystemTime>>> = LazyLock::new(Default::default);
    let now = SystemTime::now();
    let mut checked = CHECKED.lock();
    match checked.get(ns) {
        Some(at) if now.duration_since(*at).unwrap_or_default() < PRUNE_EVERY => false,
        _ => {
            checked.insert(ns.to_owned(), now);
            true
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opened(entry: &str) -> Record {
        Record { event: "opened".into(), entry: Some(entry.into()), ..Record::default() }
    }

    async fn chain(n: usize) -> (tempfile::TempDir, StateStore, Audit) {
        let dir = tempfile::tempdir().unwrap();
        let state = StateStore::new(dir.path());
        let audit = Audit::new(state.clone(), "ops", None);
        for i in 0..n {
            audit.append(opened(&format!("e{i}"))).await.unwrap();
        }
        (dir, state, audit)
    }

    #[tokio::test]
    async fn appends_chain_and_verify() {
        let (_dir, _state, audit) = chain(5).await;
        let head = audit.verify(None).await.unwrap().unwrap();
        assert_eq!(head.seq, 5);
        assert_eq!(audit.verify(Some(&head)).await.unwrap(), Ok(head.clone()));
        let (page, _) = audit.page(2, 2).await.unwrap();
        assert_eq!(page.iter().map(|r| r.seq).collect::<Vec<_>>(), [3, 4]);
        assert_eq!(page[1].prev, page[0].hash);
        assert_eq!(Head::parse(&head.to_string()), Some(head));
    }

    #[tokio::test]
    async fn concurrent_appenders_never_fork_the_chain() {
        let (_dir, _state, audit) = chain(0).await;
        let appends = (0..16).map(|i| {
            let audit = audit.clone();
            tokio::spawn(async move { audit.append(opened(&format!("c{i}"))).await.unwrap().seq })
        });
        let mut seqs: Vec<u64> = futures::future::join_all(appends).await.into_iter().map(Result::unwrap).collect();
        seqs.sort_unstable();
        assert_eq!(seqs, (1..=16).collect::<Vec<_>>());
        assert_eq!(audit.verify(None).await.unwrap().unwrap().seq, 16);
    }

    #[tokio::test]
    async fn an_edited_swapped_or_removed_record_is_named() {
        let (_dir, state, audit) = chain(4).await;
        let ns = "skillhost.audit.ops";
        let two = state.get(ns, &key(2)).await.unwrap().unwrap();
        state.set(ns, &key(2), &two.replace("\"e1\"", "\"ex\"")).await.unwrap();
        assert_eq!(audit.verify(None).await.unwrap(), Err(Broken::Changed(2)));
        state.set(ns, &key(2), &two).await.unwrap();
        let three = state.get(ns, &key(3)).await.unwrap().unwrap();
        state.set(ns, &key(2), &three).await.unwrap();
        state.set(ns, &key(3), &two).await.unwrap();
        assert_eq!(audit.verify(None).await.unwrap(), Err(Broken::OutOfPlace(2)));
        state.set(ns, &key(2), &two).await.unwrap();
        state.set(ns, &key(3), &three).await.unwrap();
        assert_eq!(audit.verify(None).await.unwrap().unwrap().seq, 4);
        state.delete(ns, &key(3)).await.unwrap();
        assert_eq!(audit.verify(None).await.unwrap(), Err(Broken::Removed(3)));
    }

    #[tokio::test]
    async fn pruning_is_recorded_and_the_rest_still_verifies() {
        let (_dir, _state, audit) = chain(3).await;
        let kept = audit.head().await.unwrap();
        tokio::time::sleep(Duration::from_millis(5)).await;
        assert_eq!(audit.prune(SystemTime::now()).await.unwrap(), 2, "never the head");
        let head = audit.verify(Some(&kept)).await.unwrap().unwrap();
        assert_eq!(head.seq, 4);
        let (records, _) = audit.page(0, 10).await.unwrap();
        assert_eq!(records.iter().map(|r| r.event.as_str()).collect::<Vec<_>>(), ["opened", "pruned"]);
        assert_eq!(records[1].through, Some(2));
    }
}
