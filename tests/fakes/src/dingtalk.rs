//! A fake DingTalk open platform (spec platforms §5.5) for the `im-bridge-dingtalk`
//! adapter's tests.
//!
//! [`FakeDingTalk::start`] binds `127.0.0.1:0`; [`FakeDingTalk::api_url`] is the base URL
//! to configure as the adapter's `api_url`, and [`FakeDingTalk::oapi_url`] (the same
//! server) as its `oapi_url`. It serves:
//!
//! - stream mode: `POST /v1.0/gateway/connections/open` (checks the app's credentials and
//!   the robot-message subscription, issues one-time tickets), then a WebSocket at
//!   `/connect?ticket=…` speaking JSON frames: robot messages pushed as `CALLBACK`s to one
//!   connection in turn, SYSTEM `ping` (the ack must echo its `data`) and `disconnect`,
//!   acks recorded by `messageId`, un-acked callbacks delivered again when
//!   [`FakeDingTalk::set_redeliver_after`] asks;
//! - `POST /v1.0/oauth2/accessToken`, and the `x-acs-dingtalk-access-token` check on every
//!   other call, with a stale-token mode ([`FakeDingTalk::make_token_stale`]);
//! - the robot: `groupMessages/send`, `oToMessages/batchSend`, `messageFiles/download`
//!   with its signed `downloadUrl`, and the legacy `POST /media/upload?access_token=…`;
//! - AI cards: `card/instances/createAndDeliver` and `PUT card/streaming`;
//! - scripted failures per operation ([`FakeDingTalk::fail`]): HTTP errors, DingTalk error
//!   codes, `success: false` bodies, undelivered cards.
//!
//! It enforces the rules the adapter depends on (a JSON-string `msgParam`, the app's
//! `robotCode`, known conversations and users, size limits, no update of a finalized or
//! unknown card) and never panics on what the bridge sends: a bad request gets
//! DingTalk's error body, a bad frame is counted ([`FakeDingTalk::bad_frames`]).
//!
//! Children: `records` holds what the fake records and answers with; `events` builds
//! robot messages (`ChatbotMessage`); `stream` is stream mode; `rest` is the HTTP edge
//! (routing, token, scripted failures); `robot` the messages and files; `card` the AI
//! cards.

mod card;
mod events;
mod records;
mod rest;
mod robot;
mod stream;

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use tokio::time::Instant;

use crate::skeleton::http::{Script, Tokens, When};
use crate::skeleton::{Fake, Platform};

pub use crate::wait::WaitTimeout;
pub use events::{Message, RichItem};
pub use records::{
    Ack, Call, Card, CardUpdate, Connection, Delivery, Failure, Pushed, Sent, Upload,
};

/// The app's AppKey (Client ID) the fake accepts.
pub const CLIENT_ID: &str = "dingfakeclient000001";
/// The app's AppSecret (Client Secret) the fake accepts.
pub const CLIENT_SECRET: &str = "fake-dingtalk-client-secret-0123456789";
/// The robot's `robotCode`: an enterprise internal app's robot code is its AppKey.
pub const ROBOT_CODE: &str = CLIENT_ID;
/// The only AI card template the fake knows.
pub const CARD_TEMPLATE_ID: &str = "fake-ai-card.schema";
/// The organization of every sender.
pub const CORP_ID: &str = "dingfakecorp";
/// The robot-message topic stream mode must subscribe to.
pub const TOPIC_BOT_MESSAGE: &str = "/v1.0/im/bot/messages/get";
/// `expireIn` of an access token, in seconds (DingTalk's 2 h).
pub const TOKEN_EXPIRE_SECS: u64 = 7200;
/// The longest `sampleMarkdown` text the fake takes, in UTF-8 bytes. DingTalk documents
/// no limit for the robot send APIs; this is the 20 000-byte body limit it documents for
/// robot webhook messages, the fake's guess (see [`FakeDingTalk::set_max_markdown_bytes`]).
pub const MAX_MARKDOWN_BYTES: usize = 20_000;
/// The most `userIds` one `oToMessages/batchSend` takes (documented).
pub const MAX_USER_IDS: usize = 20;
/// The largest media upload: 20 MB for images, videos and files (documented), 2 MB for
/// voice.
pub const MAX_UPLOAD_BYTES: usize = 20 * 1024 * 1024;
/// How many times an un-acked callback is delivered again before the fake gives up.
pub const MAX_REDELIVERIES: u32 = 3;

