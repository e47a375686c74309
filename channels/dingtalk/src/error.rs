//! What can go wrong talking to DingTalk's APIs, and how it maps onto [`ChannelError`].
//!
//! DingTalk answers in two dialects. The OpenAPI host (`api.dingtalk.com`) refuses with an
//! HTTP error status and a body `{code, message, requestid}` whose `code` is a dotted name
//! (`InvalidAuthentication`, `Forbidden.AccessDenied.QpsLimitForApi`, …); its card APIs
//! may also answer HTTP 200 with `success: false`. The legacy host (`oapi.dingtalk.com`,
//! the media upload) answers HTTP 200 with `{errcode, errmsg}`, `errcode` 0 on success.
//! [`ApiError::refusal`] sorts both once:
//!
//! - HTTP 401 and the token codes ([`TOKEN_INVALID_CODES`]) become
//!   [`ApiError::TokenInvalid`]: the call was turned away at the gateway, so the client
//!   fetches a fresh token and sends it once more;
//! - HTTP 429 and the rate-limit codes ([`is_rate_limit_code`]) become the core's
//!   [`HttpError::RetryAfter`] (read by the delivery engine through
//!   `ChannelError::RetryAfter`), from a `Retry-After` header when there is one;
//! - everything else is [`ApiError::Api`] with its status and code.
//!
//! What can go wrong on the wire whatever the platform (transport, bounds, unreadable
//! answers, file hosts) is the core's [`HttpError`], wrapped as [`ApiError::Http`] and
//! mapped onto `ChannelError` by the core.
//!
//! Child `answer`: reading an answer (bounded) in either host's dialect, into its JSON or
//! the refusal it means. It lives here, below both `api` and `token`, which read answers
//! the same way.
//!
//! No variant holds the answer's `message`/`errmsg`, a request body or a credential: a
//! message can quote what was sent. A `code` is kept only as an identifier (letters,
//! digits, `.`, `_`, `-`, at most [`MAX_CODE_CHARS`]), so errors are safe in logs.

use std::time::Duration;

use im_bridge_channel::http::{self, HttpError};

mod answer;

#[cfg(test)]
pub(crate) use answer::MAX_RESPONSE_BYTES;
pub(crate) use answer::{Dialect, decode, read_answer};

/// Codes saying the access token was refused: `InvalidAuthentication` (OpenAPI, HTTP
/// 401), and the legacy host's `40014` (invalid access_token) and `42001` (access_token
/// expired).
pub const TOKEN_INVALID_CODES: &[&str] = &["InvalidAuthentication", "40014", "42001"];
/// Legacy rate-limit `errcode`s: `90018` (an app's calls of one API per second), `90006`
/// and `90005` (per minute), `88` (temporarily forbidden for calling too fast).
pub const LEGACY_RATE_LIMIT_CODES: &[&str] = &["90018", "90006", "90005", "88"];
/// The longest `code` kept in an error.
pub const MAX_CODE_CHARS: usize = 80;

/// Whether `code` asks us to slow down: the OpenAPI gateway's `…QpsLimit…` codes
/// (`Forbidden.AccessDenied.QpsLimitForApi`, `…QpsLimitForAppkeyAndApi`), the `Throttling…`
/// family, and [`LEGACY_RATE_LIMIT_CODES`].
pub fn is_rate_limit_code(code: &str) -> bool {
    code.contains("QpsLimit")
        || code.starts_with("Throttling")
        || LEGACY_RATE_LIMIT_CODES.contains(&code)
}

/// A failed API call: what went wrong on the wire ([`HttpError`]), or what DingTalk
/// refused.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The call failed on the wire: transport, bounds, an unreadable answer, a rate limit
    /// (`RetryAfter`), a file URL on a host `file_hosts` does not list.
    #[error(transparent)]
    Http(#[from] HttpError),
    /// The access token was refused, even after a fresh one was fetched.
    #[error("DingTalk refused the access token for {op} (HTTP {status})")]
    TokenInvalid {
        /// The operation.
        op: &'static str,
        /// The HTTP status.
        status: u16,
    },
    /// Any other refusal, with DingTalk's code when the answer had one.
    #[error("DingTalk refused {op}: HTTP {status}, code {code:?}")]
    Api {
        /// The operation.
        op: &'static str,
        /// The HTTP status.
        status: u16,
        /// The answer's `code` or `errcode`, cleaned to an identifier; empty without one.
        code: String,
    },
    /// The call was answered as a success by HTTP but not done: `success: false`, a card
    /// not delivered, a recipient DingTalk does not know.
    #[error("DingTalk did not complete {op}: {reason}")]
    NotDone {
        /// The operation.
        op: &'static str,
        /// Which check failed (ours, not the server's words).
        reason: &'static str,
    },
}

