//! The plain-text resend of a message whose markup the platform refused
//! ([`ChannelError::BadMarkup`]): what it shows and how it is sent.
//!
//! A resent message shows what the reader would have read in it, links included: each
//! link's text followed by its address ("text (url)", the form of a dialect that
//! [writes links as text](crate::render::Dialect::links_as_text)), from
//! [`Rendered::plain_linked`]. One platform refusal is a message carrying too many link
//! addresses (Telegram's "entities too long"), and a resend with its words alone would
//! leave every link with nowhere to go. Written out, the addresses may take the message
//! past the limit: it is then split as a literal final is ([`LimitLength::literal`]: at a
//! line break or a space where one fits, so an address is cut only when it alone is over
//! the limit), each piece written in the markup literally. The first piece goes through
//! the call the message was refused on (a new message, or the finish of a stream's); the
//! others follow as new messages, each under a send key of its own
//! ([`DeliveryHints::piece`](crate::DeliveryHints::piece)).

use crate::channel::{Channel, SendTarget};
use crate::error::{ChannelError, ChannelResult};
use crate::render::Rendered;

use super::{LimitLength, MARKUP_FALLBACKS};

impl<C: Channel> LimitLength<C> {
    /// Makes `call` with `message`'s text; when the platform could not parse the markup,
    /// once more with the first piece of its plain-text resend. Answers what `call` did
    /// and the pieces after the first, for [`LimitLength::send_pieces`] (none but for a
    /// resend longer than one message).
    pub(super) async fn with_fallback<T, F, Fut>(
        &self,
        message: &Rendered,
        call: F,
    ) -> ChannelResult<(T, Vec<Rendered>)>
    where
        F: Fn(String) -> Fut,
        Fut: Future<Output = ChannelResult<T>>,
    {
        match call(message.text.clone()).await {
            Err(ChannelError::BadMarkup) => {
                let channel = self.inner.name();
                tracing::warn!(
                    channel,
                    "The platform refused a reply's formatting; resending it as plain text."
                );
                metrics::counter!(MARKUP_FALLBACKS, "channel" => channel).increment(1);
                let (first, pieces) = self.resent(message);
                let done = call(first).await?;
                Ok((done, pieces))
            }
            other => other.map(|done| (done, Vec::new())),
        }
    }

    /// `message` as it is resent in plain text (see the module docs): the first piece's
    /// text, and the pieces after it.
    fn resent(&self, message: &Rendered) -> (String, Vec<Rendered>) {
        let mut pieces = match &message.plain_linked {
            Some(linked) => self.literal(linked),
            None => Vec::new(),
        };
        // A blank piece (a run of whitespace at a cut) shows nothing.
        pieces.retain(|piece| !piece.plain.trim().is_empty());
        if pieces.is_empty() {
            let markup = self.inner.capabilities().markup;
            return (markup.literal(&message.plain), pieces);
        }
        let first = pieces.remove(0);
        (first.text, pieces)
    }

