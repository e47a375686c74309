//! Keeping "typing…" visible while an answer is being written, on platforms whose typing
//! hint fades (Discord: after about 10 s): [`Capabilities::typing_refresh`] says how
//! often to send it again.
//!
//! [`Typing::keep`] sends the hint again every `every` until the first reply to that
//! message is published ([`Typing::replied`], called by the replier) or the returned
//! guard drops (the turn ended without one), and for at most [`MAX_TYPING`]. One entry
//! per message being answered; entries leave with their guard.
//!
//! [`Capabilities::typing_refresh`]: im_bridge_channel::Capabilities::typing_refresh

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use im_bridge_channel::{ChatId, InboundMessage, MessageId, OutboundMessage};
use tokio_util::sync::CancellationToken;

use crate::bus::Outbound;

/// The longest a typing hint is kept up for one message.
pub const MAX_TYPING: Duration = Duration::from_secs(30 * 60);

/// Which message is being answered: channel, chat and source.
type Key = (String, ChatId, Option<MessageId>);

/// The typing hints being kept up.
#[derive(Clone, Default)]
pub(crate) struct Typing {
    kept: Arc<Mutex<HashMap<Key, CancellationToken>>>,
}

/// Stops keeping the hint up when dropped.
pub(crate) struct TypingGuard {
    kept: Arc<Mutex<HashMap<Key, CancellationToken>>>,
    key: Key,
    token: CancellationToken,
}

fn key_of(channel: &str, chat: &ChatId, source: Option<&MessageId>) -> Key {
    (channel.to_owned(), chat.clone(), source.cloned())
}

fn lock(
    kept: &Mutex<HashMap<Key, CancellationToken>>,
) -> MutexGuard<'_, HashMap<Key, CancellationToken>> {
    kept.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Typing {
    /// Sends the typing hint for `msg` again every `every` until it is replied to.
    pub(crate) fn keep(
        &self,
        outbound: Arc<Outbound>,
        msg: &InboundMessage,
        every: Duration,
    ) -> TypingGuard {
        let key = key_of(&msg.channel_name, &msg.chat_id, msg.thread_ts.as_ref());
        let token = CancellationToken::new();
        if let Some(old) = lock(&self.kept).insert(key.clone(), token.clone()) {
            old.cancel();
        }
        let hint: OutboundMessage = msg.reply(String::new(), false);
        let stop = token.clone();
        let every = every.max(Duration::from_secs(1));
        tokio::spawn(async move {
            let until = tokio::time::Instant::now() + MAX_TYPING;
            loop {
                tokio::select! {
                    // The reply and the cap win over a hint due at the same moment.
                    biased;
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep_until(until) => return,
                    () = tokio::time::sleep(every) => outbound.show_typing(&hint).await,
                }
            }
        });
        TypingGuard {
            kept: self.kept.clone(),
            key,
            token,
        }
    }

    /// A reply to `out`'s source was published: its hint is no longer kept up.
    pub(crate) fn replied(&self, out: &OutboundMessage) {
        let key = key_of(&out.channel_name, &out.chat_id, out.thread_ts.as_ref());
        if let Some(token) = lock(&self.kept).remove(&key) {
            token.cancel();
        }
    }
}

impl Drop for TypingGuard {
    fn drop(&mut self) {
        self.token.cancel();
        let mut kept = lock(&self.kept);
        if kept.get(&self.key).is_some_and(|t| t.is_cancelled()) {
            kept.remove(&self.key);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use async_trait::async_trait;
    use im_bridge_channel::{
        Capabilities, Channel, ChannelExit, ChannelIdentity, ChannelResult, InboundSink,
        SendTarget, SentMessage,
    };

    use super::*;

    /// Counts the typing hints it is asked for.
    struct Hints {
        identity: ChannelIdentity,
        hints: AtomicUsize,
    }

    #[async_trait]
    impl Channel for Hints {
        fn identity(&self) -> &ChannelIdentity {
            &self.identity
        }

        async fn run(&self, _: InboundSink, _: CancellationToken) -> ChannelResult<ChannelExit> {
            Ok(ChannelExit::Stopped)
        }

        async fn send_text(&self, _: SendTarget<'_>, _: &str) -> ChannelResult<SentMessage> {
            Ok(SentMessage {
                id: MessageId::new("m"),
            })
        }

        async fn show_typing(&self, _: SendTarget<'_>) -> ChannelResult {
            self.hints.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
    }

    fn setup() -> (Arc<Hints>, Arc<Outbound>, InboundMessage) {
        let hints = Arc::new(Hints {
            identity: ChannelIdentity::always_connected("hints", Capabilities::final_only(100)),
            hints: AtomicUsize::new(0),
        });
        let channels: Vec<Arc<dyn Channel>> = vec![hints.clone()];
        let outbound = Arc::new(Outbound::new(&channels));
        let mut msg = InboundMessage::new("hints", "c1", "u1", "hello");
        msg.thread_ts = Some(MessageId::new("s1"));
        (hints, outbound, msg)
    }

    /// Lets the spawned keeper run up to `at` of virtual time.
    async fn until(at: Duration) {
        tokio::time::sleep(at).await;
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_hint_is_sent_again_until_the_first_reply() {
        let (hints, outbound, msg) = setup();
        let typing = Typing::default();
        let _guard = typing.keep(outbound, &msg, Duration::from_secs(8));
        until(Duration::from_millis(8_100)).await;
        assert_eq!(hints.hints.load(Ordering::SeqCst), 1);
        until(Duration::from_secs(8)).await;
        assert_eq!(hints.hints.load(Ordering::SeqCst), 2);
        typing.replied(&msg.reply("answer", false));
        until(Duration::from_secs(30)).await;
        assert_eq!(
            hints.hints.load(Ordering::SeqCst),
            2,
            "none after the reply"
        );
        assert!(lock(&typing.kept).is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn the_guard_ends_it_and_it_never_outlives_the_cap() {
        let (hints, outbound, msg) = setup();
        let typing = Typing::default();
        let guard = typing.keep(outbound.clone(), &msg, Duration::from_secs(8));
        drop(guard);
        until(Duration::from_secs(30)).await;
        assert_eq!(hints.hints.load(Ordering::SeqCst), 0);
        assert!(lock(&typing.kept).is_empty());
        let _kept = typing.keep(outbound, &msg, Duration::from_secs(60));
        until(MAX_TYPING + Duration::from_secs(120)).await;
        let sent = hints.hints.load(Ordering::SeqCst);
        assert_eq!(sent, 29, "one a minute for 30 minutes, then no more");
    }
}
