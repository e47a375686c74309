//! The normalized message model every adapter produces and consumes (spec manager §2).
//!
//! Inbound messages are what an adapter hands to the daemon; outbound messages are what the
//! daemon publishes back. Attachments carry bytes or an opaque fetch handle, never a
//! token-bearing URL, so a message can be logged by shape and persisted without leaking.
//!
//! Children:
//! - `file_name.rs`: [`safe_file_name`], a file's name made safe to store under.

use std::borrow::Cow;
use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::error::{ChannelError, ChannelResult};
use crate::ids::{ChatId, MessageId, UserId};

mod file_name;

pub use file_name::safe_file_name;

/// Whether the adapter classified the text as a known slash command.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MsgType {
    /// Ordinary text for the agent.
    #[default]
    Chat,
    /// A known command such as `/goal` or `/new`.
    Command,
}

/// Whether a conversation is one-to-one or has several members. Delivery uses it to pick
/// the minimum edit interval; `/lang` uses it to decide who may change the chat's language.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChatKind {
    /// A direct message / private chat.
    #[default]
    Private,
    /// A group, channel or guild conversation.
    Group,
}

/// The broad kind of an inbound attachment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FileKind {
    /// A picture.
    Image,
    /// Any document.
    File,
    /// A voice note or audio file.
    Audio,
    /// A video.
    Video,
}

impl FileKind {
    /// The kind a declared MIME type names (lower-case; `None` or anything else is a
    /// [`FileKind::File`]).
    pub fn from_mime(mime: Option<&str>) -> Self {
        match mime {
            Some(t) if t.starts_with("image/") => FileKind::Image,
            Some(t) if t.starts_with("audio/") => FileKind::Audio,
            Some(t) if t.starts_with("video/") => FileKind::Video,
            _ => FileKind::File,
        }
    }
}

/// Where an inbound attachment's bytes come from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum FileSource {
    /// Bytes already read by the adapter. Never serialized: bytes are not persisted or echoed.
    Inline {
        /// The content.
        #[serde(skip)]
        bytes: Bytes,
    },
    /// An opaque platform handle (e.g. a Telegram `file_id`) the adapter can resolve later.
    Handle {
        /// The handle.
        id: String,
    },
    /// A file already on local disk: staged by the adapter, or read ahead by the daemon
    /// where handles expire
    /// ([`Capabilities::files_expire_after`](crate::Capabilities::files_expire_after)).
    Path {
        /// The local path.
        path: PathBuf,
        /// The handle it was read from, if any: a process that cannot see the path (another
        /// replica) reads the handle again.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        handle: Option<String>,
    },
}

/// An attachment descriptor on an inbound message.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InboundFile {
    /// The broad kind.
    pub kind: FileKind,
    /// The file name as the sender gave it, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filename: Option<String>,
    /// Declared MIME type, if the platform reports one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// Declared size in bytes, if the platform reports one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// Where the bytes are.
    pub source: FileSource,
}

/// What a platform tells of an inbound file only when it is read: its name and media type
/// (WeCom names a file in its download's `Content-Disposition`, not in the message), each
/// when told. [`Channel::fetch_labeled`](crate::Channel::fetch_labeled) returns it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FileLabel {
    /// The file's name, as the download named it (unsanitized: see [`safe_file_name`]).
    pub filename: Option<String>,
    /// The file's media type (`application/pdf`), when more than generic bytes.
    pub mime_type: Option<String>,
}

impl InboundFile {
    /// Takes from `label` what the file does not say of itself: its name, its media type.
    pub fn learn(&mut self, label: FileLabel) {
        if self.filename.as_deref().is_none_or(str::is_empty) {
            self.filename = label.filename.or(self.filename.take());
        }
        if self.mime_type.as_deref().is_none_or(str::is_empty) {
            self.mime_type = label.mime_type.or(self.mime_type.take());
        }
    }

