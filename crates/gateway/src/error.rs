//! `GatewayError`: every way a Gateway call can fail, as a closed set of typed outcomes.
//!
//! The manager turns each variant into a localized reply, so the mapping from
//! `(call, HTTP status, detail)` to a variant lives here, in one table per call family
//! (gateway.md §3.6, §4.1, §4.5, §4.7). No variant carries text written by the server or a
//! model: the `detail` of an error body is read only to pick a variant and then dropped, so
//! nothing the Gateway says can reach a user through an error. `Display` strings are for
//! logs only.

use serde::Deserialize;
use serde_json::Value;

/// A failed Gateway call. Cheap to clone and compare; holds no server-written text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GatewayError {
    /// The thread has a run in flight (409 on a run, goal write or compaction; or the
    /// LangGraph Platform wording `already running a task`).
    #[error("Gateway reports the thread is busy.")]
    Busy,
    /// from-chat: the assistant waits for the user's answer to a clarification.
    #[error("Gateway reports the thread waits for user input.")]
    PendingInput,
    /// from-chat: a tool call waits for approval.
    #[error("Gateway reports the thread waits for a tool approval.")]
    PendingApproval,
    /// from-chat: the conversation yields no clear goal.
    #[error("Gateway found no clear goal in the conversation.")]
    Unclear,
    /// from-chat: nothing to compose a goal from (also a 404 on that route).
    #[error("Gateway found no conversation to compose a goal from.")]
    NoContext,
    /// from-chat: the composing model failed or produced unusable output.
    #[error("Gateway failed to synthesize a goal.")]
    SynthesisFailed,
    /// from-chat: the goal was set or cleared while composing; nothing was overwritten.
    #[error("Gateway reports the goal changed while composing.")]
    GoalChanged,
    /// 404: the thread is unknown or owned by someone else.
    #[error("Gateway resource not found.")]
    NotFound,
    /// 404 with FastAPI's route-level body `{"detail": "Not Found"}`: this Gateway has no
    /// such route at all (an older or newer DeerFlow), which is not a missing thread.
    #[error("Gateway has no such route.")]
    RouteMissing,
    /// 401: the internal token is missing or wrong.
    #[error("Gateway refused the credentials.")]
    Unauthorized,
    /// 403: permission denied or a CSRF failure.
    #[error("Gateway forbade the call.")]
    Forbidden,
    /// Compaction is disabled on the server (`summarization.enabled: false`).
    #[error("Gateway has context compaction disabled.")]
    Disabled,
    /// 409 outside the run/goal/compact families (thread create race, memory changed
    /// concurrently): the state changed under the call; re-read and decide.
    #[error("Gateway reported a conflict.")]
    Conflict,
    /// Any other 4xx (validation 400/422, 429 …).
    #[error("Gateway rejected the request with status {status}.")]
    Invalid {
        /// The HTTP status.
        status: u16,
    },
    /// Refused locally before anything was sent: an argument cannot be put on the wire
    /// (a thread id that would alter the path, an owner id with control characters, a
    /// hint over the length cap).
    #[error("Refused to send a request with an invalid {what}.")]
    InvalidArgument {
        /// Which argument.
        what: &'static str,
    },
    /// No answer within the configured timeout (total for plain calls, idle for streams).
    /// The call may or may not have taken effect.
    #[error("Gateway call timed out.")]
    Timeout,
    /// The request could not be sent or its response not read (refused, reset, TLS).
    #[error("Gateway transport failure ({kind}).")]
    Transport {
        /// Where it failed.
        kind: TransportKind,
    },
    /// A run stream ended (EOF or reset) before its `end` event.
    #[error("Gateway run stream closed before its end event.")]
    StreamClosed,
    /// A 2xx response whose body is not the JSON (or event stream) the contract promises.
    #[error("Gateway sent an undecodable {what}.")]
    Decode {
        /// What was being decoded.
        what: &'static str,
    },
    /// 5xx (or an unexpected 1xx/3xx).
    #[error("Gateway failed with status {status}.")]
    Server {
        /// The HTTP status.
        status: u16,
    },
}

