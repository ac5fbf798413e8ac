//! The compiled-component cache: reused across restarts, tampering rejected.

use skillhost::sandbox::{ComponentCache, Sandbox, SandboxOptions};
use skillhost_tests::guests;

#[test]
fn cache_is_reused_and_a_tampered_entry_is_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let options = SandboxOptions { cache_dir: Some(dir.path().to_path_buf()), max_instances: 8, ..Default::default() };
    let sandbox = Sandbox::new(&options).unwrap();
    let wasm = std::fs::read(guests::PROBE).unwrap();
    sandbox.load(&wasm).unwrap();
    let cache = ComponentCache::new(dir.path().to_path_buf(), sandbox.engine());
    let entry = cache.entry_path(&wasm);
    let written = std::fs::metadata(&entry).expect("compiled entry on disk").modified().unwrap();

    // A restart (a new sandbox with the same settings) loads the entry, not a recompile.
    // (Within one sandbox, compiled components are also memoised by content hash.)
    let again = Sandbox::new(&options).unwrap();
    again.load(&wasm).unwrap();
    assert_eq!(std::fs::metadata(&entry).unwrap().modified().unwrap(), written);

    // Flip a byte in the payload: the checksum rejects it and the entry is rebuilt.
    let mut bytes = std::fs::read(&entry).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&entry, &bytes).unwrap();
    let restarted = Sandbox::new(&options).unwrap();
    restarted.load(&wasm).expect("a tampered entry is rebuilt, not trusted");
    assert_ne!(std::fs::read(&entry).unwrap(), bytes);

    // Garbage under the right name is rejected too.
    std::fs::write(&entry, b"garbage").unwrap();
    Sandbox::new(&options).unwrap().load(&wasm).unwrap();
    assert!(std::fs::read(&entry).unwrap().starts_with(b"SKHCWSM1"));
}
