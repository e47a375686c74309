//! A fake QQ bot platform (API v2, spec platforms §6.5) for the `im-bridge-qq` adapter's
//! tests.
//!
//! [`FakeQq::start`] binds `127.0.0.1:0`; configure [`FakeQq::api_url`] as `api_url` and
//! [`FakeQq::token_url`] as `token_url` (they differ, so a client that mixes them up
//! fails). It serves:
//!
//! - `POST {token_url}/app/getAppAccessToken`: tokens `fake-token-N` with `expires_in`
//!   as a string (QQ's example) or a number; a stale-token mode;
//! - `GET /gateway` → `{url: "ws://…/websocket"}`, and the op-code WebSocket there:
//!   Hello, Identify (token prefix and intents checked) → READY, heartbeats ACKed, events
//!   with increasing `s`, Resume replaying what the client missed, and scripted op 7,
//!   op 9, close codes and dropped sockets;
//! - the two reply endpoints, enforcing the passive-reply rules against a clock the test
//!   advances ([`FakeQq::advance_clock`]), refusing a URL whose domain the bot has not
//!   registered ([`FakeQq::register_domains`]), plus scriptable failures (22009);
//! - `GET /files/{name}`: attachments for image events;
//! - webhook requests as QQ signs them ([`FakeQq::webhook_event`],
//!   [`validation_request`]), with the current time or a chosen one
//!   ([`FakeQq::webhook_event_at`]).
//!
//! The fake never panics on what the bridge sends: a bad request gets QQ's error body, a
//! bad frame is counted ([`FakeQq::bad_frames`]).
//!
//! Children: `events` builds message events; `gateway` is the WebSocket and its sessions;
//! `rest` the HTTP edge and the reply rules; `records` what the fake records; `time` the
//! clock and timestamps; `urls` what counts as a URL in a reply; `webhook` signed webhook
//! requests.

mod events;
mod gateway;
mod records;
mod rest;
mod time;
mod urls;
mod webhook;

use std::collections::{HashMap, HashSet};
use std::time::{Duration, SystemTime};

use crate::skeleton::http::{Script, Tokens, When};
use crate::skeleton::{Fake, Gateway, Platform};

pub use crate::skeleton::Trigger;
pub use crate::skeleton::gateway::{DEFAULT_HEARTBEAT_MS, MAX_LOG};
pub use crate::wait::WaitTimeout;
pub use events::Event;
pub use records::{
    Call, Connection, Dispatched, Failure, Heartbeat, Identify, Pushed, Reply, Resume,
};
pub use time::rfc3339;
pub use webhook::{
    SIGNATURE_HEADER, TIMESTAMP_HEADER, WebhookRequest, sign, signed_request, unix_seconds,
    validation_answer_ok, validation_request, verify,
};

/// The AppID the fake accepts.
pub const APP_ID: &str = "102000001";
/// The AppSecret the fake accepts (and signs webhook requests with).
pub const CLIENT_SECRET: &str = "fakeSecret0123456789";
/// The bot's user id (READY's `user.id`, what `<@!id>` mentions carry).
pub const BOT_ID: &str = "3889000001";
/// The bot's name in READY.
pub const BOT_USERNAME: &str = "fake-bridge";
/// The intent of group @-messages and C2C messages, `1 << 25`.
pub const INTENT_GROUP_AND_C2C: u64 = 1 << 25;
/// How long after a group message replies are accepted.
pub const GROUP_WINDOW: Duration = Duration::from_secs(300);
/// How long after a C2C message replies are accepted.
pub const C2C_WINDOW: Duration = Duration::from_secs(3600);
/// Replies one source message allows.
pub const MAX_REPLIES: usize = 5;
/// Default `expires_in` of a token, seconds (QQ's 2 h).
pub const TOKEN_EXPIRES_IN: u64 = 7200;

/// The codes the fake answers. Those marked *documented* come from QQ's documentation or
/// an official SDK; the others are the fake's own, kept in one place so tests can name
/// them.
pub mod code {
    /// REST: the access token expired or does not exist (botgo
    /// `APICodeTokenExpireOrNotExist`), with HTTP 401. *documented*
    pub const TOKEN_INVALID: i64 = 11244;
    /// REST: message sending too frequent. *documented*
    pub const RATE_LIMITED: i64 = 22009;
    /// REST: the same `msg_id` + `msg_seq` was sent before ("message deduplicated").
    /// *documented*
    pub const DUPLICATE_SEQ: i64 = 40054005;
    /// Token: wrong AppID or AppSecret (answered under HTTP 200).
    pub const INVALID_CREDENTIALS: i64 = 100016;
    /// REST: `X-Union-Appid` missing or another bot's.
    pub const APP_ID_MISMATCH: i64 = 11241;
    /// REST: a message that answers no source (a proactive message): "主动消息失败, 无权限",
    /// as bots report it since QQ stopped proactive pushes on 2025-04-21
    /// (tencent-connect/openclaw-qqbot#43). *documented* (observed)
    pub const PROACTIVE_REFUSED: i64 = 40034102;
    /// REST: the body lacks a field or has a wrong value.
    pub const BAD_REQUEST: i64 = 40034001;
    /// REST: the `msg_id` is not a message of that chat ("msg_id invalid or not yours").
    pub const MSG_ID_INVALID: i64 = 40034024;
    /// REST: a C2C or group message carries a URL whose domain the bot has not
    /// registered ("消息发送失败，不允许发送url", as bots report it; bot-docs lists
    /// 304003 `URL_NOT_ALLOWED` for the same). *documented* (observed)
    pub const URL_NOT_ALLOWED: i64 = 40054010;
    /// REST: the passive-reply window of the source message has closed ("消息ID已过期，
    /// 不能回复", as bots report it; QQ's page names no code).
    pub const REPLY_EXPIRED: i64 = 304103;
    /// REST: the source message already has 5 replies ("被动回复时间或次数超限", as bots
    /// report it).
    pub const REPLY_LIMIT: i64 = 40034128;
    /// An unknown route.
    pub const NOT_FOUND: i64 = 404;
}