/// The error codes the fake answers. Those marked *documented* are DingTalk's; the others
/// are the fake's best guess, kept in one place so a test can name them.
pub mod code {
    /// A missing, unknown, expired or stale access token (HTTP 401). *documented*
    pub const INVALID_AUTHENTICATION: &str = "InvalidAuthentication";
    /// The app's credentials are wrong (token, `connections/open`; HTTP 400).
    pub const INVALID_CLIENT: &str = "invalidClientIdOrSecret";
    /// A body that is not the JSON the call takes, or a missing field (HTTP 400).
    pub const INVALID_PARAMETER: &str = "InvalidParameter";
    /// `robotCode` is not the app's robot (HTTP 400).
    pub const INVALID_ROBOT_CODE: &str = "invalidParameter.robotCode";
    /// `msgParam` is not a JSON object in a string, or lacks a field its `msgKey` needs.
    pub const INVALID_MSG_PARAM: &str = "invalidParameter.msgParam";
    /// An unknown `msgKey`.
    pub const INVALID_MSG_KEY: &str = "invalidParameter.msgKey";
    /// A markdown text over the fake's limit.
    pub const CONTENT_TOO_LONG: &str = "invalidParameter.msgParam.contentTooLong";
    /// A conversation the robot is not in.
    pub const CONVERSATION_NOT_FOUND: &str = "resource.not.found.openConversationId";
    /// A `downloadCode` the fake did not hand out.
    pub const DOWNLOAD_CODE_INVALID: &str = "invalidParameter.downloadCode";
    /// A `sampleFile`/`sampleImageMsg` naming a media id never uploaded.
    pub const MEDIA_NOT_FOUND: &str = "invalidParameter.mediaId";
    /// An unknown `cardTemplateId`.
    pub const TEMPLATE_NOT_FOUND: &str = "param.cardTemplateId.notFound";
    /// An `outTrackId` used twice in `createAndDeliver`.
    pub const OUT_TRACK_ID_USED: &str = "param.outTrackId.duplicated";
    /// `openSpaceId` and the deliver model do not fit (wrong form, unknown space).
    pub const INVALID_OPEN_SPACE: &str = "param.openSpaceId.invalid";
    /// A streaming update of an unknown `outTrackId`.
    pub const CARD_NOT_FOUND: &str = "param.outTrackId.notExist";
    /// A streaming update after `isFinalize`.
    pub const CARD_FINALIZED: &str = "card.streaming.finished";
    /// A streaming `key` the template has no variable for.
    pub const CARD_KEY_UNKNOWN: &str = "param.key.notExist";
    /// The gateway's rate limit (HTTP 403, or 429). *documented*
    pub const QPS_LIMIT: &str = "Forbidden.AccessDenied.QpsLimitForApi";
    /// What a scripted `success: false` body names.
    pub const SCRIPTED: &str = "fake.scripted.failure";
    /// Legacy host: invalid access_token. *documented*
    pub const LEGACY_INVALID_TOKEN: i64 = 40014;
    /// Legacy host: invalid media type.
    pub const LEGACY_INVALID_TYPE: i64 = 40004;
    /// Legacy host: a file over its size limit or empty.
    pub const LEGACY_INVALID_SIZE: i64 = 40006;
    /// Legacy host: no `media` part.
    pub const LEGACY_MISSING_MEDIA: i64 = 41001;
}

/// A file a user sent, waiting to be downloaded.
struct StoredFile {
    bytes: Vec<u8>,
    /// The download URL's signature once `messageFiles/download` handed one out.
    signatures: Vec<String>,
    /// Answered as the `downloadUrl` instead of a signed URL here (a test's other server).
    elsewhere: Option<String>,
}

/// The fake DingTalk's state: what it recorded, its tokens, scripts and stream mode.
pub struct DingTalk {
    failures: Script<Failure>,
    tokens: Tokens<Instant>,
    token_expire: u64,
    max_markdown_bytes: usize,
    stream: stream::State,
    /// Conversations the robot is in, and users it may write to (senders of pushes, and
    /// what a test adds).
    groups: HashSet<String>,
    users: HashSet<String>,
    flow_controlled: HashSet<String>,
    sent: Vec<Sent>,
    /// Files by `downloadCode`.
    files: HashMap<String, StoredFile>,
    /// Download URL id -> `downloadCode`.
    file_urls: HashMap<u64, String>,
    uploads: Vec<Upload>,
    cards: Vec<Card>,
    next_id: u64,
}

