//! `Newest`: remembers what each chat was sent last, so the engine can tell whether a
//! stream's message still stands at the bottom of its chat or was overtaken by another
//! ([`DeliveryHints::stays_last`](crate::DeliveryHints::stays_last)). Where a chat's
//! threads read apart ([`Channel::thread_of`]), each thread is a chat of its own here: a
//! message in one thread overtakes nothing in another.
//!
//! Only what this layer saw is known: a chat nothing was sent to since the process started
//! (or since its entry was forgotten at the bound) has no newest message, and no stream
//! message counts as overtaken there, which is how replies behaved before the hint.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use tokio::time::Instant;

use crate::channel::{Channel, SendTarget, SentMessage};
use crate::error::ChannelResult;
use crate::ids::{ChatId, MessageId};
use crate::message::OutboundFile;

use super::forward_channel;
use super::throttle::insert_bounded;

/// How many chats' (or threads') newest messages are remembered at once; at the bound the
/// one written to longest ago is forgotten.
pub const MAX_NEWEST_CHATS: usize = 4096;

/// The newest message of each chat (or thread) this engine sent to (bounded by
/// [`MAX_NEWEST_CHATS`]).
#[derive(Debug, Default)]
pub struct NewestMessages {
    chats: Mutex<HashMap<Place, (Instant, Last)>>,
}

/// What reads as one: a chat, or one of its threads ([`Channel::thread_of`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Place {
    chat: ChatId,
    thread: Option<Box<str>>,
}

impl Place {
    fn new(chat: &ChatId, thread: Option<Cow<'_, str>>) -> Self {
        Self {
            chat: chat.clone(),
            thread: thread.map(Box::from),
        }
    }
}

/// What a chat was sent last.
#[derive(Debug)]
enum Last {
    /// A message whose id the platform answered.
    Message(MessageId),
    /// An upload: the platforms do not name the message it became.
    File,
}

impl NewestMessages {
    /// Whether `chat` (its `thread`, where it has threads) is known to have been sent
    /// something after `message`.
    pub fn overtaken(
        &self,
        chat: &ChatId,
        thread: Option<Cow<'_, str>>,
        message: &MessageId,
    ) -> bool {
        self.lock()
            .get(&Place::new(chat, thread))
            .is_some_and(|(_, last)| !matches!(last, Last::Message(m) if m == message))
    }

    /// How many chats are remembered (for tests of the bound).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }

