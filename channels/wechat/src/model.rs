//! Every body of the iLink bot API the adapter reads or writes (Tencent's
//! `@tencent-weixin/openclaw-weixin` plugin, its README's "Backend API Protocol" and
//! `api/types.ts`; DeerFlow's channel), read and written with serde, each type
//! round-tripped against a recorded payload in `tests/fixtures/`.
//!
//! Every bot endpoint is a POST of JSON carrying `base_info`; answers carry `ret` (0 or
//! absent: success) and, for an ended session, `errcode: -14` with no `ret` at all
//! ([`Envelope`]). Messages keep the fields the adapter does not read (`extra`), so a
//! message is never read lossily; an unknown item type is kept and skipped by readers.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Item types (`MessageItem.type`).
pub mod item {
    /// Text (`text_item.text`).
    pub const TEXT: i64 = 1;
    /// A picture (`image_item`).
    pub const IMAGE: i64 = 2;
    /// A voice message (`voice_item`, its transcript in `text`).
    pub const VOICE: i64 = 3;
    /// A file (`file_item`).
    pub const FILE: i64 = 4;
    /// A video (`video_item`).
    pub const VIDEO: i64 = 5;
}

/// `getuploadurl`'s `media_type`.
pub mod media_type {
    /// A picture.
    pub const IMAGE: i64 = 1;
    /// A file.
    pub const FILE: i64 = 3;
}

/// `message_type` of a user's message (2 is the bot's own).
pub const FROM_USER: i64 = 1;
/// `message_type` and `message_state` of what the bot sends: a bot message, finished.
pub const BOT_FINISHED: i64 = 2;
/// `sendtyping` statuses.
pub const TYPING: i64 = 1;
/// Cancels the typing hint.
pub const TYPING_DONE: i64 = 2;

/// What every POST body carries.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BaseInfo {
    /// The client's version (observability only).
    pub channel_version: String,
}

/// The answer envelope every endpoint shares: `ret`, or for an ended session `errcode`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Envelope {
    /// 0 or absent on success.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ret: Option<i64>,
    /// `-14` for an ended session (then without `ret`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errcode: Option<i64>,
    /// iLink's words: never logged, never shown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errmsg: Option<String>,
}

/// `getupdates`'s request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GetUpdates {
    /// The cursor: `""` the first time, then what the last answer gave.
    pub get_updates_buf: String,
    /// Versions.
    pub base_info: BaseInfo,
}

/// `getupdates`'s answer.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Updates {
    /// The envelope.
    #[serde(flatten)]
    pub envelope: Envelope,
    /// The messages, each read on its own (one that does not fit is skipped alone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub msgs: Option<Vec<Value>>,
    /// The cursor after these messages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub get_updates_buf: Option<String>,
    /// How long iLink holds the next poll.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub longpolling_timeout_ms: Option<i64>,
}

/// A `WeixinMessage`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Its position in the bot's updates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    /// A uint64 (or a string of one): what a redelivery repeats.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_id: Option<Value>,
    /// The same id under another name (DeerFlow reads it when `message_id` is missing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub msg_id: Option<Value>,
    /// The sending client's own id of the message (DeerFlow's last fallback).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<Value>,
    /// The sender (`…@im.wechat`).
    #[serde(default)]
    pub from_user_id: String,
    /// The bot (`…@im.bot`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub to_user_id: String,
    /// Milliseconds since the epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub create_time_ms: Option<u64>,
    /// A group's id; empty in a private chat.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_id: Option<String>,
    /// 1 from a user, 2 from a bot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_type: Option<i64>,
    /// The items, in order.
    #[serde(default)]
    pub item_list: Vec<Item>,
    /// What a reply to this message must carry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_token: Option<String>,
    /// Fields the adapter does not read.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Which field a message's id was read from ([`Message::id`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IdField {
    /// `message_id`, or its other name `msg_id`: iLink's id of the message.
    MessageId,
    /// `client_id`: the sending client's id, another namespace.
    ClientId,
}

impl Message {
    /// The message's id as text (a number or a string on the wire) and where it came from:
    /// `message_id`, else `msg_id`, else `client_id` (DeerFlow's fallbacks); `None` when
    /// none is usable.
    pub fn id(&self) -> Option<(String, IdField)> {
        [
            (&self.message_id, IdField::MessageId),
            (&self.msg_id, IdField::MessageId),
            (&self.client_id, IdField::ClientId),
        ]
        .into_iter()
        .find_map(|(value, field)| id_text(value.as_ref()?).map(|id| (id, field)))
    }
}

/// An id on the wire as text: a number, or a string that is not blank.
fn id_text(value: &Value) -> Option<String> {
    match value {
        Value::Number(n) => Some(n.to_string()),
        Value::String(s) if !s.trim().is_empty() => Some(s.trim().to_owned()),
        _ => None,
    }
}

