//! Every QQ wire type the adapter reads or writes (bot API v2), and nothing more: the
//! gateway's and the webhook's `{op, d, s, t, id}` payloads and what their `d` carries,
//! the message events, and the REST bodies (the token, gateway discovery, a passive reply
//! and a refusal).
//!
//! Optional fields are skipped when absent, so every type writes back the JSON it was
//! read from; each one round-trips against a recorded payload in `tests/fixtures/`
//! (`model/tests.rs`). Fields that carry what a server wrote (`message`, `trace_id`) are
//! modelled so a payload survives the round trip, but never go into an error or a log.
//! Fields the adapter does not read are kept as raw JSON values, so a payload is read
//! exactly as leniently as when they were not modelled.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One frame of the gateway (`Op = u8`: an op code outside 0..=255 is no frame) or one
/// webhook callback (`Op = i64`: any op is read, unknown ones acknowledged).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Payload<Op = u8> {
    /// The op code.
    pub op: Op,
    /// The op's data (`null` when absent).
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub d: Value,
    /// The sequence number of an event (gateway only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub s: Option<u64>,
    /// The event type of op 0 (`READY`, `GROUP_AT_MESSAGE_CREATE`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub t: Option<String>,
    /// The event id of op 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
}

/// Hello's `d` (op 10).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    /// The heartbeat interval, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heartbeat_interval: Option<u64>,
}

/// READY's `d`: the session and who the bot is.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReadyData {
    /// The gateway version (not read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<Value>,
    /// The session id (what a Resume names; a number is read too). Never logged.
    pub session_id: Value,
    /// The bot.
    pub user: ReadyUser,
    /// The shard this session is (not read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<Value>,
}

/// READY's `user`: the bot.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReadyUser {
    /// The bot's user id (what `<@!id>` mentions carry; a number is read too).
    pub id: Value,
    /// The bot's name (read when it is a string).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username: Option<Value>,
    /// Always true for a bot (not read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bot: Option<Value>,
    /// QQ's status of the bot (not read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<Value>,
}

/// Identify (op 2)'s `d`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Identify {
    /// `QQBot <access token>`.
    pub token: String,
    /// The intents asked for.
    pub intents: u64,
    /// The single shard `[0, 1]`.
    pub shard: [u32; 2],
    /// Client properties (none are sent).
    pub properties: serde_json::Map<String, Value>,
}

/// Resume (op 6)'s `d`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resume {
    /// `QQBot <access token>`.
    pub token: String,
    /// The session resumed.
    pub session_id: String,
    /// The last sequence number seen.
    pub seq: u64,
}

/// A frame the adapter writes: `{op, d}` with `d` always present (a heartbeat's `null`
/// included).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Outgoing<D> {
    /// The op code.
    pub op: u8,
    /// The data.
    pub d: D,
}

/// A `GROUP_AT_MESSAGE_CREATE` or `C2C_MESSAGE_CREATE` event's `d`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MessageEvent {
    /// The message id every passive reply names.
    pub id: String,
    /// The text.
    #[serde(default)]
    pub content: String,
    /// When it was sent (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
    /// Who sent it.
    #[serde(default)]
    pub author: Author,
    /// The group (group messages).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_openid: Option<String>,
    /// The group's id (the same as `group_openid`; not read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_id: Option<Value>,
    /// Where the message came from (not read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_scene: Option<Value>,
    /// QQ's message type (not read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_type: Option<Value>,
    /// Files attached.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<Attachment>,
}

/// A message's `author`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Author {
    /// QQ's id of the author (not read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<Value>,
    /// The sender of a direct message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_openid: Option<String>,
    /// The sender of a group message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub member_openid: Option<String>,
    /// The sender across the developer's bots (not read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub union_openid: Option<Value>,
}

/// A file attached to a message.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Attachment {
    /// Its MIME type (`image/png`), or QQ's `file`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_type: Option<String>,
    /// Its name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filename: Option<String>,
    /// Where it is (pre-signed, sometimes without a scheme). Never logged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Its size: a number or a string of digits; 0 when QQ does not know.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<Value>,
    /// An image's height (not read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub height: Option<Value>,
    /// An image's width (not read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub width: Option<Value>,
}

/// The callback validation's `d` (webhook op 13).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Validation {
    /// The string to sign.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plain_token: Option<String>,
    /// The timestamp to sign it with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_ts: Option<String>,
}

/// The answer to the callback validation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ValidationAnswer {
    /// The string QQ sent.
    pub plain_token: String,
    /// The hex ed25519 signature of `event_ts` + `plain_token`.
    pub signature: String,
}

/// `POST /app/getAppAccessToken`'s body.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenRequest {
    /// The bot's AppID.
    pub app_id: String,
    /// The bot's AppSecret.
    pub client_secret: String,
}

/// The token endpoint's answer: the token, or a refusal's `code`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TokenAnswer {
    /// The token. Never logged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access_token: Option<String>,
    /// Its lifetime in seconds: documented as a number, sent as a string in QQ's example.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_in: Option<Value>,
    /// A refusal's code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<i64>,
    /// A refusal's text (not ours to trust: never kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// `GET /gateway`'s answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GatewayAnswer {
    /// The WebSocket URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// A refusal's code (sometimes under HTTP 200).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<i64>,
}

/// A passive reply's body (`POST /v2/groups/{id}/messages`, `/v2/users/{id}/messages`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplyRequest {
    /// 0: plain text.
    pub msg_type: u8,
    /// The text.
    pub content: String,
    /// The source message answered.
    pub msg_id: String,
    /// This reply's number among the source's replies.
    pub msg_seq: u32,
}

/// A reply's answer: the new message, or a refusal's `code`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReplyAnswer {
    /// The new message's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// When it was sent (not read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<Value>,
    /// A refusal's code (sometimes under HTTP 200).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<i64>,
}

/// A refusal: `{code, message, err_code?, trace_id?}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refusal {
    /// QQ's code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<i64>,
    /// QQ's text (it may quote what was sent: never kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// A second code QQ sometimes adds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub err_code: Option<i64>,
    /// QQ's trace id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
}

#[cfg(test)]
mod tests;