    fn note(&self, place: Place, last: Last) {
        let now = Instant::now();
        let mut chats = self.lock();
        match chats.get_mut(&place) {
            Some(known) => *known = (now, last),
            // Nothing here expires: a chat's newest message stays its newest.
            None => insert_bounded(&mut chats, place, (now, last), MAX_NEWEST_CHATS, |_| false),
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<Place, (Instant, Last)>> {
        // Poisoning only means a panic elsewhere mid-update; the map is still valid.
        self.chats.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The layer that keeps [`NewestMessages`] (see the module docs): it notes every message
/// and upload that landed, and changes no call.
#[derive(Debug)]
pub struct Newest<C> {
    inner: C,
    newest: Arc<NewestMessages>,
}

impl<C: Channel> Newest<C> {
    /// Notes into `newest` what `inner` sends.
    pub fn new(inner: C, newest: Arc<NewestMessages>) -> Self {
        Self { inner, newest }
    }

    fn inner(&self) -> &C {
        &self.inner
    }

    fn sent(
        &self,
        to: SendTarget<'_>,
        sent: ChannelResult<SentMessage>,
    ) -> ChannelResult<SentMessage> {
        if let Ok(message) = &sent {
            self.newest
                .note(self.place(to), Last::Message(message.id.clone()));
        }
        sent
    }

    /// Where a message to `to` shows.
    fn place(&self, to: SendTarget<'_>) -> Place {
        Place::new(to.chat_id, self.inner.thread_of(to))
    }
}

#[async_trait]
impl<C: Channel> Channel for Newest<C> {
    forward_channel!(inner() => identity, name, capabilities, is_connected, exclusive_transport, run, edit_text,
        finish_stream, show_typing, turn_ended, react, thread_of, fetch_file);

    async fn send_text(&self, to: SendTarget<'_>, text: &str) -> ChannelResult<SentMessage> {
        let sent = self.inner.send_text(to, text).await;
        self.sent(to, sent)
    }

    async fn start_stream(&self, to: SendTarget<'_>, text: &str) -> ChannelResult<SentMessage> {
        let sent = self.inner.start_stream(to, text).await;
        self.sent(to, sent)
    }

    async fn send_file(&self, to: SendTarget<'_>, file: &OutboundFile) -> ChannelResult {
        self.inner.send_file(to, file).await?;
        self.newest.note(self.place(to), Last::File);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::delivery::ChannelExt;
    use crate::delivery::recorder::{Op, attachment, layered, out_to, target};
    use crate::error::ChannelError;
    use crate::message::ChatKind;

    #[tokio::test]
    async fn the_newest_message_or_upload_of_each_chat_is_known() {
        let newest = Arc::new(NewestMessages::default());
        let (rec, layer) = layered(4096, |rec| rec.newest(newest.clone()));
        let chat = target().chat_id.clone();
        let m1 = layer.start_stream(target(), "a").await.unwrap().id;
        assert!(!newest.overtaken(&chat, None, &m1));
        // Edits and finishes add no message.
        layer.edit_text(target(), &m1, "ab").await.unwrap();
        layer.finish_stream(target(), &m1, "abc").await.unwrap();
        assert!(!newest.overtaken(&chat, None, &m1));
        let m2 = layer.send_text(target(), "next").await.unwrap().id;
        assert!(newest.overtaken(&chat, None, &m1));
        assert!(!newest.overtaken(&chat, None, &m2));
        layer
            .send_file(target(), &attachment("a.txt"))
            .await
            .unwrap();
        assert!(newest.overtaken(&chat, None, &m2));
        // What did not land changes nothing.
        let m3 = layer.send_text(target(), "again").await.unwrap().id;
        rec.fail(Op::Send, ChannelError::Unsupported("refused"));
        assert!(layer.send_text(target(), "lost").await.is_err());
        assert!(!newest.overtaken(&chat, None, &m3));
        // Another chat's messages are its own, and an unknown chat overtakes nothing.
        let elsewhere = out_to("s9", ChatKind::Group, "", true);
        let mut other = elsewhere.clone();
        other.chat_id = ChatId::new("c2");
        layer
            .send_text(SendTarget::from(&other), "there")
            .await
            .unwrap();
        assert!(!newest.overtaken(&chat, None, &m3));
        assert!(!newest.overtaken(&ChatId::new("c3"), None, &m3));
    }

    #[tokio::test]
    async fn each_thread_of_a_chat_with_threads_has_its_own_newest_message() {
        let newest = Arc::new(NewestMessages::default());
        let (_, layer) = layered(4096, |rec| rec.newest(newest.clone()));
        let in_thread = |thread: &str| {
            let mut msg = out_to("s1", ChatKind::Group, "", true);
            msg.metadata.insert("thread".into(), thread.into());
            msg
        };
        let (t1, t2) = (in_thread("t1"), in_thread("t2"));
        let chat = &t1.chat_id;
        let m1 = layer.start_stream((&t1).into(), "a").await.unwrap().id;
        let m2 = layer.send_text((&t2).into(), "b").await.unwrap().id;
        // A message in another thread overtakes nothing here…
        assert!(!newest.overtaken(chat, Some("t1".into()), &m1));
        assert!(!newest.overtaken(chat, Some("t2".into()), &m2));
        // …nor does one in the chat outside its threads, which is a place of its own.
        let m3 = layer.send_text(target(), "c").await.unwrap().id;
        assert!(!newest.overtaken(chat, Some("t1".into()), &m1));
        assert!(!newest.overtaken(chat, None, &m3));
        // A later message in the same thread does.
        layer
            .send_file((&t1).into(), &attachment("a.txt"))
            .await
            .unwrap();
        assert!(newest.overtaken(chat, Some("t1".into()), &m1));
    }

    #[tokio::test(start_paused = true)]
    async fn it_stays_bounded_forgetting_the_chat_written_to_longest_ago() {
        let newest = Arc::new(NewestMessages::default());
        let (_, layer) = layered(4096, |rec| rec.newest(newest.clone()));
        let first = layer.send_text(target(), "first").await.unwrap().id;
        let mut msg = out_to("s1", ChatKind::Private, "", true);
        for n in 0..MAX_NEWEST_CHATS + 10 {
            msg.chat_id = ChatId::new(format!("other{n}"));
            tokio::time::advance(std::time::Duration::from_millis(1)).await;
            layer.send_text(SendTarget::from(&msg), "x").await.unwrap();
        }
        assert_eq!(newest.len(), MAX_NEWEST_CHATS);
        // Forgotten: the first chat is not known any more, so nothing there is overtaken.
        assert!(!newest.overtaken(target().chat_id, None, &first));
    }
}
