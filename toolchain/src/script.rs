//! Script tools (SKILL.md `tools:`, Mode C) built into WASI command components, so that a
//! script never runs as a host process.
//!
//! A Python script goes through componentize-py, a JavaScript one through componentize-js;
//! both against a small world (`script/world.wit`: the `wasi:cli/run` export, the arguments
//! and the exit code). The generated entry module runs the author's file unchanged: Python
//! as `__main__` with `sys.argv`, JavaScript inside a function given `process.argv` and
//! `process.exit`, its lines where the author wrote them so errors name them.

use crate::{BuildError, which};
use std::path::Path;
use std::process::{Command, Stdio};

const CLI_WIT: &str = include_str!("script/cli.wit");
const WORLD_WIT: &str = include_str!("script/world.wit");
const PYTHON_ENTRY: &str = include_str!("script/entry.py");
const JS_ENTRY: &str = include_str!("script/entry.js");
const JS_RUNNER: &str = include_str!("script/componentize.mjs");

/// One script to build.
#[derive(Debug, Clone, Copy)]
pub struct ScriptBuild<'a> {
    /// The skill folder.
    pub dir: &'a Path,
    /// The script, relative to `dir` (`scripts/add.py`), as the author declared it.
    pub script: &'a str,
    /// Where the component goes.
    pub output: &'a Path,
}

impl ScriptBuild<'_> {
    fn source(&self) -> Result<String, BuildError> {
        let path = self.dir.join(self.script);
        std::fs::read_to_string(&path).map_err(|e| BuildError::Failed(format!("{}: {e}", path.display())))
    }
}

/// A scratch folder with the script world (`wit/world.wit`, `wit/deps/cli/cli.wit`).
fn scratch_with_world() -> Result<tempfile::TempDir, BuildError> {
    let scratch = tempfile::tempdir().map_err(|e| BuildError::Failed(e.to_string()))?;
    let wit = scratch.path().join("wit");
    crate::write_files(&wit, &[("world.wit", WORLD_WIT), ("deps/cli/cli.wit", CLI_WIT)])
        .map_err(|e| BuildError::Failed(format!("writing the script world: {e}")))?;
    Ok(scratch)
}

/// The Python entry module for `script` (its path) holding `source`.
pub fn python_entry(script: &str, source: &str) -> String {
    let (head, tail) = PYTHON_ENTRY.split_once("__SOURCE__").expect("the template has a __SOURCE__ marker");
    // JSON string literals are Python string literals too.
    format!("{}{}{tail}", head.replacen("__PATH__", &crate::json_string(script), 1), crate::json_string(source))
}

/// The JavaScript entry module holding `source`: the script is the body of a function that
/// starts on line 1, so its line numbers stay the author's (a `#!` line becomes a comment).
pub fn js_entry(source: &str) -> String {
    let source = match source.strip_prefix("#!") {
        Some(rest) => format!("//{rest}"),
        None => source.to_owned(),
    };
    JS_ENTRY.replacen("__SOURCE__", &source, 1)
}

/// Builds the Python script `job.script` into a command component with componentize-py.
pub fn build_python_script(job: &ScriptBuild<'_>) -> Result<(), BuildError> {
    let source = job.source()?;
    let scratch = scratch_with_world()?;
    std::fs::write(scratch.path().join("skillhost_script.py"), python_entry(job.script, &source))
        .map_err(|e| BuildError::Failed(format!("writing the entry module: {e}")))?;
    let wit = scratch.path().join("wit");
    let build = crate::python::Componentize {
        app_dir: scratch.path(),
        python_path: &[Path::new(".")],
        module: "skillhost_script",
        wit_dirs: &[&wit],
        world: "script",
        output: job.output,
    };
    build.run(&[job.dir.display().to_string()]).map_err(|e| match e {
        BuildError::Failed(m) => BuildError::Failed(format!("{}: {m}", job.script)),
        other => other,
    })
}

/// Builds the JavaScript script `job.script` into a command component with the
/// componentize-js package at `componentize`.
pub fn build_js_script(job: &ScriptBuild<'_>, componentize: &Path) -> Result<(), BuildError> {
    let node = which("node").ok_or_else(|| BuildError::NoToolchain(crate::js::node_help().into()))?;
    let source = job.source()?;
    let scratch = scratch_with_world()?;
    // Named like the script, so that a stack trace names the author's file.
    let entry = scratch.path().join("src").join(job.script);
    let fail = |e: std::io::Error| BuildError::Failed(format!("writing the entry module: {e}"));
    std::fs::create_dir_all(entry.parent().unwrap_or(scratch.path())).map_err(fail)?;
    std::fs::write(&entry, js_entry(&source)).map_err(fail)?;
    std::fs::write(scratch.path().join("componentize.mjs"), JS_RUNNER).map_err(fail)?;
    let q = |p: &Path| crate::json_string(&p.to_string_lossy());
    let spec = format!(
        "{{\"componentize\": {}, \"script\": {}, \"source\": {}, \"entry\": {}, \"wit\": {}, \"output\": {}}}",
        q(componentize),
        crate::json_string(job.script),
        q(&job.dir.join(job.script)),
        q(&entry),
        q(&scratch.path().join("wit")),
        q(job.output)
    );
    std::fs::write(scratch.path().join("job.json"), spec).map_err(fail)?;
    let status = Command::new(node)
        .current_dir(scratch.path())
        .arg(scratch.path().join("componentize.mjs"))
        .arg(scratch.path().join("job.json"))
        .stdin(Stdio::null())
        .status()
        .map_err(|e| BuildError::Failed(format!("cannot run node: {e}")))?;
    if !status.success() {
        return Err(BuildError::Failed(format!("{}: componentize-js failed ({status})", job.script)));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_python_entry_holds_path_and_source_as_literals() {
        let entry = python_entry("scripts/a __SOURCE__.py", "print(\"hi\")\n__PATH__\n");
        assert!(entry.contains(r#"_PATH = "scripts/a __SOURCE__.py""#), "{entry}");
        assert!(entry.contains(r#"_SOURCE = "print(\"hi\")\u000a__PATH__\u000a""#), "{entry}");
    }

    #[test]
    fn the_js_entry_keeps_the_scripts_line_numbers() {
        let entry = js_entry("#!/usr/bin/env node\nconsole.log(process.argv[2]);\n");
        let lines: Vec<&str> = entry.lines().collect();
        assert!(lines[0].ends_with("function __skillhostScript(process) {///usr/bin/env node"), "{entry}");
        assert_eq!(lines[1], "console.log(process.argv[2]);");
    }
}