impl DingTalk {
    fn new() -> Self {
        DingTalk {
            failures: Script::default(),
            tokens: Tokens::default(),
            token_expire: TOKEN_EXPIRE_SECS,
            max_markdown_bytes: MAX_MARKDOWN_BYTES,
            stream: stream::State::default(),
            groups: HashSet::new(),
            users: HashSet::new(),
            flow_controlled: HashSet::new(),
            sent: Vec::new(),
            files: HashMap::new(),
            file_urls: HashMap::new(),
            uploads: Vec::new(),
            cards: Vec::new(),
            next_id: 0,
        }
    }

    fn next_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }
}

impl Platform for DingTalk {
    type Call = Call;
}

/// What the handlers and [`FakeDingTalk`] share.
pub(crate) type Shared = crate::skeleton::Shared<DingTalk>;

/// The running fake. Dropping it stops the server and closes every connection.
pub type FakeDingTalk = Fake<DingTalk>;

impl Fake<DingTalk> {
    /// Starts a fake for the app [`CLIENT_ID`] / [`CLIENT_SECRET`] on `127.0.0.1:0`.
    pub async fn start() -> std::io::Result<Self> {
        Fake::serve(DingTalk::new(), rest::handle, rest::MAX_BODY).await
    }

    /// The base URL to configure as `api_url`: `http://127.0.0.1:P`.
    pub fn api_url(&self) -> String {
        format!("http://{}", self.addr())
    }

    /// The base URL to configure as `oapi_url` (the same server serves `/media/upload`).
    pub fn oapi_url(&self) -> String {
        self.api_url()
    }

    // ---- stream mode -----------------------------------------------------------------

    /// Pushes a robot message (e.g. [`Message::to_json`]) as a `CALLBACK` frame to the
    /// next connected client in turn; with none connected it is held for the first that
    /// connects. Its conversation and sender become ones the robot may write to.
    pub fn push(&self, message: &serde_json::Value) -> Pushed {
        stream::push_callback(&self.shared, message)
    }

    /// Sends `text` as it is to the next connected client (a malformed frame, a frame of
    /// another type). Returns whether a client was connected.
    pub fn push_raw(&self, text: &str) -> bool {
        stream::push_raw(&self.shared, text)
    }

    /// Sends a SYSTEM `ping` to every open connection; returns the frames' `messageId`s.
    /// The ack must be code 200 and echo the ping's `data` ([`Self::ping_echoed`]).
    pub fn ping(&self) -> Vec<String> {
        stream::system(&self.shared, "ping")
    }

    /// Whether the ping `message_id` was acked with code 200 and its own `data`; `None`
    /// while unanswered.
    pub fn ping_echoed(&self, message_id: &str) -> Option<bool> {
        stream::ping_echoed(&self.shared.lock().stream, message_id)
    }

    /// Sends a SYSTEM `disconnect` to every open connection (DingTalk rotating its
    /// gateway); the client should ack, close and connect again with a new ticket.
    pub fn disconnect(&self) -> Vec<String> {
        stream::system(&self.shared, "disconnect")
    }

    /// Delivers a callback again whenever it is not acked with code 200 within `after`,
    /// up to [`MAX_REDELIVERIES`] times, to the next client in turn and under the same
    /// `messageId`. `None` (the default) never delivers again. Applies to pushes from now.
    pub fn set_redeliver_after(&self, after: Option<Duration>) {
        self.shared.lock().stream.redeliver_after = after;
    }

    /// Treats the next `n` acks (code 200) as arrived too late: recorded in
    /// [`Self::acks`], but their callbacks count as unacknowledged and are delivered again
    /// (with [`Self::set_redeliver_after`]).
    pub fn ack_late(&self, n: usize) {
        self.shared.lock().stream.late_acks = n;
    }

    /// Every delivery of a frame so far (first pushes and redeliveries).
    pub fn deliveries(&self) -> Vec<Delivery> {
        self.shared.lock().stream.deliveries.clone()
    }

    /// Every ack received so far.
    pub fn acks(&self) -> Vec<Ack> {
        self.shared.lock().stream.acks.clone()
    }

    /// Waits until the frame `message_id` has an ack with code 200, and returns it.
    pub async fn wait_acked(
        &self,
        message_id: &str,
        deadline: Duration,
    ) -> Result<Ack, WaitTimeout> {
        self.wait_ack(message_id, deadline, |code| code == 200)
            .await
    }

    /// Waits until the frame `message_id` has any ack, and returns the first.
    pub async fn wait_any_ack(
        &self,
        message_id: &str,
        deadline: Duration,
    ) -> Result<Ack, WaitTimeout> {
        self.wait_ack(message_id, deadline, |_| true).await
    }