    /// The bytes the adapter already read ([`FileSource::Inline`]), if there are at most
    /// `max_bytes` of them: what [`Channel::fetch_file`](crate::Channel::fetch_file) does
    /// by default, and what an adapter overriding it for its handles falls back to.
    ///
    /// A larger file is [`ChannelError::TooLarge`], which names the bound only (never the
    /// file's name); a handle or a staged path is [`ChannelError::Unsupported`].
    pub fn inline_bytes(&self, max_bytes: u64) -> ChannelResult<Bytes> {
        match &self.source {
            FileSource::Inline { bytes } if bytes.len() as u64 <= max_bytes => Ok(bytes.clone()),
            FileSource::Inline { .. } => Err(ChannelError::TooLarge { limit: max_bytes }),
            FileSource::Handle { .. } | FileSource::Path { .. } => {
                Err(ChannelError::Unsupported("fetching this kind of file"))
            }
        }
    }
}

/// A message from a platform, normalized by its adapter (spec manager §2.1).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct InboundMessage {
    /// Provider key (`telegram`, `feishu`, `dingtalk`, `qq`, `discord`, `console`, …).
    pub channel_name: String,
    /// Platform conversation id.
    pub chat_id: ChatId,
    /// Raw platform sender id.
    pub user_id: UserId,
    /// Message text (adapters may strip leading bot mentions).
    pub text: String,
    /// Chat or known command.
    #[serde(default)]
    pub msg_type: MsgType,
    /// Private or group conversation.
    #[serde(default)]
    pub chat_kind: ChatKind,
    /// Platform message id replies thread under (the source message).
    #[serde(default)]
    pub thread_ts: Option<MessageId>,
    /// Sub-conversation key inside the chat (a group reply chain, a forum topic, a thread):
    /// each topic is a conversation of its own.
    #[serde(default)]
    pub topic_id: Option<String>,
    /// The platform message this one replies to, if it is a reply: the daemon continues
    /// the conversation that message belongs to (a reply chain), whatever `topic_id` says.
    #[serde(default)]
    pub reply_to: Option<MessageId>,
    /// What the platform repeats when it delivers this message again; `None` when it
    /// repeats nothing reliable, and then the message is never deduplicated.
    #[serde(default)]
    pub redelivery: Option<RedeliveryKey>,
    /// What the platform repeats for each other platform message joined into this one (an
    /// adapter that offers several as one question: a burst of photos, an album): a
    /// redelivery of any of them alone is known for handled once this message is. Empty
    /// for a message that is one platform message.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub redelivery_parts: Vec<RedeliveryKey>,
    /// External workspace / team / guild / tenant scope.
    #[serde(default)]
    pub workspace_id: Option<String>,
    /// Attachments.
    #[serde(default)]
    pub files: Vec<InboundFile>,
    /// Provider extras (`message_id`, …) adapters want back on the replies' metadata. The
    /// daemon reads nothing from them.
    #[serde(default)]
    pub metadata: Map<String, Value>,
    /// The sender's platform language when the platform reports one (BCP 47-ish tag).
    #[serde(default)]
    pub locale_hint: Option<String>,
    /// When it was sent, in Unix seconds: the platform's own timestamp where the adapter
    /// reads one ([`InboundMessage::sent_at`]), else when the adapter received it. Reply
    /// windows run from it, and the daemon does not act on a message older than its
    /// channel's `max_event_age` by it, so a message without a platform timestamp is never
    /// taken for stale.
    #[serde(default = "now_unix")]
    pub created_at: f64,
}

impl InboundMessage {
    /// A chat message with every optional field empty and `created_at` = now.
    pub fn new(
        channel_name: impl Into<String>,
        chat_id: impl Into<ChatId>,
        user_id: impl Into<UserId>,
        text: impl Into<String>,
    ) -> Self {
        Self {
            channel_name: channel_name.into(),
            chat_id: chat_id.into(),
            user_id: user_id.into(),
            text: text.into(),
            msg_type: MsgType::Chat,
            chat_kind: ChatKind::Private,
            thread_ts: None,
            topic_id: None,
            reply_to: None,
            redelivery: None,
            redelivery_parts: Vec::new(),
            workspace_id: None,
            files: Vec::new(),
            metadata: Map::new(),
            locale_hint: None,
            created_at: now_unix(),
        }
    }

    /// Dates the message by the platform's timestamp (Unix seconds): when it was sent, not
    /// when it arrived here. A value that names no time (not finite, zero or below, as a
    /// missing field often reads) is ignored: the message keeps its arrival time.
    pub fn sent_at(&mut self, unix_seconds: f64) {
        if unix_seconds.is_finite() && unix_seconds > 0.0 {
            self.created_at = unix_seconds;
        }
    }

