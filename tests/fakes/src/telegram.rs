//! A fake Telegram Bot API server (spec platforms §3.5) for the `im-bridge-telegram`
//! adapter's tests.
//!
//! [`FakeTelegram::start`] binds `127.0.0.1:0` and serves `/bot<token>/<method>` (JSON,
//! urlencoded, multipart or query parameters) and `GET /file/bot<token>/<path>`. A wrong
//! token gets `401 Unauthorized`; answers use the real envelope, `{"ok": true, "result"}`
//! or `{"ok": false, "error_code", "description", "parameters": {"retry_after"}}`.
//!
//! Behaviour kept faithful where the adapter depends on it: `getUpdates` is held open until
//! an update is queued or its `timeout` expires, and an `offset` confirms every lower
//! update for good; polling while a webhook is set is a 409 conflict; texts must be 1 to
//! 4096 UTF-16 code units; editing to the same text is "message is not modified"; editing
//! an unknown message is "message to edit not found". With `parse_mode: "HTML"` a text or
//! caption is parsed as Telegram does (a malformed one is "can't parse entities"), its
//! limit counts the visible text, and the message keeps the visible text and its
//! [`Entity`]s.
//!
//! Webhooks: like a local Bot API server, `setWebhook` takes any URL, unless
//! [`FakeTelegram::require_hosted_webhooks`] makes it refuse what the hosted Bot API
//! refuses (not HTTPS, or a port other than 80, 88, 443 and 8443).
//!
//! Groups: [`FakeTelegram::migrate_group`] upgrades a group to a supergroup; a call naming
//! the old chat id is then refused as Telegram refuses it (400 "group chat was upgraded to a
//! supergroup chat" with `parameters.migrate_to_chat_id`).
//!
//! Reactions: `setMessageReaction` takes one emoji from Telegram's list on a message the
//! chat has ("message to react not found" otherwise, `REACTION_INVALID` for another emoji);
//! [`FakeTelegram::reactions`] shows them.
//!
//! Test hooks: [`FakeTelegram::inject`] queues a user's message ([`Incoming`], dated now or
//! [`Incoming::sent_ago`]), [`FakeTelegram::inject_album`] an album (2 to 10 photos or
//! documents, one update each, sharing a `media_group_id`),
//! [`FakeTelegram::forget_offset`] redelivers what was already confirmed,
//! [`FakeTelegram::fail`] scripts a failure for the Nth call of a method (or the first
//! edit to a given text), or withholds the answer of a call that took effect
//! ([`Failure::AnswerLost`]), [`FakeTelegram::deliver_webhook`] plays Telegram posting to the
//! registered webhook, and [`FakeTelegram::wait_for`] waits for a condition over the
//! recorded calls with a deadline, never a sleep.
//!
//! Flood limits (opt-in, off by default so scripted timings stay exact):
//! [`FakeTelegram::enforce_flood_limits`] with [`FloodLimits::telegram`] makes the fake
//! throttle as Telegram does, per chat (a burst of 3, then 1 write/s in a private chat and 20
//! writes/min in a group, never more than 20 in any minute) and per bot (30 writes/s across
//! chats, never more than 30 in any second). A write over budget is answered 429 with
//! `retry_after`, recorded, and changes nothing;
//! [`FakeTelegram::flood_refusals`] counts those answers.
//!
//! Files: [`FakeTelegram::add_file`] (or [`FakeTelegram::with_document`] /
//! [`FakeTelegram::with_photo`] on an [`Incoming`]) holds a file a user sent, which
//! `getFile` and the download then serve; [`FakeTelegram::declare_file_size`] and
//! [`FakeTelegram::serve_without_length`] make its description disagree with its bytes;
//! [`FakeTelegram::downloads`] lists the downloads requested. Downloads are not Bot API
//! calls and do not appear in [`FakeTelegram::calls`].
//!
//! Children: `incoming` builds the updates a test injects (albums too); `methods` answers the
//! immediate methods; `html` parses the HTML parse mode into visible text and `entity`s;
//! `files` holds the files, answers `getFile` and serves downloads;
//! `flood` is the opt-in limiter in front of the writes (token buckets and sliding windows);
//! `server` is the HTTP edge (routing, parameter parsing, the held `getUpdates`, call
//! recording).

mod entity;
mod files;
mod flood;
mod html;
mod incoming;
mod methods;
mod server;

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::skeleton::http::{Script, When};
use crate::skeleton::{Fake, Platform, Recorded};

pub use crate::wait::WaitTimeout;

