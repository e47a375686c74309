//! Runs (gateway.md §3): the request body, `/runs/stream` and `/runs/{id}/join` as a
//! [`RunStream`] of [`RunEvent`](crate::RunEvent)s (child `stream`), `/runs/wait`
//! and `/runs`; child `list`: `GET /runs`, the thread's runs with their metadata; child
//! `messages`: `GET /runs/{id}/messages`, the messages a run wrote.
//!
//! The Gateway's run model forbids unknown keys (422), so each call serializes exactly the
//! keys the LangGraph SDK puts on the wire for it (§3.2), never `durability` and the like,
//! plus `on_disconnect: "continue"` on every run call (issues 19, 26: DeerFlow applies it to
//! every reader of the run's events, joins included). A run outlives a bridge that stopped
//! or crashed, and recovery follows it by id ([`GatewayClient::get_run`],
//! [`GatewayClient::join_run`]); `/stop` cancels through the cancel route instead of by
//! hanging up. Busy (409, or the LangGraph Platform's `already running a task`) always
//! arrives before any event, as `Err(GatewayError::Busy)` from the call itself; a started
//! stream never reports busy.

use std::sync::Arc;

use percent_encoding::utf8_percent_encode;
use reqwest::Method;
use reqwest::header::{ACCEPT, CONTENT_LOCATION, CONTENT_TYPE, HeaderValue};
use serde::{Deserialize, Serialize};
use serde_json::Value;

mod list;
mod messages;
mod stream;

use stream::Source;

pub use list::RunSummary;
#[cfg(test)]
pub(crate) use stream::OFFLOADED;
pub use stream::{OFFLOAD_FRAME_BYTES, RunStream};

use crate::client::{
    Base, GatewayClient, Identity, MAX_ERROR_BYTES, Owner, SEGMENT, USER_AGENT, read_json, refused,
};
use crate::direct::{self, Direct, OpenError};
use crate::error::{CallFamily, GatewayError, TransportKind};

use crate::ThreadId;

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
        // Every mode: DeerFlow applies `on_disconnect` to every reader of the run's events,
        // joins included, so a background run without it dies with a join that drops.
        let on_disconnect = Some("continue");
        let (stream_mode, stream_flags) = match mode {
            RunMode::Stream => (
                Some(StreamMode::Many(&["messages-tuple", "values"])),
                Some(false),
            ),
            RunMode::Wait => (None, None),
            RunMode::Create => (Some(StreamMode::One("values")), Some(false)),
            RunMode::CreateWithText => (
                Some(StreamMode::Many(&["messages-tuple", "values"])),
                Some(false),
            ),
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
    /// `POST …/runs` whose events carry the answer's text as it is written too, so a join
    /// can tell what the run wrote before it ended (an answer handed off before its
    /// source's reply window closes, issue 33).
    CreateWithText,
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

/// A call answered by an event stream, before it is sent one way or the other.
struct EventCall<'a> {
    call: &'static str,
    family: CallFamily,
    method: Method,
    /// After `langgraph_url`, percent-encoded.
    path: String,
    owner: Option<&'a Owner>,
    last_event_id: Option<HeaderValue>,
    json: Option<Vec<u8>>,
}

/// An event stream's response, its head read.
struct Opened {
    content_type: Option<String>,
    content_location: Option<String>,
    source: Source,
}

impl GatewayClient {
    /// `POST {langgraph_url}/threads/{id}/runs/stream`. Resolves once the response headers
    /// arrive (bounded by the idle timeout); busy and other refusals are errors here.
    /// Dropping the returned stream closes the connection; the run goes on (every run is
    /// started with `on_disconnect: "continue"`): stop one with `cancel_run`.
    pub async fn stream_run(
        &self,
        owner: Option<&Owner>,
        thread: &ThreadId,
        run: &RunRequest,
    ) -> Result<RunStream, GatewayError> {
        let json = serde_json::to_vec(&run.wire(RunMode::Stream)).map_err(|_| {
            GatewayError::InvalidArgument {
                what: "run request",
            }
        })?;
        let opened = self
            .open_event_stream(EventCall {
                call: "stream_run",
                family: CallFamily::Run,
                method: Method::POST,
                path: Self::thread_path(Base::LangGraph, thread, "/runs/stream")?,
                owner,
                last_event_id: None,
                json: Some(json),
            })
            .await?;
        let run_id = opened
            .content_location
            .as_deref()
            .and_then(|v| v.rsplit_once("/runs/"))
            .map(|(_, id)| id.trim_end_matches('/').to_owned())
            .filter(|id| !id.is_empty() && !id.contains('/'));
        Ok(RunStream::new(
            opened.source,
            self.config().stream_idle_timeout,
            run_id,
        ))
    }

