//! `PassiveReplies`: on a platform that lets a bot answer a message only for a while and
//! only a few times (QQ: 5 replies, within 5 minutes in a group and 60 in a private chat;
//! [`ReplyWindow`]), every write answering a source message is checked here before it
//! reaches the adapter, and counted.
//!
//! - The window runs from the source message's creation, which the reply carries
//!   ([`SendTarget::source_at`], set by [`InboundMessage::reply`] from the inbound
//!   `created_at`, which such an adapter sets to the platform's timestamp). A write past it
//!   is refused with [`ChannelError::ReplyWindow`]`("closed")`, nothing sent.
//! - Each write (a message, a file) takes one of the source's replies, whether it lands or
//!   fails (a timed-out request may still have been delivered), but for one the final's
//!   gate withheld below ([`ChannelError::Withheld`], nothing sent); past the last one the
//!   write is refused with [`ChannelError::ReplyWindow`]`("used")`. Every reply to one source
//!   shares the count: a command's answer, a notice, the final's messages. Where the
//!   platform shows a repeat under one send key once and counts it once
//!   ([`ReplyWindow::repeats_shown_once`]: QQ, by the `msg_seq` the key gives), a message
//!   made again under a key that already took a reply takes none (a file always takes one:
//!   it goes under its final's key, but is a write of its own).
//! - [`ReplyQuotas::remaining`] tells the length layer, at delivery time, how many messages a
//!   final may still fill, so it can end the last one with the reply's truncation note
//!   ([`DeliveryHints::truncated_note`](crate::DeliveryHints::truncated_note)) instead of
//!   losing its tail. On such a platform the replies the final's own messages took in an
//!   earlier attempt (its send key's parts, cuts and pieces) count as left for it: a final
//!   delivered again is split as it was the first time, each message under the key it
//!   had, so what landed is not shown again and what did not is not cut off.
//!
//! Refusals are counted in [`REPLY_WINDOW_REFUSED`] and logged (never the text). The count
//! is per replica and bounded ([`MAX_SOURCES`], the oldest forgotten first); a source whose
//! window has closed needs no count.
//!
//! Channels without a reply window, and writes that answer no source, pass through.
//!
//! [`ReplyWindow`]: crate::ReplyWindow
//! [`InboundMessage::reply`]: crate::InboundMessage::reply

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;

use crate::capabilities::ReplyWindow;
use crate::channel::{Channel, SendTarget, SentMessage};
use crate::error::{ChannelError, ChannelResult};
use crate::ids::{ChatId, MessageId};
use crate::message::{OutboundFile, now_unix};

use super::forward_channel;

/// Counter of writes refused by a reply window, by `channel` and `reason` (`closed`,
/// `used`).
pub const REPLY_WINDOW_REFUSED: &str = "im_bridge_reply_window_refused_total";
/// Sources whose replies are counted at most.
pub const MAX_SOURCES: usize = 4096;

/// How many replies each source message has taken, shared by the layers of one channel.
#[derive(Debug, Default)]
pub struct ReplyQuotas {
    /// `(chat, source)` → what answered it.
    used: Mutex<HashMap<(ChatId, MessageId), Taken>>,
}

/// The replies one source took.
#[derive(Debug)]
struct Taken {
    /// How many.
    count: u32,
    /// When the source's window closes (Unix seconds).
    closes: f64,
    /// The send keys of those that had one (at most `count` of them).
    keys: Vec<String>,
}

impl Taken {
    /// How many of the replies were taken by the messages of the final whose send key is
    /// `key`: under it, or one of its parts', cuts' or pieces' keys.
    fn of_final(&self, key: &str) -> u32 {
        let of = |taken: &&String| {
            taken
                .strip_prefix(key)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '/', '+']))
        };
        u32::try_from(self.keys.iter().filter(of).count()).unwrap_or(u32::MAX)
    }
}

impl ReplyQuotas {
    fn lock(&self) -> MutexGuard<'_, HashMap<(ChatId, MessageId), Taken>> {
        self.used.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// How many more messages may answer `to`'s source under `window`, the replies its own
    /// final's messages took before included (see the module docs): `None` when there is
    /// no bound (no window, or no source), `Some(0)` when its window has closed or its
    /// replies are spent.
    pub fn remaining(&self, window: Option<ReplyWindow>, to: &SendTarget<'_>) -> Option<u32> {
        let (window, source) = (window?, to.reply_to?);
        if closes_at(window, to) <= now_unix() {
            return Some(0);
        }
        let used = self
            .lock()
            .get(&(to.chat_id.clone(), source.clone()))
            .map_or(0, |taken| {
                let own = counted_key(window, to, true).map_or(0, |k| taken.of_final(k));
                taken.count.saturating_sub(own)
            });
        Some(window.max_replies_per_source.saturating_sub(used))
    }

