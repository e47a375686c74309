//! `FinishOrSend`: a streamed message that cannot be finished is replaced by a new one.
//!
//! The stream message may be gone (deleted by the user), too old to edit, or the platform
//! may refuse the edit for another reason. The final must land anyway, so any failure of
//! `finish_stream` other than `RetryAfter` sends the same text as a new message. A
//! `RetryAfter` that reaches this layer was already waited out below as far as the retry
//! policy allows; sending instead would meet the same limit, so it is returned as is.
//! Every other call passes through.

use async_trait::async_trait;

use crate::channel::{Channel, SendTarget};
use crate::error::{ChannelResult, RetryAfterHint};
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
        match self.inner.finish_stream(to, id, text).await {
            Err(error) if error.retry_after().is_none() => {
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
    use crate::error::ChannelError;

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
}
