use super::*;
use std::os::unix::fs::symlink;

fn write(dir: &Path, path: &str, content: &str) {
    let path = dir.join(path);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, content).unwrap();
}

fn paths(set: &Distributable) -> Vec<String> {
    set.files.iter().map(|f| f.path.display().to_string()).collect()
}

fn refused(set: &Distributable) -> Vec<String> {
    set.refused.iter().map(ToString::to_string).collect()
}

#[test]
fn a_rust_skill_keeps_its_prompt_manifest_component_and_data_not_its_sources() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for (path, content) in [
        ("SKILL.md", "---\nname: r\ndescription: d\n---\n"),
        ("skill.toml", "[capabilities]\nfiles = \"self\"\n"),
        ("skill.wasm", "\0asm"),
        ("Cargo.toml", "[package]"),
        ("Cargo.lock", ""),
        ("src/lib.rs", "fn main() {}"),
        ("wit/world.wit", ""),
        ("sdk/skill-sdk/src/lib.rs", ""),
        ("target/wasm32-wasip2/release/r.wasm", ""),
        ("data/rates.csv", "a,b\n"),
        ("data/build.rs", "not data"),
        ("reference/notes.md", "# notes"),
        (".git/config", ""),
        (".env", "SECRET=1"),
        ("helper.py", "# data for a Rust skill"),
    ] {
        write(d, path, content);
    }
    let set = distributable(d).unwrap();
    assert_eq!(
        paths(&set),
        ["SKILL.md", "data/rates.csv", "helper.py", "reference/notes.md", "skill.toml", "skill.wasm"]
    );
    assert!(set.refused.is_empty(), "{:?}", set.refused);
    let rates = &set.files[1];
    assert_eq!((rates.size, rates.source.clone()), (4, d.canonicalize().unwrap().join("data/rates.csv")));
}

#[test]
fn a_python_skill_drops_its_modules_but_keeps_declared_scripts_and_their_builds() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let skill_md =
        "---\nname: p\ndescription: d\ntools:\n  add:\n    description: Add.\n    script: scripts/add.py\n---\n";
    for (path, content) in [
        ("SKILL.md", skill_md),
        ("app.py", "import helpers"),
        ("helpers.py", ""),
        ("pkg/__init__.py", ""),
        ("pkg/__pycache__/x.cpython-311.pyc", ""),
        ("scripts/add.py", "print(1)"),
        ("scripts/other.py", "not declared"),
        (".build/scripts/add.wasm", "\0asm"),
        ("skill.wasm", "\0asm"),
        ("data.csv", "x\n"),
        ("node_modules/x/index.js", ""),
    ] {
        write(d, path, content);
    }
    let set = distributable(d).unwrap();
    assert_eq!(paths(&set), [".build/scripts/add.wasm", "SKILL.md", "data.csv", "scripts/add.py", "skill.wasm"]);
}

#[test]
fn a_js_skill_drops_its_modules_and_package_files() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for path in ["prompt.md", "app.js", "lib/util.mjs", "package.json", "package-lock.json", "skill.wasm", "t.json"] {
        write(d, path, "");
    }
    assert_eq!(paths(&distributable(d).unwrap()), ["prompt.md", "skill.wasm", "t.json"]);
}

#[test]
fn symlinks_out_broken_or_to_folders_and_large_files_are_refused() {
    let outside = tempfile::tempdir().unwrap();
    write(outside.path(), "secret.txt", "secret");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(d, "prompt.md", "p");
    write(d, "data/real.txt", "real");
    symlink(outside.path().join("secret.txt"), d.join("out.txt")).unwrap();
    let outside_name = outside.path().file_name().unwrap().to_str().unwrap();
    symlink(format!("../../{outside_name}/secret.txt"), d.join("data/up.txt")).unwrap();
    symlink("data/real.txt", d.join("inside.txt")).unwrap();
    symlink("nowhere", d.join("broken.txt")).unwrap();
    symlink("data", d.join("folder")).unwrap();
    let big = std::fs::File::create(d.join("big.bin")).unwrap();
    big.set_len(MAX_FILE_BYTES + 1).unwrap();
    let exact = std::fs::File::create(d.join("exact.bin")).unwrap();
    exact.set_len(MAX_FILE_BYTES).unwrap();
    // The skill's components are the host's to load, whatever their size.
    std::fs::create_dir_all(d.join(".build/scripts")).unwrap();
    for component in ["skill.wasm", ".build/scripts/s.wasm", "data/model.wasm"] {
        std::fs::File::create(d.join(component)).unwrap().set_len(MAX_FILE_BYTES + 1).unwrap();
    }
    let set = distributable(d).unwrap();
    let kept = [".build/scripts/s.wasm", "data/real.txt", "exact.bin", "inside.txt", "prompt.md", "skill.wasm"];
    assert_eq!(paths(&set), kept);
    assert_eq!(set.files[3].source, d.canonicalize().unwrap().join("data/real.txt"), "the link's target");
    assert_eq!(
        refused(&set),
        [
            "big.bin: 16777217 bytes, over the 16 MiB a skill's file may have",
            "broken.txt: a symlink to nothing",
            "data/model.wasm: 16777217 bytes, over the 16 MiB a skill's file may have",
            "data/up.txt: a symlink out of the skill folder",
            "folder: a symlink to a folder",
            "out.txt: a symlink out of the skill folder",
        ]
    );
}

#[test]
fn copy_writes_each_file_at_its_path() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "prompt.md", "p");
    write(dir.path(), "a/b/c.txt", "deep");
    symlink("a/b/c.txt", dir.path().join("link.txt")).unwrap();
    let set = distributable(dir.path()).unwrap();
    let to = tempfile::tempdir().unwrap();
    assert_eq!(copy(&set, to.path()).unwrap(), (3, 9));
    assert_eq!(std::fs::read_to_string(to.path().join("a/b/c.txt")).unwrap(), "deep");
    let link = std::fs::symlink_metadata(to.path().join("link.txt")).unwrap();
    assert!(link.is_file(), "a copy, not a link");
}
