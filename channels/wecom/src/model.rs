//! Every frame of WeCom's intelligent-bot long connection (doc path 101463, the official
//! Node and Python SDKs), read and written with serde, each type round-tripped against a
//! recorded payload in `tests/fixtures/`.
//!
//! One envelope carries everything, both ways: `{cmd, headers: {req_id}, body}`. WeCom's
//! answer to a frame the bot sent has no `cmd`: `{headers: {req_id}, errcode, errmsg,
//! body?}`, the `req_id` the request's. A reply to a message reuses the callback's
//! `req_id`; every other request (subscribe, ping, a proactive send, an upload step)
//! carries a fresh one. WeCom's answer to a request it cannot read has no `headers` at all
//! (observed: 40058 "invalid Request Parameter"): it is read with an empty `req_id`
//! ([`Frame::is_unnamed_refusal`]). Bodies stay [`Value`] in the envelope and are read into their type
//! by what the `cmd` says, so an unknown `cmd`, field or `msgtype` never fails a frame:
//! readers skip what they do not know.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The bot authenticates the connection (first frame after the socket opens).
pub const SUBSCRIBE: &str = "aibot_subscribe";
/// The bot's heartbeat.
pub const PING: &str = "ping";
/// WeCom delivers a user's message.
pub const MSG_CALLBACK: &str = "aibot_msg_callback";
/// WeCom delivers an event (entering a chat, a card click, feedback, a replaced
/// connection).
pub const EVENT_CALLBACK: &str = "aibot_event_callback";
/// The bot answers a message callback (a stream, a template card, a media message).
pub const RESPOND_MSG: &str = "aibot_respond_msg";
// Read and written by the fixture round trips; the adapter sends no welcome or card update.
#[allow(dead_code)]
/// The bot answers `enter_chat` with a welcome (within 5 s of the event).
pub const RESPOND_WELCOME: &str = "aibot_respond_welcome_msg";
// Read and written by the fixture round trips; the adapter sends no welcome or card update.
#[allow(dead_code)]
/// The bot answers a `template_card_event` by updating the card (within 5 s).
pub const RESPOND_UPDATE: &str = "aibot_respond_update_msg";
/// The bot sends a message of its own to a chat (a user id, or a group's `chatid`).
pub const SEND_MSG: &str = "aibot_send_msg";
/// Media upload, step one: announce the file, get an `upload_id`.
pub const UPLOAD_INIT: &str = "aibot_upload_media_init";
/// Media upload, step two: one base64 chunk.
pub const UPLOAD_CHUNK: &str = "aibot_upload_media_chunk";
/// Media upload, step three: get the `media_id` (valid three days).
pub const UPLOAD_FINISH: &str = "aibot_upload_media_finish";

/// The `eventtype` of the event WeCom sends an old connection when a new one subscribed
/// for the same bot; it then closes the old one.
pub const DISCONNECTED_EVENT: &str = "disconnected_event";
/// The `eventtype` of a user's first visit of the day to the bot's private chat.
pub const ENTER_CHAT: &str = "enter_chat";

/// One frame, either way.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Frame {
    /// What the frame is; absent on WeCom's answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cmd: Option<String>,
    /// The correlation id; absent on WeCom's answer to an invalid request (read as an
    /// empty `req_id`, and then not written back).
    #[serde(default, skip_serializing_if = "Headers::is_unnamed")]
    pub headers: Headers,
    /// The command's body (absent on a ping and on most answers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<Value>,
    /// On an answer: 0 when done, else WeCom's refusal (`error`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errcode: Option<i64>,
    /// On an answer: WeCom's words. Never logged or kept in an error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errmsg: Option<String>,
}

/// A frame's headers.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Headers {
    /// Pairs a request with its answer, and a reply with its callback.
    #[serde(default)]
    pub req_id: String,
}

impl Headers {
    /// Whether they name no `req_id`.
    pub fn is_unnamed(&self) -> bool {
        self.req_id.trim().is_empty()
    }
}

/// What an incoming frame is, by its `cmd`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `aibot_msg_callback`.
    Message,
    /// `aibot_event_callback`.
    Event,
    /// No `cmd`: WeCom's answer to the request with this `req_id`.
    Answer,
    /// A `cmd` this adapter does not know: skipped.
    Unknown,
}

impl Frame {
    /// A request: `cmd`, a `req_id`, a body (none for a ping).
    pub fn request(cmd: &str, req_id: impl Into<String>, body: Option<Value>) -> Self {
        Self {
            cmd: Some(cmd.to_owned()),
            headers: Headers {
                req_id: req_id.into(),
            },
            body,
            errcode: None,
            errmsg: None,
        }
    }

    /// What this frame is.
    pub fn kind(&self) -> Kind {
        match self.cmd.as_deref() {
            None | Some("") => Kind::Answer,
            Some(MSG_CALLBACK) => Kind::Message,
            Some(EVENT_CALLBACK) => Kind::Event,
            Some(_) => Kind::Unknown,
        }
    }

