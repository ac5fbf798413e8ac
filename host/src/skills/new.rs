//! `skillhost skill new NAME --lang rust|python|js`: writes a skill folder that builds with
//! `skill build` and passes `skill validate` as it is, from templates embedded in the binary.
//!
//! A Rust skill needs the Rust SDK: a binary built from a checkout points a path dependency
//! at the checkout's `skill-sdk/`; any other binary writes its embedded copy of the SDK (and
//! the WIT) into the skill's `sdk/` folder, so the skill builds offline wherever it is.

use super::build::WIT_FILES;
use std::path::{Path, PathBuf};

/// The languages a new skill can be written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Lang {
    /// A Rust crate on `skill-sdk`.
    Rust,
    /// A Python module on the Python SDK.
    Python,
    /// A JavaScript module on the JS SDK.
    Js,
}

/// Why `skill new` wrote nothing.
#[derive(Debug, thiserror::Error)]
pub enum NewError {
    /// The name breaks the `skill__tool` naming rules.
    #[error("invalid skill name `{0}`: {1}")]
    InvalidName(String, &'static str),
    /// The folder exists and is not empty.
    #[error("{0} already exists and is not empty; nothing was written (choose another --dir or name)")]
    Exists(PathBuf),
    /// Writing a file failed.
    #[error("{0}: {1}")]
    Io(PathBuf, std::io::Error),
}

const COMMON: &[(&str, &str)] = &[
    ("prompt.md", include_str!("templates/prompt.md")),
    ("skill.toml", include_str!("templates/skill.toml")),
    ("README.md", include_str!("templates/README.md")),
];
const RUST: &[(&str, &str)] = &[
    ("Cargo.toml", include_str!("templates/rust/Cargo.toml")),
    ("src/lib.rs", include_str!("templates/rust/src/lib.rs")),
];
const PYTHON: &[(&str, &str)] = &[("app.py", include_str!("templates/python/app.py"))];
const JS: &[(&str, &str)] =
    &[("app.js", include_str!("templates/js/app.js")), ("package.json", include_str!("templates/js/package.json"))];

/// The Rust SDK's sources, for a binary that is not run from its checkout.
const RUST_SDK: &[(&str, &str)] = &[
    ("skill-sdk/src/ask.rs", include_str!("../../../skill-sdk/src/ask.rs")),
    ("skill-sdk/Cargo.toml", include_str!("../../../skill-sdk/Cargo.toml")),
    ("skill-sdk/src/bindings.rs", include_str!("../../../skill-sdk/src/bindings.rs")),
    ("skill-sdk/src/context.rs", include_str!("../../../skill-sdk/src/context.rs")),
    ("skill-sdk/src/error.rs", include_str!("../../../skill-sdk/src/error.rs")),
    ("skill-sdk/src/export.rs", include_str!("../../../skill-sdk/src/export.rs")),
    ("skill-sdk/src/hooks.rs", include_str!("../../../skill-sdk/src/hooks.rs")),
    ("skill-sdk/src/http.rs", include_str!("../../../skill-sdk/src/http.rs")),
    ("skill-sdk/src/lib.rs", include_str!("../../../skill-sdk/src/lib.rs")),
    ("skill-sdk/src/lists.rs", include_str!("../../../skill-sdk/src/lists.rs")),
    ("skill-sdk/src/log.rs", include_str!("../../../skill-sdk/src/log.rs")),
    ("skill-sdk/src/mcp.rs", include_str!("../../../skill-sdk/src/mcp.rs")),
    ("skill-sdk/src/memory.rs", include_str!("../../../skill-sdk/src/memory.rs")),
    ("skill-sdk/src/notify.rs", include_str!("../../../skill-sdk/src/notify.rs")),
    ("skill-sdk/src/result.rs", include_str!("../../../skill-sdk/src/result.rs")),
    ("skill-sdk/src/progress.rs", include_str!("../../../skill-sdk/src/progress.rs")),
    ("skill-sdk/src/route.rs", include_str!("../../../skill-sdk/src/route.rs")),
    ("skill-sdk/src/served.rs", include_str!("../../../skill-sdk/src/served.rs")),
    ("skill-sdk/src/state.rs", include_str!("../../../skill-sdk/src/state.rs")),
    ("skill-sdk/src/tasks.rs", include_str!("../../../skill-sdk/src/tasks.rs")),
    ("skill-sdk/src/tool.rs", include_str!("../../../skill-sdk/src/tool.rs")),
];

/// Checks a new skill's name: snake_case `[a-z][a-z0-9_]*`, at most 40 characters, no `__`
/// (the `skill__tool` separator), no `_` at either end, not a name the host reserves.
pub fn check_name(name: &str) -> Result<(), NewError> {
    let invalid = |why| Err(NewError::InvalidName(name.to_owned(), why));
    if name.is_empty() || name.len() > 40 {
        return invalid("it must be 1 to 40 characters");
    }
    if !name.starts_with(|c: char| c.is_ascii_lowercase()) {
        return invalid("it must start with a lowercase letter");
    }
    if !name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_') {
        return invalid("only a-z, 0-9 and _ are allowed (snake_case)");
    }
    if name.contains("__") || name.ends_with('_') {
        return invalid("`__` separates skill and tool names, and a name may not end with `_`");
    }
    if name == "human" {
        return invalid("`human` is reserved for the host's own tools");
    }
    Ok(())
}

