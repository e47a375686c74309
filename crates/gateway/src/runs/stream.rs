//! [`RunStream`]: the events of one run read off an event-stream response, for
//! `/runs/stream` and `/runs/{id}/join` alike (both are DeerFlow's `sse_consumer`): the
//! incremental SSE parser, idle timeout, the last event id for a `Last-Event-ID` resume,
//! and large frames decoded off the runtime.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures_util::Stream;
use tokio::task::JoinHandle;
use tokio::time::{Instant, Sleep};

use crate::direct;
use crate::error::GatewayError;
use crate::event::RunEvent;
use crate::sse::SseParser;

pub(super) type Body = Pin<Box<dyn Stream<Item = reqwest::Result<Bytes>> + Send>>;

/// Where a run stream's bytes come from.
pub(super) enum Source {
    /// A response read through reqwest (TLS, a proxy): its connection has a task of its own.
    Pooled(Body),
    /// A plain-HTTP response read on the run's own task ([`direct`]).
    Direct(direct::Body),
}

impl Source {
    /// Feeds what arrived to `parser`: `Ok(true)` when something was fed, `Ok(false)` at
    /// the body's end. A failure is logged here, with its cause.
    fn poll_into(
        &mut self,
        cx: &mut Context<'_>,
        parser: &mut SseParser,
        run_id: Option<&str>,
    ) -> Poll<Result<bool, ()>> {
        match self {
            Self::Pooled(body) => match std::task::ready!(body.as_mut().poll_next(cx)) {
                Some(Ok(chunk)) => {
                    parser.push(&chunk);
                    Poll::Ready(Ok(true))
                }
                Some(Err(error)) => {
                    let error = error.without_url();
                    tracing::debug!(%error, ?run_id, "Run stream connection failed.");
                    Poll::Ready(Err(()))
                }
                None => Poll::Ready(Ok(false)),
            },
            Self::Direct(body) => {
                body.poll_feed(cx, &mut |data| parser.push(data))
                    .map_err(|error| {
                        tracing::debug!(%error, ?run_id, "Run stream connection failed.");
                    })
            }
        }
    }
}

/// Run stream frames at least this large are decoded on the blocking pool (see
/// [`RunStream`]); smaller ones, nearly all of them, inline.
pub const OFFLOAD_FRAME_BYTES: usize = 256 * 1024;

/// Frames decoded on the blocking pool so far (tests check the offload happens).
#[cfg(test)]
pub(crate) static OFFLOADED: std::sync::atomic::AtomicUsize =
    std::sync::atomic::AtomicUsize::new(0);

/// The events of one streamed or joined run, ending with [`RunEvent::End`] (or a joined
/// run's [`RunEvent::Gap`]) and then `None`.
///
/// It ends early with exactly one error: `StreamClosed` when the connection ends (cleanly
/// or not) before `end`, `Timeout` after [`GatewayConfig::stream_idle_timeout`](crate::GatewayConfig::stream_idle_timeout) of
/// silence (heartbeats count as activity), `Decode` when a frame breaks the parser's size
/// bound. Use it as a `Stream` or through [`RunStream::next`]; both are cancel-safe.
///
/// A frame of [`OFFLOAD_FRAME_BYTES`] or more (a `values` snapshot of a long thread) is
/// decoded on tokio's blocking pool, so its milliseconds of decoding never stall the other
/// tasks of a runtime worker.
pub struct RunStream {
    source: Source,
    parser: SseParser,
    /// A frame of at least [`OFFLOAD_FRAME_BYTES`] being decoded on the blocking pool; the
    /// stream yields nothing else (and reads no further) until it is done, so events stay
    /// in order.
    decoding: Option<JoinHandle<Option<RunEvent>>>,
    idle: Duration,
    last_activity: Instant,
    sleep: Pin<Box<Sleep>>,
    eof: bool,
    done: bool,
    run_id: Option<String>,
    /// The `id:` of the last frame read, for a `Last-Event-ID` resume.
    last_event_id: Option<String>,
}

impl std::fmt::Debug for RunStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunStream")
            .field("run_id", &self.run_id)
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}

impl RunStream {
    pub(super) fn new(source: Source, idle: Duration, run_id: Option<String>) -> Self {
        let now = Instant::now();
        Self {
            source,
            parser: SseParser::new(),
            decoding: None,
            idle,
            last_activity: now,
            sleep: Box::pin(tokio::time::sleep_until(now + idle)),
            eof: false,
            done: false,
            run_id,
            last_event_id: None,
        }
    }

    /// The run id from the `Content-Location` header, known before the first event.
    pub fn run_id(&self) -> Option<&str> {
        self.run_id.as_deref()
    }

    /// The id of the last event read so far, when the Gateway numbers its events (DeerFlow
    /// does): a join that lost its connection resumes after it.
    pub fn last_event_id(&self) -> Option<&str> {
        self.last_event_id.as_deref()
    }

    /// The next event; `None` after `end` or after the one terminal error.
    pub async fn next(&mut self) -> Option<Result<RunEvent, GatewayError>> {
        futures_util::StreamExt::next(self).await
    }

    fn finish(&mut self, error: GatewayError) -> Poll<Option<Result<RunEvent, GatewayError>>> {
        self.done = true;
        Poll::Ready(Some(Err(error)))
    }
}

