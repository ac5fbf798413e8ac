//! JavaScript skills, built with componentize-js under Node.
//!
//! The skill folder is copied to a scratch folder with the JS SDK (`sdk-js/skillhost.js`)
//! beside its entry module, and `componentize.mjs` (embedded here) does the rest: a syntax
//! check that names file and line, the generated world and entry module, the component.

use crate::{BuildError, which};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The componentize-js version `skillhost skill build` installs when it finds none.
pub const COMPONENTIZE_JS_VERSION: &str = "0.23.0";
/// The WASI shim componentize-js loads but npm leaves out (an optional peer dependency of
/// its transpiler), installed beside it; `sdk-js/package.json` pins the same.
pub const PREVIEW2_SHIM_VERSION: &str = "0.25.0";

/// The JS SDK, put beside a JS skill's entry module as `./skillhost.js`.
pub const JS_SDK: &str = include_str!("../../sdk-js/skillhost.js");

const RUNNER: &str = include_str!("componentize.mjs");

/// The WASI features a JS skill may ask for in `[build] js_features` (`stdio` is always on,
/// so that errors reach the host's log).
pub const JS_FEATURES: &[&str] = &["random", "clocks"];

/// What to build: the skill folder, its entry module, the features it keeps.
#[derive(Debug, Clone)]
pub struct JsBuild<'a> {
    /// The skill folder.
    pub dir: &'a Path,
    /// The entry module, relative to `dir` (default `app.js`).
    pub entry: &'a str,
    /// WASI features beyond `stdio` (from [`JS_FEATURES`]).
    pub features: &'a [String],
    /// The folder holding the skillhost WIT.
    pub contract: &'a Path,
    /// Where the component goes.
    pub output: &'a Path,
}

/// Where componentize-js is looked for, in order: `$SKILLHOST_COMPONENTIZE_JS` (a folder with
/// `node_modules/`), the skill's own `node_modules/`, then the shared cache
/// (`$XDG_CACHE_HOME/skillhost/js` or `~/.cache/skillhost/js`), installed there with npm when
/// missing unless `offline`.
pub fn find_componentize_js(dir: &Path, offline: bool, progress: &mut dyn FnMut(&str)) -> Result<PathBuf, BuildError> {
    let package = |root: &Path| root.join("node_modules/@bytecodealliance/componentize-js");
    let mut roots: Vec<PathBuf> =
        std::env::var_os("SKILLHOST_COMPONENTIZE_JS").map(PathBuf::from).into_iter().collect();
    roots.push(dir.to_path_buf());
    if let Some(found) = roots.iter().map(|r| package(r)).find(|p| p.join("package.json").is_file()) {
        return Ok(found);
    }
    let cache = js_cache().ok_or_else(|| BuildError::NoToolchain("no HOME for the componentize-js cache".into()))?;
    if package(&cache).join("package.json").is_file() {
        return Ok(package(&cache));
    }
    let install = format!(
        "npm install --prefix {} --no-audit --no-fund @bytecodealliance/componentize-js@{COMPONENTIZE_JS_VERSION} \
         @bytecodealliance/preview2-shim@{PREVIEW2_SHIM_VERSION}",
        cache.display()
    );
    if offline {
        return Err(BuildError::NoToolchain(format!(
            "componentize-js is not installed and offline mode forbids installing it. Fix it with:\n  {install}\n\
             or point SKILLHOST_COMPONENTIZE_JS at a folder whose node_modules/ has it"
        )));
    }
    let npm = which("npm").ok_or_else(|| BuildError::NoToolchain(format!("npm is not installed; {}", node_help())))?;
    progress(&format!("installing componentize-js {COMPONENTIZE_JS_VERSION} into {} (once)", cache.display()));
    std::fs::create_dir_all(&cache).map_err(|e| BuildError::Failed(format!("{}: {e}", cache.display())))?;
    let status = Command::new(npm)
        .args(["install", "--prefix"])
        .arg(&cache)
        .args(["--no-audit", "--no-fund", &format!("@bytecodealliance/componentize-js@{COMPONENTIZE_JS_VERSION}")])
        .arg(format!("@bytecodealliance/preview2-shim@{PREVIEW2_SHIM_VERSION}"))
        .stdin(Stdio::null())
        .status()
        .map_err(|e| BuildError::Failed(format!("cannot run npm: {e}")))?;
    if !status.success() || !package(&cache).join("package.json").is_file() {
        return Err(BuildError::Failed(format!("installing componentize-js failed ({status}); try:\n  {install}")));
    }
    Ok(package(&cache))
}

