//! The Gateway's `sse_consumer`: one HTTP client reading a run's log (`bridge.rs`) as the
//! `text/event-stream` body, with heartbeats and the response headers.
//!
//! [`response`] is the same for the stream that starts a run and for the routes that read
//! an existing one. Heartbeats are produced here, whenever no event arrived for one
//! heartbeat interval, so scripts only say how long they stay idle.

use std::io;
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use bytes::Bytes;
use tokio_util::sync::CancellationToken;

use crate::bridge::{Item, Subscription, Tail};
use crate::sse::{END_FRAME, HEARTBEAT};
use crate::state::DisconnectGuard;

/// How long a cut waits for earlier frames to reach the socket.
const ABORT_GRACE: Duration = Duration::from_millis(20);

/// One consumer of a run's log, as `sse_consumer` serves it.
pub(crate) struct Consumer {
    /// Where it reads.
    pub sub: Subscription,
    /// Heartbeat interval (`None`: no heartbeats).
    pub heartbeat: Option<Duration>,
    /// The simulator's stop token: the body ends without `end` when it fires.
    pub stop: CancellationToken,
    /// Applies the run's `on_disconnect` when the body is dropped (see its doc).
    pub guard: DisconnectGuard,
}

impl Consumer {
    async fn next(&mut self) -> Option<Result<Bytes, io::Error>> {
        match self.sub.next(self.heartbeat, &self.stop).await? {
            Item::Frame(frame) => Some(Ok(frame)),
            Item::Gap(frame) => {
                self.guard.gap_sent();
                Some(Ok(frame))
            }
            Item::Heartbeat => Some(Ok(Bytes::from_static(HEARTBEAT.as_bytes()))),
            Item::Tail(Tail::End) => Some(Ok(Bytes::from_static(END_FRAME.as_bytes()))),
            Item::Tail(Tail::Abort) => {
                // Let hyper flush the frames already handed over: the connection should
                // drop after them, not swallow them.
                tokio::time::sleep(ABORT_GRACE).await;
                Some(Err(io::Error::new(
                    io::ErrorKind::ConnectionAborted,
                    "simulated connection drop",
                )))
            }
            // A scripted close without `end`, or the simulator stopping.
            Item::Tail(Tail::Close | Tail::Stopped) => None,
        }
    }
}

/// The streaming response of `consumer`, with `Content-Location: location` when given (the
/// route that starts a run sends it; the routes that read an existing run do not).
pub(crate) fn response(consumer: Consumer, location: Option<&str>) -> Response {
    let stream = futures_util::stream::unfold(consumer, |mut consumer| async move {
        let item = consumer.next().await?;
        Some((item, consumer))
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
    if let Some(location) = location.and_then(|l| HeaderValue::from_str(l).ok()) {
        headers.insert(header::CONTENT_LOCATION, location);
    }
    response
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use futures_util::StreamExt;

    use super::*;
    use crate::Simulator;
    use crate::bridge::RunStream;
    use crate::sse::Event;

    fn consumer(stream: &Arc<RunStream>, heartbeat: Option<Duration>) -> Consumer {
        Consumer {
            sub: stream.subscribe(None),
            heartbeat,
            stop: CancellationToken::new(),
            guard: DisconnectGuard::new(&Simulator::default(), "r"),
        }
    }

    #[tokio::test]
    async fn idle_streams_send_heartbeats_and_end_last() {
        let stream = Arc::new(RunStream::new("r", 8));
        let beat = Some(Duration::from_millis(20));
        let response = response(consumer(&stream, beat), Some("/api/threads/t/runs/r"));
        assert_eq!(
            response.headers()["content-location"],
            "/api/threads/t/runs/r"
        );
        let mut body = response.into_body().into_data_stream();
        let Event(buf) = Event::frame_json("metadata", "{}");
        stream.publish(buf);
        let first = body.next().await.unwrap().unwrap();
        assert!(first.starts_with(b"event: metadata\ndata: {}\nid: "));
        assert!(first.ends_with(b"-0\n\n"));
        // Nothing for one interval: a heartbeat.
        let beat = body.next().await.unwrap().unwrap();
        assert_eq!(&beat[..], HEARTBEAT.as_bytes());
        stream.finish(Tail::End);
        assert_eq!(
            &body.next().await.unwrap().unwrap()[..],
            END_FRAME.as_bytes()
        );
        assert!(body.next().await.is_none());
    }

    #[tokio::test]
    async fn abort_fails_the_body_and_close_ends_it_without_end() {
        let stream = Arc::new(RunStream::new("r", 8));
        let response = response(consumer(&stream, None), None);
        assert!(response.headers().get("content-location").is_none());
        let mut body = response.into_body().into_data_stream();
        stream.finish(Tail::Abort);
        assert!(body.next().await.unwrap().is_err());
        let closed = Arc::new(RunStream::new("r", 8));
        closed.finish(Tail::Close);
        let mut body = response_body(&closed);
        assert!(body.next().await.is_none());
    }

    fn response_body(stream: &Arc<RunStream>) -> axum::body::BodyDataStream {
        response(consumer(stream, None), None)
            .into_body()
            .into_data_stream()
    }
}
