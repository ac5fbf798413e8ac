//! An incremental Server-Sent Events reader (the WHATWG `text/event-stream` format) over a
//! byte stream, shared by every provider.
//!
//! Chunks split anywhere: mid-line, mid-CRLF, mid-UTF-8 character. Lines end in LF, CRLF or
//! CR; `event:` names the event, `data:` lines are joined with LF, `:` lines are comments;
//! a blank line dispatches. At end of stream an undispatched event is dropped, as the
//! standard says: a stream cut mid-event must not look like a complete one.

use super::LlmError;
use bytes::Bytes;
use futures::{Stream, StreamExt};
use std::fmt::Display;

/// The longest line we buffer; a server sending more without a line break is broken.
const MAX_LINE: usize = 16 * 1024 * 1024;

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// The `event:` field, or empty (the standard's default type `message`).
    pub event: String,
    /// The `data:` lines joined with `\n`.
    pub data: String,
}

/// Reads events from a stream of byte chunks.
pub struct SseReader<S> {
    provider: &'static str,
    stream: S,
    buf: Vec<u8>,
    /// Bytes of `buf` already consumed.
    start: usize,
    eof: bool,
    event: String,
    data: Option<String>,
}

impl<S, E> SseReader<S>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
    E: Display,
{
    /// A reader over `stream`; errors name `provider`.
    pub fn new(provider: &'static str, stream: S) -> Self {
        SseReader { provider, stream, buf: Vec::new(), start: 0, eof: false, event: String::new(), data: None }
    }

    /// The next event, or `None` at the end of the stream. A failing stream is a transport
    /// error; bytes that are not UTF-8, or an endless line, a protocol error.
    pub async fn next(&mut self) -> Result<Option<Event>, LlmError> {
        loop {
            while let Some(line) = self.take_line()? {
                if let Some(event) = self.feed(&line) {
                    return Ok(Some(event));
                }
            }
            if self.eof {
                return Ok(None);
            }
            self.fill().await?;
        }
    }

    /// Reads one more chunk into the buffer (or notes the end).
    async fn fill(&mut self) -> Result<(), LlmError> {
        match self.stream.next().await {
            Some(Ok(chunk)) => {
                if self.start > 0 {
                    self.buf.drain(..self.start);
                    self.start = 0;
                }
                self.buf.extend_from_slice(&chunk);
                if self.buf.len() > MAX_LINE && !self.buf.contains(&b'\n') && !self.buf.contains(&b'\r') {
                    return Err(LlmError::protocol(self.provider, "event stream line longer than 16 MiB"));
                }
                Ok(())
            }
            Some(Err(e)) => Err(LlmError::transport(self.provider, format!("stream interrupted: {e}"))),
            None => {
                self.eof = true;
                Ok(())
            }
        }
    }

    /// The next complete line, without its terminator.
    fn take_line(&mut self) -> Result<Option<String>, LlmError> {
        let rest = &self.buf[self.start..];
        let Some(end) = rest.iter().position(|&b| b == b'\n' || b == b'\r') else { return Ok(None) };
        let mut next = end + 1;
        if rest[end] == b'\r' {
            match rest.get(end + 1) {
                Some(b'\n') => next += 1,
                // A CR at the end of what we have may be the first half of a CRLF.
                None if !self.eof => return Ok(None),
                _ => {}
            }
        }
        let line = std::str::from_utf8(&rest[..end])
            .map_err(|_| LlmError::protocol(self.provider, "event stream is not UTF-8"))?
            .to_owned();
        self.start += next;
        Ok(Some(line))
    }

    /// Applies one line; returns the event a blank line dispatches.
    fn feed(&mut self, line: &str) -> Option<Event> {
        if line.is_empty() {
            let event = std::mem::take(&mut self.event);
            return self.data.take().map(|data| Event { event, data });
        }
        if line.starts_with(':') {
            return None;
        }
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        match field {
            "event" => self.event = value.to_owned(),
            "data" => match &mut self.data {
                Some(data) => {
                    data.push('\n');
                    data.push_str(value);
                }
                None => self.data = Some(value.to_owned()),
            },
            _ => {} // `id`, `retry` and unknown fields: nothing we use.
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(chunks: &[&[u8]]) -> Result<Vec<Event>, LlmError> {
        let chunks: Vec<Result<Bytes, String>> = chunks.iter().map(|c| Ok(Bytes::copy_from_slice(c))).collect();
        let mut reader = SseReader::new("test", futures::stream::iter(chunks));
        futures::executor::block_on(async {
            let mut out = Vec::new();
            while let Some(event) = reader.next().await? {
                out.push(event);
            }
            Ok(out)
        })
    }

    fn ev(event: &str, data: &str) -> Event {
        Event { event: event.into(), data: data.into() }
    }

    #[test]
    fn events_split_across_chunks_are_reassembled() {
        let got = events(&[b"event: a\nda", b"ta: {\"x\"", b":1}\n", b"\nevent: b\ndata: 2\n\n"]).unwrap();
        assert_eq!(got, vec![ev("a", "{\"x\":1}"), ev("b", "2")]);
    }

    #[test]
    fn multi_line_data_comments_and_crlf() {
        let got = events(&[b": keep-alive\r\ndata: one\r", b"\ndata:two\r\n\r\n", b"data: 3\r\r"]).unwrap();
        assert_eq!(got, vec![ev("", "one\ntwo"), ev("", "3")]);
    }

    #[test]
    fn utf8_split_mid_character_and_blank_lines_without_data() {
        let text = "data: é\n\n".as_bytes();
        let got = events(&[&text[..7], &text[7..], b"\n\nevent: x\n\n"]).unwrap();
        assert_eq!(got, vec![ev("", "é")]);
    }

    #[test]
    fn an_event_cut_by_the_end_of_stream_is_dropped() {
        assert_eq!(events(&[b"data: 1\n\ndata: 2\n"]).unwrap(), vec![ev("", "1")]);
    }

    #[test]
    fn invalid_utf8_is_a_protocol_error() {
        assert!(matches!(events(&[b"data: \xff\n\n"]), Err(LlmError::Protocol { .. })));
    }
}
