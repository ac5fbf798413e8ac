use super::*;
use std::sync::mpsc;
use std::time::{Duration, Instant};

#[test]
fn persists_across_instances_and_scopes_namespaces() {
    let dir = tempfile::tempdir().unwrap();
    let a = StateStore::new(dir.path());
    a.set("skill_a", "k", "1").unwrap();
    a.set("skill_b", "k", "2").unwrap();
    let b = StateStore::new(dir.path());
    assert_eq!(b.get("skill_a", "k").unwrap().as_deref(), Some("1"));
    assert_eq!(b.get("skill_b", "k").unwrap().as_deref(), Some("2"));
    b.delete("skill_a", "k").unwrap();
    b.delete("skill_a", "never-set").unwrap();
    assert_eq!(b.keys("skill_a").unwrap(), Vec::<String>::new());
    assert_eq!(StateStore::new(dir.path()).get("skill_a", "k").unwrap(), None);
}

#[test]
fn bad_keys_values_and_namespaces_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let s = StateStore::new(dir.path());
    assert!(matches!(s.set("a", "", "v"), Err(StateError::Invalid(_))));
    assert!(matches!(s.set("a", &"k".repeat(300), "v"), Err(StateError::Invalid(_))));
    assert!(matches!(s.set("a", "k", &"v".repeat(MAX_VALUE_BYTES + 1)), Err(StateError::Invalid(_))));
    for ns in ["../x", "", ".hidden", "a b"] {
        assert!(matches!(s.set(ns, "k", "v"), Err(StateError::Invalid(_))), "{ns}");
        assert!(matches!(s.get(ns, "k"), Err(StateError::Invalid(_))), "{ns}");
    }
    let too_big = s.update("a", "k", |_| Ok(Some("v".repeat(MAX_VALUE_BYTES + 1))));
    assert!(matches!(too_big, Err(StateError::Invalid(_))));
    assert_eq!(s.get("a", "k").unwrap(), None, "a refused update writes nothing");
}

#[test]
fn keys_are_sorted_bytewise() {
    let dir = tempfile::tempdir().unwrap();
    let s = StateStore::new(dir.path());
    for key in ["b", "a", "B", "é", "a\0x"] {
        s.set("ns", key, "v").unwrap();
    }
    assert_eq!(s.keys("ns").unwrap(), ["B", "a", "a\0x", "b", "é"]);
}

/// Two stores on one directory are two independent sets of connections, as two processes
/// would be: each reads what the other wrote at once, with no reopening.
#[test]
fn two_stores_on_one_directory_see_each_other_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (StateStore::new(dir.path()), StateStore::new(dir.path()));
    assert_eq!(a.get("ns", "k").unwrap(), None);
    assert_eq!(b.get("ns", "k").unwrap(), None);
    a.set("ns", "k", "from a").unwrap();
    assert_eq!(b.get("ns", "k").unwrap().as_deref(), Some("from a"));
    b.set("ns", "k", "from b").unwrap();
    assert_eq!(a.get("ns", "k").unwrap().as_deref(), Some("from b"));
    b.delete("ns", "k").unwrap();
    assert_eq!(a.keys("ns").unwrap(), Vec::<String>::new());
}

#[test]
fn concurrent_updates_through_two_stores_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let stores = [StateStore::new(dir.path()), StateStore::new(dir.path())];
    let (threads, rounds) = (4, 100);
    std::thread::scope(|scope| {
        for t in 0..threads {
            let store = stores[t % 2].clone();
            scope.spawn(move || {
                for _ in 0..rounds {
                    store
                        .update("counters", "n", |old| {
                            let n: u64 = old.as_deref().unwrap_or("0").parse().unwrap();
                            Ok(Some((n + 1).to_string()))
                        })
                        .unwrap();
                }
            });
        }
    });
    assert_eq!(stores[0].get("counters", "n").unwrap(), Some((threads * rounds).to_string()));
    assert_eq!(stores[1].update("counters", "n", |_| Ok(None)).unwrap(), None);
    assert_eq!(stores[0].get("counters", "n").unwrap(), None);
}

