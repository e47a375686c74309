//! Runs (gateway.md §3): the request body, `/runs/stream` as a [`RunStream`] of
//! [`RunEvent`]s, `/runs/wait` and `/runs`.
//!
//! The Gateway's run model forbids unknown keys (422), so each call serializes exactly the
//! keys the LangGraph SDK puts on the wire for it (§3.2), never `durability` and the like,
//! plus `on_disconnect: "continue"` on the calls that hold a connection open (issue 19): a
//! run outlives a bridge that stopped or crashed, and recovery follows it by id
//! ([`GatewayClient::get_run`], [`GatewayClient::join_run`]); `/stop` cancels through the
//! cancel route instead of by hanging up. Busy (409, or the LangGraph Platform's `already running a
//! task`) always arrives before any event, as `Err(GatewayError::Busy)` from the call
//! itself; a started stream never reports busy.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures_util::Stream;

use reqwest::Method;
use reqwest::header::{ACCEPT, CONTENT_LOCATION, CONTENT_TYPE};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::task::JoinHandle;
use tokio::time::{Instant, Sleep};

use percent_encoding::utf8_percent_encode;

use super::client::{Base, GatewayClient, Owner, SEGMENT, read_json};
use super::error::{CallFamily, GatewayError};
use super::event::RunEvent;
use super::sse::SseParser;

use crate::gateway::ThreadId;

/// One run's parameters. `config` and `context` are the maps the manager resolved
/// (manager.md §6); they are sent as given.
#[derive(Debug, Clone, PartialEq)]
pub struct RunRequest {
    /// Always `lead_agent` on the wire today; a custom agent goes in `context.agent_name`.
    pub assistant_id: String,
    /// The single human message of `input.messages`.
    pub message: HumanMessage,
    /// `config` (`recursion_limit`, `configurable`).
    pub config: Value,
    /// `context` (flags and identity keys).
    pub context: Value,
    /// Run `metadata` (e.g. `deerflow_origin`); the key is omitted when `None`.
    pub metadata: Option<Value>,
}

/// `{"role": "human", "content": …, "additional_kwargs"?: …}`.
#[derive(Debug, Clone, PartialEq)]
pub struct HumanMessage {
    /// The text.
    pub content: String,
    /// `original_user_content`, `files`; the key is omitted when `None`.
    pub additional_kwargs: Option<Value>,
}

impl RunRequest {
    /// A `lead_agent` run of `content` with empty `config` and `context` maps.
    pub fn new(content: impl Into<String>) -> Self {
        Self {
            assistant_id: "lead_agent".to_owned(),
            message: HumanMessage {
                content: content.into(),
                additional_kwargs: None,
            },
            config: Value::Object(Default::default()),
            context: Value::Object(Default::default()),
            metadata: None,
        }
    }

    /// The JSON body for `mode`, with exactly the keys §3.2 lists for it.
    pub fn body(&self, mode: RunMode) -> Value {
        serde_json::to_value(self.wire(mode)).unwrap_or(Value::Null)
    }

    /// The body as sent, borrowing from `self` (no copy of `config`/`context`).
    fn wire(&self, mode: RunMode) -> RunBody<'_> {
        let on_disconnect = match mode {
            RunMode::Stream | RunMode::Wait => Some("continue"),
            RunMode::Create => None,
        };
        let (stream_mode, stream_flags) = match mode {
            RunMode::Stream => (
                Some(StreamMode::Many(&["messages-tuple", "values"])),
                Some(false),
            ),
            RunMode::Wait => (None, None),
            RunMode::Create => (Some(StreamMode::One("values")), Some(false)),
        };
        RunBody {
            assistant_id: &self.assistant_id,
            input: Input {
                messages: [WireMessage {
                    role: "human",
                    content: &self.message.content,
                    additional_kwargs: self.message.additional_kwargs.as_ref(),
                }],
            },
            config: &self.config,
            context: &self.context,
            metadata: self.metadata.as_ref(),
            stream_mode,
            stream_subgraphs: stream_flags,
            stream_resumable: stream_flags,
            on_disconnect,
            multitask_strategy: "reject",
        }
    }
}

/// A run's status (LangGraph's `Run.status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Accepted, not started.
    Pending,
    /// Running.
    Running,
    /// Finished.
    Success,
    /// Failed.
    Error,
    /// Ran out of time.
    Timeout,
    /// Stopped on request.
    Interrupted,
    /// A status this build does not know: treated as ended.
    #[serde(other)]
    Unknown,
}

