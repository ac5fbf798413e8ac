//! `skillhost skill build` for script tools: every `.py` and `.js` script the SKILL.md
//! declares becomes a WASI command component under [`super::BUILD_DIR`]; `.wasm` scripts are
//! components already, and any other kind fails the build as it would fail the load.

use super::{ScriptKind, declarations};
use crate::skills::build::BuildError;
use crate::skills::prompt;
use skillhost_toolchain as toolchain;
use std::path::{Path, PathBuf};

/// The most SKILL.md the build reads (the loader applies `skills.max_prompt_bytes`).
const MAX_SKILL_MD: u64 = 64 << 20;

/// The script declarations of the skill in `dir` (none without a SKILL.md `tools:` block).
pub fn declared(dir: &Path) -> Result<Vec<super::ScriptDecl>, String> {
    let prompt =
        prompt::load(dir, MAX_SKILL_MD).map_err(|e| format!("{}: {}", dir.join(e.file).display(), e.message))?;
    let block = prompt.as_ref().and_then(|p| p.tools.as_ref());
    declarations(block).map_err(|e| format!("{}: {e}", dir.join("SKILL.md").display()))
}

/// Builds the `.py` and `.js` scripts of the skill in `dir`; returns the components written.
pub fn build_scripts(dir: &Path, offline: bool, progress: &mut dyn FnMut(&str)) -> Result<Vec<PathBuf>, BuildError> {
    let mut built = Vec::new();
    let mut componentize_js = None;
    for decl in declared(dir)? {
        let kind = decl.kind().map_err(|e| format!("{}: {e}", dir.join("SKILL.md").display()))?;
        if kind == ScriptKind::Wasm {
            continue;
        }
        let output = decl.artifact(dir);
        if let Some(parent) = output.parent() {
            std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
        }
        let job = toolchain::ScriptBuild { dir, script: &decl.script, output: &output };
        let result = if kind == ScriptKind::Python {
            progress(&format!("building script {} with componentize-py", decl.script));
            toolchain::build_python_script(&job)
        } else {
            let componentize = match componentize_js.take() {
                Some(found) => found,
                None => toolchain::find_componentize_js(dir, offline, progress)?,
            };
            progress(&format!("building script {} with componentize-js", decl.script));
            let result = toolchain::build_js_script(&job, &componentize);
            componentize_js = Some(componentize);
            result
        };
        result?;
        built.push(output);
    }
    Ok(built)
}
