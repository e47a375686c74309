//! An incremental Server-Sent Events parser for the Gateway's `/runs/stream` body.
//!
//! Written by hand rather than taken from `eventsource-stream` because this one works on
//! bytes: a chunk may end anywhere (inside a multi-byte UTF-8 character, between `\r` and
//! `\n`) and nothing is decoded until a whole frame is in, so no boundary can corrupt text.
//! It accepts `\n`, `\r\n` and bare `\r` line ends, skips comments (the Gateway's
//! `: heartbeat`), joins multi-line `data:` with `\n`, ignores unknown fields, and at end of
//! input dispatches a last frame that lacks its blank line. It never panics on input.
//!
//! Hot path: one scan per byte, no allocation per line; per frame, one `Vec` for the data
//! (moved, not copied, into the frame) and none for the common event names.
//!
//! Usage: [`SseParser::push`] each chunk, then drain [`SseParser::next_frame`] until it gives
//! `None`; at end of input call [`SseParser::finish`] and drain once more.

use std::borrow::Cow;

use bytes::{Buf, BytesMut};

/// Default bound on one frame (its pending line plus its data). A `values` snapshot holds a
/// thread's whole state, so this is generous; past it the stream is refused rather than
/// buffered without limit.
pub const DEFAULT_MAX_FRAME_BYTES: usize = 64 * 1024 * 1024;

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseFrame {
    /// The `event:` name; `message` when the frame had none.
    pub event: Cow<'static, str>,
    /// The `data:` lines joined with `\n`.
    pub data: String,
    /// The frame's `id:`, when it had one.
    pub id: Option<String>,
}

/// The stream broke a parser bound.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SseError {
    /// A frame or line grew past the configured bound.
    #[error("SSE frame exceeds {limit} bytes.")]
    FrameTooLarge {
        /// The bound in bytes.
        limit: usize,
    },
}

/// Incremental SSE parser. See the module docs for the protocol it accepts.
#[derive(Debug)]
pub struct SseParser {
    /// Unconsumed input.
    buf: BytesMut,
    /// `buf[..scanned]` is known to hold no line terminator (saves rescanning long lines
    /// that arrive a byte at a time).
    scanned: usize,
    /// The last line ended with `\r`; a `\n` at the start of the next input belongs to it.
    skip_lf: bool,
    /// A leading byte-order mark has not been ruled out yet.
    at_start: bool,
    /// No more input will come: the tail is a last line and a pending frame is dispatched.
    eof: bool,
    frame: FrameBuilder,
    max_frame_bytes: usize,
}

#[derive(Debug, Default)]
struct FrameBuilder {
    event: Vec<u8>,
    data: Vec<u8>,
    has_data: bool,
    id: Option<Vec<u8>>,
    /// Capacity hint for the next frame's data buffer.
    last_data_len: usize,
}

const BOM: &[u8] = b"\xEF\xBB\xBF";

impl Default for SseParser {
    fn default() -> Self {
        Self::new()
    }
}

impl SseParser {
    /// A parser bounded by [`DEFAULT_MAX_FRAME_BYTES`].
    pub fn new() -> Self {
        Self::with_max_frame_bytes(DEFAULT_MAX_FRAME_BYTES)
    }

    /// A parser refusing frames (or lines) larger than `limit` bytes.
    pub fn with_max_frame_bytes(limit: usize) -> Self {
        Self {
            buf: BytesMut::with_capacity(16 * 1024),
            scanned: 0,
            skip_lf: false,
            at_start: true,
            eof: false,
            frame: FrameBuilder::default(),
            max_frame_bytes: limit,
        }
    }

    /// Appends a chunk of the body.
    pub fn push(&mut self, chunk: &[u8]) {
        self.buf.extend_from_slice(chunk);
    }

    /// Marks the end of input: the unterminated tail becomes a last line, and a pending
    /// frame without its closing blank line is dispatched by the next [`Self::next_frame`].
    pub fn finish(&mut self) {
        self.eof = true;
    }