    /// Takes one reply for a write to `to` (`true`), or none for a message made again under
    /// a send key that took one already (`false`, [`counted_key`]), or says why none is
    /// left. `message`: a message, not a file.
    fn take(
        &self,
        window: ReplyWindow,
        to: &SendTarget<'_>,
        message: bool,
    ) -> Result<bool, &'static str> {
        let Some(source) = to.reply_to else {
            return Ok(false);
        };
        let now = now_unix();
        let closes = closes_at(window, to);
        if closes <= now {
            return Err("closed");
        }
        let mut used = self.lock();
        let key = (to.chat_id.clone(), source.clone());
        if used.len() >= MAX_SOURCES && !used.contains_key(&key) {
            used.retain(|_, taken| taken.closes > now);
            if used.len() >= MAX_SOURCES
                && let Some(first) = used
                    .iter()
                    .min_by(|a, b| a.1.closes.total_cmp(&b.1.closes))
                    .map(|(k, _)| k.clone())
            {
                used.remove(&first);
            }
        }
        let taken = used.entry(key).or_insert(Taken {
            count: 0,
            closes,
            keys: Vec::new(),
        });
        let send_key = counted_key(window, to, message);
        if let Some(send_key) = send_key
            && taken.keys.iter().any(|k| k == send_key)
        {
            return Ok(false);
        }
        if taken.count >= window.max_replies_per_source {
            return Err("used");
        }
        taken.count += 1;
        taken.keys.extend(send_key.map(str::to_owned));
        Ok(true)
    }

    /// Gives back the reply a write to `to` took, when it certainly sent nothing.
    fn give_back(&self, window: ReplyWindow, to: &SendTarget<'_>, message: bool) {
        let Some(source) = to.reply_to else {
            return;
        };
        if let Some(taken) = self.lock().get_mut(&(to.chat_id.clone(), source.clone())) {
            taken.count = taken.count.saturating_sub(1);
            if let Some(send_key) = counted_key(window, to, message) {
                taken.keys.retain(|k| k != send_key);
            }
        }
    }
}

/// The send key a reply's count remembers a write to `to` by: a message's, where the
/// platform shows a repeat under one key once ([`ReplyWindow::repeats_shown_once`]);
/// `None` for a file, or on a platform that reads no key (every write counts).
fn counted_key<'t>(window: ReplyWindow, to: &'t SendTarget<'_>, message: bool) -> Option<&'t str> {
    let keyed = window.repeats_shown_once && message;
    to.hints.send_key.as_deref().filter(|_| keyed)
}

/// When the window of `to`'s source closes (Unix seconds). A reply that does not say when
/// its source was created is taken as answering a message that just arrived.
fn closes_at(window: ReplyWindow, to: &SendTarget<'_>) -> f64 {
    let created = to.source_at.unwrap_or_else(now_unix);
    created + window.length(to.chat_kind).as_secs_f64()
}

/// The passive-reply layer (see the module docs).
#[derive(Debug)]
pub struct PassiveReplies<C> {
    inner: C,
    quotas: Arc<ReplyQuotas>,
}

impl<C: Channel> PassiveReplies<C> {
    /// Counts the replies `inner` sends in `quotas`.
    pub fn new(inner: C, quotas: Arc<ReplyQuotas>) -> Self {
        Self { inner, quotas }
    }

    /// The wrapped channel.
    pub fn inner(&self) -> &C {
        &self.inner
    }

    /// Takes a reply for a write to `to` (`true` if it took one), or refuses it.
    /// `message`: a message, not a file.
    fn admit(&self, to: &SendTarget<'_>, message: bool) -> ChannelResult<bool> {
        let Some(window) = self.inner.capabilities().reply_window else {
            return Ok(false);
        };
        self.quotas.take(window, to, message).map_err(|reason| {
            let channel = self.inner.name();
            metrics::counter!(REPLY_WINDOW_REFUSED, "channel" => channel, "reason" => reason)
                .increment(1);
            tracing::warn!(
                channel,
                reason,
                "A reply was not sent: the platform takes no more replies to its message."
            );
            ChannelError::ReplyWindow(reason)
        })
    }

    /// A write the final's gate withheld below sent nothing: the reply it `took` is given
    /// back.
    fn settle<T>(&self, to: &SendTarget<'_>, took: bool, message: bool, result: &ChannelResult<T>) {
        if let Some(window) = self.inner.capabilities().reply_window
            && took
            && matches!(result, Err(ChannelError::Withheld))
        {
            self.quotas.give_back(window, to, message);
        }
    }
}

