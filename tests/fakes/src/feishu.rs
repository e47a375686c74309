//! A fake Feishu / Lark open platform (spec platforms §4.5) for the `im-bridge-feishu`
//! adapter's tests.
//!
//! [`FakeFeishu::start`] binds `127.0.0.1:0`; [`FakeFeishu::domain`] is the base URL to
//! configure as the adapter's `domain`. It serves:
//!
//! - the long connection: `POST /callback/ws/endpoint` discovery, then a WebSocket at `/ws`
//!   speaking binary `pbbp2` [`Frame`]s: pings are answered with pongs, events are pushed
//!   to one connected client in turn ("cluster mode"), acks are recorded, unacked events
//!   are pushed again when [`FakeFeishu::set_repush_after`] asks; for a while every new
//!   connection can be dropped at once ([`FakeFeishu::drop_connections_for`]);
//! - the REST API under `/open-apis/…` with the `{code, msg, data}` envelope and a
//!   `tenant_access_token` (`Authorization: Bearer`), enforcing Feishu's rules where the
//!   adapter depends on them (shared cards, size limits, the 5 patches/s per message), and
//!   the bot info (`bot/v3/info`: [`BOT_OPEN_ID`], under `bot` beside `code`);
//! - [`webhook_request`], what Feishu POSTs to an event webhook (encrypted and signed or
//!   plain), for the webhook mode; signed now, or at a chosen time
//!   ([`webhook_request_at`]).
//!
//! The fake never panics on what the bridge sends: a bad request gets Feishu's error
//! envelope, a bad frame is counted ([`FakeFeishu::bad_frames`]) and ignored.
//!
//! Children: `frame` is the prost `pbbp2` frame; `events` builds `im.message.receive_v1`
//! events; `ws` is the long connection (discovery, upgrade, connections, pushes, acks,
//! repush); `rest` is the HTTP edge and the REST methods; `records` holds what the fake
//! records and reports; `webhook` builds webhook requests (AES-256-CBC, signature).

mod events;
mod frame;
mod records;
mod rest;
mod webhook;
mod ws;

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

use crate::skeleton::http::{Script, Tokens, When};
use crate::skeleton::{Fake, Platform};

pub use crate::wait::WaitTimeout;
pub use events::Event;
pub use frame::{Frame, Header, METHOD_CONTROL, METHOD_DATA};
pub use records::{
    Ack, BotMessage, Call, Connection, Delivery, Failure, Patch, Pushed, Trigger, Upload,
};
pub use webhook::{
    SIGNATURE_HEADER, decode_webhook_body, signature, tamper_signature, url_verification_request,
    webhook_request, webhook_request_at,
};

/// The app id the fake accepts.
pub const APP_ID: &str = "cli_fake0000000001";
/// The app secret the fake accepts.
pub const APP_SECRET: &str = "fake-app-secret-0123456789";
/// The event encrypt key ([`webhook_request`] encrypts and signs with it).
pub const ENCRYPT_KEY: &str = "fake-encrypt-key";
/// The event verification token (the `token` of every event header).
pub const VERIFICATION_TOKEN: &str = "fake-verification-token";
/// The bot's `open_id` (what a mention of the bot carries).
pub const BOT_OPEN_ID: &str = "ou_fakebot0000000000000000000001";
/// The bot's display name in mentions.
pub const BOT_NAME: &str = "Fake Bridge";
/// The tenant of every event.
pub const TENANT_KEY: &str = "fake-tenant";
/// Feishu's limit on an interactive card's (and a post's) `content`: 30 KB.
pub const MAX_CARD_BYTES: usize = 30 * 1024;
/// Feishu's limit on a text message's `content`: 150 KB.
pub const MAX_TEXT_BYTES: usize = 150 * 1024;
/// Feishu's limit on an uploaded image: 10 MB.
pub const MAX_IMAGE_BYTES: usize = 10 * 1024 * 1024;
/// Feishu's limit on an uploaded file: 30 MB.
pub const MAX_FILE_BYTES: usize = 30 * 1024 * 1024;
/// Patches one message may take in any second; the next is refused with
/// [`code::RATE_LIMITED`].
pub const PATCHES_PER_SECOND: usize = 5;
/// Default `expire` of a tenant access token, in seconds (Feishu's 2 h).
pub const TOKEN_EXPIRE_SECS: u64 = 7200;
/// How many times an unacked event is pushed again before the fake gives up (Feishu
/// retries a bounded number of times too).
pub const MAX_REPUSHES: u32 = 3;

