//! Errors an adapter's primitive operations report.
//!
//! Platform throttling is always [`ChannelError::RetryAfter`], whatever the platform calls
//! it, and is read through [`RetryAfterHint`] so the delivery engine has one rule for it.

use std::time::Duration;

/// What a channel operation returns: `()` or a value, or why it failed.
pub type ChannelResult<T = ()> = Result<T, ChannelError>;

/// Why a channel operation failed.
#[derive(Debug, thiserror::Error)]
pub enum ChannelError {
    /// The platform asked us to slow down.
    #[error("the platform asked to retry after {0:?}")]
    RetryAfter(Duration),
    /// The platform refused the request for good (bad chat, message too long, …).
    #[error("the platform rejected the request: {reason}")]
    Rejected {
        /// A short, log-safe reason (never message text or tokens).
        reason: String,
    },
    /// A file is over a size bound (the caller's or the platform's).
    #[error("the file is larger than {limit} bytes")]
    TooLarge {
        /// The bound, in bytes.
        limit: u64,
    },
    /// The platform could not parse the text's markup ("can't parse entities"); the same
    /// text as plain text would go through.
    #[error("the platform could not parse the reply's formatting")]
    BadMarkup,
    /// The message to edit no longer exists or can no longer be edited.
    #[error("the message can no longer be edited")]
    NotEditable,
    /// The operation is not supported by this channel.
    #[error("the channel does not support {0}")]
    Unsupported(&'static str),
    /// Network or protocol trouble talking to the platform.
    #[error("transport error: {0}")]
    Transport(String),
    /// Local I/O (the console's terminal, a staged file).
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
    /// The channel is stopped.
    #[error("the channel is stopped")]
    Stopped,
    /// The platform lets a bot answer a message only for a while and only a few times
    /// ([`ReplyWindow`](crate::ReplyWindow)), and this answer is past either bound:
    /// nothing was sent (`"closed"`: the window is over; `"used"`: every reply is spent).
    #[error("the source message can take no more replies (window {0})")]
    ReplyWindow(&'static str),
    /// A reply split into several messages met [`ChannelError::ReplyWindow`] after its
    /// first messages were shown: `rest` is what the reader did not get, as the reader
    /// would have seen it (the markup taken out), for a later message to carry (sent with
    /// [`DeliveryHints::literal`](crate::DeliveryHints::literal)). Never shown in a log:
    /// the error's text names the window's `reason` only.
    #[error("the source message took only the first messages of the reply (window {reason})")]
    ReplyWindowRest {
        /// As [`ChannelError::ReplyWindow`]'s.
        reason: &'static str,
        /// The text of the messages not sent.
        rest: String,
    },
    /// The bridge's own rate budget for the platform ([`RateBudget`](crate::RateBudget))
    /// has no room for this write: nothing was sent; room is expected after the duration.
    #[error("the rate budget has no room for {0:?}")]
    OverBudget(Duration),
    /// `finish_stream` finished the stream message with the final's first part, then a
    /// message the adapter cut after it ([`SendTarget::cuts`](crate::SendTarget::cuts))
    /// failed with the inner error: the reader has the first part. Sending the final as a
    /// new message would show that part twice, so the fallback does not; the final is
    /// delivered again as it was, finishing the same message, which an adapter returning
    /// this makes safe (each cut goes under its own send key, which the platform shows
    /// once). Transient as the inner error is; a rate limit of it is waited out like any.
    #[error("the stream message was finished, a message cut after it failed: {0}")]
    FinishedThen(Box<ChannelError>),
    /// A write went out but the platform's answer never came in time, on a connection
    /// still up: it may or may not have landed. For a final the daemon delivers again
    /// (one with a send key) the fallback does not send it as a new message at once; the
    /// final is delivered again as it was, finishing the same message, which lands if the
    /// first did not. An adapter returns this only where that repeat is harmless or
    /// refused; a refusal is an ordinary one (never read as "it landed": that could
    /// record a final that never showed as delivered). Transient. The text is log-safe
    /// (what happened, never the platform's words).
    #[error("the platform did not confirm the write: {0}")]
    Unconfirmed(String),
    /// The final's delivery gate ([`WriteGate`](crate::WriteGate)) withheld the
    /// write: nothing was sent. The daemon's journal fence does so while the final's
    /// message may belong to another replica; it is delivered later by whichever holds it.
    #[error("withheld (fenced)")]
    Withheld,
}

impl ChannelError {
    /// Whether the same call may succeed later (rate limit, network or platform trouble, a
    /// channel restarting), as opposed to a refusal that will not change.
    pub fn is_transient(&self) -> bool {
        match self {
            Self::FinishedThen(error) => error.is_transient(),
            _ => matches!(
                self,
                Self::RetryAfter(_)
                    | Self::Transport(_)
                    | Self::Unconfirmed(_)
                    | Self::Stopped
                    | Self::OverBudget(_)
                    | Self::Withheld
            ),
        }
    }

    /// `self` as what a failure after the stream message was finished with the final's
    /// first part means ([`ChannelError::FinishedThen`]).
    pub fn after_finishing(self) -> Self {
        match self {
            Self::FinishedThen(_) => self,
            error => Self::FinishedThen(Box::new(error)),
        }
    }
}

/// Reads a platform's request to slow down out of an error.
pub trait RetryAfterHint {
    /// How long to wait before the next call, if the platform said so.
    fn retry_after(&self) -> Option<Duration>;
}

impl RetryAfterHint for ChannelError {
    fn retry_after(&self) -> Option<Duration> {
        match self {
            ChannelError::RetryAfter(d) => Some(*d),
            // A cut refused by a rate limit: the chat pauses, and the final is finished
            // again in place once the wait is over (its cuts go once, by send key).
            ChannelError::FinishedThen(inner) => inner.retry_after(),
            _ => None,
        }
    }
}

impl ChannelError {
    /// A platform's own refusal of a call answered with HTTP `status`, worded by `reason`
    /// (log-safe: an operation and a code, never the platform's words):
    /// [`ChannelError::Transport`] for a server error (5xx: the same call may pass later),
    /// [`ChannelError::Rejected`] otherwise.
    pub fn refusal(status: u16, reason: &impl std::fmt::Display) -> Self {
        if status >= 500 {
            Self::Transport(reason.to_string())
        } else {
            Self::Rejected {
                reason: reason.to_string(),
            }
        }
    }
}

/// `From<$error> for ChannelError` and [`Diagnose`](crate::doctor::Diagnose) for an adapter
/// error of the kit's shape.
///
/// Into a `ChannelError`: `Http(HttpError)` as the kit maps it, each extra
/// `pattern => expression` arm as written, a coded refusal `Api { status, .. }` by its
/// status ([`ChannelError::refusal`]), anything else [`ChannelError::Rejected`] with the
/// error's (log-safe) text.
///
/// For `im-bridge doctor`: `Http` as the kit sorts it, each arm after `;` as written (a
/// pattern and the [`Failure`](crate::doctor::Failure) it means, e.g. a refused token), a
/// coded refusal by its status ([`Failure::refusal`](crate::doctor::Failure::refusal)),
/// anything else [`Failure::Unexpected`](crate::doctor::Failure::Unexpected).
///
/// ```ignore
/// im_bridge_channel::channel_error!(
///     ApiError,
///     ApiError::NotEditable { .. } => ChannelError::NotEditable;
///     ApiError::TokenInvalid { .. } => Refused,
/// );
/// ```
#[macro_export]
macro_rules! channel_error {
    (
        $error:ident $(, $pattern:pat => $mapped:expr)* $(,)?
        $(; $($sorted:pat => $failure:ident),+ $(,)?)?
    ) => {
        impl ::core::convert::From<$error> for $crate::ChannelError {
            fn from(error: $error) -> Self {
                match error {
                    $error::Http(e) => e.into(),
                    $($pattern => $mapped,)*
                    $error::Api { status, .. } => $crate::ChannelError::refusal(status, &error),
                    other => $crate::ChannelError::Rejected {
                        reason: other.to_string(),
                    },
                }
            }
        }

        impl $crate::doctor::Diagnose for $error {
            fn failure(&self) -> $crate::doctor::Failure {
                #[allow(unreachable_patterns)]
                match self {
                    $error::Http(e) => e.into(),
                    $($($sorted => $crate::doctor::Failure::$failure,)+)?
                    $error::Api { status, .. } => $crate::doctor::Failure::refusal(*status),
                    _ => $crate::doctor::Failure::Unexpected,
                }
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_error_may_pass_later_any_other_refusal_will_not() {
        let down = ChannelError::refusal(503, &"send answered code 1500");
        assert!(matches!(&down, ChannelError::Transport(r) if r == "send answered code 1500"));
        assert!(down.is_transient());
        let refused = ChannelError::refusal(400, &"send answered code 230002");
        assert!(matches!(&refused, ChannelError::Rejected { reason } if reason.contains("230002")));
        assert!(!refused.is_transient());
    }
}
