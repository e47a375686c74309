//! `LimitLength`: every text the channel is given is in its markup and fits its length
//! limit.
//!
//! For a channel whose markup does not
//! [render Markdown](crate::render::Dialect::renders_markdown)
//! ([`Plain`](crate::render::Plain)) the text is passed on as written. Finals are
//! split ([`super::split::split`]): `send_text` sends every chunk as its own message and
//! returns the first; `finish_stream` finishes the stream message with the first chunk and
//! sends the rest as new messages. Partial updates are previews of a text that is still
//! growing, so `start_stream` and `edit_text` show it [truncated](super::split::truncate)
//! to one message instead. A text that fits passes through untouched, the empty text
//! included. A chunk after the first that holds only whitespace is not sent: it shows
//! nothing and platforms refuse blank messages.
//!
//! For any other markup the text is the agent's Markdown, [rendered](crate::render) into
//! the markup: finals split into messages that are each well-formed and within the limit
//! counted on what the reader sees, previews rendered with whatever is not balanced yet
//! shown as text. A message the platform still refuses for its markup
//! ([`ChannelError::BadMarkup`]) is resent once as plain text (counted in
//! [`MARKUP_FALLBACKS`]), so it is never lost for its formatting: each link as its text
//! followed by its address ("text (url)"), split within the limit where the addresses take
//! it past it, the first piece in place of the message and the others as new messages
//! (`resend.rs`). A preview, one message whatever it holds, is resent as its visible text.
//!
//! On a channel with a [`ReplyWindow`](crate::ReplyWindow), a final never fills more
//! messages than its source has replies left ([`ReplyQuotas::remaining`], read at delivery
//! time, so replies delivered before it are counted): the last message it may fill is cut
//! and ends with the reply's truncation note
//! ([`DeliveryHints::truncated_note`](crate::DeliveryHints::truncated_note)).
//!
//! Where a source stops taking replies after a final's first messages (its window closed
//! between them), the layer answers [`ChannelError::ReplyWindowRest`] with the text of the
//! messages not sent, as a plain-text resend shows it (links with their addresses): a
//! final marked [`literal`](crate::DeliveryHints::literal) (what a later message carries of
//! it) is split as it is and each message written in the markup literally.
//!
//! The limit, its unit and the markup are read from the inner channel's capabilities on
//! every call.

use std::borrow::Cow;
use std::sync::Arc;

use async_trait::async_trait;

use crate::channel::{Channel, SendTarget, SentMessage};
use crate::error::{ChannelError, ChannelResult};
use crate::ids::MessageId;
use crate::message::DeliveryHints;
use crate::render::{self, Rendered};

use super::forward_channel;
use super::passive::ReplyQuotas;
use super::split::{split, split_chunks, truncate};

mod resend;

/// Counter: messages resent as plain text after the platform refused their markup, by
/// `channel`.
pub const MARKUP_FALLBACKS: &str = "im_bridge_channel_markup_fallbacks_total";

/// The length layer (see the module docs).
#[derive(Debug)]
pub struct LimitLength<C> {
    inner: C,
    /// The replies each source has taken, on a channel with a reply window.
    quotas: Option<Arc<ReplyQuotas>>,
}

impl<C: Channel> LimitLength<C> {
    /// Keeps `inner`'s texts in its markup and within its length limit.
    pub fn new(inner: C) -> Self {
        Self {
            inner,
            quotas: None,
        }
    }

    /// Like [`new`](Self::new), and bounds finals by the replies their sources have left
    /// in `quotas`.
    pub fn with_quotas(inner: C, quotas: Arc<ReplyQuotas>) -> Self {
        Self {
            inner,
            quotas: Some(quotas),
        }
    }

    /// The wrapped channel.
    pub fn inner(&self) -> &C {
        &self.inner
    }