    /// [`InboundMessage::sent_at`] from milliseconds since the epoch, as many platforms
    /// write their timestamps.
    pub fn sent_at_millis(&mut self, unix_millis: i64) {
        self.sent_at(unix_millis as f64 / 1000.0);
    }

    /// Keeps each `(key, value)` of `extras` as a string in
    /// [`metadata`](InboundMessage::metadata), for the replies (the platform's message
    /// id, its chat's kind, …).
    pub fn keep_metadata<'a>(&mut self, extras: impl IntoIterator<Item = (&'a str, &'a str)>) {
        for (key, value) in extras {
            self.metadata
                .insert(key.to_owned(), Value::String(value.to_owned()));
        }
    }

    /// A reply to this message: routing fields and slimmed metadata copied over, as the
    /// spec requires (metadata minus `raw_message` and `ref_msg`).
    pub fn reply(&self, text: impl Into<String>, is_final: bool) -> OutboundMessage {
        let mut metadata = self.metadata.clone();
        metadata.remove("raw_message");
        metadata.remove("ref_msg");
        OutboundMessage {
            channel_name: self.channel_name.clone(),
            chat_id: self.chat_id.clone(),
            chat_kind: self.chat_kind,
            text: text.into(),
            attachments: Vec::new(),
            is_final,
            thread_ts: self.thread_ts.clone(),
            metadata,
            hints: DeliveryHints::default(),
            source_created_at: Some(self.created_at),
            created_at: now_unix(),
        }
    }
}

/// The identity a platform repeats when it delivers a message again (a retried webhook, a
/// replayed event): the message is a redelivery when `(channel, scope, chat, id)` was seen.
///
/// The adapter chooses both parts, because only it knows what its platform guarantees:
/// Telegram's message ids are unique within a chat, so the chat is the scope; a platform
/// whose event ids are unique per workspace scopes them by the workspace.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RedeliveryKey {
    /// Where `id` is unique: a chat, a workspace, a tenant.
    pub scope: String,
    /// The event or message id the platform repeats.
    pub id: String,
}

impl RedeliveryKey {
    /// A key from its two parts.
    pub fn new(scope: impl Into<String>, id: impl Into<String>) -> Self {
        Self {
            scope: scope.into(),
            id: id.into(),
        }
    }
}

/// A file to upload after a reply's text, already on this host.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutboundFile {
    /// Where the bytes are on this host.
    pub path: PathBuf,
    /// Base name shown to the user.
    pub filename: String,
    /// Guessed MIME type (default `application/octet-stream`).
    pub mime_type: String,
    /// Size in bytes.
    pub size: u64,
    /// Whether the MIME type starts with `image/`.
    pub is_image: bool,
    /// A localized line the delivery engine sends instead when the platform refuses the
    /// file, so a refusal is never silent.
    #[serde(default)]
    pub if_refused: Option<String>,
}

impl OutboundFile {
    /// Whether the file is a picture of one of `types`, the MIME types a platform takes as
    /// an image message (an SVG is an `image/*` no chat app shows as one): any other file
    /// goes as a file message, which the platform does take.
    pub fn is_image_of(&self, types: &[&str]) -> bool {
        self.is_image
            && types
                .iter()
                .any(|t| t.eq_ignore_ascii_case(&self.mime_type))
    }
}

/// A reply the daemon publishes to a channel (spec manager §2.2).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OutboundMessage {
    /// Routing: the provider key.
    pub channel_name: String,
    /// Routing: the conversation.
    pub chat_id: ChatId,
    /// Private or group conversation (copied from the inbound message).
    #[serde(default)]
    pub chat_kind: ChatKind,
    /// The reply text (already localized).
    pub text: String,
    /// Files to upload after the text.
    #[serde(default)]
    pub attachments: Vec<OutboundFile>,
    /// `false` = a streaming/progress update that a channel may fold or drop.
    #[serde(default = "default_true")]
    pub is_final: bool,
    /// The source message id: reply threading and stream keying.
    #[serde(default)]
    pub thread_ts: Option<MessageId>,
    /// Inbound metadata (slimmed): the provider extras the adapter reads back (a Discord
    /// `channel_id`, a DingTalk `robot_code`, …). The daemon adds nothing here; what it
    /// tells the delivery engine goes in [`hints`](Self::hints).
    #[serde(default)]
    pub metadata: Map<String, Value>,
    /// How the delivery engine treats this reply beyond its text.
    #[serde(default, skip_serializing_if = "DeliveryHints::is_empty")]
    pub hints: DeliveryHints,
    /// When the source message was created (Unix seconds): reply windows run from it.
    #[serde(default)]
    pub source_created_at: Option<f64>,
    /// Unix seconds.
    #[serde(default = "now_unix")]
    pub created_at: f64,
}

