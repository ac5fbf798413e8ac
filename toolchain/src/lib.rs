//! Builds skill sources into WebAssembly components.
//!
//! Used by `skillhost skill build` and by the tests' build script, so both find toolchains
//! the same way. For Rust the target is `wasm32-wasip2`, found in this order:
//!
//! 1. a rustup toolchain that has the target installed;
//! 2. rustup adding the target (bounded in time: it hangs where the network is closed),
//!    unless offline mode is asked for;
//! 3. the offline path: Debian's `rustc-web` with its library sources, building `std` for
//!    wasm32-wasip2 with `-Zbuild-std` (needs `rustc-web cargo-web rust-web-src lld-22
//!    wasi-libc` from Debian, and the `wasm-component-ld` linker from crates.io, which
//!    Debian's rustc names but does not ship);
//! 4. otherwise an error that lists the exact commands that fix it.
//!
//! Python skills are built with `componentize-py` (`python.rs`, which also bundles the
//! Python SDK; `mithai.rs` for mithai `tools.py` skills, with their shim), JavaScript skills
//! with `componentize-js` under Node (`js.rs`).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod js;
mod mithai;
mod python;
mod script;

pub use js::*;
pub use mithai::*;
pub use python::*;
pub use script::*;

/// The Rust target skills are built for.
pub const TARGET: &str = "wasm32-wasip2";

/// Why a build did not produce a component.
#[derive(Debug)]
pub enum BuildError {
    /// No usable toolchain; the message lists the commands that fix it.
    NoToolchain(String),
    /// The build ran and failed (the compiler's messages were printed).
    Failed(String),
}

impl std::fmt::Display for BuildError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BuildError::NoToolchain(m) | BuildError::Failed(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for BuildError {}

/// A way to build Rust for [`TARGET`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RustToolchain {
    /// rustup's cargo with the target installed.
    Rustup,
    /// Debian's cargo and rustc building std from source.
    OfflineBuildStd {
        /// Debian's cargo.
        cargo: PathBuf,
        /// Where wasi-libc's libraries are.
        libc_dir: PathBuf,
        /// The folders of `wasm-component-ld` and of the `wasm-ld` it runs, put on the
        /// build's `PATH` (Debian's `lld-22` has `wasm-ld` only under its LLVM folder).
        linker_dirs: Vec<PathBuf>,
    },
}

/// How long `rustup target add` may take before it is given up on.
pub const RUSTUP_ADD_TIMEOUT: Duration = Duration::from_secs(45);

/// Finds a toolchain; with `offline`, never runs `rustup target add`.
pub fn find_rust_toolchain(offline: bool, progress: &mut dyn FnMut(&str)) -> Result<RustToolchain, BuildError> {
    if rustup_has_target() {
        return Ok(RustToolchain::Rustup);
    }
    if !offline && which("rustup").is_some() && !recently_failed() {
        progress(&format!("installing the {TARGET} target with rustup (at most {}s)", RUSTUP_ADD_TIMEOUT.as_secs()));
        let mut cmd = Command::new("rustup");
        cmd.args(["target", "add", TARGET]);
        if run_bounded(cmd, RUSTUP_ADD_TIMEOUT) && rustup_has_target() {
            return Ok(RustToolchain::Rustup);
        }
        remember_failure();
        progress("rustup could not install the target; trying the offline build-std path");
    }
    offline_build_std().ok_or_else(|| BuildError::NoToolchain(no_toolchain_help()))
}

/// A failed `rustup target add` is remembered for an hour, so that every build on a machine
/// without network does not wait out the timeout again.
fn failure_marker() -> Option<PathBuf> {
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(cache.join("skillhost").join("rustup-target-add-failed"))
}

fn recently_failed() -> bool {
    let age = failure_marker()
        .and_then(|m| std::fs::metadata(m).ok())
        .and_then(|m| m.modified().ok())
        .and_then(|t| t.elapsed().ok());
    age.is_some_and(|age| age < Duration::from_secs(3600))
}

fn remember_failure() {
    if let Some(marker) = failure_marker() {
        let _ = marker.parent().map(std::fs::create_dir_all);
        let _ = std::fs::write(marker, TARGET);
    }
}

fn rustup_has_target() -> bool {
    let Ok(out) = Command::new("rustup").args(["target", "list", "--installed"]).stderr(Stdio::null()).output() else {
        return false;
    };
    out.status.success() && String::from_utf8_lossy(&out.stdout).lines().any(|l| l.trim() == TARGET)
}

