//! [`SentOnce`]: a final's messages sent once per send key, for a platform that reads no
//! send key of its own.
//!
//! An adapter cuts a final into several messages when its markup grew the text past what
//! the platform takes ([`SendTarget::cuts`](super::SendTarget::cuts)). When a later
//! message fails, the delivery engine delivers the whole final again; on a platform that
//! drops a second send under one key (a `uuid`, a `nonce`) the messages that landed show
//! once anyway. Where the platform has no such key, the adapter sends each message through
//! [`SentOnce::once`], which remembers in memory the send keys
//! ([`DeliveryHints::send_key_hash`]) whose message landed and answers a repeat with the
//! message it sent then. A restart forgets them: a final delivered again after it may
//! repeat a message (never lose one).

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::channel::SentMessage;
use crate::error::ChannelResult;
use crate::message::DeliveryHints;

/// The send keys a [`SentOnce`] remembers. At the bound the oldest is forgotten: a final
/// delivered again after that many newer messages landed sends its message again.
pub const SENT_KEYS: usize = 4096;

/// The messages that landed, by send key (hashed), the newest [`SENT_KEYS`] (see the
/// module docs).
#[derive(Debug, Default)]
pub struct SentOnce {
    sent: Mutex<Sent>,
}

/// The remembered keys and their messages, oldest key first.
#[derive(Debug, Default)]
struct Sent {
    messages: HashMap<u64, SentMessage>,
    order: VecDeque<u64>,
}

impl SentOnce {
    /// Sends with `send` once per send key of `hints`: a message whose key landed before
    /// is answered as it was then, without a call. A send without a key always goes, and a
    /// failed one is not remembered (it is tried again with the final).
    pub async fn once<F, Fut>(&self, hints: &DeliveryHints, send: F) -> ChannelResult<SentMessage>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = ChannelResult<SentMessage>>,
    {
        let key = hints.send_key_hash();
        if let Some(sent) = key.and_then(|key| self.lock().messages.get(&key).cloned()) {
            return Ok(sent);
        }
        let sent = send().await?;
        if let Some(key) = key {
            self.lock().insert(key, sent.clone());
        }
        Ok(sent)
    }

    fn lock(&self) -> MutexGuard<'_, Sent> {
        self.sent.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Sent {
    fn insert(&mut self, key: u64, sent: SentMessage) {
        if self.messages.insert(key, sent).is_none() {
            self.order.push_back(key);
        }
        while self.order.len() > SENT_KEYS {
            if let Some(old) = self.order.pop_front() {
                self.messages.remove(&old);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::error::ChannelError;
    use crate::ids::MessageId;

    fn keyed(key: &str) -> DeliveryHints {
        DeliveryHints {
            send_key: Some(key.into()),
            ..DeliveryHints::default()
        }
    }

    /// A send that counts its calls and answers message `m{n}`.
    async fn send(calls: &AtomicUsize) -> ChannelResult<SentMessage> {
        let n = calls.fetch_add(1, Ordering::SeqCst) + 1;
        Ok(SentMessage {
            id: MessageId::new(format!("m{n}")),
        })
    }

    #[tokio::test]
    async fn a_key_that_landed_is_answered_without_a_second_send() {
        let once = SentOnce::default();
        let calls = AtomicUsize::new(0);
        let first = once.once(&keyed("e1"), || send(&calls)).await.unwrap();
        let again = once.once(&keyed("e1"), || send(&calls)).await.unwrap();
        assert_eq!(first, again);
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        let cut = keyed("e1").cut(1).into_owned();
        let other = once.once(&cut, || send(&calls)).await.unwrap();
        assert_eq!(other.id.as_str(), "m2", "another key sends");
        // No key: every send goes.
        once.once(DeliveryHints::NONE, || send(&calls))
            .await
            .unwrap();
        once.once(DeliveryHints::NONE, || send(&calls))
            .await
            .unwrap();
        assert_eq!(calls.load(Ordering::SeqCst), 4);
    }

    #[tokio::test]
    async fn a_failed_send_is_not_remembered() {
        let once = SentOnce::default();
        let calls = AtomicUsize::new(0);
        let failed = once
            .once(&keyed("e1"), || async {
                Err(ChannelError::Transport("down".into()))
            })
            .await;
        assert!(failed.is_err());
        once.once(&keyed("e1"), || send(&calls)).await.unwrap();
        assert_eq!(calls.load(Ordering::SeqCst), 1, "sent after the failure");
    }

    #[tokio::test]
    async fn past_the_bound_the_oldest_key_is_forgotten() {
        let once = SentOnce::default();
        let calls = AtomicUsize::new(0);
        for n in 0..=SENT_KEYS {
            once.once(&keyed(&format!("e{n}")), || send(&calls))
                .await
                .unwrap();
        }
        assert_eq!(once.lock().messages.len(), SENT_KEYS);
        let newest = format!("e{SENT_KEYS}");
        once.once(&keyed(&newest), || send(&calls)).await.unwrap();
        assert_eq!(
            calls.load(Ordering::SeqCst),
            SENT_KEYS + 1,
            "the newest kept"
        );
        once.once(&keyed("e0"), || send(&calls)).await.unwrap();
        assert_eq!(
            calls.load(Ordering::SeqCst),
            SENT_KEYS + 2,
            "the oldest forgotten"
        );
    }
}
