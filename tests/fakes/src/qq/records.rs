//! What the fake QQ records and reports: HTTP calls, accepted replies, gateway
//! connections and the frames they exchanged, scripted failures.

use std::time::SystemTime;

use serde_json::Value;

/// A scripted failure of the next call of a route.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Failure {
    /// HTTP 400 with `{code, message}` (e.g. [`super::code::RATE_LIMITED`]).
    Code(i64),
    /// HTTP 200 with `{code, message}`: QQ sometimes refuses under a success status.
    CodeOk(i64),
    /// This HTTP status with an empty body.
    Http(u16),
    /// The reply is taken (recorded, its seq spent) but its answer never leaves: the
    /// request is held until the client gives up or goes away (an answer lost with a
    /// dying bridge).
    AnswerLost,
}

/// One HTTP request the fake received (gateway frames are recorded separately). Its
/// `route` is `token`, `gateway`, `group_reply`, `c2c_reply`, `file`, `ws` or `unknown`
/// (what [`super::FakeQq::fail_next`] takes); `code` is the answer's, when it refused with
/// one; `app_id` is the `X-Union-Appid` sent. QQ calls it a success when it is a
/// 2xx without a code, or an accepted upgrade.
pub type Call = crate::skeleton::Call<i64>;

/// A reply the fake accepted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reply {
    /// The new message's id.
    pub id: String,
    /// `group:<openid>` or `c2c:<openid>`.
    pub chat_id: String,
    /// The source message it answers.
    pub msg_id: String,
    /// Its `msg_seq`.
    pub msg_seq: u64,
    /// Its `content`.
    pub content: String,
    /// The fake's clock when it was accepted.
    pub at: SystemTime,
}

/// One gateway connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Connection {
    /// 1-based, in order of connection.
    pub id: u64,
    /// Whether it is still open.
    pub open: bool,
    /// The session it identified or resumed into.
    pub session: Option<String>,
    /// Whether READY or RESUMED was sent on it.
    pub ready: bool,
}

crate::skeleton::socket::linked!(Connection, session);

/// An op 2 Identify the fake received.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identify {
    /// The connection.
    pub connection: u64,
    /// `d.token`, as sent.
    pub token: String,
    /// `d.intents`.
    pub intents: u64,
    /// `d.shard`.
    pub shard: Value,
    /// Whether it was accepted (READY sent).
    pub accepted: bool,
}

/// An op 6 Resume the fake received.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resume {
    /// The connection.
    pub connection: u64,
    /// `d.token`, as sent.
    pub token: String,
    /// `d.session_id`.
    pub session_id: String,
    /// `d.seq`.
    pub seq: u64,
    /// Whether it was accepted (events replayed, RESUMED sent).
    pub accepted: bool,
}

/// An op 1 heartbeat the fake received.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Heartbeat {
    /// The connection.
    pub connection: u64,
    /// `d`: the last sequence number the client saw (`None`: `null`).
    pub seq: Option<u64>,
    /// Whether it was ACKed (op 11).
    pub acked: bool,
}

/// An event dispatch (op 0) the fake sent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dispatched {
    /// The connection.
    pub connection: u64,
    /// `s`.
    pub seq: u64,
    /// `t`.
    pub kind: String,
    /// The payload's `id`.
    pub event_id: String,
    /// Whether it was a replay after a resume.
    pub replay: bool,
}

/// What [`super::FakeQq::push`] did with an event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pushed {
    /// The payload's `id`.
    pub event_id: String,
    /// The message id (`d.id`).
    pub message_id: String,
    /// Its sequence number in the session, when there was one (else it waits for the
    /// next READY).
    pub seq: Option<u64>,
}
