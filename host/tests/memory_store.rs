//! Memory files, with the same assertions on both backends: a directory, and PostgreSQL (a
//! throwaway cluster, Debian's PostgreSQL 15). Each case gets a fresh directory or database
//! and opens memory roots in it as many times as it needs: two stores on one root are two
//! processes (or two replicas), with connections of their own. What only the filesystem
//! has (symlinks, the kernel's confinement) is tested in `host/src/store/memory/tests.rs`.

#[macro_use]
mod suite;

use skillhost::store::memory::{MAX_FILE_BYTES, MAX_SEARCH_HITS, MemoryError, MemoryQuota, MemoryStore, Usage};
use skillhost::store::state::postgres::{Postgres, Settings};
use std::sync::Arc;
use suite::{Case, run};

/// Opens memory root `name` of the case's directory or database once more: a new store, as
/// a new process would.
type Open = Arc<dyn Fn(&str) -> MemoryStore + Send + Sync>;

const CASES: &[Case<Open>] = cases![
    reads_writes_appends_and_overwrites,
    two_stores_see_each_other_and_roots_are_apart,
    paths_are_confined_and_files_and_directories_do_not_mix,
    files_are_capped,
    quotas_bound_files_and_bytes,
    concurrent_writers_cannot_pass_a_quota_together,
    search_is_case_insensitive_and_capped,
];

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn on_the_filesystem() {
    for (name, case) in CASES {
        let dir = Arc::new(tempfile::tempdir().unwrap());
        let open: Open = Arc::new(move |root| MemoryStore::new(dir.path().join(root)));
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
        let open: Open = Arc::new(move |root| postgres(&url, root));
        run(name, case(open)).await;
    }
    // A file is one row, under the root's name.
    pg.psql("postgres", "CREATE DATABASE rows");
    let store = postgres(&pg.url("postgres", "rows"), "memory/devops");
    store.write("./notes//a.md", "hello", false).await.unwrap();
    let row = pg.psql("rows", "SELECT ns || ' ' || path || ' ' || convert_from(content, 'UTF8') FROM skillhost_memory");
    assert_eq!(row.trim(), "memory/devops notes/a.md hello");
}

/// A store with a pool of its own on `url`, on memory root `ns`.
fn postgres(url: &str, ns: &str) -> MemoryStore {
    let config = skillhost::config::PostgresState { url: Some(url.into()), ..Default::default() };
    let settings = Settings::from_config(Some(&config), |_| None).unwrap();
    MemoryStore::on_postgres(Postgres::connect(settings).unwrap(), ns)
}

/// The reason of an [`MemoryError::InvalidPath`], else a panic.
fn refused<T: std::fmt::Debug>(result: Result<T, MemoryError>) -> &'static str {
    match result {
        Err(MemoryError::InvalidPath { reason, .. }) => reason,
        other => panic!("not a path refusal: {other:?}"),
    }
}

async fn reads_writes_appends_and_overwrites(open: Open) {
    let m = open("memory");
    assert_eq!(m.read("notes/a.md").await.unwrap(), None);
    assert_eq!(m.usage().await.unwrap(), Usage::default());
    m.write("notes/a.md", "Disk full on db-1\n", false).await.unwrap();
    m.write("notes/a.md", "fixed by rotating logs\n", true).await.unwrap();
    let text = m.read("notes/a.md").await.unwrap().unwrap();
    assert_eq!(text, "Disk full on db-1\nfixed by rotating logs\n");
    m.write("./notes//a.md", "replaced\n", false).await.unwrap();
    assert_eq!(m.read("notes/a.md").await.unwrap().unwrap(), "replaced\n");
    m.write("log.md", "first\n", true).await.unwrap();
    assert_eq!(m.read("log.md").await.unwrap().unwrap(), "first\n", "an append creates the file");
    m.write("empty", "", false).await.unwrap();
    assert_eq!(m.read("empty").await.unwrap().as_deref(), Some(""));
    assert_eq!(m.usage().await.unwrap(), Usage { files: 3, bytes: 15 });
    m.write("a.json", "{\"k\": [1, 2]}", false).await.unwrap();
    assert_eq!(m.read_json("a.json").await.unwrap().unwrap(), "{\"k\":[1,2]}");
    assert_eq!(m.read_json("none.json").await.unwrap(), None);
    m.write("b.json", "{nope", false).await.unwrap();
    assert!(matches!(m.read_json("b.json").await, Err(MemoryError::InvalidJson { .. })));
}