    /// Sends a request answered by an event stream: resolves once the response headers
    /// arrive (bounded by the idle timeout), refusing a 2xx that is not `text/event-stream`.
    /// On the run's own task over a plain-HTTP base (`direct.rs`), through reqwest otherwise.
    async fn open_event_stream(&self, call: EventCall<'_>) -> Result<Opened, GatewayError> {
        let idle = self.config().stream_idle_timeout;
        let opened = match self.direct() {
            Some(direct) => tokio::time::timeout(idle, self.open_direct(direct, &call)).await,
            None => tokio::time::timeout(idle, self.open_pooled(&call)).await,
        }
        .map_err(|_| GatewayError::Timeout)??;
        let is_event_stream = opened.content_type.as_deref().is_some_and(|v| {
            v.trim_start()
                .to_ascii_lowercase()
                .starts_with("text/event-stream")
        });
        if !is_event_stream {
            tracing::debug!(
                call = call.call,
                "Run stream response is not an event stream."
            );
            return Err(GatewayError::Decode {
                what: "run stream content type",
            });
        }
        Ok(opened)
    }

    /// [`Self::open_event_stream`] through reqwest.
    async fn open_pooled(&self, call: &EventCall<'_>) -> Result<Opened, GatewayError> {
        let url = format!("{}{}", self.url(Base::LangGraph, ""), call.path);
        let mut request = self
            .request(call.method.clone(), &url, call.owner)?
            .header(ACCEPT, "text/event-stream");
        if let Some(id) = &call.last_event_id {
            request = request.header("last-event-id", id.clone());
        }
        if let Some(json) = &call.json {
            request = request
                .header(CONTENT_TYPE, "application/json")
                .body(json.clone());
        }
        let response = self.send(call.call, call.family, request).await?;
        let header = |name| {
            response
                .headers()
                .get(name)
                .and_then(|v: &HeaderValue| v.to_str().ok())
                .map(str::to_owned)
        };
        Ok(Opened {
            content_type: header(CONTENT_TYPE),
            content_location: header(CONTENT_LOCATION),
            source: Source::Pooled(Box::pin(response.bytes_stream())),
        })
    }