pub use entity::Entity;
pub use flood::{FloodLimits, Rate, Window};
pub use incoming::{Incoming, MAX_ALBUM_ITEMS};

/// The default bot token the fake accepts.
pub const TOKEN: &str = "123456:FAKE-token_for-tests";
/// The default bot username.
pub const BOT_USERNAME: &str = "ThisBot";
/// The bot's user id.
pub const BOT_ID: i64 = 7_000_000_001;
/// Telegram's message length limit in UTF-16 code units.
pub const MAX_TEXT_UTF16: usize = 4096;
/// The most bytes of link addresses (`text_link` URLs) one message's entities may carry:
/// past it Telegram refuses the text with "Bad Request: entities too long" long before
/// 4096 visible characters (tdlib's maintainer puts the entity data limit near 9,500
/// characters; telegram-bot-api issue 165). The fake counts the addresses only.
pub const MAX_ENTITY_URL_BYTES: usize = 9_500;
/// Telegram's caption length limit in UTF-16 code units (checked under a `parse_mode`).
pub const MAX_CAPTION_UTF16: usize = 1024;
/// Longest a `getUpdates` is held, whatever its `timeout` says.
const MAX_POLL_HOLD: Duration = Duration::from_secs(60);
/// Most updates one `getUpdates` returns.
const MAX_POLL_LIMIT: usize = 100;

/// A scripted failure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Failure {
    /// 429 with `parameters.retry_after` seconds.
    RetryAfter(u64),
    /// 400 "message is not modified".
    NotModified,
    /// 400 "message to edit not found".
    MessageToEditNotFound,
    /// 400 "message can't be edited".
    CantBeEdited,
    /// Any status and description.
    Status(u16, String),
    /// The call takes effect and is recorded as answered, but the answer never leaves:
    /// the request is held until the client gives up or the fake stops (an answer lost
    /// with a dying client, issue 27).
    AnswerLost,
}

/// When a scripted failure fires.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Trigger {
    /// On the Nth call (1-based, counting every call) of the method.
    Nth(usize),
    /// On the first call of the method whose `text` equals this.
    TextEquals(String),
    /// On every call of the method until [`FakeTelegram::heal`] (an outage).
    Always,
    /// On the next call of the method, whatever it is.
    Next,
}

/// One call the fake received.
#[derive(Clone, Debug)]
pub struct Call {
    /// Bot API method, e.g. `editMessageText`.
    pub method: String,
    /// Parsed parameters (uploaded files as `{"file_name", "content_type", "size"}`).
    pub params: Value,
    /// When it arrived.
    pub at: Instant,
    /// The HTTP status answered (0 while a long poll is still held).
    pub status: u16,
    /// The answer's `result` (for `getUpdates`: the updates returned).
    pub result: Option<Value>,
}

impl Call {
    /// `params.text` as a string.
    pub fn text(&self) -> Option<&str> {
        self.params.get("text").and_then(Value::as_str)
    }

    /// `params.parse_mode` as a string (`None` when absent).
    pub fn parse_mode(&self) -> Option<&str> {
        self.params.get("parse_mode").and_then(Value::as_str)
    }

    /// An integer parameter (number or numeric string).
    pub fn int(&self, key: &str) -> Option<i64> {
        methods::int(&self.params, key)
    }

    /// Whether the call succeeded.
    pub fn ok(&self) -> bool {
        self.status == 200
    }
}

/// A message the bot sent, as it looks now (after edits).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BotMessage {
    /// Its chat.
    pub chat_id: i64,
    /// Its id.
    pub message_id: i64,
    /// Current text (caption for files), as shown: with a `parse_mode`, the visible text.
    pub text: String,
    /// The entities of `text` from its `parse_mode` (none without one), sorted as Telegram
    /// sorts them.
    pub entities: Vec<Entity>,
    /// The message it replies to.
    pub reply_to: Option<i64>,
    /// `text`, `photo` or `document`.
    pub kind: &'static str,
    /// For files: the stored file id.
    pub file_id: String,
    /// Successful edits so far.
    pub edits: usize,
}

/// An injected update.
#[derive(Clone, Debug)]
pub struct Injected {
    /// Its `update_id`.
    pub update_id: i64,
    /// Its message's id.
    pub message_id: i64,
    /// The whole update.
    pub update: Value,
}