    /// Whether this is WeCom's refusal of a request it does not name: an answer with a
    /// non-zero `errcode` and no `req_id` (how WeCom answers an invalid request).
    pub fn is_unnamed_refusal(&self) -> bool {
        self.kind() == Kind::Answer
            && self.headers.is_unnamed()
            && self.errcode.is_some_and(|code| code != 0)
    }

    /// The body read as `T`, when there is one of that shape.
    pub fn body_as<T: serde::de::DeserializeOwned>(&self) -> Option<T> {
        self.body.as_ref().and_then(|b| T::deserialize(b).ok())
    }
}

/// `aibot_subscribe`'s body.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Subscribe {
    /// The BotID.
    pub bot_id: String,
    /// The long connection's Secret.
    pub secret: String,
}

impl std::fmt::Debug for Subscribe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscribe")
            .field("bot_id", &self.bot_id)
            .field("secret", &"<redacted>")
            .finish()
    }
}

/// Who triggered a callback.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sender {
    /// The user's id in the bot's corp.
    #[serde(default)]
    pub userid: String,
    /// The user's corp; absent for a corp-internal bot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub corpid: Option<String>,
}

/// Text (`text`, and a voice message's transcript `voice`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Text {
    /// The text; a group message keeps its `@Bot` mention.
    #[serde(default)]
    pub content: String,
}

/// An image, a file or a video a callback points at: `url` is signed, valid five minutes,
/// and serves the file AES-256-CBC encrypted with `aeskey` (see `inbound::media`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Media {
    /// The signed URL. Never logged.
    #[serde(default)]
    pub url: String,
    /// The file's key, base64 of 32 bytes (long connection only; unique per URL).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aeskey: Option<String>,
}

/// An item of a text-and-images (`mixed`) message.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MixedItem {
    /// `text` or `image`.
    #[serde(default)]
    pub msgtype: String,
    /// With `text`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<Text>,
    /// With `image`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<Media>,
}

/// A text-and-images message.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mixed {
    /// The items in order.
    #[serde(default)]
    pub msg_item: Vec<MixedItem>,
}

/// The message a user quoted (replied to). In a group, where the bot hears only text and
/// mixed messages, quoting is how a user shows it a picture, a file or a video.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Quote {
    /// `text`, `image`, `mixed`, `voice`, `file` or `video` (WeCom's plugin reads a quoted
    /// video; the SDK's type lists the other five).
    #[serde(default)]
    pub msgtype: String,
    /// With `text`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<Text>,
    /// With `image`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<Media>,
    /// With `mixed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mixed: Option<Mixed>,
    /// With `voice`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub voice: Option<Text>,
    /// With `file`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<Media>,
    /// With `video`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub video: Option<Media>,
}

/// `aibot_msg_callback`'s body: a user's message. Text and mixed messages (and quotes)
/// come from private chats and from groups where the bot was @-mentioned; images, voice
/// and files only from private chats (doc path 100719, 接收消息).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    /// The callback's id, repeated when WeCom delivers it again: the dedupe key.
    pub msgid: String,
    /// The bot's id.
    #[serde(default)]
    pub aibotid: String,
    /// The group's id; absent in a private chat.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chatid: Option<String>,
    /// `single` or `group`.
    #[serde(default)]
    pub chattype: String,
    /// The sender.
    #[serde(default)]
    pub from: Sender,
    /// When it was sent (seconds), when WeCom says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub create_time: Option<i64>,
    /// A temporary URL for a later reply (the callback mode's; unused here). Never logged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_url: Option<String>,
    /// `text`, `image`, `mixed`, `voice`, `file`, `video`, or one not known yet.
    #[serde(default)]
    pub msgtype: String,
    /// With `text`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<Text>,
    /// With `image`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<Media>,
    /// With `mixed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mixed: Option<Mixed>,
    /// With `voice`: WeCom's transcript.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub voice: Option<Text>,
    /// With `file` (at most 100 MB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<Media>,
    /// With `video`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub video: Option<Media>,
    /// The message the user quoted, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quote: Option<Quote>,
}

/// `aibot_event_callback`'s body.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventMessage {
    /// The callback's id.
    #[serde(default)]
    pub msgid: String,
    /// When it happened (seconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub create_time: Option<i64>,
    /// The bot's id.
    #[serde(default)]
    pub aibotid: String,
    /// The group's id, in a group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chatid: Option<String>,
    /// `single` or `group`, when WeCom says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chattype: Option<String>,
    /// Who triggered it.
    #[serde(default)]
    pub from: Sender,
    /// A temporary reply URL (card events). Never logged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_url: Option<String>,
    /// Always `event`.
    #[serde(default)]
    pub msgtype: String,
    /// The event.
    #[serde(default)]
    pub event: Event,
}

/// An event: its type, and its details under a key of the same name
/// (`template_card_event: {…}`, `feedback_event: {…}`), kept as written.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    /// `enter_chat`, `template_card_event`, `feedback_event`, `disconnected_event`, …
    #[serde(default)]
    pub eventtype: String,
    /// The details.
    #[serde(flatten)]
    pub detail: serde_json::Map<String, Value>,
}

