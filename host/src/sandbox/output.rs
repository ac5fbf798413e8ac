//! A call's log output: records from the `log` import and lines the guest writes to stdout
//! and stderr, kept up to a byte cap. Past the cap, output is counted and dropped, never
//! an error for the guest.

use parking_lot::Mutex;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::AsyncWrite;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};

/// One kept record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogRecord {
    /// `debug`, `info`, `warn` or `error`.
    pub level: &'static str,
    /// `log`, `stdout` or `stderr`.
    pub source: &'static str,
    /// The message (a line, for stdout and stderr).
    pub message: String,
    /// Key-value fields.
    pub fields: Vec<(String, String)>,
}

#[derive(Debug, Default)]
struct Inner {
    records: Vec<LogRecord>,
    used: usize,
    dropped: u64,
    partial_stdout: Vec<u8>,
    partial_stderr: Vec<u8>,
}

/// The capped buffer. Clones share it.
#[derive(Debug, Clone)]
pub struct LogBuffer {
    inner: Arc<Mutex<Inner>>,
    max: usize,
}

/// The longest partial line held back before it is cut into a record.
const MAX_LINE: usize = 8 * 1024;

impl LogBuffer {
    /// A buffer keeping at most `max` bytes.
    pub fn new(max: usize) -> Self {
        LogBuffer { inner: Arc::default(), max }
    }

    fn lock(&self) -> parking_lot::MutexGuard<'_, Inner> {
        self.inner.lock()
    }

    /// Keeps `record` if it fits; returns whether it was kept.
    pub fn push(&self, record: LogRecord) -> bool {
        push_locked(&mut self.lock(), self.max, record)
    }

    /// A WASI stdout/stderr that writes into this buffer.
    pub fn stream(&self, source: &'static str) -> CapturedOutput {
        CapturedOutput { buffer: self.clone(), source }
    }

    /// Everything kept (partial lines flushed) and how many records were dropped.
    pub fn take(&self) -> (Vec<LogRecord>, u64) {
        let mut inner = self.lock();
        for source in ["stdout", "stderr"] {
            let partial = std::mem::take(partial_of(&mut inner, source));
            if !partial.is_empty() {
                let record = line_record(source, &partial);
                push_locked(&mut inner, self.max, record);
            }
        }
        (std::mem::take(&mut inner.records), inner.dropped)
    }

    /// What the guest last said on stderr before failing: a Rust panic's "panicked at"
    /// line and its message when there is one, else the last line that is not a hint.
    pub fn crash_message(&self) -> Option<String> {
        let inner = self.lock();
        let mut lines: Vec<String> =
            inner.records.iter().filter(|r| r.source == "stderr").map(|r| r.message.clone()).collect();
        if !inner.partial_stderr.is_empty() {
            lines.push(String::from_utf8_lossy(&inner.partial_stderr).into_owned());
        }
        if let Some(at) = lines.iter().rposition(|l| l.contains(" panicked at ")) {
            let message = lines.get(at + 1).map(|m| format!(": {m}")).unwrap_or_default();
            return Some(format!("{}{message}", lines[at].trim_end_matches(':')));
        }
        lines.into_iter().rev().map(|l| l.trim().to_string()).find(|l| !l.is_empty() && !l.starts_with("note:"))
    }

    fn write(&self, source: &'static str, bytes: &[u8]) {
        let mut inner = self.lock();
        if inner.used >= self.max {
            // Over the cap: count whole writes as dropped rather than buffering them.
            inner.dropped += 1;
            return;
        }
        let mut rest = bytes;
        while let Some(pos) = rest.iter().position(|b| *b == b'\n') {
            let mut line = std::mem::take(partial_of(&mut inner, source));
            line.extend_from_slice(&rest[..pos]);
            push_locked(&mut inner, self.max, line_record(source, &line));
            rest = &rest[pos + 1..];
        }
        let partial = partial_of(&mut inner, source);
        partial.extend_from_slice(&rest[..rest.len().min(MAX_LINE.saturating_sub(partial.len()))]);
        if partial.len() >= MAX_LINE {
            let line = std::mem::take(partial);
            push_locked(&mut inner, self.max, line_record(source, &line));
        }
    }
}

fn partial_of<'a>(inner: &'a mut Inner, source: &str) -> &'a mut Vec<u8> {
    if source == "stdout" { &mut inner.partial_stdout } else { &mut inner.partial_stderr }
}

fn line_record(source: &'static str, line: &[u8]) -> LogRecord {
    let level = if source == "stderr" { "warn" } else { "info" };
    LogRecord { level, source, message: String::from_utf8_lossy(line).into_owned(), fields: vec![] }
}

fn push_locked(inner: &mut Inner, max: usize, record: LogRecord) -> bool {
    let size = record.message.len() + record.fields.iter().map(|(k, v)| k.len() + v.len()).sum::<usize>();
    if inner.used + size > max {
        inner.dropped += 1;
        return false;
    }
    inner.used += size;
    inner.records.push(record);
    true
}

/// A guest's stdout or stderr.
pub struct CapturedOutput {
    buffer: LogBuffer,
    source: &'static str,
}

impl IsTerminal for CapturedOutput {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for CapturedOutput {
    fn async_stream(&self) -> Box<dyn AsyncWrite + Send + Sync> {
        Box::new(Writer { buffer: self.buffer.clone(), source: self.source })
    }

    /// Written synchronously (the default adapter writes from a background task), so that
    /// a panic message printed just before a trap is in the buffer when the trap is reported.
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(Writer { buffer: self.buffer.clone(), source: self.source })
    }
}

/// Always ready; past the cap, output is dropped rather than refused.
const WRITE_BUDGET: usize = 64 * 1024;

impl OutputStream for Writer {
    fn write(&mut self, bytes: bytes::Bytes) -> StreamResult<()> {
        self.buffer.write(self.source, &bytes);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(WRITE_BUDGET)
    }
}

#[async_trait::async_trait]
impl Pollable for Writer {
    async fn ready(&mut self) {}
}

struct Writer {
    buffer: LogBuffer,
    source: &'static str,
}

impl AsyncWrite for Writer {
    fn poll_write(self: Pin<&mut Self>, _cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        self.buffer.write(self.source, buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_split_and_capped() {
        let buf = LogBuffer::new(10);
        buf.write("stdout", b"hello\nwor");
        buf.write("stdout", b"ld\nthis line is too long\n");
        let (records, dropped) = buf.take();
        let lines: Vec<_> = records.iter().map(|r| r.message.as_str()).collect();
        assert_eq!(lines, ["hello", "world"]);
        assert_eq!(dropped, 1);
    }
}