    /// [`Self::open_event_stream`] on the caller's task: the same headers as
    /// [`GatewayClient::request`] puts on a reqwest call, the same status mapping as
    /// [`GatewayClient::send`].
    async fn open_direct(
        &self,
        direct: &Arc<Direct>,
        call: &EventCall<'_>,
    ) -> Result<Opened, GatewayError> {
        let started = std::time::Instant::now();
        let Identity { owner, csrf } = self.identity(&call.method, call.owner)?;
        let mut headers: Vec<(&'static str, &[u8])> = Vec::with_capacity(7);
        headers.push(("user-agent", USER_AGENT.as_bytes()));
        headers.push(("accept", b"text/event-stream"));
        if let Some(token) = self.token() {
            headers.push(("x-deerflow-internal-token", token.as_bytes()));
        }
        if let Some(owner) = &owner {
            headers.push(("x-deerflow-owner-user-id", owner.as_bytes()));
        }
        if let Some((token, cookie)) = csrf {
            headers.push(("x-csrf-token", token.as_bytes()));
            headers.push(("cookie", cookie.as_bytes()));
        }
        if let Some(id) = &call.last_event_id {
            headers.push(("last-event-id", id.as_bytes()));
        }
        let request = direct::Request {
            method: call.method.as_str(),
            path: &call.path,
            headers: &headers,
            json: call.json.as_deref(),
        };
        let response = match direct.open(&request, self.config().connect_timeout).await {
            Ok(response) => response,
            Err(error) => {
                let (kind, error) = match error {
                    OpenError::Connect(error) => {
                        self.unreachable();
                        (TransportKind::Connect, error)
                    }
                    OpenError::Request(error) => (TransportKind::Request, error),
                };
                let mapped = GatewayError::Transport { kind };
                tracing::debug!(call = call.call, kind = mapped.kind(), %error, "Gateway request failed.");
                return Err(mapped);
            }
        };
        self.answered();
        let status = response.head.status;
        let elapsed_ms = started.elapsed().as_millis() as u64;
        if (200..300).contains(&status) {
            tracing::debug!(
                call = call.call,
                status,
                elapsed_ms,
                "Gateway call answered."
            );
            let head = response.head;
            return Ok(Opened {
                content_type: head.content_type,
                content_location: head.content_location,
                source: Source::Direct(response.body),
            });
        }
        let body = response.body.read_prefix(MAX_ERROR_BYTES).await;
        Err(refused(call.call, call.family, status, elapsed_ms, &body))
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
        self.create_run_as(owner, thread, run, RunMode::Create)
            .await
    }

    /// [`GatewayClient::create_run`], with `mode` [`RunMode::Create`] or
    /// [`RunMode::CreateWithText`].
    pub async fn create_run_as(
        &self,
        owner: Option<&Owner>,
        thread: &ThreadId,
        run: &RunRequest,
        mode: RunMode,
    ) -> Result<String, GatewayError> {
        #[derive(Deserialize)]
        struct Created {
            run_id: String,
        }
        let url = self.thread_url(Base::LangGraph, thread, "/runs")?;
        let request = self
            .request(Method::POST, &url, owner)?
            .timeout(self.config().request_timeout)
            .json(&run.wire(mode));
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
    /// retained yields [`RunEvent::Gap`](crate::RunEvent::Gap). The Gateway answers 409 ([`GatewayError::Conflict`])
    /// when the run lives on another worker it cannot stream from, and 404
    /// ([`GatewayError::NotFound`]) when it does not know the run.
    ///
    /// Dropping the stream only stops following because every run is started with
    /// `on_disconnect: "continue"`: DeerFlow applies a run's `on_disconnect` to every
    /// reader of its events, a join included, so a `cancel` run dies with a dropped join.
    pub async fn join_run(
        &self,
        owner: Option<&Owner>,
        thread: &ThreadId,
        run_id: &str,
        last_event_id: Option<&str>,
    ) -> Result<RunStream, GatewayError> {
        let last_event_id = last_event_id
            .map(HeaderValue::from_str)
            .transpose()
            .map_err(|_| GatewayError::InvalidArgument { what: "event id" })?;
        let opened = self
            .open_event_stream(EventCall {
                call: "join_run",
                family: CallFamily::Plain,
                method: Method::GET,
                path: Self::run_path(thread, run_id, "/join")?,
                owner,
                last_event_id,
                json: None,
            })
            .await?;
        Ok(RunStream::new(
            opened.source,
            self.config().stream_idle_timeout,
            Some(run_id.to_owned()),
        ))
    }

    /// `{langgraph_url}/threads/{id}/runs/{run_id}{rest}`.
    fn run_url(&self, thread: &ThreadId, run_id: &str, rest: &str) -> Result<String, GatewayError> {
        Ok(self.url(Base::LangGraph, &Self::run_path(thread, run_id, rest)?))
    }

    /// [`Self::run_url`] without the base.
    fn run_path(thread: &ThreadId, run_id: &str, rest: &str) -> Result<String, GatewayError> {
        // `.`/`..` would be folded away by URL normalization and address another route.
        if run_id.is_empty() || run_id.bytes().all(|b| b == b'.') {
            return Err(GatewayError::InvalidArgument { what: "run id" });
        }
        let rest = format!("/runs/{}{rest}", utf8_percent_encode(run_id, SEGMENT));
        Self::thread_path(Base::LangGraph, thread, &rest)
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
                "on_disconnect",
                "stream_mode",
                "stream_resumable",
                "stream_subgraphs"
            ]
        );
        assert_eq!(create["stream_mode"], "values");
        let with_text = run.body(RunMode::CreateWithText);
        assert_eq!(keys(&with_text), keys(&create));
        assert_eq!(
            with_text["stream_mode"],
            json!(["messages-tuple", "values"])
        );
        // Issue 26: DeerFlow's `sse_consumer` cancels a `cancel` run when any reader, a
        // join too, goes away; the bridge's joins must never kill what they follow.
        assert_eq!(create["on_disconnect"], "continue");
        assert_eq!(
            wait["input"],
            json!({"messages": [{"role": "human", "content": "hi"}]})
        );
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
