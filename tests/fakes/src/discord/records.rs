//! What the fake Discord records and reports: HTTP calls, messages and edits the bot
//! made, threads, typing, reactions, gateway connections and the frames they exchanged,
//! scripted failures.

use serde_json::Value;

/// A scripted failure of the next call of a route.
#[derive(Clone, Debug, PartialEq)]
pub enum Failure {
    /// HTTP 429 with `{message, retry_after, global}` and the `X-RateLimit-*` and
    /// `Retry-After` headers Discord sends; `retry_after` in seconds. Calls of the route
    /// arriving before the wait is over are answered 429 again (and counted in
    /// [`super::FakeDiscord::early_calls`]).
    RateLimited {
        /// Seconds to wait.
        retry_after: f64,
        /// Whether it is the global limit (`X-RateLimit-Global: true`).
        global: bool,
    },
    /// The call is carried out, then answered with this HTTP status (a gateway's 502 or
    /// 504 after Discord applied it): the caller cannot tell it landed.
    AfterApplying {
        /// HTTP status.
        status: u16,
    },
    /// No answer at all: the request is held open until the fake stops (a call lost on
    /// the way), so only the caller's timeout ends it. Recorded with status 0.
    Hang,
    /// This HTTP status with Discord's JSON error `{code, message}`.
    Error {
        /// HTTP status.
        status: u16,
        /// Discord's JSON error code (e.g. [`super::code::UNKNOWN_MESSAGE`]).
        code: i64,
    },
}

/// One HTTP request the fake received (gateway frames are recorded separately). Its
/// `route` is `gateway`, `gateway_bot`, `me`, `channel`, `channel_messages`, `create_message`,
/// `edit_message`, `start_thread`, `typing`, `reaction`, `attachment`, `ws` or `unknown`
/// (what [`super::FakeDiscord::fail_next`] takes); its `body` is the JSON, or
/// `payload_json` of a multipart body; `code` is the JSON error's. A success is a 2xx or
/// an accepted upgrade.
pub type Call = crate::skeleton::Call<i64>;

/// A file uploaded with a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Upload {
    /// The multipart field name (`files[0]`, …).
    pub field: String,
    /// The file name.
    pub filename: String,
    /// The bytes.
    pub bytes: Vec<u8>,
}

/// A message the bot created.
#[derive(Clone, Debug, PartialEq)]
pub struct Sent {
    /// Its id.
    pub id: String,
    /// The channel (or thread) it went to.
    pub channel_id: String,
    /// Its current content (after edits).
    pub content: String,
    /// The `allowed_mentions` of the create call, as sent (`null` when absent).
    pub allowed_mentions: Value,
    /// Files uploaded with it.
    pub uploads: Vec<Upload>,
    /// How many times it was edited.
    pub edits: usize,
    /// The `nonce` it was created with under `enforce_nonce`, and when: a create under the
    /// same nonce in that channel within [`super::NONCE_WINDOW`] returns this message.
    pub nonce: Option<(String, std::time::Instant)>,
}

/// An accepted edit.
#[derive(Clone, Debug, PartialEq)]
pub struct Edit {
    /// The message edited.
    pub message_id: String,
    /// The new content.
    pub content: String,
    /// The `allowed_mentions` of the edit, as sent (`null` when absent).
    pub allowed_mentions: Value,
}

/// A thread started from a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Thread {
    /// The thread's id (a channel id).
    pub id: String,
    /// The channel it lives in.
    pub parent_id: String,
    /// The message it was started from.
    pub message_id: String,
    /// Its name.
    pub name: String,
    /// Who started it (`owner_id`): the bot, or a user.
    pub owner_id: String,
}

/// A reaction the bot added.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reaction {
    /// The channel of the message.
    pub channel_id: String,
    /// The message.
    pub message_id: String,
    /// The emoji, percent-decoded (`✅`).
    pub emoji: String,
}

/// One gateway WebSocket connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Connection {
    /// 1, 2, … in order of arrival.
    pub id: u64,
    /// The request path and query (`/gateway?v=10…` or `/resume?…`).
    pub path: String,
    /// Whether it is still open.
    pub open: bool,
    /// Its session, after READY or RESUMED.
    pub session: Option<String>,
    /// The `heartbeat_interval` its HELLO gave, in milliseconds.
    pub heartbeat_interval_ms: u64,
    /// Whether the fake closed it with 4009 for a heartbeat that did not come in time.
    pub timed_out: bool,
}

crate::skeleton::socket::linked!(Connection, session);

/// An IDENTIFY received.
#[derive(Clone, Debug, PartialEq)]
pub struct Identify {
    /// The connection it came on.
    pub connection: u64,
    /// The path that connection was opened at.
    pub path: String,
    /// `d.token`, as sent.
    pub token: String,
    /// `d.intents`.
    pub intents: u64,
    /// Whether it was accepted (READY sent).
    pub accepted: bool,
}

/// A RESUME received.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resume {
    /// The connection it came on.
    pub connection: u64,
    /// The path that connection was opened at.
    pub path: String,
    /// `d.session_id`.
    pub session_id: String,
    /// `d.seq`.
    pub seq: u64,
    /// Whether it was accepted (replay and RESUMED sent).
    pub accepted: bool,
}

/// A heartbeat (op 1) received.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Heartbeat {
    /// The connection it came on.
    pub connection: u64,
    /// `d`: the client's last sequence, if any.
    pub seq: Option<u64>,
}

/// A dispatch sent to a client.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dispatched {
    /// The connection it went to.
    pub connection: u64,
    /// Its `s`.
    pub seq: u64,
    /// Its `t`.
    pub kind: String,
    /// Whether it was sent again by a RESUME.
    pub replay: bool,
}

/// An event the fake pushed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pushed {
    /// The message id.
    pub message_id: String,
    /// Its `s`, or `None` while no session was current (it goes out after the next READY).
    pub seq: Option<u64>,
}