fn offline_build_std() -> Option<RustToolchain> {
    let cargo = PathBuf::from("/usr/bin/cargo");
    let libc_dir = PathBuf::from("/usr/lib/wasm32-wasi");
    let rust_src = Path::new("/usr/lib/rustlib/src/rust/library");
    let have = cargo.is_file()
        && Path::new("/usr/bin/rustc").is_file()
        && rust_src.is_dir()
        && libc_dir.join("libc.a").is_file();
    let component_ld = which("wasm-component-ld").or_else(|| {
        let home = std::env::var_os("CARGO_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))?;
        Some(home.join("bin").join("wasm-component-ld")).filter(|p| p.is_file())
    })?;
    let wasm_ld = which("wasm-ld").or_else(newest_llvm_wasm_ld)?;
    let linker_dirs = [component_ld, wasm_ld].iter().filter_map(|p| p.parent().map(Path::to_path_buf)).collect();
    have.then_some(RustToolchain::OfflineBuildStd { cargo, libc_dir, linker_dirs })
}

/// `wasm-ld` of the newest LLVM installed under `/usr/lib/llvm-N` (Debian's `lld-N`).
fn newest_llvm_wasm_ld() -> Option<PathBuf> {
    let versions = std::fs::read_dir("/usr/lib").ok()?.filter_map(|entry| {
        let name = entry.ok()?.file_name().into_string().ok()?;
        let version: u32 = name.strip_prefix("llvm-")?.parse().ok()?;
        let wasm_ld = PathBuf::from("/usr/lib").join(name).join("bin").join("wasm-ld");
        wasm_ld.is_file().then_some((version, wasm_ld))
    });
    versions.max_by_key(|(version, _)| *version).map(|(_, path)| path)
}

/// The `wasm-component-ld` that `.ci/run` and the README install for Debian's rustc 1.85
/// (the version its own sources name).
pub const WASM_COMPONENT_LD: &str = "0.5.12";

/// The `rustc-web` of Debian 12 itself, which builds guests whose file paths work with
/// Debian's wasi-libc (`.ci/run` and the README install the same).
const DEBIAN_RUST: &str = "1.85.0+dfsg3-1~deb12u3";

fn no_toolchain_help() -> String {
    format!(
        "no toolchain can build Rust for {TARGET}. Fix it with one of:\n\
         \x20 rustup target add {TARGET}\n\
         or, offline on Debian 12 (no download from the Rust project needed):\n\
         \x20 apt-get update && apt-get install -y --allow-downgrades rustc-web={DEBIAN_RUST} \
         cargo-web={DEBIAN_RUST} rust-web-src={DEBIAN_RUST} libstd-rust-web-dev={DEBIAN_RUST} lld-22 wasi-libc\n\
         \x20 cargo install --locked wasm-component-ld@{WASM_COMPONENT_LD}\n\
         (Debian 12's own 1.85: the 1.96 of bookworm-security builds a std whose relative file paths fail \
         against Debian's wasi-libc)"
    )
}

/// Runs `cmd`, killing it after `timeout`; true when it exited successfully in time.
fn run_bounded(mut cmd: Command, timeout: Duration) -> bool {
    let Ok(mut child) = cmd.stdin(Stdio::null()).spawn() else { return false };
    let start = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return status.success(),
            Ok(None) if start.elapsed() < timeout => std::thread::sleep(Duration::from_millis(100)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return false;
            }
        }
    }
}

pub(crate) use js::json_string;

pub(crate) fn which(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|dir| dir.join(program)).find(|p| p.is_file())
}

/// Environment variables a parent cargo (or build script) sets that must not leak into a
/// nested build for another target with another toolchain.
const LEAKY_ENV: &[&str] = &[
    "RUSTC",
    "RUSTC_WRAPPER",
    "RUSTC_WORKSPACE_WRAPPER",
    "RUSTDOC",
    "RUSTFLAGS",
    "CARGO_ENCODED_RUSTFLAGS",
    "CARGO_BUILD_TARGET",
    "CARGO_TARGET_DIR",
    "CARGO_BUILD_TARGET_DIR",
    "CARGO_MAKEFLAGS",
    "MAKEFLAGS",
    "MFLAGS",
    "RUSTUP_TOOLCHAIN",
    "CARGO",
    "CARGO_BUILD_RUSTFLAGS",
    "RUSTC_BOOTSTRAP",
    "CARGO_PRIMARY_PACKAGE",
    "CLIPPY_ARGS",
];

/// Builds the cargo project (crate or workspace) at `manifest_dir` in release mode for
/// [`TARGET`] and returns the `.wasm` files it produced. Cargo's progress and the compiler's
/// messages go to this process's stderr.
pub fn build_rust(
    manifest_dir: &Path,
    target_dir: Option<&Path>,
    toolchain: &RustToolchain,
) -> Result<Vec<PathBuf>, BuildError> {
    build_rust_with(manifest_dir, target_dir, toolchain, false)
}

