//! What can go wrong talking to the QQ bot API, and how it maps onto [`ChannelError`].
//!
//! What can go wrong on any platform's wire (network trouble, an unreadable or oversized
//! answer, a file over its bound or on a host not listed, a rate limit) is the core's
//! [`HttpError`], wrapped as [`ApiError::Http`]; the rest are QQ's own refusals. QQ
//! answers a refused call with a JSON body `{code, message, err_code?, trace_id?}`
//! (sometimes under HTTP 200) and a success with the resource itself (`{id, timestamp}`
//! for a sent message). [`ApiError::from_answer`] sorts a refusal once:
//!
//! - HTTP 429, or [`RATE_LIMIT_CODES`] (22009, "message sending too frequent"), is
//!   [`HttpError::RetryAfter`] with the kit's default wait (QQ names no reset time), read
//!   by the delivery engine through `ChannelError::RetryAfter`;
//! - HTTP 401, or [`TOKEN_INVALID_CODES`], is [`ApiError::TokenRefused`]: the call was
//!   turned away at the door, so it is retried once with a fresh token;
//! - anything else is [`ApiError::Api`] with its code and HTTP status.
//!
//! The reply budget of a source message adds two refusals made before anything is sent:
//! [`ApiError::WindowClosed`] and [`ApiError::RepliesExhausted`].
//!
//! **Delivered or not.** A send must never be repeated when it may already have reached
//! the chat (a timed-out request can still post). [`ApiError::may_have_delivered`] says
//! which errors leave that open; the reply budget counts those as used.
//!
//! No variant holds the answer's `message`, the request body or a credential: `message`
//! can quote what was sent, and the token request carries the bot secret.

use im_bridge_channel::http::HttpError;

/// Codes saying the access token was refused: 11244 (token expired or absent, the official
/// Go SDK's `APICodeTokenExpireOrNotExist`).
pub const TOKEN_INVALID_CODES: &[i64] = &[11244];
/// Codes asking us to slow down: 22009 (message sending too frequent).
pub const RATE_LIMIT_CODES: &[i64] = &[22009];
/// The code of a reply refused because its source was answered with its `msg_seq`
/// before ("消息被去重").
pub const DUPLICATE_SEQ: i64 = 40054005;
/// Codes refusing a message for a URL whose domain the bot has not registered: 40054010
/// ("消息发送失败，不允许发送url", what C2C and group replies meet) and 304003
/// (`URL_NOT_ALLOWED`, "url 未报备", bot-docs `openapi/error/error.md`). Nothing was
/// sent; the reply goes again with its links defanged (`api::links`).
pub const URL_REFUSED_CODES: &[i64] = &[40054010, 304003];
/// Codes saying the source message takes no more replies (its passive-reply window is
/// over, or its replies are used up): 304027 (`MSG_EXPIRE`), 304103 ("消息ID已过期，不能
/// 回复"), 40034005 ("回复消息msg_id已过期"), 40034031 ("msgid已经过期，不能回复"),
/// 40034128 ("被动回复时间或次数超限"). QQ's "send message" page states the limits but no
/// codes; these are the ones bots report meeting (several open-source QQ adapters list
/// them alike), so the daemon holds such an answer for the chat's next message instead of
/// losing it when QQ's count of the window ends before the bridge's does.
pub const REPLY_CLOSED_CODES: &[i64] = &[304027, 304103, 40034005, 40034031, 40034128];

/// A failed QQ API call, or a reply refused before it was sent.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// What can go wrong on any platform's wire (a rate limit included).
    #[error(transparent)]
    Http(#[from] HttpError),
    /// The access token was refused (even after a fresh one was fetched).
    #[error("QQ refused the access token for {op}")]
    TokenRefused {
        /// The operation.
        op: &'static str,
    },
    /// The source message's passive-reply window has closed (5 min in groups, 60 min in
    /// direct chats), as the budget counts it or as QQ said ([`REPLY_CLOSED_CODES`]);
    /// nothing was sent.
    #[error("the reply window of the source message has closed")]
    WindowClosed,
    /// The source message's replies are used up (5 per message); nothing was sent.
    #[error("the replies to the source message are used up")]
    RepliesExhausted,
    /// Any other refusal.
    #[error("QQ refused {op}: code {code} (HTTP {status})")]
    Api {
        /// The operation.
        op: &'static str,
        /// QQ's code (the HTTP status when the answer had none).
        code: i64,
        /// The HTTP status.
        status: u16,
    },
}

