//! Python skills, built with componentize-py.
//!
//! Two shapes: a module written on the Python SDK (`sdk-python/`, embedded here and bundled
//! into the component), for which the build generates the entry module and a world that
//! exports exactly the hooks the module defines; or a module written against the raw
//! generated bindings (`wit_world`), built against the world it names.

use crate::{BuildError, which};
use std::fmt::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};

/// The Python SDK's files (`sdk-python/skillhost/`), bundled into every SDK skill.
pub const PYTHON_SDK: &[(&str, &str)] = &[
    ("skillhost/__init__.py", include_str!("../../sdk-python/skillhost/__init__.py")),
    ("skillhost/_errors.py", include_str!("../../sdk-python/skillhost/_errors.py")),
    ("skillhost/_exports.py", include_str!("../../sdk-python/skillhost/_exports.py")),
    ("skillhost/_folder.py", include_str!("../../sdk-python/skillhost/_folder.py")),
    ("skillhost/_schema.py", include_str!("../../sdk-python/skillhost/_schema.py")),
    ("skillhost/_tool.py", include_str!("../../sdk-python/skillhost/_tool.py")),
    ("skillhost/ask.py", include_str!("../../sdk-python/skillhost/ask.py")),
    ("skillhost/http.py", include_str!("../../sdk-python/skillhost/http.py")),
    ("skillhost/lists.py", include_str!("../../sdk-python/skillhost/lists.py")),
    ("skillhost/log.py", include_str!("../../sdk-python/skillhost/log.py")),
    ("skillhost/mcp.py", include_str!("../../sdk-python/skillhost/mcp.py")),
    ("skillhost/memory.py", include_str!("../../sdk-python/skillhost/memory.py")),
    ("skillhost/notify.py", include_str!("../../sdk-python/skillhost/notify.py")),
    ("skillhost/progress.py", include_str!("../../sdk-python/skillhost/progress.py")),
    ("skillhost/route.py", include_str!("../../sdk-python/skillhost/route.py")),
    ("skillhost/state.py", include_str!("../../sdk-python/skillhost/state.py")),
    ("skillhost/tasks.py", include_str!("../../sdk-python/skillhost/tasks.py")),
];

/// One optional hook: the function an SDK module defines, the WIT interface it exports, and
/// the class of `skillhost._exports` (the name componentize-py looks for) that adapts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PythonHook {
    /// The module-level function, e.g. `resolve_human`.
    pub function: &'static str,
    /// The WIT interface, e.g. `resolve-human`.
    pub interface: &'static str,
    /// The export class, e.g. `ResolveHuman`.
    pub class: &'static str,
}

/// Every optional hook an SDK module can define.
pub const PYTHON_HOOKS: &[PythonHook] = &[
    PythonHook { function: "resolve_human", interface: "resolve-human", class: "ResolveHuman" },
    PythonHook { function: "is_available", interface: "availability", class: "Availability" },
    PythonHook { function: "startup", interface: "startup", class: "Startup" },
    PythonHook { function: "scheduled", interface: "scheduled", class: "Scheduled" },
    PythonHook { function: "before_mcp_call", interface: "before-mcp-call", class: "BeforeMcpCall" },
    PythonHook { function: "observe_mcp_result", interface: "observe-mcp-result", class: "ObserveMcpResult" },
    PythonHook { function: "tool_result_empty", interface: "tool-result-empty", class: "ToolResultEmpty" },
    PythonHook { function: "tool_target", interface: "tool-target", class: "ToolTarget" },
    PythonHook {
        function: "required_client_capabilities",
        interface: "client-capabilities",
        class: "ClientCapabilities",
    },
    PythonHook { function: "task_support", interface: "task-support", class: "TaskSupport" },
];

/// Whether a module's source imports the SDK (`import skillhost` / `from skillhost...`).
pub fn uses_python_sdk(source: &str) -> bool {
    let module_follows = |rest: &str| rest.is_empty() || rest.starts_with([' ', '.', ',', '\t']);
    source.lines().any(|line| {
        let line = line.trim_start();
        let rest = line.strip_prefix("import skillhost").or_else(|| line.strip_prefix("from skillhost"));
        rest.is_some_and(module_follows)
    })
}