/// A message a user sent, as the reply rules see it.
struct UserMessage {
    chat_id: String,
    sent_at: SystemTime,
    /// `msg_seq`s of accepted replies.
    seqs: HashSet<u64>,
    /// `msg_seq`s of replies refused for a URL: QQ's documents do not say whether such a
    /// refusal spends the seq, so the fake takes the strict reading and refuses it again
    /// as a duplicate.
    spent: HashSet<u64>,
}

/// The fake QQ's state: what it recorded, its tokens and clock, the gateway.
pub struct Qq {
    clock: time::Clock,
    tokens: Tokens<SystemTime>,
    token_expires_in: u64,
    token_as_number: bool,
    failures: Script<Failure>,
    user_messages: HashMap<String, UserMessage>,
    replies: Vec<Reply>,
    files: HashMap<String, (Vec<u8>, String)>,
    gw: Gateway<Qq>,
    next_id: u64,
    /// Domains the bot registered: a URL on one of them (or a subdomain) is allowed.
    domains: Vec<String>,
}

impl Qq {
    fn new() -> Self {
        Self {
            clock: time::Clock::default(),
            tokens: Tokens::default(),
            token_expires_in: TOKEN_EXPIRES_IN,
            token_as_number: false,
            failures: Script::default(),
            user_messages: HashMap::new(),
            replies: Vec::new(),
            files: HashMap::new(),
            gw: Gateway::default(),
            next_id: 0,
            domains: Vec::new(),
        }
    }

    /// Issues a token: its value and `expires_in` as configured (string or number).
    fn issue_token(&mut self) -> (String, serde_json::Value) {
        self.next_id += 1;
        let value = format!("fake-token-{}", self.next_id);
        let expires_at = self.clock.now() + Duration::from_secs(self.token_expires_in);
        self.tokens.issue(value.clone(), expires_at);
        let expires_in = if self.token_as_number {
            serde_json::json!(self.token_expires_in)
        } else {
            serde_json::json!(self.token_expires_in.to_string())
        };
        (value, expires_in)
    }

    /// Whether `token` is a live token; in stale-token mode the newest one is revoked
    /// the first time it is presented.
    fn check_token(&mut self, token: &str) -> bool {
        let now = self.clock.now();
        self.tokens.check(token, now)
    }

    /// Makes a pushed (or posted) message one the bot may reply to.
    fn remember(&mut self, event: &Event) {
        let sent_at = event.sent().unwrap_or_else(|| self.clock.now());
        self.user_messages
            .entry(event.message_id().to_owned())
            .or_insert_with(|| UserMessage {
                chat_id: event.chat_id(),
                sent_at,
                seqs: HashSet::new(),
                spent: HashSet::new(),
            });
    }
}

impl Platform for Qq {
    type Call = Call;
}

/// What the handlers and [`FakeQq`] share.
pub(crate) type Shared = crate::skeleton::Shared<Qq>;

/// The running fake. Dropping it stops the server and closes every connection.
pub type FakeQq = Fake<Qq>;

impl Fake<Qq> {
    /// Starts a fake for bot [`APP_ID`] / [`CLIENT_SECRET`] on `127.0.0.1:0`.
    pub async fn start() -> std::io::Result<Self> {
        Fake::serve(Qq::new(), rest::handle, rest::MAX_BODY).await
    }

    /// The base URL to configure as `api_url`: `http://127.0.0.1:P`.
    pub fn api_url(&self) -> String {
        format!("http://{}", self.addr())
    }

    /// The base URL to configure as `token_url`: `http://127.0.0.1:P/bots`.
    pub fn token_url(&self) -> String {
        format!("http://{}{}", self.addr(), rest::TOKEN_PREFIX)
    }

    // ---- clock and tokens ------------------------------------------------------------

    /// The fake's clock: real time plus what [`Self::advance_clock`] added.
    pub fn now(&self) -> SystemTime {
        self.with_state(|qq| qq.clock.now())
    }

