//! A script's stdout, kept as the tool's result up to the result cap. Past the cap the bytes
//! are counted and dropped (never an error for the guest: it runs to its end), and the call
//! is reported as `result_too_large`.

use parking_lot::Mutex;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::AsyncWrite;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};

#[derive(Debug, Default)]
struct Inner {
    kept: Vec<u8>,
    written: u64,
}

/// The captured bytes. Clones share them.
#[derive(Debug, Clone)]
pub struct CapturedStdout {
    inner: Arc<Mutex<Inner>>,
    max: u64,
}

impl CapturedStdout {
    /// Keeps at most `max` bytes.
    pub fn new(max: u64) -> Self {
        CapturedStdout { inner: Arc::default(), max }
    }

    fn lock(&self) -> parking_lot::MutexGuard<'_, Inner> {
        self.inner.lock()
    }

    fn write(&self, bytes: &[u8]) {
        let mut inner = self.lock();
        inner.written = inner.written.saturating_add(bytes.len() as u64);
        let room = (self.max as usize).saturating_sub(inner.kept.len());
        inner.kept.extend_from_slice(&bytes[..bytes.len().min(room)]);
    }

    /// What was kept, and how many bytes were written in all.
    pub fn take(&self) -> (Vec<u8>, u64) {
        let mut inner = self.lock();
        (std::mem::take(&mut inner.kept), inner.written)
    }
}

impl IsTerminal for CapturedStdout {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for CapturedStdout {
    fn async_stream(&self) -> Box<dyn AsyncWrite + Send + Sync> {
        Box::new(Writer(self.clone()))
    }

    /// Written synchronously, so that everything printed before an exit is captured.
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(Writer(self.clone()))
    }
}

/// Always ready: past the cap, output is dropped rather than refused.
const WRITE_BUDGET: usize = 64 * 1024;

struct Writer(CapturedStdout);

impl OutputStream for Writer {
    fn write(&mut self, bytes: bytes::Bytes) -> StreamResult<()> {
        self.0.write(&bytes);
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

impl AsyncWrite for Writer {
    fn poll_write(self: Pin<&mut Self>, _cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        self.0.write(buf);
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
    fn bytes_past_the_cap_are_counted_not_kept() {
        let out = CapturedStdout::new(4);
        out.write(b"abc");
        out.write(b"defg");
        assert_eq!(out.take(), (b"abcd".to_vec(), 7));
    }
}
