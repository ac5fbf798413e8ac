//! Memory files: plain files under one root, reachable only by relative paths that stay
//! inside it.

use std::io::Write;
use std::path::{Component, Path, PathBuf};

/// The largest file memory reads or writes.
pub const MAX_FILE_BYTES: usize = 4 * 1024 * 1024;
/// The most hits a search returns.
pub const MAX_SEARCH_HITS: usize = 100;

/// Why a memory operation failed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum MemoryError {
    /// The path is absolute, leaves the root, passes through a symlink, or is unusable.
    #[error("invalid path `{path}`: {reason}")]
    InvalidPath {
        /// The path as given.
        path: String,
        /// Why it was refused.
        reason: &'static str,
    },
    /// A file holds invalid JSON.
    #[error("`{path}` is not valid JSON: {reason}")]
    InvalidJson {
        /// The path.
        path: String,
        /// The parser's message.
        reason: String,
    },
    /// Content or file over [`MAX_FILE_BYTES`].
    #[error("larger than the {MAX_FILE_BYTES}-byte limit")]
    TooLarge,
    /// An I/O failure.
    #[error("{0}")]
    Io(String),
}

/// One matching line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchHit {
    /// Path relative to the root, with `/` separators.
    pub path: String,
    /// 1-based line number.
    pub line: u32,
    /// The line.
    pub text: String,
}

/// The memory root.
#[derive(Debug, Clone)]
pub struct MemoryStore {
    root: PathBuf,
}

fn io(e: std::io::Error) -> MemoryError {
    MemoryError::Io(e.to_string())
}

