//! What iLink refuses, and how it maps onto [`ChannelError`].
//!
//! Every bot endpoint answers HTTP 200 with JSON; [`ApiError::envelope`] sorts the answer
//! once:
//!
//! - `errcode: -14` ([`SESSION_EXPIRED`]; iLink sends it without `ret`, so both are read):
//!   the session ended, or the token or the app headers were refused, which iLink answers
//!   alike. [`ApiError::SessionExpired`]: the transport logs in again (QR login) or stops.
//! - any other non-zero `ret` or `errcode` is [`ApiError::Api`] with the code; iLink's
//!   `errmsg` is never kept (it is iLink's text). `-2` is a refused send (no or a spent
//!   context token, a text over the limit, throttling: observed, all alike); the channel
//!   rules the others out before a send, so it sends a refused one again (`channel.rs`),
//!   and one still refused is [`ApiError::SendsSpent`]: held for the user's next message.
//! - no context token for the user a reply goes to is [`ApiError::NoContext`], before any
//!   call.
//!
//! The wire and the CDN fail through the kit's `HttpError`. No variant holds a URL, a body,
//! a token or a key: a code is a number, safe in logs.

use im_bridge_channel::ChannelError;
use im_bridge_channel::http::HttpError;

use crate::model::Envelope;

/// iLink's "session timeout".
pub const SESSION_EXPIRED: i64 = -14;

/// A refused or failed call.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// On the wire: transport, bounds, an HTTP status, an unreadable answer, a media URL on
    /// a host `file_hosts` does not list.
    #[error(transparent)]
    Http(#[from] HttpError),
    /// iLink ended the session (or refused the token): only a new login helps.
    #[error("iLink ended the bot's session (errcode -14) on {op}")]
    SessionExpired {
        /// The endpoint.
        op: &'static str,
    },
    /// No token: none configured, none stored, and no QR login done yet.
    #[error("the WeChat channel is not logged in")]
    NotLoggedIn,
    /// A long poll iLink held past the client's wait (its hold and the slack) without
    /// starting its answer: an empty batch, as the plugin takes its own timeout.
    #[error("iLink held {op} past the client's wait")]
    Held {
        /// The endpoint.
        op: &'static str,
    },
    /// Any other refusal.
    #[error("iLink refused {op}: ret {ret}")]
    Api {
        /// The endpoint.
        op: &'static str,
        /// The class the kit sorts by: 400 (a refusal of this request).
        status: u16,
        /// iLink's `ret` (or `errcode`).
        ret: i64,
    },
    /// A send iLink kept refusing (`ret -2`) when made again: after the causes the channel
    /// rules out and a throttle's pause, most likely the message's context token took its
    /// last send (the count of them is lost with a restart). Its source takes no more
    /// replies: the daemon holds the answer for the user's next message.
    #[error("iLink kept refusing sendmessage: ret -2")]
    SendsSpent,
    /// A reply to a user the bridge holds no context token for (they never wrote, or not
    /// since a restart without the message's own token).
    #[error("no context token for this WeChat user: a reply needs the user's message")]
    NoContext,
    /// A file's bytes could not be decrypted: a wrong key or a damaged file.
    #[error("the media file does not decrypt with its key")]
    Decrypt,
    /// A media handle that is not the adapter's.
    #[error("not a WeChat media handle")]
    BadHandle,
}

impl ApiError {
    /// Sorts `op`'s answer envelope: `Ok` for success (no code, or 0).
    pub fn envelope(op: &'static str, envelope: &Envelope) -> Result<(), Self> {
        let code = [envelope.errcode, envelope.ret]
            .into_iter()
            .flatten()
            .find(|&c| c != 0);
        match code {
            None => Ok(()),
            Some(SESSION_EXPIRED) => Err(Self::SessionExpired { op }),
            Some(ret) => Err(Self::Api {
                op,
                status: 400,
                ret,
            }),
        }
    }

    /// Whether iLink held a long poll past the client's wait without answering
    /// ([`ApiError::Held`]). An answer that began in time but whose body did not arrive
    /// whole is not one: that is a failure of its own.
    pub fn is_held(&self) -> bool {
        matches!(self, Self::Held { .. })
    }

    /// Whether only a new login can help.
    pub fn is_session_expired(&self) -> bool {
        matches!(self, Self::SessionExpired { .. } | Self::NotLoggedIn)
    }
}

im_bridge_channel::channel_error!(
    ApiError,
    e @ (ApiError::SessionExpired { .. } | ApiError::NotLoggedIn | ApiError::Held { .. }) => ChannelError::Transport(e.to_string()),
    ApiError::SendsSpent => ChannelError::ReplyWindow("used");
    ApiError::SessionExpired { .. } => Refused,
    ApiError::NotLoggedIn => Refused,
    ApiError::Held { .. } => Unreachable,
);

#[cfg(test)]
mod tests {
    use im_bridge_channel::doctor::{Diagnose, Failure};

    use super::*;

    fn sorted(json: &str) -> Result<(), ApiError> {
        ApiError::envelope("sendmessage", &serde_json::from_str(json).unwrap())
    }

    #[test]
    fn each_answer_is_sorted_once() {
        assert!(sorted("{}").is_ok());
        assert!(sorted(r#"{"ret": 0, "errcode": 0}"#).is_ok());
        let expired = sorted(r#"{"errcode": -14, "errmsg": "session timeout"}"#).unwrap_err();
        assert!(expired.is_session_expired());
        assert_eq!(expired.failure(), Failure::Refused);
        assert!(ChannelError::from(expired).is_transient());
        let refused = sorted(r#"{"ret": -2, "errmsg": "rate limited"}"#).unwrap_err();
        assert!(!refused.is_session_expired());
        let ChannelError::Rejected { reason } = ChannelError::from(refused) else {
            panic!("not rejected");
        };
        assert_eq!(reason, "iLink refused sendmessage: ret -2");
        assert!(
            !reason.contains("rate limited"),
            "iLink's words are not kept"
        );
    }
}
