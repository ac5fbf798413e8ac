//! Compiled components cached on disk, so a restart neither recompiles nor reads every byte.
//!
//! An entry is two files named by the SHA-256 of the component and a hash of the engine's
//! settings: `<key>.cwasm`, wasmtime's own serialized artifact, memory-mapped at load (pages
//! are read when code runs, not at start), and `<key>.meta`, which holds the artifact's
//! length and SHA-256, computed when it was written and checked against the file on disk
//! then, plus the identity of the file that checksum was verified on (device, inode, size,
//! modification and change times).
//!
//! At load the entry is trusted without reading it when its identity still matches: any
//! write, truncation, rename over it or `touch` changes the change time, which no one can
//! set back. Otherwise (copied, edited, restored from a backup) it is read and hashed once:
//! a match records the new identity, a mismatch removes the entry and it is rebuilt.
//! wasmtime then checks the artifact's header and its engine compatibility itself.
//!
//! The source `.wasm` files are named by content too, so finding an entry needs the
//! source's SHA-256: it is remembered under `sources/`, keyed by the source file's identity,
//! so an unchanged skill file is not read at start either.

use super::error::LoadError;
use sha2::{Digest, Sha256};
use std::hash::{Hash, Hasher};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use wasmtime::Engine;
use wasmtime::component::Component;

const MAGIC: &[u8; 8] = b"SKHCMETA";
/// Bumped when the entry layout changes, so entries of another layout are never read.
const LAYOUT: u32 = 2;
const ELF_MAGIC: &[u8; 4] = b"\x7fELF";

/// A file's identity: what changes whenever its content may have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileId([i64; 7]);

impl FileId {
    fn of(meta: &std::fs::Metadata) -> Self {
        FileId([
            meta.dev() as i64,
            meta.ino() as i64,
            meta.size() as i64,
            meta.mtime(),
            meta.mtime_nsec(),
            meta.ctime(),
            meta.ctime_nsec(),
        ])
    }

    fn size(&self) -> i64 {
        self.0[2]
    }

    fn to_bytes(self) -> Vec<u8> {
        self.0.iter().flat_map(|n| n.to_le_bytes()).collect()
    }

    fn from_bytes(bytes: &[u8]) -> Option<Self> {
        let mut id = [0i64; 7];
        for (slot, chunk) in id.iter_mut().zip(bytes.chunks_exact(8)) {
            *slot = i64::from_le_bytes(chunk.try_into().ok()?);
        }
        (bytes.len() == 56).then_some(FileId(id))
    }
}

/// What `<key>.meta` holds.
struct EntryMeta {
    sha256: [u8; 32],
    verified_on: FileId,
}

impl EntryMeta {
    const LEN: usize = MAGIC.len() + 32 + 56;

    fn encode(&self) -> Vec<u8> {
        let mut bytes = MAGIC.to_vec();
        bytes.extend_from_slice(&self.sha256);
        bytes.extend_from_slice(&self.verified_on.to_bytes());
        bytes
    }