/// The hooks a module defines as top-level functions (`def resolve_human(` at column 0).
pub fn python_hooks(source: &str) -> Vec<PythonHook> {
    PYTHON_HOOKS
        .iter()
        .filter(|hook| source.lines().any(|line| line.starts_with(&format!("def {}(", hook.function))))
        .copied()
        .collect()
}

/// The generated world: the contract's `skill` world plus the hooks' exports.
pub fn hooks_world(package: &str, interfaces: &[&str]) -> String {
    let mut wit = format!("package {package};\n\nworld app {{\n    include skillhost:skill/skill@0.1.0;\n");
    for interface in interfaces {
        writeln!(wit, "    export skillhost:skill/{interface}@0.1.0;").unwrap();
    }
    wit.push_str("}\n");
    wit
}

/// The bindings of the contract's imports that the SDK's modules import when first used. The
/// generated entry imports them all: componentize-py snapshots the modules imported while it
/// builds, and its bindings are not on the component's filesystem afterwards, so a binding
/// first imported inside a call would not be found.
pub const SDK_BINDINGS: &[&str] = &[
    "ask", "blocks", "http", "lists", "log", "mcp", "memory", "notify", "progress", "route", "state", "tasks", "types",
];

fn entry_module(module: &str, hooks: &[PythonHook]) -> String {
    let mut py = format!(
        "# Generated by skillhost skill build: binds the skill module to the SDK's exports.\n\
         import {module} as _skill\nfrom skillhost import _exports\n_exports.bind(_skill)\nTools = _exports.Tools\n"
    );
    for binding in SDK_BINDINGS {
        writeln!(py, "import wit_world.imports.{binding}").unwrap();
    }
    for hook in hooks {
        writeln!(py, "{0} = _exports.{0}", hook.class).unwrap();
    }
    py
}

/// Builds the Python skill `module` in `app_dir` to `output`. `contract` is the folder with
/// the skillhost WIT. With `world`, the module uses the raw bindings of that world (the
/// contract's, or one in the skill's own `wit/` folder); without, a module that imports the
/// SDK gets it bundled, and any other is built against world `skill`.
pub fn build_python_app(
    app_dir: &Path,
    module: &str,
    contract: &Path,
    world: Option<&str>,
    output: &Path,
) -> Result<(), BuildError> {
    let own_wit = app_dir.join("wit");
    let mut wit_dirs = vec![contract];
    if own_wit.is_dir() {
        wit_dirs.push(&own_wit);
    }
    let file = app_dir.join(format!("{}.py", module.replace('.', "/")));
    let source = std::fs::read_to_string(&file).map_err(|e| BuildError::Failed(format!("{}: {e}", file.display())))?;
    if world.is_some() || !uses_python_sdk(&source) {
        return build_python(app_dir, module, &wit_dirs, world.unwrap_or("skill"), output);
    }
    let scratch = tempfile::tempdir().map_err(|e| BuildError::Failed(e.to_string()))?;
    let (sdk, gen_wit) = (scratch.path().join("sdk"), scratch.path().join("world"));
    let hooks = python_hooks(&source);
    let interfaces: Vec<&str> = hooks.iter().map(|h| h.interface).collect();
    let written = write_files(&sdk, PYTHON_SDK)
        .and_then(|()| std::fs::write(sdk.join("skillhost_entry.py"), entry_module(module, &hooks)))
        .and_then(|()| std::fs::create_dir_all(&gen_wit))
        .and_then(|()| std::fs::write(gen_wit.join("world.wit"), hooks_world("skillhost:generated", &interfaces)));
    written.map_err(|e| BuildError::Failed(format!("writing the SDK: {e}")))?;
    wit_dirs.push(&gen_wit);
    componentize_py(app_dir, &[Path::new("."), &sdk], "skillhost_entry", &wit_dirs, "skillhost:generated/app", output)
}

/// Writes `(relative path, text)` files under `dir`.
pub fn write_files(dir: &Path, files: &[(&str, &str)]) -> std::io::Result<()> {
    for (name, text) in files {
        let path = dir.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(path, text)?;
    }
    Ok(())
}

