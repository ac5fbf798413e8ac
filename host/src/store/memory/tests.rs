use super::filesystem::Files;
use super::*;
use std::os::unix::fs::symlink;

fn store() -> (tempfile::TempDir, Files) {
    let dir = tempfile::tempdir().unwrap();
    let store = Files::new(dir.path().join("mem"));
    (dir, store)
}

fn is_invalid(result: Result<impl std::fmt::Debug, MemoryError>) -> bool {
    matches!(result, Err(MemoryError::InvalidPath { .. }))
}

#[test]
fn write_read_append_search() {
    let (_d, m) = store();
    assert_eq!(m.read("notes/a.md").unwrap(), None);
    m.write("notes/a.md", "Disk full on db-1\n", false, None).unwrap();
    m.write("notes/a.md", "fixed by rotating logs\n", true, None).unwrap();
    let text = m.read("notes/a.md").unwrap().unwrap();
    assert_eq!(text, "Disk full on db-1\nfixed by rotating logs\n");
    let hits = m.search("DISK").unwrap();
    assert_eq!(hits, vec![SearchHit { path: "notes/a.md".into(), line: 1, text: "Disk full on db-1".into() }]);
    m.write("notes/a.md", "replaced\n", false, None).unwrap();
    assert_eq!(m.read("./notes//a.md").unwrap().unwrap(), "replaced\n");
    let leftovers: Vec<_> = std::fs::read_dir(m.root().join("notes")).unwrap().flatten().collect();
    assert_eq!(leftovers.len(), 1, "no temp file is left behind");
}

#[test]
fn lexical_escapes_are_refused() {
    let (_d, m) = store();
    for bad in ["../x", "a/../../x", "/etc/passwd", "", "./", "a/../b"] {
        assert!(is_invalid(m.read(bad)), "{bad}");
        assert!(is_invalid(m.write(bad, "x", false, None)), "{bad}");
        assert!(is_invalid(m.write(bad, "x", true, None)), "{bad}");
    }
}

/// A symlink out of the root, as the file or as a directory on the way, is refused for
/// every operation, and search does not list what it points to.
#[test]
fn symlinks_out_of_the_root_are_refused() {
    let (dir, m) = store();
    std::fs::create_dir_all(m.root()).unwrap();
    std::fs::write(dir.path().join("secret"), "needle outside").unwrap();
    symlink(dir.path().join("secret"), m.root().join("link")).unwrap();
    symlink(dir.path(), m.root().join("dirlink")).unwrap();
    symlink("../secret", m.root().join("relative")).unwrap();
    for path in ["link", "dirlink/secret", "relative"] {
        assert!(is_invalid(m.read(path)), "read {path}");
        assert!(is_invalid(m.write(path, "x", false, None)), "write {path}");
        assert!(is_invalid(m.write(path, "x", true, None)), "append {path}");
    }
    assert!(is_invalid(m.write("dirlink/new", "x", false, None)));
    assert!(is_invalid(m.write("dirlink/sub/new", "x", true, None)));
    assert!(!dir.path().join("new").exists() && !dir.path().join("sub").exists());
    assert_eq!(std::fs::read_to_string(dir.path().join("secret")).unwrap(), "needle outside");
    assert_eq!(m.search("needle").unwrap(), vec![]);
    assert!(std::fs::symlink_metadata(m.root().join("link")).unwrap().file_type().is_symlink());
}

