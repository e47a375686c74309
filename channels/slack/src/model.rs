//! Every Slack wire type the adapter reads or writes, each round-tripped against a recorded
//! payload in `tests/fixtures/` (`model/tests.rs`).
//!
//! - **Socket Mode** (`apps.connections.open`'s WebSocket): [`Hello`], [`Disconnect`], the
//!   [`Envelope`] carrying an Events API body, a slash command or an interaction, and the
//!   [`Ack`] each envelope needs within 3 seconds. [`SocketFrame::read`] sorts a frame:
//!   anything with an `envelope_id` is an envelope (so even a type this adapter does not
//!   know is acknowledged), anything else it does not know is [`SocketFrame::Other`].
//! - **Events API** bodies, the same over Socket Mode and HTTP: [`UrlVerification`] and
//!   [`EventCallback`], read by [`EventBody::read`]; the inner [`Event`] is a `message`
//!   or an `app_mention` ([`MessageEvent`], with its [`File`]s), or [`Event::Other`].
//! - **Slash commands** ([`SlashCommand`]): a JSON payload over Socket Mode, a form body
//!   over HTTP ([`SlashCommand::from_form`]).
//! - **Web API**: requests ([`PostMessage`], [`UpdateMessage`], [`AddReaction`],
//!   [`CompleteUpload`]) and answers, each with the [`Status`] every answer carries
//!   (`ok`, `error`, `warning`, `response_metadata`): [`Posted`], [`AuthTest`],
//!   [`ConnectionsOpen`], [`UploadUrl`].
//!
//! Unknown fields are ignored everywhere (Slack adds fields without notice) and unknown
//! event, frame and body types are kept as "other", never an error, so a new kind of event
//! cannot break the reading of the envelope it came in. Only the fields the adapter reads
//! are modelled; the fixtures hold exactly those.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// `hello`: the connection is ready.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    /// `hello`.
    #[serde(rename = "type")]
    pub kind: String,
    /// How many connections the app holds open.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_connections: Option<u32>,
    /// Where and for how long (roughly) this connection is served.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub debug_info: Option<DebugInfo>,
    /// The app this connection belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection_info: Option<ConnectionInfo>,
}

/// `debug_info` of `hello` and `disconnect`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DebugInfo {
    /// The Slack host serving the connection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// Slack's build.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build_number: Option<u64>,
    /// Seconds the connection is expected to last before a `disconnect`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approximate_connection_time: Option<u64>,
}

/// `connection_info` of `hello`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnectionInfo {
    /// The app's id (`A…`).
    pub app_id: String,
}

/// `disconnect`: Slack is about to close the connection (`warning` ten seconds ahead,
/// `refresh_requested`, `link_disabled` when Socket Mode was turned off).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Disconnect {
    /// `disconnect`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Why.
    pub reason: String,
    /// Which host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub debug_info: Option<DebugInfo>,
}

/// An envelope: one event, slash command or interaction, acknowledged by its id.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Envelope {
    /// The id the [`Ack`] names.
    pub envelope_id: String,
    /// `events_api`, `slash_commands` or `interactive` (others are acknowledged and
    /// ignored).
    #[serde(rename = "type")]
    pub kind: String,
    /// The body: an [`EventCallback`], a [`SlashCommand`], an interaction.
    #[serde(default)]
    pub payload: Value,
    /// Whether the ack may carry a response payload (slash commands, interactions).
    #[serde(default)]
    pub accepts_response_payload: bool,
    /// How many times Slack sent this before (0 the first time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_attempt: Option<u32>,
    /// Why it is sent again (`timeout`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_reason: Option<String>,
}

/// Envelope types.
pub mod envelope_kind {
    /// An Events API body.
    pub const EVENTS_API: &str = "events_api";
    /// A slash command.
    pub const SLASH_COMMANDS: &str = "slash_commands";
    /// A button, shortcut or modal interaction.
    pub const INTERACTIVE: &str = "interactive";
}

/// The acknowledgement of an envelope, sent back on the socket.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Ack {
    /// The envelope's id.
    pub envelope_id: String,
    /// A response (only where `accepts_response_payload`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<Value>,
}

/// What a Socket Mode frame is.
#[derive(Clone, Debug, PartialEq)]
pub enum SocketFrame {
    /// The connection is ready.
    Hello(Hello),
    /// The connection is about to close.
    Disconnect(Disconnect),
    /// An envelope to acknowledge (and maybe handle).
    Envelope(Envelope),
    /// A frame of another type, by its type.
    Other(String),
}