/// A stream reply (`aibot_respond_msg`, `msgtype: stream`): the bot's answer to a message,
/// shown as one message refreshed in place.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamReply {
    /// Always `stream`.
    pub msgtype: String,
    /// The stream.
    pub stream: Stream,
}

/// One frame of a stream: the same `id` each time, `content` the whole text so far
/// (cumulative, at most 20480 bytes of Markdown), `finish` on the last.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stream {
    /// The bot's id for this stream, set on its first frame and kept.
    pub id: String,
    /// Whether this is the last frame.
    #[serde(default)]
    pub finish: bool,
    /// The text so far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// Images (at most 10), only with `finish: true`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub msg_item: Option<Vec<StreamImageItem>>,
    /// A feedback id (first frame only): user feedback then comes as `feedback_event`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feedback: Option<Feedback>,
}

/// An image at the end of a stream.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamImageItem {
    /// Always `image`.
    pub msgtype: String,
    /// The image.
    pub image: InlineImage,
}

/// An image inline: at most 10 MB before base64, JPG or PNG.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InlineImage {
    /// The bytes, base64.
    pub base64: String,
    /// The MD5 of the bytes, hex.
    pub md5: String,
}

/// A feedback id.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Feedback {
    /// At most 256 bytes.
    pub id: String,
}

impl StreamReply {
    /// A frame of stream `id` showing `content`.
    pub fn new(id: &str, content: &str, finish: bool) -> Self {
        Self {
            msgtype: "stream".to_owned(),
            stream: Stream {
                id: id.to_owned(),
                finish,
                content: Some(content.to_owned()),
                msg_item: None,
                feedback: None,
            },
        }
    }
}

// Read and written by the fixture round trips; the adapter sends no welcome or card update.
#[cfg_attr(not(test), allow(dead_code))]
/// A text message: the only welcome besides a template card
/// (`aibot_respond_welcome_msg`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TextReply {
    /// Always `text`.
    pub msgtype: String,
    /// The text.
    pub text: Text,
}

// Read and written by the fixture round trips; the adapter sends no welcome or card update.
#[cfg_attr(not(test), allow(dead_code))]
/// A card update (`aibot_respond_update_msg`); the card is not read here.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UpdateCard {
    /// Always `update_template_card`.
    pub response_type: String,
    /// Whose copy to replace; everyone's when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub userids: Option<Vec<String>>,
    /// The card (its `task_id` the event's).
    pub template_card: Value,
}

/// A message the bot sends on its own (`aibot_send_msg`), or a media reply
/// (`aibot_respond_msg` without `chatid`): markdown or an uploaded file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outgoing {
    /// A user id (private chat) or a group's `chatid`; absent on a reply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chatid: Option<String>,
    /// `markdown`, `file`, `image`, `voice`, `video`.
    pub msgtype: String,
    /// With `markdown`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub markdown: Option<Text>,
    /// With `file`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<MediaRef>,
    /// With `image`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<MediaRef>,
}

/// An uploaded file, by the `media_id` the upload answered.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MediaRef {
    /// Valid three days.
    pub media_id: String,
}

impl Outgoing {
    /// A markdown message to `chatid`.
    pub fn markdown(chatid: &str, content: &str) -> Self {
        Self {
            chatid: Some(chatid.to_owned()),
            msgtype: "markdown".to_owned(),
            markdown: Some(Text {
                content: content.to_owned(),
            }),
            file: None,
            image: None,
        }
    }
}

/// `aibot_upload_media_init`'s body.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UploadInit {
    /// `file`, `image`, `voice` or `video`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The file's name as shown.
    pub filename: String,
    /// Its size in bytes.
    pub total_size: u64,
    /// How many chunks follow (at most [`MAX_UPLOAD_CHUNKS`]).
    pub total_chunks: u32,
    /// The MD5 of the whole file, hex.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub md5: Option<String>,
}

/// The largest chunk, in bytes before base64 (the SDKs' `CHUNK_SIZE`).
pub const UPLOAD_CHUNK_BYTES: usize = 512 * 1024;
/// The most chunks one upload may have: with [`UPLOAD_CHUNK_BYTES`], about 50 MB.
pub const MAX_UPLOAD_CHUNKS: u32 = 100;

/// The body of WeCom's answer to `aibot_upload_media_init`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UploadStarted {
    /// Names the upload in the chunks and the finish.
    pub upload_id: String,
}

/// `aibot_upload_media_chunk`'s body.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UploadChunk {
    /// The upload.
    pub upload_id: String,
    /// Which chunk, from 0 (the SDKs' code; a comment in the Node SDK's types says 1).
    pub chunk_index: u32,
    /// The chunk, base64.
    pub base64_data: String,
}

/// `aibot_upload_media_finish`'s body.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UploadFinish {
    /// The upload.
    pub upload_id: String,
}

/// The body of WeCom's answer to `aibot_upload_media_finish`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Uploaded {
    /// The media's kind.
    #[serde(rename = "type")]
    pub kind: String,
    /// What a media message names.
    pub media_id: String,
    /// When it was made, as WeCom writes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<Value>,
}

#[cfg(test)]
mod tests;
