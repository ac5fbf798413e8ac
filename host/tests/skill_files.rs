//! A component reads its own folder (`[capabilities] files = "self"`), through the binary
//! (`skillhost call`): a Rust guest with `std::fs` and a Python one with `open`, both by a
//! relative path (the folder is their working directory) and at `/skill`. They read the
//! skill's distributable files only: not its sources, not a file over 16 MiB, nothing through
//! `..` or a symlink out of the folder, and nothing at all when the manifest does not ask.

mod support;

use serde_json::{Value, json};
use skillhost_tests::{Workspace, guests};
use std::os::unix::fs::symlink;
use std::path::Path;

const DATA: &str = "city,temp\nOslo,3\n";
const FILES: &str = "[capabilities]\nfiles = \"self\"\n";

/// A skill folder `name` of component `wasm` and manifest `manifest`, with data, sources, a
/// secret's symlink, a file over 16 MiB and a hidden file beside it.
fn skill(ws: &Workspace, name: &str, wasm: &str, manifest: &str, source: (&str, &str)) {
    let dir = ws.add_skill("skills", name, wasm, manifest);
    std::fs::write(dir.join("data.csv"), DATA).unwrap();
    std::fs::create_dir_all(dir.join("notes")).unwrap();
    std::fs::write(dir.join("notes/today.md"), "# today\n").unwrap();
    let (path, text) = source;
    std::fs::create_dir_all(dir.join(path).parent().unwrap()).unwrap();
    std::fs::write(dir.join(path), text).unwrap();
    std::fs::write(dir.join(".env"), "TOKEN=hidden\n").unwrap();
    symlink(ws.path().join("outside/secret.txt"), dir.join("secret.txt")).unwrap();
    symlink("data.csv", dir.join("alias.csv")).unwrap();
    std::fs::File::create(dir.join("big.bin")).unwrap().set_len((16 << 20) + 1).unwrap();
}

fn workspace() -> Workspace {
    let ws = Workspace::new();
    std::fs::create_dir_all(ws.path().join("outside")).unwrap();
    std::fs::write(ws.path().join("outside/secret.txt"), "the operator's secret\n").unwrap();
    skill(&ws, "reader", guests::READER, FILES, ("src/lib.rs", "// the Rust source\n"));
    let python = "[capabilities]\nfiles = \"self\"\n[build]\nkind = \"python\"\n";
    skill(&ws, "reader_py", guests::READER_PY, python, ("app.py", "# the Python source\n"));
    skill(&ws, "blind", guests::READER, "", ("src/lib.rs", "// the Rust source\n"));
    let yaml = "skills:\n  paths: [skills]\n  builtins: []\nstate:\n  filesystem: {path: state}\n";
    std::fs::write(ws.path().join("config.yaml"), yaml).unwrap();
    ws
}

/// `skillhost call TOOL INPUT`: its JSON result.
fn call(ws: &Workspace, tool: &str, input: Value) -> Value {
    let out = support::skillhost(ws, &["call", tool, &input.to_string()], "");
    assert_eq!(out.code, 0, "{tool} {input}: {}{}", out.stdout, out.stderr);
    serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{tool}: not JSON ({e}): {}", out.stdout))
}

fn read(ws: &Workspace, skill: &str, path: &str) -> Value {
    call(ws, &format!("{skill}__read"), json!({ "path": path }))
}

/// Reading `path` fails (the error's text is the guest language's own).
fn refused(ws: &Workspace, skill: &str, path: &str) {
    let out = read(ws, skill, path);
    assert!(out["text"].is_null() && out["error"].is_string(), "{skill} read {path}: {out}");
}

#[test]
fn rust_and_python_components_read_their_own_folder_and_nothing_else() {
    let ws = workspace();
    for skill in ["reader", "reader_py"] {
        assert_eq!(read(&ws, skill, "data.csv")["text"], DATA, "{skill}: a relative path");
        assert_eq!(read(&ws, skill, "/skill/data.csv")["text"], DATA, "{skill}: at /skill");
        assert_eq!(read(&ws, skill, "notes/today.md")["text"], "# today\n", "{skill}");
        assert_eq!(read(&ws, skill, "alias.csv")["text"], DATA, "{skill}: a symlink inside the folder");
        let listed = call(&ws, &format!("{skill}__listdir"), json!({"path": "/skill"}));
        let names = json!(["alias.csv", "data.csv", "notes", "prompt.md", "skill.toml", "skill.wasm"]);
        assert_eq!(listed["names"], names, "{skill}: the distributable files only");
        for path in ["secret.txt", "../outside/secret.txt", "/skill/../outside/secret.txt", "big.bin", ".env"] {
            refused(&ws, skill, path);
        }
        refused(&ws, skill, Path::new(&ws.path().join("outside/secret.txt")).to_str().unwrap());
    }
    refused(&ws, "reader", "src/lib.rs");
    refused(&ws, "reader_py", "app.py");
    assert_eq!(call(&ws, "reader_py__cwd", json!({}))["cwd"], "/skill");
    let written = call(&ws, "reader_py__write", json!({"path": "data.csv", "text": "changed"}));
    assert!(written["error"].is_string(), "read-only: {written}");
    assert_eq!(read(&ws, "reader_py", "data.csv")["text"], DATA);

    // A component that does not ask sees nothing.
    refused(&ws, "blind", "data.csv");
    refused(&ws, "blind", "/skill/data.csv");
    assert!(call(&ws, "blind__listdir", json!({"path": "/skill"}))["error"].is_string());
}

#[test]
fn skill_list_shows_the_folder_and_what_it_refused() {
    let ws = workspace();
    let out = support::skillhost(&ws, &["skill", "list"], "");
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let reader = out.stdout.split("\nreader ").nth(1).unwrap_or_else(|| panic!("{}", out.stdout));
    assert!(reader.contains("files: /skill, read-only (6 files"), "{}", out.stdout);
    let blind = out.stdout.split("blind ").nth(1).unwrap().split("\nreader").next().unwrap();
    assert!(!blind.contains("files:"), "{}", out.stdout);
    assert!(out.stderr.contains("big.bin: 16777217 bytes, over the 16 MiB"), "{}", out.stderr);
    assert!(out.stderr.contains("secret.txt: a symlink out of the skill folder"), "{}", out.stderr);
}

#[test]
fn files_takes_only_self() {
    let ws = Workspace::new();
    ws.add_skill("skills", "reader", guests::READER, "[capabilities]\nfiles = \"all\"\n");
    let yaml = "skills:\n  paths: [skills]\n  builtins: []\n";
    std::fs::write(ws.path().join("config.yaml"), yaml).unwrap();
    let out = support::skillhost(&ws, &["skill", "validate"], "");
    assert_ne!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let all = format!("{}{}", out.stdout, out.stderr);
    assert!(all.contains("skill.toml") && all.contains("files") && all.contains("self"), "{all}");
}