impl SocketFrame {
    /// Sorts a frame's JSON. Only JSON that is not an object, or a known frame whose
    /// fields do not fit, is an error.
    pub fn read(json: &[u8]) -> Result<Self, serde_json::Error> {
        let value: Map<String, Value> = serde_json::from_slice(json)?;
        if value.contains_key("envelope_id") {
            return serde_json::from_value(Value::Object(value)).map(Self::Envelope);
        }
        let kind = value
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        match kind.as_str() {
            "hello" => serde_json::from_value(Value::Object(value)).map(Self::Hello),
            "disconnect" => serde_json::from_value(Value::Object(value)).map(Self::Disconnect),
            _ => Ok(Self::Other(kind)),
        }
    }
}

/// `url_verification`: the Events API checking the Request URL; answered with its
/// `challenge`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UrlVerification {
    /// `url_verification`.
    #[serde(rename = "type")]
    pub kind: String,
    /// What to answer.
    pub challenge: String,
}

/// `event_callback`: an event the app subscribed to.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EventCallback {
    /// `event_callback`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The workspace (`T…`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub team_id: Option<String>,
    /// The app (`A…`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_app_id: Option<String>,
    /// The event.
    pub event: Event,
    /// The event's id (`Ev…`), unique per workspace, repeated on a retry.
    pub event_id: String,
    /// When it happened (unix seconds).
    #[serde(default)]
    pub event_time: i64,
    /// Who the event is visible to: the app's installations (the bot user first).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub authorizations: Vec<Authorization>,
}

/// One installation an event is delivered for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Authorization {
    /// The workspace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub team_id: Option<String>,
    /// The installation's user: the bot user for a bot token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_id: Option<String>,
    /// Whether `user_id` is a bot.
    #[serde(default)]
    pub is_bot: bool,
}

/// What an Events API body is.
#[derive(Clone, Debug, PartialEq)]
pub enum EventBody {
    /// The Request URL check.
    UrlVerification(UrlVerification),
    /// An event.
    EventCallback(Box<EventCallback>),
    /// Another body (`app_rate_limited`, …), by its type.
    Other(String),
}

impl EventBody {
    /// Sorts a body's JSON (or a `value` already read, as an envelope's payload is).
    pub fn read(json: &[u8]) -> Result<Self, serde_json::Error> {
        Self::from_value(serde_json::from_slice(json)?)
    }

    /// Sorts a JSON value.
    pub fn from_value(value: Value) -> Result<Self, serde_json::Error> {
        let kind = value
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        match kind.as_str() {
            "url_verification" => serde_json::from_value(value).map(Self::UrlVerification),
            "event_callback" => {
                serde_json::from_value(value).map(|e| Self::EventCallback(Box::new(e)))
            }
            _ if value.is_object() => Ok(Self::Other(kind)),
            _ => Err(serde::de::Error::custom("expected a JSON object")),
        }
    }
}

/// The inner event of an [`EventCallback`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    /// `message` (any subtype).
    Message(MessageEvent),
    /// `app_mention`: a message mentioning the bot, in a channel.
    AppMention(MessageEvent),
    /// Any other type (read only; written back as `other`).
    #[serde(other)]
    Other,
}

/// A `message` or `app_mention` event.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MessageEvent {
    /// `message_changed`, `message_deleted`, `bot_message`, `file_share`, …; none
    /// for a plain user message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subtype: Option<String>,
    /// The conversation (`C…`, `G…`, `D…`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<String>,
    /// `im`, `mpim`, `channel` or `group` (`message` events only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel_type: Option<String>,
    /// The sender (`U…`/`W…`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// Set when an app or bot sent it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bot_id: Option<String>,
    /// The text, with `&`, `<`, `>` escaped and mentions as `<@U…>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// The message's id within the channel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ts: Option<String>,
    /// The thread's root when the message is in a thread.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_ts: Option<String>,
    /// When the event happened.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_ts: Option<String>,
    /// The sender's workspace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub team: Option<String>,
    /// Files shared with the message.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<File>,
}

/// A file shared in a message.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct File {
    /// The file's id (`F…`).
    pub id: String,
    /// Its file name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Its title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Its MIME type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mimetype: Option<String>,
    /// Slack's file type (`png`, `pdf`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filetype: Option<String>,
    /// Its size in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// Where it is read with the bot token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url_private: Option<String>,
    /// Where it is downloaded with the bot token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url_private_download: Option<String>,
    /// `hosted`, `external`, `tombstone` (deleted), `hidden_by_limit`, `file_access`, …
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// `visible`, or `check_file_info`: a file shared over Slack Connect comes as its id
    /// alone, its name and URLs only from `files.info`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_access: Option<String>,
    /// When it was uploaded (Unix seconds; 0 in a Slack Connect stub).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created: Option<i64>,
    /// The same, Slack's older name for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<i64>,
    /// Who uploaded it (empty in a Slack Connect stub).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
}

impl File {
    /// Whether it came as a Slack Connect stub: its id alone, the rest from `files.info`.
    pub fn needs_file_info(&self) -> bool {
        self.file_access.as_deref() == Some(CHECK_FILE_INFO)
    }
}