#[async_trait]
impl<C: Channel> Channel for PassiveReplies<C> {
    forward_channel!(inner() => identity, name, capabilities, is_connected, exclusive_transport, run, edit_text,
        show_typing, turn_ended, react, thread_of, fetch_file);

    async fn send_text(&self, to: SendTarget<'_>, text: &str) -> ChannelResult<SentMessage> {
        let took = self.admit(&to, true)?;
        let sent = self.inner.send_text(to, text).await;
        self.settle(&to, took, true, &sent);
        sent
    }

    async fn start_stream(&self, to: SendTarget<'_>, text: &str) -> ChannelResult<SentMessage> {
        let took = self.admit(&to, true)?;
        let sent = self.inner.start_stream(to, text).await;
        self.settle(&to, took, true, &sent);
        sent
    }

    /// Finishing edits a message that already took its reply.
    async fn finish_stream(&self, to: SendTarget<'_>, id: &MessageId, text: &str) -> ChannelResult {
        self.inner.finish_stream(to, id, text).await
    }

    async fn send_file(&self, to: SendTarget<'_>, file: &OutboundFile) -> ChannelResult {
        let took = self.admit(&to, false)?;
        let sent = self.inner.send_file(to, file).await;
        self.settle(&to, took, false, &sent);
        sent
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    use crate::capabilities::{Capabilities, LateReplies};
    use crate::delivery::Delivery;
    use crate::delivery::recorder::{Call, Op, Recorder, attachment, out_to};
    use crate::message::ChatKind;
    use crate::message::OutboundMessage;

    /// QQ's rules on a 10-character final-only channel.
    fn windowed() -> Capabilities {
        Capabilities {
            reply_window: Some(ReplyWindow {
                group: Duration::from_secs(300),
                private: Duration::from_secs(3600),
                max_replies_per_source: 5,
                late: LateReplies::NextMessage,
                repeats_shown_once: true,
            }),
            ..Capabilities::final_only(10)
        }
    }

    fn answer(source: &str, kind: ChatKind, text: &str, age_secs: f64) -> OutboundMessage {
        let mut msg = out_to(source, kind, text, true);
        msg.source_created_at = Some(now_unix() - age_secs);
        msg.hints.truncated_note = Some("[cut]".into());
        msg
    }

    fn sent(rec: &Recorder) -> Vec<String> {
        rec.calls()
            .into_iter()
            .filter_map(|c| match c {
                Call::Send(text) => Some(text),
                _ => None,
            })
            .collect()
    }

    /// A keyed final of three messages whose third failed for now is delivered again (the
    /// journal's retry, in the same process): the replies its first attempt took are its
    /// own, so it is split as before, each message under its key, and the third lands;
    /// cut short to the two replies "left", its end would be lost for good, the first two
    /// dropped by the platform as repeats.
    #[tokio::test]
    async fn a_final_delivered_again_is_split_as_before_and_loses_nothing() {
        let rec = Recorder::new(windowed());
        let delivery = Delivery::new(rec.clone());
        let mut long = answer("s1", ChatKind::Group, &"word ".repeat(5), 10.0);
        long.hints.send_key = Some("e1:1".into());
        rec.pass(Op::Send);
        rec.pass(Op::Send);
        rec.fail(Op::Send, ChannelError::Transport("timed out".into()));
        assert!(delivery.deliver(&long).await.unwrap_err().is_transient());
        let first = sent(&rec);
        assert_eq!(first.len(), 2, "{first:?}");
        delivery.deliver(&long).await.unwrap();
        let texts = sent(&rec);
        assert_eq!(texts[2..4], first[..], "the same messages again");
        assert_eq!(texts.len(), 5, "{texts:?}");
        assert!(!texts[4].contains("[cut]"), "{texts:?}");
        let keys = rec.send_keys();
        assert_eq!(keys[..2], keys[2..4], "under the same keys");
        // Three replies taken in all: a repeat under a counted key takes none.
        assert_eq!(
            delivery.replies_left(&answer("s1", ChatKind::Group, "x", 10.0)),
            Some(2)
        );
    }

    #[tokio::test]
    async fn a_long_final_fills_the_replies_left_and_ends_with_the_note() {
        let rec = Recorder::new(windowed());
        let delivery = Delivery::new(rec.clone());
        // One reply taken first (a command's answer), then an answer of eight messages.
        let first = answer("s1", ChatKind::Group, "on it", 10.0);
        delivery.deliver(&first).await.unwrap();
        assert_eq!(delivery.replies_left(&first), Some(4));
        let long = answer("s1", ChatKind::Group, &"word ".repeat(16), 10.0);
        delivery.deliver(&long).await.unwrap();
        let texts = sent(&rec);
        assert_eq!(texts.len(), 5, "{texts:?}");
        // The last one cut to leave room for the note.
        assert_eq!(texts[4], "wo…\n\n[cut]");
        assert!(texts.iter().all(|t| t.chars().count() <= 10), "{texts:?}");
        // Nothing more answers that source, and nothing reaches the adapter.
        assert_eq!(delivery.replies_left(&long), Some(0));
        let late = answer("s1", ChatKind::Group, "more", 10.0);
        assert!(matches!(
            delivery.deliver(&late).await,
            Err(ChannelError::ReplyWindow("used"))
        ));
        assert_eq!(sent(&rec).len(), 5);
        // Another source has its own replies.
        delivery
            .deliver(&answer("s2", ChatKind::Group, "ok", 1.0))
            .await
            .unwrap();
        assert_eq!(sent(&rec).len(), 6);
    }

    #[tokio::test]
    async fn a_closed_window_sends_nothing() {
        let rec = Recorder::new(windowed());
        let delivery = Delivery::new(rec.clone());
        // 301 s: past a group's 5 minutes, well within a private chat's hour.
        let group = answer("s1", ChatKind::Group, "late", 301.0);
        assert_eq!(delivery.replies_left(&group), Some(0));
        assert!(matches!(
            delivery.deliver(&group).await,
            Err(ChannelError::ReplyWindow("closed"))
        ));
        assert!(rec.calls().is_empty());
        let private = answer("s2", ChatKind::Private, "fine", 301.0);
        delivery.deliver(&private).await.unwrap();
        assert_eq!(sent(&rec), ["fine"]);
    }

    #[tokio::test]
    async fn files_take_replies_and_unbounded_channels_pass_through() {
        let rec = Recorder::new(windowed());
        let delivery = Delivery::new(rec.clone());
        let mut msg = answer("s1", ChatKind::Private, "files", 1.0);
        msg.attachments = vec![attachment("a.txt"), attachment("b.txt")];
        delivery.deliver(&msg).await.unwrap();
        assert_eq!(delivery.replies_left(&msg), Some(2));
        // Without a window nothing is counted.
        let rec = Recorder::new(Capabilities::final_only(10));
        let delivery = Delivery::new(rec.clone());
        let msg = answer("s1", ChatKind::Group, &"word ".repeat(16), 1000.0);
        delivery.deliver(&msg).await.unwrap();
        assert_eq!(sent(&rec).len(), 8);
        assert_eq!(delivery.replies_left(&msg), None);
    }

    /// A repeat under a counted key takes no reply only for a message on a platform that
    /// shows such a repeat once: a final's files (under its key, but writes of their own)
    /// always take one, and where the platform reads no key (WeChat) so does every repeat.
    #[tokio::test]
    async fn files_and_repeats_a_platform_does_not_drop_take_replies() {
        let other = answer("s1", ChatKind::Private, "x", 1.0);
        let mut keyed = answer("s1", ChatKind::Private, "files", 1.0);
        keyed.hints.send_key = Some("e1:1".into());
        keyed.attachments = vec![attachment("a.txt"), attachment("b.txt")];
        let delivery = Delivery::new(Recorder::new(windowed()));
        delivery.deliver(&keyed).await.unwrap();
        assert_eq!(
            delivery.replies_left(&other),
            Some(2),
            "a text and two files"
        );
        let mut unkeyed_platform = windowed();
        if let Some(window) = unkeyed_platform.reply_window.as_mut() {
            window.repeats_shown_once = false;
        }
        let delivery = Delivery::new(Recorder::new(unkeyed_platform));
        keyed.attachments.clear();
        delivery.deliver(&keyed).await.unwrap();
        delivery.deliver(&keyed).await.unwrap();
        assert_eq!(delivery.replies_left(&other), Some(3), "each send counts");
        assert_eq!(
            delivery.replies_left(&keyed),
            Some(3),
            "none counted as its own"
        );
    }

    #[test]
    fn the_count_is_bounded() {
        let quotas = ReplyQuotas::default();
        let window = windowed().reply_window.unwrap();
        for n in 0..MAX_SOURCES + 5 {
            let msg = answer(&format!("s{n}"), ChatKind::Group, "x", 0.0);
            quotas.take(window, &SendTarget::from(&msg), true).unwrap();
        }
        assert_eq!(quotas.lock().len(), MAX_SOURCES);
    }
}
