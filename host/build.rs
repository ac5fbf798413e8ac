//! Builds the skills that ship inside the binary (`memory`, `http_checker` from `skills/`)
//! into components and writes `builtins.rs` with their bytes, so a fresh install has them
//! with no skills folder.
//!
//! Building them needs the wasm32-wasip2 toolchain (see `toolchain/`). Without it the binary
//! is still built, without the embedded skills, and says so: at build time as a cargo warning,
//! at run time in `skillhost skill list`. `SKILLHOST_NO_EMBED=1` skips them on purpose.
//!
//! It also builds the function runtime (`host/runtime/function/`, Python on the SDK, with
//! componentize-py) that runs declared `function` and `code_execution` records. Without
//! componentize-py the binary is built without it, and such records are load errors that say
//! why.

use skillhost_toolchain as toolchain;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The embedded skills: (name, folder under `skills/`).
const EMBEDDED: &[&str] = &["memory", "http_checker"];

fn main() {
    let host_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let root = host_dir.parent().unwrap().to_path_buf();
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    for watched in [
        "wit",
        "skill-sdk/src",
        "skill-sdk/Cargo.toml",
        "skills/Cargo.toml",
        "skills/memory",
        "skills/http_checker",
        "sdk-python/skillhost",
        "host/runtime/function",
    ] {
        toolchain::rerun_if_changed_under(&root.join(watched));
    }
    println!("cargo:rerun-if-env-changed=SKILLHOST_OFFLINE");
    println!("cargo:rerun-if-env-changed=SKILLHOST_NO_EMBED");

    let built = if std::env::var_os("SKILLHOST_NO_EMBED").is_some() {
        Err("built with SKILLHOST_NO_EMBED set".to_string())
    } else {
        build(&root)
    };
    let mut generated = String::new();
    match built {
        Ok(paths) => {
            writeln!(generated, "/// Why the embedded skills are missing; `None` when they are here.").unwrap();
            writeln!(generated, "pub const MISSING: Option<&str> = None;").unwrap();
            for name in EMBEDDED {
                let prompt = root.join("skills").join(name).join("prompt.md");
                let manifest = root.join("skills").join(name).join("skill.toml");
                writeln!(
                    generated,
                    "pub const {}: Option<Embedded> = Some(Embedded {{ name: {name:?}, prompt: include_str!({:?}), manifest: include_str!({:?}), wasm: include_bytes!({:?}) }});",
                    name.to_uppercase(),
                    prompt.display().to_string(),
                    manifest.display().to_string(),
                    paths[*name].display().to_string(),
                )
                .unwrap();
            }
        }
        Err(why) => {
            println!("cargo:warning=skillhost is built without its embedded memory and http_checker skills: {why}");
            writeln!(generated, "/// Why the embedded skills are missing.").unwrap();
            writeln!(generated, "pub const MISSING: Option<&str> = Some({why:?});").unwrap();
            for name in EMBEDDED {
                writeln!(generated, "pub const {}: Option<Embedded> = None;", name.to_uppercase()).unwrap();
            }
        }
    }
    let runtime = if std::env::var_os("SKILLHOST_NO_EMBED").is_some() {
        Err("built with SKILLHOST_NO_EMBED set".to_string())
    } else {
        function_runtime(&root)
    };
    writeln!(generated, "/// The function runtime's component, or why this binary has none.").unwrap();
    match runtime {
        Ok(path) => writeln!(
            generated,
            "pub const FUNCTION_RUNTIME: Result<&[u8], &str> = Ok(include_bytes!({:?}));",
            path.display().to_string()
        )
        .unwrap(),
        Err(why) => {
            println!("cargo:warning=skillhost is built without its function runtime: {why}");
            writeln!(generated, "pub const FUNCTION_RUNTIME: Result<&[u8], &str> = Err({why:?});").unwrap();
        }
    }
    std::fs::write(out_dir.join("builtins.rs"), generated).unwrap();
}

/// Builds the function runtime with componentize-py (once per content); `Err` says why not.
fn function_runtime(root: &Path) -> Result<PathBuf, String> {
    let app = root.join("host/runtime/function");
    let found = std::process::Command::new("componentize-py").arg("--version").output();
    if !found.is_ok_and(|o| o.status.success()) {
        return Err("componentize-py is not installed (pip install componentize-py)".into());
    }
    toolchain::cached_python(root, &app, "function_runtime", &[toolchain::PYTHON_SDK], |output| {
        toolchain::build_python_app(&app, "app", &root.join("wit"), None, output)
    })
    .map_err(|e| format!("building host/runtime/function: {e}"))
}

/// Builds the `skills/` workspace; the path of each embedded skill's component. A missing
/// toolchain is an `Err` (the binary is built without them); a compile error in our own
/// skills is a build failure.
fn build(root: &Path) -> Result<std::collections::HashMap<&'static str, PathBuf>, String> {
    let offline = std::env::var_os("SKILLHOST_OFFLINE").is_some();
    let tc =
        toolchain::find_rust_toolchain(offline, &mut |m| println!("cargo:warning={m}")).map_err(|e| e.to_string())?;
    // The same target dir as the tests package's guests: one (slow) std build serves both.
    let target_dir = root.join("target").join("wasm-guests");
    let artifacts = toolchain::build_rust(&root.join("skills"), Some(&target_dir), &tc)
        .unwrap_or_else(|e| panic!("building the embedded skills in skills/: {e}"));
    let mut found = std::collections::HashMap::new();
    for name in EMBEDDED {
        let wasm = artifacts
            .iter()
            .find(|p| p.file_stem().is_some_and(|s| s.to_string_lossy() == *name))
            .unwrap_or_else(|| panic!("building skills/ produced no {name}.wasm"));
        found.insert(*name, wasm.clone());
    }
    Ok(found)
}
