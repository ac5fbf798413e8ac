//! Builds every test guest (`tests/guests/`) and example skill (`skills/`) from source, and
//! writes `guests.rs` with the path of each component, so tests never use a prebuilt binary.

use skillhost_toolchain as toolchain;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The mithai skills in `tests/fixtures/mithai/`, each built once into `MITHAI_<NAME>`.
const MITHAI_FIXTURES: &[&str] = &["services", "notes", "triage", "sandbox_limits"];

fn main() {
    let tests_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let root = tests_dir.parent().unwrap().to_path_buf();
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    // A stable target dir outside OUT_DIR keeps the (slow) std build across profiles.
    let target_dir = root.join("target").join("wasm-guests");
    for watched in
        ["wit", "skill-sdk/src", "skill-sdk/Cargo.toml", "sdk-python", "tests/guests", "tests/fixtures", "skills"]
    {
        toolchain::rerun_if_changed_under(&root.join(watched));
    }
    println!("cargo:rerun-if-env-changed=SKILLHOST_OFFLINE");

    let offline = std::env::var_os("SKILLHOST_OFFLINE").is_some();
    let tc = toolchain::find_rust_toolchain(offline, &mut |m| println!("cargo:warning={m}"))
        .unwrap_or_else(|e| panic!("cannot build the test guests: {e}"));
    let mut generated = String::new();
    for workspace in ["tests/guests", "skills"] {
        let artifacts = toolchain::build_rust(&root.join(workspace), Some(&target_dir), &tc)
            .unwrap_or_else(|e| panic!("building {workspace}: {e}"));
        for wasm in artifacts {
            let name = wasm.file_stem().unwrap().to_string_lossy().to_uppercase();
            writeln!(generated, "pub const {name}: &str = {:?};", wasm.display().to_string()).unwrap();
        }
    }
    let app = root.join("skills/word_stats");
    // As `skillhost skill build` does: the Python SDK bundled, the hooks' world generated.
    let world = manifest_value(&app.join("skill.toml"), "world");
    let python = cached_python(&root, &app, "word_stats", &[toolchain::PYTHON_SDK], |output| {
        toolchain::build_python_app(&app, "app", &root.join("wit"), world.as_deref(), output)
    });
    writeln!(generated, "pub const WORD_STATS: &str = {:?};", python.display().to_string()).unwrap();
    // A Python component that reads files of its own folder with `open`.
    let reader = root.join("tests/fixtures/reader_py");
    let python = cached_python(&root, &reader, "reader_py", &[toolchain::PYTHON_SDK], |output| {
        toolchain::build_python_app(&reader, "app", &root.join("wit"), None, output)
    });
    writeln!(generated, "pub const READER_PY: &str = {:?};", python.display().to_string()).unwrap();
    // The mithai fixtures: unchanged mithai `tools.py` skills, built with the shim.
    let fixtures = root.join("tests/fixtures/mithai");
    for name in MITHAI_FIXTURES {
        let dir = fixtures.join(name);
        let wasm = cached_python(&root, &dir, name, &[toolchain::PYTHON_SDK, toolchain::MITHAI_SHIM], |output| {
            toolchain::build_mithai(&dir, &root.join("wit"), output)
        });
        writeln!(generated, "pub const MITHAI_{}: &str = {:?};", name.to_uppercase(), wasm.display().to_string())
            .unwrap();
    }
    std::fs::write(out_dir.join("guests.rs"), generated).unwrap();
}

/// A `key = "value"` line of a skill.toml (the build script cannot use the host's parser).
fn manifest_value(path: &Path, key: &str) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    text.lines().find_map(|line| {
        let (k, v) = line.split_once('=')?;
        (k.trim() == key).then(|| v.trim().trim_matches('"').to_string())
    })
}

/// [`toolchain::cached_python`]; a failure stops the build.
fn cached_python(
    root: &Path,
    dir: &Path,
    name: &str,
    bundled: &[&[(&str, &str)]],
    build: impl FnOnce(&Path) -> Result<(), toolchain::BuildError>,
) -> PathBuf {
    toolchain::cached_python(root, dir, name, bundled, build)
        .unwrap_or_else(|e| panic!("building {}: {e}", dir.display()))
}
