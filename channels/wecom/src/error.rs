//! What WeCom refuses, and how it maps onto [`ChannelError`].
//!
//! Every request on the long connection is answered by a frame `{headers: {req_id},
//! errcode, errmsg}`; [`ApiError::answer`] sorts a non-zero `errcode` once:
//!
//! - the credential codes ([`AUTH_FAILED_CODES`], WeCom's global "invalid secret /
//!   credential" codes; an `aibot_subscribe` refused with any code is one too, by
//!   [`ApiError::subscribe`]) are [`ApiError::AuthFailed`]: the transport cannot go on;
//! - the rate limits ([`RATE_LIMIT_CODES`]) are the kit's `HttpError::RetryAfter`;
//! - a reply whose `req_id` is no longer valid (846605) or whose stream can no longer be
//!   updated (846608, six minutes after the user's message) is [`ApiError::ReplyGone`],
//!   `ChannelError::NotEditable`: the delivery engine then sends the final as a message of
//!   its own (`aibot_send_msg`);
//! - content over the limit (45002) is [`ApiError::TooLong`], `ChannelError::TooLarge`;
//! - "aibot websocket not subscribed" (846609: WeCom dropped the connection's
//!   subscription while the socket stays open, and refuses every command on it until it
//!   closes it, up to 79 s later) is [`ApiError::NotSubscribed`], `ChannelError::Transport`:
//!   nothing was applied, the same command passes once a new connection subscribed, which
//!   the transport makes at once (it ends the connection that answered so);
//! - no connection, a command that could not be queued on it, or one whose connection
//!   closed before its answer, is [`ApiError::Connection`], `ChannelError::Transport`
//!   (`doctor`: unreachable); a command queued whose answer did not come in time, its
//!   connection still up, is [`ApiError::Unanswered`], `ChannelError::Transport` too, but
//!   WeCom may have applied it: for a finishing stream frame the channel makes it
//!   `ChannelError::Unconfirmed`, so the frame is sent again as it was rather than the
//!   final as a new message;
//! - WeCom's "system busy" (-1) and everything else are [`ApiError::Api`], by a status
//!   class (503 for busy, so the engine may retry; 400 otherwise).
//!
//! 846605 and 846608 were observed on the long connection (WeCom's own OpenClaw plugin
//! handles both), 846609 in production (NousResearch/hermes-agent issues 29667, 47564); the
//! others are WeCom's platform-wide codes (全局错误码). No variant holds
//! `errmsg`, a body or a credential: a code is a number, safe in logs.

use im_bridge_channel::ChannelError;
use im_bridge_channel::http::HttpError;

use crate::config::MAX_STREAM_BYTES;

/// WeCom's "system busy, try again".
pub const SYSTEM_BUSY: i64 = -1;
/// Credential codes: 40001 (invalid secret), 40014 (invalid access token), 42001
/// (expired access token), 40013 (invalid corp id).
pub const AUTH_FAILED_CODES: &[i64] = &[40001, 40013, 40014, 42001];
/// Rate limits: 45009 (API calls over the limit), 45033 (concurrent calls over the
/// limit), 45011 (calls too frequent).
pub const RATE_LIMIT_CODES: &[i64] = &[45009, 45011, 45033];
/// The reply's `req_id` is invalid or expired (a reply to an event, or too late).
pub const INVALID_REQ_ID: i64 = 846605;
/// The stream can no longer be updated ("stream message update expired").
pub const STREAM_EXPIRED: i64 = 846608;
/// The connection is no longer subscribed ("aibot websocket not subscribed").
pub const NOT_SUBSCRIBED: i64 = 846609;
/// The content is over WeCom's limit.
pub const CONTENT_TOO_LONG: i64 = 45002;

/// A refused or failed request.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// On the wire: transport, bounds, a rate limit (`RetryAfter`), a media URL on a host
    /// `file_hosts` does not list.
    #[error(transparent)]
    Http(#[from] HttpError),
    /// The BotID or Secret was refused.
    #[error("WeCom refused the bot's credentials (errcode {errcode})")]
    AuthFailed {
        /// WeCom's code.
        errcode: i64,
    },
    /// The reply can no longer be sent or updated.
    #[error("WeCom refused {op}: the reply is no longer possible (errcode {errcode})")]
    ReplyGone {
        /// The command.
        op: &'static str,
        /// [`INVALID_REQ_ID`] or [`STREAM_EXPIRED`].
        errcode: i64,
    },
    /// The content is too long.
    #[error("WeCom refused {op}: the content is too long")]
    TooLong {
        /// The command.
        op: &'static str,
    },
    /// The long connection is not there for it: none is up, the command could not be
    /// queued, or the connection dropped before the answer came. The reason is log-safe
    /// (no frame, no URL).
    #[error("{op} got no answer on the WeCom long connection: {reason}")]
    Connection {
        /// The command.
        op: &'static str,
        /// What happened.
        reason: std::borrow::Cow<'static, str>,
    },
    /// The command was queued on the connection but its answer did not come in time, the
    /// connection still up: WeCom may have applied it. The reason is log-safe.
    #[error("{op} got no answer on the WeCom long connection: {reason}")]
    Unanswered {
        /// The command.
        op: &'static str,
        /// What happened.
        reason: std::borrow::Cow<'static, str>,
    },
    /// WeCom no longer holds the connection's subscription ([`NOT_SUBSCRIBED`]): nothing
    /// was applied, and the connection is replaced.
    #[error(
        "WeCom refused {op}: the long connection is no longer subscribed (errcode {NOT_SUBSCRIBED})"
    )]
    NotSubscribed {
        /// The command.
        op: &'static str,
    },
    /// Any other refusal.
    #[error("WeCom refused {op}: errcode {errcode}")]
    Api {
        /// The command.
        op: &'static str,
        /// The class the kit sorts by: 503 for [`SYSTEM_BUSY`], 400 otherwise.
        status: u16,
        /// WeCom's code.
        errcode: i64,
    },
}

