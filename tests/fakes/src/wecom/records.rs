//! What the fake WeCom records and what a test scripts: connections, client frames, pushes,
//! streams, replies, proactive sends, uploads, scripted failures.

use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;

pub use crate::skeleton::Trigger;

/// A scripted failure of a client command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Failure {
    /// Answer `{headers: {req_id}, errcode, errmsg}` and do nothing else (e.g. 45009, or a
    /// 5xx-like `-1 system error`).
    Code(i64, String),
    /// Drop the connection instead of answering (no close frame).
    Drop,
    /// Do what the command asks, but answer only after this long.
    Delay(Duration),
    /// Do what the command asks and never answer.
    Silence,
    /// Neither do what the command asks nor answer: the frame lost on its way (recorded
    /// as sent, never read).
    Lost,
}

/// Why the fake closed a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Closed {
    /// No `ping` within the heartbeat timeout.
    Heartbeat,
    /// A newer connection of the bot subscribed (after `disconnected_event`).
    Replaced,
    /// No first frame within the subscribe window.
    SubscribeTimeout,
    /// A command before a successful subscribe.
    NotSubscribed,
    /// The test closed it ([`FakeWecom::close_connection`](super::FakeWecom::close_connection),
    /// `close_connections`) or a scripted [`Failure::Drop`].
    Server,
}

/// How the stream window is measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamExpiry {
    /// From the callback the stream answers (the user's message): WeCom's rule, and
    /// never more lenient than counting from the stream's first frame, which comes after.
    SinceCallback,
    /// From its last accepted frame (what was observed of the service).
    SinceLast,
}

/// A WebSocket connection to the fake.
#[derive(Clone, Debug)]
pub struct Connection {
    /// 1, 2, … in order of arrival.
    pub id: u64,
    /// Whether it is still open.
    pub open: bool,
    /// Whether an `aibot_subscribe` on it succeeded.
    pub subscribed: bool,
    /// Whether it was replaced by a newer connection (it got `disconnected_event`).
    pub replaced: bool,
    /// Whether WeCom dropped its subscription while the socket stayed open
    /// ([`FakeWecom::drop_subscription`](super::FakeWecom::drop_subscription)): every
    /// command on it, pings included, is answered `846609` and nothing else happens, until
    /// it closes (its heartbeat lapses, since such a ping does not count).
    pub unsubscribed: bool,
    /// `ping`s received on it.
    pub pings: usize,
    /// Why the fake closed it (`None`: open, or the client closed it).
    pub closed_by: Option<Closed>,
    /// When it opened.
    pub opened_at: Instant,
    /// When it closed.
    pub closed_at: Option<Instant>,
    /// Real time of its last frame that counts (its opening, a `ping`), for the watchdog.
    pub(super) last_ping: Instant,
    /// Whether a first frame arrived.
    pub(super) spoke: bool,
}

crate::skeleton::socket::linked!(Connection, closed_at);

/// A client frame, as received, with the fake's answer.
#[derive(Clone, Debug)]
pub struct Frame {
    /// The connection it came on.
    pub connection: u64,
    /// Its `cmd` (empty when it had none).
    pub cmd: String,
    /// Its `headers.req_id` (empty when it had none).
    pub req_id: String,
    /// Its `body` (`null` without one).
    pub body: Value,
    /// The `errcode` answered (`None`: not answered, or not yet).
    pub errcode: Option<i64>,
    /// When it arrived.
    pub at: Instant,
}

impl Frame {
    /// Whether it was answered `errcode: 0`.
    pub fn ok(&self) -> bool {
        self.errcode == Some(0)
    }

    pub(super) fn line(&self) -> String {
        let code = self.errcode.map(|c| format!(" → {c}")).unwrap_or_default();
        let body: String = self.body.to_string().chars().take(160).collect();
        format!(
            "#{} {} {}{code} {body}",
            self.connection, self.cmd, self.req_id
        )
    }
}

/// A callback the fake pushed.
#[derive(Clone, Debug)]
pub struct Pushed {
    /// Its `headers.req_id`: what replies to it carry.
    pub req_id: String,
    /// Its `body.msgid`.
    pub msgid: String,
    /// `aibot_msg_callback` or `aibot_event_callback`.
    pub cmd: String,
    /// The connection it went to (`None`: held until one subscribes).
    pub connection: Option<u64>,
    /// Whether it is a redelivery of a message pushed before.
    pub redelivery: bool,
}

