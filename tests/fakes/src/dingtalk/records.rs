//! What the fake records and how a test scripts it: HTTP calls, robot messages, uploads,
//! cards and their updates, stream connections, deliveries and acks, and failures.

use serde_json::Value;
use tokio::time::Instant;

/// A scripted failure ([`FakeDingTalk::fail`](super::FakeDingTalk::fail)).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Failure {
    /// This HTTP status with `{code, message}` (the legacy host: HTTP 200 with an
    /// `errcode` of the status). 429 carries [`code::QPS_LIMIT`](super::code::QPS_LIMIT)
    /// and `Retry-After: 1`, as the gateway throttles an app.
    Http(u16),
    /// This HTTP status with this `code` (e.g. 403 and
    /// [`code::QPS_LIMIT`](super::code::QPS_LIMIT)).
    Code(u16, String),
    /// HTTP 200 with `{success: false, code, message}`: what the card APIs answer when
    /// they did nothing, and what the Python SDK fails to notice.
    SuccessFalse,
    /// The call is carried out, then answered with this HTTP status (a gateway's 502 or
    /// 504 after DingTalk acted on it): the caller cannot tell it landed.
    AfterApplying(u16),
    /// `card_create` only: `success: true`, but the delivery result says `success:
    /// false` (the card exists, nobody sees it).
    NotDelivered,
}

/// One HTTP request the fake received (stream frames are in
/// [`FakeDingTalk::acks`](super::FakeDingTalk::acks) and
/// [`FakeDingTalk::deliveries`](super::FakeDingTalk::deliveries)). Its `route` is the
/// operation: `open`, `connect` (the upgrade), `token`, `group_send`, `private_send`,
/// `download_code`, `download`, `upload`, `card_create`, `card_stream` (what
/// [`FakeDingTalk::fail`](super::FakeDingTalk::fail) takes), or `unknown`; its `path` has
/// no query (it may carry a token or a ticket); `code` is the answer's `code` (or legacy
/// `errcode`). DingTalk calls it a success when it is a 2xx (or 101) with no error code
/// and no `success: false`.
pub type Call = crate::skeleton::Call<String>;

/// A robot message the fake accepted.
#[derive(Clone, Debug, PartialEq)]
pub struct Sent {
    /// `group_send` or `private_send`.
    pub route: &'static str,
    /// The conversation of a group message.
    pub conversation_id: Option<String>,
    /// The users a private message reached (without invalid or flow-controlled ones).
    pub user_ids: Vec<String>,
    /// `sampleText`, `sampleMarkdown`, `sampleImageMsg`, `sampleFile`.
    pub msg_key: String,
    /// `msgParam` parsed.
    pub msg_param: Value,
    /// The `processQueryKey` answered.
    pub process_query_key: String,
    /// When it was accepted.
    pub at: Instant,
}

impl Sent {
    /// What a user reads: a markdown's `text`, a text's `content`, a file's `fileName`,
    /// an image's `photoURL`.
    pub fn text(&self) -> &str {
        ["text", "content", "fileName", "photoURL"]
            .iter()
            .find_map(|k| self.msg_param.get(*k).and_then(Value::as_str))
            .unwrap_or("")
    }

    /// The markdown's `title`, when it is one.
    pub fn title(&self) -> Option<&str> {
        self.msg_param.get("title").and_then(Value::as_str)
    }
}

/// A media upload the fake accepted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Upload {
    /// The `media_id` answered (`@…`).
    pub media_id: String,
    /// `image`, `voice`, `video` or `file`.
    pub kind: String,
    /// The part's file name.
    pub file_name: String,
    /// The bytes.
    pub bytes: Vec<u8>,
}

/// One accepted `PUT card/streaming`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CardUpdate {
    /// The full `content` (or the appended part when `is_full` is false).
    pub content: String,
    /// `isFull`.
    pub is_full: bool,
    /// `isFinalize`.
    pub finalize: bool,
    /// `isError`.
    pub is_error: bool,
    /// `guid`.
    pub guid: String,
    /// When it was accepted.
    pub at: Instant,
}

/// An AI card, as it is now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Card {
    /// The caller's id for it.
    pub out_track_id: String,
    /// `cardTemplateId`.
    pub template_id: String,
    /// `openSpaceId` (`dtv1.card//IM_GROUP.<cid>` or `dtv1.card//IM_ROBOT.<staff>`).
    pub open_space_id: String,
    /// The first `content` (`cardData.cardParamMap.content`).
    pub initial: String,
    /// Every accepted update, in order.
    pub updates: Vec<CardUpdate>,
    /// Updates refused (after the finalize, or with a bad key).
    pub refused_updates: usize,
    /// Whether it was delivered (a scripted [`Failure::NotDelivered`] makes it not).
    pub delivered: bool,
    /// When it was created.
    pub at: Instant,
}

impl Card {
    /// What the card shows now: the last full content (appends applied).
    pub fn content(&self) -> String {
        let mut shown = self.initial.clone();
        for u in &self.updates {
            if u.is_full {
                shown.clone_from(&u.content);
            } else {
                shown.push_str(&u.content);
            }
        }
        shown
    }

    /// The content of every update, in order.
    pub fn contents(&self) -> Vec<String> {
        self.updates.iter().map(|u| u.content.clone()).collect()
    }

    /// How many updates said `isFinalize`.
    pub fn finalizations(&self) -> usize {
        self.updates.iter().filter(|u| u.finalize).count()
    }

    /// Whether an update said `isFinalize`.
    pub fn finalized(&self) -> bool {
        self.finalizations() > 0
    }
}

/// What [`FakeDingTalk::push`](super::FakeDingTalk::push) pushed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pushed {
    /// The frame's `headers.messageId` (acks and redeliveries carry it).
    pub message_id: String,
    /// The robot message's `msgId`.
    pub msg_id: Option<String>,
}

/// One delivery of a frame over a connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delivery {
    /// The frame's `messageId`.
    pub message_id: String,
    /// `CALLBACK` or `SYSTEM` (raw pushes are not recorded).
    pub kind: &'static str,
    /// The connection it went to.
    pub connection: u64,
    /// 0 for the first delivery, 1.. for redeliveries.
    pub attempt: u32,
    /// When it was sent.
    pub at: Instant,
}

/// An ack a client sent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ack {
    /// Its `headers.messageId`.
    pub message_id: String,
    /// Its `code`, `None` when it had none that is a number.
    pub code: Option<i64>,
    /// Its `headers.contentType`.
    pub content_type: Option<String>,
    /// Its `message`.
    pub message: Option<String>,
    /// Its `data` (a JSON string), when it was a string.
    pub data: Option<String>,
    /// Whether the fake sent a frame of that `messageId`.
    pub known: bool,
    /// The connection it came on.
    pub connection: u64,
    /// When it arrived.
    pub at: Instant,
}

/// A stream connection as the fake sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Connection {
    /// The fake's id for it, 1-based in connection order.
    pub id: u64,
    /// The ticket it was opened with.
    pub ticket: String,
    /// Whether it is still open.
    pub open: bool,
}

crate::skeleton::socket::linked!(Connection);