impl MemoryStore {
    /// A store rooted at `root` (created on first write).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        MemoryStore { root: root.into() }
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Reads a file; `None` when it does not exist.
    pub fn read(&self, path: &str) -> Result<Option<String>, MemoryError> {
        let full = self.confine(path)?;
        match std::fs::metadata(&full) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io(e)),
            Ok(meta) if meta.len() as usize > MAX_FILE_BYTES => return Err(MemoryError::TooLarge),
            Ok(meta) if meta.is_dir() => {
                return Err(MemoryError::InvalidPath { path: path.into(), reason: "is a directory" });
            }
            Ok(_) => {}
        }
        let bytes = std::fs::read(&full).map_err(io)?;
        Ok(Some(String::from_utf8_lossy(&bytes).into_owned()))
    }

    /// Reads a JSON file and returns it re-encoded; `None` when it does not exist.
    pub fn read_json(&self, path: &str) -> Result<Option<String>, MemoryError> {
        let Some(text) = self.read(path)? else { return Ok(None) };
        let value: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| MemoryError::InvalidJson { path: path.into(), reason: e.to_string() })?;
        Ok(Some(value.to_string()))
    }

    /// Writes (or appends to) a file, creating parent directories.
    pub fn write(&self, path: &str, content: &str, append: bool) -> Result<(), MemoryError> {
        if content.len() > MAX_FILE_BYTES {
            return Err(MemoryError::TooLarge);
        }
        let full = self.confine(path)?;
        if let Some(parent) = full.parent() {
            std::fs::create_dir_all(parent).map_err(io)?;
        }
        // Directories created just now may race with a symlink swap: check again.
        let full = self.confine(path)?;
        if !append {
            return super::write_atomic(&full, content.as_bytes()).map_err(io);
        }
        let existing = std::fs::metadata(&full).map(|m| m.len()).unwrap_or(0) as usize;
        if existing + content.len() > MAX_FILE_BYTES {
            return Err(MemoryError::TooLarge);
        }
        let mut file = std::fs::OpenOptions::new().create(true).append(true).open(&full).map_err(io)?;
        file.write_all(content.as_bytes()).map_err(io)
    }

    /// Case-insensitive substring search over every file, at most [`MAX_SEARCH_HITS`] hits.
    pub fn search(&self, query: &str) -> Result<Vec<SearchHit>, MemoryError> {
        let needle = query.to_lowercase();
        let mut hits = Vec::new();
        if needle.is_empty() || !self.root.is_dir() {
            return Ok(hits);
        }
        let mut dirs = vec![self.root.clone()];
        while let Some(dir) = dirs.pop() {
            let mut entries: Vec<_> = std::fs::read_dir(&dir).map_err(io)?.flatten().collect();
            entries.sort_by_key(|e| e.file_name());
            for entry in entries {
                let Ok(kind) = entry.file_type() else { continue };
                if kind.is_dir() {
                    dirs.push(entry.path());
                } else if kind.is_file() {
                    self.search_file(&entry.path(), &needle, &mut hits);
                }
                if hits.len() >= MAX_SEARCH_HITS {
                    return Ok(hits);
                }
            }
        }
        Ok(hits)
    }

    fn search_file(&self, file: &Path, needle: &str, hits: &mut Vec<SearchHit>) {
        let too_big = std::fs::metadata(file).map(|m| m.len() as usize > MAX_FILE_BYTES);
        if too_big.unwrap_or(true) {
            return;
        }
        let Ok(text) = std::fs::read_to_string(file) else { return };
        let rel = file.strip_prefix(&self.root).unwrap_or(file);
        let rel = rel.components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>();
        for (index, line) in text.lines().enumerate() {
            if hits.len() >= MAX_SEARCH_HITS {
                return;
            }
            if line.to_lowercase().contains(needle) {
                hits.push(SearchHit { path: rel.join("/"), line: index as u32 + 1, text: line.into() });
            }
        }
    }

    /// Maps a relative path to a full path that provably stays inside the root: no absolute
    /// paths, no `..`, and no existing component of it may be a symlink.
    fn confine(&self, path: &str) -> Result<PathBuf, MemoryError> {
        let invalid = |reason| MemoryError::InvalidPath { path: path.into(), reason };
        if path.is_empty() || path.contains('\0') {
            return Err(invalid("empty or contains NUL"));
        }
        let rel = Path::new(path);
        let mut full = self.root.clone();
        for component in rel.components() {
            match component {
                Component::Normal(part) => full.push(part),
                Component::CurDir => {}
                Component::ParentDir => return Err(invalid("`..` is not allowed")),
                Component::RootDir | Component::Prefix(_) => {
                    return Err(invalid("absolute paths are not allowed"));
                }
            }
            if std::fs::symlink_metadata(&full).is_ok_and(|m| m.file_type().is_symlink()) {
                return Err(invalid("symlinks are not followed"));
            }
        }
        if full == self.root {
            return Err(invalid("names the memory root itself"));
        }
        Ok(full)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> (tempfile::TempDir, MemoryStore) {
        let dir = tempfile::tempdir().unwrap();
        let store = MemoryStore::new(dir.path().join("mem"));
        (dir, store)
    }

    #[test]
    fn write_read_append_search() {
        let (_d, m) = store();
        assert_eq!(m.read("notes/a.md").unwrap(), None);
        m.write("notes/a.md", "Disk full on db-1\n", false).unwrap();
        m.write("notes/a.md", "fixed by rotating logs\n", true).unwrap();
        let text = m.read("notes/a.md").unwrap().unwrap();
        assert_eq!(text, "Disk full on db-1\nfixed by rotating logs\n");
        let hits = m.search("DISK").unwrap();
        assert_eq!(hits, vec![SearchHit { path: "notes/a.md".into(), line: 1, text: "Disk full on db-1".into() }]);
    }

    #[test]
    fn escapes_are_refused() {
        let (dir, m) = store();
        for bad in ["../x", "a/../../x", "/etc/passwd", "", "./"] {
            assert!(matches!(m.read(bad), Err(MemoryError::InvalidPath { .. })), "{bad}");
            assert!(matches!(m.write(bad, "x", false), Err(MemoryError::InvalidPath { .. })), "{bad}");
        }
        std::fs::create_dir_all(m.root()).unwrap();
        std::fs::write(dir.path().join("secret"), "s").unwrap();
        std::os::unix::fs::symlink(dir.path().join("secret"), m.root().join("link")).unwrap();
        std::os::unix::fs::symlink(dir.path(), m.root().join("dirlink")).unwrap();
        assert!(matches!(m.read("link"), Err(MemoryError::InvalidPath { .. })));
        assert!(matches!(m.read("dirlink/secret"), Err(MemoryError::InvalidPath { .. })));
        assert!(matches!(m.write("dirlink/new", "x", false), Err(MemoryError::InvalidPath { .. })));
        assert!(!dir.path().join("new").exists());
    }

    #[test]
    fn json_is_checked() {
        let (_d, m) = store();
        m.write("a.json", "{\"k\": [1, 2]}", false).unwrap();
        assert_eq!(m.read_json("a.json").unwrap().unwrap(), "{\"k\":[1,2]}");
        m.write("b.json", "{nope", false).unwrap();
        assert!(matches!(m.read_json("b.json"), Err(MemoryError::InvalidJson { .. })));
    }

    #[test]
    fn size_is_capped() {
        let (_d, m) = store();
        let big = "x".repeat(MAX_FILE_BYTES + 1);
        assert_eq!(m.write("big", &big, false), Err(MemoryError::TooLarge));
    }
}
