//! What can go wrong talking to Discord's REST API, and how it maps onto [`ChannelError`].
//!
//! Discord refuses a call with an HTTP status and a JSON body `{code, message}`; a rate
//! limit is HTTP 429 with `{retry_after, global}` and the `Retry-After` /
//! `X-RateLimit-Reset-After` headers. [`ApiError::RateLimited`] carries the wait, read by
//! the delivery engine through `ChannelError::RetryAfter`: the adapter never sleeps on a
//! limit of a send itself, so nothing is sent early and nothing is dropped. Only starting
//! an answer's thread, which comes before the message is offered, waits out a short limit
//! in place (`channel.rs`).
//!
//! What can go wrong on any platform's wire is the core's [`HttpError`], wrapped as
//! [`ApiError::Http`]; the other variants are Discord's own answers. No variant holds the
//! answer's `message`, the request body or the token (reqwest errors lose their URL too).

use std::time::Duration;

use im_bridge_channel::ChannelError;
use im_bridge_channel::http::HttpError;

/// Discord's code: Unknown Message (the message to edit is gone).
pub const UNKNOWN_MESSAGE: i64 = 10008;
/// Discord's code: cannot execute this action on this channel type (no threads in DMs).
pub const WRONG_CHANNEL_TYPE: i64 = 50024;
/// Discord's code: Missing Permissions.
pub const MISSING_PERMISSIONS: i64 = 50013;
/// Discord's code: a thread was already started from this message.
pub const THREAD_EXISTS: i64 = 160004;

/// A failed Discord REST call.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// What can go wrong on any platform's wire: network trouble, an unreadable or
    /// oversized answer, a file over its bound or on a host not listed.
    #[error(transparent)]
    Http(#[from] HttpError),
    /// HTTP 429: wait this long, then send again. Nothing was delivered.
    #[error("Discord asked to retry {op} after {retry_after:?}")]
    RateLimited {
        /// The operation.
        op: &'static str,
        /// How long to wait.
        retry_after: Duration,
        /// Whether it was the global limit.
        global: bool,
    },
    /// HTTP 401: the token was refused.
    #[error("Discord refused the bot token for {op} (HTTP 401)")]
    Unauthorized {
        /// The operation.
        op: &'static str,
    },
    /// Any other refusal.
    #[error("Discord refused {op}: code {code} (HTTP {status})")]
    Api {
        /// The operation.
        op: &'static str,
        /// Discord's JSON code (0 when the answer had none).
        code: i64,
        /// The HTTP status.
        status: u16,
    },
}

impl ApiError {
    /// Discord's JSON code of a refusal, if any.
    pub fn code(&self) -> Option<i64> {
        match self {
            Self::Api { code, .. } => Some(*code),
            _ => None,
        }
    }
}

im_bridge_channel::channel_error!(
    ApiError,
    ApiError::RateLimited { retry_after, .. } => ChannelError::RetryAfter(retry_after),
    ApiError::Api {
        code: UNKNOWN_MESSAGE,
        op: "edit_message",
        ..
    } => ChannelError::NotEditable;
    ApiError::RateLimited { .. } => Throttled,
    ApiError::Unauthorized { .. } => Refused,
);