/// The Feishu error codes the fake answers. Those marked *documented* come from the SDK
/// source or Feishu's API reference; the others are the fake's best guess, kept in one
/// place so a test can name them.
pub mod code {
    /// Discovery: system busy, retry (SDK `SystemBusy`). *documented*
    pub const SYSTEM_BUSY: i64 = 1;
    /// Discovery: internal error, retry (SDK `InternalError`). *documented*
    pub const WS_INTERNAL_ERROR: i64 = 1_000_040_343;
    /// Handshake refusal `handshake-autherrcode`: too many connections (SDK
    /// `ExceedConnLimit`). *documented*
    pub const EXCEED_CONN_LIMIT: i64 = 1_000_040_350;
    /// Handshake refusal `handshake-status`: auth failed. *documented*
    pub const HANDSHAKE_AUTH_FAILED: i32 = 514;
    /// Handshake refusal `handshake-status`: forbidden. *documented*
    pub const HANDSHAKE_FORBIDDEN: i32 = 403;
    /// Token / discovery: the app secret is wrong. Feishu's code for a wrong secret on
    /// `tenant_access_token/internal`; the fake answers the same on discovery (the real
    /// discovery code is not documented; the SDK treats any code but 0, 1 and
    /// 1000040343 as a fatal client error).
    pub const APP_SECRET_INVALID: i64 = 10014;
    /// Token: invalid parameters (unknown app id, missing field).
    pub const INVALID_PARAM: i64 = 10003;
    /// REST: no `Authorization: Bearer` header. *documented*
    pub const TOKEN_MISSING: i64 = 99_991_661;
    /// REST: invalid or expired tenant access token; the SDK refreshes and retries on
    /// it (`errCodeTenantAccessTokenInvalid`). *documented*
    pub const TOKEN_INVALID: i64 = 99_991_663;
    /// REST: the app's request frequency limit (HTTP 429). *documented*
    pub const FREQUENCY_LIMIT: i64 = 99_991_400;
    /// REST: the body is not valid JSON of the right types.
    pub const BAD_REQUEST: i64 = 9499;
    /// REST: a required field is missing.
    pub const FIELD_VALIDATION: i64 = 99_992_402;
    /// IM: invalid request parameter (unknown message id, bad receive_id_type, …).
    /// *documented*
    pub const INVALID_PARAMETER: i64 = 230_001;
    /// IM: the bot is not the sender of the message (patching a user's message).
    /// *documented*
    pub const NOT_SENDER: i64 = 230_012;
    /// IM: the operation triggers the frequency limit (more than 5 patches/s on a
    /// message). *documented*, answered with HTTP 400 as documented.
    pub const RATE_LIMITED: i64 = 230_020;
    /// IM: the content is too long (text 150 KB, card and post 30 KB). *documented*
    pub const CONTENT_TOO_LONG: i64 = 230_025;
    /// IM: failed to create card content (not JSON; and, the fake's choice, a patch of a
    /// card that is not shared, i.e. without `config.update_multi: true` before and
    /// after). *documented* code, guessed use for `update_multi`.
    pub const CARD_CONTENT_FAILED: i64 = 230_099;
    /// Reactions: the reaction type is invalid.
    pub const REACTION_INVALID: i64 = 231_001;
    /// Files: invalid request parameter (bad `type`, `image_type`, `file_type`).
    pub const FILE_INVALID_PARAM: i64 = 234_001;
    /// Files: the resource is not in the message.
    pub const FILE_NOT_IN_MESSAGE: i64 = 234_003;
    /// Files: the file exceeds its size limit (image 10 MB, file 30 MB).
    pub const FILE_TOO_LARGE: i64 = 234_006;
    /// Files: an empty file.
    pub const FILE_EMPTY: i64 = 234_010;
    /// Files: an image upload that is not a picture the platform decodes (an SVG). The
    /// fake's code: Feishu documents the formats, not this answer's number.
    pub const IMAGE_FORMAT: i64 = 234_011;
}

