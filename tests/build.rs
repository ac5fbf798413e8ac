//! Builds every test guest (`tests/guests/`) and example skill (`skills/`) from source, and
//! writes `guests.rs` with the path of each component, so tests never use a prebuilt binary.

use skillhost_toolchain as toolchain;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn main() {
    let tests_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let root = tests_dir.parent().unwrap().to_path_buf();
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    // A stable target dir outside OUT_DIR keeps the (slow) std build across profiles.
    let target_dir = root.join("target").join("wasm-guests");
    for watched in ["wit", "skill-sdk/src", "skill-sdk/Cargo.toml", "sdk-python/skillhost", "tests/guests", "skills"] {
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
    let python = out_dir.join("word_stats.wasm");
    let app = root.join("skills/word_stats");
    // As `skillhost skill build` does: the Python SDK bundled, the hooks' world generated.
    let world = manifest_value(&app.join("skill.toml"), "world");
    toolchain::build_python_app(&app, "app", &root.join("wit"), world.as_deref(), &python)
        .unwrap_or_else(|e| panic!("building skills/word_stats: {e}"));
    writeln!(generated, "pub const WORD_STATS: &str = {:?};", python.display().to_string()).unwrap();
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
