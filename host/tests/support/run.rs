//! `skillhost run` as a background process the chat tests talk to through their scripted
//! platforms: stderr collected, killed when dropped.

use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A running `skillhost run`.
pub struct Running {
    child: Child,
    stderr: Arc<Mutex<String>>,
}

impl Running {
    /// `skillhost run <args>` in `dir`, with `env` set.
    pub fn start(dir: &std::path::Path, args: &[&str], env: &[(&str, &str)]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_skillhost"))
            .current_dir(dir)
            .arg("run")
            .args(args)
            .envs(env.iter().copied())
            .env("RUST_LOG", "skillhost=info")
            .env_remove("ANTHROPIC_API_KEY")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = Arc::new(Mutex::new(String::new()));
        let (sink, mut pipe) = (stderr.clone(), child.stderr.take().unwrap());
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n @ 1..) = std::io::Read::read(&mut pipe, &mut buf) {
                sink.lock().unwrap().push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        Running { child, stderr }
    }

    /// What it wrote on stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Waits (bounded) until stderr contains `text` and, when the start left skills to
    /// compile (a component not in the compile cache yet), until they joined.
    pub async fn wait_for_log(&self, text: &str) {
        let started = Instant::now();
        while !self.stderr().contains(text) {
            assert!(started.elapsed() < super::PROCESS_LIMIT, "never logged {text:?}:\n{}", self.stderr());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        if self.stderr().contains("compiling in the background") {
            self.wait_for_log_only("every skill is ready").await;
        }
    }

    /// Waits (bounded) until stderr contains `text`.
    async fn wait_for_log_only(&self, text: &str) {
        let started = Instant::now();
        while !self.stderr().contains(text) {
            assert!(started.elapsed() < super::PROCESS_LIMIT, "never logged {text:?}:\n{}", self.stderr());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Whether it is still running.
    pub fn running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// Asks it to stop with SIGTERM and waits (bounded) for its exit code.
    pub fn terminate(&mut self) -> Option<i32> {
        let pid = self.child.id().to_string();
        std::process::Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        let started = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code();
            }
            assert!(started.elapsed() < super::PROCESS_LIMIT, "still running after SIGTERM:\n{}", self.stderr());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stops it with SIGKILL and waits.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.kill();
    }
}