/// The fake Telegram's state: its bot, what it recorded, its queued updates and scripts.
pub struct Telegram {
    /// The bot token it accepts.
    token: String,
    /// The bot's user, as `getMe` answers it.
    bot: Value,
    /// Every call as it is recorded, for [`FakeTelegram::watch`].
    tap: tokio::sync::broadcast::Sender<Call>,
    /// Updates not yet confirmed, in id order.
    pending: Vec<Value>,
    /// Updates confirmed by an offset, kept for [`FakeTelegram::forget_offset`].
    confirmed: Vec<Value>,
    next_update_id: i64,
    next_message_id: i64,
    ignore_offset_once: bool,
    /// `getUpdates` calls so far: a waiting poll that sees a newer one gives up.
    polls: u64,
    webhook: Option<(String, Option<String>)>,
    /// Whether `setWebhook` checks the URL as the hosted Bot API does (a local Bot API
    /// server, which the fake plays by default, takes any URL).
    hosted_webhooks: bool,
    /// Groups upgraded to supergroups: old chat id → new chat id.
    migrated: BTreeMap<i64, i64>,
    failures: Script<Failure>,
    messages: Vec<BotMessage>,
    files: files::Files,
    menus: BTreeMap<Option<String>, Vec<(String, String)>>,
    /// The bot's reaction on each message it reacted to, by `(chat, message)`.
    reactions: BTreeMap<(i64, i64), Vec<String>>,
    /// Forum topics `(chat, message_thread_id)` users wrote in: the only ones a bot may
    /// post into.
    forum_topics: std::collections::HashSet<(i64, i64)>,
    /// Telegram's flood limits, off until [`FakeTelegram::enforce_flood_limits`].
    flood: flood::Flood,
}

impl Telegram {
    fn now_unix(&self) -> i64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or(0)
    }

    fn next_message_id(&mut self) -> i64 {
        self.next_message_id += 1;
        self.next_message_id
    }

    /// Confirms every pending update below `offset`.
    fn confirm_below(&mut self, offset: i64) {
        let (done, keep): (Vec<_>, Vec<_>) =
            self.pending.drain(..).partition(|u| update_id(u) < offset);
        self.confirmed.extend(done);
        self.pending = keep;
    }

    /// Fires the first matching rule for this call, if any.
    fn scripted_failure(&mut self, method: &str, params: &Value) -> Option<Scripted> {
        let text = params.get("text").and_then(Value::as_str);
        let failure = self.failures.take(method, text)?;
        Some(Scripted::Answer(match failure {
            Failure::AnswerLost => return Some(Scripted::AnswerLost),
            Failure::RetryAfter(secs) => Answer::retry_after(secs),
            Failure::NotModified => Answer::error(
                400,
                "Bad Request: message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message",
            ),
            Failure::MessageToEditNotFound => {
                Answer::error(400, "Bad Request: message to edit not found")
            }
            Failure::CantBeEdited => Answer::error(400, "Bad Request: message can't be edited"),
            Failure::Status(code, description) => Answer::error(code, &description),
        }))
    }
}

impl Platform for Telegram {
    type Call = Call;
}

impl Recorded for Call {
    /// A call is filed under its Bot API method.
    fn route(&self) -> &str {
        &self.method
    }

    fn status(&self) -> u16 {
        self.status
    }

    fn line(&self) -> String {
        format!("{} {} {}", self.status, self.method, self.params)
    }
}

/// What a scripted rule makes of a call.
pub(crate) enum Scripted {
    /// This answer instead of the method's.
    Answer(Answer),
    /// The method's effect, with the answer withheld.
    AnswerLost,
}

fn update_id(update: &Value) -> i64 {
    update.get("update_id").and_then(Value::as_i64).unwrap_or(0)
}

/// An HTTP answer in the Bot API envelope.
pub(crate) struct Answer {
    status: u16,
    body: Value,
}

impl Answer {
    fn ok(result: Value) -> Self {
        Self {
            status: 200,
            body: json!({"ok": true, "result": result}),
        }
    }

    /// 429 "Too Many Requests" with `parameters.retry_after`, as Telegram throttles: the
    /// scripted [`Failure::RetryAfter`] and the flood limiter answer the same.
    fn retry_after(secs: u64) -> Self {
        Self {
            status: 429,
            body: json!({"ok": false, "error_code": 429,
                "description": format!("Too Many Requests: retry after {secs}"),
                "parameters": {"retry_after": secs}}),
        }
    }

    /// 400 for a call to a group that became a supergroup, as Telegram answers it.
    fn migrated(to: i64) -> Self {
        Self {
            status: 400,
            body: json!({"ok": false, "error_code": 400,
                "description": "Bad Request: group chat was upgraded to a supergroup chat",
                "parameters": {"migrate_to_chat_id": to}}),
        }
    }