    /// The next complete frame, or `None` until more input (or [`Self::finish`]) arrives.
    pub fn next_frame(&mut self) -> Result<Option<SseFrame>, SseError> {
        loop {
            if self.skip_lf {
                match self.buf.first() {
                    None if !self.eof => return Ok(None),
                    Some(b'\n') => self.buf.advance(1),
                    _ => {}
                }
                self.skip_lf = false;
            }
            if self.at_start {
                let n = self.buf.len().min(BOM.len());
                if self.buf[..n] != BOM[..n] {
                    self.at_start = false;
                } else if n == BOM.len() {
                    self.buf.advance(n);
                    self.at_start = false;
                } else if !self.eof {
                    return Ok(None);
                } else {
                    self.at_start = false;
                }
            }
            // A vectorised search: data lines are long (a `values` snapshot is one line).
            let found = memchr::memchr2(b'\n', b'\r', &self.buf[self.scanned..]);
            let dispatch = match found {
                Some(offset) => {
                    let end = self.scanned + offset;
                    let terminator = self.buf[end];
                    let dispatch = self.frame.line(&self.buf[..end], self.max_frame_bytes)?;
                    self.buf.advance(end + 1);
                    self.scanned = 0;
                    if terminator == b'\r' {
                        if self.buf.first() == Some(&b'\n') {
                            self.buf.advance(1);
                        } else {
                            self.skip_lf = self.buf.is_empty();
                        }
                    }
                    dispatch
                }
                None if self.eof => {
                    if !self.buf.is_empty() {
                        let tail = self.buf.split();
                        self.scanned = 0;
                        if self.frame.line(&tail, self.max_frame_bytes)?
                            && let Some(frame) = self.frame.take()
                        {
                            return Ok(Some(frame));
                        }
                    }
                    // A frame missing its closing blank line.
                    return Ok(self.frame.take());
                }
                None => {
                    self.scanned = self.buf.len();
                    if self.buf.len() + self.frame.data.len() > self.max_frame_bytes {
                        return Err(SseError::FrameTooLarge {
                            limit: self.max_frame_bytes,
                        });
                    }
                    return Ok(None);
                }
            };
            if dispatch && let Some(frame) = self.frame.take() {
                return Ok(Some(frame));
            }
        }
    }
}

impl FrameBuilder {
    /// Applies one line (without its terminator). Returns whether it was the blank line
    /// that dispatches the frame.
    fn line(&mut self, line: &[u8], limit: usize) -> Result<bool, SseError> {
        if line.is_empty() {
            return Ok(true);
        }
        if line[0] == b':' {
            return Ok(false); // comment, e.g. `: heartbeat`
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &b""[..]),
        };
        match field {
            b"data" => {
                if self.data.len() + value.len() + 1 > limit {
                    return Err(SseError::FrameTooLarge { limit });
                }
                if self.has_data {
                    self.data.push(b'\n');
                } else if self.data.capacity() == 0 {
                    self.data.reserve(self.last_data_len.max(value.len()));
                }
                self.data.extend_from_slice(value);
                self.has_data = true;
            }
            b"event" => {
                self.event.clear();
                self.event.extend_from_slice(value);
            }
            b"id" => {
                if !value.contains(&0) {
                    self.id = Some(value.to_vec());
                }
            }
            b"retry" => {}
            _ => tracing::debug!(line_len = line.len(), "Skipping an unknown SSE line."),
        }
        Ok(false)
    }

    /// Takes the pending frame, if it has anything to dispatch, and resets for the next one.
    fn take(&mut self) -> Option<SseFrame> {
        let has_data = std::mem::take(&mut self.has_data);
        let id = self.id.take();
        if !has_data && self.event.is_empty() {
            return None;
        }
        let event = event_name(&self.event);
        self.event.clear();
        let data = std::mem::take(&mut self.data);
        self.last_data_len = data.len().min(1024 * 1024);
        let data = match String::from_utf8(data) {
            Ok(data) => data,
            Err(_) => {
                tracing::debug!(event = %event, "Skipping an SSE frame whose data is not UTF-8.");
                return None;
            }
        };
        let id = id.map(|id| String::from_utf8_lossy(&id).into_owned());
        Some(SseFrame { event, data, id })
    }
}