async fn two_stores_see_each_other_and_roots_are_apart(open: Open) {
    let (a, b) = (open("memory"), open("./memory/"));
    a.write("MEMORY.md", "from a\n", false).await.unwrap();
    assert_eq!(b.read("MEMORY.md").await.unwrap().as_deref(), Some("from a\n"));
    b.write("MEMORY.md", "and b\n", true).await.unwrap();
    assert_eq!(a.read("MEMORY.md").await.unwrap().as_deref(), Some("from a\nand b\n"));
    let other = open("other");
    assert_eq!(other.read("MEMORY.md").await.unwrap(), None);
    assert_eq!(other.search("from").await.unwrap(), vec![]);
    assert_eq!(other.usage().await.unwrap(), Usage::default());
    other.write("MEMORY.md", "other\n", false).await.unwrap();
    assert_eq!(a.read("MEMORY.md").await.unwrap().as_deref(), Some("from a\nand b\n"));
}

async fn paths_are_confined_and_files_and_directories_do_not_mix(open: Open) {
    let m = open("memory");
    for bad in ["../x", "a/../../x", "/etc/passwd", "", "./", "a/../b", "nul\0byte"] {
        refused(m.read(bad).await);
        refused(m.read_json(bad).await);
        refused(m.write(bad, "x", false).await);
        refused(m.write(bad, "x", true).await);
    }
    m.write("dir/file.md", "x", false).await.unwrap();
    // A directory is not a file.
    for path in ["dir", "./dir/"] {
        assert_eq!(refused(m.read(path).await), "is a directory", "{path}");
        assert_eq!(refused(m.write(path, "x", false).await), "is a directory", "{path}");
        assert_eq!(refused(m.write(path, "x", true).await), "is a directory", "{path}");
    }
    // A file is not a directory.
    for path in ["dir/file.md/x", "dir/file.md/y/z"] {
        assert_eq!(refused(m.read(path).await), "a parent is not a directory", "{path}");
        assert_eq!(refused(m.write(path, "x", false).await), "a parent is not a directory", "{path}");
        assert_eq!(refused(m.write(path, "x", true).await), "a parent is not a directory", "{path}");
    }
    // A name that only starts like a directory is a file of its own.
    m.write("dir.md", "y", false).await.unwrap();
    m.write("di", "z", false).await.unwrap();
    assert_eq!(m.read("dir/file.md").await.unwrap().as_deref(), Some("x"));
    assert_eq!(m.usage().await.unwrap(), Usage { files: 3, bytes: 3 });
}

async fn files_are_capped(open: Open) {
    let m = open("memory");
    let big = "x".repeat(MAX_FILE_BYTES + 1);
    assert_eq!(m.write("big", &big, false).await, Err(MemoryError::TooLarge));
    assert_eq!(m.write("big", &big, true).await, Err(MemoryError::TooLarge));
    assert_eq!(m.read("big").await.unwrap(), None, "nothing written");
    m.write("almost", &big[..MAX_FILE_BYTES], false).await.unwrap();
    assert_eq!(m.write("almost", "x", true).await, Err(MemoryError::TooLarge));
    assert_eq!(m.read("almost").await.unwrap().unwrap().len(), MAX_FILE_BYTES);
}