    async fn wait_ack(
        &self,
        message_id: &str,
        deadline: Duration,
        fits: impl Fn(i64) -> bool,
    ) -> Result<Ack, WaitTimeout> {
        let found = |f: &Self| {
            f.acks()
                .into_iter()
                .find(|a| a.message_id == message_id && a.code.is_some_and(&fits))
        };
        self.wait_until(&format!("an ack of {message_id}"), deadline, |f| {
            found(f).is_some()
        })
        .await?;
        found(self).ok_or_else(|| self.timeout("an ack"))
    }

    /// Upgrades refused so far (no ticket, an unknown or already used one).
    pub fn refused_upgrades(&self) -> usize {
        self.shared.lock().stream.refused
    }

    /// How many tickets `connections/open` issued.
    pub fn tickets_issued(&self) -> usize {
        self.shared.lock().stream.tickets.len()
    }

    // ---- REST ------------------------------------------------------------------------

    /// Sets the `expireIn` (seconds) of tokens issued from now on; an expired token is
    /// refused like a stale one.
    pub fn set_token_expire(&self, secs: u64) {
        self.shared.lock().token_expire = secs;
    }

    /// Stale-token mode: every token issued so far is refused from now on (HTTP 401
    /// `InvalidAuthentication`, or `errcode` 40014 on the legacy host), so the bridge must
    /// fetch a new one and send again.
    pub fn make_token_stale(&self) {
        self.with_state(|d| d.tokens.stale_all());
    }

    /// The tokens issued so far, oldest first.
    pub fn tokens(&self) -> Vec<String> {
        self.with_state(|d| d.tokens.values())
    }

    /// Sets the longest `sampleMarkdown` text taken (default [`MAX_MARKDOWN_BYTES`]).
    pub fn set_max_markdown_bytes(&self, bytes: usize) {
        self.shared.lock().max_markdown_bytes = bytes;
    }

    /// Makes `conversation_id` a group the robot is in (pushing a message from it does
    /// too).
    pub fn add_group(&self, conversation_id: &str) {
        self.shared.lock().groups.insert(conversation_id.to_owned());
    }

    /// Makes `staff_id` a user the robot may write to (pushing a message from them does
    /// too).
    pub fn add_user(&self, staff_id: &str) {
        self.shared.lock().users.insert(staff_id.to_owned());
    }

    /// Holds back messages to `staff_id`: `batchSend` lists them in
    /// `flowControlledStaffIdList` and sends nothing to them.
    pub fn flow_control(&self, staff_id: &str) {
        self.shared
            .lock()
            .flow_controlled
            .insert(staff_id.to_owned());
    }

    /// Holds a file a user sent under `download_code`: `messageFiles/download` answers a
    /// signed local `downloadUrl` that serves `bytes`.
    pub fn put_file(&self, download_code: &str, bytes: Vec<u8>) {
        self.store_file(download_code, bytes, None);
    }

    /// Makes `messageFiles/download` answer `url` as the `downloadUrl` of `download_code`
    /// (a server that is not DingTalk's, to check the adapter refuses it).
    pub fn put_file_elsewhere(&self, download_code: &str, url: &str) {
        self.store_file(download_code, Vec::new(), Some(url.to_owned()));
    }

    fn store_file(&self, download_code: &str, bytes: Vec<u8>, elsewhere: Option<String>) {
        let file = StoredFile {
            bytes,
            signatures: Vec::new(),
            elsewhere,
        };
        self.with_state(|d| d.files.insert(download_code.to_owned(), file));
    }

    /// Makes the next `n` calls of `op` fail with `failure` (after the token check, so a
    /// call refused for its token does not count). `op` is a [`Call::route`]: `open`,
    /// `token`, `group_send`, `private_send`, `download_code`, `download`, `upload`,
    /// `card_create`, `card_stream`.
    pub fn fail(&self, op: &str, n: usize, failure: Failure) {
        self.with_state(|d| d.failures.add(op, When::Times(n), failure));
    }

    /// Removes every scripted failure.
    pub fn clear_failures(&self) {
        self.with_state(|d| d.failures.clear());
    }

    /// Every robot message accepted, oldest first.
    pub fn sent(&self) -> Vec<Sent> {
        self.shared.lock().sent.clone()
    }

    /// Every media upload accepted.
    pub fn uploads(&self) -> Vec<Upload> {
        self.shared.lock().uploads.clone()
    }

    /// Every card created, as it is now.
    pub fn cards(&self) -> Vec<Card> {
        self.shared.lock().cards.clone()
    }

    /// The card `out_track_id`.
    pub fn card(&self, out_track_id: &str) -> Option<Card> {
        self.cards()
            .into_iter()
            .find(|c| c.out_track_id == out_track_id)
    }
}

#[cfg(test)]
mod tests;
