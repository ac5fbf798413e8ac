//! The built-in `shell` skill: `shell__run_command(command)`, native because it spawns
//! processes on the host.
//!
//! Approval is dynamic, as the spec describes: a command on `allowed_commands` runs without
//! asking, any other needs approval, and approvals are counted per command so a command a
//! person keeps approving is auto-promoted (`approval_auto_promote`, see
//! `engine::promote`). `human.overrides.shell__run_command` still has the final word.
//!
//! A command runs with stdin from `/dev/null`, a cleared environment (only `PATH`, `HOME`,
//! `USER`, `LOGNAME`, `LANG`, `LC_ALL`, `TZ`, and the names in `pass_env`: the host's API keys
//! never reach a command the model wrote), in its own process group, killed whole at the
//! `timeout` or when the turn gives up on it. Commands with shell syntax (`|`, `&&`, `>`, `;`,
//! `$`, globs, ...) run through `/bin/sh -c`; plain ones are split like a shell would and run
//! directly. Output is capped per stream.

use crate::sandbox::CallContext;
use crate::skills::contract::{Asked, Human, ToolDef, ToolHints, ToolResult};
use serde::Deserialize;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::AsyncReadExt;

/// The skill's name.
pub const NAME: &str = "shell";
/// Its one tool.
pub const RUN_COMMAND: &str = "run_command";
/// The prompt the model reads.
pub const PROMPT: &str = "You can run shell commands on the host with `shell__run_command`. \
Commands on the operator's allowlist run at once; any other command waits for a person's approval, \
so prefer the simplest read-only command that answers the question and say why you need it. \
Commands get no input (stdin is empty) and are stopped after a timeout: never start interactive \
programs or ones that wait forever (use `top -bn1`, not `top`; `journalctl --no-pager`).";

/// The longest command accepted, in bytes.
const MAX_COMMAND: usize = 8 * 1024;
/// How long output may keep arriving after the command exited (from children it left running)
/// before the rest of its process group is killed.
const DRAIN_GRACE: Duration = Duration::from_millis(200);
/// Environment variables every command gets from the host, when set.
const BASE_ENV: &[&str] = &["PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "TZ"];

/// `skills.config.shell`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ShellSettings {
    /// Commands that run without approval (compared with runs of whitespace collapsed).
    pub allowed_commands: Vec<String>,
    /// Approvals before a command auto-executes; read by `engine::promote` (here so that
    /// the key is known and checked).
    pub approval_auto_promote: Option<u32>,
    /// Seconds before a command is killed (default 30).
    pub timeout: f64,
    /// Bytes kept of each of stdout and stderr (default 64 KiB).
    pub max_output_bytes: usize,
    /// The working directory (default: the host's).
    pub cwd: Option<PathBuf>,
    /// More environment variables passed through from the host, by name.
    pub pass_env: Vec<String>,
}

impl Default for ShellSettings {
    fn default() -> Self {
        ShellSettings {
            allowed_commands: Vec::new(),
            approval_auto_promote: None,
            timeout: 30.0,
            max_output_bytes: 64 * 1024,
            cwd: None,
            pass_env: Vec::new(),
        }
    }
}

impl ShellSettings {
    /// Reads and checks the skill's config block.
    pub fn from_config(config: &Value) -> Result<Self, String> {
        let settings: ShellSettings =
            serde_json::from_value(config.clone()).map_err(|e| format!("skills.config.shell: {e}"))?;
        if !(settings.timeout > 0.0 && settings.timeout <= 86_400.0) {
            return Err(format!(
                "skills.config.shell.timeout: {} must be between 0 and 86400 seconds",
                settings.timeout
            ));
        }
        if settings.max_output_bytes == 0 {
            return Err("skills.config.shell.max_output_bytes must be at least 1".into());
        }
        if let Some(dir) = &settings.cwd
            && !dir.is_dir()
        {
            return Err(format!("skills.config.shell.cwd: {} is not a directory", dir.display()));
        }
        Ok(settings)
    }
}

/// The shell skill.
pub struct Shell {
    settings: ShellSettings,
    allowed: Vec<String>,
}

impl Shell {
    /// The skill as `settings` configure it.
    pub fn new(settings: ShellSettings) -> Self {
        let allowed = settings.allowed_commands.iter().map(|c| normalize(c)).collect();
        Shell { settings, allowed }
    }