/// What the daemon tells the delivery engine about a reply, beside its text: read by the
/// delivery layers, never sent to a platform nor read by an adapter. Empty for most
/// replies.
///
/// Non-exhaustive: build one with [`Default`] and set the fields it needs.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct DeliveryHints {
    /// The localized sentence a final ends with when the delivery engine has to cut it
    /// short (a source's replies run out under a [`ReplyWindow`](crate::ReplyWindow));
    /// `None`: an ellipsis.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub truncated_note: Option<String>,
    /// The platform message this reply goes on in when no stream of it is live in this
    /// engine: the one a process that stopped streamed the reply into (a restarted bridge
    /// finishes it in place), or the one a retried final edits again. A live stream wins.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resumes: Option<MessageId>,
    /// The localized line a final opens with if it waits for the chat's next message and
    /// goes out as a reply to that one (its own source took no more replies).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_note: Option<String>,
    /// The localized line what is left of a final opens with if its source stopped taking
    /// replies after the final's first messages
    /// ([`ChannelError::ReplyWindowRest`](crate::ChannelError::ReplyWindowRest)), and a
    /// later message carries the rest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rest_note: Option<String>,
    /// The localized line a final opens with that its text does not hold (why it comes
    /// late, when a later process delivers it): the length layer splits the text as it
    /// would without it, so each message keeps the key it had in an earlier attempt, and
    /// puts the line before the first message where it fits there, else after the last
    /// one; where it fits neither, it is left out (never a message of its own, which would
    /// be shown again on every attempt where the platform reads no key).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lead_note: Option<String>,
    /// The text is what the reader sees, not the agent's Markdown: the length layer
    /// splits it as it is and writes each message in the markup literally (what is left
    /// of a reply, [`ChannelError::ReplyWindowRest`](crate::ChannelError::ReplyWindowRest)).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub literal: bool,
    /// The reply goes on below everything its chat was sent since its stream's message:
    /// where this engine sent the chat another message after that one, the message is
    /// finished as it shows and the reply continues in a new one. Set when a message that
    /// waited for the run before it gets its turn, so that its answer never stands above
    /// the answer before it (its "waiting" notice may have been shown first).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stays_last: bool,
    /// On a turn's end ([`Channel::turn_ended`](crate::Channel::turn_ended)): a final of
    /// the turn was refused for good, or its retries gave up, so the user's message went
    /// without its answer (Slack then marks it `x`, not `white_check_mark`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unanswered: bool,
    /// Names this reply for a platform's own deduplication of sends: the same for every
    /// attempt at it, in this process or after a restart, and no other reply's. Where a
    /// platform drops a second send under one key (QQ's `msg_seq` per source message,
    /// Discord's `nonce`, Feishu's `uuid`), a final whose send landed while its answer was
    /// lost (a timeout, or the bridge died before it read it) shows once, not twice. Set by
    /// the journal on the finals it writes ahead; each part of a reply split into several
    /// messages has its own ([`DeliveryHints::part`]). A stream's start
    /// ([`Channel::start_stream`](crate::Channel::start_stream)) goes under a key the
    /// delivery engine gives that stream (`stream-` and 128 random bits, in memory): the
    /// same on every attempt to start its message, no final's and no other stream's, so a
    /// start whose answer was lost shows once when it is made again; the stream's edits
    /// and finish go under the reply's hints. Adapters read it through
    /// [`DeliveryHints::send_key_hash`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send_key: Option<String>,
}

