//! Command components (`wasi:cli/command`): the scripts a skill declares as tools (SKILL.md
//! `tools:`). A script is never a host process: each run is a fresh `Store` under the skill's
//! limits (fuel, deadline, memory cap, result and log caps), with WASI only (none of the
//! skill imports), its arguments, its skill's folder preopened read-only as `.`, stdout
//! captured as the result and stderr in the capped log.

use super::capture::CapturedStdout;
use super::component::{CallEnv, Outcome};
use super::error::{CallError, LoadError};
use super::failure::{bounded, classify, limited_store};
use super::host_state::HostState;
use super::output::LogBuffer;
use std::path::Path;
use std::time::Instant;
use wasmtime::component::{Component, Linker};
use wasmtime_wasi::p2::bindings::CommandPre;
use wasmtime_wasi::{FsPerms, I32Exit, WasiCtx};

/// A compiled, linked command component.
#[derive(Clone)]
pub struct CommandComponent {
    pre: CommandPre<HostState>,
}

/// One run: `argv` (the program's name first) and the folder the script may read.
#[derive(Debug, Clone, Copy)]
pub struct Invocation<'a> {
    /// The arguments, `argv[0]` first (the script's path, as scripts expect).
    pub argv: &'a [String],
    /// The folder preopened read-only as `.` (the skill's own).
    pub dir: &'a Path,
}

/// How a run ended: its exit code (0 is success) and what it wrote to stdout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exit {
    /// 0 on success; the code of `exit` / `exit-with-code`, 1 for a `run` that returned an error.
    pub code: i32,
    /// Its stdout (lossy UTF-8), at most the result cap.
    pub stdout: String,
}

impl CommandComponent {
    /// Links `component` against WASI alone: a command that imports anything else (the skill
    /// imports among them) or exports no `wasi:cli/run` is refused.
    pub(super) fn new(linker: &Linker<HostState>, component: &Component) -> Result<Self, LoadError> {
        let pre = linker.instantiate_pre(component).map_err(|e| {
            LoadError::UnsupportedImport(format!(
                "{e:#} (a script may import WASI only: wasi:cli, io, filesystem, ...)"
            ))
        })?;
        let pre = CommandPre::new(pre).map_err(|e| {
            LoadError::NotACommand(format!("{e:#}; build it as a program with a `main` (a wasm32-wasip2 binary)"))
        })?;
        Ok(CommandComponent { pre })
    }

    /// Runs the command once. A non-zero exit is an [`Exit`], not an error: the caller decides
    /// what it means; errors are the limits and crashes, as for every call.
    pub async fn run(&self, env: &CallEnv, invocation: Invocation<'_>) -> Result<Outcome<Exit>, CallError> {
        let started = Instant::now();
        let program = invocation.argv.first().cloned().unwrap_or_default();
        let stdout = CapturedStdout::new(env.limits.max_result_bytes);
        let logs = LogBuffer::new(env.limits.max_log_bytes as usize);
        let wasi = command_wasi(invocation, &stdout, &logs).map_err(|e| {
            CallError::Host(format!("cannot open the skill folder {}: {e:#}", invocation.dir.display()))
        })?;
        let operation = format!("script {program}");
        // The same limits as a skill call's (`component.rs`).
        let mut store = limited_store(self.pre.engine(), HostState::for_command(env, operation.clone(), wasi, logs));
        let pre = self.pre.clone();
        let clock = store.data().deadline.clone();
        let work = async {
            let command = pre.instantiate_async(&mut store).await?;
            command.wasi_cli_run().call_run(&mut store).await
        };
        let result = match bounded(&clock, work).await {
            Ok(Ok(())) => Ok(0),
            Ok(Err(())) => Ok(1),
            Err(error) => match error.downcast_ref::<I32Exit>() {
                Some(exit) => Ok(exit.0),
                None => Err(classify(&store, &env.limits, error)),
            },
        };
        let fuel_used = env.limits.fuel.saturating_sub(store.get_fuel().unwrap_or(0));
        let memory_bytes = store.data().limiter.used();
        let (logs, logs_dropped) = store.data().take_logs();
        for record in &logs {
            super::host::log::emit(&env.caps.skill, &operation, record);
        }
        let (kept, written) = stdout.take();
        let code = result.inspect_err(|e| {
            tracing::warn!(skill = %env.caps.skill, operation, kind = e.kind(), "the script failed");
        })?;
        if written > env.limits.max_result_bytes {
            let (limit, copy_limit) = (env.limits.max_result_bytes, env.limits.copy_limit());
            return Err(CallError::ResultTooLarge { size: Some(written), limit, copy_limit });
        }
        let value = Exit { code, stdout: String::from_utf8_lossy(&kept).into_owned() };
        Ok(Outcome { value, logs, logs_dropped, fuel_used, elapsed: started.elapsed(), memory_bytes })
    }
}

/// WASI for one run: the arguments, the folder read-only as `.`, stdout captured, stderr in
/// the log; no environment, no sockets, no name lookups, empty stdin.
fn command_wasi(invocation: Invocation<'_>, stdout: &CapturedStdout, logs: &LogBuffer) -> anyhow::Result<WasiCtx> {
    let mut builder = WasiCtx::builder();
    builder
        .allow_tcp(false)
        .allow_udp(false)
        .allow_ip_name_lookup(false)
        .args(invocation.argv)
        .stdout(stdout.clone())
        .stderr(logs.stream("stderr"))
        .preopened_dir(invocation.dir, ".", FsPerms::ReadOnly)?;
    Ok(builder.build())
}