    fn is_allowed(&self, command: &str) -> bool {
        self.allowed.iter().any(|a| *a == normalize(command))
    }
}

/// A command with runs of whitespace collapsed, for allowlist matching and approval counting.
pub fn normalize(command: &str) -> String {
    command.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Whether `command` needs a shell to mean what it says: operators, redirections,
/// substitutions, globs, comments, variable assignments.
pub fn needs_shell(command: &str) -> bool {
    const SPECIAL: &[char] =
        &['|', '&', ';', '<', '>', '(', ')', '$', '`', '\\', '\n', '*', '?', '[', ']', '{', '}', '~', '#', '!'];
    if command.contains(SPECIAL) {
        return true;
    }
    let first = command.split_whitespace().next().unwrap_or("");
    first.contains('=')
}

fn command_of(input: &Value) -> &str {
    input.get("command").and_then(Value::as_str).unwrap_or("")
}

#[async_trait::async_trait]
impl crate::skills::NativeTools for Shell {
    fn tools(&self) -> Vec<ToolDef> {
        let schema = json!({
            "type": "object",
            "properties": {"command": {"type": "string", "minLength": 1, "maxLength": MAX_COMMAND, "description": "The command line to run, e.g. `df -h` or `ps aux | head -20`."}},
            "required": ["command"],
            "additionalProperties": false,
        });
        vec![ToolDef {
            name: RUN_COMMAND.into(),
            description: "Run a shell command on the host and return its exit code, stdout and stderr. Allowlisted commands run at once; others need a person's approval.".into(),
            input_schema: schema.to_string(),
            human: Human::Dynamic,
            expose_result: false,
            declares_coverage: false,
            output_schema: None,
            hints: ToolHints { title: Some("Run a shell command".into()), open_world: Some(true), ..ToolHints::default() },
        }]
    }

    async fn handle(&self, tool: &str, input: &Value, _ctx: &CallContext) -> ToolResult {
        if tool != RUN_COMMAND {
            return failure(json!({"error": format!("unknown tool `{tool}`")}));
        }
        run(&self.settings, command_of(input)).await
    }

    fn resolve_human(&self, _tool: &str, input: &Value) -> Option<Asked> {
        if self.is_allowed(command_of(input)) { None } else { Some(Asked::Approve) }
    }

    fn promotion_subject(&self, _tool: &str, input: &Value) -> Option<String> {
        Some(normalize(command_of(input)))
    }
}

fn failure(content: Value) -> ToolResult {
    ToolResult::failure(content.to_string())
}

/// Kills the whole process group when dropped: on timeout, when the turn drops the call, and
/// after the command exits (children it left in the background).
struct GroupGuard(Option<i32>);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(pgid) = self.0.filter(|p| *p > 0) {
            // SAFETY: kill(2) with a negative pid signals the group we created; no memory involved.
            unsafe {
                libc::kill(-pgid, libc::SIGKILL);
            }
        }
    }
}