    /// A final's messages: for plain channels `None` when it fits in one as it is.
    fn messages(&self, to: &SendTarget<'_>, text: &str) -> Option<Vec<Rendered>> {
        let messages = match to.hints.literal {
            true => Some(self.literal(text)),
            false => self.unbounded(text),
        };
        let caps = self.inner.capabilities();
        let Some(room) = self
            .quotas
            .as_ref()
            .and_then(|quotas| quotas.remaining(caps.reply_window, to))
        else {
            return messages;
        };
        let room = usize::try_from(room).unwrap_or(usize::MAX);
        let count = messages.as_ref().map_or(1, Vec::len);
        if count <= room || room == 0 {
            // Within the budget; or none left, which the layer below refuses and counts.
            return messages;
        }
        let mut messages = messages.unwrap_or_else(|| {
            vec![Rendered {
                text: text.to_owned(),
                plain: text.to_owned(),
                plain_linked: None,
            }]
        });
        messages.truncate(room);
        let note = to
            .hints
            .truncated_note
            .as_deref()
            .unwrap_or(render::ELLIPSIS);
        let note = format!("\n\n{note}");
        let (unit, limit) = (caps.length_unit, caps.max_message_len);
        if let Some(last) = messages.last_mut() {
            let room = limit.saturating_sub(unit.measure(&note));
            let cut = truncate(&last.plain, unit, room);
            let plain = format!("{}{note}", cut.trim_end());
            last.text = caps.markup.literal(&plain);
            last.plain = plain;
            last.plain_linked = None;
        }
        Some(messages)
    }

    /// A final's messages, whatever the reply budget: for plain channels `None` when it
    /// fits in one as it is.
    fn unbounded(&self, text: &str) -> Option<Vec<Rendered>> {
        let caps = self.inner.capabilities();
        let (unit, limit) = (caps.length_unit, caps.max_message_len);
        let markup = caps.markup;
        if !markup.renders_markdown() {
            return (unit.measure(text) > limit).then(|| {
                split(text, unit, limit)
                    .into_iter()
                    .map(|chunk| Rendered {
                        plain: chunk.clone(),
                        text: chunk,
                        plain_linked: None,
                    })
                    .collect()
            });
        }
        let rendered = render::render(text, markup, unit, limit);
        // A blank final renders to nothing; the platform's answer to it stays its.
        Some(if rendered.is_empty() {
            vec![Rendered {
                text: markup.literal(text),
                plain: text.to_owned(),
                plain_linked: None,
            }]
        } else {
            rendered
        })
    }

    /// `text`, what the reader is to see, as messages split on it, each written in the
    /// markup literally; split shorter where the markup's escapes would take a message
    /// over the limit.
    fn literal(&self, text: &str) -> Vec<Rendered> {
        let caps = self.inner.capabilities();
        let (unit, limit, markup) = (caps.length_unit, caps.max_message_len, caps.markup);
        let mut room = limit;
        loop {
            // The text's own bytes only: a code fence in it is text, not a block to close
            // and reopen across messages.
            let messages: Vec<Rendered> = split_chunks(text, unit, room)
                .into_iter()
                .map(|chunk| {
                    let plain = text[chunk.body].to_owned();
                    Rendered {
                        text: markup.literal(&plain),
                        plain,
                        plain_linked: None,
                    }
                })
                .collect();
            if room <= 1 || messages.iter().all(|m| unit.measure(&m.text) <= limit) {
                return messages;
            }
            room = room * 3 / 4;
        }
    }

    /// What the reader did not get of a final (`literal`, or not) whose `unsent` messages
    /// were not sent, as their plain-text resends show it.
    fn rest_of(&self, unsent: &[Rendered], literal: bool) -> String {
        let plains = unsent.iter().map(Rendered::resend_text);
        let rest = match literal || !self.inner.capabilities().markup.renders_markdown() {
            // Cut from the text as it is: together, they are the rest of it.
            true => plains.collect(),
            // Rendered messages end at a block, whose break each leaves out.
            false => plains.collect::<Vec<_>>().join("\n\n"),
        };
        // Cut at a line break: the next line as it is (a code line keeps its indent); cut
        // within a line: the spaces it was cut at go.
        let lines = rest.trim_start_matches(['\n', '\r']);
        match lines.len() < rest.len() {
            true => lines.to_owned(),
            false => rest.trim_start().to_owned(),
        }
    }

