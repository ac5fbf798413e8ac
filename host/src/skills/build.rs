//! `skillhost skill build`: turns a skill folder's source into `skill.wasm` (Rust through
//! cargo, Python through componentize-py with the Python SDK bundled, a mithai `tools.py`
//! through componentize-py with the mithai shim, JavaScript through componentize-js with the
//! JS SDK; all in `toolchain/`).

use super::loader::WASM_FILE;
use super::manifest::{BuildKind, Manifest};
use skillhost_toolchain as toolchain;
use std::path::{Path, PathBuf};

/// Why a skill folder did not build.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// No installed toolchain builds this kind of source; the message names what to install.
    #[error("{0}")]
    NoToolchain(String),
    /// The folder or its build is wrong (the compiler's messages were printed).
    #[error("{0}")]
    Failed(String),
}

impl From<toolchain::BuildError> for BuildError {
    fn from(e: toolchain::BuildError) -> Self {
        match e {
            toolchain::BuildError::NoToolchain(m) => BuildError::NoToolchain(m),
            toolchain::BuildError::Failed(m) => BuildError::Failed(m),
        }
    }
}

impl From<String> for BuildError {
    fn from(message: String) -> Self {
        BuildError::Failed(message)
    }
}

/// The WIT contract, embedded so that builds work wherever the binary is.
pub const WIT_FILES: &[(&str, &str)] = &[
    ("skill.wit", include_str!("../../../wit/skill.wit")),
    ("types.wit", include_str!("../../../wit/types.wit")),
    ("host.wit", include_str!("../../../wit/host.wit")),
];

/// Writes the embedded WIT into `dir`.
pub fn write_wit(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    for (name, text) in WIT_FILES {
        std::fs::write(dir.join(name), text)?;
    }
    Ok(())
}

/// What kind of source `dir` holds: `[build] kind`, else `Cargo.toml` (Rust), the Python
/// module (`app.py`), a mithai `tools.py`, a JavaScript entry (`package.json` / `app.js`).
pub fn detect_kind(dir: &Path, manifest: &Manifest) -> Result<BuildKind, String> {
    if let Some(kind) = manifest.build.kind {
        return Ok(kind);
    }
    if dir.join("Cargo.toml").is_file() {
        return Ok(BuildKind::Rust);
    }
    if dir.join(format!("{}.py", python_module(manifest))).is_file() {
        return Ok(BuildKind::Python);
    }
    if toolchain::is_mithai_skill(dir) {
        return Ok(BuildKind::Mithai);
    }
    if dir.join("package.json").is_file() || dir.join(js_entry(dir, manifest)).is_file() {
        return Ok(BuildKind::Js);
    }
    Err(format!(
        "{}: no Cargo.toml, app.py, tools.py or app.js to build (set [build] kind in skill.toml)",
        dir.display()
    ))
}

fn python_module(manifest: &Manifest) -> &str {
    manifest.build.python_module.as_deref().unwrap_or("app")
}

/// The JS entry module: `[build] js_entry`, else `package.json`'s `main`, else `app.js`.
fn js_entry(dir: &Path, manifest: &Manifest) -> String {
    if let Some(entry) = &manifest.build.js_entry {
        return entry.clone();
    }
    let main = std::fs::read_to_string(dir.join("package.json"))
        .ok()
        .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
        .and_then(|package| package.get("main")?.as_str().map(str::to_owned));
    main.map(|m| m.trim_start_matches("./").to_owned()).unwrap_or_else(|| "app.js".into())
}

/// Builds the skill in `dir`: its component from its source (to `dir/skill.wasm`) and its
/// script tools (SKILL.md `tools:`); returns the components written. A folder with script
/// tools needs no component source.
pub fn build(dir: &Path, offline: bool, progress: &mut dyn FnMut(&str)) -> Result<Vec<PathBuf>, BuildError> {
    let manifest = Manifest::load(dir).map_err(|e| format!("{}: {e}", dir.join("skill.toml").display()))?;
    let scripts = super::script::build::declared(dir)?;
    let mut built = Vec::new();
    match detect_kind(dir, &manifest) {
        Ok(kind) => built.push(build_component(dir, &manifest, kind, offline, progress)?),
        Err(e) if scripts.is_empty() => return Err(e.into()),
        Err(_) => {}
    }
    built.extend(super::script::build::build_scripts(dir, offline, progress)?);
    Ok(built)
}