/// The `file_access` of a file shared over Slack Connect, whose properties only
/// `files.info` tells.
pub const CHECK_FILE_INFO: &str = "check_file_info";

/// `files.info` answer: the file, its URLs included.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FilesInfo {
    /// `ok` and the rest.
    #[serde(flatten)]
    pub status: Status,
    /// The file.
    pub file: File,
}

/// A slash command, as Slack posts it (every value a string).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlashCommand {
    /// The command with its slash (`/goal`).
    pub command: String,
    /// What follows the command.
    #[serde(default)]
    pub text: String,
    /// Who ran it.
    pub user_id: String,
    /// Their user name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_name: Option<String>,
    /// Where it was run.
    pub channel_id: String,
    /// The conversation's name (`directmessage` in a DM).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel_name: Option<String>,
    /// The workspace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub team_id: Option<String>,
    /// The app.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_app_id: Option<String>,
    /// Where a response may be posted for 30 minutes (a signed URL: never logged).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_url: Option<String>,
    /// The invocation's id, unique per command run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trigger_id: Option<String>,
    /// The thread it was run in, if Slack says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_ts: Option<String>,
}

impl SlashCommand {
    /// Reads the form body Slack posts a command with over HTTP.
    pub fn from_form(body: &[u8]) -> Result<Self, serde_json::Error> {
        let fields: Map<String, Value> = url::form_urlencoded::parse(body)
            .map(|(k, v)| (k.into_owned(), Value::String(v.into_owned())))
            .collect();
        serde_json::from_value(Value::Object(fields))
    }
}

/// What every Web API answer carries.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Status {
    /// Whether the call succeeded.
    pub ok: bool,
    /// The refusal's code (`ratelimited`, `invalid_auth`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// A warning's code (`missing_charset`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
    /// More about the answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_metadata: Option<ResponseMetadata>,
}

/// `response_metadata` of an answer.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResponseMetadata {
    /// Problems with the request (never put in an error: they may quote it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub messages: Vec<String>,
    /// Warning codes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// The next page's cursor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// `chat.postMessage` / `chat.update` answer: where the message is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Posted {
    /// `ok` and the rest.
    #[serde(flatten)]
    pub status: Status,
    /// The conversation.
    pub channel: String,
    /// The message's id.
    pub ts: String,
}

/// `auth.test` answer: who the token is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuthTest {
    /// `ok` and the rest.
    #[serde(flatten)]
    pub status: Status,
    /// The workspace's URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The workspace's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub team: Option<String>,
    /// The bot user's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// The workspace.
    pub team_id: String,
    /// The bot user (`U…`): its mentions are stripped.
    pub user_id: String,
    /// The bot (`B…`): messages it sent carry it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bot_id: Option<String>,
}

/// `apps.connections.open` answer: the WebSocket URL (single use).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnectionsOpen {
    /// `ok` and the rest.
    #[serde(flatten)]
    pub status: Status,
    /// The `wss://` URL (it carries a ticket: never logged).
    pub url: String,
}

/// `files.getUploadURLExternal` answer: where the bytes go.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UploadUrl {
    /// `ok` and the rest.
    #[serde(flatten)]
    pub status: Status,
    /// Where to POST the bytes (signed: never logged).
    pub upload_url: String,
    /// The file's id, for `files.completeUploadExternal`.
    pub file_id: String,
}

/// `chat.postMessage` request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PostMessage {
    /// The conversation.
    pub channel: String,
    /// The text, in `mrkdwn`.
    pub text: String,
    /// The thread to post in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_ts: Option<String>,
    /// Whether links get previews: off, an answer's links are references.
    pub unfurl_links: bool,
}

/// A post to a slash command's `response_url` (`in_channel`: the conversation sees it;
/// `ephemeral`: only the user who typed it).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommandResponse {
    /// The text, in `mrkdwn`.
    pub text: String,
    /// `in_channel` or `ephemeral`.
    pub response_type: String,
}

/// `chat.update` request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UpdateMessage {
    /// The conversation.
    pub channel: String,
    /// The message's id.
    pub ts: String,
    /// The new text, in `mrkdwn`.
    pub text: String,
}

/// `reactions.add` request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AddReaction {
    /// The conversation.
    pub channel: String,
    /// The message's id.
    pub timestamp: String,
    /// The emoji's name without colons (`eyes`, `white_check_mark`).
    pub name: String,
}

/// `files.completeUploadExternal` request: shares uploaded files in a conversation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompleteUpload {
    /// The files uploaded.
    pub files: Vec<UploadedFile>,
    /// The conversation.
    pub channel_id: String,
    /// The thread to share them in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_ts: Option<String>,
}

/// One file of [`CompleteUpload`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UploadedFile {
    /// The id `files.getUploadURLExternal` gave.
    pub id: String,
    /// Its title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
}

#[cfg(test)]
mod tests;