/// Writes the skill `name` in `lang` into `dir` (default `skills/<name>`); returns the folder.
pub fn create(name: &str, lang: Lang, dir: Option<&Path>) -> Result<PathBuf, NewError> {
    check_name(name)?;
    let dir = dir.map(Path::to_path_buf).unwrap_or_else(|| Path::new("skills").join(name));
    if occupied(&dir) {
        return Err(NewError::Exists(dir));
    }
    let shown = dir.display().to_string();
    write_skill(&Scaffold { name, lang, dir: &dir, shown: &shown, made_by: "skillhost skill new" })?;
    Ok(dir)
}

/// Whether `path` is a file, or a folder with anything in it.
pub fn occupied(path: &Path) -> bool {
    path.is_file() || std::fs::read_dir(path).map(|mut entries| entries.next().is_some()).unwrap_or(false)
}

/// One new skill folder to write.
pub struct Scaffold<'a> {
    /// The skill's name (checked by [`check_name`]).
    pub name: &'a str,
    /// The language of its code.
    pub lang: Lang,
    /// Where to write it.
    pub dir: &'a Path,
    /// The folder as its README names it (`skills/<name>`, relative to where it is used).
    pub shown: &'a str,
    /// The command that made it, for its README.
    pub made_by: &'a str,
}

/// Writes the folder of `scaffold`: prompt.md, skill.toml, README.md and the source of its
/// one `hello` tool (for Rust, the SDK's path or an embedded copy of it).
pub fn write_skill(scaffold: &Scaffold<'_>) -> Result<(), NewError> {
    let (lang_name, language, source, files) = match scaffold.lang {
        Lang::Rust => ("rust", "Rust", "`src/lib.rs` — the tools, on the Rust SDK (`skill-sdk`).", RUST),
        Lang::Python => ("python", "Python", "`app.py` — the tools, on the Python SDK (`skillhost`).", PYTHON),
        Lang::Js => ("js", "JavaScript", "`app.js` — the tools, on the JS SDK (`./skillhost.js`).", JS),
    };
    let sdk = if scaffold.lang == Lang::Rust { rust_sdk(scaffold.dir)? } else { String::new() };
    let vars = [
        ("{{name}}", scaffold.name.to_owned()),
        ("{{type}}", type_name(scaffold.name)),
        ("{{lang}}", lang_name.to_owned()),
        ("{{language}}", language.to_owned()),
        ("{{source}}", source.to_owned()),
        ("{{dir}}", scaffold.shown.to_owned()),
        ("{{made_by}}", scaffold.made_by.to_owned()),
        ("{{sdk}}", sdk),
    ];
    for (file, template) in COMMON.iter().chain(files) {
        let text = vars.iter().fold(template.to_string(), |text, (key, value)| text.replace(key, value));
        write(&scaffold.dir.join(file), &text)?;
    }
    Ok(())
}

