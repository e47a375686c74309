//! The `Channel` trait: what an adapter implements.
//!
//! An adapter owns its transport (polling, WebSocket, webhook), a handful of primitive
//! send operations, and the one read the daemon asks of it: an inbound attachment's bytes
//! ([`Channel::fetch_file`]). It does not throttle, split or retry: the
//! [`Delivery`](crate::Delivery) engine composes those over the primitives, driven by
//! [`Capabilities`]. What the daemon reads of it (name, capabilities, connection,
//! exclusivity) is one [`ChannelIdentity`] (child `identity`), built with the channel.
//! An adapter whose platform reads no send key sends a final's messages through
//! [`SentOnce`] (child `sent_once`), so a final delivered again repeats none that landed;
//! one that cuts a text again past its limit sends the messages through [`SendParts`]
//! (child `parts`).
//! What the adapters' `run` and `fetch_file` did alike is here once: [`transport_ended`]
//! (how a long connection's `run` ends) and [`fetch_handle`] (an attachment that arrived
//! as a handle).

mod identity;
mod parts;
mod sent_once;

use std::borrow::Cow;

use async_trait::async_trait;
use bytes::Bytes;
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use crate::capabilities::Capabilities;
use crate::error::{ChannelError, ChannelResult};
use crate::ids::{ChatId, MessageId};
use crate::inbound::InboundSink;
use crate::message::{
    ChatKind, DeliveryHints, FileLabel, FileSource, InboundFile, OutboundFile, OutboundMessage,
};
use crate::telemetry::{Stage, Telemetry};

pub use identity::ChannelIdentity;
pub use parts::SendParts;
pub use sent_once::{SENT_KEYS, SentOnce};

/// Where a primitive send goes: the conversation, the message to reply under, and the
/// routing hints the adapter left in the inbound metadata.
#[derive(Clone, Copy, Debug)]
pub struct SendTarget<'a> {
    /// The conversation.
    pub chat_id: &'a ChatId,
    /// Private or group.
    pub chat_kind: ChatKind,
    /// The source message to reply under, if any.
    pub reply_to: Option<&'a MessageId>,
    /// Inbound metadata copied onto the outbound message.
    pub metadata: &'a Map<String, Value>,
    /// What the daemon told the delivery layers about this reply
    /// ([`DeliveryHints::NONE`] for a send of no particular reply).
    pub hints: &'a DeliveryHints,
    /// When the source message was created (Unix seconds), if known.
    pub source_at: Option<f64>,
}

impl<'a> From<&'a OutboundMessage> for SendTarget<'a> {
    fn from(msg: &'a OutboundMessage) -> Self {
        Self {
            chat_id: &msg.chat_id,
            chat_kind: msg.chat_kind,
            reply_to: msg.thread_ts.as_ref(),
            metadata: &msg.metadata,
            hints: &msg.hints,
            source_at: msg.source_created_at,
        }
    }
}

impl<'a> SendTarget<'a> {
    /// The messages an adapter cut from one part after its first (what the renderer
    /// cannot see, link addresses or escaping, grew the part past what the platform
    /// takes), in order, each with the hints it goes under: a send key of its own
    /// ([`DeliveryHints::cut`]).
    pub fn cuts(
        &self,
        cuts: impl IntoIterator<Item = String>,
    ) -> impl Iterator<Item = (std::borrow::Cow<'a, DeliveryHints>, String)> {
        let hints = self.hints;
        let cuts = cuts.into_iter().enumerate();
        cuts.map(move |(n, text)| (hints.cut(n + 1), text))
    }

    /// This target with other `hints` (a cut's: [`SendTarget::cuts`]).
    pub fn with_hints<'b>(&self, hints: &'b DeliveryHints) -> SendTarget<'b>
    where
        'a: 'b,
    {
        SendTarget { hints, ..*self }
    }
}

/// A message the platform accepted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SentMessage {
    /// Its platform id, used to edit it later.
    pub id: MessageId,
}

/// What a reaction on a user's message says ([`Channel::react`]). The adapter picks the
/// emoji its platform allows for each.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reaction {
    /// Seen, and waiting its turn: the conversation is busy and the message will be handled
    /// after the request before it (the notice saying so was already given once).
    Queued,
    /// Seen, and turned away: the conversation is busy and its line is full, so the message
    /// will not be handled (the notice saying so was already given once).
    Busy,
}