    fn error(code: u16, description: &str) -> Self {
        Self {
            status: code,
            body: json!({"ok": false, "error_code": code, "description": description}),
        }
    }
}

impl IntoResponse for Answer {
    fn into_response(self) -> Response {
        crate::skeleton::http::Answer::json(self.status, self.body).into_response()
    }
}

/// What the handlers and [`FakeTelegram`] share.
pub(crate) type Shared = crate::skeleton::Shared<Telegram>;

/// Calls a [`FakeTelegram::watch`]er may fall behind by.
pub const WATCH_BACKLOG: usize = 1 << 16;

/// Largest multipart body read: axum's default limit, which the fake has always had (so
/// a file over 2 MiB is refused as an invalid multipart body before the 10 MB / 50 MB
/// rules can speak).
const MAX_MULTIPART: usize = 2 << 20;

/// The running fake. Dropping it stops the server.
pub type FakeTelegram = Fake<Telegram>;

impl Fake<Telegram> {
    /// Starts a fake for bot `@ThisBot` with token [`TOKEN`].
    pub async fn start() -> std::io::Result<Self> {
        Self::start_with(TOKEN, BOT_USERNAME).await
    }

    /// Starts a fake with another token and username.
    pub async fn start_with(token: &str, username: &str) -> std::io::Result<Self> {
        let state = Telegram {
            token: token.to_owned(),
            bot: json!({"id": BOT_ID, "is_bot": true, "first_name": "Fake Bridge", "username": username}),
            tap: tokio::sync::broadcast::channel(WATCH_BACKLOG).0,
            pending: Vec::new(),
            confirmed: Vec::new(),
            next_update_id: 500_000_000,
            next_message_id: 1000,
            ignore_offset_once: false,
            polls: 0,
            webhook: None,
            hosted_webhooks: false,
            migrated: BTreeMap::new(),
            failures: Script::default(),
            messages: Vec::new(),
            files: files::Files::default(),
            menus: BTreeMap::new(),
            reactions: BTreeMap::new(),
            forum_topics: Default::default(),
            flood: flood::Flood::default(),
        };
        Fake::serve(state, server::handle, MAX_MULTIPART).await
    }

    /// The base URL to configure as `api_url`.
    pub fn api_url(&self) -> String {
        format!("http://{}", self.addr())
    }

    /// Queues a user's message as an update; returns its ids.
    pub fn inject(&self, incoming: Incoming) -> Injected {
        let injected = self.make_update(incoming);
        self.push_update(injected.update.clone());
        injected
    }

    /// Builds the update for a user's message (assigning ids) without queueing it, e.g.
    /// to post it to a webhook.
    pub fn make_update(&self, incoming: Incoming) -> Injected {
        let mut inner = self.shared.lock();
        inner.next_update_id += 1;
        let update_id = inner.next_update_id;
        let message_id = match incoming.message_id {
            Some(id) => id,
            None => inner.next_message_id(),
        };
        let chat_id = incoming.chat.get("id").and_then(Value::as_i64).unwrap_or(0);
        let replied = incoming.reply_to.map(|id| {
            let mut r = json!({"message_id": id, "date": inner.now_unix(), "chat": incoming.chat});
            if let Some(m) = inner
                .messages
                .iter()
                .find(|m| m.chat_id == chat_id && m.message_id == id)
            {
                r["from"] = inner.bot.clone();
                r["text"] = json!(m.text);
                if !m.entities.is_empty() {
                    r["entities"] = methods::entities_json(&m.entities);
                }
            }
            r
        });
        if let Some(topic) = incoming.forum_topic {
            inner.forum_topics.insert((chat_id, topic));
        }
        let message = incoming.to_message(message_id, inner.now_unix(), replied);
        Injected {
            update_id,
            message_id,
            update: json!({"update_id": update_id, "message": message}),
        }
    }

    /// Queues a raw update (its `update_id` is kept).
    pub fn push_update(&self, update: Value) {
        let mut inner = self.shared.lock();
        inner.pending.push(update);
        inner.pending.sort_by_key(update_id);
        drop(inner);
        self.shared.notify();
    }