/// A reader of one namespace is not held up by another writer's open transaction: the
/// get completes while the writer (another store, as another process would be) still holds
/// its write lock.
#[test]
fn a_get_completes_while_another_write_transaction_is_open() {
    let dir = tempfile::tempdir().unwrap();
    let (writer, reader) = (StateStore::new(dir.path()), StateStore::new(dir.path()));
    reader.set("skill-b", "k", "v").unwrap();
    let (inside_tx, inside_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let handle = std::thread::spawn(move || {
        writer.update("skill-a", "big", |_| {
            inside_tx.send(()).unwrap();
            release_rx.recv_timeout(Duration::from_secs(30)).unwrap();
            Ok(Some("x".repeat(MAX_VALUE_BYTES)))
        })
    });
    inside_rx.recv_timeout(Duration::from_secs(10)).unwrap();
    // A store opened only now (as a new process would) reads at once too.
    let fresh = StateStore::new(dir.path());
    let start = Instant::now();
    assert_eq!(reader.get("skill-b", "k").unwrap().as_deref(), Some("v"));
    assert_eq!(fresh.get("skill-b", "k").unwrap().as_deref(), Some("v"));
    let took = start.elapsed();
    assert!(!handle.is_finished(), "the write transaction is still open");
    release_tx.send(()).unwrap();
    handle.join().unwrap().unwrap();
    println!("get while another store's write transaction is open: {took:?}");
    assert!(took < Duration::from_secs(1), "the get waited for the writer: {took:?}");
}

#[test]
fn quotas_bound_keys_and_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let s = StateStore::new(dir.path());
    let quota = StateQuota { max_bytes: 100, max_keys: 3 };
    for key in ["a", "b", "c"] {
        s.set_within("ns", key, &"v".repeat(9), &quota).unwrap();
    }
    assert_eq!(s.usage("ns").unwrap(), (3, 30));
    let keys = s.set_within("ns", "d", "v", &quota).unwrap_err();
    assert!(matches!(&keys, StateError::Invalid(m) if m.contains("3 keys") && m.contains("state_quota_keys")));
    // Replacing counts only the difference.
    s.set_within("ns", "a", &"v".repeat(79), &quota).unwrap();
    assert_eq!(s.usage("ns").unwrap(), (3, 100));
    let bytes = s.set_within("ns", "b", &"v".repeat(10), &quota).unwrap_err();
    assert!(matches!(&bytes, StateError::Invalid(m) if m.contains("100 bytes") && m.contains("state_quota_mb")));
    assert_eq!(s.get("ns", "b").unwrap().unwrap().len(), 9, "nothing written");
    s.delete("ns", "a").unwrap();
    s.set_within("ns", "d", "v", &quota).unwrap();
    assert_eq!(s.usage("ns").unwrap(), (3, 22));
    assert_eq!(s.usage("other").unwrap(), (0, 0), "quotas are per namespace");
}

#[test]
fn old_json_namespaces_are_imported_once_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let old_a = r#"{"k": "1", "other": "x"}"#;
    std::fs::write(dir.path().join("skill-a.json"), old_a).unwrap();
    std::fs::write(dir.path().join("history-cli-0123.json"), r#"{"messages": "[]"}"#).unwrap();
    std::fs::write(dir.path().join(".hidden.json"), "not a namespace, never read").unwrap();
    let s = StateStore::new(dir.path());
    assert_eq!(s.get("skill-a", "k").unwrap().as_deref(), Some("1"));
    assert_eq!(s.keys("skill-a").unwrap(), ["k", "other"]);
    assert_eq!(s.get("history-cli-0123", "messages").unwrap().as_deref(), Some("[]"));
    assert_eq!(s.usage("skill-a").unwrap(), (2, 8));
    s.delete("skill-a", "other").unwrap();
    drop(s);
    // Reopened: the import does not run again, so the delete holds.
    let s = StateStore::new(dir.path());
    assert_eq!(s.keys("skill-a").unwrap(), ["k"]);
    assert_eq!(std::fs::read_to_string(dir.path().join("skill-a.json")).unwrap(), old_a, "read-only");
}