/// Why a channel's transport stopped running.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChannelExit {
    /// The shutdown token was cancelled.
    Stopped,
    /// The input ended for good (the console reached end of file). The daemon finishes the
    /// work already admitted, delivers every reply, then exits.
    InputEnded,
}

/// A chat platform adapter.
#[async_trait]
pub trait Channel: Send + Sync + 'static {
    /// Who this channel is: its name, capabilities, connection state and whether its
    /// transport is exclusive, built once with the channel. The four methods below read
    /// it; the daemon asks them, so a channel (a test double) may still override one.
    fn identity(&self) -> &ChannelIdentity;

    /// The provider key (`telegram`, `console`, …), equal to `InboundMessage::channel_name`.
    fn name(&self) -> &'static str {
        self.identity().name()
    }

    /// What this channel can show.
    fn capabilities(&self) -> Capabilities {
        self.identity().capabilities()
    }

    /// Whether the transport is connected right now (for `/readyz`).
    fn is_connected(&self) -> bool {
        self.identity().is_connected()
    }

    /// Whether only one process at a time may run this transport
    /// ([`ChannelIdentity::exclusive`]): the daemon then runs it only while it holds the
    /// channel's lease in the shared store; other replicas stand by.
    fn exclusive_transport(&self) -> bool {
        self.identity().exclusive_transport()
    }

    /// Runs the transport until `shutdown` is cancelled or the input ends, admitting every
    /// inbound message through `sink`.
    async fn run(
        &self,
        sink: InboundSink,
        shutdown: CancellationToken,
    ) -> ChannelResult<ChannelExit>;

    /// Sends a new text message to `to`.
    async fn send_text(&self, to: SendTarget<'_>, text: &str) -> ChannelResult<SentMessage>;

    /// Shows the first partial text of a reply still being written; later partials edit
    /// it and [`Channel::finish_stream`] ends it. Defaults to a plain send; channels that
    /// draw live text differently (the console's status line) override it.
    async fn start_stream(&self, to: SendTarget<'_>, text: &str) -> ChannelResult<SentMessage> {
        self.send_text(to, text).await
    }

    /// Replaces the text of message `id`, which this channel sent to `to`.
    async fn edit_text(&self, to: SendTarget<'_>, id: &MessageId, text: &str) -> ChannelResult {
        let _ = (to, id, text);
        Err(ChannelError::Unsupported("editing messages"))
    }

    /// Ends streamed message `id` with its final text. Defaults to an edit; channels that
    /// render streams differently (cards, terminals) override it.
    async fn finish_stream(&self, to: SendTarget<'_>, id: &MessageId, text: &str) -> ChannelResult {
        self.edit_text(to, id, text).await
    }

    /// Shows the chat that a reply is being written (Telegram's "typing…"): a hint that
    /// creates no message, so the delivery engine does not pace it. Defaults to nothing.
    async fn show_typing(&self, to: SendTarget<'_>) -> ChannelResult {
        let _ = to;
        Ok(())
    }

    /// The bridge is done with the message `to` answers: every reply to it was delivered
    /// before this call (the console's scripted input reads its next line then), or, for
    /// a final that failed for now, once the daemon's retries of it settled. Called
    /// only on a channel whose capabilities ask for it
    /// ([`Capabilities::turn_ends`](crate::Capabilities::turn_ends)); defaults to nothing.
    async fn turn_ended(&self, to: SendTarget<'_>) -> ChannelResult {
        let _ = to;
        Ok(())
    }

    /// Puts `reaction` on the user's message `to` answers (`to.reply_to`): a mark that
    /// creates no message, so the delivery engine does not pace it. Called only on a
    /// channel whose capabilities say it has reactions
    /// ([`Capabilities::reactions`](crate::Capabilities::reactions)); defaults to
    /// unsupported.
    async fn react(&self, to: SendTarget<'_>, reaction: Reaction) -> ChannelResult {
        let _ = (to, reaction);
        Err(ChannelError::Unsupported("reactions"))
    }

    /// The thread of its chat that a reply to `to` is shown in, where a chat's threads
    /// read apart from one another (Slack's and Discord's threads, Feishu's topics,
    /// Telegram's forum topics); `None`, the default, where the whole chat reads as one.
    /// The delivery engine keeps answers in the order asked within what reads as one
    /// ([`DeliveryHints::stays_last`]): a message shown in another thread does not stand
    /// between an answer and the one before it.
    fn thread_of<'a>(&self, to: SendTarget<'a>) -> Option<Cow<'a, str>> {
        let _ = to;
        None
    }

    /// Uploads a file after a reply's text.
    async fn send_file(&self, to: SendTarget<'_>, file: &OutboundFile) -> ChannelResult {
        let _ = (to, file);
        Err(ChannelError::Unsupported("files"))
    }

    /// Reads an inbound attachment's bytes (spec manager §7.3), refusing more than
    /// `max_bytes`. Defaults to inline bytes only; adapters whose files arrive as
    /// handles or staged paths override it.
    async fn fetch_file(&self, file: &InboundFile, max_bytes: u64) -> ChannelResult<Bytes> {
        file.inline_bytes(max_bytes)
    }

    /// [`Channel::fetch_file`], with what reading the file told of it ([`FileLabel`]: a
    /// name and a media type the message did not carry). By default the bytes alone; an
    /// adapter whose platform names a file only in its download overrides it.
    async fn fetch_labeled(
        &self,
        file: &InboundFile,
        max_bytes: u64,
    ) -> ChannelResult<(Bytes, FileLabel)> {
        let bytes = self.fetch_file(file, max_bytes).await?;
        Ok((bytes, FileLabel::default()))
    }
}