/// The timers Feishu hands the client (seconds), in discovery and optionally in pongs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientConfig {
    /// Reconnect attempts, negative = forever.
    pub reconnect_count: i64,
    /// Seconds between reconnect attempts.
    pub reconnect_interval: i64,
    /// Jitter before the first reconnect, seconds.
    pub reconnect_nonce: i64,
    /// Seconds between pings.
    pub ping_interval: i64,
}

impl Default for ClientConfig {
    /// The fake's defaults (spec §4.5): reconnect forever every second, no jitter, ping
    /// every 5 s.
    fn default() -> Self {
        Self {
            reconnect_count: -1,
            reconnect_interval: 1,
            reconnect_nonce: 0,
            ping_interval: 5,
        }
    }
}

impl ClientConfig {
    /// As Feishu writes it: `{ReconnectCount, ReconnectInterval, ReconnectNonce,
    /// PingInterval}`.
    pub fn to_json(&self) -> Value {
        json!({
            "ReconnectCount": self.reconnect_count,
            "ReconnectInterval": self.reconnect_interval,
            "ReconnectNonce": self.reconnect_nonce,
            "PingInterval": self.ping_interval,
        })
    }
}

/// A file a user sent, served by the resource download.
struct Resource {
    bytes: Vec<u8>,
    name: String,
}

/// The fake Feishu's state: what it recorded, its tokens, scripts and long connection.
pub struct Feishu {
    failures: Script<Failure>,
    tokens: Tokens<Instant>,
    token_expire: u64,
    endpoint_config: ClientConfig,
    pong_config: Option<ClientConfig>,
    /// The next upgrade is refused with `(handshake-status, handshake-autherrcode)`.
    refuse: Option<(i32, Option<i64>)>,
    ws: ws::State,
    /// Messages users sent (pushed events), `message_id -> chat_id`.
    user_messages: HashMap<String, String>,
    messages: Vec<BotMessage>,
    /// Accepted patch times per message in the last second, for the 5/s rule; at most
    /// [`PATCHES_PER_SECOND`] entries each (older ones are dropped as they age out).
    patch_window: HashMap<String, VecDeque<Instant>>,
    rate_limited: usize,
    reactions: Vec<(String, String)>,
    resources: HashMap<(String, String), Resource>,
    uploads: Vec<Upload>,
    next_id: u64,
}

impl Feishu {
    fn new() -> Self {
        Feishu {
            failures: Script::default(),
            tokens: Tokens::default(),
            token_expire: TOKEN_EXPIRE_SECS,
            endpoint_config: ClientConfig::default(),
            pong_config: None,
            refuse: None,
            ws: ws::State::default(),
            user_messages: HashMap::new(),
            messages: Vec::new(),
            patch_window: HashMap::new(),
            rate_limited: 0,
            reactions: Vec::new(),
            resources: HashMap::new(),
            uploads: Vec::new(),
            next_id: 0,
        }
    }

    fn next_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// The scripted failure for this (authenticated) call of `route`, if one fires.
    fn scripted_failure(&mut self, route: &str) -> Option<Failure> {
        self.failures.count(route);
        self.failures.take(route, None)
    }
}

impl Platform for Feishu {
    type Call = Call;
}

