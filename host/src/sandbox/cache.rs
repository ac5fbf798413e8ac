//! Compiled components cached on disk, so a restart does not recompile.
//!
//! An entry is named by the SHA-256 of the component and a hash of the engine's settings, and
//! holds a magic header, the SHA-256 of the compiled bytes, then the bytes. An entry whose
//! checksum or header does not match (tampered, truncated, from another engine) is rejected,
//! removed and rebuilt; wasmtime also refuses artifacts from an incompatible engine.

use super::error::LoadError;
use sha2::{Digest, Sha256};
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use wasmtime::Engine;
use wasmtime::component::Component;

const MAGIC: &[u8; 8] = b"SKHCWSM1";

/// The cache directory bound to one engine configuration.
#[derive(Clone)]
pub struct ComponentCache {
    dir: PathBuf,
    engine: Engine,
    engine_key: String,
}

impl ComponentCache {
    /// A cache in `dir` for `engine`.
    pub fn new(dir: PathBuf, engine: &Engine) -> Self {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        env!("CARGO_PKG_VERSION").hash(&mut hasher);
        ComponentCache { dir, engine: engine.clone(), engine_key: format!("{:016x}", hasher.finish()) }
    }

    /// The entry path for a component.
    pub fn entry_path(&self, wasm: &[u8]) -> PathBuf {
        let digest = hex::encode(Sha256::digest(wasm));
        self.dir.join(format!("{digest}-{}.cwasm", self.engine_key))
    }

    /// Loads the compiled component from the cache, or compiles and stores it.
    pub fn get_or_compile(&self, wasm: &[u8]) -> Result<Component, LoadError> {
        let path = self.entry_path(wasm);
        match self.read(&path) {
            Ok(Some(component)) => return Ok(component),
            Ok(None) => {}
            Err(reason) => {
                tracing::warn!(path = %path.display(), "rejected cache entry ({reason}); recompiling");
                let _ = std::fs::remove_file(&path);
            }
        }
        let component = Component::new(&self.engine, wasm).map_err(|e| LoadError::NotAComponent(format!("{e:#}")))?;
        if let Err(e) = self.write(&path, &component) {
            tracing::warn!(path = %path.display(), "could not write the compile cache: {e:#}");
        }
        Ok(component)
    }

    fn read(&self, path: &Path) -> Result<Option<Component>, String> {
        let bytes = match std::fs::read(path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e.to_string()),
        };
        if bytes.len() < MAGIC.len() + 32 || &bytes[..MAGIC.len()] != MAGIC {
            return Err("bad header".into());
        }
        let (sum, payload) = bytes[MAGIC.len()..].split_at(32);
        if Sha256::digest(payload).as_slice() != sum {
            return Err("checksum mismatch".into());
        }
        // SAFETY: the payload was written by `write` below with this engine's settings (the
        // engine key is in the file name) and its checksum matches, so it is an artifact
        // wasmtime produced; wasmtime re-checks engine compatibility itself.
        unsafe { Component::deserialize(&self.engine, payload) }.map(Some).map_err(|e| format!("{e:#}"))
    }

    fn write(&self, path: &Path, component: &Component) -> anyhow::Result<()> {
        let payload = component.serialize()?;
        let mut bytes = Vec::with_capacity(MAGIC.len() + 32 + payload.len());
        bytes.extend_from_slice(MAGIC);
        bytes.extend_from_slice(&Sha256::digest(&payload));
        bytes.extend_from_slice(&payload);
        std::fs::create_dir_all(&self.dir)?;
        crate::store::write_atomic(path, &bytes)?;
        Ok(())
    }
}
