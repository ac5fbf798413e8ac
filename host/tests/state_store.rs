//! The state store's behaviour, with the same assertions on both backends: SQLite (a state
//! directory) and PostgreSQL (a throwaway cluster, Debian's PostgreSQL 15). Each case gets a
//! fresh database and opens it as many times as it needs: two stores on one database are two
//! processes (or two replicas), with connections of their own.

#[macro_use]
mod suite;

use skillhost::store::state::postgres::{self, Postgres, Settings};
use skillhost::store::state::{Expiry, MAX_VALUE_BYTES, StateError, StateQuota, StateStore, StateWrite};
use std::sync::Arc;
use std::time::{Duration, Instant};
use suite::{Case, run};

/// Opens the case's database once more: a new store, as a new process would.
type Open = Arc<dyn Fn() -> StateStore + Send + Sync>;

const CASES: &[Case<Open>] = cases![
    persists_across_stores_and_scopes_namespaces,
    bad_keys_values_and_namespaces_are_refused,
    keys_are_sorted_bytewise,
    two_stores_see_each_other_at_once,
    concurrent_updates_through_two_stores_lose_nothing,
    quotas_bound_keys_and_bytes,
    concurrent_writers_cannot_pass_a_quota_together,
    create_sets_only_an_absent_key_and_delete_if_only_a_matching_value,
    replace_if_sets_only_over_the_expected_value,
    apply_writes_in_order_and_checks_every_write_first,
    a_get_completes_while_another_store_holds_a_write_open,
    idle_entries_expire_unless_touched_and_free_their_quota,
    an_mcp_skills_acceptance_is_shared_by_replicas,
];

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn on_sqlite() {
    for (name, case) in CASES {
        let dir = Arc::new(tempfile::tempdir().unwrap());
        let open: Open = Arc::new(move || StateStore::new(dir.path()));
        run(name, case(open)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn on_postgres() {
    let pg = skillhost_tests::postgres::Postgres::start();
    for (i, (name, case)) in CASES.iter().enumerate() {
        let db = format!("case{i}");
        pg.psql("postgres", &format!("CREATE DATABASE {db}"));
        let url = pg.url("postgres", &db);
        let open: Open = Arc::new(move || postgres(&url));
        run(name, case(open)).await;
    }

    // Replicas starting at once on a new database: one migrates, none fails.
    pg.psql("postgres", "CREATE DATABASE fresh");
    let url = pg.url("postgres", "fresh");
    let starts: Vec<_> = (0..6)
        .map(|i| {
            let store = postgres(&url);
            tokio::spawn(async move { store.set("ns", &format!("k{i}"), "v").await })
        })
        .collect();
    for start in starts {
        start.await.unwrap().unwrap();
    }
    assert_eq!(postgres(&url).keys("ns").await.unwrap().len(), 6);
    let versions = pg.psql("fresh", "SELECT count(*) FROM skillhost_schema");
    assert_eq!(versions.trim(), postgres::MIGRATIONS.len().to_string(), "migrated once");

    // A database a newer skillhost migrated is refused, not written.
    pg.psql("fresh", "INSERT INTO skillhost_schema (version, name) VALUES (999, 'from the future')");
    let refused = postgres(&url).set("ns", "k", "v").await.unwrap_err().to_string();
    assert!(refused.contains("version 999") && refused.contains("newer"), "{refused}");

    // Nothing listening: a clear error naming the database (never its password), soon.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let config = skillhost::config::PostgresState {
        url: Some(format!("postgres://me:secret@127.0.0.1:{port}/db?sslmode=disable")),
        connect_timeout_seconds: Some(2),
        ..Default::default()
    };
    let gone =
        StateStore::with_backend(Postgres::connect(Settings::from_config(Some(&config), |_| None).unwrap()).unwrap());
    let error = gone.get("ns", "k").await.unwrap_err().to_string();
    assert!(error.contains(&format!("postgres://me@127.0.0.1:{port}/db")) && error.contains("unreachable"), "{error}");
    assert!(!error.contains("secret"), "{error}");
    assert!(gone.ping().await.is_err());
}

/// A store with a pool of its own on `url`.
fn postgres(url: &str) -> StateStore {
    let config = skillhost::config::PostgresState { url: Some(url.into()), ..Default::default() };
    let settings = Settings::from_config(Some(&config), |_| None).unwrap();
    StateStore::with_backend(Postgres::connect(settings).unwrap())
}

async fn persists_across_stores_and_scopes_namespaces(open: Open) {
    let a = open();
    a.set("skill_a", "k", "1").await.unwrap();
    a.set("skill_b", "k", "2").await.unwrap();
    let b = open();
    assert_eq!(b.get("skill_a", "k").await.unwrap().as_deref(), Some("1"));
    assert_eq!(b.get("skill_b", "k").await.unwrap().as_deref(), Some("2"));
    b.delete("skill_a", "k").await.unwrap();
    b.delete("skill_a", "never-set").await.unwrap();
    assert_eq!(b.keys("skill_a").await.unwrap(), Vec::<String>::new());
    assert_eq!(open().get("skill_a", "k").await.unwrap(), None);
    a.ping().await.unwrap();
}

async fn bad_keys_values_and_namespaces_are_refused(open: Open) {
    let s = open();
    assert!(matches!(s.set("a", "", "v").await, Err(StateError::Invalid(_))));
    assert!(matches!(s.set("a", &"k".repeat(300), "v").await, Err(StateError::Invalid(_))));
    assert!(matches!(s.set("a", "k", &"v".repeat(MAX_VALUE_BYTES + 1)).await, Err(StateError::Invalid(_))));
    for ns in ["../x", "", ".hidden", "a b"] {
        assert!(matches!(s.set(ns, "k", "v").await, Err(StateError::Invalid(_))), "{ns}");
        assert!(matches!(s.get(ns, "k").await, Err(StateError::Invalid(_))), "{ns}");
    }
    let too_big = s.update("a", "k", |_| Ok(Some("v".repeat(MAX_VALUE_BYTES + 1)))).await;
    assert!(matches!(too_big, Err(StateError::Invalid(_))));
    assert_eq!(s.get("a", "k").await.unwrap(), None, "a refused update writes nothing");
    // The largest value, and a value with a NUL byte, are kept whole.
    let largest = "v".repeat(MAX_VALUE_BYTES);
    s.set("a", "big", &largest).await.unwrap();
    assert_eq!(s.get("a", "big").await.unwrap().as_deref(), Some(&*largest));
    s.set("a", "nul\0key", "nul\0value").await.unwrap();
    assert_eq!(s.get("a", "nul\0key").await.unwrap().as_deref(), Some("nul\0value"));
}

async fn keys_are_sorted_bytewise(open: Open) {
    let s = open();
    for key in ["b", "a", "B", "é", "a\0x"] {
        s.set("ns", key, "v").await.unwrap();
    }
    assert_eq!(s.keys("ns").await.unwrap(), ["B", "a", "a\0x", "b", "é"]);
}

async fn two_stores_see_each_other_at_once(open: Open) {
    let (a, b) = (open(), open());
    assert_eq!(a.get("ns", "k").await.unwrap(), None);
    assert_eq!(b.get("ns", "k").await.unwrap(), None);
    a.set("ns", "k", "from a").await.unwrap();
    assert_eq!(b.get("ns", "k").await.unwrap().as_deref(), Some("from a"));
    b.set("ns", "k", "from b").await.unwrap();
    assert_eq!(a.get("ns", "k").await.unwrap().as_deref(), Some("from b"));
    b.delete("ns", "k").await.unwrap();
    assert_eq!(a.keys("ns").await.unwrap(), Vec::<String>::new());
}

/// The manifest an MCP server's skill was first seen with (`mcp_servers.<name>.skills`) is
/// accepted once, whichever replica lists it first, even at once; a changed one is refused on
/// every replica until one accepts it (`skillhost skill accept`).
async fn an_mcp_skills_acceptance_is_shared_by_replicas(open: Open) {
    use skillhost::mcp::rmcp::model::{Skill, SkillFrontmatter, SkillResource, SkillResources};
    use skillhost::mcp::skills::{Standing, accept, standing};
    let skill = |body: &[u8]| {
        let files = vec![SkillResource::from_bytes("skill://pdf/SKILL.md", body)];
        Skill::new("skill://pdf/SKILL.md", SkillFrontmatter::new("pdf", "PDFs"), SkillResources::Files(files))
    };
    let (a, b) = (open(), open());
    let first = skill(b"v1");
    let seen = (0..8).map(|i| {
        let (store, first) = (if i % 2 == 0 { a.clone() } else { b.clone() }, first.clone());
        tokio::spawn(async move { standing(&store, "docs", &first).await.unwrap() })
    });
    let seen: Vec<Standing> = futures::future::join_all(seen).await.into_iter().map(Result::unwrap).collect();
    assert_eq!(seen.iter().filter(|s| **s == Standing::FirstSeen).count(), 1, "{seen:?}");
    let changed = skill(b"v2");
    for store in [&a, &b] {
        let refused = standing(store, "docs", &changed).await.unwrap_err().to_string();
        assert!(refused.contains("skillhost skill accept docs pdf"), "{refused}");
    }
    assert!(accept(&a, "docs", &changed).await.unwrap().unwrap().contains("changed skill://pdf/SKILL.md"));
    assert_eq!(standing(&b, "docs", &changed).await, Ok(Standing::Accepted));
    assert!(standing(&b, "docs", &first).await.is_err(), "the old one is no longer accepted");
}

/// Read-modify-writes from tasks on two stores, on a key that does not exist yet: no
/// increment is lost, the first ones included (their creates race).
async fn concurrent_updates_through_two_stores_lose_nothing(open: Open) {
    let stores = [open(), open()];
    let (tasks, rounds) = (8, 50);
    let mut handles = Vec::new();
    for t in 0..tasks {
        let store = stores[t % 2].clone();
        handles.push(tokio::spawn(async move {
            for _ in 0..rounds {
                store
                    .update("counters", "n", |old| {
                        let n: u64 = old.as_deref().unwrap_or("0").parse().unwrap();
                        Ok(Some((n + 1).to_string()))
                    })
                    .await
                    .unwrap();
            }
        }));
    }
    for handle in handles {
        handle.await.unwrap();
    }
    assert_eq!(stores[0].get("counters", "n").await.unwrap(), Some((tasks * rounds).to_string()));
    assert_eq!(stores[1].update("counters", "n", |_| Ok(None)).await.unwrap(), None);
    assert_eq!(stores[0].get("counters", "n").await.unwrap(), None);
    assert_eq!(stores[0].usage("counters").await.unwrap(), (0, 0));
}

async fn quotas_bound_keys_and_bytes(open: Open) {
    let s = open();
    let quota = StateQuota { max_bytes: 100, max_keys: 3 };
    for key in ["a", "b", "c"] {
        s.set_within("ns", key, &"v".repeat(9), &quota, NEVER).await.unwrap();
    }
    assert_eq!(s.usage("ns").await.unwrap(), (3, 30));
    let keys = s.set_within("ns", "d", "v", &quota, NEVER).await.unwrap_err();
    assert!(matches!(&keys, StateError::Invalid(m) if m.contains("3 keys") && m.contains("state_quota_keys")));
    // Replacing counts only the difference.
    s.set_within("ns", "a", &"v".repeat(79), &quota, NEVER).await.unwrap();
    assert_eq!(s.usage("ns").await.unwrap(), (3, 100));
    let bytes = s.set_within("ns", "b", &"v".repeat(10), &quota, NEVER).await.unwrap_err();
    assert!(matches!(&bytes, StateError::Invalid(m) if m.contains("100 bytes") && m.contains("state_quota_mb")));
    assert_eq!(s.get("ns", "b").await.unwrap().unwrap().len(), 9, "nothing written");
    s.delete("ns", "a").await.unwrap();
    s.set_within("ns", "d", "v", &quota, NEVER).await.unwrap();
    assert_eq!(s.usage("ns").await.unwrap(), (3, 22));
    assert_eq!(s.usage("other").await.unwrap(), (0, 0), "quotas are per namespace");
    // A quota lowered below what the namespace holds still lets it shrink.
    let lowered = StateQuota { max_bytes: 1, max_keys: 1 };
    s.set_within("ns", "b", "v", &lowered, NEVER).await.unwrap();
    assert!(s.set_within("ns", "e", "v", &lowered, NEVER).await.is_err());
}

/// Forty writers of new keys on two stores at once, a quota of ten keys: exactly ten
/// succeed, whichever store they use.
async fn concurrent_writers_cannot_pass_a_quota_together(open: Open) {
    let stores = [open(), open()];
    let quota = StateQuota { max_bytes: 1 << 20, max_keys: 10 };
    let handles: Vec<_> = (0..40)
        .map(|i| {
            let store = stores[i % 2].clone();
            tokio::spawn(async move { store.set_within("q", &format!("k{i}"), "v", &quota, NEVER).await })
        })
        .collect();
    let mut written = 0;
    for handle in handles {
        match handle.await.unwrap() {
            Ok(()) => written += 1,
            Err(StateError::Invalid(m)) => assert!(m.contains("10 keys"), "{m}"),
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(written, 10);
    assert_eq!(stores[1].usage("q").await.unwrap().0, 10);
    assert_eq!(stores[0].keys("q").await.unwrap().len(), 10);
}

async fn create_sets_only_an_absent_key_and_delete_if_only_a_matching_value(open: Open) {
    let (a, b) = (open(), open());
    assert!(a.create("ns", "k", "a").await.unwrap());
    assert!(!b.create("ns", "k", "b").await.unwrap(), "the key is taken");
    assert_eq!(b.get("ns", "k").await.unwrap().as_deref(), Some("a"));
    assert_eq!(a.usage("ns").await.unwrap(), (1, 2), "a refused create counts nothing");
    assert!(!b.delete_if("ns", "k", "b").await.unwrap(), "not b's value");
    assert_eq!(a.get("ns", "k").await.unwrap().as_deref(), Some("a"));
    assert!(a.delete_if("ns", "k", "a").await.unwrap());
    assert_eq!(a.usage("ns").await.unwrap(), (0, 0));
    assert!(!a.delete_if("ns", "k", "a").await.unwrap(), "already gone");
    assert!(b.create("ns", "k", "b").await.unwrap(), "free again");
    assert!(matches!(a.create("ns", "", "v").await, Err(StateError::Invalid(_))));

    // Of many racing creators, each on a store of its own, exactly one wins.
    let racers: Vec<_> = (0..8)
        .map(|i| {
            let store = open();
            tokio::spawn(async move { usize::from(store.create("race", "k", &i.to_string()).await.unwrap()) })
        })
        .collect();
    let mut won = 0;
    for racer in racers {
        won += racer.await.unwrap();
    }
    assert_eq!(won, 1);
}

async fn replace_if_sets_only_over_the_expected_value(open: Open) {
    let s = open();
    assert!(!s.replace_if("ns", "k", "a", "b").await.unwrap(), "nothing to replace");
    assert_eq!(s.get("ns", "k").await.unwrap(), None);
    s.set("ns", "k", "a").await.unwrap();
    assert!(!s.replace_if("ns", "k", "x", "b").await.unwrap(), "not the expected value");
    assert_eq!(s.get("ns", "k").await.unwrap().as_deref(), Some("a"));
    assert!(s.replace_if("ns", "k", "a", "bbb").await.unwrap());
    assert_eq!(s.get("ns", "k").await.unwrap().as_deref(), Some("bbb"));
    assert_eq!(s.usage("ns").await.unwrap(), (1, 4), "usage follows the new value");
    let too_big = "v".repeat(MAX_VALUE_BYTES + 1);
    assert!(matches!(s.replace_if("ns", "k", "bbb", &too_big).await, Err(StateError::Invalid(_))));
}

async fn apply_writes_in_order_and_checks_every_write_first(open: Open) {
    let s = open();
    let set =
        |ns: &str, key: &str, value: &str| StateWrite::Set { ns: ns.into(), key: key.into(), value: value.into() };
    let delete_if =
        |ns: &str, key: &str, value: &str| StateWrite::DeleteIf { ns: ns.into(), key: key.into(), value: value.into() };
    s.set("m", "marker", "mine").await.unwrap();
    s.apply(&[set("h", "messages", "[1]"), set("h", "loaded", "[]"), delete_if("m", "marker", "mine")]).await.unwrap();
    assert_eq!(s.get("h", "messages").await.unwrap().as_deref(), Some("[1]"));
    assert_eq!(s.get("h", "loaded").await.unwrap().as_deref(), Some("[]"));
    assert_eq!(s.get("m", "marker").await.unwrap(), None, "the matching marker is removed");
    assert_eq!(s.usage("h").await.unwrap(), (2, 19), "usage follows batched writes");

    // A marker that is not ours stays; the rest of the batch is written.
    s.set("m", "marker", "theirs").await.unwrap();
    s.apply(&[set("h", "messages", "[2]"), delete_if("m", "marker", "mine")]).await.unwrap();
    assert_eq!(s.get("h", "messages").await.unwrap().as_deref(), Some("[2]"));
    assert_eq!(s.get("m", "marker").await.unwrap().as_deref(), Some("theirs"));

    // Later writes see earlier ones.
    s.apply(&[set("o", "k", "a"), delete_if("o", "k", "a"), set("o", "j", "b")]).await.unwrap();
    assert_eq!(s.keys("o").await.unwrap(), ["j"]);

    // One bad write: nothing of the batch is written.
    let too_big = "v".repeat(MAX_VALUE_BYTES + 1);
    let refused =
        s.apply(&[set("h", "messages", "[3]"), delete_if("m", "marker", "theirs"), set("h", "x", &too_big)]).await;
    assert!(matches!(refused, Err(StateError::Invalid(_))));
    let refused = s.apply(&[set("h", "messages", "[3]"), set("../x", "k", "v")]).await;
    assert!(matches!(refused, Err(StateError::Invalid(_))));
    assert_eq!(s.get("h", "messages").await.unwrap().as_deref(), Some("[2]"));
    assert_eq!(s.get("m", "marker").await.unwrap().as_deref(), Some("theirs"));
    s.apply(&[]).await.unwrap();

    // Batches from two stores at once, each moving a token between two keys: every batch
    // is whole, so the two keys always hold the token once between them.
    let (a, b) = (open(), open());
    a.set("t", "left", "token").await.unwrap();
    let moves: Vec<_> = [a, b]
        .into_iter()
        .enumerate()
        .map(|(i, store)| {
            tokio::spawn(async move {
                for _ in 0..25 {
                    let batch = if i == 0 {
                        [set("t", "right", "token"), delete_if("t", "left", "token")]
                    } else {
                        [set("t", "left", "token"), delete_if("t", "right", "token")]
                    };
                    store.apply(&batch).await.unwrap();
                }
            })
        })
        .collect();
    for m in moves {
        m.await.unwrap();
    }
    let held = s.keys("t").await.unwrap();
    assert!(!held.is_empty() && held.len() <= 2, "{held:?}");
}

/// A read is not held up by another store's open write (a read-modify-write whose change
/// has not returned yet).
async fn a_get_completes_while_another_store_holds_a_write_open(open: Open) {
    let (writer, reader) = (open(), open());
    reader.set("skill-b", "k", "v").await.unwrap();
    writer.set("skill-a", "big", "old").await.unwrap();
    let (inside_tx, inside_rx) = std::sync::mpsc::channel();
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let runtime = tokio::runtime::Handle::current();
    let write = tokio::task::spawn_blocking(move || {
        runtime.block_on(writer.update("skill-a", "big", move |_| {
            let _ = inside_tx.send(());
            release_rx.recv_timeout(Duration::from_secs(30)).unwrap();
            Ok(Some("new".into()))
        }))
    });
    tokio::task::spawn_blocking(move || inside_rx.recv_timeout(Duration::from_secs(10))).await.unwrap().unwrap();
    let start = Instant::now();
    assert_eq!(reader.get("skill-b", "k").await.unwrap().as_deref(), Some("v"));
    assert_eq!(open().get("skill-a", "big").await.unwrap().as_deref(), Some("old"), "not yet committed");
    let took = start.elapsed();
    assert!(!write.is_finished(), "the write is still open");
    release_tx.send(()).unwrap();
    write.await.unwrap().unwrap();
    assert_eq!(reader.get("skill-a", "big").await.unwrap().as_deref(), Some("new"));
    println!("get while another store's write is open: {took:?}");
}

const NEVER: Expiry = Expiry::Never;
/// The expiry of entries a case waits to see expire.
const SHORT: Expiry = Expiry::Idle(Duration::from_secs(1));
/// The expiry of entries a case needs alive throughout (far longer than any case runs).
const LONG: Expiry = Expiry::Idle(Duration::from_secs(3600));

/// Waits until `key` of `ns` is gone for `get` (which does not touch it), for at most a
/// minute: far past any TTL a case sets.
async fn until_expired(s: &StateStore, ns: &str, key: &str) {
    let started = Instant::now();
    while s.get(ns, key).await.unwrap().is_some() {
        assert!(started.elapsed() < Duration::from_secs(60), "{ns}/{key} never expired");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Entries of a namespace that expires are gone for `get` and `keys` once their TTL passed
/// with no get or set, on another store too; `get_touching` keeps an entry alive; entries
/// without expiry stay; an expired entry does not count against the quota, and a sweep
/// deletes the rows.
async fn idle_entries_expire_unless_touched_and_free_their_quota(open: Open) {
    let s = open();
    let quota = StateQuota { max_bytes: 1 << 20, max_keys: 3 };
    s.set_within("conv", "long", "v", &quota, LONG).await.unwrap();
    s.set("forever", "k", "v").await.unwrap();
    // Written to expire in a second, then touched for an hour: it outlives the untouched one
    // written with it. (A machine so slow that the second passed before the touch tries
    // again: the touch must find the entry alive for the case to say anything.)
    for attempt in 1.. {
        s.set_within("conv", "short", "v", &quota, SHORT).await.unwrap();
        s.set_within("conv", "touched", "v", &quota, SHORT).await.unwrap();
        let touched = s.get_touching("conv", "touched", Duration::from_secs(3600)).await.unwrap();
        if touched.is_some() {
            break;
        }
        assert!(attempt < 10, "every touch came after the entry expired");
    }
    let full = s.set_within("conv", "fourth", "v", &quota, LONG).await;
    until_expired(&s, "conv", "short").await;
    assert_eq!(open().get("conv", "touched").await.unwrap().as_deref(), Some("v"), "the get kept it alive");
    assert_eq!(s.get_touching("conv", "short", Duration::from_secs(3600)).await.unwrap(), None, "gone for good");
    assert_eq!(open().keys("conv").await.unwrap(), ["long", "touched"]);
    assert_eq!(s.get("forever", "k").await.unwrap().as_deref(), Some("v"));
    // The namespace was full while `short` lived; once it expired, a fourth key fits.
    if let Err(e) = full {
        assert!(matches!(&e, StateError::Invalid(m) if m.contains("3 keys")), "{e}");
    }
    s.set_within("conv", "fourth", "v", &quota, LONG).await.unwrap();
    assert_eq!(s.keys("conv").await.unwrap(), ["fourth", "long", "touched"]);
    assert_eq!(s.usage("conv").await.unwrap(), (3, 20));

    // A sweep deletes expired rows of every namespace, and nothing else.
    s.set_within("other", "a", "v", &quota, SHORT).await.unwrap();
    s.set_within("other", "b", "v", &quota, LONG).await.unwrap();
    until_expired(&s, "other", "a").await;
    open().sweep_expired().await.unwrap();
    assert_eq!(s.usage("other").await.unwrap(), (1, 2), "the row is deleted");
    assert_eq!(s.keys("other").await.unwrap(), ["b"]);
    assert_eq!(s.usage("forever").await.unwrap(), (1, 2));
}

/// Writes a CA and a server certificate for `localhost` (not for 127.0.0.1) under `dir`.
fn certificates(dir: &std::path::Path) {
    let openssl = |args: &[&str]| {
        let out = std::process::Command::new("openssl").args(args).current_dir(dir).output().unwrap();
        assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    openssl(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-subj",
        "/CN=test-ca",
    ]);
    std::fs::write(dir.join("ext"), "subjectAltName=DNS:localhost\nbasicConstraints=CA:FALSE\n").unwrap();
    openssl(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
        "-subj",
        "/CN=localhost",
    ]);
    openssl(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "server.crt",
        "-days",
        "2",
        "-extfile",
        "ext",
    ]);
    let mut key = std::fs::metadata(dir.join("server.key")).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut key, 0o600);
    std::fs::set_permissions(dir.join("server.key"), key).unwrap();
}

/// `sslmode` as libpq reads it, against a server that refuses connections without TLS: what
/// must verify does (the chain, and the name with `verify-full`), `require` encrypts without
/// a root, `disable` is refused by the server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_follows_sslmode() {
    let (ca, ca_dir) = {
        let dir = tempfile::tempdir().unwrap();
        (dir.path().join("ca.pem"), dir)
    };
    let pg = skillhost_tests::postgres::Postgres::start_with_files(
        "-c ssl=on -c ssl_cert_file={dir}/server.crt -c ssl_key_file={dir}/server.key",
        |dir| {
            certificates(dir);
            std::fs::copy(dir.join("ca.pem"), &ca).unwrap();
        },
    );
    pg.psql("postgres", "CREATE DATABASE tls");
    pg.hba("local all all trust\nhostssl all all 127.0.0.1/32 trust\nhostssl all all ::1/128 trust\n");
    let port = pg.port();
    let ca = ca_dir.path().join("ca.pem").display().to_string();
    let store = |host: &str, query: &str| {
        let config = skillhost::config::PostgresState {
            url: Some(format!("postgres://postgres@{host}:{port}/tls?{query}")),
            connect_timeout_seconds: Some(5),
            ..Default::default()
        };
        StateStore::with_backend(Postgres::connect(Settings::from_config(Some(&config), |_| None).unwrap()).unwrap())
    };
    let works = async |host: &str, query: &str| {
        let s = store(host, query);
        s.set("tls", "k", query).await.map_err(|e| e.to_string())?;
        s.get("tls", "k").await.map_err(|e| e.to_string())
    };
    let full = format!("sslmode=verify-full&sslrootcert={ca}");
    assert_eq!(works("localhost", &full).await.unwrap().as_deref(), Some(&*full));
    let chain = format!("sslmode=verify-ca&sslrootcert={ca}");
    assert!(works("127.0.0.1", &chain).await.is_ok(), "verify-ca takes any name");
    let wrong_name = works("127.0.0.1", &full).await.unwrap_err();
    assert!(wrong_name.contains("unreachable") && wrong_name.to_lowercase().contains("name"), "{wrong_name}");
    let unknown_ca = works("localhost", "sslmode=verify-full").await.unwrap_err();
    assert!(unknown_ca.to_lowercase().contains("issuer") || unknown_ca.contains("certificate"), "{unknown_ca}");
    assert!(works("127.0.0.1", "sslmode=require").await.is_ok(), "require encrypts without a root");
    let plain = works("127.0.0.1", "sslmode=disable").await.unwrap_err();
    assert!(plain.contains("no encryption") || plain.contains("pg_hba.conf"), "the server wants TLS: {plain}");
}

/// Replicas on PostgreSQL: an in-flight marker whose replica no longer beats is taken over at
/// once, whatever machine it names and however long its TTL; one whose replica beats is
/// waited for. (On one machine a dead process's marker goes at once already: this is the
/// rule for replicas on other machines.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inflight_marker_of_a_replica_gone_silent_goes_at_once_whatever_its_host() {
    use skillhost::broker::Broker;
    use skillhost::engine::inflight::{InFlight, NAMESPACE, key};
    let cluster = skillhost_tests::postgres::Postgres::start();
    let url = format!("{}?sslmode=disable", cluster.url("postgres", "postgres"));
    let config = skillhost::config::PostgresState { url: Some(url), ..Default::default() };
    let connect = || Postgres::connect(Settings::from_config(Some(&config), |_| None).unwrap()).unwrap();
    let (here, there) = (connect(), connect());
    // Both beat, as replicas do.
    let (ours, theirs) = (
        Broker::start(&StateStore::on_postgres(here.clone()), None),
        Broker::start(&StateStore::on_postgres(there.clone()), None),
    );
    let (ours, theirs) = (ours.replica().unwrap(), theirs.replica().unwrap());
    for replica in [ours, theirs] {
        let started = Instant::now();
        while !here.replica_alive(replica).await.unwrap() {
            assert!(started.elapsed() < Duration::from_secs(10), "replica {replica} never beat");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    let inflight = InFlight::new(StateStore::on_postgres(here.clone()), Duration::from_secs(3600), Some(ours.into()));
    let expires = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64() + 3600.0;
    let marker = |replica: &str| {
        serde_json::json!({"channel": "c", "host": "another-machine", "pid": 1, "nonce": "n",
            "expires_at": expires, "replica": replica})
        .to_string()
    };
    let state = StateStore::on_postgres(there.clone());
    state.set(NAMESPACE, &key("c"), &marker(theirs)).await.unwrap();
    let waiting = tokio::time::timeout(Duration::from_millis(1500), inflight.acquire("c")).await;
    assert!(waiting.is_err(), "the marker of a replica that beats is waited for");
    state.set(NAMESPACE, &key("c"), &marker("a-replica-long-gone")).await.unwrap();
    let held = tokio::time::timeout(Duration::from_secs(5), inflight.acquire("c")).await;
    let _held = held.expect("taken over at once").unwrap();
    let now: serde_json::Value =
        serde_json::from_str(&state.get(NAMESPACE, &key("c")).await.unwrap().unwrap()).unwrap();
    assert_eq!(now["replica"], ours, "held by this replica now: {now}");
}