impl ApiError {
    /// Sorts the answer to `op`: `Ok` for `errcode` 0 (or none), else the refusal.
    pub fn answer(op: &'static str, errcode: Option<i64>) -> Result<(), Self> {
        let errcode = match errcode {
            None | Some(0) => return Ok(()),
            Some(code) => code,
        };
        Err(if AUTH_FAILED_CODES.contains(&errcode) {
            Self::AuthFailed { errcode }
        } else if RATE_LIMIT_CODES.contains(&errcode) {
            Self::Http(HttpError::rate_limited(None))
        } else if matches!(errcode, INVALID_REQ_ID | STREAM_EXPIRED) {
            Self::ReplyGone { op, errcode }
        } else if errcode == NOT_SUBSCRIBED {
            Self::NotSubscribed { op }
        } else if errcode == CONTENT_TOO_LONG {
            Self::TooLong { op }
        } else {
            let status = if errcode == SYSTEM_BUSY { 503 } else { 400 };
            Self::Api {
                op,
                status,
                errcode,
            }
        })
    }

    /// Sorts the answer to `aibot_subscribe`: any refusal but a rate limit or a busy
    /// server is the credentials'.
    pub fn subscribe(errcode: Option<i64>) -> Result<(), Self> {
        Self::answer(crate::model::SUBSCRIBE, errcode).map_err(|e| match e {
            Self::Api {
                errcode, status, ..
            } if status < 500 => Self::AuthFailed { errcode },
            other => other,
        })
    }
}

im_bridge_channel::channel_error!(
    ApiError,
    ApiError::ReplyGone { .. } => ChannelError::NotEditable,
    ApiError::TooLong { .. } => ChannelError::TooLarge { limit: MAX_STREAM_BYTES as u64 },
    e @ (ApiError::Connection { .. }
        | ApiError::Unanswered { .. }
        | ApiError::NotSubscribed { .. }) => ChannelError::Transport(e.to_string());
    ApiError::AuthFailed { .. } => Refused,
    ApiError::Connection { .. } | ApiError::Unanswered { .. } => Unreachable,
);

#[cfg(test)]
mod tests {
    use im_bridge_channel::doctor::{Diagnose, Failure};

    use super::*;
    use im_bridge_channel::http::DEFAULT_RETRY_AFTER;

    #[test]
    fn each_errcode_is_sorted_once() {
        assert!(ApiError::answer("respond", Some(0)).is_ok());
        assert!(ApiError::answer("respond", None).is_ok());
        let sorted =
            |code| ChannelError::from(ApiError::answer("respond", Some(code)).unwrap_err());
        assert!(matches!(sorted(846608), ChannelError::NotEditable));
        assert!(matches!(sorted(846605), ChannelError::NotEditable));
        assert!(matches!(sorted(45009), ChannelError::RetryAfter(d) if d == DEFAULT_RETRY_AFTER));
        assert!(matches!(
            sorted(45002),
            ChannelError::TooLarge { limit: 20_480 }
        ));
        assert!(sorted(-1).is_transient());
        // Not subscribed any more: nothing applied, it passes on a new connection.
        let not_subscribed = sorted(846609);
        assert!(
            matches!(&not_subscribed, ChannelError::Transport(reason) if reason.contains("846609")),
            "{not_subscribed:?}"
        );
        let ChannelError::Rejected { reason } = sorted(93000) else {
            panic!("not rejected");
        };
        assert!(
            reason.contains("93000") && reason.contains("respond"),
            "{reason}"
        );
    }

    #[test]
    fn a_refused_subscribe_is_the_credentials_and_doctor_says_so() {
        let refused = ApiError::subscribe(Some(853000)).unwrap_err();
        assert!(matches!(refused, ApiError::AuthFailed { errcode: 853000 }));
        assert_eq!(refused.failure(), Failure::Refused);
        assert!(matches!(
            ApiError::subscribe(Some(-1)).unwrap_err().failure(),
            Failure::Unexpected
        ));
        assert!(matches!(
            ApiError::subscribe(Some(45009)).unwrap_err().failure(),
            Failure::Throttled
        ));
    }
}