#[test]
fn a_corrupt_old_file_is_an_error_not_a_reset() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.json"), "{broken").unwrap();
    let s = StateStore::new(dir.path());
    let err = s.get("a", "k").unwrap_err();
    assert!(matches!(&err, StateError::Other(m) if m.contains("corrupt") && m.contains("a.json")), "{err}");
    // Fixed, it is imported on the next use.
    std::fs::write(dir.path().join("a.json"), r#"{"k": "kept"}"#).unwrap();
    assert_eq!(s.get("a", "k").unwrap().as_deref(), Some("kept"));
}

/// The cost of a get and a set on a namespace of 100 keys of 100 bytes (run with
/// `--nocapture` to see it): mean and median, since a WAL checkpoint (with its fsync) now
/// and then lands on one set.
#[test]
fn get_and_set_cost() {
    let dir = tempfile::tempdir().unwrap();
    let s = StateStore::new(dir.path());
    for i in 0..100 {
        s.set("bench", &format!("k{i}"), &"v".repeat(100)).unwrap();
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
    let set = time(&|i| s.set("bench", &format!("k{}", i % 100), &format!("value {i}")).unwrap());
    let get = time(&|i| assert!(s.get("bench", &format!("k{}", i % 100)).unwrap().is_some()));
    println!("state store: get mean {:?} median {:?}; set mean {:?} median {:?}", get.0, get.1, set.0, set.1);
    assert!(set.1 < Duration::from_millis(5) && get.1 < Duration::from_millis(5), "get {get:?}, set {set:?}");
}

#[test]
fn create_sets_only_an_absent_key_and_delete_if_only_a_matching_value() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (StateStore::new(dir.path()), StateStore::new(dir.path()));
    assert!(a.create("ns", "k", "a").unwrap());
    assert!(!b.create("ns", "k", "b").unwrap(), "the key is taken");
    assert_eq!(b.get("ns", "k").unwrap().as_deref(), Some("a"));
    assert_eq!(a.usage("ns").unwrap(), (1, 2), "a refused create counts nothing");
    assert!(!b.delete_if("ns", "k", "b").unwrap(), "not b's value");
    assert_eq!(a.get("ns", "k").unwrap().as_deref(), Some("a"));
    assert!(a.delete_if("ns", "k", "a").unwrap());
    assert_eq!(a.usage("ns").unwrap(), (0, 0));
    assert!(!a.delete_if("ns", "k", "a").unwrap(), "already gone");
    assert!(b.create("ns", "k", "b").unwrap(), "free again");
    assert!(matches!(a.create("ns", "", "v"), Err(StateError::Invalid(_))));

    // Of many racing creators, exactly one wins.
    let won: usize = std::thread::scope(|scope| {
        let racers: Vec<_> = (0..8)
            .map(|i| {
                let store = StateStore::new(dir.path());
                scope.spawn(move || usize::from(store.create("race", "k", &i.to_string()).unwrap()))
            })
            .collect();
        racers.into_iter().map(|r| r.join().unwrap()).sum()
    });
    assert_eq!(won, 1);
}

#[test]
fn replace_if_sets_only_over_the_expected_value() {
    let dir = tempfile::tempdir().unwrap();
    let s = StateStore::new(dir.path());
    assert!(!s.replace_if("ns", "k", "a", "b").unwrap(), "nothing to replace");
    assert_eq!(s.get("ns", "k").unwrap(), None);
    s.set("ns", "k", "a").unwrap();
    assert!(!s.replace_if("ns", "k", "x", "b").unwrap(), "not the expected value");
    assert_eq!(s.get("ns", "k").unwrap().as_deref(), Some("a"));
    assert!(s.replace_if("ns", "k", "a", "bbb").unwrap());
    assert_eq!(s.get("ns", "k").unwrap().as_deref(), Some("bbb"));
    assert_eq!(s.usage("ns").unwrap(), (1, 4), "usage follows the new value");
    assert!(matches!(s.replace_if("ns", "k", "bbb", &"v".repeat(MAX_VALUE_BYTES + 1)), Err(StateError::Invalid(_))));
}

#[test]
fn apply_writes_in_order_and_checks_every_write_first() {
    let dir = tempfile::tempdir().unwrap();
    let s = StateStore::new(dir.path());
    let set =
        |ns: &str, key: &str, value: &str| StateWrite::Set { ns: ns.into(), key: key.into(), value: value.into() };
    let delete_if =
        |ns: &str, key: &str, value: &str| StateWrite::DeleteIf { ns: ns.into(), key: key.into(), value: value.into() };
    s.set("m", "marker", "mine").unwrap();
    s.apply(&[set("h", "messages", "[1]"), set("h", "loaded", "[]"), delete_if("m", "marker", "mine")]).unwrap();
    assert_eq!(s.get("h", "messages").unwrap().as_deref(), Some("[1]"));
    assert_eq!(s.get("h", "loaded").unwrap().as_deref(), Some("[]"));
    assert_eq!(s.get("m", "marker").unwrap(), None, "the matching marker is removed");
    assert_eq!(s.usage("h").unwrap(), (2, 19), "usage follows batched writes");

    // A marker that is not ours stays; the rest of the batch is written.
    s.set("m", "marker", "theirs").unwrap();
    s.apply(&[set("h", "messages", "[2]"), delete_if("m", "marker", "mine")]).unwrap();
    assert_eq!(s.get("h", "messages").unwrap().as_deref(), Some("[2]"));
    assert_eq!(s.get("m", "marker").unwrap().as_deref(), Some("theirs"));

    // Later writes see earlier ones.
    s.apply(&[set("o", "k", "a"), delete_if("o", "k", "a"), set("o", "j", "b")]).unwrap();
    assert_eq!(s.keys("o").unwrap(), ["j"]);

    // One bad write: nothing of the batch is written.
    let too_big = "v".repeat(MAX_VALUE_BYTES + 1);
    let refused = s.apply(&[set("h", "messages", "[3]"), delete_if("m", "marker", "theirs"), set("h", "x", &too_big)]);
    assert!(matches!(refused, Err(StateError::Invalid(_))));
    assert!(matches!(s.apply(&[set("h", "messages", "[3]"), set("../x", "k", "v")]), Err(StateError::Invalid(_))));
    assert_eq!(s.get("h", "messages").unwrap().as_deref(), Some("[2]"));
    assert_eq!(s.get("m", "marker").unwrap().as_deref(), Some("theirs"));
    s.apply(&[]).unwrap();
}
