//! Loading a skill's script tools: each declaration checked (its kind, its file, its build),
//! its command component compiled and linked against WASI alone, its tool spec checked like a
//! component's tools.

use super::{ScriptDecl, ScriptKind, ScriptTool, declarations};
use crate::sandbox::CallEnv;
use crate::skills::admit::Failure;
use crate::skills::contract::{Human, ToolDef};
use crate::skills::loader::{LoadProblem, Loader};
use crate::skills::{Manifest, Skill, ToolSpec};
use std::path::{Path, PathBuf};

impl Loader {
    /// Gives `skill` the script tools its SKILL.md declares (none for `prompt.md`), under the
    /// same limits as its other calls.
    pub(in crate::skills) fn with_scripts(&self, mut skill: Skill, manifest: &Manifest) -> Result<Skill, Failure> {
        let problem =
            |file: PathBuf, message: String| Failure::Problem(LoadProblem { skill: skill.name.clone(), file, message });
        let decls = declarations(skill.prompt.tools.as_ref()).map_err(|e| problem(skill.dir.join("SKILL.md"), e))?;
        if decls.is_empty() {
            return Ok(skill);
        }
        // A script reads its folder through its own WASI (`command.rs`), not the capability.
        let env = self.call_env((&skill.name, &skill.dir), manifest, None, None);
        let mut scripts = Vec::with_capacity(decls.len());
        for decl in decls {
            let tool = self.load_script(&skill.name, &skill.dir, decl, &env).map_err(|(f, m)| problem(f, m))?;
            scripts.push(tool);
        }
        skill.scripts = scripts;
        Ok(skill)
    }

    /// One script tool; the error names the file at fault.
    fn load_script(
        &self,
        skill: &str,
        dir: &Path,
        decl: ScriptDecl,
        env: &CallEnv,
    ) -> Result<ScriptTool, (PathBuf, String)> {
        let source = dir.join(&decl.script);
        let kind = decl.kind().map_err(|e| (dir.join("SKILL.md"), e))?;
        if !source.is_file() {
            return Err((source, format!("script `{}` of tool `{}` is missing", decl.script, decl.name)));
        }
        let artifact = decl.artifact(dir);
        let rebuild = || format!("run `skillhost skill build {}`", dir.display());
        if kind != ScriptKind::Wasm {
            match (modified(&source), modified(&artifact)) {
                (_, None) => return Err((source, format!("script `{}` is not built: {}", decl.script, rebuild()))),
                (Some(changed), Some(built)) if changed > built => {
                    return Err((source, format!("script `{}` changed after its build: {}", decl.script, rebuild())));
                }
                _ => {}
            }
        }
        let wasm = std::fs::read(&artifact).map_err(|e| (artifact.clone(), e.to_string()))?;
        let command = self
            .sandbox
            .load_command(&wasm)
            .map_err(|e| (artifact.clone(), format!("script `{}`: {e}", decl.script)))?;
        let def = ToolDef {
            name: decl.name.clone(),
            description: decl.description.clone(),
            input_schema: decl.schema().to_string(),
            // Scripts run arbitrary code: a person approves each call unless the operator
            // lowers the tool in `human.overrides`.
            human: Human::Approve,
            expose_result: false,
            declares_coverage: false,
            output_schema: None,
            hints: Default::default(),
        };
        let spec = ToolSpec::new(skill, def).map_err(|e| (dir.join("SKILL.md"), e))?;
        Ok(ScriptTool::new(decl, spec, command, env.clone()))
    }
}

fn modified(path: &Path) -> Option<std::time::SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}