impl RunStatus {
    /// Whether the run may still write.
    pub fn is_active(self) -> bool {
        matches!(self, Self::Pending | Self::Running)
    }
}

/// Which run call a body is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunMode {
    /// `POST …/runs/stream`.
    Stream,
    /// `POST …/runs/wait`.
    Wait,
    /// `POST …/runs`.
    Create,
}

#[derive(Serialize)]
struct RunBody<'a> {
    assistant_id: &'a str,
    input: Input<'a>,
    config: &'a Value,
    context: &'a Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    metadata: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_mode: Option<StreamMode>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_subgraphs: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_resumable: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    on_disconnect: Option<&'static str>,
    multitask_strategy: &'static str,
}

#[derive(Serialize)]
struct Input<'a> {
    messages: [WireMessage<'a>; 1],
}

#[derive(Serialize)]
struct WireMessage<'a> {
    role: &'static str,
    content: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    additional_kwargs: Option<&'a Value>,
}

#[derive(Serialize)]
#[serde(untagged)]
enum StreamMode {
    Many(&'static [&'static str]),
    One(&'static str),
}

impl GatewayClient {
    /// `POST {langgraph_url}/threads/{id}/runs/stream`. Resolves once the response headers
    /// arrive (bounded by the idle timeout); busy and other refusals are errors here.
    /// Dropping the returned stream closes the connection, which cancels the run.
    pub async fn stream_run(
        &self,
        owner: Option<&Owner>,
        thread: &ThreadId,
        run: &RunRequest,
    ) -> Result<RunStream, GatewayError> {
        let url = self.thread_url(Base::LangGraph, thread, "/runs/stream")?;
        let request = self
            .request(Method::POST, &url, owner)?
            .json(&run.wire(RunMode::Stream));
        let response = self
            .open_event_stream("stream_run", CallFamily::Run, request)
            .await?;
        let run_id = response
            .headers()
            .get(CONTENT_LOCATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.rsplit_once("/runs/"))
            .map(|(_, id)| id.trim_end_matches('/').to_owned())
            .filter(|id| !id.is_empty() && !id.contains('/'));
        Ok(RunStream::new(
            Box::pin(response.bytes_stream()),
            self.config().stream_idle_timeout,
            run_id,
        ))
    }

    /// Sends a request answered by an event stream: resolves once the response headers
    /// arrive (bounded by the idle timeout), refusing a 2xx that is not `text/event-stream`.
    async fn open_event_stream(
        &self,
        call: &'static str,
        family: CallFamily,
        request: reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, GatewayError> {
        let request = request.header(ACCEPT, "text/event-stream");
        let idle = self.config().stream_idle_timeout;
        let response = tokio::time::timeout(idle, self.send(call, family, request))
            .await
            .map_err(|_| GatewayError::Timeout)??;
        let is_event_stream = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| {
                v.trim_start()
                    .to_ascii_lowercase()
                    .starts_with("text/event-stream")
            });
        if !is_event_stream {
            tracing::debug!(call, "Run stream response is not an event stream.");
            return Err(GatewayError::Decode {
                what: "run stream content type",
            });
        }
        Ok(response)
    }

    /// `POST {langgraph_url}/threads/{id}/runs/wait`: the final values dict (or the
    /// `{"status", "error"}` body when the run left no checkpoint), bounded by the wait
    /// timeout.
    pub async fn wait_run(
        &self,
        owner: Option<&Owner>,
        thread: &ThreadId,
        run: &RunRequest,
    ) -> Result<Value, GatewayError> {
        let url = self.thread_url(Base::LangGraph, thread, "/runs/wait")?;
        let request = self
            .request(Method::POST, &url, owner)?
            .timeout(self.config().wait_timeout)
            .json(&run.wire(RunMode::Wait));
        let response = self.send("wait_run", CallFamily::Run, request).await?;
        read_json(response, "wait_run").await
    }

