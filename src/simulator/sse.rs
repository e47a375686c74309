//! The SSE encoder of `spec/gateway.md` §3.3: frames, ids, the `end` frame, heartbeats and
//! the response headers.
//!
//! A run's executor sends [`Event`]s into a bounded channel; [`response`] turns the receiving
//! end into the `text/event-stream` body. Heartbeats are produced here, whenever no event
//! arrived for one heartbeat interval, so scripts only say how long they stay idle.
//!
//! A frame travels as one buffer: the executor writes its `event:` and `data:` lines (the
//! data serialized straight into it), the body appends the `id:` line and hands the buffer
//! to hyper without copying. Under load this is most of what the simulator does.

use std::io;
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use bytes::Bytes;
use tokio::sync::mpsc;

use super::wire;

/// Capacity of a run's event channel: the executor waits when the client reads slowly.
pub(crate) const EVENT_BUFFER: usize = 32;

/// How long a cut waits for earlier frames to reach the socket.
const ABORT_GRACE: Duration = Duration::from_millis(20);

/// What a run's executor asks the stream to do.
#[derive(Debug)]
pub(crate) enum Event {
    /// `event: <name>` / `data: <json>` / `id: <ms>-<seq>`: the buffer holds the first two
    /// lines (see [`Event::frame`]); the stream adds the id.
    Frame(Vec<u8>),
    /// `event: end` / `data: null`, then the body ends.
    End,
    /// Cut the connection (the body fails).
    Abort,
    /// End the body cleanly without `end`.
    Close,
}

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
        Self::Frame(buf)
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

struct BodyState {
    rx: mpsc::Receiver<Event>,
    heartbeat: Option<Duration>,
    seq: u64,
    done: bool,
}

impl BodyState {
    async fn next(&mut self) -> Option<Result<Bytes, io::Error>> {
        if self.done {
            return None;
        }
        let event = match self.heartbeat {
            Some(every) => match tokio::time::timeout(every, self.rx.recv()).await {
                Ok(event) => event,
                Err(_) => return Some(Ok(Bytes::from_static(HEARTBEAT.as_bytes()))),
            },
            None => self.rx.recv().await,
        };
        match event {
            Some(Event::Frame(buf)) => {
                let id = format!("{}-{}", wire::unix_millis(), self.seq);
                self.seq += 1;
                Some(Ok(Bytes::from(finish_frame(buf, Some(&id)))))
            }
            Some(Event::End) => {
                self.done = true;
                Some(Ok(Bytes::from_static(END_FRAME.as_bytes())))
            }
            Some(Event::Abort) => {
                self.done = true;
                // Let hyper flush the frames already handed over: the connection should
                // drop after them, not swallow them.
                tokio::time::sleep(ABORT_GRACE).await;
                Some(Err(io::Error::new(
                    io::ErrorKind::ConnectionAborted,
                    "simulated connection drop",
                )))
            }
            // The executor stopped without `end` (scripted, or the simulator shut down).
            Some(Event::Close) | None => None,
        }
    }
}

/// The streaming response for run `run_id` on `thread_id`. A zero `heartbeat` disables
/// heartbeats.
pub(crate) fn response(
    rx: mpsc::Receiver<Event>,
    heartbeat: Duration,
    thread_id: &str,
    run_id: &str,
) -> Response {
    let state = BodyState {
        rx,
        heartbeat: (!heartbeat.is_zero()).then_some(heartbeat),
        seq: 0,
        done: false,
    };
    let stream = futures_util::stream::unfold(state, |mut state| async move {
        let item = state.next().await?;
        Some((item, state))
    });
    let mut response = Response::new(Body::from_stream(stream));
    *response.status_mut() = StatusCode::OK;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream; charset=utf-8"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(header::CONNECTION, HeaderValue::from_static("keep-alive"));
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    if let Ok(location) = HeaderValue::from_str(&format!("/api/threads/{thread_id}/runs/{run_id}"))
    {
        headers.insert(header::CONTENT_LOCATION, location);
    }
    response
}

#[cfg(test)]
mod tests {
    use futures_util::StreamExt;
    use serde_json::json;

    use super::*;

    fn encode(event: Event, id: Option<&str>) -> String {
        let Event::Frame(buf) = event else {
            panic!("not a frame")
        };
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

    #[tokio::test]
    async fn idle_streams_send_heartbeats_and_end_last() {
        let (tx, rx) = mpsc::channel(4);
        let response = response(rx, Duration::from_millis(20), "t", "r");
        assert_eq!(
            response.headers()["content-location"],
            "/api/threads/t/runs/r"
        );
        let mut body = response.into_body().into_data_stream();
        tx.send(Event::frame_json("metadata", "{}")).await.unwrap();
        let first = body.next().await.unwrap().unwrap();
        assert!(first.starts_with(b"event: metadata\ndata: {}\nid: "));
        assert!(first.ends_with(b"-0\n\n"));
        // Nothing for one interval: a heartbeat.
        let beat = body.next().await.unwrap().unwrap();
        assert_eq!(&beat[..], HEARTBEAT.as_bytes());
        tx.send(Event::End).await.unwrap();
        assert_eq!(
            &body.next().await.unwrap().unwrap()[..],
            END_FRAME.as_bytes()
        );
        assert!(body.next().await.is_none());
    }

    #[tokio::test]
    async fn abort_fails_the_body() {
        let (tx, rx) = mpsc::channel(4);
        let mut body = response(rx, Duration::ZERO, "t", "r")
            .into_body()
            .into_data_stream();
        tx.send(Event::Abort).await.unwrap();
        assert!(body.next().await.unwrap().is_err());
    }
}