/// The path of the Rust SDK for the new skill's `Cargo.toml`: the checkout's, or the
/// embedded copy written under `dir/sdk/`.
fn rust_sdk(dir: &Path) -> Result<String, NewError> {
    let checkout = Path::new(env!("CARGO_MANIFEST_DIR")).join("../skill-sdk");
    if checkout.join("Cargo.toml").is_file() && checkout.join("../wit/skill.wit").is_file() {
        let path = checkout.canonicalize().map_err(|e| NewError::Io(checkout.clone(), e))?;
        return Ok(path.display().to_string());
    }
    write_vendored_sdk(&dir.join("sdk"))?;
    Ok("sdk/skill-sdk".into())
}

/// Writes the embedded Rust SDK and WIT under `root` (`skill-sdk/` and `wit/`, where the
/// SDK's bindings look for it).
pub fn write_vendored_sdk(root: &Path) -> Result<(), NewError> {
    for (file, text) in RUST_SDK {
        write(&root.join(file), text)?;
    }
    for (file, text) in WIT_FILES {
        write(&root.join("wit").join(file), text)?;
    }
    Ok(())
}

/// Writes `text` to `path`, making its parent folders.
pub fn write(path: &Path, text: &str) -> Result<(), NewError> {
    let io = |e| NewError::Io(path.to_path_buf(), e);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(io)?;
    }
    std::fs::write(path, text).map_err(io)
}

/// `word_stats` -> `WordStats`: the Rust type of the skill.
fn type_name(name: &str) -> String {
    name.split('_')
        .map(|part| {
            let mut chars = part.chars();
            chars.next().map(|c| c.to_ascii_uppercase().to_string() + chars.as_str()).unwrap_or_default()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_skill_tool_rules() {
        for good in ["hello", "word_stats", "a1", "x_2_y"] {
            assert!(check_name(good).is_ok(), "{good}");
        }
        for bad in ["", "Hello", "1abc", "_x", "x_", "a__b", "web-search", "human", &"a".repeat(41)] {
            assert!(matches!(check_name(bad), Err(NewError::InvalidName(..))), "{bad}");
        }
        assert_eq!(type_name("word_stats2"), "WordStats2");
    }

    #[test]
    fn never_overwrites_and_writes_every_file() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("greeter");
        let made = create("greeter", Lang::Python, Some(&dir)).unwrap();
        for file in ["prompt.md", "skill.toml", "README.md", "app.py"] {
            assert!(made.join(file).is_file(), "{file}");
        }
        let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
        assert!(readme.contains("skillhost call greeter__hello '{\"name\": \"Ada\"}'"), "{readme}");
        assert!(!readme.contains("{{"), "{readme}");
        let before = std::fs::read_to_string(dir.join("app.py")).unwrap();
        assert!(matches!(create("greeter", Lang::Js, Some(&dir)), Err(NewError::Exists(_))));
        assert_eq!(std::fs::read_to_string(dir.join("app.py")).unwrap(), before, "nothing was touched");
        assert!(!dir.join("app.js").exists());
    }

    #[test]
    fn the_vendored_sdk_is_complete() {
        let sources = Path::new(env!("CARGO_MANIFEST_DIR")).join("../skill-sdk/src");
        let mut on_disk: Vec<String> = std::fs::read_dir(sources)
            .unwrap()
            .map(|e| format!("skill-sdk/src/{}", e.unwrap().file_name().to_string_lossy()))
            .collect();
        on_disk.push("skill-sdk/Cargo.toml".into());
        on_disk.sort();
        let mut embedded: Vec<String> = RUST_SDK.iter().map(|(f, _)| f.to_string()).collect();
        embedded.sort();
        assert_eq!(on_disk, embedded, "every SDK file is embedded");
        let tmp = tempfile::tempdir().unwrap();
        write_vendored_sdk(tmp.path()).unwrap();
        assert!(tmp.path().join("wit/skill.wit").is_file() && tmp.path().join("skill-sdk/src/lib.rs").is_file());
    }
}