    /// `POST {langgraph_url}/threads/{id}/runs`: starts a run in the background and returns
    /// its id once it is pending.
    pub async fn create_run(
        &self,
        owner: Option<&Owner>,
        thread: &ThreadId,
        run: &RunRequest,
    ) -> Result<String, GatewayError> {
        #[derive(Deserialize)]
        struct Created {
            run_id: String,
        }
        let url = self.thread_url(Base::LangGraph, thread, "/runs")?;
        let request = self
            .request(Method::POST, &url, owner)?
            .timeout(self.config().request_timeout)
            .json(&run.wire(RunMode::Create));
        let response = self.send("create_run", CallFamily::Run, request).await?;
        Ok(read_json::<Created>(response, "create_run").await?.run_id)
    }

    /// `GET {langgraph_url}/threads/{id}/runs/{run_id}`: the run's status. An unknown run
    /// (the Gateway restarted and forgot it) is [`GatewayError::NotFound`].
    pub async fn get_run(
        &self,
        owner: Option<&Owner>,
        thread: &ThreadId,
        run_id: &str,
    ) -> Result<RunStatus, GatewayError> {
        #[derive(Deserialize)]
        struct Run {
            status: RunStatus,
        }
        let url = self.run_url(thread, run_id, "")?;
        let request = self
            .request(Method::GET, &url, owner)?
            .timeout(self.config().request_timeout);
        let response = self.send("get_run", CallFamily::Plain, request).await?;
        Ok(read_json::<Run>(response, "get_run").await?.status)
    }

    /// `GET {langgraph_url}/threads/{id}/runs/{run_id}/join`: the run's events as a
    /// [`RunStream`], exactly like `/runs/stream` (DeerFlow's `join_run` serves the same
    /// `sse_consumer`): the retained events from the start, or those after `last_event_id`
    /// when given (`Last-Event-ID`), then the live ones, then `end`. A run that ended and
    /// whose events are gone yields `end` alone; one whose requested event is no longer
    /// retained yields [`RunEvent::Gap`]. The Gateway answers 409 ([`GatewayError::Conflict`])
    /// when the run lives on another worker it cannot stream from, and 404
    /// ([`GatewayError::NotFound`]) when it does not know the run.
    ///
    /// Dropping the stream only stops following: runs are started with
    /// `on_disconnect: "continue"`, and a join never cancels (the Gateway applies
    /// `on_disconnect` to the connection that started the run, not to a joiner's).
    pub async fn join_run(
        &self,
        owner: Option<&Owner>,
        thread: &ThreadId,
        run_id: &str,
        last_event_id: Option<&str>,
    ) -> Result<RunStream, GatewayError> {
        let url = self.run_url(thread, run_id, "/join")?;
        let mut request = self.request(Method::GET, &url, owner)?;
        if let Some(id) = last_event_id {
            let value = reqwest::header::HeaderValue::from_str(id)
                .map_err(|_| GatewayError::InvalidArgument { what: "event id" })?;
            request = request.header("last-event-id", value);
        }
        let response = self
            .open_event_stream("join_run", CallFamily::Plain, request)
            .await?;
        Ok(RunStream::new(
            Box::pin(response.bytes_stream()),
            self.config().stream_idle_timeout,
            Some(run_id.to_owned()),
        ))
    }

    /// `{langgraph_url}/threads/{id}/runs/{run_id}{rest}`.
    fn run_url(&self, thread: &ThreadId, run_id: &str, rest: &str) -> Result<String, GatewayError> {
        // `.`/`..` would be folded away by URL normalization and address another route.
        if run_id.is_empty() || run_id.bytes().all(|b| b == b'.') {
            return Err(GatewayError::InvalidArgument { what: "run id" });
        }
        let rest = format!("/runs/{}{rest}", utf8_percent_encode(run_id, SEGMENT));
        self.thread_url(Base::LangGraph, thread, &rest)
    }

    /// `POST {langgraph_url}/threads/{id}/runs/{run_id}/cancel?action=interrupt` (DeerFlow's
    /// runs router): asks the Gateway to stop a run in flight, keeping what it wrote so far.
    /// Returns once the Gateway accepted the request; the run's stream then ends. A run that
    /// already finished is [`GatewayError::Conflict`]; an unknown one
    /// [`GatewayError::NotFound`].
    pub async fn cancel_run(
        &self,
        owner: Option<&Owner>,
        thread: &ThreadId,
        run_id: &str,
    ) -> Result<(), GatewayError> {
        let url = self.run_url(thread, run_id, "/cancel?action=interrupt")?;
        let request = self
            .request(Method::POST, &url, owner)?
            .timeout(self.config().request_timeout);
        self.send("cancel_run", CallFamily::Plain, request).await?;
        Ok(())
    }
}

