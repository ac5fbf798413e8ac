//! A skill's distributable files: what a packaged skill carries, and what its component
//! reads at `/skill` when its manifest asks `[capabilities] files = "self"`. The set is
//! defined here once ([`distributable`]); docs/authoring.md describes it.
//!
//! The skill folder, minus:
//! - hidden files and folders (`.git/`, `.env`, `.venv/`, `.DS_Store`, ...), except `.build/`
//!   at the top, where `skill build` puts the script tools it built;
//! - build output and dependencies, at any depth: `target/`, `node_modules/`, `__pycache__/`,
//!   `*.pyc`;
//! - the component's sources: at the top `src/`, `wit/` (the skill's own WIT) and `sdk/` (the
//!   Rust SDK `skill new` copies); at any depth `Cargo.toml`, `Cargo.lock` and `*.rs`; for a
//!   Python or mithai component every `*.py` / `*.pyi`, for a JavaScript one every `*.js`,
//!   `*.mjs`, `*.cjs`, `*.ts`, `package.json` and `package-lock.json`, except the scripts that
//!   `SKILL.md` declares as tools (they load from their source).
//!
//! Refused, and reported ([`Refusal`]): a symlink that leads out of the folder, that leads
//! nowhere or to a folder; anything but a regular file; a file over [`MAX_FILE_BYTES`],
//! except the skill's components (`skill.wasm`, and the `.wasm` files under `.build/`),
//! which the host built and loads itself (a Python component is some 40 MB). A symlink to a
//! file inside the folder is that file's content under the link's name.

use super::build::detect_kind;
use super::manifest::{BuildKind, Manifest};
use crate::sandbox::SkillFiles;
use std::io::Read;
use std::path::{Path, PathBuf};

/// The largest distributable file: 16 MiB.
pub const MAX_FILE_BYTES: u64 = 16 << 20;

/// One file of the set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DistFile {
    /// Its path inside the skill folder (relative, no `..`).
    pub path: PathBuf,
    /// Its size in bytes.
    pub size: u64,
    /// Where its content is read from: the file, or the file a symlink inside the folder
    /// leads to.
    pub source: PathBuf,
}

/// A file the set would hold but cannot, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// Its path inside the skill folder.
    pub path: PathBuf,
    /// Why.
    pub reason: Refused,
}

/// Why a file is not in the set.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// A symlink leading out of the skill folder.
    #[error("a symlink out of the skill folder")]
    LeavesFolder,
    /// A symlink leading nowhere.
    #[error("a symlink to nothing")]
    Broken,
    /// A symlink to a folder (never followed: the set holds files).
    #[error("a symlink to a folder")]
    LinksFolder,
    /// A FIFO, a socket, a device.
    #[error("not a regular file")]
    NotAFile,
    /// A name that is not UTF-8 (no package format or guest path can carry it whole).
    #[error("a name that is not UTF-8")]
    Name,
    /// Over [`MAX_FILE_BYTES`].
    #[error("{size} bytes, over the 16 MiB a skill's file may have")]
    TooLarge {
        /// Its size.
        size: u64,
    },
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.reason)
    }
}

/// Why the set could not be listed or copied.
#[derive(Debug, thiserror::Error)]
pub enum FilesError {
    /// A folder or file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// What was being read or written.
        path: PathBuf,
        /// Why it failed.
        source: std::io::Error,
    },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> FilesError + '_ {
    move |source| FilesError::Io { path: path.to_path_buf(), source }
}

/// The distributable files of the skill folder `dir`, sorted by path, and what was refused.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Distributable {
    /// The files.
    pub files: Vec<DistFile>,
    /// The files refused.
    pub refused: Vec<Refusal>,
}

/// The distributable files of the skill folder `dir` (module docs).
pub fn distributable(dir: &Path) -> Result<Distributable, FilesError> {
    let root = dir.canonicalize().map_err(io(dir))?;
    let rules = Rules::of(&root);
    let mut set = Distributable::default();
    walk(Path::new(""), &rules, &mut set)?;
    Ok(set)
}

/// What is left out, beyond the rules for every skill.
struct Rules {
    /// The folder, canonical.
    root: PathBuf,
    /// Extensions of the component's source language.
    sources: &'static [&'static str],
    /// Top-level names of the component's language (its package files).
    package_files: &'static [&'static str],
    /// Script tools SKILL.md declares, which stay whatever their language.
    scripts: Vec<PathBuf>,
}

impl Rules {
    fn of(root: &Path) -> Self {
        let manifest = Manifest::load(root).unwrap_or_default();
        let (sources, package_files): (&[&str], &[&str]) = match detect_kind(root, &manifest) {
            Ok(BuildKind::Python | BuildKind::Mithai) => (&["py", "pyi"], &[]),
            Ok(BuildKind::Js) => (&["js", "mjs", "cjs", "ts"], &["package.json", "package-lock.json"]),
            Ok(BuildKind::Rust) | Err(_) => (&[], &[]),
        };
        // A SKILL.md that does not parse declares nothing; the loader reports it.
        let scripts = super::script::build::declared(root).unwrap_or_default();
        let scripts = scripts.iter().map(|d| PathBuf::from(d.script.trim_start_matches("./"))).collect();
        Rules { root: root.to_path_buf(), sources, package_files, scripts }
    }