/// Builds the component of the skill in `dir` from its `kind` of source to `dir/skill.wasm`.
fn build_component(
    dir: &Path,
    manifest: &Manifest,
    kind: BuildKind,
    offline: bool,
    progress: &mut dyn FnMut(&str),
) -> Result<PathBuf, BuildError> {
    let output = dir.join(WASM_FILE);
    match kind {
        BuildKind::Rust => build_rust(dir, offline, &output, progress)?,
        BuildKind::Python => {
            let wit = contract()?;
            progress(&format!("building {} with componentize-py", dir.display()));
            let world = manifest.build.world.as_deref();
            toolchain::build_python_app(dir, python_module(manifest), wit.path(), world, &output)?;
        }
        BuildKind::Mithai => {
            let wit = contract()?;
            progress(&format!("building the mithai skill {} with componentize-py and the mithai shim", dir.display()));
            toolchain::build_mithai(dir, wit.path(), &output)?;
        }
        BuildKind::Js => {
            let wit = contract()?;
            let componentize = toolchain::find_componentize_js(dir, offline, progress)?;
            progress(&format!("building {} with componentize-js ({})", dir.display(), componentize.display()));
            let entry = js_entry(dir, manifest);
            let job = toolchain::JsBuild {
                dir,
                entry: &entry,
                features: &manifest.build.js_features,
                contract: wit.path(),
                output: &output,
            };
            toolchain::build_js(&job, &componentize)?;
        }
    }
    Ok(output)
}

/// The embedded WIT in a scratch folder.
fn contract() -> Result<tempfile::TempDir, String> {
    let wit = tempfile::tempdir().map_err(|e| e.to_string())?;
    write_wit(wit.path()).map_err(|e| e.to_string())?;
    Ok(wit)
}

fn build_rust(dir: &Path, offline: bool, output: &Path, progress: &mut dyn FnMut(&str)) -> Result<(), BuildError> {
    let tc = toolchain::find_rust_toolchain(offline, progress)?;
    progress(&format!("building {} with {}", dir.display(), describe(&tc)));
    // An explicit CARGO_TARGET_DIR is the user's choice (the toolchain drops the
    // variable itself, since inside a build script it belongs to the outer build).
    let target_dir = std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from);
    let artifacts = toolchain::build_rust_with(dir, target_dir.as_deref(), &tc, offline)?;
    let wasm = pick_artifact(dir, &artifacts)?;
    std::fs::copy(&wasm, output).map_err(|e| format!("copying {}: {e}", wasm.display()))?;
    Ok(())
}

fn describe(tc: &toolchain::RustToolchain) -> &'static str {
    match tc {
        toolchain::RustToolchain::Rustup => "rustup's wasm32-wasip2 target",
        toolchain::RustToolchain::OfflineBuildStd { .. } => "the offline build-std toolchain",
    }
}

/// The artifact of the crate in `dir` (cargo may also report the workspace's others).
fn pick_artifact(dir: &Path, artifacts: &[PathBuf]) -> Result<PathBuf, String> {
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).map_err(|e| e.to_string())?;
    let name = manifest
        .parse::<toml::Table>()
        .ok()
        .and_then(|t| t.get("package")?.get("name")?.as_str().map(|n| n.replace('-', "_")));
    let chosen = match name {
        Some(name) => artifacts.iter().find(|a| a.file_stem().is_some_and(|s| s == name.as_str())),
        None => artifacts.first(),
    };
    chosen
        .cloned()
        .ok_or_else(|| format!("the build produced no .wasm for {}: is its crate-type [\"cdylib\"]?", dir.display()))
}