    /// Redelivers every confirmed update on the next `getUpdates`, whatever its offset, as
    /// if Telegram had lost the acknowledgement.
    pub fn forget_offset(&self) {
        let mut inner = self.shared.lock();
        let confirmed = std::mem::take(&mut inner.confirmed);
        inner.pending.extend(confirmed);
        inner.pending.sort_by_key(update_id);
        inner.ignore_offset_once = true;
        drop(inner);
        self.shared.notify();
    }

    /// Updates queued and not yet confirmed.
    pub fn pending_updates(&self) -> Vec<Value> {
        self.shared.lock().pending.clone()
    }

    /// Scripts a failure of `method`.
    pub fn fail(&self, method: &str, trigger: Trigger, failure: Failure) {
        let when = match trigger {
            Trigger::Nth(n) => When::Nth(n),
            Trigger::TextEquals(text) => When::TextEquals(text),
            Trigger::Always => When::Always,
            Trigger::Next => When::Next,
        };
        self.with_state(|t| t.failures.add(method, when, failure));
    }

    /// Ends every [`Trigger::Always`] failure: the outage is over.
    pub fn heal(&self) {
        self.with_state(|t| t.failures.heal());
    }

    /// Scripts a failure of the Nth `editMessageText` (1-based).
    pub fn fail_nth_edit(&self, n: usize, failure: Failure) {
        self.fail("editMessageText", Trigger::Nth(n), failure);
    }

    /// The bot's messages in `chat_id`, oldest first, as they look now (visible text and
    /// entities).
    pub fn bot_messages(&self, chat_id: i64) -> Vec<BotMessage> {
        self.shared
            .lock()
            .messages
            .iter()
            .filter(|m| m.chat_id == chat_id)
            .cloned()
            .collect()
    }

    /// The bot's reactions in `chat_id` as they are now (`setMessageReaction`): each
    /// message it reacted to, in id order, with its emoji (none once removed).
    pub fn reactions(&self, chat_id: i64) -> Vec<(i64, Vec<String>)> {
        self.shared
            .lock()
            .reactions
            .range((chat_id, i64::MIN)..=(chat_id, i64::MAX))
            .map(|((_, message), emoji)| (*message, emoji.clone()))
            .collect()
    }

    /// The menu registered for `language` (`None` = the default menu).
    pub fn commands(&self, language: Option<&str>) -> Option<Vec<(String, String)>> {
        self.shared
            .lock()
            .menus
            .get(&language.map(str::to_owned))
            .cloned()
    }

    /// Makes `setWebhook` check the URL as the hosted Bot API (api.telegram.org) does: an
    /// HTTPS URL on port 80, 88, 443 or 8443, refused with Telegram's 400 otherwise. By
    /// default the fake is a local Bot API server, which delivers anywhere.
    pub fn require_hosted_webhooks(&self) {
        self.with_state(|t| t.hosted_webhooks = true);
    }

    /// Upgrades group `chat_id` to a supergroup: from now on every call naming the old id
    /// is refused with the new one in `parameters.migrate_to_chat_id`, as Telegram does.
    /// Returns the supergroup's id.
    pub fn migrate_group(&self, chat_id: i64) -> i64 {
        // A supergroup's id is -100 followed by its own number.
        let to = -1_000_000_000_000 - chat_id.abs();
        self.with_state(|t| t.migrated.insert(chat_id, to));
        to
    }

    /// The registered webhook URL and secret token.
    pub fn webhook(&self) -> Option<(String, Option<String>)> {
        self.shared.lock().webhook.clone()
    }

    /// Posts `update` to the registered webhook as Telegram would, with `secret` in
    /// `X-Telegram-Bot-Api-Secret-Token` (`None` = no header). Returns the HTTP status.
    pub async fn deliver_webhook(
        &self,
        update: &Value,
        secret: Option<&str>,
    ) -> Result<u16, String> {
        let Some((url, _)) = self.webhook() else {
            return Err("no webhook is registered".into());
        };
        let mut request = reqwest::Client::new().post(url).json(update);
        if let Some(secret) = secret {
            request = request.header("X-Telegram-Bot-Api-Secret-Token", secret);
        }
        request
            .send()
            .await
            .map(|r| r.status().as_u16())
            .map_err(|e| e.without_url().to_string())
    }

    /// Every call from now on, as it is recorded (a long poll when it starts, with status
    /// 0; any other call once answered), without copying the whole log: for benchmarks
    /// that watch thousands of calls. A watcher more than [`WATCH_BACKLOG`] calls behind
    /// gets `Lagged`.
    pub fn watch(&self) -> tokio::sync::broadcast::Receiver<Call> {
        self.with_state(|t| t.tap.subscribe())
    }
}
