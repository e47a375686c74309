//! The SSE encoder of `spec/gateway.md` §3.3: frames, ids, the `end` frame and heartbeats.
//!
//! A run's executor writes [`Event`]s into the run's log (`bridge.rs`); `consumer.rs` serves
//! a subscription to that log as the `text/event-stream` body.
//!
//! A frame travels as one buffer: the executor writes its `event:` and `data:` lines (the
//! data serialized straight into it), the log appends the `id:` line, and every consumer
//! hands the same shared buffer to hyper without copying. Under load this is most of what
//! the simulator does.

/// A frame a run's executor writes into its log (its tail is set on the log itself):
/// `event: <name>` / `data: <json>` / `id: <ms>-<seq>`, of which the buffer holds the first
/// two lines (see [`Event::frame`]); the log adds the id.
#[derive(Debug)]
pub(crate) struct Event(pub Vec<u8>);

/// Room left in a frame buffer for its `id:` line and the blank line.
const ID_LINE_ROOM: usize = 40;

impl Event {
    /// A frame of `name` whose data is `write`'s output: compact single-line JSON
    /// (serde_json leaves non-ASCII as UTF-8), written straight into the frame buffer.
    /// `size_hint` is the expected data length. A failed write sends `null` as the data.
    pub(crate) fn frame(
        name: &str,
        size_hint: usize,
        write: impl FnOnce(&mut Vec<u8>) -> serde_json::Result<()>,
    ) -> Self {
        let mut buf = Vec::with_capacity(name.len() + size_hint + 16 + ID_LINE_ROOM);
        buf.extend_from_slice(b"event: ");
        buf.extend_from_slice(name.as_bytes());
        buf.extend_from_slice(b"\ndata: ");
        let start = buf.len();
        if write(&mut buf).is_err() {
            buf.truncate(start);
            buf.extend_from_slice(b"null");
        }
        buf.push(b'\n');
        Self(buf)
    }

    /// A frame of `name` with already serialized `json` as its data.
    pub(crate) fn frame_json(name: &str, json: &str) -> Self {
        Self::frame(name, json.len(), |buf| {
            buf.extend_from_slice(json.as_bytes());
            Ok(())
        })
    }
}

/// Ends a frame buffer with its `id:` line (when `id` is given) and the blank line.
pub(crate) fn finish_frame(mut buf: Vec<u8>, id: Option<&str>) -> Vec<u8> {
    if let Some(id) = id {
        buf.extend_from_slice(b"id: ");
        buf.extend_from_slice(id.as_bytes());
        buf.push(b'\n');
    }
    buf.push(b'\n');
    buf
}

/// The `end` frame.
pub(crate) const END_FRAME: &str = "event: end\ndata: null\n\n";

/// The keep-alive comment.
pub(crate) const HEARTBEAT: &str = ": heartbeat\n\n";

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn encode(event: Event, id: Option<&str>) -> String {
        let Event(buf) = event;
        String::from_utf8(finish_frame(buf, id)).unwrap()
    }

    #[test]
    fn frames_are_single_line_with_raw_utf8() {
        let value = json!({"title": "你好\nworld"});
        let frame = encode(
            Event::frame("values", 8, |buf| serde_json::to_writer(buf, &value)),
            Some("1-0"),
        );
        assert_eq!(
            frame,
            "event: values\ndata: {\"title\":\"你好\\nworld\"}\nid: 1-0\n\n"
        );
        assert_eq!(
            encode(Event::frame_json("metadata", "null"), None),
            "event: metadata\ndata: null\n\n"
        );
        let failed = Event::frame("values", 0, |buf| {
            buf.extend_from_slice(b"{partial");
            Err(serde::ser::Error::custom("boom"))
        });
        assert_eq!(encode(failed, None), "event: values\ndata: null\n\n");
    }
}