/// The phase of a transport failure, for logs and metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransportKind {
    /// Connecting failed (refused, DNS, TLS, connect timeout).
    Connect,
    /// The request failed after connecting (reset before a response).
    Request,
    /// The response body could not be read.
    Body,
}

impl std::fmt::Display for TransportKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Connect => "connect",
            Self::Request => "request",
            Self::Body => "body",
        })
    }
}

impl GatewayError {
    /// A short stable label for metrics and log fields (`busy`, `timeout`, `server` …).
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Busy => "busy",
            Self::PendingInput => "pending_input",
            Self::PendingApproval => "pending_approval",
            Self::Unclear => "unclear",
            Self::NoContext => "no_context",
            Self::SynthesisFailed => "synthesis_failed",
            Self::GoalChanged => "goal_changed",
            Self::NotFound => "not_found",
            Self::RouteMissing => "route_missing",
            Self::Unauthorized => "unauthorized",
            Self::Forbidden => "forbidden",
            Self::Disabled => "disabled",
            Self::Conflict => "conflict",
            Self::Invalid { .. } => "invalid",
            Self::InvalidArgument { .. } => "invalid_argument",
            Self::Timeout => "timeout",
            Self::Transport { .. } => "transport",
            Self::StreamClosed => "stream_closed",
            Self::Decode { .. } => "decode",
            Self::Server { .. } => "server",
        }
    }

    /// Maps a reqwest failure. The reqwest error itself (which may name the URL) goes to
    /// a debug log line with its URL stripped; only the phase is kept.
    pub(crate) fn from_reqwest(error: reqwest::Error, call: &'static str) -> Self {
        let mapped = if error.is_connect() {
            Self::Transport {
                kind: TransportKind::Connect,
            }
        } else if error.is_timeout() {
            Self::Timeout
        } else if error.is_body() || error.is_decode() {
            Self::Transport {
                kind: TransportKind::Body,
            }
        } else {
            Self::Transport {
                kind: TransportKind::Request,
            }
        };
        let error = error.without_url();
        tracing::debug!(call, kind = mapped.kind(), %error, "Gateway request failed.");
        mapped
    }
}

/// Which error table applies to a response (the same status means different things on
/// different routes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CallFamily {
    /// `runs/stream`, `runs/wait`, `runs` (gateway.md §3.6).
    Run,
    /// Goal PUT and DELETE: 409 means a run is in flight (§4.1).
    GoalWrite,
    /// `goal/from-chat` (§4.5 table).
    FromChat,
    /// `compact` (§4.7).
    Compact,
    /// Everything else: threads, goal GET, models, memory, skills, preferences.
    Plain,
}

/// What the error body's `detail` looked like. Its text is used only to pick a variant.
enum Detail {
    /// `{"detail": "…"}`.
    Text(String),
    /// `{"detail": {"code": "…", …}}`.
    Code(String),
    /// No JSON, no `detail`, or another shape (a FastAPI validation list).
    Other,
}

#[derive(Deserialize)]
struct ErrorBody {
    #[serde(default)]
    detail: Value,
}

fn parse_detail(body: &[u8]) -> Detail {
    // Never assume JSON: a proxy's 502 page is HTML.
    let Ok(parsed) = serde_json::from_slice::<ErrorBody>(body) else {
        return Detail::Other;
    };
    match parsed.detail {
        Value::String(text) => Detail::Text(text),
        Value::Object(map) => match map.get("code") {
            Some(Value::String(code)) => Detail::Code(code.clone()),
            _ => Detail::Other,
        },
        _ => Detail::Other,
    }
}

