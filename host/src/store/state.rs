//! The persistent key-value store, one namespace per skill (and, later, per engine concern).
//!
//! Each namespace is one JSON file under the root, cached in memory and rewritten atomically
//! on every change.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// The longest key, in bytes.
pub const MAX_KEY_BYTES: usize = 256;
/// The largest value, in bytes.
pub const MAX_VALUE_BYTES: usize = 1024 * 1024;

/// Why a state operation failed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum StateError {
    /// A bad key or value.
    #[error("{0}")]
    Invalid(String),
    /// An I/O or encoding failure.
    #[error("{0}")]
    Other(String),
}

type Namespace = BTreeMap<String, String>;

/// The store. Cheap to clone; clones share the cache.
#[derive(Debug, Clone)]
pub struct StateStore {
    root: PathBuf,
    cache: Arc<Mutex<HashMap<String, Namespace>>>,
}

impl StateStore {
    /// A store rooted at `root` (created on first write).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        StateStore { root: root.into(), cache: Arc::default() }
    }

    /// The directory it writes to.
    pub fn root(&self) -> &std::path::Path {
        &self.root
    }

    /// Reads a key.
    pub fn get(&self, ns: &str, key: &str) -> Result<Option<String>, StateError> {
        self.with(ns, |map| Ok(map.get(key).cloned()))
    }

    /// Sets a key.
    pub fn set(&self, ns: &str, key: &str, value: &str) -> Result<(), StateError> {
        check_key(key)?;
        if value.len() > MAX_VALUE_BYTES {
            return Err(StateError::Invalid(format!("value larger than {MAX_VALUE_BYTES} bytes")));
        }
        self.update(ns, |map| map.insert(key.into(), value.into()).as_deref() != Some(value))
    }

    /// Removes a key.
    pub fn delete(&self, ns: &str, key: &str) -> Result<(), StateError> {
        self.update(ns, |map| map.remove(key).is_some())
    }

    /// Lists keys, sorted.
    pub fn keys(&self, ns: &str) -> Result<Vec<String>, StateError> {
        self.with(ns, |map| Ok(map.keys().cloned().collect()))
    }

    fn with<T>(&self, ns: &str, f: impl FnOnce(&mut Namespace) -> Result<T, StateError>) -> Result<T, StateError> {
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if !cache.contains_key(ns) {
            let loaded = self.load(ns)?;
            cache.insert(ns.to_string(), loaded);
        }
        f(cache.get_mut(ns).expect("inserted above"))
    }

    /// Applies `change` (which says whether it changed anything) and persists the result.
    /// On a failed write the cache is restored, so memory never runs ahead of disk.
    fn update(&self, ns: &str, change: impl FnOnce(&mut Namespace) -> bool) -> Result<(), StateError> {
        self.with(ns, |map| {
            let before = map.clone();
            if !change(map) {
                return Ok(());
            }
            let result = self.persist(ns, map);
            if result.is_err() {
                *map = before;
            }
            result
        })
    }

    fn path(&self, ns: &str) -> Result<PathBuf, StateError> {
        let valid = !ns.is_empty()
            && ns.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
            && !ns.starts_with('.');
        if !valid {
            return Err(StateError::Invalid(format!("invalid namespace `{ns}`")));
        }
        Ok(self.root.join(format!("{ns}.json")))
    }

    fn load(&self, ns: &str) -> Result<Namespace, StateError> {
        let path = self.path(ns)?;
        match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map_err(|e| StateError::Other(format!("state file {} is corrupt: {e}", path.display()))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Namespace::new()),
            Err(e) => Err(StateError::Other(format!("reading {}: {e}", path.display()))),
        }
    }

    fn persist(&self, ns: &str, map: &Namespace) -> Result<(), StateError> {
        let path = self.path(ns)?;
        let other = |e: std::io::Error| StateError::Other(format!("writing {}: {e}", path.display()));
        std::fs::create_dir_all(&self.root).map_err(other)?;
        let bytes = serde_json::to_vec_pretty(map).map_err(|e| StateError::Other(e.to_string()))?;
        super::write_atomic(&path, &bytes).map_err(other)
    }
}

fn check_key(key: &str) -> Result<(), StateError> {
    if key.is_empty() || key.len() > MAX_KEY_BYTES {
        return Err(StateError::Invalid(format!("keys must be 1 to {MAX_KEY_BYTES} bytes")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(b.keys("skill_a").unwrap(), Vec::<String>::new());
        assert_eq!(StateStore::new(dir.path()).get("skill_a", "k").unwrap(), None);
    }

    #[test]
    fn bad_keys_and_namespaces_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let s = StateStore::new(dir.path());
        assert!(matches!(s.set("a", "", "v"), Err(StateError::Invalid(_))));
        assert!(matches!(s.set("a", &"k".repeat(300), "v"), Err(StateError::Invalid(_))));
        assert!(matches!(s.set("../x", "k", "v"), Err(StateError::Invalid(_))));
    }

    #[test]
    fn corrupt_file_is_an_error_not_a_reset() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.json"), "{broken").unwrap();
        let s = StateStore::new(dir.path());
        assert!(matches!(s.get("a", "k"), Err(StateError::Other(m)) if m.contains("corrupt")));
    }
}
