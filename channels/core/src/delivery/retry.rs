//! `RetryFinals`: the calls that deliver a final wait out the platform's `Retry-After`.
//!
//! `send_text`, `finish_stream` and `send_file` carry a final reply (or its files): when
//! the platform answers `RetryAfter(d)`, the layer sleeps `d` and tries again, at most
//! [`RetryPolicy::attempts`] times in all and never for a single wait longer than
//! [`RetryPolicy::max_wait`]; past either bound the last error is returned.
//! `start_stream` and `edit_text` only show partial text, which a newer update or the final
//! supersedes, so they pass through untouched: a partial is never retried. `fetch_file`
//! delivers nothing and passes through too.
//!
//! Only `RetryAfter` is retried. Another failure may have reached the platform already
//! (a timeout after the message was posted), and sending again would show it twice.

use std::time::Duration;

use async_trait::async_trait;

use crate::channel::{Channel, SendTarget, SentMessage};
use crate::error::{ChannelResult, RetryAfterHint};
use crate::ids::MessageId;
use crate::message::OutboundFile;

use super::forward_channel;

/// How patiently finals wait out `Retry-After`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Calls made in all, the first one included (at least 1).
    pub attempts: u32,
    /// The longest single `Retry-After` waited out; a longer one fails at once.
    pub max_wait: Duration,
}

impl Default for RetryPolicy {
    /// Four attempts, waits of up to a minute: enough for Telegram's per-chat limits
    /// (a few seconds) without holding a conversation's worker for long.
    fn default() -> Self {
        Self {
            attempts: 4,
            max_wait: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// Runs `op`, waiting out `Retry-After` answers within this policy.
    pub async fn run<T, F, Fut>(&self, mut op: F) -> ChannelResult<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = ChannelResult<T>>,
    {
        let mut attempt = 1;
        loop {
            match op().await {
                Err(error) if attempt < self.attempts => match error.retry_after() {
                    Some(wait) if wait <= self.max_wait => {
                        tracing::debug!(?wait, attempt, "The platform asked to wait; retrying.");
                        tokio::time::sleep(wait).await;
                        attempt += 1;
                    }
                    _ => return Err(error),
                },
                other => return other,
            }
        }
    }
}

/// The retrying layer (see the module docs).
#[derive(Debug)]
pub struct RetryFinals<C> {
    inner: C,
    policy: RetryPolicy,
}

impl<C> RetryFinals<C> {
    /// Retries `inner`'s final calls under `policy`.
    pub fn new(inner: C, policy: RetryPolicy) -> Self {
        Self { inner, policy }
    }

    /// The wrapped channel.
    pub fn inner(&self) -> &C {
        &self.inner
    }
}

#[async_trait]
impl<C: Channel> Channel for RetryFinals<C> {
    forward_channel!(inner() => identity, name, capabilities, is_connected, exclusive_transport, run, start_stream, edit_text,
        show_typing, turn_ended, react, thread_of, fetch_file);

    async fn send_text(&self, to: SendTarget<'_>, text: &str) -> ChannelResult<SentMessage> {
        self.policy.run(|| self.inner.send_text(to, text)).await
    }

    async fn finish_stream(&self, to: SendTarget<'_>, id: &MessageId, text: &str) -> ChannelResult {
        self.policy
            .run(|| self.inner.finish_stream(to, id, text))
            .await
    }

    async fn send_file(&self, to: SendTarget<'_>, file: &OutboundFile) -> ChannelResult {
        self.policy.run(|| self.inner.send_file(to, file)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::delivery::ChannelExt;
    use crate::delivery::recorder::{Op, layered, target};
    use crate::error::ChannelError;

    #[tokio::test(start_paused = true)]
    async fn partials_are_never_retried() {
        let (rec, layer) = layered(100, |r| r.retry_finals(RetryPolicy::default()));
        rec.fail(Op::Start, ChannelError::RetryAfter(Duration::from_secs(1)));
        assert!(layer.start_stream(target(), "a").await.is_err());
        rec.fail(Op::Edit, ChannelError::RetryAfter(Duration::from_secs(1)));
        assert!(
            layer
                .edit_text(target(), &MessageId::new("m"), "a")
                .await
                .is_err()
        );
        assert_eq!((rec.attempts(Op::Start), rec.attempts(Op::Edit)), (1, 1));
    }

    #[tokio::test(start_paused = true)]
    async fn finals_and_files_are_retried_only_on_retry_after() {
        let (rec, layer) = layered(100, |r| r.retry_finals(RetryPolicy::default()));
        rec.fail(Op::Finish, ChannelError::RetryAfter(Duration::from_secs(1)));
        layer
            .finish_stream(target(), &MessageId::new("m"), "a")
            .await
            .unwrap();
        assert_eq!(rec.attempts(Op::Finish), 2);
        rec.fail(Op::Send, ChannelError::Transport("timeout".into()));
        assert!(layer.send_text(target(), "a").await.is_err());
        assert_eq!(rec.attempts(Op::Send), 1, "may have landed: not sent twice");
    }
}