/// The event name, without allocating for the names the Gateway sends on every frame.
fn event_name(raw: &[u8]) -> Cow<'static, str> {
    match raw {
        b"" | b"message" => Cow::Borrowed("message"),
        b"messages" => Cow::Borrowed("messages"),
        b"messages-tuple" => Cow::Borrowed("messages-tuple"),
        b"values" => Cow::Borrowed("values"),
        b"metadata" => Cow::Borrowed("metadata"),
        b"error" => Cow::Borrowed("error"),
        b"end" => Cow::Borrowed("end"),
        other => Cow::Owned(String::from_utf8_lossy(other).into_owned()),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A realistic run: metadata, `messages` chunks with non-ASCII text (CJK, emoji),
    /// a heartbeat, `values`, `error`, `end`, with ids on the data frames.
    pub(crate) const SAMPLE: &str = concat!(
        ": heartbeat\n\n",
        "event: metadata\ndata: {\"run_id\":\"r1\",\"thread_id\":\"t1\"}\nid: 1766000000000-0\n\n",
        "event: messages\ndata: [{\"content\":\"Hé\",\"type\":\"AIMessageChunk\",\"id\":\"lc_run--a\"},{\"langgraph_node\":\"model\"}]\nid: 1766000000000-1\n\n",
        "event: messages\ndata: [{\"content\":\"你好，世界\",\"type\":\"AIMessageChunk\",\"id\":\"lc_run--a\"},{}]\nid: 1766000000000-2\n\n",
        ": heartbeat\n\n",
        "event: messages\ndata: [{\"content\":\"🦌🚀 ok\",\"type\":\"AIMessageChunk\",\"id\":\"lc_run--a\"},{}]\nid: 1766000000000-3\n\n",
        "event: values\ndata: {\"messages\":[{\"type\":\"ai\",\"content\":\"Hé你好，世界🦌🚀 ok\"}],\"title\":\"Grüße\"}\nid: 1766000000000-4\n\n",
        "event: error\ndata: {\"message\":\"boom ünïcode\",\"name\":\"ValueError\"}\nid: 1766000000000-5\n\n",
        "event: end\ndata: null\n\n",
    );

    pub(crate) fn parse_chunks<'a>(chunks: impl IntoIterator<Item = &'a [u8]>) -> Vec<SseFrame> {
        let mut parser = SseParser::new();
        let mut out = Vec::new();
        for chunk in chunks {
            parser.push(chunk);
            while let Some(frame) = parser.next_frame().unwrap() {
                out.push(frame);
            }
        }
        parser.finish();
        while let Some(frame) = parser.next_frame().unwrap() {
            out.push(frame);
        }
        out
    }

    fn names(frames: &[SseFrame]) -> Vec<&str> {
        frames.iter().map(|f| f.event.as_ref()).collect()
    }

    #[test]
    fn parses_the_sample_whole() {
        let frames = parse_chunks([SAMPLE.as_bytes()]);
        assert_eq!(
            names(&frames),
            [
                "metadata", "messages", "messages", "messages", "values", "error", "end"
            ]
        );
        assert_eq!(frames[0].data, r#"{"run_id":"r1","thread_id":"t1"}"#);
        assert_eq!(frames[0].id.as_deref(), Some("1766000000000-0"));
        assert!(frames[2].data.contains("你好，世界"));
        assert!(frames[3].data.contains("🦌🚀"));
        assert_eq!(frames[6].data, "null");
        assert_eq!(frames[6].id, None);
    }

    #[test]
    fn every_two_piece_split_gives_the_same_frames() {
        let bytes = SAMPLE.as_bytes();
        let whole = parse_chunks([bytes]);
        for cut in 0..=bytes.len() {
            let (a, b) = bytes.split_at(cut);
            assert_eq!(parse_chunks([a, b]), whole, "split at byte {cut}");
        }
    }

    #[test]
    fn one_byte_at_a_time_gives_the_same_frames() {
        let bytes = SAMPLE.as_bytes();
        let whole = parse_chunks([bytes]);
        assert_eq!(parse_chunks(bytes.chunks(1)), whole);
        assert_eq!(parse_chunks(bytes.chunks(7)), whole);
    }

    #[test]
    fn crlf_and_bare_cr_line_ends_match_lf() {
        let lf = parse_chunks([SAMPLE.as_bytes()]);
        let crlf = SAMPLE.replace('\n', "\r\n");
        let cr = SAMPLE.replace('\n', "\r");
        for variant in [crlf, cr] {
            let bytes = variant.as_bytes();
            assert_eq!(parse_chunks([bytes]), lf);
            assert_eq!(parse_chunks(bytes.chunks(1)), lf);
            for cut in 0..=bytes.len() {
                let (a, b) = bytes.split_at(cut);
                assert_eq!(parse_chunks([a, b]), lf, "split at byte {cut}");
            }
        }
    }

    #[test]
    fn multi_line_data_joins_with_newline() {
        let frames = parse_chunks([b"event: values\ndata: {\"a\":\ndata:1}\ndata\n\n".as_slice()]);
        assert_eq!(frames.len(), 1);
        assert_eq!(frames[0].data, "{\"a\":\n1}\n");
    }

    #[test]
    fn garbage_lines_are_skipped() {
        let input =
            b"what is this\nevent: end\n\xff\xfe garbage\nretry: 10\nx-extra: 1\ndata: null\n\n";
        let frames = parse_chunks([input.as_slice()]);
        assert_eq!(frames.len(), 1);
        assert_eq!(frames[0].event, "end");
        assert_eq!(frames[0].data, "null");
        // Invalid UTF-8 inside data drops that frame only.
        let input = b"event: values\ndata: \xff\n\nevent: end\ndata: null\n\n";
        assert_eq!(names(&parse_chunks([input.as_slice()])), ["end"]);
        // A field without space after the colon, and a frame without an event name.
        let frames = parse_chunks([b"data:x\n\n".as_slice()]);
        assert_eq!(
            (frames[0].event.as_ref(), frames[0].data.as_str()),
            ("message", "x")
        );
    }

    #[test]
    fn missing_trailing_blank_line_at_eof_still_dispatches() {
        for input in [
            "event: end\ndata: null\n",
            "event: end\ndata: null",
            "event: end\r\ndata: null\r",
        ] {
            let frames = parse_chunks([input.as_bytes()]);
            assert_eq!(names(&frames), ["end"], "{input:?}");
            assert_eq!(frames[0].data, "null");
        }
        // Comments alone dispatch nothing.
        assert!(parse_chunks([b": heartbeat\n\n: heartbeat".as_slice()]).is_empty());
    }

    #[test]
    fn leading_bom_is_ignored_even_when_split() {
        let input = b"\xEF\xBB\xBFevent: end\ndata: null\n\n";
        for cut in 0..input.len() {
            let (a, b) = input.split_at(cut);
            assert_eq!(names(&parse_chunks([a, b])), ["end"], "split at {cut}");
        }
    }

    #[test]
    fn oversized_frames_are_refused() {
        let mut parser = SseParser::with_max_frame_bytes(64);
        parser.push(b"event: values\n");
        parser.push(&[b'x'; 100]);
        assert_eq!(
            parser.next_frame(),
            Err(SseError::FrameTooLarge { limit: 64 })
        );
        let mut parser = SseParser::with_max_frame_bytes(64);
        for _ in 0..10 {
            parser.push(b"data: 0123456789\n");
        }
        assert_eq!(
            parser.next_frame(),
            Err(SseError::FrameTooLarge { limit: 64 })
        );
    }
}