async fn quotas_bound_files_and_bytes(open: Open) {
    let m = open("memory");
    let quota = MemoryQuota { max_bytes: 100, max_files: 3 };
    for name in ["a", "b", "c"] {
        m.write_within(name, &"x".repeat(20), false, &quota).await.unwrap();
    }
    let files = m.write_within("d", "x", false, &quota).await.unwrap_err();
    assert!(matches!(&files, MemoryError::QuotaExceeded(m) if m.contains("3 files")), "{files}");
    assert_eq!(m.read("d").await.unwrap(), None, "nothing written");
    // Replacing counts the difference; appending counts what is added.
    m.write_within("a", &"y".repeat(59), false, &quota).await.unwrap();
    let bytes = m.write_within("b", "yy", true, &quota).await.unwrap_err();
    assert!(matches!(&bytes, MemoryError::QuotaExceeded(m) if m.contains("100 bytes")), "{bytes}");
    m.write_within("b", "y", true, &quota).await.unwrap();
    assert_eq!(m.usage().await.unwrap(), Usage { bytes: 100, files: 3 });
    // Over the quota (lowered since), a write that does not grow the root still works.
    let lowered = MemoryQuota { max_bytes: 10, max_files: 1 };
    m.write_within("a", "short", false, &lowered).await.unwrap();
    let grows = m.write_within("a", &"z".repeat(70), false, &lowered).await;
    assert!(matches!(grows, Err(MemoryError::QuotaExceeded(_))));
    // Writes without a quota (the engine's) are not bounded.
    m.write("e", "x", false).await.unwrap();
    assert_eq!(m.usage().await.unwrap(), Usage { bytes: 47, files: 4 });
    // Another root has a quota of its own.
    open("other").write_within("a", &"x".repeat(100), false, &quota).await.unwrap();
}

/// Tasks on two stores of one root, each writing new files: together they never pass the
/// quota, and every write the quota admits is there.
async fn concurrent_writers_cannot_pass_a_quota_together(open: Open) {
    let stores = [open("memory"), open("memory")];
    let quota = MemoryQuota { max_bytes: 1000, max_files: 12 };
    let mut handles = Vec::new();
    for t in 0..8 {
        let store = stores[t % 2].clone();
        handles.push(tokio::spawn(async move {
            let mut written = 0;
            for i in 0..5 {
                match store.write_within(&format!("t{t}/f{i}"), "0123456789", false, &quota).await {
                    Ok(()) => written += 1,
                    Err(MemoryError::QuotaExceeded(_)) => {}
                    Err(e) => panic!("{e}"),
                }
            }
            written
        }));
    }
    let mut written = 0;
    for handle in handles {
        written += handle.await.unwrap();
    }
    assert_eq!(written, 12);
    assert_eq!(stores[1].usage().await.unwrap(), Usage { files: 12, bytes: 120 });
    // Bytes too: appends racing for the last 50 bytes of the quota.
    stores[0].write("shared", "", false).await.unwrap();
    let quota = MemoryQuota { max_bytes: 170, max_files: 13 };
    let appends: Vec<_> = (0..10)
        .map(|i| {
            let store = stores[i % 2].clone();
            tokio::spawn(async move { store.write_within("shared", "0123456789", true, &quota).await.is_ok() })
        })
        .collect();
    let mut admitted = 0;
    for append in appends {
        admitted += usize::from(append.await.unwrap());
    }
    assert_eq!(admitted, 5);
    assert_eq!(stores[0].usage().await.unwrap(), Usage { files: 13, bytes: 170 });
    assert_eq!(stores[1].read("shared").await.unwrap().unwrap().len(), 50);
}

async fn search_is_case_insensitive_and_capped(open: Open) {
    let m = open("memory");
    assert_eq!(m.search("disk").await.unwrap(), vec![]);
    m.write("a.md", "Disk full on db-1\nfixed\nthe DISK again\n", false).await.unwrap();
    m.write("b.md", "nothing here\n", false).await.unwrap();
    m.write("notes/c.md", "a disk\n", false).await.unwrap();
    let hits: Vec<_> = m.search("dIsK").await.unwrap().into_iter().map(|h| (h.path, h.line, h.text)).collect();
    let expected = [("a.md", 1, "Disk full on db-1"), ("a.md", 3, "the DISK again"), ("notes/c.md", 1, "a disk")];
    let expected: Vec<_> = expected.iter().map(|(p, l, t)| (p.to_string(), *l, t.to_string())).collect();
    assert_eq!(hits, expected);
    assert_eq!(m.search("").await.unwrap(), vec![]);
    let many: String = (0..150).map(|i| format!("needle {i}\n")).collect();
    m.write("many.md", &many, false).await.unwrap();
    let hits = m.search("NEEDLE").await.unwrap();
    assert_eq!(hits.len(), MAX_SEARCH_HITS);
    assert_eq!((hits[99].line, hits[99].text.as_str()), (100, "needle 99"));
}