impl Stream for RunStream {
    type Item = Result<RunEvent, GatewayError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            if this.done {
                return Poll::Ready(None);
            }
            if let Some(decoding) = this.decoding.as_mut() {
                let decoded = std::task::ready!(Pin::new(decoding).poll(cx));
                this.decoding = None;
                match decoded {
                    Ok(Some(event)) => {
                        this.done = event.is_last();
                        return Poll::Ready(Some(Ok(event)));
                    }
                    Ok(None) => continue,
                    Err(error) => {
                        tracing::warn!(%error, "Decoding a large run stream frame failed.");
                        return this.finish(GatewayError::Decode {
                            what: "run stream frame",
                        });
                    }
                }
            }
            let mut frame = this.parser.next_frame();
            // The id moves out of the frame (decoding does not read it): no copy per event.
            if let Ok(Some(frame)) = &mut frame
                && let Some(id) = frame.id.take()
            {
                this.last_event_id = Some(id);
            }
            match frame {
                Ok(Some(frame)) if frame.data.len() >= OFFLOAD_FRAME_BYTES => {
                    // A `values` snapshot of a long thread takes milliseconds to decode:
                    // not on a runtime worker, where it would stall every other task.
                    this.decoding = Some(tokio::task::spawn_blocking(move || {
                        #[cfg(test)]
                        OFFLOADED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        RunEvent::from_frame(&frame)
                    }));
                }
                Ok(Some(frame)) => {
                    if let Some(event) = RunEvent::from_frame(&frame) {
                        this.done = event.is_last();
                        return Poll::Ready(Some(Ok(event)));
                    }
                    continue;
                }
                Ok(None) => {}
                Err(error) => {
                    tracing::debug!(%error, "Run stream broke the frame bound.");
                    return this.finish(GatewayError::Decode {
                        what: "run stream frame",
                    });
                }
            }
            if this.eof {
                tracing::debug!(run_id = ?this.run_id, "Run stream ended before its end event.");
                return this.finish(GatewayError::StreamClosed);
            }
            match this
                .source
                .poll_into(cx, &mut this.parser, this.run_id.as_deref())
            {
                Poll::Ready(Ok(true)) => this.last_activity = Instant::now(),
                Poll::Ready(Err(())) => return this.finish(GatewayError::StreamClosed),
                Poll::Ready(Ok(false)) => {
                    this.parser.finish();
                    this.eof = true;
                }
                Poll::Pending => {
                    // The timer is moved only when it fires, not on every chunk.
                    let deadline = this.last_activity + this.idle;
                    if this.sleep.deadline() != deadline {
                        this.sleep.as_mut().reset(deadline);
                    }
                    return match this.sleep.as_mut().poll(cx) {
                        Poll::Ready(()) => {
                            tracing::debug!(run_id = ?this.run_id, "Run stream went idle.");
                            this.finish(GatewayError::Timeout)
                        }
                        Poll::Pending => Poll::Pending,
                    };
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run stream over `chunks`, as a join's body would arrive.
    fn stream_of(chunks: &[&'static str]) -> RunStream {
        let chunks: Vec<reqwest::Result<Bytes>> = chunks
            .iter()
            .map(|c| Ok(Bytes::from_static(c.as_bytes())))
            .collect();
        RunStream::new(
            Source::Pooled(Box::pin(futures_util::stream::iter(chunks))),
            Duration::from_secs(5),
            Some("r1".into()),
        )
    }

    #[tokio::test]
    async fn issue_26_a_join_remembers_the_last_event_id_and_ends_on_a_gap() {
        // DeerFlow's `sse_consumer` frames: event, data, id; heartbeats are comments.
        let mut stream = stream_of(&[
            "event: metadata\ndata: {\"run_id\": \"r1\"}\nid: 17-0\n\n",
            ": heartbeat\n\n",
            "event: values\ndata: {\"messages\": []}\nid: 17-1\n\n",
            "event: gap\ndata: {\"code\": \"stream_replay_gap\"}\n\n",
            "event: values\ndata: {}\nid: 17-9\n\n",
        ]);
        assert!(matches!(
            stream.next().await,
            Some(Ok(RunEvent::Metadata { .. }))
        ));
        assert_eq!(stream.last_event_id(), Some("17-0"));
        assert!(matches!(stream.next().await, Some(Ok(RunEvent::Values(_)))));
        assert_eq!(stream.last_event_id(), Some("17-1"));
        // The gap carries no id: the resume point stays the last event read.
        assert_eq!(stream.next().await, Some(Ok(RunEvent::Gap)));
        assert_eq!(stream.last_event_id(), Some("17-1"));
        assert_eq!(stream.next().await, None, "nothing is read after a gap");
    }

    #[tokio::test]
    async fn issue_26_a_join_cut_before_its_end_is_stream_closed() {
        let mut stream = stream_of(&["event: values\ndata: {}\nid: 3-4\n\n"]);
        assert!(matches!(stream.next().await, Some(Ok(RunEvent::Values(_)))));
        assert_eq!(stream.next().await, Some(Err(GatewayError::StreamClosed)));
        assert_eq!(stream.last_event_id(), Some("3-4"));
    }
}