/// What the handlers and [`FakeFeishu`] share.
pub(crate) type Shared = crate::skeleton::Shared<Feishu>;

/// The running fake. Dropping it stops the server and closes every connection.
pub type FakeFeishu = Fake<Feishu>;

impl Fake<Feishu> {
    /// Starts a fake for app [`APP_ID`] / [`APP_SECRET`] on `127.0.0.1:0`.
    pub async fn start() -> std::io::Result<Self> {
        Fake::serve(Feishu::new(), rest::handle, rest::MAX_BODY).await
    }

    /// The base URL to configure as `domain`: `http://127.0.0.1:P`.
    pub fn domain(&self) -> String {
        format!("http://{}", self.addr())
    }

    // ---- long connection -------------------------------------------------------------

    /// Sets the `ClientConfig` discovery hands out (default [`ClientConfig::default`]).
    pub fn set_client_config(&self, config: ClientConfig) {
        self.shared.lock().endpoint_config = config;
    }

    /// Makes pongs carry this `ClientConfig` as their payload (`None`: empty pongs, the
    /// default).
    pub fn set_pong_config(&self, config: Option<ClientConfig>) {
        self.shared.lock().pong_config = config;
    }

    /// Refuses the next WebSocket upgrade with headers `handshake-status: status`,
    /// `handshake-msg` and, when given, `handshake-autherrcode` (e.g.
    /// [`code::HANDSHAKE_AUTH_FAILED`] with [`code::EXCEED_CONN_LIMIT`]).
    pub fn refuse_handshake(&self, status: i32, autherrcode: Option<i64>) {
        self.shared.lock().refuse = Some((status, autherrcode));
    }

    /// Pushes `event` (a schema-2.0 event, e.g. from [`Event::to_json`]) as one data
    /// frame to the next connected client in turn. With no client connected it is held
    /// and pushed to the first that connects. The message it carries becomes one the bot
    /// may reply to and react on.
    pub fn push_event(&self, event: &Value) -> Pushed {
        ws::push(&self.shared, event, 1)
    }

    /// What Feishu POSTs to an event webhook for `event` ([`webhook_request`]), with the
    /// event's message known to the REST API from now on, as for a pushed event.
    pub fn webhook_event(&self, event: &Value, encrypt: bool) -> (Vec<(String, String)>, Vec<u8>) {
        ws::remember_message(&mut self.shared.lock(), event);
        webhook_request(event, encrypt)
    }

    /// Like [`Self::webhook_event`], encrypted and signed as if at `signed_at`
    /// ([`webhook_request_at`]).
    pub fn webhook_event_at(
        &self,
        event: &Value,
        signed_at: std::time::SystemTime,
    ) -> (Vec<(String, String)>, Vec<u8>) {
        ws::remember_message(&mut self.shared.lock(), event);
        webhook_request_at(event, signed_at)
    }

    /// Like [`Self::push_event`], with the payload split into `parts` frames (`sum =
    /// parts`, `seq` 0..), sent in order on one connection. `parts` is clamped to 1..=
    /// the payload's length.
    pub fn push_split(&self, event: &Value, parts: usize) -> Pushed {
        ws::push(&self.shared, event, parts)
    }

    /// Pushes an event again whenever it is not acked (code 200) within `after`, up to
    /// [`MAX_REPUSHES`] times, each time to the next client in turn and with a new frame
    /// id (Feishu waits 3 s; tests use less). `None` (the default) never re-pushes.
    /// Applies to events pushed from now on.
    pub fn set_repush_after(&self, after: Option<Duration>) {
        self.shared.lock().ws.repush_after = after;
    }

    /// Treats the next `n` acks (code 200) as arrived too late: recorded in
    /// [`Self::acks`], but their events count as unacknowledged and are pushed again
    /// (with [`Self::set_repush_after`]), as Feishu does with an ack over 3 s.
    pub fn ack_late(&self, n: usize) {
        self.shared.lock().ws.late_acks = n;
    }

