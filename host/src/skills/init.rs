//! `skillhost init [DIR]`: a folder to start from. A `config.yaml` close to the spec's quick
//! start (the API adapter, the built-ins, an Anthropic model), `.env.example` naming the
//! variables it reads, a `.gitignore`, and `skills/greeter`, one example skill written by
//! [`super::new`] in the language asked. Building that skill is the command's business
//! (`cli/init.rs`), as `skill build` does it.
//!
//! Nothing is ever overwritten: when any file `init` would write exists, it writes nothing
//! and names them all.

use super::new::{Lang, NewError, Scaffold, occupied, write, write_skill};
use std::path::{Path, PathBuf};

/// The example skill's name (its tool is `greeter__hello`).
pub const SKILL: &str = "greeter";

const CONFIG: &str = include_str!("templates/project/config.yaml");
const ENV_EXAMPLE: &str = include_str!("templates/project/env.example");
const GITIGNORE: &str = include_str!("templates/project/gitignore");

/// Why `init` wrote nothing.
#[derive(Debug, thiserror::Error)]
pub enum InitError {
    /// The folder named is a file.
    #[error("{0} is a file, not a folder; nothing was written")]
    NotAFolder(PathBuf),
    /// Files `init` would write exist already.
    #[error("nothing was written: it would overwrite what exists:\n  {}", list(.0))]
    Exists(Vec<PathBuf>),
    /// Writing a file failed.
    #[error(transparent)]
    Write(#[from] NewError),
}

fn list(paths: &[PathBuf]) -> String {
    paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join("\n  ")
}

/// What `init` wrote.
#[derive(Debug)]
pub struct Project {
    /// The files written at the top of the folder (`config.yaml`, `.env.example`, `.gitignore`).
    pub files: Vec<PathBuf>,
    /// The example skill's folder (`skills/greeter`).
    pub skill_dir: PathBuf,
}

/// The top-level files of a project whose example skill is in `lang`, with their text.
fn top_files(lang: Lang) -> [(&'static str, String); 3] {
    let (lang_name, language) = match lang {
        Lang::Rust => ("rust", "Rust"),
        Lang::Python => ("python", "Python"),
        Lang::Js => ("js", "JavaScript"),
    };
    let config = CONFIG.replace("{{skill}}", SKILL).replace("{{lang}}", lang_name).replace("{{language}}", language);
    // A Rust skill builds into `target/` beside its Cargo.toml.
    let gitignore = match lang {
        Lang::Rust => format!("{GITIGNORE}# Cargo's build output of the Rust skills.\ntarget/\n"),
        _ => GITIGNORE.to_owned(),
    };
    [("config.yaml", config), (".env.example", ENV_EXAMPLE.to_owned()), (".gitignore", gitignore)]
}

/// The paths under `dir` that `init` would write and that exist: its top-level files, and
/// the example skill's folder when it holds anything.
pub fn conflicts(dir: &Path, lang: Lang) -> Vec<PathBuf> {
    let top = top_files(lang).map(|(name, _)| dir.join(name));
    let skill = dir.join("skills").join(SKILL);
    let mut taken: Vec<PathBuf> = top.into_iter().filter(|p| p.symlink_metadata().is_ok()).collect();
    if occupied(&skill) {
        taken.push(skill);
    }
    taken
}

/// Writes the project into `dir` (made when missing), or nothing when anything of it exists.
pub fn create(dir: &Path, lang: Lang) -> Result<Project, InitError> {
    if dir.is_file() {
        return Err(InitError::NotAFolder(dir.to_path_buf()));
    }
    let taken = conflicts(dir, lang);
    if !taken.is_empty() {
        return Err(InitError::Exists(taken));
    }
    let mut files = Vec::new();
    for (name, text) in top_files(lang) {
        let path = dir.join(name);
        write(&path, &text)?;
        files.push(path);
    }
    let skill_dir = dir.join("skills").join(SKILL);
    let shown = format!("skills/{SKILL}");
    write_skill(&Scaffold { name: SKILL, lang, dir: &skill_dir, shown: &shown, made_by: "skillhost init" })?;
    Ok(Project { files, skill_dir })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_every_file_and_the_config_parses() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("new/project");
        let project = create(&dir, Lang::Python).unwrap();
        for file in ["config.yaml", ".env.example", ".gitignore", "skills/greeter/app.py", "skills/greeter/prompt.md"] {
            assert!(dir.join(file).is_file(), "{file}");
        }
        assert_eq!(project.skill_dir, dir.join("skills/greeter"));
        let text = std::fs::read_to_string(dir.join("config.yaml")).unwrap();
        assert!(!text.contains("{{"), "{text}");
        // With the variables unset, as right after `init`: the config still loads.
        let (config, warnings) = crate::config::parse(&text, |_| None).unwrap();
        assert_eq!(config.ui.auth_token, None, "an unset token leaves the API without one");
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        let env = std::fs::read_to_string(dir.join(".env.example")).unwrap();
        assert!(env.contains("ANTHROPIC_API_KEY=") && env.contains("SKILLHOST_UI_TOKEN="), "{env}");
        let readme = std::fs::read_to_string(dir.join("skills/greeter/README.md")).unwrap();
        assert!(readme.contains("made by `skillhost init`") && readme.contains("skill build skills/greeter"));
    }

    #[test]
    fn writes_nothing_over_an_existing_file_and_names_each() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("config.yaml"), "mine").unwrap();
        std::fs::write(tmp.path().join(".gitignore"), "mine too").unwrap();
        let Err(InitError::Exists(taken)) = create(tmp.path(), Lang::Js) else { panic!("refused") };
        assert_eq!(taken, [tmp.path().join("config.yaml"), tmp.path().join(".gitignore")]);
        assert!(!tmp.path().join(".env.example").exists() && !tmp.path().join("skills").exists());
        assert_eq!(std::fs::read_to_string(tmp.path().join("config.yaml")).unwrap(), "mine");
        let file = tmp.path().join("config.yaml");
        assert!(matches!(create(&file, Lang::Js), Err(InitError::NotAFolder(_))));
    }
}
