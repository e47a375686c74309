//! What the fake Slack records and how a test scripts it: HTTP calls, messages with their
//! edits and streams, reactions, uploads, Socket Mode connections, deliveries and acks,
//! and failures.

use serde_json::Value;
use tokio::time::Instant;

pub use crate::skeleton::Trigger;

/// A scripted failure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Failure {
    /// HTTP 429, `Retry-After: secs` and `{"ok": false, "error": "ratelimited"}`, as Slack
    /// throttles a method. Calls of the method before the wait is over are refused the
    /// same way and counted ([`FakeSlack::early_calls`](super::FakeSlack::early_calls)).
    RateLimited {
        /// Seconds to wait.
        retry_after: u64,
    },
    /// HTTP 200 with `{"ok": false, "error": error}` (e.g. `"channel_not_found"`,
    /// `"internal_error"`, `"fatal_error"`).
    Error(String),
    /// This HTTP status with no JSON (a 5xx of Slack's edge).
    Http(u16),
}

/// One HTTP request the fake received (Socket Mode frames are in
/// [`FakeSlack::acks`](super::FakeSlack::acks) and
/// [`FakeSlack::deliveries`](super::FakeSlack::deliveries)). Its `route` is the Web API
/// method (`chat.postMessage`, …), `upload` (the upload URL), `file` (the file host),
/// `link` (the Socket Mode upgrade) or `unknown`; its `body` holds the parameters (JSON,
/// or form fields as strings); `code` is the answer's `error`. Slack calls it a success
/// when it is a 2xx (or 101) without an `error`.
pub type Call = crate::skeleton::Call<String>;

/// One accepted `chat.update`.
#[derive(Clone, Debug, PartialEq)]
pub struct Edit {
    /// The new `text`.
    pub text: String,
    /// The new `blocks` (`null` when none).
    pub blocks: Value,
    /// When it was accepted.
    pub at: Instant,
}

/// A message posted through the streaming methods.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stream {
    /// Whether `chat.stopStream` has not ended it yet.
    pub open: bool,
    /// The `markdown_text` of each accepted call, in order (start, appends, stop).
    pub chunks: Vec<String>,
    /// `recipient_user_id` of `chat.startStream`.
    pub recipient_user_id: Option<String>,
    /// `recipient_team_id` of `chat.startStream`.
    pub recipient_team_id: Option<String>,
    /// When `chat.stopStream` ended it.
    pub stopped_at: Option<Instant>,
}

/// A message in a channel: a user's (pushed in an event, or added by the test) or the
/// bot's (posted, uploaded with a file, or streamed), as it is now.
#[derive(Clone, Debug, PartialEq)]
pub struct Message {
    /// The channel.
    pub channel: String,
    /// Its `ts`.
    pub ts: String,
    /// The root of its thread, for a reply.
    pub thread_ts: Option<String>,
    /// The author's user id ([`BOT_USER_ID`](super::BOT_USER_ID) for the bot).
    pub user: String,
    /// Whether the bot wrote it.
    pub bot: bool,
    /// Its current text (after edits; a stream's chunks joined).
    pub text: String,
    /// Its current `blocks` (`null` when none).
    pub blocks: Value,
    /// The `mrkdwn` flag it was posted with, when given.
    pub mrkdwn: Option<bool>,
    /// The file ids shared with it (`files.completeUploadExternal`).
    pub files: Vec<String>,
    /// Every accepted edit, in order.
    pub edits: Vec<Edit>,
    /// For a streamed message, its stream.
    pub stream: Option<Stream>,
    /// When the fake learnt of it.
    pub at: Instant,
}

impl Message {
    pub(super) fn new(channel: &str, ts: &str, user: &str, bot: bool) -> Self {
        Self {
            channel: channel.to_owned(),
            ts: ts.to_owned(),
            thread_ts: None,
            user: user.to_owned(),
            bot,
            text: String::new(),
            blocks: Value::Null,
            mrkdwn: None,
            files: Vec::new(),
            edits: Vec::new(),
            stream: None,
            at: Instant::now(),
        }
    }