type Body = Pin<Box<dyn Stream<Item = reqwest::Result<Bytes>> + Send>>;

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
/// or not) before `end`, `Timeout` after [`super::GatewayConfig::stream_idle_timeout`] of
/// silence (heartbeats count as activity), `Decode` when a frame breaks the parser's size
/// bound. Use it as a `Stream` or through [`RunStream::next`]; both are cancel-safe.
///
/// A frame of [`OFFLOAD_FRAME_BYTES`] or more (a `values` snapshot of a long thread) is
/// decoded on tokio's blocking pool, so its milliseconds of decoding never stall the other
/// tasks of a runtime worker.
pub struct RunStream {
    body: Body,
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
    fn new(body: Body, idle: Duration, run_id: Option<String>) -> Self {
        let now = Instant::now();
        Self {
            body,
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
            match this.body.as_mut().poll_next(cx) {
                Poll::Ready(Some(Ok(chunk))) => {
                    this.parser.push(&chunk);
                    this.last_activity = Instant::now();
                }
                Poll::Ready(Some(Err(error))) => {
                    let error = error.without_url();
                    tracing::debug!(%error, run_id = ?this.run_id, "Run stream connection failed.");
                    return this.finish(GatewayError::StreamClosed);
                }
                Poll::Ready(None) => {
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
    use serde_json::json;

    use super::*;

    fn keys(body: &Value) -> Vec<&str> {
        let mut keys: Vec<&str> = body
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        keys.sort_unstable();
        keys
    }

    #[test]
    fn bodies_have_exactly_the_section_3_2_keys() {
        let run = RunRequest::new("hi");
        let stream = run.body(RunMode::Stream);
        assert_eq!(
            keys(&stream),
            [
                "assistant_id",
                "config",
                "context",
                "input",
                "multitask_strategy",
                "on_disconnect",
                "stream_mode",
                "stream_resumable",
                "stream_subgraphs"
            ]
        );
        // Issue 19: a run outlives the connection that started it.
        assert_eq!(stream["on_disconnect"], "continue");
        assert_eq!(stream["stream_mode"], json!(["messages-tuple", "values"]));
        assert_eq!(stream["stream_subgraphs"], json!(false));
        assert_eq!(stream["stream_resumable"], json!(false));
        assert_eq!(stream["multitask_strategy"], "reject");
        let wait = run.body(RunMode::Wait);
        assert_eq!(
            keys(&wait),
            [
                "assistant_id",
                "config",
                "context",
                "input",
                "multitask_strategy",
                "on_disconnect"
            ]
        );
        assert_eq!(wait["on_disconnect"], "continue");
        let create = run.body(RunMode::Create);
        assert_eq!(
            keys(&create),
            [
                "assistant_id",
                "config",
                "context",
                "input",
                "multitask_strategy",
                "stream_mode",
                "stream_resumable",
                "stream_subgraphs"
            ]
        );
        assert_eq!(create["stream_mode"], "values");
        assert_eq!(
            wait["input"],
            json!({"messages": [{"role": "human", "content": "hi"}]})
        );
    }

    /// A run stream over `chunks`, as a join's body would arrive.
    fn stream_of(chunks: &[&'static str]) -> RunStream {
        let chunks: Vec<reqwest::Result<Bytes>> = chunks
            .iter()
            .map(|c| Ok(Bytes::from_static(c.as_bytes())))
            .collect();
        RunStream::new(
            Box::pin(futures_util::stream::iter(chunks)),
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

    #[test]
    fn optional_parts_appear_only_when_set() {
        let mut run = RunRequest::new("summarise");
        run.message.additional_kwargs = Some(json!({"original_user_content": "summarise this"}));
        run.metadata =
            Some(json!({"deerflow_origin": {"kind": "im_channel", "provider": "telegram"}}));
        run.context = json!({"thinking_enabled": true, "agent_name": "coder"});
        let body = run.body(RunMode::Wait);
        assert_eq!(body["metadata"]["deerflow_origin"]["provider"], "telegram");
        assert_eq!(
            body["input"]["messages"][0]["additional_kwargs"]["original_user_content"],
            "summarise this"
        );
        assert_eq!(body["context"]["agent_name"], "coder");
        assert_eq!(body["assistant_id"], "lead_agent");
    }
}