/// How [`Channel::run`] ends over a transport that serves until shutdown or a failure (a
/// long connection): the channel is no longer connected; a clean end is
/// [`ChannelExit::Stopped`]; a failure (a refused credential) is counted as a `receiving`
/// error in `telemetry` and returned as [`ChannelError::Transport`], for the daemon's
/// supervisor to restart. The error's text must be log-safe, as the kit's errors are.
pub fn transport_ended<E: std::fmt::Display>(
    telemetry: &Telemetry,
    ended: Result<(), E>,
) -> ChannelResult<ChannelExit> {
    telemetry.set_connected(false);
    ended.map(|()| ChannelExit::Stopped).map_err(|error| {
        telemetry.error(Stage::Receiving);
        ChannelError::Transport(error.to_string())
    })
}

/// [`Channel::fetch_file`] for an adapter whose attachments arrive as platform handles:
/// inline bytes are read as they are (within `max_bytes`), a [`FileSource::Handle`] is
/// downloaded by `download`, which enforces `max_bytes` (and the platform's own limit), and
/// a failed download counts as a `processing` error in `telemetry`: the message arrived,
/// its attachment did not.
pub async fn fetch_handle<'f, D, T, E>(
    telemetry: &Telemetry,
    file: &'f InboundFile,
    max_bytes: u64,
    download: impl FnOnce(&'f str) -> D,
) -> ChannelResult<Bytes>
where
    D: Future<Output = Result<T, E>>,
    T: Into<Bytes>,
    ChannelError: From<E>,
{
    let FileSource::Handle { id } = &file.source else {
        return file.inline_bytes(max_bytes);
    };
    let fetched = download(id)
        .await
        .map(Into::into)
        .map_err(ChannelError::from);
    if fetched.is_err() {
        telemetry.error(Stage::Processing);
    }
    fetched
}

/// [`fetch_handle`] for [`Channel::fetch_labeled`]: `read` gives the bytes behind a
/// handle with what reading them told of the file (a name, a media type the message did
/// not carry); inline bytes come with no label.
pub async fn fetch_handle_labeled<'f, R, E>(
    telemetry: &Telemetry,
    file: &'f InboundFile,
    max_bytes: u64,
    read: impl FnOnce(&'f str) -> R,
) -> ChannelResult<(Bytes, FileLabel)>
where
    R: Future<Output = Result<(Bytes, FileLabel), E>>,
    ChannelError: From<E>,
{
    let mut label = FileLabel::default();
    let told = &mut label;
    let download = move |handle| async move {
        let (bytes, label) = read(handle).await?;
        *told = label;
        Ok::<_, E>(bytes)
    };
    let bytes = fetch_handle(telemetry, file, max_bytes, download).await?;
    Ok((bytes, label))
}