    /// A final's messages, each under its part's key: the first answered.
    async fn send_messages(
        &self,
        to: SendTarget<'_>,
        messages: &[Rendered],
    ) -> ChannelResult<SentMessage> {
        let Some((first, rest)) = messages.split_first() else {
            return self.inner.send_text(to, "").await;
        };
        let (sent, pieces) = self
            .with_fallback(first, |text| async move {
                self.inner.send_text(to, &text).await
            })
            .await?;
        self.send_pieces(to, &pieces, rest).await?;
        self.send_rest(to, rest).await?;
        Ok(sent)
    }

    /// A final's messages, the first finishing stream message `id`, the rest new, each
    /// under its part's key.
    async fn finish_messages(
        &self,
        to: SendTarget<'_>,
        id: &MessageId,
        messages: &[Rendered],
    ) -> ChannelResult {
        let Some((first, rest)) = messages.split_first() else {
            return self.inner.finish_stream(to, id, "").await;
        };
        let ((), pieces) = self
            .with_fallback(first, |text| async move {
                self.inner.finish_stream(to, id, &text).await
            })
            .await?;
        self.send_pieces(to, &pieces, rest).await?;
        self.send_rest(to, rest).await
    }

    /// A final's messages, one as it is where it fits (a plain channel's), for a lead
    /// note to go before.
    fn messages_led(&self, to: &SendTarget<'_>, text: &str) -> Vec<Rendered> {
        self.messages(to, text).unwrap_or_else(|| {
            vec![Rendered {
                text: text.to_owned(),
                plain: text.to_owned(),
                plain_linked: None,
            }]
        })
    }

    /// Puts `note` before the first of `messages` where it still fits the limit there, else
    /// after the last one; whether it found room.
    fn lead(&self, note: &str, messages: &mut [Rendered]) -> bool {
        let caps = self.inner.capabilities();
        let line = caps.markup.literal(note);
        // Counted as the cut counts (what the markup's entities add included).
        let measure = render::Measure::new(caps.length_unit, caps.markup);
        let last = messages.len().saturating_sub(1);
        // Before the first message, else after the last.
        for (at, before) in [(0, true), (last, false)] {
            let Some(message) = messages.get_mut(at) else {
                return false;
            };
            let with = |text: &str, added: &str| match before {
                true => format!("{added}\n\n{text}"),
                false => format!("{text}\n\n{added}"),
            };
            let plain = with(&message.plain, note);
            if measure.fits(&plain, caps.max_message_len) {
                message.text = with(&message.text, &line);
                message.plain = plain;
                message.plain_linked = message.plain_linked.as_deref().map(|p| with(p, note));
                return true;
            }
        }
        false
    }

    /// A final that opens with `note` its text does not hold
    /// ([`DeliveryHints::lead_note`]): split as `text` alone is, so each message has the key
    /// it had in an earlier attempt (one that landed is dropped by the platform as a
    /// repeat, not shown again shifted); `note` goes before the first message or after the
    /// last, where it fits, else is left out.
    async fn send_led(
        &self,
        to: SendTarget<'_>,
        note: &str,
        text: &str,
    ) -> ChannelResult<SentMessage> {
        let mut messages = self.messages_led(&to, text);
        if !self.lead(note, &mut messages) {
            tracing::debug!(
                channel = self.inner.name(),
                "The line saying why a final comes late fits before or after none of its messages; left out."
            );
        }
        self.send_messages(to, &messages).await
    }