impl ApiError {
    /// Sorts a refusal of `op`: its HTTP `status`, the answer's `code` (OpenAPI) or
    /// `errcode` (legacy, as a string) when it had one, and the `Retry-After` header.
    pub fn refusal(
        op: &'static str,
        status: u16,
        code: Option<&str>,
        retry_after: Option<Duration>,
    ) -> Self {
        let code = code.map(clean_code).unwrap_or_default();
        if status == 429 || is_rate_limit_code(&code) {
            Self::Http(HttpError::rate_limited(retry_after))
        } else if status == 401 || TOKEN_INVALID_CODES.contains(&code.as_str()) {
            Self::TokenInvalid { op, status }
        } else {
            Self::Api { op, status, code }
        }
    }

    /// Whether the platform refused the token (the one case the client retries).
    pub fn is_token_refusal(&self) -> bool {
        matches!(self, Self::TokenInvalid { .. })
    }

    /// Whether retrying the same call later may succeed (network trouble, 5xx, a rate
    /// limit).
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Http(e) => e.is_transient(),
            Self::Api { status, .. } => *status >= 500,
            _ => false,
        }
    }
}

/// `code` kept as an identifier ([`http::clean_code`]): letters, digits, `.`, `_`, `-`
/// (the OpenAPI's codes are dotted), at most [`MAX_CODE_CHARS`].
fn clean_code(code: &str) -> String {
    http::clean_code(code, MAX_CODE_CHARS, &['.', '_', '-'])
}

im_bridge_channel::channel_error!(ApiError; ApiError::TokenInvalid { .. } => Refused);

#[cfg(test)]
mod tests {
    use im_bridge_channel::ChannelError;

    use super::*;
    use im_bridge_channel::http::{DEFAULT_RETRY_AFTER, MAX_RETRY_AFTER};

    #[test]
    fn refusals_are_sorted_by_status_and_code() {
        let secs = Duration::from_secs;
        let limited = ApiError::refusal(
            "send",
            403,
            Some("Forbidden.AccessDenied.QpsLimitForApi"),
            None,
        );
        assert!(
            matches!(limited, ApiError::Http(HttpError::RetryAfter(d)) if d == DEFAULT_RETRY_AFTER)
        );
        let throttled = ApiError::refusal("send", 400, Some("Throttling.User"), Some(secs(7)));
        assert!(
            matches!(ChannelError::from(throttled), ChannelError::RetryAfter(d) if d == secs(7))
        );
        let huge = ApiError::refusal("send", 429, None, Some(Duration::MAX));
        assert!(matches!(huge, ApiError::Http(HttpError::RetryAfter(d)) if d == MAX_RETRY_AFTER));
        assert!(matches!(
            ApiError::refusal("upload", 200, Some("90018"), None),
            ApiError::Http(HttpError::RetryAfter(_))
        ));
        for code in TOKEN_INVALID_CODES {
            let e = ApiError::refusal("send", 400, Some(code), None);
            assert!(e.is_token_refusal(), "{code}");
        }
        assert!(ApiError::refusal("send", 401, None, None).is_token_refusal());
        let bad = ApiError::refusal("send", 400, Some("invalidParameter.robotCode"), None);
        assert!(!bad.is_transient() && !bad.is_token_refusal());
        let ChannelError::Rejected { reason } = ChannelError::from(bad) else {
            panic!("not rejected");
        };
        assert!(reason.contains("invalidParameter.robotCode"), "{reason}");
        let down = ApiError::refusal("send", 503, Some("ServiceUnavailable"), None);
        assert!(down.is_transient());
        assert!(matches!(
            ChannelError::from(down),
            ChannelError::Transport(_)
        ));
    }

    #[test]
    fn a_code_is_kept_only_as_an_identifier() {
        let e = ApiError::refusal("send", 400, Some("bad code <script> with \"quotes\""), None);
        let ApiError::Api { code, .. } = &e else {
            panic!("{e:?}");
        };
        assert_eq!(code, "badcodescriptwithquotes");
        let long = "x".repeat(500);
        let ApiError::Api { code, .. } = ApiError::refusal("send", 400, Some(&long), None) else {
            panic!("not an API error");
        };
        assert_eq!(code.len(), MAX_CODE_CHARS);
        let not_done = ApiError::NotDone {
            op: "card",
            reason: "success is false",
        };
        assert!(matches!(
            ChannelError::from(not_done),
            ChannelError::Rejected { .. }
        ));
    }
}
