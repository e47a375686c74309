//! [`SendParts`]: a text the adapter's own limit cut into several messages, sent as one
//! reply.
//!
//! The renderer splits an answer within [`Capabilities`](crate::Capabilities)'
//! `max_message_len`, but what it cannot see (link addresses, escaping, a card's JSON) can
//! grow a part past what the platform takes; the adapter cuts that part again. The first
//! message is the reply (its id is the one edited later); each one after it is a cut
//! ([`SendTarget::cuts`]) under a send key of its own, so a final delivered again after a
//! later message failed repeats none that landed.

use std::future::Future;

use super::{SendTarget, SentMessage};
use crate::error::ChannelResult;

/// An adapter's send of one message, and the reply of several built on it.
pub trait SendParts: Sync {
    /// Sends one message to `to`, under `to`'s hints (a cut's for every message after the
    /// first).
    fn send_part(
        &self,
        to: &SendTarget<'_>,
        text: &str,
    ) -> impl Future<Output = ChannelResult<SentMessage>> + Send;

    /// Sends `parts` as one reply: the first as the message answered, the rest as its cuts
    /// ([`SendParts::send_cuts`]). No parts sends one empty message (the platform's error
    /// tells what it makes of it).
    fn send_parts(
        &self,
        to: &SendTarget<'_>,
        parts: Vec<String>,
    ) -> impl Future<Output = ChannelResult<SentMessage>> + Send {
        async move {
            let mut parts = parts.into_iter();
            let first = parts.next().unwrap_or_default();
            let sent = self.send_part(to, &first).await?;
            self.send_cuts(to, parts).await?;
            Ok(sent)
        }
    }

    /// Sends `cuts`, the messages after a reply's first, in order, each under its cut's
    /// hints; stops at the first that fails.
    fn send_cuts<I>(
        &self,
        to: &SendTarget<'_>,
        cuts: I,
    ) -> impl Future<Output = ChannelResult> + Send
    where
        I: IntoIterator<Item = String> + Send,
        I::IntoIter: Send,
    {
        async move {
            for (hints, text) in to.cuts(cuts) {
                self.send_part(&to.with_hints(&hints), &text).await?;
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::error::ChannelError;
    use crate::ids::MessageId;
    use crate::message::{DeliveryHints, InboundMessage, OutboundMessage};

    /// Records each message's text and send key; fails the send numbered `fail_at`.
    #[derive(Default)]
    struct Parts {
        sent: Mutex<Vec<(String, Option<String>)>>,
        fail_at: Option<usize>,
    }

    impl SendParts for Parts {
        async fn send_part(&self, to: &SendTarget<'_>, text: &str) -> ChannelResult<SentMessage> {
            let mut sent = self.sent.lock().unwrap();
            if self.fail_at == Some(sent.len()) {
                return Err(ChannelError::Transport("down".into()));
            }
            sent.push((text.to_owned(), to.hints.send_key.clone()));
            Ok(SentMessage {
                id: MessageId::new(format!("m{}", sent.len())),
            })
        }
    }

    fn reply() -> OutboundMessage {
        InboundMessage::new("parts", "c1", "u1", "q").reply("", true)
    }

    fn keyed<'a>(reply: &'a OutboundMessage, hints: &'a DeliveryHints) -> SendTarget<'a> {
        SendTarget {
            hints,
            ..SendTarget::from(reply)
        }
    }

    #[tokio::test]
    async fn the_first_part_is_the_reply_and_each_cut_has_a_key_of_its_own() {
        let parts = Parts::default();
        let hints = DeliveryHints {
            send_key: Some("e1:1".into()),
            ..DeliveryHints::default()
        };
        let texts = ["a", "b", "c"].map(String::from).to_vec();
        let sent = parts
            .send_parts(&keyed(&reply(), &hints), texts)
            .await
            .unwrap();
        assert_eq!(sent.id.as_str(), "m1", "the first message answers");
        let keys = parts.sent.into_inner().unwrap();
        assert_eq!(
            keys,
            [
                ("a".into(), Some("e1:1".into())),
                ("b".into(), hints.cut(1).send_key.clone()),
                ("c".into(), hints.cut(2).send_key.clone()),
            ]
        );
        assert_ne!(keys[1].1, keys[0].1);
    }

    #[tokio::test]
    async fn a_failed_cut_stops_the_rest_and_fails_the_reply() {
        let parts = Parts {
            fail_at: Some(1),
            ..Parts::default()
        };
        let texts = ["a", "b", "c"].map(String::from).to_vec();
        let error = parts
            .send_parts(&SendTarget::from(&reply()), texts)
            .await
            .unwrap_err();
        assert!(error.is_transient(), "{error}");
        assert_eq!(
            parts.sent.into_inner().unwrap().len(),
            1,
            "nothing after it"
        );
    }

    #[tokio::test]
    async fn no_parts_send_one_empty_message() {
        let parts = Parts::default();
        parts
            .send_parts(&SendTarget::from(&reply()), Vec::new())
            .await
            .unwrap();
        assert_eq!(parts.sent.into_inner().unwrap(), [(String::new(), None)]);
    }
}