/// [`build_rust`], and with `offline` cargo resolves and fetches nothing from the network
/// (`--offline`): a new skill outside any workspace, with no lock file yet, resolves its
/// dependencies from what earlier builds downloaded.
pub fn build_rust_with(
    manifest_dir: &Path,
    target_dir: Option<&Path>,
    toolchain: &RustToolchain,
    offline: bool,
) -> Result<Vec<PathBuf>, BuildError> {
    let mut cmd = match toolchain {
        RustToolchain::Rustup => Command::new(which("cargo").unwrap_or_else(|| PathBuf::from("cargo"))),
        RustToolchain::OfflineBuildStd { cargo, .. } => Command::new(cargo),
    };
    for var in LEAKY_ENV {
        cmd.env_remove(var);
    }
    cmd.current_dir(manifest_dir)
        .args(["build", "--release", "--target", TARGET, "--message-format=json-render-diagnostics"])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    if let Some(dir) = target_dir {
        cmd.arg("--target-dir").arg(dir);
    }
    if offline {
        cmd.arg("--offline");
    }
    if let RustToolchain::OfflineBuildStd { libc_dir, linker_dirs, .. } = toolchain {
        let path = std::env::var_os("PATH").unwrap_or_default();
        // Debian's rustc and cargo first: a linker's folder may hold rustup's proxies too.
        let dirs = [PathBuf::from("/usr/bin")]
            .into_iter()
            .chain(linker_dirs.iter().cloned())
            .chain(std::env::split_paths(&path));
        cmd.env("PATH", std::env::join_paths(dirs).unwrap_or(path))
            .env("RUSTC_BOOTSTRAP", "1")
            .env("RUSTFLAGS", format!("-L {}", libc_dir.display()))
            .arg("-Zbuild-std=std,panic_abort");
    }
    let mut child = cmd.spawn().map_err(|e| BuildError::Failed(format!("cannot run cargo: {e}")))?;
    let stdout = child.stdout.take().expect("stdout is piped");
    let artifacts = wasm_artifacts(BufReader::new(stdout));
    let status = child.wait().map_err(|e| BuildError::Failed(e.to_string()))?;
    if !status.success() {
        return Err(BuildError::Failed(format!("cargo build failed in {} ({status})", manifest_dir.display())));
    }
    Ok(artifacts)
}

/// Reads cargo's JSON messages and collects the `.wasm` files of compiler artifacts.
fn wasm_artifacts(reader: impl BufRead) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for line in reader.lines().map_while(Result::ok) {
        if !line.contains("\"compiler-artifact\"") {
            continue;
        }
        if let Some(start) = line.find("\"filenames\":[") {
            let rest = &line[start + 13..];
            let list = &rest[..rest.find(']').unwrap_or(rest.len())];
            for name in list.split(',') {
                let name = name.trim().trim_matches('"');
                if name.ends_with(".wasm") {
                    found.push(PathBuf::from(name.replace("\\\\", "\\")));
                }
            }
        }
    }
    found
}

/// For build scripts that build skill sources: prints `cargo:rerun-if-changed` for every file
/// under `path` (or `path` itself), skipping build output (`target/`, `__pycache__/`, `.wasm`
/// files) so that building the skills does not make cargo rerun the script.
pub fn rerun_if_changed_under(path: &Path) {
    if path.is_dir() {
        let Ok(entries) = std::fs::read_dir(path) else { return };
        for entry in entries.flatten() {
            let name = entry.file_name();
            if name != "target" && name != "__pycache__" && !name.to_string_lossy().ends_with(".wasm") {
                rerun_if_changed_under(&entry.path());
            }
        }
    } else if path.exists() {
        println!("cargo:rerun-if-changed={}", path.display());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn artifacts_are_read_from_cargo_json() {
        let json = r#"{"reason":"compiler-artifact","filenames":["/t/wasm32-wasip2/release/a.wasm","/t/x.rlib"]}
{"reason":"build-finished","success":true}"#;
        assert_eq!(wasm_artifacts(json.as_bytes()), vec![PathBuf::from("/t/wasm32-wasip2/release/a.wasm")]);
    }

    #[test]
    fn help_names_the_commands() {
        let help = no_toolchain_help();
        assert!(help.contains("rustup target add wasm32-wasip2") && help.contains("apt-get install"));
        assert!(help.contains(&format!("cargo install --locked wasm-component-ld@{WASM_COMPONENT_LD}")));
    }
}