impl DeliveryHints {
    /// No hints: what a reply carries unless the daemon sets some.
    pub const NONE: &'static Self = &Self {
        truncated_note: None,
        resumes: None,
        held_note: None,
        rest_note: None,
        lead_note: None,
        literal: false,
        stays_last: false,
        unanswered: false,
        send_key: None,
    };

    /// Whether no hint is set (then the hints are not serialized).
    pub fn is_empty(&self) -> bool {
        self == Self::NONE
    }

    /// The hints of part `n` (0 the first) of this reply split into several messages:
    /// part 0 keeps the reply's send key, each later part has one of its own.
    pub fn part(&self, n: usize) -> Cow<'_, Self> {
        self.suffixed('.', n)
    }

    /// The hints of a message an adapter cuts from a part on its own (a card that came
    /// out too large): cut `n` (1 the first after the part itself) has a key apart from
    /// every part's ([`DeliveryHints::part`]).
    pub fn cut(&self, n: usize) -> Cow<'_, Self> {
        self.suffixed('/', n)
    }

    /// The hints of a message the delivery engine resends as plain text in several (the
    /// platform refused its markup, and its link addresses written out took it past the
    /// limit): piece `n` (1 the first after the message itself) has a key apart from every
    /// part's ([`DeliveryHints::part`]) and every cut's ([`DeliveryHints::cut`]).
    pub fn piece(&self, n: usize) -> Cow<'_, Self> {
        self.suffixed('+', n)
    }

    /// These hints with the send key followed by `sep` and `n`, for `n` past 0.
    fn suffixed(&self, sep: char, n: usize) -> Cow<'_, Self> {
        match &self.send_key {
            Some(key) if n > 0 => Cow::Owned(Self {
                send_key: Some(format!("{key}{sep}{n}")),
                ..self.clone()
            }),
            _ => Cow::Borrowed(self),
        }
    }

    /// The hints of a message that is not the reply itself (a line saying a file did not
    /// come): the same, without the send key.
    pub fn unnamed(&self) -> Cow<'_, Self> {
        match self.send_key {
            Some(_) => Cow::Owned(Self {
                send_key: None,
                ..self.clone()
            }),
            None => Cow::Borrowed(self),
        }
    }

    /// The send key as 64 bits of its SHA-256, for a platform field of its own shape
    /// (a number, a short string); `None` without a key.
    pub fn send_key_hash(&self) -> Option<u64> {
        let key = self.send_key.as_deref()?;
        let digest = Sha256::digest(key.as_bytes());
        let mut first = [0; 8];
        first.copy_from_slice(&digest[..8]);
        Some(u64::from_be_bytes(first))
    }
}

fn default_true() -> bool {
    true
}

