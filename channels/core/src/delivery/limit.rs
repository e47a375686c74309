//! `LimitLength`: every text the channel is given fits its length limit.
//!
//! Finals are split ([`super::split::split`]): `send_text` sends every chunk as its
//! own message and returns the first; `finish_stream` finishes the stream message with the
//! first chunk and sends the rest as new messages. Partial updates are previews of a text
//! that is still growing, so `start_stream` and `edit_text` show it
//! [truncated](super::split::truncate) to one message instead. A text that fits passes
//! through untouched, the empty text included. A chunk after the first that holds only
//! whitespace is not sent: it shows nothing and platforms refuse blank messages.
//!
//! The limit and its unit are read from the inner channel's capabilities on every call.

use std::borrow::Cow;

use async_trait::async_trait;

use crate::channel::{Channel, SendTarget, SentMessage};
use crate::error::ChannelResult;
use crate::ids::MessageId;

use super::forward_channel;
use super::split::{split, truncate};

/// The length layer (see the module docs).
#[derive(Debug)]
pub struct LimitLength<C> {
    inner: C,
}

impl<C: Channel> LimitLength<C> {
    /// Keeps `inner`'s texts within its length limit.
    pub fn new(inner: C) -> Self {
        Self { inner }
    }

    /// The wrapped channel.
    pub fn inner(&self) -> &C {
        &self.inner
    }

    /// `text` as messages, or `None` when it fits in one as it is.
    fn chunks(&self, text: &str) -> Option<Vec<String>> {
        let caps = self.inner.capabilities();
        (caps.length_unit.measure(text) > caps.max_message_len)
            .then(|| split(text, caps.length_unit, caps.max_message_len))
    }

    /// A partial text cut to one message, as the preview of a text still growing.
    fn preview<'t>(&self, text: &'t str) -> Cow<'t, str> {
        let caps = self.inner.capabilities();
        truncate(text, caps.length_unit, caps.max_message_len)
    }

    async fn send_rest(&self, to: SendTarget<'_>, rest: &[String]) -> ChannelResult {
        // A blank chunk (the tail of a text ending in a long run of whitespace) shows
        // nothing, and platforms refuse blank messages: skip it.
        for chunk in rest.iter().filter(|c| !c.trim().is_empty()) {
            self.inner.send_text(to, chunk).await?;
        }
        Ok(())
    }
}

#[async_trait]
impl<C: Channel> Channel for LimitLength<C> {
    forward_channel!(inner() => name, capabilities, is_connected, exclusive_transport, run, send_file,
        show_typing, fetch_file);

    async fn send_text(&self, to: SendTarget<'_>, text: &str) -> ChannelResult<SentMessage> {
        match self.chunks(text).as_deref() {
            Some([first, rest @ ..]) => {
                let sent = self.inner.send_text(to, first).await?;
                self.send_rest(to, rest).await?;
                Ok(sent)
            }
            _ => self.inner.send_text(to, text).await,
        }
    }

    async fn start_stream(&self, to: SendTarget<'_>, text: &str) -> ChannelResult<SentMessage> {
        self.inner.start_stream(to, &self.preview(text)).await
    }

    async fn edit_text(&self, to: SendTarget<'_>, id: &MessageId, text: &str) -> ChannelResult {
        self.inner.edit_text(to, id, &self.preview(text)).await
    }

    async fn finish_stream(&self, to: SendTarget<'_>, id: &MessageId, text: &str) -> ChannelResult {
        match self.chunks(text).as_deref() {
            Some([first, rest @ ..]) => {
                self.inner.finish_stream(to, id, first).await?;
                self.send_rest(to, rest).await
            }
            _ => self.inner.finish_stream(to, id, text).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::delivery::ChannelExt;
    use crate::delivery::recorder::{Call, layered, target};

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
}