    /// A partial text as one message, the preview of a text still growing.
    fn preview<'t>(&self, text: &'t str) -> Cow<'t, str> {
        let caps = self.inner.capabilities();
        if caps.markup.renders_markdown() {
            let (unit, limit) = (caps.length_unit, caps.max_message_len);
            Cow::Owned(render::render_preview(text, caps.markup, unit, limit).text)
        } else {
            truncate(text, caps.length_unit, caps.max_message_len)
        }
    }

    /// Sends the parts after the first, each under its own send key (parts 1, 2, …). A
    /// source that takes no more replies from one of them on: what was not sent, in
    /// [`ChannelError::ReplyWindowRest`].
    async fn send_rest(&self, to: SendTarget<'_>, rest: &[Rendered]) -> ChannelResult {
        // A blank chunk (the tail of a text ending in a long run of whitespace) shows
        // nothing, and platforms refuse blank messages: skip it.
        let parts = rest.iter().enumerate().map(|(i, m)| (i + 1, m));
        for (n, message) in parts.filter(|(_, m)| !m.plain.trim().is_empty()) {
            let hints = to.hints.part(n);
            let to = SendTarget {
                hints: &hints,
                ..to
            };
            let sent = self
                .with_fallback(message, |text| async move {
                    self.inner.send_text(to, &text).await
                })
                .await;
            match sent {
                Ok((_, pieces)) => self.send_pieces(to, &pieces, &rest[n..]).await?,
                Err(ChannelError::ReplyWindow(reason)) => {
                    let rest = self.rest_of(&rest[n - 1..], to.hints.literal);
                    return Err(ChannelError::ReplyWindowRest { reason, rest });
                }
                Err(error) => return Err(error),
            }
        }
        Ok(())
    }

    /// A preview shown by `call`, resent plain if its markup is refused.
    async fn preview_with<T, F, Fut>(&self, text: &str, call: F) -> ChannelResult<T>
    where
        F: Fn(String) -> Fut,
        Fut: Future<Output = ChannelResult<T>>,
    {
        let caps = self.inner.capabilities();
        if !caps.markup.renders_markdown() {
            return call(self.preview(text).into_owned()).await;
        }
        let rendered =
            render::render_preview(text, caps.markup, caps.length_unit, caps.max_message_len);
        // A preview has no pieces: its plain text is within the limit.
        let (shown, _) = self.with_fallback(&rendered, call).await?;
        Ok(shown)
    }
}

#[async_trait]
impl<C: Channel> Channel for LimitLength<C> {
    forward_channel!(inner() => identity, name, capabilities, is_connected, exclusive_transport, run, send_file,
        show_typing, turn_ended, react, thread_of, fetch_file);

    async fn send_text(&self, to: SendTarget<'_>, text: &str) -> ChannelResult<SentMessage> {
        if let Some(note) = to.hints.lead_note.as_deref() {
            let bare = without_lead(to.hints);
            let to = SendTarget { hints: &bare, ..to };
            return self.send_led(to, note, text).await;
        }
        match self.messages(&to, text).as_deref() {
            Some(messages) => self.send_messages(to, messages).await,
            None => self.inner.send_text(to, text).await,
        }
    }

    async fn start_stream(&self, to: SendTarget<'_>, text: &str) -> ChannelResult<SentMessage> {
        self.preview_with(text, |text| async move {
            self.inner.start_stream(to, &text).await
        })
        .await
    }

    async fn edit_text(&self, to: SendTarget<'_>, id: &MessageId, text: &str) -> ChannelResult {
        self.preview_with(text, |text| async move {
            self.inner.edit_text(to, id, &text).await
        })
        .await
    }

    async fn finish_stream(&self, to: SendTarget<'_>, id: &MessageId, text: &str) -> ChannelResult {
        if let Some(note) = to.hints.lead_note.as_deref() {
            let bare = without_lead(to.hints);
            let to = SendTarget { hints: &bare, ..to };
            // The stream message shows the first part: the note goes before it, or after the
            // last part, where it fits.
            let mut messages = self.messages_led(&to, text);
            self.lead(note, &mut messages);
            return self.finish_messages(to, id, &messages).await;
        }
        match self.messages(&to, text).as_deref() {
            Some(messages) => self.finish_messages(to, id, messages).await,
            None => self.inner.finish_stream(to, id, text).await,
        }
    }
}