/// Current time as unix seconds.
pub(crate) fn now_unix() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_part_of_a_keyed_reply_has_a_key_of_its_own() {
        assert_eq!(DeliveryHints::NONE.part(3).send_key, None);
        assert_eq!(DeliveryHints::NONE.send_key_hash(), None);
        let hints = DeliveryHints {
            send_key: Some("e1:2".into()),
            stays_last: true,
            ..DeliveryHints::default()
        };
        assert!(matches!(hints.part(0), Cow::Borrowed(_)));
        let second = hints.part(1);
        assert_eq!(second.send_key.as_deref(), Some("e1:2.1"));
        assert!(second.stays_last, "the other hints stay");
        // Stable (the same after a restart) and apart from other keys.
        let hash = hints.send_key_hash().unwrap();
        assert_eq!(Some(hash), hints.clone().send_key_hash());
        assert_ne!(Some(hash), second.send_key_hash());
        // An adapter's own cuts stand apart from the parts; a line of its own has none.
        assert_eq!(hints.cut(1).send_key.as_deref(), Some("e1:2/1"));
        assert_eq!(second.cut(1).send_key.as_deref(), Some("e1:2.1/1"));
        // So do the pieces of a message resent as plain text, and an adapter's cuts of one.
        assert_eq!(hints.piece(1).send_key.as_deref(), Some("e1:2+1"));
        assert_eq!(second.piece(2).send_key.as_deref(), Some("e1:2.1+2"));
        assert_eq!(
            second.piece(1).cut(1).send_key.as_deref(),
            Some("e1:2.1+1/1")
        );
        assert_eq!(hints.unnamed().send_key, None);
        assert!(hints.unnamed().stays_last);
        // Pinned: a bridge restarted on a newer build names the reply as the older one did.
        assert_eq!(hash, 0x73d7_c410_84c5_9616);
    }

    #[test]
    fn inbound_round_trips_and_never_serializes_bytes() {
        let mut msg = InboundMessage::new("telegram", "42", "7", "hello");
        msg.files.push(InboundFile {
            kind: FileKind::Image,
            filename: Some("a.png".into()),
            mime_type: None,
            size: Some(3),
            source: FileSource::Inline {
                bytes: Bytes::from_static(b"abc"),
            },
        });
        msg.metadata.insert("message_id".into(), Value::from(9));
        let json = serde_json::to_string(&msg).unwrap();
        assert!(
            !json.contains("abc\""),
            "inline bytes must not be serialized: {json}"
        );
        assert!(json.contains("\"msg_type\":\"chat\""));
        let back: InboundMessage = serde_json::from_str(&json).unwrap();
        assert_eq!(back.chat_id, msg.chat_id);
        assert_eq!(back.metadata, msg.metadata);
    }

    #[test]
    fn kept_metadata_are_strings_a_later_value_replacing_an_earlier() {
        let mut msg = InboundMessage::new("any", "c", "u", "x");
        msg.keep_metadata([("message_id", "m1"), ("chat_type", "group")]);
        msg.keep_metadata([("message_id", "m2")]);
        assert_eq!(msg.metadata["message_id"], Value::from("m2"));
        assert_eq!(msg.metadata["chat_type"], Value::from("group"));
        assert_eq!(msg.metadata.len(), 2);
    }

    #[test]
    fn only_a_real_platform_timestamp_dates_a_message() {
        let mut msg = InboundMessage::new("any", "c", "u", "x");
        let arrived = msg.created_at;
        for nothing in [0.0, -5.0, f64::NAN, f64::INFINITY] {
            msg.sent_at(nothing);
            assert_eq!(msg.created_at, arrived, "{nothing}");
        }
        msg.sent_at_millis(0);
        assert_eq!(msg.created_at, arrived);
        msg.sent_at(1_700_000_000.0);
        assert_eq!(msg.created_at, 1_700_000_000.0);
        msg.sent_at_millis(1_700_000_123_500);
        assert_eq!(msg.created_at, 1_700_000_123.5);
        assert_eq!(
            msg.reply("r", true).source_created_at,
            Some(1_700_000_123.5)
        );
    }

    #[test]
    fn a_mime_type_names_the_file_kind() {
        assert_eq!(FileKind::from_mime(Some("image/png")), FileKind::Image);
        assert_eq!(FileKind::from_mime(Some("audio/ogg")), FileKind::Audio);
        assert_eq!(FileKind::from_mime(Some("video/mp4")), FileKind::Video);
        assert_eq!(FileKind::from_mime(Some("application/pdf")), FileKind::File);
        assert_eq!(FileKind::from_mime(None), FileKind::File);
    }

    #[test]
    fn delivery_hints_are_serialized_only_when_set() {
        let msg = InboundMessage::new("qq", "group:g", "u", "question");
        let mut out = msg.reply("answer", true);
        assert!(out.hints.is_empty());
        let json = serde_json::to_string(&out).unwrap();
        assert!(!json.contains("hints"), "{json}");
        out.hints.truncated_note = Some("(cut)".into());
        out.hints.resumes = Some(MessageId::new("m1"));
        let json = serde_json::to_string(&out).unwrap();
        let back: OutboundMessage = serde_json::from_str(&json).unwrap();
        assert_eq!(back.hints, out.hints);
        assert!(back.metadata.is_empty(), "hints never become metadata");
    }

    #[test]
    fn minimal_outbound_defaults_to_final() {
        let out: OutboundMessage =
            serde_json::from_str(r#"{"channel_name":"qq","chat_id":"c2c:1","text":"hi"}"#).unwrap();
        assert!(out.is_final);
        assert!(out.attachments.is_empty());
    }

    #[test]
    fn reply_slims_metadata_and_copies_routing() {
        let mut msg = InboundMessage::new("feishu", "oc_1", "ou_1", "x");
        msg.thread_ts = Some(MessageId::new("om_1"));
        msg.metadata.insert("raw_message".into(), Value::from("{}"));
        msg.metadata.insert("ref_msg".into(), Value::from("{}"));
        msg.metadata
            .insert("message_id".into(), Value::from("om_1"));
        let out = msg.reply("ok", false);
        assert_eq!(out.thread_ts, msg.thread_ts);
        assert!(!out.is_final);
        assert_eq!(out.metadata.len(), 1);
        assert!(out.metadata.contains_key("message_id"));
    }
}