    /// Whether `relative` (whose name is `name`, `dir`: a folder) is left out of the set.
    fn leaves_out(&self, relative: &Path, name: &str, dir: bool) -> bool {
        let top = relative.parent().is_none_or(|p| p.as_os_str().is_empty());
        if name.starts_with('.') {
            return !(top && dir && name == ".build");
        }
        if dir {
            return matches!(name, "target" | "node_modules" | "__pycache__")
                || (top && matches!(name, "src" | "wit" | "sdk"));
        }
        if matches!(name, "Cargo.toml" | "Cargo.lock") || (top && self.package_files.contains(&name)) {
            return true;
        }
        let extension = relative.extension().and_then(|e| e.to_str()).unwrap_or_default();
        match extension {
            "rs" | "pyc" => true,
            e if self.sources.contains(&e) => !self.scripts.iter().any(|s| s == relative),
            _ => false,
        }
    }
}

/// Adds what the folder `relative` (under `rules.root`) holds to `set`, in name order.
fn walk(relative: &Path, rules: &Rules, set: &mut Distributable) -> Result<(), FilesError> {
    let here = rules.root.join(relative);
    let mut entries: Vec<_> =
        std::fs::read_dir(&here).map_err(io(&here))?.collect::<Result<_, _>>().map_err(io(&here))?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let path = relative.join(entry.file_name());
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
            set.refused.push(Refusal { path, reason: Refused::Name });
            continue;
        };
        let kind = entry.file_type().map_err(io(&entry.path()))?;
        if kind.is_dir() {
            if !rules.leaves_out(&path, &name, true) {
                walk(&path, rules, set)?;
            }
        } else if !rules.leaves_out(&path, &name, false) {
            match file(&entry.path(), &path, kind, rules) {
                Ok((size, source)) => set.files.push(DistFile { path, size, source }),
                Err(reason) => set.refused.push(Refusal { path, reason }),
            }
        }
    }
    Ok(())
}

/// Whether `relative` is one of the skill's components, which no size cap applies to.
fn is_component(relative: &Path) -> bool {
    relative == Path::new(super::loader::WASM_FILE)
        || (relative.starts_with(".build") && relative.extension().is_some_and(|e| e == "wasm"))
}

/// The size and content's source of the file at `at` (`relative` in the folder), or why it
/// is refused.
fn file(at: &Path, relative: &Path, kind: std::fs::FileType, rules: &Rules) -> Result<(u64, PathBuf), Refused> {
    let source = if kind.is_symlink() {
        let target = at.canonicalize().map_err(|_| Refused::Broken)?;
        if !target.starts_with(&rules.root) {
            return Err(Refused::LeavesFolder);
        }
        target
    } else {
        at.to_path_buf()
    };
    let meta = std::fs::metadata(&source).map_err(|_| Refused::Broken)?;
    if meta.is_dir() {
        return Err(Refused::LinksFolder);
    }
    if !meta.is_file() {
        return Err(Refused::NotAFile);
    }
    if meta.len() > MAX_FILE_BYTES && !is_component(relative) {
        return Err(Refused::TooLarge { size: meta.len() });
    }
    Ok((meta.len(), source))
}

/// Places `set`'s files in `to` (an empty folder), each at its path: a hard link where the
/// filesystem allows one (no copy of a large component), else a copy. Returns how many files
/// and bytes it placed.
pub fn copy(set: &Distributable, to: &Path) -> Result<(usize, u64), FilesError> {
    let (mut files, mut bytes) = (0, 0);
    for file in &set.files {
        let target = to.join(&file.path);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).map_err(io(parent))?;
        }
        if std::fs::hard_link(&file.source, &target).is_err() && !copied(file, &target)? {
            continue;
        }
        (files, bytes) = (files + 1, bytes + file.size);
    }
    Ok((files, bytes))
}

/// Copies `file` to `target`, as it is now: a file that grew past the cap since it was
/// listed is left out (`false`).
fn copied(file: &DistFile, target: &Path) -> Result<bool, FilesError> {
    let cap = if is_component(&file.path) { u64::MAX } else { MAX_FILE_BYTES };
    let source = std::fs::File::open(&file.source).map_err(io(&file.source))?;
    let mut content = Vec::new();
    source.take(cap.saturating_add(1)).read_to_end(&mut content).map_err(io(&file.source))?;
    if content.len() as u64 > cap {
        tracing::warn!(file = %file.path.display(), "grew past 16 MiB since it was listed: left out");
        return Ok(false);
    }
    std::fs::write(target, &content).map_err(io(target))?;
    Ok(true)
}

/// Copies the distributable files of the skill folder `dir` (skill `skill`) into a fresh
/// temporary folder, for its component to read at `/skill`; what the set refuses is logged.
pub fn stage(skill: &str, dir: &Path) -> Result<SkillFiles, FilesError> {
    let set = distributable(dir)?;
    warn_refused(skill, &set);
    let temp = std::env::temp_dir();
    let to = tempfile::Builder::new().prefix("skillhost-files-").tempdir_in(&temp).map_err(io(&temp))?;
    let (files, bytes) = copy(&set, to.path())?;
    Ok(SkillFiles::new(to, files, bytes))
}

/// Logs each file `set` refused, for the author.
pub fn warn_refused(skill: &str, set: &Distributable) {
    for refusal in &set.refused {
        tracing::warn!(skill, "{refusal}: not one of the skill's files (not readable at /skill)");
    }
}

#[cfg(test)]
#[path = "files_tests.rs"]
mod tests;
