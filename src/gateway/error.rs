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

/// The LangGraph Platform's busy wording, matched anywhere in a run error body (§3.6).
const LANGGRAPH_BUSY: &str = "already running a task";
/// The compaction-disabled 409 `detail`, told apart from the busy 409 only by its text.
const COMPACTION_DISABLED: &str = "compaction is disabled";

/// Maps a non-2xx response to its variant. `body` is at most a bounded prefix of the
/// response body; it may be empty, HTML or anything else.
pub(crate) fn map_status(family: CallFamily, status: u16, body: &[u8]) -> GatewayError {
    let detail = parse_detail(body);
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
    use super::GatewayError as E;
    use super::*;

    fn code(code: &str) -> Vec<u8> {
        serde_json::json!({"detail": {"code": code, "message": "model-written text"}})
            .to_string()
            .into_bytes()
    }

    fn text(text: &str) -> Vec<u8> {
        serde_json::json!({ "detail": text })
            .to_string()
            .into_bytes()
    }

    const HTML_502: &[u8] = b"<html><head><title>502 Bad Gateway</title></head>\
        <body><center><h1>502 Bad Gateway</h1></center><hr><center>nginx</center></body></html>";

    #[test]
    fn run_errors_follow_section_3_6() {
        let busy = [
            "Thread t1 already has an active run",
            "Thread t1 already has an active checkpoint write",
            "Thread t1 already has an active run owned by another worker",
            "Thread t1 reservation lease was lost",
        ];
        for detail in busy {
            assert_eq!(map_status(Run, 409, &text(detail)), E::Busy, "{detail}");
        }
        assert_eq!(map_status(Run, 409, b""), E::Busy);
        assert_eq!(
            map_status(Run, 404, &text("Thread t1 not found")),
            E::NotFound
        );
        assert_eq!(
            map_status(Run, 422, &text("Invalid thread_id: expected …")),
            E::Invalid { status: 422 }
        );
        let fastapi = br#"{"detail":[{"type":"extra_forbidden","loc":["body","durability"],"msg":"Extra inputs are not permitted","input":true}]}"#;
        assert_eq!(map_status(Run, 422, fastapi), E::Invalid { status: 422 });
        let model = text("Model 'x' is not in the configured model allowlist");
        assert_eq!(map_status(Run, 400, &model), E::Invalid { status: 400 });
        assert_eq!(
            map_status(Run, 500, &text("Failed to validate checkpoint")),
            E::Server { status: 500 }
        );
        assert_eq!(
            map_status(Run, 501, &text("unsupported strategy")),
            E::Server { status: 501 }
        );
        assert_eq!(
            map_status(Run, 401, &code("not_authenticated")),
            E::Unauthorized
        );
        assert_eq!(
            map_status(
                Run,
                403,
                &text("CSRF token missing. Include X-CSRF-Token header.")
            ),
            E::Forbidden
        );
        assert_eq!(
            map_status(Run, 403, &text("Permission denied: runs:create")),
            E::Forbidden
        );
        // LangGraph Platform wording, under 400 or 500, string or object detail.
        assert_eq!(
            map_status(Run, 400, &text("Thread is already running a task.")),
            E::Busy
        );
        assert_eq!(
            map_status(Run, 500, &text("thread ALREADY RUNNING A TASK")),
            E::Busy
        );
        assert_eq!(map_status(Run, 502, HTML_502), E::Server { status: 502 });
    }

    #[test]
    fn goal_errors_follow_section_4_1() {
        let put_busy = text("Thread has a run in flight. Set the goal after the run finishes.");
        let delete_busy =
            text("Thread has a run in flight. Clear the goal after the run finishes.");
        assert_eq!(map_status(GoalWrite, 409, &put_busy), E::Busy);
        assert_eq!(map_status(GoalWrite, 409, &delete_busy), E::Busy);
        assert_eq!(
            map_status(GoalWrite, 422, &text("Goal objective must not be empty.")),
            E::Invalid { status: 422 }
        );
        assert_eq!(
            map_status(GoalWrite, 500, &text("Failed to set thread goal")),
            E::Server { status: 500 }
        );
        assert_eq!(
            map_status(GoalWrite, 403, &text("CSRF token mismatch.")),
            E::Forbidden
        );
        assert_eq!(
            map_status(GoalWrite, 404, &text("Thread t not found")),
            E::NotFound
        );
        assert_eq!(
            map_status(Plain, 500, &text("Failed to read thread goal")),
            E::Server { status: 500 }
        );
        assert_eq!(
            map_status(Plain, 404, &text("Thread t not found")),
            E::NotFound
        );
        assert_eq!(
            map_status(Plain, 401, &code("not_authenticated")),
            E::Unauthorized
        );
        // A 409 on a plain call (memory changed concurrently, create race) is a conflict.
        assert_eq!(
            map_status(
                Plain,
                409,
                &text("Memory changed concurrently; reload and retry.")
            ),
            E::Conflict
        );
        assert_eq!(
            map_status(Plain, 501, &text("Operation 'get memory' not supported")),
            E::Server { status: 501 }
        );
        assert_eq!(map_status(Plain, 503, HTML_502), E::Server { status: 503 });
        assert_eq!(map_status(Plain, 302, b""), E::Server { status: 302 });
    }

    #[test]
    fn from_chat_follows_the_section_4_5_table() {
        let table = [
            (409, "thread_busy", E::Busy),
            (409, "pending_human_input", E::PendingInput),
            (409, "pending_tool_approval", E::PendingApproval),
            (409, "goal_changed", E::GoalChanged),
            (422, "no_context", E::NoContext),
            (422, "unclear", E::Unclear),
            (502, "synthesis_failed", E::SynthesisFailed),
            (403, "forbidden", E::Forbidden),
            (403, "thread_busy", E::Forbidden),
            (404, "not_found", E::NoContext),
            (401, "not_authenticated", E::Unauthorized),
        ];
        for (status, c, want) in table {
            assert_eq!(map_status(FromChat, status, &code(c)), want, "{status} {c}");
        }
        // A plain-string detail on 409 means busy; so does a 409 with no body.
        assert_eq!(
            map_status(FromChat, 409, &text("Thread has a run in flight.")),
            E::Busy
        );
        assert_eq!(map_status(FromChat, 409, b""), E::Busy);
        assert_eq!(
            map_status(FromChat, 404, &text("Thread t not found")),
            E::NoContext
        );
        assert_eq!(
            map_status(FromChat, 403, &text("CSRF token missing.")),
            E::Forbidden
        );
        // Unknown codes fall back by status class.
        assert_eq!(
            map_status(FromChat, 409, &code("brand_new")),
            E::Invalid { status: 409 }
        );
        assert_eq!(
            map_status(FromChat, 422, &code("brand_new")),
            E::Invalid { status: 422 }
        );
        assert_eq!(
            map_status(FromChat, 400, &text("bad")),
            E::Invalid { status: 400 }
        );
        assert_eq!(map_status(FromChat, 429, b""), E::Invalid { status: 429 });
        assert_eq!(
            map_status(FromChat, 502, &code("brand_new")),
            E::Server { status: 502 }
        );
        assert_eq!(
            map_status(FromChat, 500, &text("boom")),
            E::Server { status: 500 }
        );
        assert_eq!(
            map_status(FromChat, 502, HTML_502),
            E::Server { status: 502 }
        );
        assert_eq!(
            map_status(FromChat, 503, b"Service Unavailable"),
            E::Server { status: 503 }
        );
    }

    #[test]
    fn compact_errors_follow_section_4_7() {
        let disabled = text("Context compaction is disabled.");
        let busy = text("Thread has a run in flight. Compact after the run finishes.");
        assert_eq!(map_status(Compact, 409, &disabled), E::Disabled);
        assert_eq!(
            map_status(Compact, 409, &code("compaction_disabled")),
            E::Disabled
        );
        assert_eq!(map_status(Compact, 409, &busy), E::Busy);
        assert_eq!(map_status(Compact, 409, b""), E::Busy);
        assert_eq!(
            map_status(Compact, 500, &text("Failed to compact thread context.")),
            E::Server { status: 500 }
        );
        assert_eq!(
            map_status(Compact, 404, &text("Thread t not found")),
            E::NotFound
        );
        assert_eq!(map_status(Compact, 401, b""), E::Unauthorized);
        assert_eq!(map_status(Compact, 403, b""), E::Forbidden);
        assert_eq!(
            map_status(Compact, 502, HTML_502),
            E::Server { status: 502 }
        );
    }

    #[test]
    fn no_variant_displays_server_text() {
        let body = code("synthesis_failed");
        let err = map_status(FromChat, 502, &body);
        let shown = format!("{err} {err:?}");
        assert!(!shown.contains("model-written"), "{shown}");
        assert_eq!(err.kind(), "synthesis_failed");
    }
}
