//! What the fake records and reports: calls, messages and their patches, uploads, pushes,
//! deliveries, acks and connections, scripted failures, and the timeout of a wait.

use serde_json::Value;
use tokio::time::Instant;

use super::rest;

/// When a scripted failure fires.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Trigger {
    /// On the Nth authenticated call of the route (1-based), once.
    Nth(usize),
    /// On every call of the route until [`FakeFeishu::clear_failures`](super::FakeFeishu::clear_failures).
    Always,
}

/// A scripted failure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Failure {
    /// HTTP 400 with `{code, msg}` (HTTP 200 on the discovery route, as Feishu does).
    Code(i64, String),
    /// This HTTP status; 429 carries [`code::FREQUENCY_LIMIT`](super::code::FREQUENCY_LIMIT) and
    /// `x-ogw-ratelimit-reset: 1`, as Feishu throttles an app.
    Http(u16),
}

/// One HTTP request the fake received (WebSocket frames are in
/// [`FakeFeishu::acks`](super::FakeFeishu::acks) and
/// [`FakeFeishu::deliveries`](super::FakeFeishu::deliveries)). Its `route` is `endpoint`,
/// `ws`, `token`, `reply`, `create`, `patch`, `reactions`, `resource`, `images`, `files`
/// (what [`FakeFeishu::fail`](super::FakeFeishu::fail) takes), or `unknown`; `code` is
/// the envelope's (`None` for binary answers and the upgrade). Feishu calls it a success
/// when it is a 200 (or 101) with code 0.
pub type Call = crate::skeleton::Call<i64>;

/// One accepted patch of a bot message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Patch {
    /// The new `content` (the card JSON as a string).
    pub content: String,
    /// When it was accepted.
    pub at: Instant,
}

/// A message the bot sent, as it looks now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BotMessage {
    /// Its id (`om_…`).
    pub message_id: String,
    /// Its chat.
    pub chat_id: String,
    /// The message it replies to.
    pub reply_to: Option<String>,
    /// `text`, `post`, `interactive`, `image`, `file`, …
    pub msg_type: String,
    /// Current `content` (a JSON string).
    pub content: String,
    /// Every accepted patch in order.
    pub patches: Vec<Patch>,
    /// When it was sent.
    pub at: Instant,
    /// The `uuid` it was sent under, if any: for an hour, a send under the same uuid
    /// sends nothing more.
    pub uuid: Option<String>,
}

impl BotMessage {
    /// The current content parsed (the card for `interactive`).
    pub fn content_json(&self) -> Value {
        serde_json::from_str(&self.content).unwrap_or(Value::Null)
    }

    /// For a card: the `content` of each `markdown` element (or `div` text), joined by
    /// newlines — what a user reads.
    pub fn card_text(&self) -> String {
        rest::card_text(&self.content_json())
    }
}

/// An uploaded image or file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Upload {
    /// `image` or `file`.
    pub kind: &'static str,
    /// The key returned (`img_…` / `file_…`).
    pub key: String,
    /// `image_type` or `file_type`.
    pub type_: String,
    /// `file_name` (files) or the part's file name (images).
    pub name: String,
    /// The bytes.
    pub bytes: Vec<u8>,
}

/// What [`FakeFeishu::push_event`](super::FakeFeishu::push_event) pushed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pushed {
    /// The event's `header.event_id`.
    pub event_id: String,
    /// The event's `event.message.message_id`, if it has one.
    pub message_id: Option<String>,
    /// The frame `message_id` header of the first delivery (acks carry it).
    pub frame_id: String,
}

/// One delivery of an event over a connection (a re-push is another delivery).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delivery {
    /// The event.
    pub event_id: String,
    /// The frame `message_id` header of this delivery.
    pub frame_id: String,
    /// The connection it went to.
    pub connection: u64,
    /// 0 for the first push, 1.. for re-pushes.
    pub attempt: u32,
    /// When it was sent.
    pub at: Instant,
}

/// An ack frame a client sent back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ack {
    /// Its `message_id` header (the frame id of the delivery it answers).
    pub frame_id: String,
    /// The event of that delivery, when the frame id is one the fake sent.
    pub event_id: Option<String>,
    /// The payload's `code` (200 ok, 500 handler error), `None` if unparsable.
    pub code: Option<i64>,
    /// Its `biz_rt` header, if present.
    pub biz_rt: Option<String>,
    /// The connection it came on.
    pub connection: u64,
    /// When it arrived.
    pub at: Instant,
}

/// A connection as the fake sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Connection {
    /// The fake's id for it, 1-based in connection order.
    pub id: u64,
    /// Its `device_id` query parameter.
    pub device_id: String,
    /// Its `service_id` query parameter.
    pub service_id: String,
    /// Whether it is still open.
    pub open: bool,
    /// Pings received on it.
    pub pings: usize,
}

crate::skeleton::socket::linked!(Connection);