/// A symlinked directory that stays inside the root works like the directory; search lists
/// each file once, by its real path.
#[test]
fn symlinked_directory_inside_the_root_is_followed() {
    let (_d, m) = store();
    m.write("real/a.md", "needle one\n", false, None).unwrap();
    symlink("real", m.root().join("alias")).unwrap();
    std::fs::create_dir_all(m.root().join("sub")).unwrap();
    symlink("../real", m.root().join("sub/up")).unwrap();
    assert_eq!(m.read("alias/a.md").unwrap().unwrap(), "needle one\n");
    m.write("alias/b.md", "needle two\n", false, None).unwrap();
    m.write("sub/up/b.md", "needle three\n", true, None).unwrap();
    assert_eq!(std::fs::read_to_string(m.root().join("real/b.md")).unwrap(), "needle two\nneedle three\n");
    let paths: Vec<_> = m.search("needle").unwrap().into_iter().map(|h| h.path).collect();
    assert_eq!(paths, ["real/a.md", "real/b.md", "real/b.md"]);
    // A symlink to a file inside the root is read through, but not written through.
    symlink("real/a.md", m.root().join("file_alias")).unwrap();
    assert_eq!(m.read("file_alias").unwrap().unwrap(), "needle one\n");
    assert!(is_invalid(m.write("file_alias", "x", false, None)));
    assert!(is_invalid(m.write("file_alias", "x", true, None)));
}

#[test]
fn size_is_capped() {
    let (_d, m) = store();
    let big = "x".repeat(MAX_FILE_BYTES + 1);
    assert_eq!(m.write("big", &big, false, None), Err(MemoryError::TooLarge));
    m.write("almost", &big[..MAX_FILE_BYTES], false, None).unwrap();
    assert_eq!(m.write("almost", "x", true, None), Err(MemoryError::TooLarge));
    assert!(is_invalid(m.read("")));
    std::fs::write(m.root().join("grown"), &big).unwrap();
    assert_eq!(m.read("grown"), Err(MemoryError::TooLarge));
}

#[test]
fn quotas_bound_files_and_bytes() {
    let (_d, m) = store();
    let quota = MemoryQuota { max_bytes: 100, max_files: 3 };
    for name in ["a", "b", "c"] {
        m.write(name, &"x".repeat(20), false, Some(&quota)).unwrap();
    }
    let files = m.write("d", "x", false, Some(&quota)).unwrap_err();
    assert!(matches!(&files, MemoryError::QuotaExceeded(m) if m.contains("3 files")), "{files}");
    assert_eq!(m.read("d").unwrap(), None, "nothing written");
    // Replacing counts the difference; appending counts what is added.
    m.write("a", &"y".repeat(59), false, Some(&quota)).unwrap();
    let bytes = m.write("b", "yy", true, Some(&quota)).unwrap_err();
    assert!(matches!(&bytes, MemoryError::QuotaExceeded(m) if m.contains("100 bytes")), "{bytes}");
    m.write("b", "y", true, Some(&quota)).unwrap();
    assert_eq!(m.usage().unwrap(), Usage { bytes: 100, files: 3 });
    // Over the quota (lowered since), a write that does not grow the root still works.
    let lowered = MemoryQuota { max_bytes: 10, max_files: 1 };
    m.write("a", "short", false, Some(&lowered)).unwrap();
    assert!(matches!(m.write("a", &"z".repeat(70), false, Some(&lowered)), Err(MemoryError::QuotaExceeded(_))));
    // Writes without a quota (the engine's) are not bounded.
    m.write("e", "x", false, None).unwrap();
}

/// While one thread keeps swapping a directory of the root for a symlink to outside it,
/// writes, appends and reads through that directory never reach outside.
#[test]
fn a_symlink_swapped_in_mid_call_never_leads_outside() {
    let (dir, m) = store();
    let outside = dir.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("x"), "secret").unwrap();
    m.write("d/x", "inside", false, None).unwrap();
    let (d, evil) = (m.root().join("d"), m.root().join("evil"));
    symlink(&outside, &evil).unwrap();
    let done = std::sync::atomic::AtomicBool::new(false);
    let mut leaked_reads = 0;
    std::thread::scope(|scope| {
        scope.spawn(|| {
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                // `d` flips atomically between the real directory and the symlink.
                let flags = rustix::fs::RenameFlags::EXCHANGE;
                rustix::fs::renameat_with(rustix::fs::CWD, &d, rustix::fs::CWD, &evil, flags).unwrap();
            }
        });
        for i in 0..2000 {
            let _ = m.write("d/x", "inside", i % 2 == 0, None);
            let _ = m.write(&format!("d/new{i}"), "inside", false, None);
            leaked_reads += usize::from(m.read("d/x").is_ok_and(|c| c.as_deref() == Some("secret")));
        }
        done.store(true, std::sync::atomic::Ordering::Relaxed);
    });
    let outside_files: Vec<_> = std::fs::read_dir(&outside).unwrap().flatten().map(|e| e.file_name()).collect();
    assert_eq!(outside_files, ["x"]);
    assert_eq!(std::fs::read_to_string(outside.join("x")).unwrap(), "secret");
    assert_eq!(leaked_reads, 0);
}