/// Runs `command` as the settings say; every failure is a `succeeded: false` result.
pub async fn run(settings: &ShellSettings, command: &str) -> ToolResult {
    let command = command.trim();
    if command.is_empty() {
        return failure(json!({"error": "the command is empty"}));
    }
    let mut cmd = if needs_shell(command) {
        let mut cmd = tokio::process::Command::new("/bin/sh");
        cmd.arg("-c").arg(command);
        cmd
    } else {
        let Some(argv) = shlex::split(command).filter(|a| !a.is_empty()) else {
            return failure(json!({"command": command, "error": "cannot parse the command (unbalanced quotes?)"}));
        };
        let mut cmd = tokio::process::Command::new(&argv[0]);
        cmd.args(&argv[1..]);
        cmd
    };
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .process_group(0)
        .env_clear();
    for name in BASE_ENV.iter().copied().chain(settings.pass_env.iter().map(String::as_str)) {
        if let Some(value) = std::env::var_os(name) {
            cmd.env(name, value);
        }
    }
    cmd.env("TERM", "dumb");
    if let Some(dir) = &settings.cwd {
        cmd.current_dir(dir);
    }
    let mut child = match cmd.spawn() {
        Ok(child) => child,
        Err(e) => return failure(json!({"command": command, "error": format!("cannot run the command: {e}")})),
    };
    let mut group = GroupGuard(child.id().and_then(|id| i32::try_from(id).ok()));
    let cap = settings.max_output_bytes;
    let stdout = tokio::spawn(read_capped(child.stdout.take(), cap));
    let stderr = tokio::spawn(read_capped(child.stderr.take(), cap));
    let limit = Duration::from_secs_f64(settings.timeout);
    let (status, timed_out) = match tokio::time::timeout(limit, child.wait()).await {
        Ok(status) => (status.ok(), false),
        Err(_) => {
            drop(std::mem::replace(&mut group, GroupGuard(None)));
            (child.wait().await.ok(), true)
        }
    };
    // Output still owed by children the command left running: a short grace, then the group
    // goes and the pipes close.
    let readers = async { (stdout.await, stderr.await) };
    tokio::pin!(readers);
    let (out, err) = match tokio::time::timeout(DRAIN_GRACE, &mut readers).await {
        Ok(done) => done,
        Err(_) => {
            drop(group);
            readers.await
        }
    };
    let (out, err) = (out.unwrap_or_default(), err.unwrap_or_default());
    let mut result = json!({
        "command": command,
        "exit_code": status.and_then(|s| s.code()),
        "stdout": out.text,
        "stderr": err.text,
    });
    if let Some(signal) = status.and_then(|s| std::os::unix::process::ExitStatusExt::signal(&s)) {
        result["signal"] = json!(signal);
    }
    if timed_out {
        result["timed_out"] = json!(true);
        result["error"] = json!(format!("the command was killed after the {} s timeout", settings.timeout));
    }
    for (name, capture) in [("stdout_truncated_bytes", &out), ("stderr_truncated_bytes", &err)] {
        if capture.dropped > 0 {
            result[name] = json!(capture.dropped);
        }
    }
    let succeeded = !timed_out && status.is_some_and(|s| s.success());
    let empty = out.text.trim().is_empty() && err.text.trim().is_empty();
    ToolResult {
        content: result.to_string(),
        succeeded: Some(succeeded),
        is_empty: Some(succeeded && empty),
        coverage: None,
        blocks: Vec::new(),
    }
}

/// One output stream: what was kept, and how many bytes past the cap were dropped.
#[derive(Default)]
struct Capture {
    text: String,
    dropped: u64,
}

/// Reads a stream to its end, keeping the first `cap` bytes.
async fn read_capped(stream: Option<impl tokio::io::AsyncRead + Unpin>, cap: usize) -> Capture {
    let Some(mut stream) = stream else { return Capture::default() };
    let (mut kept, mut dropped) = (Vec::new(), 0u64);
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = cap.saturating_sub(kept.len()).min(n);
                kept.extend_from_slice(&buf[..room]);
                dropped += (n - room) as u64;
            }
        }
    }
    Capture { text: String::from_utf8_lossy(&kept).into_owned(), dropped }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_syntax_is_detected() {
        for plain in ["df -h", "uptime", "echo 'a b'", "ls -la /tmp", "grep -c x file.txt"] {
            assert!(!needs_shell(plain), "{plain}");
        }
        for shelled in
            ["ps aux | head", "a && b", "echo hi > f", "a; b", "echo $HOME", "ls *.txt", "FOO=1 env", "echo `id`"]
        {
            assert!(needs_shell(shelled), "{shelled}");
        }
    }

    #[test]
    fn settings_are_checked() {
        assert!(ShellSettings::from_config(&json!({"allowed_commands": ["uptime"], "timeout": 5})).is_ok());
        let e = ShellSettings::from_config(&json!({"timeout": 0})).unwrap_err();
        assert!(e.contains("timeout"), "{e}");
        let e = ShellSettings::from_config(&json!({"alowed_commands": []})).unwrap_err();
        assert!(e.contains("alowed_commands"), "{e}");
        let e = ShellSettings::from_config(&json!({"cwd": "/no/such/dir"})).unwrap_err();
        assert!(e.contains("/no/such/dir"), "{e}");
    }

    #[test]
    fn allowlist_matches_whatever_the_spacing() {
        let shell = Shell::new(ShellSettings { allowed_commands: vec!["df  -h".into()], ..Default::default() });
        use crate::skills::NativeTools;
        assert_eq!(shell.resolve_human(RUN_COMMAND, &json!({"command": " df -h "})), None);
        assert_eq!(shell.resolve_human(RUN_COMMAND, &json!({"command": "df -h; rm x"})), Some(Asked::Approve));
        assert_eq!(shell.promotion_subject(RUN_COMMAND, &json!({"command": "ls   -l"})).as_deref(), Some("ls -l"));
    }
}