/// A `MessageItem`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Item {
    /// [`item`] type.
    #[serde(rename = "type", default)]
    pub kind: i64,
    /// Text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text_item: Option<TextItem>,
    /// A picture.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_item: Option<MediaItem>,
    /// A voice message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub voice_item: Option<MediaItem>,
    /// A file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_item: Option<MediaItem>,
    /// A video.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub video_item: Option<MediaItem>,
    /// Fields the adapter does not read (`ref_msg`, `msg_id`, …).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `text_item`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TextItem {
    /// The text.
    #[serde(default)]
    pub text: String,
}

/// `image_item`, `voice_item`, `file_item` or `video_item`: the media and what each adds.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MediaItem {
    /// Where the encrypted bytes are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media: Option<Media>,
    /// A picture's key as hex (preferred over `media.aes_key` when present).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aeskey: Option<String>,
    /// A voice message's transcript.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// A file's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_name: Option<String>,
    /// A file's md5 (hex).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub md5: Option<String>,
    /// A file's size, as a string.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub len: Option<String>,
    /// A picture's ciphertext size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mid_size: Option<u64>,
    /// Fields the adapter does not read.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `CDNMedia`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Media {
    /// The CDN's download parameter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encrypt_query_param: Option<String>,
    /// Base64 of the raw key, or of its hex (both are seen).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aes_key: Option<String>,
    /// 1: AES-128-ECB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encrypt_type: Option<i64>,
    /// The whole download URL (newer answers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub full_url: Option<String>,
    /// Fields the adapter does not read.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `sendmessage`'s request.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SendMessage {
    /// The message.
    pub msg: OutMessage,
    /// Versions.
    pub base_info: BaseInfo,
}

/// A message the bot sends: one item.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OutMessage {
    /// Always empty.
    pub from_user_id: String,
    /// The user.
    pub to_user_id: String,
    /// The client's id of this message.
    pub client_id: String,
    /// [`BOT_FINISHED`].
    pub message_type: i64,
    /// [`BOT_FINISHED`].
    pub message_state: i64,
    /// The context token of the message answered.
    pub context_token: String,
    /// One item.
    pub item_list: Vec<Item>,
}

/// `getconfig`'s request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GetConfig {
    /// The user.
    pub ilink_user_id: String,
    /// Their latest context token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_token: Option<String>,
    /// Versions.
    pub base_info: BaseInfo,
}

/// `getconfig`'s answer.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Config {
    /// The envelope.
    #[serde(flatten)]
    pub envelope: Envelope,
    /// What `sendtyping` needs for this user.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub typing_ticket: Option<String>,
}

/// `sendtyping`'s request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SendTyping {
    /// The user.
    pub ilink_user_id: String,
    /// From `getconfig`.
    pub typing_ticket: String,
    /// [`TYPING`] or [`TYPING_DONE`].
    pub status: i64,
    /// Versions.
    pub base_info: BaseInfo,
}

/// `getuploadurl`'s request (no thumbnail: `no_need_thumb`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GetUploadUrl {
    /// The client's name of the upload.
    pub filekey: String,
    /// [`media_type`].
    pub media_type: i64,
    /// Who it goes to.
    pub to_user_id: String,
    /// The plain size.
    pub rawsize: u64,
    /// The plain md5, hex.
    pub rawfilemd5: String,
    /// The ciphertext size.
    pub filesize: u64,
    /// The AES-128 key, hex.
    pub aeskey: String,
    /// No thumbnail is uploaded.
    pub no_need_thumb: bool,
    /// Versions.
    pub base_info: BaseInfo,
}

/// `getuploadurl`'s answer.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UploadUrl {
    /// The envelope.
    #[serde(flatten)]
    pub envelope: Envelope,
    /// The CDN upload's `encrypted_query_param`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upload_param: Option<String>,
    /// The whole upload URL (newer answers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upload_full_url: Option<String>,
}

/// `get_bot_qrcode`'s answer.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QrCode {
    /// The envelope.
    #[serde(flatten)]
    pub envelope: Envelope,
    /// The code's id, for `get_qrcode_status`.
    #[serde(default)]
    pub qrcode: String,
    /// What the QR image encodes: a URL the phone opens.
    #[serde(default)]
    pub qrcode_img_content: String,
}

/// `get_qrcode_status`'s answer.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QrStatus {
    /// The envelope.
    #[serde(flatten)]
    pub envelope: Envelope,
    /// `wait`, `scaned`, `confirmed`, `expired` (and others the adapter does not play).
    #[serde(default)]
    pub status: String,
    /// On `confirmed`: the token. Moved into a `Secret` at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bot_token: Option<String>,
    /// On `confirmed`: the bot's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ilink_bot_id: Option<String>,
    /// On `confirmed`: the API base for this bot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseurl: Option<String>,
    /// On `confirmed`: who scanned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ilink_user_id: Option<String>,
}

#[cfg(test)]
mod tests;