/// FastAPI's `detail` for a path that matches no route (Starlette's `404` text).
const ROUTE_NOT_FOUND: &str = "Not Found";
/// The LangGraph Platform's busy wording, matched anywhere in a run error body (§3.6).
const LANGGRAPH_BUSY: &str = "already running a task";
/// The compaction-disabled 409 `detail`, told apart from the busy 409 only by its text.
const COMPACTION_DISABLED: &str = "compaction is disabled";
/// What the Gateway's 409 says when a thread's checkpoints do not match its configured
/// checkpoint mode ("Thread <id>: Thread requires delta mode; materialize and convert its
/// checkpoints before using full mode."): an operator's matter, which no retry fixes.
const CHECKPOINT_MODE: &str = "checkpoints";

/// Maps a non-2xx response to its variant. `body` is at most a bounded prefix of the
/// response body; it may be empty, HTML or anything else.
pub(crate) fn map_status(family: CallFamily, status: u16, body: &[u8]) -> GatewayError {
    let detail = parse_detail(body);
    // FastAPI answers a path no route matches with exactly this body; every route's own
    // 404 names what it did not find ("Thread … not found"), so the two never meet.
    if status == 404 && matches!(&detail, Detail::Text(text) if text == ROUTE_NOT_FOUND) {
        return GatewayError::RouteMissing;
    }
    match family {
        CallFamily::Run => {
            if status == 409 || contains_ignore_case(body, LANGGRAPH_BUSY) {
                GatewayError::Busy
            } else {
                by_class(status)
            }
        }
        CallFamily::GoalWrite if status == 409 => GatewayError::Busy,
        CallFamily::GoalWrite | CallFamily::Plain => by_class(status),
        CallFamily::FromChat => from_chat(status, &detail),
        CallFamily::Compact => match (status, &detail) {
            (409, Detail::Text(text))
                if contains_ignore_case(text.as_bytes(), COMPACTION_DISABLED) =>
            {
                GatewayError::Disabled
            }
            (409, Detail::Code(code)) if code == "compaction_disabled" || code == "disabled" => {
                GatewayError::Disabled
            }
            (409, Detail::Text(text)) if contains_ignore_case(text.as_bytes(), CHECKPOINT_MODE) => {
                GatewayError::Conflict
            }
            (409, _) => GatewayError::Busy,
            _ => by_class(status),
        },
    }
}

/// The §4.5 table. Auth statuses win; then a known `code` whatever the status; then a 409
/// without a code is busy, a 404 means no context, and the rest fall back by class.
fn from_chat(status: u16, detail: &Detail) -> GatewayError {
    match status {
        401 => return GatewayError::Unauthorized,
        403 => return GatewayError::Forbidden,
        _ => {}
    }
    if let Detail::Code(code) = detail {
        let known = match code.as_str() {
            "thread_busy" => Some(GatewayError::Busy),
            "pending_human_input" => Some(GatewayError::PendingInput),
            "pending_tool_approval" => Some(GatewayError::PendingApproval),
            "goal_changed" => Some(GatewayError::GoalChanged),
            "no_context" => Some(GatewayError::NoContext),
            "unclear" => Some(GatewayError::Unclear),
            "synthesis_failed" => Some(GatewayError::SynthesisFailed),
            _ => None,
        };
        if let Some(known) = known {
            return known;
        }
        tracing::debug!(
            status,
            code_len = code.len(),
            "Unknown from-chat error code, falling back by status."
        );
    }
    match (status, detail) {
        (409, Detail::Text(_) | Detail::Other) => GatewayError::Busy,
        (409, Detail::Code(_)) => GatewayError::Invalid { status },
        (404, _) => GatewayError::NoContext,
        _ => by_class(status),
    }
}

/// The fallback shared by every family.
fn by_class(status: u16) -> GatewayError {
    match status {
        401 => GatewayError::Unauthorized,
        403 => GatewayError::Forbidden,
        404 => GatewayError::NotFound,
        409 => GatewayError::Conflict,
        400..=499 => GatewayError::Invalid { status },
        _ => GatewayError::Server { status },
    }
}

fn contains_ignore_case(haystack: &[u8], needle: &str) -> bool {
    let needle = needle.as_bytes();
    haystack
        .windows(needle.len())
        .any(|w| w.eq_ignore_ascii_case(needle))
}

