//! A loaded script tool: its declaration, checked spec and command component, and one run of
//! it turned into stdout or a [`ScriptError`] the model can read.

use super::ScriptDecl;
use crate::sandbox::{CallEnv, CallError, CommandComponent, Invocation, Outcome};
use crate::skills::ToolSpec;
use std::path::Path;

/// How much of a failed script's stderr the model reads (its end, where the error is).
const STDERR_TAIL: usize = 2000;

/// One script tool of a skill, ready to run.
#[derive(Clone)]
pub struct ScriptTool {
    /// What SKILL.md declares.
    pub decl: ScriptDecl,
    /// The checked tool (name, schema, description); its level is always `approve`.
    pub spec: ToolSpec,
    command: CommandComponent,
    env: CallEnv,
}

impl std::fmt::Debug for ScriptTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptTool").field("tool", &self.spec.full_name).field("script", &self.decl.script).finish()
    }
}

/// Why a script tool produced no result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScriptError {
    /// The input broke the tool's schema; the script did not run.
    #[error("invalid input for `{tool}`: {problems}")]
    InvalidInput {
        /// The tool.
        tool: String,
        /// What is wrong.
        problems: String,
    },
    /// The script ran and exited with a non-zero code.
    #[error("script `{script}` exited with code {code}")]
    Exited {
        /// The script's path in its skill.
        script: String,
        /// Its exit code.
        code: i32,
        /// The end of what it wrote to stderr.
        stderr: String,
    },
    /// The run failed in the sandbox (a limit, a crash).
    #[error(transparent)]
    Call(#[from] CallError),
}

impl ScriptError {
    /// A short machine-readable name for the cause.
    pub fn kind(&self) -> &'static str {
        match self {
            ScriptError::InvalidInput { .. } => "invalid_input",
            ScriptError::Exited { .. } => "nonzero_exit",
            ScriptError::Call(e) => e.kind(),
        }
    }

    /// The structured result the model receives instead of the script's output.
    pub fn to_model_json(&self) -> serde_json::Value {
        let mut json = serde_json::json!({ "error": self.to_string(), "kind": self.kind() });
        if let ScriptError::Exited { code, stderr, .. } = self {
            json["exit_code"] = (*code).into();
            json["stderr"] = stderr.clone().into();
        }
        json
    }
}

impl ScriptTool {
    pub(super) fn new(decl: ScriptDecl, spec: ToolSpec, command: CommandComponent, env: CallEnv) -> Self {
        ScriptTool { decl, spec, command, env }
    }

    /// Checks `input` and runs the script with its skill folder `dir`: stdout on exit 0.
    pub async fn run(&self, dir: &Path, input: &serde_json::Value) -> Result<Outcome<String>, ScriptError> {
        let tool = &self.spec;
        tool.validate(input)
            .map_err(|problems| ScriptError::InvalidInput { tool: tool.full_name.clone(), problems })?;
        let argv = self.decl.argv(input);
        let outcome = self.command.run(&self.env, Invocation { argv: &argv, dir }).await?;
        if outcome.value.code != 0 {
            let stderr = stderr_tail(&outcome);
            return Err(ScriptError::Exited { script: self.decl.script.clone(), code: outcome.value.code, stderr });
        }
        Ok(outcome.map(|exit| exit.stdout))
    }
}

/// The last [`STDERR_TAIL`] bytes of the run's stderr lines (cut at a line or character).
fn stderr_tail<T>(outcome: &Outcome<T>) -> String {
    let lines: Vec<&str> = outcome.logs.iter().filter(|r| r.source == "stderr").map(|r| r.message.as_str()).collect();
    let text = lines.join("\n");
    if text.len() <= STDERR_TAIL {
        return text;
    }
    let mut start = text.len() - STDERR_TAIL;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    let tail = &text[start..];
    tail.split_once('\n').map_or(tail, |(_, rest)| rest).to_owned()
}