/// One accepted frame of a stream.
#[derive(Clone, Debug)]
pub struct Update {
    /// Its `stream.content` (the whole message as shown, not a delta).
    pub content: String,
    /// Its `stream.finish`.
    pub finish: bool,
    /// When it was accepted.
    pub at: Instant,
}

/// A stream message answering a callback (`msgtype: stream` or
/// `stream_with_template_card`), keyed by `(req_id, stream.id)`.
#[derive(Clone, Debug)]
pub struct Stream {
    /// The callback it answers.
    pub req_id: String,
    /// That callback's `msgid`.
    pub msgid: String,
    /// `stream.id`.
    pub stream_id: String,
    /// The conversation (group `chatid` or user `userid`).
    pub conversation: String,
    /// The connection its first frame came on.
    pub connection: u64,
    /// Every accepted frame, in order.
    pub updates: Vec<Update>,
    /// Whether a `finish: true` frame was accepted.
    pub finished: bool,
    /// The `feedback.id` of its first frame.
    pub feedback_id: Option<String>,
    /// Frames refused, as `(errcode, content)`.
    pub refused: Vec<(i64, String)>,
    /// Whether some update's content did not extend the one before.
    pub shrank: bool,
}

impl Stream {
    /// What the user sees now: the last accepted content.
    pub fn content(&self) -> String {
        self.updates
            .last()
            .map(|u| u.content.clone())
            .unwrap_or_default()
    }
}

/// An accepted reply that is no stream frame.
#[derive(Clone, Debug)]
pub struct Reply {
    /// `aibot_respond_msg`, `aibot_respond_welcome_msg` or `aibot_respond_update_msg`.
    pub cmd: String,
    /// The callback it answers.
    pub req_id: String,
    /// Its `msgtype` (`response_type` for a card update).
    pub msgtype: String,
    /// Its body.
    pub body: Value,
    /// The conversation.
    pub conversation: String,
    /// When it was accepted.
    pub at: Instant,
}

impl Reply {
    /// Its text: `text.content` or `markdown.content`.
    pub fn text(&self) -> Option<&str> {
        text_of(&self.body)
    }
}

/// An accepted `aibot_send_msg`.
#[derive(Clone, Debug)]
pub struct Sent {
    /// `body.chatid`.
    pub chatid: String,
    /// `body.chat_type`, when given.
    pub chat_type: Option<i64>,
    /// `body.msgtype`.
    pub msgtype: String,
    /// The whole body.
    pub body: Value,
    /// When it was accepted.
    pub at: Instant,
}

impl Sent {
    /// Its text: `markdown.content`.
    pub fn text(&self) -> Option<&str> {
        text_of(&self.body)
    }
}

fn text_of(body: &Value) -> Option<&str> {
    ["markdown", "text"]
        .iter()
        .find_map(|k| body.get(*k)?.get("content")?.as_str())
}

/// Where an uploaded `media_id` was sent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MediaUse {
    /// In a reply to the callback `req_id`.
    Reply {
        /// The callback answered.
        req_id: String,
    },
    /// In an `aibot_send_msg` to `chatid`.
    Send {
        /// The conversation.
        chatid: String,
    },
}

/// A media upload over the long connection.
#[derive(Clone, Debug)]
pub struct Upload {
    /// `upload_id` answered to the init.
    pub upload_id: String,
    /// `type`: `file`, `image`, `voice` or `video`.
    pub kind: String,
    /// `filename`.
    pub filename: String,
    /// `total_size` announced.
    pub total_size: u64,
    /// `total_chunks` announced.
    pub total_chunks: u64,
    /// `md5` announced.
    pub md5: Option<String>,
    /// The bytes, once finished (chunks in `chunk_index` order).
    pub bytes: Vec<u8>,
    /// Chunks received (duplicates ignored).
    pub chunks_received: usize,
    /// `media_id` answered to the finish.
    pub media_id: Option<String>,
    /// Where the `media_id` was sent since.
    pub used_in: Vec<MediaUse>,
    /// When it finished, on the fake's clock (its `media_id` lives three days).
    pub(super) finished_at: Option<Instant>,
}
