//! What can go wrong talking to Slack's Web API, and how it maps onto [`ChannelError`].
//!
//! Slack answers most refusals with HTTP 200 and `{"ok": false, "error": code}`; a rate
//! limit is HTTP 429 with `Retry-After` (and `error: ratelimited`), per method tier;
//! `chat.postMessage`'s reference also lists `rate_limited` for an app that posted too much.
//! [`ApiError::refusal`] sorts them once:
//!
//! - HTTP 429, `ratelimited` or `rate_limited` becomes the core's [`HttpError::RetryAfter`] (read by the
//!   delivery engine through `ChannelError::RetryAfter`), from `Retry-After` when there
//!   is one: the adapter never sleeps on a limit itself;
//! - the credential codes ([`CREDENTIAL_CODES`]: `invalid_auth`, `not_authed`,
//!   `account_inactive`, `token_revoked`, `token_expired`) and HTTP 401 are
//!   [`ApiError::CredentialRefused`]: retrying will not help, the transport ends;
//! - `msg_too_long` is [`ApiError::TooLong`] (`ChannelError::TooLarge` at 4,000 bytes);
//! - `message_not_found`, `cant_update_message`, `edit_window_closed` are
//!   [`ApiError::NotEditable`], which ends a streamed message's edits;
//! - Slack's own trouble ([`UNAVAILABLE_CODES`], or HTTP 5xx) is [`ApiError::Unavailable`]:
//!   the same call may pass later;
//! - everything else is [`ApiError::Api`] with its method, status and code.
//!
//! What can go wrong on the wire whatever the platform (transport, bounds, unreadable
//! answers, file hosts) is the core's [`HttpError`], wrapped as [`ApiError::Http`].
//!
//! No variant holds a message text, a token, a URL or `response_metadata.messages` (they
//! may quote the request): a code is kept only as an identifier (ASCII letters, digits and
//! `_`, at most [`MAX_CODE_CHARS`]), so errors are safe in logs.

use std::time::Duration;

use im_bridge_channel::ChannelError;
use im_bridge_channel::http::{self, HttpError};

use crate::markup::MAX_MESSAGE_BYTES;

/// Codes saying the token was refused for good.
pub const CREDENTIAL_CODES: &[&str] = &[
    "invalid_auth",
    "not_authed",
    "account_inactive",
    "token_revoked",
    "token_expired",
];
/// Codes saying the message cannot be edited (any more).
pub const NOT_EDITABLE_CODES: &[&str] = &[
    "message_not_found",
    "cant_update_message",
    "edit_window_closed",
];
/// Codes saying Slack itself is in trouble.
pub const UNAVAILABLE_CODES: &[&str] = &[
    "internal_error",
    "fatal_error",
    "service_unavailable",
    "request_timeout",
];
/// Slack's rate-limit codes: `ratelimited` (what a 429 carries), and `rate_limited`,
/// which `chat.postMessage`'s reference lists for an app that posted too much.
pub const RATE_LIMITED_CODES: &[&str] = &["ratelimited", "rate_limited"];
/// The longest code kept in an error.
pub const MAX_CODE_CHARS: usize = 64;

/// A failed Web API call.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The call failed on the wire: transport, bounds, an unreadable answer, a rate limit
    /// (`RetryAfter`), a file URL on a host `file_hosts` does not list.
    #[error(transparent)]
    Http(#[from] HttpError),
    /// The token was refused (revoked, expired, wrong): retrying will not help.
    #[error("Slack refused the token for {method}: {code}")]
    CredentialRefused {
        /// The Web API method.
        method: &'static str,
        /// Slack's code (or `http_401`).
        code: String,
    },
    /// `msg_too_long`: the text is over Slack's limit.
    #[error("Slack refused {method}: the text is too long")]
    TooLong {
        /// The Web API method.
        method: &'static str,
    },
    /// The message to edit is gone or can no longer be edited.
    #[error("Slack refused {method}: {code}")]
    NotEditable {
        /// The Web API method.
        method: &'static str,
        /// Slack's code.
        code: String,
    },
    /// Slack's own trouble: the same call may pass later.
    #[error("Slack could not serve {method}: {code} (HTTP {status})")]
    Unavailable {
        /// The Web API method.
        method: &'static str,
        /// The HTTP status.
        status: u16,
        /// Slack's code, empty without one.
        code: String,
    },
    /// `files.info` named no URL for a file (deleted, or over a plan's limit): there are
    /// no bytes to read.
    #[error("files.info named no URL for file {id}")]
    NoFileUrl {
        /// The file's id (`F…`; not secret).
        id: String,
    },
    /// Any other refusal.
    #[error("Slack refused {method}: {code} (HTTP {status})")]
    Api {
        /// The Web API method.
        method: &'static str,
        /// The HTTP status.
        status: u16,
        /// Slack's code, cleaned to an identifier; empty without one.
        code: String,
    },
}

impl ApiError {
    /// Sorts a refusal of `method`: its HTTP `status`, the answer's `error` code when it
    /// had one, and the `Retry-After` header's wait.
    pub fn refusal(
        method: &'static str,
        status: u16,
        code: Option<&str>,
        retry_after: Option<Duration>,
    ) -> Self {
        let code = code.map(clean_code).unwrap_or_default();
        let is = |codes: &[&str]| codes.contains(&code.as_str());
        if status == 429 || is(RATE_LIMITED_CODES) {
            Self::Http(HttpError::rate_limited(retry_after))
        } else if is(CREDENTIAL_CODES) || status == 401 {
            let code = if code.is_empty() {
                "http_401".to_owned()
            } else {
                code
            };
            Self::CredentialRefused { method, code }
        } else if code == "msg_too_long" {
            Self::TooLong { method }
        } else if is(NOT_EDITABLE_CODES) {
            Self::NotEditable { method, code }
        } else if is(UNAVAILABLE_CODES) || status >= 500 {
            Self::Unavailable {
                method,
                status,
                code,
            }
        } else {
            Self::Api {
                method,
                status,
                code,
            }
        }
    }