    /// Sends the `pieces` of a plain-text resend after its first, as new messages, piece
    /// `n` under the hints of piece `n` of `to`'s. A source that takes no more replies
    /// from one of them on: what was not sent (the pieces left, then the final's `later`
    /// messages), in [`ChannelError::ReplyWindowRest`].
    pub(super) async fn send_pieces(
        &self,
        to: SendTarget<'_>,
        pieces: &[Rendered],
        later: &[Rendered],
    ) -> ChannelResult {
        for (n, piece) in pieces.iter().enumerate() {
            let hints = to.hints.piece(n + 1);
            match self
                .inner
                .send_text(to.with_hints(&hints), &piece.text)
                .await
            {
                Ok(_) => {}
                Err(ChannelError::ReplyWindow(reason)) => {
                    // Cut from one text: together, the pieces left are the rest of it.
                    let mut rest = self.rest_of(&pieces[n..], true);
                    let after = self.rest_of(later, to.hints.literal);
                    if !after.is_empty() {
                        rest.push_str("\n\n");
                        rest.push_str(&after);
                    }
                    return Err(ChannelError::ReplyWindowRest { reason, rest });
                }
                Err(error) => return Err(error),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::delivery::ChannelExt;
    use crate::delivery::recorder::{Call, Op, layered_with, out_to, target};
    use crate::render::PlainText;
    use crate::{ChatKind, LengthUnit};

    /// A channel of `len` chars whose markup carries links (see `limit.rs`'s tests).
    fn brackets(len: usize) -> crate::Capabilities {
        super::super::tests::brackets(len)
    }

    /// The texts of the messages sent and finished, in order.
    fn sent(calls: &[Call]) -> Vec<&str> {
        calls
            .iter()
            .filter_map(|call| match call {
                Call::Send(text) | Call::Finish(_, text) => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }

    #[tokio::test]
    async fn a_refused_reply_is_resent_with_its_link_addresses() {
        let (rec, layer) = layered_with(brackets(4096), ChannelExt::limit_length);
        rec.fail(Op::Send, ChannelError::BadMarkup);
        layer
            .send_text(
                target(),
                "Read [the docs](https://e.x/docs) and [e.x](e.x), or <https://e.y>.",
            )
            .await
            .unwrap();
        // The form a dialect writing links as text shows, written literally.
        let expected = crate::render::render(
            "Read [the docs](https://e.x/docs) and [e.x](e.x), or <https://e.y>.",
            &PlainText,
            LengthUnit::Chars,
            4096,
        );
        assert_eq!(
            expected[0].plain,
            "Read the docs (https://e.x/docs) and e.x, or https://e.y."
        );
        assert_eq!(rec.calls(), [Call::Send(expected[0].plain.clone())]);
    }

    #[tokio::test]
    async fn a_resend_over_the_limit_is_split_within_it_each_piece_under_its_own_key() {
        let markdown = "See [one](https://e.x/1111111111), [two](https://e.x/2222222222) \
                        and [three](https://e.x/3333333333).";
        let mut keyed = out_to("s1", ChatKind::Private, "", true);
        keyed.hints.send_key = Some("e:1".into());
        let (rec, layer) = layered_with(brackets(40), ChannelExt::limit_length);
        rec.fail(Op::Send, ChannelError::BadMarkup);
        layer.send_text((&keyed).into(), markdown).await.unwrap();
        let calls = rec.calls();
        let texts = sent(&calls);
        assert!(texts.len() > 1, "{texts:?}");
        for text in &texts {
            assert!(text.chars().count() <= 40, "{texts:?}");
        }
        // Every address whole, in one piece; the words all there.
        for url in ["https://e.x/1111111111", "https://e.x/2222222222"] {
            assert!(texts.iter().any(|t| t.contains(url)), "{url} in {texts:?}");
        }
        assert!(
            texts
                .iter()
                .any(|t| t.contains("(https://e.x/3333333333)."))
        );
        let words: String = texts.concat().split_whitespace().collect();
        assert_eq!(
            words,
            "Seeone(https://e.x/1111111111),two(https://e.x/2222222222)\
             andthree(https://e.x/3333333333)."
        );
        // The first piece under the reply's key, the others apart from its parts'.
        let key = |k: &str| Some(k.to_owned());
        let mut keys = vec![key("e:1")];
        keys.extend((1..texts.len()).map(|n| key(&format!("e:1+{n}"))));
        assert_eq!(rec.send_keys(), keys);
    }

    #[tokio::test]
    async fn a_refused_finish_ends_the_stream_with_the_first_piece() {
        let markdown = "[one](https://e.x/1111111111) [two](https://e.x/2222222222)";
        let (rec, layer) = layered_with(brackets(30), ChannelExt::limit_length);
        let m = layer.start_stream(target(), "one").await.unwrap().id;
        rec.fail(Op::Finish, ChannelError::BadMarkup);
        layer.finish_stream(target(), &m, markdown).await.unwrap();
        assert_eq!(
            rec.calls()[1..],
            [
                Call::Finish(m.to_string(), "one (https://e.x/1111111111) ".into()),
                Call::Send("two (https://e.x/2222222222)".into()),
            ]
        );
    }

    #[tokio::test]
    async fn each_part_is_resent_with_the_addresses_of_its_own_links_under_keys_apart() {
        // Two messages by what the reader sees, each refused and resent in two pieces.
        let markdown = "[aaaa](https://e.x/a) bbbb bbbb bbbb [cccc](https://e.x/c) dddd";
        let mut keyed = out_to("s1", ChatKind::Private, "", true);
        keyed.hints.send_key = Some("e:1".into());
        let (rec, layer) = layered_with(brackets(24), ChannelExt::limit_length);
        rec.fail(Op::Send, ChannelError::BadMarkup);
        rec.pass(Op::Send);
        rec.pass(Op::Send);
        rec.fail(Op::Send, ChannelError::BadMarkup);
        layer.send_text((&keyed).into(), markdown).await.unwrap();
        assert_eq!(
            sent(&rec.calls()),
            [
                "aaaa (https://e.x/a) ",
                "bbbb bbbb bbbb",
                "cccc (https://e.x/c) ",
                "dddd"
            ]
        );
        let key = |k: &str| Some(k.to_owned());
        assert_eq!(
            rec.send_keys(),
            [key("e:1"), key("e:1+1"), key("e:1.1"), key("e:1.1+1")]
        );
    }

    #[tokio::test]
    async fn a_window_closing_between_the_pieces_answers_with_the_rest() {
        let markdown = "[one](https://e.x/1111111111) [two](https://e.x/2222222222)\n\n\
                        [three](https://e.x/3333333333)";
        let (rec, layer) = layered_with(brackets(30), ChannelExt::limit_length);
        rec.fail(Op::Send, ChannelError::BadMarkup);
        rec.pass(Op::Send);
        rec.fail(Op::Send, ChannelError::ReplyWindow("closed"));
        let refused = layer.send_text(target(), markdown).await;
        let Err(ChannelError::ReplyWindowRest { reason, rest }) = refused else {
            panic!("{refused:?}");
        };
        assert_eq!(reason, "closed");
        assert_eq!(
            rest,
            "two (https://e.x/2222222222)\n\nthree (https://e.x/3333333333)"
        );
        assert_eq!(
            rec.calls(),
            [Call::Send("one (https://e.x/1111111111) ".into())]
        );
    }
}