/// Builds a Python skill with componentize-py: `module` in `app_dir` against `world` of the
/// WIT in `wit_dirs` (the contract first, then the skill's own `wit/` if it has one, for a
/// world that adds hooks), written to `output`.
pub fn build_python(
    app_dir: &Path,
    module: &str,
    wit_dirs: &[&Path],
    world: &str,
    output: &Path,
) -> Result<(), BuildError> {
    componentize_py(app_dir, &[Path::new(".")], module, wit_dirs, world, output)
}

/// One componentize-py run: `module` in `app_dir` (with `python_path`, relative to it)
/// against `world` of the WIT in `wit_dirs`, written to `output`.
pub(crate) struct Componentize<'a> {
    pub app_dir: &'a Path,
    pub python_path: &'a [&'a Path],
    pub module: &'a str,
    pub wit_dirs: &'a [&'a Path],
    pub world: &'a str,
    pub output: &'a Path,
}

pub(crate) fn componentize_py(
    app_dir: &Path,
    python_path: &[&Path],
    module: &str,
    wit_dirs: &[&Path],
    world: &str,
    output: &Path,
) -> Result<(), BuildError> {
    let names: Vec<String> = python_path
        .iter()
        .enumerate()
        .map(|(i, _)| if i == 0 { app_dir.display().to_string() } else { "<skillhost SDK>".to_string() })
        .collect();
    Componentize { app_dir, python_path, module, wit_dirs, world, output }.run(&names)
}

impl Componentize<'_> {
    /// Runs componentize-py; a failure quotes the Python traceback with the i-th
    /// `python_path` folder called `names[i]`.
    pub(crate) fn run(&self, names: &[String]) -> Result<(), BuildError> {
        // componentize-py imports the author's modules, and Python writes `__pycache__`
        // beside them whatever PYTHONDONTWRITEBYTECODE says: remove what the build made.
        let cache = self.app_dir.join("__pycache__");
        let had_cache = cache.exists();
        let result = self.componentize(names);
        if !had_cache {
            let _ = std::fs::remove_dir_all(&cache);
        }
        result
    }

    fn componentize(&self, names: &[String]) -> Result<(), BuildError> {
        let Some(componentize) = which("componentize-py") else {
            return Err(BuildError::NoToolchain(
                "componentize-py is not installed. Fix it with:\n  pip install componentize-py".into(),
            ));
        };
        let mut cmd = Command::new(componentize);
        cmd.current_dir(self.app_dir);
        for dir in self.wit_dirs {
            cmd.arg("-d").arg(dir);
        }
        cmd.args(["-w", self.world, "componentize"]);
        for dir in self.python_path {
            cmd.arg("-p").arg(dir);
        }
        // componentize-py maps the i-th `-p` folder to `/i/` inside its interpreter; a failure
        // is a Rust error wrapping the Python traceback, which is what the author needs.
        let out = cmd
            .arg(self.module)
            .arg("-o")
            .arg(self.output)
            .env("RUST_BACKTRACE", "0")
            // The build never writes into the author's folder (`__pycache__`).
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::inherit())
            .stderr(Stdio::piped())
            .output()
            .map_err(|e| BuildError::Failed(format!("cannot run componentize-py: {e}")))?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        if !out.status.success() {
            return Err(BuildError::Failed(format!(
                "componentize-py failed in {} ({}):\n{}",
                names.first().map_or_else(|| self.app_dir.display().to_string(), Clone::clone),
                out.status,
                python_traceback(&stderr, names)
            )));
        }
        eprint!("{stderr}");
        Ok(())
    }
}

/// The Python traceback inside componentize-py's error, with its `/i/` folders named.
fn python_traceback(stderr: &str, folders: &[String]) -> String {
    let start = stderr.find("AssertionError: ").map(|i| i + "AssertionError: ".len()).unwrap_or(0);
    let rest = &stderr[start..];
    let end = ["\n\nCaused by:", "\nStack backtrace:"].iter().filter_map(|m| rest.find(m)).min().unwrap_or(rest.len());
    let mut text = rest[..end].trim_end().to_string();
    for (i, folder) in folders.iter().enumerate() {
        text = text.replace(&format!("\"/{i}/"), &format!("\"{folder}/"));
    }
    text
}