    fn decode(bytes: &[u8]) -> Option<Self> {
        if bytes.len() != Self::LEN || &bytes[..MAGIC.len()] != MAGIC {
            return None;
        }
        let sha256 = bytes[MAGIC.len()..MAGIC.len() + 32].try_into().ok()?;
        Some(EntryMeta { sha256, verified_on: FileId::from_bytes(&bytes[MAGIC.len() + 32..])? })
    }
}

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
        LAYOUT.hash(&mut hasher);
        ComponentCache { dir, engine: engine.clone(), engine_key: format!("{:016x}", hasher.finish()) }
    }

    /// The cache's folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The compiled artifact's path for a component.
    pub fn entry_path(&self, wasm: &[u8]) -> PathBuf {
        self.entry_for(&Sha256::digest(wasm).into())
    }

    fn entry_for(&self, digest: &[u8; 32]) -> PathBuf {
        self.dir.join(format!("{}-{}.cwasm", hex::encode(digest), self.engine_key))
    }

    /// The cached component for the source whose SHA-256 is `digest`, if a sound entry exists.
    /// An unsound one (truncated, altered, from another engine) is removed.
    pub(super) fn lookup(&self, digest: &[u8; 32]) -> Option<Component> {
        let path = self.entry_for(digest);
        match self.open(&path) {
            Ok(found) => found,
            Err(reason) => {
                tracing::warn!(path = %path.display(), "rejected cache entry ({reason}); recompiling");
                let _ = std::fs::remove_file(&path);
                let _ = std::fs::remove_file(path.with_extension("meta"));
                None
            }
        }
    }

    fn open(&self, path: &Path) -> Result<Option<Component>, String> {
        let stat = match std::fs::metadata(path) {
            Ok(stat) => stat,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e.to_string()),
        };
        let meta_path = path.with_extension("meta");
        let meta =
            std::fs::read(&meta_path).ok().and_then(|b| EntryMeta::decode(&b)).ok_or("no valid checksum record")?;
        if meta.verified_on.size() != stat.size() as i64 {
            return Err(format!("size {} differs from the {} bytes written", stat.size(), meta.verified_on.size()));
        }
        check_header(path)?;
        if meta.verified_on != FileId::of(&stat) {
            // Not the file the checksum was verified on: verify it once, and remember it.
            let bytes = std::fs::read(path).map_err(|e| e.to_string())?;
            if Sha256::digest(&bytes).as_slice() != meta.sha256 {
                return Err("checksum mismatch".into());
            }
            let record = EntryMeta { sha256: meta.sha256, verified_on: FileId::of(&stat) };
            if let Err(e) = crate::store::write_atomic(&meta_path, &record.encode()) {
                tracing::debug!(path = %meta_path.display(), "could not update the checksum record: {e}");
            }
        }
        // SAFETY: the file is an artifact `compile_and_store` wrote with this engine's
        // settings (the engine key is in its name), whose checksum was verified on this very
        // file (same inode, size, and change time, which any write updates). The cache only
        // ever replaces entries by renaming a new file over them, so the mapped file is never
        // modified while mapped. wasmtime re-checks the header and engine compatibility.
        unsafe { Component::deserialize_file(&self.engine, path) }.map(Some).map_err(|e| format!("{e:#}"))
    }

    /// Compiles `wasm` and stores it as the entry for `digest`.
    pub(super) fn compile_and_store(&self, digest: &[u8; 32], wasm: &[u8]) -> Result<Component, LoadError> {
        let component = Component::new(&self.engine, wasm).map_err(|e| LoadError::NotAComponent(format!("{e:#}")))?;
        let path = self.entry_for(digest);
        if let Err(e) = self.write(&path, &component) {
            tracing::warn!(path = %path.display(), "could not write the compile cache: {e:#}");
        }
        Ok(component)
    }

    fn write(&self, path: &Path, component: &Component) -> anyhow::Result<()> {
        let payload = component.serialize()?;
        let sha256: [u8; 32] = Sha256::digest(&payload).into();
        std::fs::create_dir_all(&self.dir)?;
        crate::store::write_atomic(path, &payload)?;
        // The checksum is verified once, on what actually landed on disk.
        let stat = std::fs::metadata(path)?;
        if Sha256::digest(std::fs::read(path)?).as_slice() != sha256 {
            let _ = std::fs::remove_file(path);
            anyhow::bail!("the entry read back differs from what was written");
        }
        let meta = EntryMeta { sha256, verified_on: FileId::of(&stat) };
        crate::store::write_atomic(&path.with_extension("meta"), &meta.encode())?;
        Ok(())
    }

    /// The SHA-256 of the component file at `path`, and its bytes when they had to be read:
    /// a file whose identity is remembered under `sources/` is not read again.
    pub(super) fn digest_of_file(&self, path: &Path) -> std::io::Result<([u8; 32], Option<Vec<u8>>)> {
        let id = FileId::of(&std::fs::metadata(path)?);
        let memo = self.dir.join("sources").join(hex::encode(Sha256::digest(id.to_bytes())));
        if let Ok(digest) = std::fs::read(&memo)
            && let Ok(digest) = <[u8; 32]>::try_from(digest.as_slice())
        {
            return Ok((digest, None));
        }
        let bytes = std::fs::read(path)?;
        let digest: [u8; 32] = Sha256::digest(&bytes).into();
        // Only remember it if the file did not change while it was read.
        if FileId::of(&std::fs::metadata(path)?) == id {
            let stored = std::fs::create_dir_all(memo.parent().unwrap_or(self.dir.as_path()))
                .and_then(|()| crate::store::write_atomic(&memo, &digest));
            if let Err(e) = stored {
                tracing::debug!(path = %memo.display(), "could not remember the source's checksum: {e}");
            }
        }
        Ok((digest, Some(bytes)))
    }
}

/// The artifact starts like the ELF object wasmtime writes (reads one block, not the file).
fn check_header(path: &Path) -> Result<(), String> {
    use std::io::Read;
    let mut head = [0u8; 4];
    std::fs::File::open(path).and_then(|mut f| f.read_exact(&mut head)).map_err(|e| e.to_string())?;
    if &head != ELF_MAGIC {
        return Err("bad header".into());
    }
    Ok(())
}