#[test]
fn a_namespace_is_the_configured_path_normalized() {
    let ns = |p: &str| namespace(std::path::Path::new(p));
    assert_eq!(ns("./memory/"), "memory");
    assert_eq!(ns("memory//devops"), "memory/devops");
    assert_eq!(ns("../shared/./memory"), "../shared/memory");
    assert_eq!(ns("/var/lib/skillhost/memory"), "/var/lib/skillhost/memory");
    assert_eq!(ns("."), ".");
}

/// Where a store on PostgreSQL connects: its own block, else the state's database, else the
/// `PG*` environment; with none of these, an error naming the keys. Nothing connects here.
#[test]
fn postgres_memory_finds_its_database_or_says_which_keys_to_set() {
    let open = |yaml: &str, env: &[(&str, &str)]| {
        let (config, _) = crate::config::parse(yaml, |_| None).map_err(|e| e.to_string())?;
        let loaded = crate::config::LoadedConfig { config, base_dir: "/srv/a".into(), warnings: vec![] };
        let env: std::collections::HashMap<_, _> = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        MemoryStore::from_config(&loaded, |name| env.get(name).cloned()).map_err(|e| e.to_string())
    };
    let on_disk = open("learning: {memory: {filesystem: {path: ./mem}}}", &[]).unwrap();
    assert_eq!(on_disk.root(), Some(std::path::Path::new("/srv/a/mem")));
    let memory = "learning: {memory: {backend: postgres, filesystem: {path: ./mem/}}}";
    let none = open(memory, &[]).unwrap_err();
    for key in ["learning.memory.postgres.url", "state.backend: postgres", "PGHOST"] {
        assert!(none.contains(key), "{none}");
    }
    let from_env = open(memory, &[("PGHOST", "envhost")]).unwrap();
    assert_eq!(from_env.describe(), "postgres://postgres@envhost:5432/postgres (memory `mem`)");
    let state = "state: {backend: postgres, postgres: {url: 'postgres://u@statehost/db'}}";
    let shared = open(&format!("{memory}\n{state}"), &[]).unwrap();
    assert_eq!(shared.describe(), "postgres://u@statehost:5432/db (memory `mem`)");
    let block = "learning: {memory: {backend: postgres, postgres: {url: 'postgres://m@memhost/mdb'}}}";
    let own = open(&format!("{block}\n{state}"), &[]).unwrap();
    assert_eq!(own.describe(), "postgres://m@memhost:5432/mdb (memory `memory`)");
    let bad = open("learning: {memory: {backend: postgres, postgres: {url: 'mysql://h/d'}}}", &[]).unwrap_err();
    assert!(bad.contains("learning.memory.postgres.url: the scheme is `mysql`"), "{bad}");
    let unused = open("learning: {memory: {postgres: {url: 'postgres://h/d'}}}", &[]).unwrap_err();
    assert!(unused.contains("learning.memory.postgres is set but learning.memory.backend is filesystem"), "{unused}");
    let zero = open("learning: {memory: {backend: postgres, postgres: {pool_size: 0}}}", &[]).unwrap_err();
    assert!(zero.contains("learning.memory.postgres.pool_size must be at least 1"), "{zero}");
}
