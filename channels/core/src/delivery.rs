//! The delivery engine: turns a conversation's outbound stream into primitive calls.
//!
//! For each `(chat, source message)` the manager publishes zero or more non-final
//! cumulative texts, then exactly one final. The engine:
//! - drops non-finals on channels that cannot show them;
//! - sends the first non-final as a new message and edits it for later ones, skipping
//!   unchanged text; a failed non-final is never retried;
//! - lands the final: it finishes the stream message, falls back to a new message when the
//!   edit fails, and waits out a platform's `Retry-After` (a bounded number of times);
//! - uploads attachments only after the final text was accepted.
//!
//! Stream state lives only between a conversation's first non-final and its final, so the
//! map is bounded by the number of runs in flight.

pub mod split;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::channel::{Channel, SendTarget, SentMessage};
use crate::error::{ChannelError, RetryAfterHint};
use crate::ids::{ChatId, MessageId};
use crate::message::OutboundMessage;

/// How many times a final waits out `Retry-After` before it gives up.
const FINAL_ATTEMPTS: u32 = 4;
/// The longest `Retry-After` a final waits for; a longer one fails the delivery.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

type StreamKey = (ChatId, Option<MessageId>);

struct StreamState {
    message: MessageId,
    last_text: String,
}

/// Delivers outbound messages to one channel.
pub struct Delivery {
    channel: Arc<dyn Channel>,
    streams: Mutex<HashMap<StreamKey, StreamState>>,
}

impl std::fmt::Debug for Delivery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Delivery")
            .field("channel", &self.channel.name())
            .finish()
    }
}

impl Delivery {
    /// A delivery engine over `channel`.
    pub fn new(channel: Arc<dyn Channel>) -> Self {
        Self {
            channel,
            streams: Mutex::new(HashMap::new()),
        }
    }

    /// The channel this engine delivers to.
    pub fn channel(&self) -> &Arc<dyn Channel> {
        &self.channel
    }

    /// Delivers one outbound message. A non-final that cannot be shown returns `Ok`.
    pub async fn deliver(&self, msg: &OutboundMessage) -> Result<(), ChannelError> {
        let key = (msg.chat_id.clone(), msg.thread_ts.clone());
        if msg.is_final {
            self.deliver_final(key, msg).await
        } else {
            self.deliver_partial(key, msg).await;
            Ok(())
        }
    }

    async fn deliver_partial(&self, key: StreamKey, msg: &OutboundMessage) {
        if !self.channel.capabilities().shows_partial_updates() {
            return;
        }
        let existing = {
            let streams = self.lock();
            streams
                .get(&key)
                .map(|s| (s.message.clone(), s.last_text == msg.text))
        };
        let target = SendTarget::from(msg);
        match existing {
            Some((_, true)) => {}
            Some((message, false)) => {
                match self.channel.edit_text(target, &message, &msg.text).await {
                    Ok(()) => {
                        if let Some(state) = self.lock().get_mut(&key) {
                            state.last_text.clone_from(&msg.text);
                        }
                    }
                    Err(error) => {
                        tracing::debug!(channel = self.channel.name(), %error, "Dropped a partial update.");
                    }
                }
            }
            None => match self.channel.start_stream(target, &msg.text).await {
                Ok(SentMessage { id }) => {
                    self.lock().insert(
                        key,
                        StreamState {
                            message: id,
                            last_text: msg.text.clone(),
                        },
                    );
                }
                Err(error) => {
                    tracing::debug!(channel = self.channel.name(), %error, "Dropped a partial update.");
                }
            },
        }
    }