    /// Slack's code of a refusal, if any (`already_reacted`, `channel_not_found`, …).
    pub fn code(&self) -> Option<&str> {
        match self {
            Self::CredentialRefused { code, .. }
            | Self::NotEditable { code, .. }
            | Self::Unavailable { code, .. }
            | Self::Api { code, .. } => Some(code),
            Self::TooLong { .. } => Some("msg_too_long"),
            Self::Http(_) | Self::NoFileUrl { .. } => None,
        }
    }

    /// Whether the token was refused (the transport cannot go on).
    pub fn is_credential_refusal(&self) -> bool {
        matches!(self, Self::CredentialRefused { .. })
    }

    /// Whether retrying the same call later may succeed (network trouble, Slack's own
    /// trouble, a rate limit).
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Http(e) => e.is_transient(),
            Self::Unavailable { .. } => true,
            _ => false,
        }
    }
}

/// `code` kept as an identifier ([`http::clean_code`]): ASCII letters, digits and `_`, at
/// most [`MAX_CODE_CHARS`]. Slack's codes are `snake_case`; a `-` would keep a token's
/// shape (`xoxb-…`).
fn clean_code(code: &str) -> String {
    http::clean_code(code, MAX_CODE_CHARS, &['_'])
}

im_bridge_channel::channel_error!(
    ApiError,
    ApiError::TooLong { .. } => ChannelError::TooLarge { limit: MAX_MESSAGE_BYTES as u64 },
    ApiError::NotEditable { .. } => ChannelError::NotEditable,
    ApiError::Unavailable { method, status, code } => ChannelError::Transport(
        ApiError::Unavailable { method, status, code }.to_string()
    );
    ApiError::CredentialRefused { .. } => Refused,
);

#[cfg(test)]
mod tests {
    use super::*;
    use im_bridge_channel::http::{DEFAULT_RETRY_AFTER, MAX_RETRY_AFTER};

    fn sorted(status: u16, code: Option<&str>) -> ApiError {
        ApiError::refusal("chat.postMessage", status, code, None)
    }

    #[test]
    fn rate_limits_become_retry_after_within_bounds() {
        let secs = Duration::from_secs;
        let limited = ApiError::refusal("chat.update", 429, Some("ratelimited"), Some(secs(30)));
        assert!(limited.is_transient());
        assert!(
            matches!(ChannelError::from(limited), ChannelError::RetryAfter(d) if d == secs(30))
        );
        for code in RATE_LIMITED_CODES {
            assert!(matches!(
                sorted(200, Some(code)),
                ApiError::Http(HttpError::RetryAfter(d)) if d == DEFAULT_RETRY_AFTER
            ));
        }
        let huge = ApiError::refusal("chat.update", 429, None, Some(Duration::MAX));
        assert!(matches!(huge, ApiError::Http(HttpError::RetryAfter(d)) if d == MAX_RETRY_AFTER));
    }

    #[test]
    fn credentials_edits_length_and_outages_are_sorted_by_code() {
        for code in CREDENTIAL_CODES {
            let e = sorted(200, Some(code));
            assert!(e.is_credential_refusal() && !e.is_transient(), "{code}");
            assert!(matches!(
                ChannelError::from(e),
                ChannelError::Rejected { .. }
            ));
        }
        let e = sorted(401, None);
        assert_eq!(e.code(), Some("http_401"));
        assert!(e.is_credential_refusal());
        for code in NOT_EDITABLE_CODES {
            assert!(matches!(
                ChannelError::from(ApiError::refusal("chat.update", 200, Some(code), None)),
                ChannelError::NotEditable
            ));
        }
        assert!(matches!(
            ChannelError::from(sorted(200, Some("msg_too_long"))),
            ChannelError::TooLarge { limit: 4_000 }
        ));
        for (status, code) in [(200, Some("internal_error")), (503, None), (500, Some("x"))] {
            let e = sorted(status, code);
            assert!(e.is_transient(), "{status} {code:?}");
            assert!(matches!(ChannelError::from(e), ChannelError::Transport(_)));
        }
        let other = sorted(200, Some("channel_not_found"));
        assert_eq!(other.code(), Some("channel_not_found"));
        assert!(!other.is_transient() && !other.is_credential_refusal());
        let ChannelError::Rejected { reason } = ChannelError::from(other) else {
            panic!("not rejected");
        };
        assert_eq!(
            reason,
            "Slack refused chat.postMessage: channel_not_found (HTTP 200)"
        );
    }

    #[test]
    fn a_code_is_kept_only_as_an_identifier() {
        let e = sorted(200, Some("bad code <script> \"xoxb-SECRET\" text"));
        assert_eq!(e.code(), Some("badcodescriptxoxbSECRETtext"));
        let long = "x".repeat(500);
        assert_eq!(
            sorted(400, Some(&long)).code().map(str::len),
            Some(MAX_CODE_CHARS)
        );
        assert_eq!(sorted(400, None).code(), Some(""));
    }
}