/// Builds a Python component once per content: componentize-py takes tens of seconds, so the
/// component is kept in `<root>/target/wasm-guests/python/` under a hash of everything it is
/// built from (the files under `dir`, the WIT, the files the toolchain bundles as it embedded
/// them, componentize-py's version). Older builds of `name` are removed.
pub fn cached_python(
    root: &Path,
    dir: &Path,
    name: &str,
    bundled: &[&[(&str, &str)]],
    build: impl FnOnce(&Path) -> Result<(), BuildError>,
) -> Result<std::path::PathBuf, BuildError> {
    use std::hash::{Hash, Hasher};
    let failed = |e: std::io::Error| BuildError::Failed(format!("the Python build cache: {e}"));
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    bundled.hash(&mut hasher);
    for folder in [dir.to_path_buf(), root.join("wit")] {
        for file in files_under(&folder) {
            file.strip_prefix(&folder).unwrap_or(&file).hash(&mut hasher);
            std::fs::read(&file).map_err(failed)?.hash(&mut hasher);
        }
    }
    let version = Command::new("componentize-py").arg("--version").output();
    version.map(|o| o.stdout).unwrap_or_default().hash(&mut hasher);
    let cache = root.join("target/wasm-guests/python");
    let output = cache.join(format!("{name}-{:016x}.wasm", hasher.finish()));
    if !output.is_file() {
        std::fs::create_dir_all(&cache).map_err(failed)?;
        let partial = output.with_extension("partial");
        build(&partial)?;
        std::fs::rename(&partial, &output).map_err(failed)?;
        // Older builds of this component are never read again.
        for stale in std::fs::read_dir(&cache).map_err(failed)?.flatten().map(|e| e.path()) {
            let file = stale.file_name().unwrap_or_default().to_string_lossy().into_owned();
            if stale != output && file.strip_prefix(name).is_some_and(|rest| rest.len() == 22 && rest.starts_with('-'))
            {
                let _ = std::fs::remove_file(stale);
            }
        }
    }
    Ok(output)
}

/// The files under `dir`, sorted, without built components and Python caches.
fn files_under(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(current) = pending.pop() {
        for entry in std::fs::read_dir(&current).into_iter().flatten().flatten() {
            let path = entry.path();
            let name = entry.file_name();
            if path.is_dir() && name != "__pycache__" {
                pending.push(path);
            } else if path.is_file() && path.extension().is_none_or(|e| e != "wasm" && e != "pyc") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sdk_use_and_hooks_are_found_in_the_source() {
        let source = "from skillhost import tool\n\ndef tool_target(name, input):\n    pass\n\nclass X:\n    def startup(self):\n        pass\n";
        assert!(uses_python_sdk(source));
        assert!(!uses_python_sdk("import skillhostile\nfrom wit_world import exports\n"));
        let hooks = python_hooks(source);
        assert_eq!(hooks.iter().map(|h| h.function).collect::<Vec<_>>(), ["tool_target"], "methods are not hooks");
        let world = hooks_world("skillhost:generated", &["tool-target"]);
        assert!(world.contains("export skillhost:skill/tool-target@0.1.0;"), "{world}");
        assert!(entry_module("app", &hooks).contains("ToolTarget = _exports.ToolTarget"));
    }

    #[test]
    fn the_traceback_names_the_authors_file() {
        let stderr = "Traceback (most recent call last):\n  File \"/usr/bin/componentize-py\", line 8\nAssertionError: Traceback (most recent call last):\n  File \"/1/skillhost_entry.py\", line 1, in <module>\n  File \"/0/app.py\", line 6\n    return 1 +\nSyntaxError: invalid syntax\n\n\nCaused by:\n    SyntaxError\n\nStack backtrace:\n   0: x\n";
        let text = python_traceback(stderr, &["/work/s".into(), "<sdk>".into()]);
        assert!(text.starts_with("Traceback"), "{text}");
        assert!(
            text.contains("File \"/work/s/app.py\", line 6") && text.ends_with("SyntaxError: invalid syntax"),
            "{text}"
        );
        assert!(!text.contains("Caused by") && !text.contains("componentize-py\""), "{text}");
    }

    #[test]
    fn every_sdk_file_is_embedded() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sdk-python/skillhost");
        let mut on_disk: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| n.ends_with(".py"))
            .map(|n| format!("skillhost/{n}"))
            .collect();
        on_disk.sort();
        let embedded: Vec<String> = PYTHON_SDK.iter().map(|(n, _)| n.to_string()).collect();
        assert_eq!(on_disk, embedded);
    }
}