impl ApiError {
    /// Sorts a refusal of `op`: HTTP `status` and the body's `code` (when it had one that
    /// is not 0).
    pub fn from_answer(op: &'static str, status: u16, code: Option<i64>) -> Self {
        let code = code.filter(|c| *c != 0);
        if status == 429 || code.is_some_and(|c| RATE_LIMIT_CODES.contains(&c)) {
            HttpError::rate_limited(None).into()
        } else if status == 401 || code.is_some_and(|c| TOKEN_INVALID_CODES.contains(&c)) {
            Self::TokenRefused { op }
        } else if code.is_some_and(|c| REPLY_CLOSED_CODES.contains(&c)) {
            Self::WindowClosed
        } else {
            Self::Api {
                op,
                code: code.unwrap_or(i64::from(status)),
                status,
            }
        }
    }

    /// Whether the call may have reached the chat although it failed: a request that left
    /// and got no answer, an answer we could not read, a server error. Such a send must
    /// not be repeated, and its reply counts as used.
    pub fn may_have_delivered(&self) -> bool {
        match self {
            Self::Http(e) => e.may_have_delivered(),
            Self::Api { status, .. } => *status >= 500,
            _ => false,
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

    /// Whether QQ refused the message for a URL in it ([`URL_REFUSED_CODES`]).
    pub fn is_url_refused(&self) -> bool {
        matches!(self, Self::Api { code, status, .. } if *status < 500 && URL_REFUSED_CODES.contains(code))
    }

    /// QQ's code of a coded refusal ([`ApiError::Api`]).
    pub fn code(&self) -> Option<i64> {
        match self {
            Self::Api { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// Whether QQ refused the access token the call carried.
    pub fn is_token_refused(&self) -> bool {
        matches!(self, Self::TokenRefused { .. })
    }
}

im_bridge_channel::channel_error!(ApiError,
    // The reply budget's own refusals: the daemon holds such an answer for a later message.
    ApiError::WindowClosed => im_bridge_channel::ChannelError::ReplyWindow("closed"),
    ApiError::RepliesExhausted => im_bridge_channel::ChannelError::ReplyWindow("used");
    ApiError::TokenRefused { .. } => Refused);

#[cfg(test)]
mod tests {
    use im_bridge_channel::ChannelError;

    use super::*;
    use im_bridge_channel::http::DEFAULT_RETRY_AFTER;

    #[test]
    fn refusals_are_sorted_by_status_and_code() {
        let e = ApiError::from_answer("reply", 200, Some(22009));
        assert!(matches!(e, ApiError::Http(HttpError::RetryAfter(d)) if d == DEFAULT_RETRY_AFTER));
        assert!(!e.may_have_delivered());
        assert!(matches!(
            ChannelError::from(e),
            ChannelError::RetryAfter(d) if d == DEFAULT_RETRY_AFTER
        ));
        assert!(matches!(
            ApiError::from_answer("reply", 429, None),
            ApiError::Http(HttpError::RetryAfter(_))
        ));
        for (status, code) in [(401, None), (401, Some(11244)), (400, Some(11244))] {
            let e = ApiError::from_answer("reply", status, code);
            assert!(
                matches!(e, ApiError::TokenRefused { .. }),
                "{status} {code:?}"
            );
            assert!(!e.may_have_delivered());
        }
        let e = ApiError::from_answer("reply", 400, Some(40054005));
        assert!(matches!(
            e,
            ApiError::Api {
                code: 40054005,
                status: 400,
                ..
            }
        ));
        assert!(!e.is_transient() && !e.may_have_delivered());
        let ChannelError::Rejected { reason } = ChannelError::from(e) else {
            panic!("not rejected");
        };
        assert!(reason.contains("40054005"), "{reason}");
        let e = ApiError::from_answer("reply", 502, Some(0));
        assert!(matches!(e, ApiError::Api { code: 502, .. }));
        assert!(e.is_transient() && e.may_have_delivered());
        assert!(matches!(ChannelError::from(e), ChannelError::Transport(_)));
        for (local, reason) in [
            (ApiError::WindowClosed, "closed"),
            (ApiError::RepliesExhausted, "used"),
        ] {
            assert!(!local.may_have_delivered());
            assert!(matches!(
                ChannelError::from(local),
                ChannelError::ReplyWindow(r) if r == reason
            ));
        }
    }
}