    /// Every delivery so far (first pushes and re-pushes).
    pub fn deliveries(&self) -> Vec<Delivery> {
        self.shared.lock().ws.deliveries.clone()
    }

    /// Every ack frame received so far.
    pub fn acks(&self) -> Vec<Ack> {
        self.shared.lock().ws.acks.clone()
    }

    /// Waits until `event_id` has an ack with code 200.
    pub async fn wait_acked(&self, event_id: &str, deadline: Duration) -> Result<Ack, WaitTimeout> {
        let found = |f: &Self| {
            f.acks()
                .into_iter()
                .find(|a| a.event_id.as_deref() == Some(event_id) && a.code == Some(200))
        };
        self.wait_until(&format!("an ack of {event_id}"), deadline, |f| {
            found(f).is_some()
        })
        .await?;
        found(self).ok_or_else(|| self.timeout("an ack"))
    }

    /// Upgrades refused so far (by [`Self::refuse_handshake`] or for a bad query).
    pub fn refused_handshakes(&self) -> usize {
        self.shared.lock().ws.refused
    }

    // ---- REST ------------------------------------------------------------------------

    /// Sets the `expire` (seconds) of tokens issued from now on; a token is refused with
    /// [`code::TOKEN_INVALID`] once it has expired.
    pub fn set_token_expire(&self, secs: u64) {
        self.shared.lock().token_expire = secs;
    }

    /// Stale-token mode: the next request presenting the newest token is refused with
    /// [`code::TOKEN_INVALID`] and that token is revoked, so the bridge must fetch a new
    /// one and retry.
    pub fn make_token_stale(&self) {
        self.with_state(|f| f.tokens.stale_next());
    }

    /// The tokens issued so far, oldest first.
    pub fn tokens(&self) -> Vec<String> {
        self.with_state(|f| f.tokens.values())
    }

    /// Holds a file a user sent in `message_id`, served by `GET
    /// /open-apis/im/v1/messages/{message_id}/resources/{key}` with `name` in its
    /// `Content-Disposition`.
    pub fn put_resource(&self, message_id: &str, key: &str, bytes: Vec<u8>, name: &str) {
        self.shared.lock().resources.insert(
            (message_id.to_owned(), key.to_owned()),
            Resource {
                bytes,
                name: name.to_owned(),
            },
        );
    }

    /// Scripts a failure of `route` (see [`Call::route`]).
    pub fn fail(&self, route: &str, trigger: Trigger, failure: Failure) {
        let when = match trigger {
            Trigger::Nth(n) => When::Nth(n),
            Trigger::Always => When::Always,
        };
        self.with_state(|f| f.failures.add(route, when, failure));
    }

    /// Removes every scripted failure.
    pub fn clear_failures(&self) {
        self.with_state(|f| f.failures.clear());
    }

    /// Every message the bot sent, oldest first, as it looks now.
    pub fn messages(&self) -> Vec<BotMessage> {
        self.shared.lock().messages.clone()
    }

    /// The bot message `message_id`.
    pub fn message(&self, message_id: &str) -> Option<BotMessage> {
        self.messages()
            .into_iter()
            .find(|m| m.message_id == message_id)
    }

    /// The reactions the bot added to `message_id`, in order (`emoji_type`s).
    pub fn reactions(&self, message_id: &str) -> Vec<String> {
        self.shared
            .lock()
            .reactions
            .iter()
            .filter(|(m, _)| m == message_id)
            .map(|(_, e)| e.clone())
            .collect()
    }

    /// Every image and file uploaded.
    pub fn uploads(&self) -> Vec<Upload> {
        self.shared.lock().uploads.clone()
    }

    /// Patches refused by the 5/s rule so far.
    pub fn rate_limited(&self) -> usize {
        self.shared.lock().rate_limited
    }
}

#[cfg(test)]
mod tests;
