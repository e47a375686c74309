//! What can go wrong talking to the Feishu / Lark open API, and how it maps onto
//! [`ChannelError`].
//!
//! Feishu answers every call with the envelope `{code, msg, data}`; `code` 0 is success.
//! [`ApiError::from_code`] sorts the other codes once:
//!
//! - the token codes ([`TOKEN_INVALID_CODES`]) become [`ApiError::TokenInvalid`], which the
//!   client answers by fetching a fresh token and trying the call once more;
//! - the rate-limit codes ([`RATE_LIMIT_CODES`]) and HTTP 429 become the core's
//!   [`HttpError::RetryAfter`] (read by the delivery engine through
//!   `ChannelError::RetryAfter`), from the `x-ogw-ratelimit-reset` header when present;
//! - everything else is [`ApiError::Api`] with its code and HTTP status.
//!
//! What can go wrong on the wire whatever the platform (transport, bounds, unreadable
//! answers, bad ids) is the core's [`HttpError`], wrapped as [`ApiError::Http`] and mapped
//! onto `ChannelError` by the core.
//!
//! No variant holds the answer's `msg`, the request body or a credential: `msg` can quote
//! what was sent, and the token endpoint's request carries the app secret. Reasons name
//! the operation and the code only, so they are safe in logs and in `ChannelError`.

use std::time::Duration;

use im_bridge_channel::ChannelError;
use im_bridge_channel::http::HttpError;
use reqwest::header::HeaderMap;

/// Feishu codes saying the access token was refused; a call answered with one is retried
/// once with a fresh token. 99991663 (tenant token invalid) and 99991671 (malformed token)
/// are the ones the official Go SDK retries on; 99991661 (token missing) and 99991668
/// (token invalid or expired) are the generic authorization codes of the platform's error
/// list. 99991664 (app_access_token invalid) is left out: we never send that token.
pub const TOKEN_INVALID_CODES: &[i64] = &[99991661, 99991663, 99991668, 99991671];
/// Feishu codes asking us to slow down: 99991400 (the app's request frequency limit) and
/// 230020 (the messaging API's frequency limit, e.g. the 5 QPS per-chat / per-message rule).
pub const RATE_LIMIT_CODES: &[i64] = &[99991400, 230020];
/// Codes of a card patch that can never succeed: 230011 (the message was recalled) and
/// 230031 (older than the 14 days within which messages can be updated).
pub const NOT_EDITABLE_CODES: &[i64] = &[230011, 230031];

/// The header Feishu's gateway names the seconds until the rate-limit window resets in.
const RATE_LIMIT_RESET: &str = "x-ogw-ratelimit-reset";

/// A failed open-API call: what went wrong on the wire ([`HttpError`]), or what Feishu
/// refused.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The call failed on the wire: transport, bounds, an unreadable answer, a rate limit
    /// (`RetryAfter`), an id that cannot go into a path.
    #[error(transparent)]
    Http(#[from] HttpError),
    /// The access token was refused, even after a fresh one was fetched.
    #[error("Feishu refused the access token for {op} (code {code})")]
    TokenInvalid {
        /// The operation.
        op: &'static str,
        /// The Feishu code.
        code: i64,
    },
    /// The card to patch is recalled or too old to update.
    #[error("the message can no longer be updated (code {code})")]
    NotEditable {
        /// The Feishu code.
        code: i64,
    },
    /// Any other refusal.
    #[error("Feishu refused {op}: code {code} (HTTP {status})")]
    Api {
        /// The operation.
        op: &'static str,
        /// The Feishu code (the HTTP status when the answer was no envelope).
        code: i64,
        /// The HTTP status.
        status: u16,
    },
    /// A card whose JSON is over the platform's card limit; it would be refused.
    #[error("the card is larger than {limit} bytes")]
    CardTooLarge {
        /// The bound it exceeds.
        limit: usize,
    },
}

impl ApiError {
    /// Sorts a non-zero `code` (or a failed HTTP `status`) answered to `op`; `reset` is the
    /// `x-ogw-ratelimit-reset` header, when the answer had one.
    pub fn from_code(op: &'static str, code: i64, status: u16, reset: Option<Duration>) -> Self {
        if let Some(wait) = rate_limited(code, status, reset) {
            Self::Http(wait)
        } else if TOKEN_INVALID_CODES.contains(&code) {
            Self::TokenInvalid { op, code }
        } else {
            Self::Api { op, code, status }
        }
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

/// [`HttpError::RetryAfter`] when `code` or HTTP `status` asks us to slow down, waiting
/// `reset` (the `x-ogw-ratelimit-reset` header) or the kit's default, at most its
/// longest ([`HttpError::rate_limited`]).
pub(crate) fn rate_limited(code: i64, status: u16, reset: Option<Duration>) -> Option<HttpError> {
    (status == 429 || RATE_LIMIT_CODES.contains(&code)).then(|| HttpError::rate_limited(reset))
}

/// The `x-ogw-ratelimit-reset` header, in whole seconds.
pub(crate) fn rate_limit_reset(headers: &HeaderMap) -> Option<Duration> {
    im_bridge_channel::header_seconds(headers, RATE_LIMIT_RESET)
}

im_bridge_channel::channel_error!(
    ApiError,
    ApiError::NotEditable { .. } => ChannelError::NotEditable;
    ApiError::TokenInvalid { .. } => Refused,
);

#[cfg(test)]
mod tests {
    use super::*;
    use im_bridge_channel::http::{DEFAULT_RETRY_AFTER, MAX_RETRY_AFTER};

    #[test]
    fn feishu_codes_map_onto_channel_errors() {
        let e = ApiError::from_code("send card", 99991400, 400, Some(Duration::from_secs(7)));
        assert!(
            matches!(ChannelError::from(e), ChannelError::RetryAfter(d) if d == Duration::from_secs(7))
        );
        let e = ApiError::from_code("patch card", 230020, 400, None);
        assert!(matches!(e, ApiError::Http(HttpError::RetryAfter(d)) if d == DEFAULT_RETRY_AFTER));
        let e = ApiError::from_code("send card", 0, 429, Some(Duration::MAX));
        assert!(matches!(e, ApiError::Http(HttpError::RetryAfter(d)) if d == MAX_RETRY_AFTER));
        for code in TOKEN_INVALID_CODES {
            let e = ApiError::from_code("send card", *code, 400, None);
            assert!(matches!(e, ApiError::TokenInvalid { .. }), "{code}");
        }
        let e = ApiError::from_code("send card", 230002, 400, None);
        assert!(!e.is_transient());
        let ChannelError::Rejected { reason } = ChannelError::from(e) else {
            panic!("not rejected");
        };
        assert!(reason.contains("230002"), "{reason}");
        let e = ApiError::from_code("send card", 1500, 503, None);
        assert!(e.is_transient());
        assert!(matches!(ChannelError::from(e), ChannelError::Transport(_)));
        let e = ApiError::NotEditable { code: 230011 };
        assert!(matches!(ChannelError::from(e), ChannelError::NotEditable));
        let e = ApiError::from(HttpError::TooLarge { limit: 10 });
        assert!(matches!(
            ChannelError::from(e),
            ChannelError::TooLarge { limit: 10 }
        ));
    }
}