fn js_cache() -> Option<PathBuf> {
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(cache.join("skillhost").join("js"))
}

pub(crate) fn node_help() -> &'static str {
    "JavaScript skills need Node.js 20 or later: apt-get install nodejs npm"
}

/// Builds a JavaScript skill with the componentize-js package at `componentize`.
pub fn build_js(job: &JsBuild<'_>, componentize: &Path) -> Result<(), BuildError> {
    let node =
        which("node").ok_or_else(|| BuildError::NoToolchain(format!("node is not installed. {}", node_help())))?;
    if let Some(bad) = job.features.iter().find(|f| !JS_FEATURES.contains(&f.as_str())) {
        return Err(BuildError::Failed(format!(
            "[build] js_features: unknown feature {bad:?} (known: {})",
            JS_FEATURES.join(", ")
        )));
    }
    if !job.dir.join(job.entry).is_file() {
        return Err(BuildError::Failed(format!("{}: no entry module {}", job.dir.display(), job.entry)));
    }
    let scratch = tempfile::tempdir().map_err(|e| BuildError::Failed(e.to_string()))?;
    let staging = scratch.path().join("src");
    let fail = |e: std::io::Error| BuildError::Failed(format!("staging the sources: {e}"));
    copy_sources(job.dir, &staging).map_err(fail)?;
    std::fs::write(staging.join("skillhost.js"), JS_SDK).map_err(fail)?;
    std::fs::write(scratch.path().join("componentize.mjs"), RUNNER).map_err(fail)?;
    let spec = job_json(job, componentize, &staging, scratch.path());
    std::fs::write(scratch.path().join("job.json"), spec).map_err(fail)?;
    let status = Command::new(node)
        .current_dir(&staging)
        .arg(scratch.path().join("componentize.mjs"))
        .arg(scratch.path().join("job.json"))
        .stdin(Stdio::null())
        .status()
        .map_err(|e| BuildError::Failed(format!("cannot run node: {e}")))?;
    if !status.success() {
        return Err(BuildError::Failed(format!("componentize-js failed in {} ({status})", job.dir.display())));
    }
    Ok(())
}

/// Copies the skill's files (not `node_modules/`, `target/`, dot folders or `.wasm` files).
fn copy_sources(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let name = entry.file_name();
        let text = name.to_string_lossy();
        if text.starts_with('.') || text == "node_modules" || text == "target" || text.ends_with(".wasm") {
            continue;
        }
        let kind = entry.file_type()?;
        if kind.is_dir() {
            copy_sources(&entry.path(), &to.join(&name))?;
        } else if kind.is_file() {
            std::fs::copy(entry.path(), to.join(&name))?;
        }
    }
    Ok(())
}

/// The runner's job as JSON (this crate has no JSON dependency; paths and names are quoted
/// by [`json_string`]).
fn job_json(job: &JsBuild<'_>, componentize: &Path, staging: &Path, scratch: &Path) -> String {
    let q = |p: &Path| json_string(&p.to_string_lossy());
    let features: Vec<String> = job.features.iter().map(|f| json_string(f)).collect();
    format!(
        "{{\"componentize\": {}, \"staging\": {}, \"scratch\": {}, \"source\": {}, \"entry\": {}, \"contract\": {}, \"output\": {}, \"features\": [{}]}}",
        q(componentize),
        q(staging),
        q(scratch),
        q(job.dir),
        json_string(job.entry),
        q(job.contract),
        q(job.output),
        features.join(", ")
    )
}

pub(crate) fn json_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_strings_are_escaped() {
        assert_eq!(json_string("a\"b\\c\n"), "\"a\\\"b\\\\c\\u000a\"");
    }
}
