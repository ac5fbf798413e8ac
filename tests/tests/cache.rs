//! The compiled-component cache: reused across restarts without reading the entry, and a
//! truncated, altered or foreign entry rejected and rebuilt, never trusted.

use skillhost::sandbox::{ComponentCache, Sandbox, SandboxOptions};
use skillhost_tests::guests;
use std::path::Path;

fn modified(path: &Path) -> std::time::SystemTime {
    std::fs::metadata(path).expect("compiled entry on disk").modified().unwrap()
}

#[test]
fn cache_is_reused_and_a_tampered_entry_is_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let options = SandboxOptions { cache_dir: Some(dir.path().to_path_buf()), max_instances: 8, ..Default::default() };
    let sandbox = Sandbox::new(&options).unwrap();
    let wasm = std::fs::read(guests::PROBE).unwrap();
    sandbox.load(&wasm).unwrap();
    let cache = ComponentCache::new(dir.path().to_path_buf(), sandbox.engine());
    let entry = cache.entry_path(&wasm);
    let written = modified(&entry);

    // A restart (a new sandbox with the same settings) loads the entry, not a recompile.
    // (Within one sandbox, compiled components are also memoised by content hash.)
    let again = Sandbox::new(&options).unwrap();
    again.load(&wasm).unwrap();
    assert_eq!(modified(&entry), written);
    drop(again);

    // Flip a byte in the payload: the file changed since its checksum was verified, so it
    // is verified again, the checksum rejects it and the entry is rebuilt.
    let mut bytes = std::fs::read(&entry).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&entry, &bytes).unwrap();
    let restarted = Sandbox::new(&options).unwrap();
    restarted.load(&wasm).expect("a tampered entry is rebuilt, not trusted");
    assert_ne!(std::fs::read(&entry).unwrap(), bytes);
    drop(restarted);

    // Even with its modification time put back, the change time gives the edit away.
    let good = std::fs::read(&entry).unwrap();
    let mtime = modified(&entry);
    std::fs::write(&entry, &bytes).unwrap();
    std::fs::File::options().write(true).open(&entry).unwrap().set_modified(mtime).unwrap();
    Sandbox::new(&options).unwrap().load(&wasm).unwrap();
    assert_eq!(std::fs::read(&entry).unwrap(), good, "rebuilt, not trusted");

    // Truncated: the size alone gives it away.
    let file = std::fs::File::options().write(true).open(&entry).unwrap();
    file.set_len(good.len() as u64 / 2).unwrap();
    drop(file);
    Sandbox::new(&options).unwrap().load(&wasm).expect("a truncated entry is rebuilt");
    assert_eq!(std::fs::read(&entry).unwrap().len(), good.len());

    // Garbage under the right name, and a missing checksum record, are rejected too.
    std::fs::write(&entry, b"garbage").unwrap();
    Sandbox::new(&options).unwrap().load(&wasm).unwrap();
    assert!(std::fs::read(&entry).unwrap().starts_with(b"\x7fELF"));
    std::fs::remove_file(entry.with_extension("meta")).unwrap();
    let unrecorded = modified(&entry);
    Sandbox::new(&options).unwrap().load(&wasm).unwrap();
    assert!(entry.with_extension("meta").is_file());
    assert_ne!(modified(&entry), unrecorded, "an entry without a checksum record is rebuilt");
}

#[test]
fn a_copied_entry_is_verified_once_then_trusted() {
    let dir = tempfile::tempdir().unwrap();
    let options = SandboxOptions { cache_dir: Some(dir.path().to_path_buf()), max_instances: 8, ..Default::default() };
    let sandbox = Sandbox::new(&options).unwrap();
    let wasm = std::fs::read(guests::PROBE).unwrap();
    sandbox.load(&wasm).unwrap();
    let entry = ComponentCache::new(dir.path().to_path_buf(), sandbox.engine()).entry_path(&wasm);
    let record = std::fs::read(entry.with_extension("meta")).unwrap();

    // A copy (another inode) of a sound entry: read and hashed once, kept, and its new
    // identity recorded, so the next start trusts it without reading it.
    let copy = dir.path().join("copy");
    std::fs::copy(&entry, &copy).unwrap();
    std::fs::rename(&copy, &entry).unwrap();
    let copied = modified(&entry);
    Sandbox::new(&options).unwrap().load(&wasm).unwrap();
    assert_eq!(modified(&entry), copied, "a sound copy is kept, not rebuilt");
    let updated = std::fs::read(entry.with_extension("meta")).unwrap();
    assert_ne!(updated, record, "the copy's identity is recorded");
}

#[test]
fn a_skill_file_loads_from_the_cache_and_a_changed_one_recompiles() {
    let dir = tempfile::tempdir().unwrap();
    let options = SandboxOptions { cache_dir: Some(dir.path().join("cache")), max_instances: 8, ..Default::default() };
    let file = dir.path().join("skill.wasm");
    std::fs::copy(guests::PROBE, &file).unwrap();
    let tools = |sandbox: &Sandbox| sandbox.load_file(&file).map(|c| c.hooks().names().len());
    assert!(tools(&Sandbox::new(&options).unwrap()).is_ok());
    assert!(tools(&Sandbox::new(&options).unwrap()).is_ok(), "loaded again from the cache");
    // Another component in the same file: its content is hashed again, not the old entry used.
    std::fs::copy(guests::HOOKS_ALL, &file).unwrap();
    let sandbox = Sandbox::new(&options).unwrap();
    assert!(!sandbox.load_file(&file).unwrap().hooks().names().is_empty(), "the new file's hooks");
    std::fs::write(&file, b"not wasm").unwrap();
    assert!(Sandbox::new(&options).unwrap().load_file(&file).is_err());
}
