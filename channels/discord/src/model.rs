//! Every Discord wire type the adapter reads or writes itself: the REST bodies it sends
//! (a message, a thread, an upload's `payload_json`) and the answers it reads (gateway
//! discovery, the bot user, a channel, a created message, a refusal). The gateway's frames
//! are serenity's to read; of them the adapter only takes a `MESSAGE_CREATE` [`Message`],
//! serenity's own type, which needs no fixture here.
//!
//! Shapes follow Discord's API reference (v10). Only fields the adapter uses are modelled;
//! unknown ones are ignored on input. Optional fields are skipped when absent, so each type
//! writes back the JSON it was read from; each round-trips against a recorded payload in
//! `tests/fixtures/` (`model/tests.rs`). Answers are read as leniently as Discord's JSON
//! was read before they were typed: a field of an unexpected type reads as absent
//! ([`lenient`]), and ids (snowflakes) are strings of digits or numbers ([`snowflake`]).

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

pub use serenity::model::channel::Message;

/// A snowflake as Discord writes it (a string of digits; a number is accepted).
pub fn snowflake(v: &Value) -> Option<u64> {
    match v {
        Value::String(s) => s.parse().ok(),
        Value::Number(n) => n.as_u64(),
        _ => None,
    }
}

/// Reads an optional field, taking a value of the wrong type as absent.
fn lenient<'de, D: Deserializer<'de>, T: DeserializeOwned>(d: D) -> Result<Option<T>, D::Error> {
    let value = Value::deserialize(d)?;
    Ok(serde_json::from_value(value).ok())
}

/// `allowed_mentions` of every message the bot sends or edits: `{"parse": []}`, so an
/// answer quoting `@everyone`, a role or a user pings nobody.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllowedMentions {
    /// The mention types parsed from the content: none.
    pub parse: Vec<String>,
}

/// `POST /channels/{id}/messages` and `PATCH /channels/{id}/messages/{id}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MessageBody {
    /// The text, at most 2000 characters.
    pub content: String,
    /// Always none.
    pub allowed_mentions: AllowedMentions,
    /// A create's name for the message (at most 25 characters), from the reply's send key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nonce: Option<String>,
    /// With a `nonce`: Discord returns the message the bot created under it in the past
    /// few minutes instead of creating another.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enforce_nonce: Option<bool>,
}

/// `payload_json` of a message carrying a file (`files[0]`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UploadPayload {
    /// The caption (may be empty).
    pub content: String,
    /// Always none.
    pub allowed_mentions: AllowedMentions,
    /// The one file, by its part's index.
    pub attachments: Vec<UploadAttachment>,
}

/// One file of [`UploadPayload`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UploadAttachment {
    /// The index of its `files[n]` part.
    pub id: u32,
    /// Its name.
    pub filename: String,
}

/// `POST /channels/{id}/messages/{id}/threads`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StartThread {
    /// At most 100 characters.
    pub name: String,
    /// Minutes of inactivity before Discord archives it.
    pub auto_archive_duration: u32,
}

/// `GET /gateway/bot`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GatewayBot {
    /// The gateway's `ws(s)://` URL.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub url: Option<String>,
    /// The shards Discord recommends (not read: one shard).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shards: Option<Value>,
    /// How many sessions may start (not read: serenity's queuer paces identifies).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_start_limit: Option<Value>,
}

/// `GET /users/@me`: the bot.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CurrentUser {
    /// The bot's user id (a snowflake).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<Value>,
    /// Its name (not read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username: Option<Value>,
    /// True for a bot (not read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bot: Option<Value>,
}

/// `GET /channels/{id}`, and the thread `POST …/threads` creates.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ChannelAnswer {
    /// The channel's id (a snowflake).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<Value>,
    /// Its type: 10, 11 and 12 are threads.
    #[serde(
        rename = "type",
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub kind: Option<u64>,
    /// A thread's parent channel (a snowflake).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_id: Option<Value>,
    /// Who started the thread (a snowflake).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner_id: Option<Value>,
    /// The guild (not read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guild_id: Option<Value>,
    /// Its name (not read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<Value>,
}

impl ChannelAnswer {
    /// Whether the channel is a thread (types 10, 11, 12).
    pub fn is_thread(&self) -> bool {
        matches!(self.kind, Some(10..=12))
    }
}

/// A created message (`POST /channels/{id}/messages`): where it is and its id.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MessageAnswer {
    /// The message id (a snowflake).
    pub id: Value,
    /// The channel (or thread) it is in (a snowflake).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel_id: Option<Value>,
}

/// A refusal: `{code, message}`, and on a 429 `{message, retry_after, global}`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// Discord's JSON error code.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub code: Option<i64>,
    /// Discord's text (never kept in an error or logged).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<Value>,
    /// A 429's wait, in seconds.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub retry_after: Option<f64>,
    /// Whether a 429 is the global limit.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub global: Option<bool>,
    /// Which fields a 400 refused (not read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errors: Option<Value>,
}

#[cfg(test)]
mod tests;