    async fn deliver_final(
        &self,
        key: StreamKey,
        msg: &OutboundMessage,
    ) -> Result<(), ChannelError> {
        let stream = self.lock().remove(&key);
        let target = SendTarget::from(msg);
        let mut finished = false;
        if let Some(state) = stream {
            match with_retry_after(|| {
                self.channel
                    .finish_stream(target, &state.message, &msg.text)
            })
            .await
            {
                Ok(()) => finished = true,
                Err(error) => {
                    tracing::warn!(channel = self.channel.name(), %error, "Finishing a streamed message failed; sending the final as a new message.");
                }
            }
        }
        if !finished {
            with_retry_after(|| self.channel.send_text(target, &msg.text)).await?;
        }
        for file in &msg.attachments {
            if let Err(error) = with_retry_after(|| self.channel.send_file(target, file)).await {
                tracing::warn!(channel = self.channel.name(), %error, "Uploading an attachment failed.");
            }
        }
        Ok(())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<StreamKey, StreamState>> {
        // A poisoned map only means another delivery panicked mid-update; the state is
        // still a valid map, so keep serving.
        self.streams
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Runs `op`, waiting out `Retry-After` answers a bounded number of times.
async fn with_retry_after<T, F, Fut>(mut op: F) -> Result<T, ChannelError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, ChannelError>>,
{
    let mut attempt = 1;
    loop {
        match op().await {
            Err(error) if attempt < FINAL_ATTEMPTS => match error.retry_after() {
                Some(wait) if wait <= MAX_RETRY_AFTER => {
                    tokio::time::sleep(wait).await;
                    attempt += 1;
                }
                _ => return Err(error),
            },
            other => return other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capabilities::Capabilities;
    use crate::channel::ChannelExit;
    use crate::inbound::InboundSink;
    use crate::message::InboundMessage;
    use async_trait::async_trait;
    use tokio_util::sync::CancellationToken;

    #[derive(Debug, Clone, PartialEq)]
    enum Call {
        Send(String),
        Edit(String, String),
        Finish(String, String),
    }

    struct Recorder {
        caps: Capabilities,
        calls: Mutex<Vec<Call>>,
        fail_finish: bool,
        retry_after_once: Mutex<bool>,
    }

    impl Recorder {
        fn new(caps: Capabilities) -> Arc<Self> {
            Arc::new(Self {
                caps,
                calls: Mutex::new(Vec::new()),
                fail_finish: false,
                retry_after_once: Mutex::new(false),
            })
        }
        fn calls(&self) -> Vec<Call> {
            self.calls.lock().unwrap().clone()
        }
    }

    #[async_trait]
    impl Channel for Recorder {
        fn name(&self) -> &'static str {
            "recorder"
        }
        fn capabilities(&self) -> Capabilities {
            self.caps
        }
        async fn run(
            &self,
            _: InboundSink,
            _: CancellationToken,
        ) -> Result<ChannelExit, ChannelError> {
            Ok(ChannelExit::Stopped)
        }
        async fn send_text(
            &self,
            _: SendTarget<'_>,
            text: &str,
        ) -> Result<SentMessage, ChannelError> {
            {
                let mut once = self.retry_after_once.lock().unwrap();
                if *once {
                    *once = false;
                    return Err(ChannelError::RetryAfter(Duration::from_secs(2)));
                }
            }
            let mut calls = self.calls.lock().unwrap();
            calls.push(Call::Send(text.into()));
            Ok(SentMessage {
                id: MessageId::new(format!("m{}", calls.len())),
            })
        }
        async fn edit_text(
            &self,
            _: SendTarget<'_>,
            m: &MessageId,
            text: &str,
        ) -> Result<(), ChannelError> {
            self.calls
                .lock()
                .unwrap()
                .push(Call::Edit(m.to_string(), text.into()));
            Ok(())
        }
        async fn finish_stream(
            &self,
            _: SendTarget<'_>,
            m: &MessageId,
            text: &str,
        ) -> Result<(), ChannelError> {
            if self.fail_finish {
                return Err(ChannelError::NotEditable);
            }
            self.calls
                .lock()
                .unwrap()
                .push(Call::Finish(m.to_string(), text.into()));
            Ok(())
        }
    }

    fn editable() -> Capabilities {
        Capabilities {
            updates: crate::UpdateMode::EditInPlace,
            ..Capabilities::final_only(4096)
        }
    }

    fn out(text: &str, is_final: bool) -> OutboundMessage {
        InboundMessage::new("recorder", "c1", "u1", "q").reply(None, text, is_final)
    }

    #[tokio::test]
    async fn stream_sends_then_edits_then_finishes() {
        let rec = Recorder::new(editable());
        let d = Delivery::new(rec.clone());
        d.deliver(&out("a ▉", false)).await.unwrap();
        d.deliver(&out("a ▉", false)).await.unwrap();
        d.deliver(&out("ab ▉", false)).await.unwrap();
        d.deliver(&out("abc", true)).await.unwrap();
        assert_eq!(
            rec.calls(),
            vec![
                Call::Send("a ▉".into()),
                Call::Edit("m1".into(), "ab ▉".into()),
                Call::Finish("m1".into(), "abc".into()),
            ]
        );
        // The stream state is gone: the next final starts a new message.
        d.deliver(&out("next", true)).await.unwrap();
        assert_eq!(rec.calls().last(), Some(&Call::Send("next".into())));
    }

    #[tokio::test]
    async fn final_only_channels_drop_partials() {
        let rec = Recorder::new(Capabilities::final_only(100));
        let d = Delivery::new(rec.clone());
        d.deliver(&out("partial", false)).await.unwrap();
        d.deliver(&out("done", true)).await.unwrap();
        assert_eq!(rec.calls(), vec![Call::Send("done".into())]);
    }

    #[tokio::test]
    async fn failed_finish_falls_back_to_a_new_message() {
        let rec = Arc::new(Recorder {
            caps: editable(),
            calls: Mutex::new(Vec::new()),
            fail_finish: true,
            retry_after_once: Mutex::new(false),
        });
        let d = Delivery::new(rec.clone());
        d.deliver(&out("x ▉", false)).await.unwrap();
        d.deliver(&out("xyz", true)).await.unwrap();
        assert_eq!(
            rec.calls(),
            vec![Call::Send("x ▉".into()), Call::Send("xyz".into())]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn final_waits_out_retry_after() {
        let rec = Recorder::new(Capabilities::final_only(100));
        *rec.retry_after_once.lock().unwrap() = true;
        let d = Delivery::new(rec.clone());
        let started = tokio::time::Instant::now();
        d.deliver(&out("done", true)).await.unwrap();
        assert!(started.elapsed() >= Duration::from_secs(2));
        assert_eq!(rec.calls(), vec![Call::Send("done".into())]);
    }
}