/// `hints` without their lead note, once the length layer placed it.
fn without_lead(hints: &DeliveryHints) -> DeliveryHints {
    DeliveryHints {
        lead_note: None,
        ..hints.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::LengthUnit;
    use crate::delivery::ChannelExt;
    use crate::delivery::recorder::{Call, Op, layered, target};
    use crate::render::{Dialect, Frame, Writer};

    #[tokio::test]
    async fn finals_are_split_and_previews_truncated() {
        let (rec, layer) = layered(5, ChannelExt::limit_length);
        let first = layer.send_text(target(), "abc def ghi").await.unwrap();
        assert_eq!(first.id, MessageId::new("m1"));
        let m = layer.start_stream(target(), "abcdefgh").await.unwrap().id;
        layer.edit_text(target(), &m, "abcdefghi").await.unwrap();
        layer
            .finish_stream(target(), &m, "hello world")
            .await
            .unwrap();
        layer.send_text(target(), "").await.unwrap();
        layer.send_text(target(), "abcde      ").await.unwrap();
        assert_eq!(
            rec.calls(),
            [
                Call::Send("abc ".into()),
                Call::Send("def ".into()),
                Call::Send("ghi".into()),
                Call::Start("abcd…".into()),
                Call::Edit("m4".into(), "abcd…".into()),
                Call::Finish("m4".into(), "hello".into()),
                Call::Send(" worl".into()),
                Call::Send("d".into()),
                Call::Send(String::new()),
                Call::Send("abcde".into()),
            ]
        );
    }

    /// A final answering `s1` under send key `e:1`.
    fn keyed_final() -> crate::OutboundMessage {
        let mut keyed = crate::delivery::recorder::out_to("s1", crate::ChatKind::Private, "", true);
        keyed.hints.send_key = Some("e:1".into());
        keyed
    }

    #[tokio::test]
    async fn each_part_of_a_split_final_is_sent_under_its_own_key() {
        let (rec, layer) = layered(5, ChannelExt::limit_length);
        let keyed = keyed_final();
        layer
            .send_text((&keyed).into(), "abc def ghi")
            .await
            .unwrap();
        let m = layer.start_stream((&keyed).into(), "ab").await.unwrap().id;
        layer
            .finish_stream((&keyed).into(), &m, "hello world")
            .await
            .unwrap();
        layer.send_text(target(), "abc def").await.unwrap();
        let key = |k: &str| Some(k.to_owned());
        assert_eq!(
            rec.send_keys(),
            [
                key("e:1"),
                key("e:1.1"),
                key("e:1.2"),
                // The finish edits the stream's message; the parts after it are new.
                key("e:1.1"),
                key("e:1.2"),
                None,
                None,
            ]
        );
    }

    /// A final with a lead note (why it comes late) is split and keyed exactly as without
    /// it, so a message that landed in an attempt before is a repeat of its key, not a
    /// shifted text: the note goes before the first message where it fits there, else after
    /// the last, else nowhere; never in a message of its own.
    #[tokio::test]
    async fn a_lead_note_never_changes_how_a_final_is_split() {
        let with_and_without = |len: usize, text: &'static str| async move {
            let (rec, layer) = layered(len, ChannelExt::limit_length);
            let mut keyed = keyed_final();
            let plain: SendTarget<'_> = (&keyed).into();
            layer.send_text(plain, text).await.unwrap();
            let without = (rec.calls(), rec.send_keys());
            keyed.hints.lead_note = Some("late".into());
            layer.send_text((&keyed).into(), text).await.unwrap();
            let (calls, keys) = (rec.calls(), rec.send_keys());
            let n = without.0.len();
            assert_eq!(
                keys[n..],
                without.1[..],
                "each message under the key it had"
            );
            (without.0, calls[n..].to_vec())
        };
        // Room nowhere: left out.
        let (without, with) = with_and_without(5, "abc def ghi").await;
        assert_eq!(with, without);
        // No room before the first, room after the last.
        let (without, with) = with_and_without(12, "abc def ghi jkl").await;
        assert!(without.len() > 1, "{without:?}");
        let last = without.len() - 1;
        assert_eq!(with[..last], without[..last]);
        let Call::Send(end) = &without[last] else {
            panic!("{without:?}")
        };
        assert_eq!(with[last], Call::Send(format!("{end}\n\nlate")));
        // Room before the first: one message.
        let (_, with) = with_and_without(20, "abc def").await;
        assert_eq!(with, [Call::Send("late\n\nabc def".into())]);
        // A stream message takes it the same way: before what it shows, where it fits.
        let (rec, layer) = layered(20, ChannelExt::limit_length);
        let mut keyed = keyed_final();
        keyed.hints.lead_note = Some("late".into());
        let m = layer.start_stream((&keyed).into(), "ab").await.unwrap().id;
        layer
            .finish_stream((&keyed).into(), &m, "xyz")
            .await
            .unwrap();
        assert_eq!(
            rec.calls()[1..],
            [Call::Finish(m.as_str().into(), "late\n\nxyz".into())]
        );
    }

    /// An example markup for these tests: styles as `[name]…[/name]`, a link as
    /// `[url=…]`, `[` in text doubled.
    struct Brackets;

    impl Brackets {
        fn tag(frame: &Frame) -> String {
            match frame {
                Frame::Quote => "quote".into(),
                Frame::Pre(language) => format!("pre={}", language.as_deref().unwrap_or("")),
                Frame::Bold => "b".into(),
                Frame::Italic => "i".into(),
                Frame::Strike => "s".into(),
                Frame::Link(url) => format!("url={url}"),
                Frame::Code => "code".into(),
            }
        }
    }

    impl Writer for Brackets {
        fn open(&mut self, out: &mut String, frame: &Frame, _: &str) {
            out.push_str(&format!("[{}]", Self::tag(frame)));
        }

        fn close(&mut self, out: &mut String, frame: &Frame) {
            let tag = Self::tag(frame);
            let name = tag.split('=').next().unwrap_or_default();
            out.push_str(&format!("[/{name}]"));
        }

        fn text(&mut self, out: &mut String, text: &str, _: &[Frame]) {
            out.push_str(&text.replace('[', "[["));
        }
    }

    impl Dialect for Brackets {
        fn name(&self) -> &'static str {
            "brackets"
        }

        fn writer(&self) -> Box<dyn Writer> {
            Box::new(Brackets)
        }

        fn check(&self, _: &Rendered, _: LengthUnit, _: usize) -> Result<(), String> {
            Ok(())
        }
    }

    /// [`Brackets`] on a platform that counts `&` as the five characters of its entity.
    struct Entities;

    impl Dialect for Entities {
        fn name(&self) -> &'static str {
            "entities"
        }

        fn writer(&self) -> Box<dyn Writer> {
            Box::new(Brackets)
        }

        fn extra_units(&self, c: char) -> usize {
            if c == '&' { 4 } else { 0 }
        }

        fn check(&self, _: &Rendered, _: LengthUnit, _: usize) -> Result<(), String> {
            Ok(())
        }
    }

    /// The late line's room is counted as the cut counts: a line whose `&` the platform
    /// reads as five characters does not fit where its characters alone would.
    #[tokio::test]
    async fn a_lead_note_is_measured_as_the_platform_counts() {
        let caps = crate::capabilities::Capabilities {
            markup: &Entities,
            ..crate::delivery::recorder::editable(16)
        };
        let (rec, layer) = crate::delivery::recorder::layered_with(caps, ChannelExt::limit_length);
        let mut keyed = keyed_final();
        keyed.hints.lead_note = Some("a&b".into());
        // 15 characters with the line before it, 19 as the platform counts them.
        layer
            .send_text((&keyed).into(), "0123456789")
            .await
            .unwrap();
        assert_eq!(rec.calls(), [Call::Send("0123456789".into())]);
    }

    /// A channel of `len` chars whose markup is [`Brackets`].
    pub(super) fn brackets(len: usize) -> crate::capabilities::Capabilities {
        crate::capabilities::Capabilities {
            markup: &Brackets,
            ..crate::delivery::recorder::editable(len)
        }
    }

    #[tokio::test]
    async fn issue_14_markdown_is_rendered_for_a_channel_with_markup() {
        let (rec, layer) =
            crate::delivery::recorder::layered_with(brackets(4096), ChannelExt::limit_length);
        layer
            .send_text(
                target(),
                "**Done**: see `x [y]` & [docs](https://e.x/?a=1&b=2)",
            )
            .await
            .unwrap();
        // A preview with an open fence shows it as text until it closes.
        let m = layer
            .start_stream(target(), "Code:\n```rust\nlet a = [1];")
            .await
            .unwrap()
            .id;
        layer
            .finish_stream(target(), &m, "Code:\n```rust\nlet a = [1];\n```")
            .await
            .unwrap();
        assert_eq!(
            rec.calls(),
            [
                Call::Send(
                    "[b]Done[/b]: see [code]x [[y][/code] & [url=https://e.x/?a=1&b=2]docs[/url]"
                        .into()
                ),
                Call::Start("Code:\n\n```rust\nlet a = [[1];".into()),
                Call::Finish(
                    m.to_string(),
                    "Code:\n\n[pre=rust]let a = [[1];[/pre]".into()
                ),
            ]
        );
    }

    #[tokio::test]
    async fn issue_14_a_refused_markup_is_resent_as_plain_text() {
        let (rec, layer) =
            crate::delivery::recorder::layered_with(brackets(4096), ChannelExt::limit_length);
        rec.fail(Op::Send, ChannelError::BadMarkup);
        layer.send_text(target(), "**bold** & [b]").await.unwrap();
        assert_eq!(rec.calls(), [Call::Send("bold & [[b]".into())]);
        assert_eq!(rec.attempts(Op::Send), 2);
    }

    #[tokio::test]
    async fn a_window_closing_between_the_messages_of_a_final_answers_with_the_rest() {
        let (rec, layer) = layered(5, ChannelExt::limit_length);
        let m = layer.start_stream(target(), "hel").await.unwrap().id;
        rec.fail(Op::Send, ChannelError::ReplyWindow("closed"));
        let refused = layer.finish_stream(target(), &m, "hello world").await;
        let Err(ChannelError::ReplyWindowRest { reason, rest }) = refused else {
            panic!("{refused:?}");
        };
        assert_eq!((reason, rest.as_str()), ("closed", "world"));
        assert_eq!(
            rec.calls()[1..],
            [Call::Finish(m.to_string(), "hello".into())]
        );
        // The first message refused: nothing was shown, the window's own error.
        rec.fail(Op::Send, ChannelError::ReplyWindow("used"));
        let refused = layer.send_text(target(), "hello world").await;
        assert!(matches!(refused, Err(ChannelError::ReplyWindow("used"))));
    }

    #[tokio::test]
    async fn the_rest_of_a_final_keeps_its_link_addresses() {
        // Sent later as it is, in the markup literally: a link is its text and address.
        let (rec, layer) =
            crate::delivery::recorder::layered_with(brackets(12), ChannelExt::limit_length);
        rec.pass(Op::Send);
        rec.fail(Op::Send, ChannelError::ReplyWindow("closed"));
        let refused = layer
            .send_text(target(), "aaaa bbbb\n\n[cccc](https://e.x/c) dddd")
            .await;
        let Err(ChannelError::ReplyWindowRest { rest, .. }) = refused else {
            panic!("{refused:?}");
        };
        assert_eq!(rest, "cccc (https://e.x/c) dddd");
        assert_eq!(rec.calls(), [Call::Send("aaaa bbbb".into())]);
    }

    #[tokio::test]
    async fn a_literal_final_is_split_as_it_is_and_written_in_the_markup_literally() {
        let hints = crate::DeliveryHints {
            literal: true,
            ..Default::default()
        };
        let to = SendTarget {
            hints: &hints,
            ..target()
        };
        let (rec, layer) =
            crate::delivery::recorder::layered_with(brackets(4096), ChannelExt::limit_length);
        layer.send_text(to, "**x** [y]").await.unwrap();
        assert_eq!(rec.calls(), [Call::Send("**x** [[y]".into())]);
        // Each message within the limit as written, its escapes counted.
        let (rec, layer) =
            crate::delivery::recorder::layered_with(brackets(6), ChannelExt::limit_length);
        layer.send_text(to, "[[[[[[[[").await.unwrap();
        let calls = rec.calls();
        assert!(calls.len() > 1, "{calls:?}");
        for call in &calls {
            let Call::Send(text) = call else {
                panic!("{calls:?}")
            };
            assert!(text.chars().count() <= 6, "{calls:?}");
        }
        let shown: String = calls
            .iter()
            .map(|c| match c {
                Call::Send(text) => text.replace("[[", "["),
                _ => String::new(),
            })
            .collect();
        assert_eq!(shown, "[[[[[[[[");
        // A code fence in it is text: no fence line is added to close or reopen it.
        let (rec, layer) = layered(12, ChannelExt::limit_length);
        let fenced = "```\naaa bbb ccc ddd\n```";
        layer.send_text(to, fenced).await.unwrap();
        let sent: String = rec
            .calls()
            .into_iter()
            .map(|c| match c {
                Call::Send(text) => text,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(sent, fenced);
    }
}