    /// Whether it starts a thread or stands alone (not a reply).
    pub fn is_root(&self) -> bool {
        self.thread_ts.as_ref().is_none_or(|t| *t == self.ts)
    }

    /// Whether it is the root `thread_ts` or a reply in that thread.
    pub fn in_thread(&self, thread_ts: &str) -> bool {
        self.ts == thread_ts || self.thread_ts.as_deref() == Some(thread_ts)
    }

    /// Whether it is no stream still open.
    pub fn settled(&self) -> bool {
        self.stream.as_ref().is_none_or(|s| !s.open)
    }
}

/// A reaction the bot added.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reaction {
    /// The channel of the message.
    pub channel: String,
    /// The message's `ts`.
    pub timestamp: String,
    /// The emoji name, without colons (`white_check_mark`).
    pub name: String,
    /// When it was added.
    pub at: Instant,
}

/// A file the bot uploaded and completed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Upload {
    /// The `file_id` `files.getUploadURLExternal` answered.
    pub file_id: String,
    /// The `filename` it was announced with.
    pub filename: String,
    /// The `title` of `files.completeUploadExternal`, when given.
    pub title: Option<String>,
    /// The bytes posted to the upload URL.
    pub bytes: Vec<u8>,
    /// `channel_id` (or the first of `channels`); `None` keeps the file private.
    pub channel: Option<String>,
    /// `thread_ts`.
    pub thread_ts: Option<String>,
    /// `initial_comment`.
    pub initial_comment: Option<String>,
    /// The `ts` of the message sharing it, when it went to a channel.
    pub ts: Option<String>,
}

/// A Socket Mode connection as the fake sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Connection {
    /// 1, 2, … in order of arrival.
    pub id: u64,
    /// The ticket it was opened with.
    pub ticket: String,
    /// Whether it is still open.
    pub open: bool,
    /// When it was accepted.
    pub opened_at: Instant,
    /// When it ended (either side).
    pub closed_at: Option<Instant>,
}

crate::skeleton::socket::linked!(Connection, closed_at);

/// What [`FakeSlack::push_event`](super::FakeSlack::push_event) or
/// [`FakeSlack::push_command`](super::FakeSlack::push_command) pushed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pushed {
    /// The first envelope's `envelope_id` (redeliveries come in new envelopes).
    pub envelope_id: String,
    /// The event's `event_id` (events only).
    pub event_id: Option<String>,
    /// The event's `ts` (message events).
    pub ts: Option<String>,
}

/// One envelope sent over a connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delivery {
    /// Its `envelope_id`.
    pub envelope_id: String,
    /// The `envelope_id` of the first delivery of the same payload.
    pub first: String,
    /// `events_api`, `slash_commands` or `interactive`.
    pub kind: String,
    /// Its `retry_attempt`: 0, then 1.. for redeliveries.
    pub attempt: u32,
    /// The connection it went to.
    pub connection: u64,
    /// When it was sent.
    pub at: Instant,
}

/// A post to a slash command's `response_url` the fake took.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Response {
    /// The command's conversation.
    pub channel: String,
    /// Who typed the command.
    pub user: String,
    /// The text posted.
    pub text: String,
    /// `in_channel` (the conversation sees it), else ephemeral.
    pub in_channel: bool,
    /// When.
    pub at: Instant,
}

/// An ack a client sent: `{"envelope_id": …, "payload": …}`.
#[derive(Clone, Debug, PartialEq)]
pub struct Ack {
    /// Its `envelope_id`.
    pub envelope_id: String,
    /// Its `payload`, when it had one.
    pub payload: Option<Value>,
    /// Whether the fake sent an envelope of that id.
    pub known: bool,
    /// Whether it went missing on the way and counted for nothing
    /// ([`FakeSlack::lose_acks`](super::FakeSlack::lose_acks)).
    pub lost: bool,
    /// The connection it came on.
    pub connection: u64,
    /// When it arrived.
    pub at: Instant,
}
