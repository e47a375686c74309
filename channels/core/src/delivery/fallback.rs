//! `FinishOrSend`: a streamed message that cannot be finished is replaced by a new one.
//!
//! The stream message may be gone (deleted by the user), too old to edit, or the platform
//! may refuse the edit for another reason. The final must land anyway, so any failure of
//! `finish_stream` other than `RetryAfter` sends the same text as a new message. A
//! `RetryAfter` that reaches this layer was already waited out below as far as the retry
//! policy allows; sending instead would meet the same limit, so it is returned as is. So
//! is a failure after the stream message was finished (`FinishedThen`): the reader has
//! the final's first part there, and a new message would show it twice. So is any failure
//! that may pass (transient) of a final with a send key: the daemon delivers such a final
//! again, finishing the same message, and a new message now could show it twice, as the
//! finish may have landed (a timeout after the request left, an answer that never came:
//! `Unconfirmed`) or was only put off (a rate budget spent: `OverBudget`); an edit sets
//! the whole text, so finishing again is harmless. A final without a key, which nothing
//! delivers again, is sent as a new message on any failure but a rate limit. And so is a
//! finish its gate withheld (`Withheld`, `fence.rs`): nothing was tried, and the stream
//! message is finished when the final is delivered again, by whichever replica holds it.
//! Every other call passes through.

use async_trait::async_trait;

use crate::channel::{Channel, SendTarget};
use crate::error::{ChannelError, ChannelResult, RetryAfterHint};
use crate::ids::MessageId;

use super::forward_channel;

/// The fallback layer (see the module docs).
#[derive(Debug)]
pub struct FinishOrSend<C> {
    inner: C,
}

impl<C> FinishOrSend<C> {
    /// Falls back from finishing to sending over `inner`.
    pub fn new(inner: C) -> Self {
        Self { inner }
    }

    /// The wrapped channel.
    pub fn inner(&self) -> &C {
        &self.inner
    }
}

#[async_trait]
impl<C: Channel> Channel for FinishOrSend<C> {
    forward_channel!(inner() => identity, name, capabilities, is_connected, exclusive_transport, run, send_text, start_stream,
        edit_text, send_file, show_typing, turn_ended, react, thread_of, fetch_file);

    async fn finish_stream(&self, to: SendTarget<'_>, id: &MessageId, text: &str) -> ChannelResult {
        // Only a final the daemon tracks (it has a send key) is delivered again later.
        let again = to.hints.send_key.is_some();
        match self.inner.finish_stream(to, id, text).await {
            Err(error)
                if error.retry_after().is_none()
                    && !matches!(
                        error,
                        ChannelError::FinishedThen(_) | ChannelError::Withheld
                    )
                    && !(again && error.is_transient()) =>
            {
                tracing::warn!(
                    channel = self.inner.name(),
                    %error,
                    "Finishing a streamed message failed; sending the final as a new message."
                );
                self.inner.send_text(to, text).await.map(drop)
            }
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::delivery::ChannelExt;
    use crate::delivery::recorder::{Call, Op, layered, target};
    use crate::message::DeliveryHints;

    #[tokio::test]
    async fn a_refused_finish_becomes_a_send_but_retry_after_does_not() {
        let (rec, layer) = layered(100, ChannelExt::finish_or_send);
        let m = MessageId::new("m1");
        rec.fail(
            Op::Finish,
            ChannelError::Rejected {
                reason: "old".into(),
            },
        );
        layer.finish_stream(target(), &m, "final").await.unwrap();
        assert_eq!(rec.calls(), [Call::Send("final".into())]);
        rec.fail(Op::Finish, ChannelError::RetryAfter(Duration::from_secs(1)));
        assert!(layer.finish_stream(target(), &m, "final").await.is_err());
        assert_eq!(rec.attempts(Op::Send), 1);
    }

    #[tokio::test]
    async fn a_finish_that_failed_after_the_first_part_is_not_sent_again() {
        let (rec, layer) = layered(100, ChannelExt::finish_or_send);
        for cause in [
            ChannelError::Transport("timeout".into()),
            ChannelError::RetryAfter(Duration::from_secs(1)),
        ] {
            rec.fail(Op::Finish, cause.after_finishing());
            let error = layer
                .finish_stream(target(), &MessageId::new("m1"), "final")
                .await
                .unwrap_err();
            assert!(error.is_transient(), "delivered again later: {error}");
            assert_eq!(rec.attempts(Op::Send), 0, "the first part would show twice");
        }
        // A rate limit of a cut is one: the chat pauses, the final is finished again.
        let limited = ChannelError::RetryAfter(Duration::from_secs(2)).after_finishing();
        assert_eq!(limited.retry_after(), Some(Duration::from_secs(2)));
    }

    /// A keyed final whose finish failed for now (an answer that never came, a timeout
    /// after the edit left, a 5xx, the edits' budget spent) is finished again later, never sent at once as a new
    /// message beside a stream message that may show it already; a refusal still is.
    #[tokio::test]
    async fn a_keyed_final_whose_finish_failed_for_now_is_finished_again_not_sent() {
        let (rec, layer) = layered(100, ChannelExt::finish_or_send);
        let m = MessageId::new("m1");
        let hints = DeliveryHints {
            send_key: Some("e1:1".into()),
            ..DeliveryHints::default()
        };
        let keyed = SendTarget {
            hints: &hints,
            ..target()
        };
        for cause in [
            ChannelError::Unconfirmed("no answer".into()),
            ChannelError::Transport("calling edit failed: timed out".into()),
            ChannelError::OverBudget(Duration::from_secs(3)),
            ChannelError::Stopped,
        ] {
            rec.fail(Op::Finish, cause);
            let error = layer.finish_stream(keyed, &m, "final").await.unwrap_err();
            assert!(error.is_transient(), "delivered again later: {error}");
            assert_eq!(rec.attempts(Op::Send), 0, "{error}: it may show already");
        }
        rec.fail(
            Op::Finish,
            ChannelError::Rejected {
                reason: "message gone".into(),
            },
        );
        layer.finish_stream(keyed, &m, "final").await.unwrap();
        assert_eq!(rec.calls().last(), Some(&Call::Send("final".into())));
        // Without a key, trouble too sends the final as a new message.
        rec.fail(Op::Finish, ChannelError::Transport("timed out".into()));
        layer.finish_stream(target(), &m, "final").await.unwrap();
        assert_eq!(rec.attempts(Op::Send), 2);
    }
}
