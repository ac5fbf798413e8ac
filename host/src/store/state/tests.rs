//! What only the SQLite backend does: the old JSON files' import, and its locking. The
//! behaviour both backends share is tested on both by `host/tests/state_store.rs`.

use super::*;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// SQLite's futures finish on their first poll: no runtime needed.
fn b<T>(future: impl std::future::Future<Output = T>) -> T {
    futures::executor::block_on(future)
}

/// A reader of one namespace is not held up by another writer's open transaction: the
/// get completes while the writer (another store, as another process would be) still holds
/// its write lock.
#[test]
fn a_get_completes_while_another_write_transaction_is_open() {
    let dir = tempfile::tempdir().unwrap();
    let (writer, reader) = (StateStore::new(dir.path()), StateStore::new(dir.path()));
    b(reader.set("skill-b", "k", "v")).unwrap();
    let (inside_tx, inside_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let handle = std::thread::spawn(move || {
        b(writer.update("skill-a", "big", move |_| {
            inside_tx.send(()).unwrap();
            release_rx.recv_timeout(Duration::from_secs(30)).unwrap();
            Ok(Some("x".repeat(MAX_VALUE_BYTES)))
        }))
    });
    inside_rx.recv_timeout(Duration::from_secs(10)).unwrap();
    // A store opened only now (as a new process would) reads at once too.
    let fresh = StateStore::new(dir.path());
    let start = Instant::now();
    assert_eq!(b(reader.get("skill-b", "k")).unwrap().as_deref(), Some("v"));
    assert_eq!(b(fresh.get("skill-b", "k")).unwrap().as_deref(), Some("v"));
    let took = start.elapsed();
    assert!(!handle.is_finished(), "the write transaction is still open");
    release_tx.send(()).unwrap();
    handle.join().unwrap().unwrap();
    println!("get while another store's write transaction is open: {took:?}");
    assert!(took < Duration::from_secs(1), "the get waited for the writer: {took:?}");
}

#[test]
fn old_json_namespaces_are_imported_once_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let old_a = r#"{"k": "1", "other": "x"}"#;
    std::fs::write(dir.path().join("skill-a.json"), old_a).unwrap();
    std::fs::write(dir.path().join("history-cli-0123.json"), r#"{"messages": "[]"}"#).unwrap();
    std::fs::write(dir.path().join(".hidden.json"), "not a namespace, never read").unwrap();
    let s = StateStore::new(dir.path());
    assert_eq!(b(s.get("skill-a", "k")).unwrap().as_deref(), Some("1"));
    assert_eq!(b(s.keys("skill-a")).unwrap(), ["k", "other"]);
    assert_eq!(b(s.get("history-cli-0123", "messages")).unwrap().as_deref(), Some("[]"));
    assert_eq!(b(s.usage("skill-a")).unwrap(), (2, 8));
    b(s.delete("skill-a", "other")).unwrap();
    drop(s);
    // Reopened: the import does not run again, so the delete holds.
    let s = StateStore::new(dir.path());
    assert_eq!(b(s.keys("skill-a")).unwrap(), ["k"]);
    assert_eq!(std::fs::read_to_string(dir.path().join("skill-a.json")).unwrap(), old_a, "read-only");
}

/// A database made before schema versions were counted (the first schema, `user_version`
/// 0) is migrated when opened: its rows kept, expiring writes work. One a newer skillhost
/// migrated is refused.
#[test]
fn an_old_database_is_migrated_and_a_newer_one_refused() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join(db::FILE_NAME);
    {
        let conn = rusqlite::Connection::open(&file).unwrap();
        conn.execute_batch(db::SCHEMA).unwrap();
        conn.execute("INSERT INTO entries (ns, key, value, bytes) VALUES ('a', 'k', 'old', 4)", []).unwrap();
        conn.execute("INSERT INTO meta (name, value) VALUES ('json_import', '0')", []).unwrap();
    }
    let s = StateStore::new(dir.path());
    assert_eq!(b(s.get("a", "k")).unwrap().as_deref(), Some("old"));
    let quota = StateQuota { max_bytes: 100, max_keys: 10 };
    b(s.set_within("a", "e", "v", &quota, Expiry::Idle(Duration::from_secs(60)))).unwrap();
    assert_eq!(b(s.keys("a")).unwrap(), ["e", "k"]);
    assert_eq!(b(s.usage("a")).unwrap(), (2, 6));
    drop(s);
    let conn = rusqlite::Connection::open(&file).unwrap();
    let version: u32 = conn.query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
    assert_eq!(version, migrate::latest());
    conn.execute_batch("PRAGMA user_version = 99").unwrap();
    let err = b(StateStore::new(dir.path()).get("a", "k")).unwrap_err();
    assert!(err.to_string().contains("version 99") && err.to_string().contains("newer"), "{err}");
}

#[test]
fn a_corrupt_old_file_is_an_error_not_a_reset() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.json"), "{broken").unwrap();
    let s = StateStore::new(dir.path());
    let err = b(s.get("a", "k")).unwrap_err();
    assert!(matches!(&err, StateError::Other(m) if m.contains("corrupt") && m.contains("a.json")), "{err}");
    // Fixed, it is imported on the next use.
    std::fs::write(dir.path().join("a.json"), r#"{"k": "kept"}"#).unwrap();
    assert_eq!(b(s.get("a", "k")).unwrap().as_deref(), Some("kept"));
}

/// The cost of a get and a set on a namespace of 100 keys of 100 bytes (run with
/// `--nocapture` to see it): mean and median, since a WAL checkpoint (with its fsync) now
/// and then lands on one set.
#[test]
fn get_and_set_cost() {
    let dir = tempfile::tempdir().unwrap();
    let s = StateStore::new(dir.path());
    for i in 0..100 {
        b(s.set("bench", &format!("k{i}"), &"v".repeat(100))).unwrap();
    }
    let rounds = 2000;
    let time = |op: &dyn Fn(usize)| {
        let mut each: Vec<Duration> = (0..rounds)
            .map(|i| {
                let start = Instant::now();
                op(i);
                start.elapsed()
            })
            .collect();
        let mean = each.iter().sum::<Duration>() / rounds as u32;
        each.sort();
        (mean, each[rounds / 2])
    };
    let set = time(&|i| b(s.set("bench", &format!("k{}", i % 100), &format!("value {i}"))).unwrap());
    let get = time(&|i| assert!(b(s.get("bench", &format!("k{}", i % 100))).unwrap().is_some()));
    println!("state store: get mean {:?} median {:?}; set mean {:?} median {:?}", get.0, get.1, set.0, set.1);
    assert!(set.1 < Duration::from_millis(5) && get.1 < Duration::from_millis(5), "get {get:?}, set {set:?}");
}