#[cfg(test)]
mod tests {
    use super::CallFamily::*;
    use super::GatewayError::*;
    use super::*;

    /// An error response body, as the tables below give it.
    #[derive(Debug)]
    enum Body {
        /// `{"detail": "…"}`.
        Text(&'static str),
        /// `{"detail": {"code": "…", "message": "model-written text"}}`.
        Code(&'static str),
        /// These bytes.
        Raw(&'static [u8]),
    }
    use Body::{Code, Raw, Text};

    impl Body {
        fn bytes(&self) -> Vec<u8> {
            let json = match self {
                Text(text) => serde_json::json!({ "detail": text }),
                Code(code) => {
                    serde_json::json!({"detail": {"code": code, "message": "model-written text"}})
                }
                Raw(bytes) => return bytes.to_vec(),
            };
            json.to_string().into_bytes()
        }
    }

    const EMPTY: Body = Raw(b"");

    const HTML_502: Body = Raw(b"<html><head><title>502 Bad Gateway</title></head>\
        <body><center><h1>502 Bad Gateway</h1></center><hr><center>nginx</center></body></html>");

    const FASTAPI_422: Body = Raw(
        br#"{"detail":[{"type":"extra_forbidden","loc":["body","durability"],"msg":"Extra inputs are not permitted","input":true}]}"#,
    );

    const fn invalid(status: u16) -> GatewayError {
        Invalid { status }
    }

    const fn server(status: u16) -> GatewayError {
        Server { status }
    }

    /// Checks each `(status, body, variant)` row of `table` against `family`.
    fn check(family: CallFamily, table: &[(u16, Body, GatewayError)]) {
        for (status, body, want) in table {
            let got = map_status(family, *status, &body.bytes());
            assert_eq!(&got, want, "{family:?} {status} {body:?}");
        }
    }

    #[test]
    fn run_errors_follow_section_3_6() {
        let write = Text("Thread t1 already has an active checkpoint write");
        let other_worker = Text("Thread t1 already has an active run owned by another worker");
        let model = Text("Model 'x' is not in the configured model allowlist");
        let csrf = Text("CSRF token missing. Include X-CSRF-Token header.");
        check(
            Run,
            &[
                (409, Text("Thread t1 already has an active run"), Busy),
                (409, write, Busy),
                (409, other_worker, Busy),
                (409, Text("Thread t1 reservation lease was lost"), Busy),
                (409, EMPTY, Busy),
                (404, Text("Thread t1 not found"), NotFound),
                (422, Text("Invalid thread_id: expected …"), invalid(422)),
                (422, FASTAPI_422, invalid(422)),
                (400, model, invalid(400)),
                (500, Text("Failed to validate checkpoint"), server(500)),
                (501, Text("unsupported strategy"), server(501)),
                (401, Code("not_authenticated"), Unauthorized),
                (403, csrf, Forbidden),
                (403, Text("Permission denied: runs:create"), Forbidden),
                // LangGraph Platform wording, under 400 or 500, in any case.
                (400, Text("Thread is already running a task."), Busy),
                (500, Text("thread ALREADY RUNNING A TASK"), Busy),
                (502, HTML_502, server(502)),
            ],
        );
    }

    #[test]
    fn goal_errors_follow_section_4_1() {
        let put_busy = Text("Thread has a run in flight. Set the goal after the run finishes.");
        let delete_busy =
            Text("Thread has a run in flight. Clear the goal after the run finishes.");
        check(
            GoalWrite,
            &[
                (409, put_busy, Busy),
                (409, delete_busy, Busy),
                (422, Text("Goal objective must not be empty."), invalid(422)),
                (500, Text("Failed to set thread goal"), server(500)),
                (403, Text("CSRF token mismatch."), Forbidden),
                (404, Text("Thread t not found"), NotFound),
            ],
        );
        let memory_changed = Text("Memory changed concurrently; reload and retry.");
        let unsupported = Text("Operation 'get memory' not supported");
        check(
            Plain,
            &[
                (500, Text("Failed to read thread goal"), server(500)),
                (404, Text("Thread t not found"), NotFound),
                (401, Code("not_authenticated"), Unauthorized),
                // A 409 on a plain call (memory changed concurrently, create race) is a conflict.
                (409, memory_changed, Conflict),
                (501, unsupported, server(501)),
                (503, HTML_502, server(503)),
                (302, EMPTY, server(302)),
            ],
        );
    }

    #[test]
    fn from_chat_follows_the_section_4_5_table() {
        check(
            FromChat,
            &[
                (409, Code("thread_busy"), Busy),
                (409, Code("pending_human_input"), PendingInput),
                (409, Code("pending_tool_approval"), PendingApproval),
                (409, Code("goal_changed"), GoalChanged),
                (422, Code("no_context"), NoContext),
                (422, Code("unclear"), Unclear),
                (502, Code("synthesis_failed"), SynthesisFailed),
                (403, Code("forbidden"), Forbidden),
                (403, Code("thread_busy"), Forbidden),
                (404, Code("not_found"), NoContext),
                (401, Code("not_authenticated"), Unauthorized),
                // A plain-string detail on 409 means busy; so does a 409 with no body.
                (409, Text("Thread has a run in flight."), Busy),
                (409, EMPTY, Busy),
                (404, Text("Thread t not found"), NoContext),
                (403, Text("CSRF token missing."), Forbidden),
                // Unknown codes fall back by status class.
                (409, Code("brand_new"), invalid(409)),
                (422, Code("brand_new"), invalid(422)),
                (400, Text("bad"), invalid(400)),
                (429, EMPTY, invalid(429)),
                (502, Code("brand_new"), server(502)),
                (500, Text("boom"), server(500)),
                (502, HTML_502, server(502)),
                (503, Raw(b"Service Unavailable"), server(503)),
            ],
        );
    }

    #[test]
    fn compact_errors_follow_section_4_7() {
        let busy = Text("Thread has a run in flight. Compact after the run finishes.");
        check(
            Compact,
            &[
                (409, Text("Context compaction is disabled."), Disabled),
                (409, Code("compaction_disabled"), Disabled),
                (409, busy, Busy),
                (409, EMPTY, Busy),
                // The thread's checkpoints and the Gateway's mode disagree: no retry helps.
                (
                    409,
                    Text(
                        "Thread t: Thread requires delta mode; materialize and convert its checkpoints before using full mode.",
                    ),
                    GatewayError::Conflict,
                ),
                (500, Text("Failed to compact thread context."), server(500)),
                (404, Text("Thread t not found"), NotFound),
                (401, EMPTY, Unauthorized),
                (403, EMPTY, Forbidden),
                (502, HTML_502, server(502)),
            ],
        );
    }

    #[test]
    fn issue_26_a_route_level_404_is_a_missing_route_in_every_family() {
        // FastAPI's body for a path no route matches, as DeerFlow answers `goal/from-chat`
        // and `user-preferences` where it lacks them; a route's own 404 names its object.
        for family in [Run, GoalWrite, FromChat, Compact, Plain] {
            check(family, &[(404, Text("Not Found"), RouteMissing)]);
        }
        check(FromChat, &[(404, Text("Thread t not found"), NoContext)]);
        check(Plain, &[(404, Text("Run r not found"), NotFound)]);
        // Only the exact text on a 404: a 405 or another wording stays what it was.
        check(Plain, &[(405, Text("Not Found"), invalid(405))]);
        check(Plain, &[(404, Text("not found"), NotFound)]);
    }

    #[test]
    fn no_variant_displays_server_text() {
        let err = map_status(FromChat, 502, &Code("synthesis_failed").bytes());
        let shown = format!("{err} {err:?}");
        assert!(!shown.contains("model-written"), "{shown}");
        assert_eq!(err.kind(), "synthesis_failed");
    }
}