#[cfg(test)]
mod tests {
    use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};

    use super::*;
    use crate::message::FileKind;
    use crate::telemetry::names;

    /// A channel that overrides nothing it need not.
    struct Bare(ChannelIdentity);

    impl Bare {
        fn new() -> Self {
            Self(ChannelIdentity::always_connected(
                "bare",
                Capabilities::final_only(100),
            ))
        }
    }

    #[async_trait]
    impl Channel for Bare {
        fn identity(&self) -> &ChannelIdentity {
            &self.0
        }

        async fn run(&self, _: InboundSink, _: CancellationToken) -> ChannelResult<ChannelExit> {
            Ok(ChannelExit::Stopped)
        }

        async fn send_text(&self, _: SendTarget<'_>, _: &str) -> ChannelResult<SentMessage> {
            Err(ChannelError::Stopped)
        }
    }

    fn file(source: FileSource) -> InboundFile {
        InboundFile {
            kind: FileKind::File,
            filename: Some("secret-plans.txt".into()),
            mime_type: None,
            size: None,
            source,
        }
    }

    #[tokio::test]
    async fn by_default_only_inline_bytes_within_the_bound_are_fetched() {
        let bare = Bare::new();
        let inline = file(FileSource::Inline {
            bytes: Bytes::from_static(b"hello"),
        });
        assert_eq!(bare.fetch_file(&inline, 5).await.unwrap(), "hello");
        assert_eq!(bare.fetch_file(&inline, u64::MAX).await.unwrap(), "hello");
        let e = bare.fetch_file(&inline, 4).await.unwrap_err();
        assert!(matches!(e, ChannelError::TooLarge { limit: 4 }), "{e:?}");
        // Log-safe: the bound, never the name.
        assert_eq!(e.to_string(), "the file is larger than 4 bytes");
        for source in [
            FileSource::Handle { id: "h1".into() },
            FileSource::Path {
                path: "/tmp/staged".into(),
                handle: None,
            },
        ] {
            let e = bare.fetch_file(&file(source), u64::MAX).await.unwrap_err();
            assert!(matches!(e, ChannelError::Unsupported(_)), "{e:?}");
        }
    }

    /// The `errors_total` values recorded at `stage`.
    fn errors(snapshot: &Snapshotter, stage: &str) -> Vec<DebugValue> {
        snapshot
            .snapshot()
            .into_vec()
            .into_iter()
            .filter(|(key, ..)| {
                key.key().name() == names::ERRORS && key.key().labels().any(|l| l.value() == stage)
            })
            .map(|(.., value)| value)
            .collect()
    }

    #[tokio::test]
    async fn a_handle_is_downloaded_and_only_a_failed_download_counts_as_processing() {
        let recorder = DebuggingRecorder::new();
        let snapshot = recorder.snapshotter();
        let telemetry = metrics::with_local_recorder(&recorder, || Telemetry::new("kit"));
        let handle = file(FileSource::Handle { id: "h1".into() });
        let echo = |id: &str| std::future::ready(Ok::<_, ChannelError>(id.as_bytes().to_vec()));
        let got = fetch_handle(&telemetry, &handle, 9, echo).await.unwrap();
        assert_eq!(got, "h1");
        // Inline bytes are read as they are, and their bound refused without a download.
        let inline = file(FileSource::Inline {
            bytes: Bytes::from_static(b"hello"),
        });
        let e = fetch_handle(&telemetry, &inline, 4, echo)
            .await
            .unwrap_err();
        assert!(matches!(e, ChannelError::TooLarge { limit: 4 }), "{e:?}");
        let refused =
            |_: &str| std::future::ready(Err::<Bytes, _>(ChannelError::TooLarge { limit: 9 }));
        let e = fetch_handle(&telemetry, &handle, 9, refused)
            .await
            .unwrap_err();
        assert!(matches!(e, ChannelError::TooLarge { limit: 9 }), "{e:?}");
        assert_eq!(errors(&snapshot, "processing"), [DebugValue::Counter(1)]);
    }

    #[test]
    fn a_transport_that_ended_is_disconnected_and_its_failure_counted_as_receiving() {
        let recorder = DebuggingRecorder::new();
        let snapshot = recorder.snapshotter();
        let telemetry = metrics::with_local_recorder(&recorder, || Telemetry::new("kit"));
        telemetry.set_connected(true);
        let stopped = transport_ended(&telemetry, Ok::<_, ChannelError>(()));
        assert_eq!(stopped.unwrap(), ChannelExit::Stopped);
        assert!(!telemetry.is_connected());
        telemetry.set_connected(true);
        let e = transport_ended(&telemetry, Err("the token was refused")).unwrap_err();
        assert!(!telemetry.is_connected());
        assert!(matches!(&e, ChannelError::Transport(why) if why == "the token was refused"));
        assert_eq!(errors(&snapshot, "receiving"), [DebugValue::Counter(1)]);
    }
}