    /// Moves the fake's clock forward (reply windows and token lifetimes follow it).
    pub fn advance_clock(&self, by: Duration) {
        self.with_state(|qq| qq.clock.offset += by);
    }

    /// Sets the `expires_in` of tokens issued from now on, as a JSON number (`true`) or
    /// a string (`false`, the default, as QQ's example).
    pub fn set_token_expires_in(&self, secs: u64, as_number: bool) {
        self.with_state(|qq| {
            qq.token_expires_in = secs;
            qq.token_as_number = as_number;
        });
    }

    /// Stale-token mode: the next call or Identify/Resume presenting the newest token is
    /// refused (401, or close 4004) and that token revoked, so the bridge must fetch a new
    /// one.
    pub fn make_token_stale(&self) {
        self.with_state(|qq| qq.tokens.stale_next());
    }

    /// The tokens issued so far, oldest first.
    pub fn tokens(&self) -> Vec<String> {
        self.with_state(|qq| qq.tokens.values())
    }

    /// Scripts a failure of the next call of `route` (`token`, `gateway`, `group_reply`,
    /// `c2c_reply`), after authentication. Scripts of one route fire in order.
    pub fn fail_next(&self, route: &str, failure: Failure) {
        self.with_state(|qq| qq.failures.add(route, When::Next, failure));
    }

    /// Scripts a failure of `route` when `trigger` says (`Trigger::Nth(2)`: its second
    /// call since the fake started, after authentication).
    pub fn fail(&self, route: &str, trigger: Trigger, failure: Failure) {
        self.with_state(|qq| qq.failures.add(route, trigger.into(), failure));
    }

    /// Serves `bytes` at `GET /files/{name}` (no authentication); its URL, for
    /// [`Event::with_image`].
    pub fn put_file(&self, name: &str, bytes: Vec<u8>, content_type: &str) -> String {
        self.with_state(|qq| {
            let file = (bytes, content_type.to_owned());
            qq.files.insert(name.to_owned(), file)
        });
        format!("http://{}/files/{name}", self.addr())
    }

    /// Registers `domains` for the bot: replies may carry URLs on them and their
    /// subdomains (any other URL or bare domain is refused with
    /// [`code::URL_NOT_ALLOWED`]).
    pub fn register_domains(&self, domains: &[&str]) {
        self.with_state(|qq| {
            qq.domains = domains.iter().map(|d| d.to_ascii_lowercase()).collect();
        });
    }

    // ---- gateway ---------------------------------------------------------------------

    /// Pushes a message event in the current session (sent at once when its connection is
    /// live, replayed on resume otherwise, held for the next READY when there is no
    /// session). The message becomes one the bot may reply to.
    pub fn push(&self, event: &Event) -> Pushed {
        gateway::push(&self.shared, event)
    }

    /// Waits until `n` connections have been made ready (READY or RESUMED) in all.
    pub async fn wait_ready(&self, n: usize, deadline: Duration) -> Result<(), WaitTimeout> {
        self.wait_until(&format!("{n} ready connections"), deadline, |f| {
            f.with_state(|qq| {
                let accepted = qq.gw.identifies.iter().filter(|i| i.accepted).count()
                    + qq.gw.resumes.iter().filter(|r| r.accepted).count();
                accepted >= n
            })
        })
        .await
    }

    // ---- webhook ---------------------------------------------------------------------

    /// What QQ POSTs to a webhook for `event` (`{op: 0, id, t, d}`, signed), with its
    /// message known to the reply endpoints from now on.
    pub fn webhook_event(&self, event: &Event) -> WebhookRequest {
        self.webhook_event_at(event, SystemTime::now())
    }

    /// Like [`Self::webhook_event`], signed as if at `signed_at` (a callback captured then,
    /// or sent by a host whose clock is off); the message itself is stamped now, so its
    /// reply window is open.
    pub fn webhook_event_at(&self, event: &Event, signed_at: SystemTime) -> WebhookRequest {
        let event = self.with_state(|qq| {
            let event = event.stamped(qq.clock.now());
            qq.remember(&event);
            event
        });
        let timestamp = unix_seconds(signed_at);
        signed_request(CLIENT_SECRET, &timestamp, &event.payload(None))
    }

    // ---- replies ---------------------------------------------------------------------

    /// Every reply accepted, oldest first.
    pub fn replies(&self) -> Vec<Reply> {
        self.with_state(|qq| qq.replies.clone())
    }

    /// The replies accepted to source message `msg_id`.
    pub fn replies_to(&self, msg_id: &str) -> Vec<Reply> {
        self.replies()
            .into_iter()
            .filter(|r| r.msg_id == msg_id)
            .collect()
    }

    /// Waits until `n` replies were accepted in all.
    pub async fn wait_replies(
        &self,
        n: usize,
        deadline: Duration,
    ) -> Result<Vec<Reply>, WaitTimeout> {
        self.wait_until(&format!("{n} replies"), deadline, |f| {
            f.replies().len() >= n
        })
        .await?;
        Ok(self.replies())
    }
}

#[cfg(test)]
mod tests;
