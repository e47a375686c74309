//! A fake Discord (REST v10 and the gateway, spec platforms §7.5) for the
//! `im-bridge-discord` adapter's tests.
//!
//! [`FakeDiscord::start`] binds `127.0.0.1:0`; configure [`FakeDiscord::api_url`] as
//! `api_url` (REST under `{api_url}/api/v10`). It serves:
//!
//! - `GET /gateway` and `GET /gateway/bot` → `ws://127.0.0.1:P/gateway` (the latter with
//!   bot auth, `shards` and `session_start_limit`), and the gateway WebSocket there:
//!   HELLO, IDENTIFY (token and [`INTENTS`] checked) → READY (`session_id`,
//!   `resume_gateway_url` = `ws://127.0.0.1:P/resume`, the bot user) + GUILD_CREATE,
//!   heartbeats ACKed, RESUME replaying what the client missed then RESUMED (an event
//!   posted while no session is current reaches none: a new session gets only what
//!   happens after its READY, as on Discord; the REST history has it), scripted
//!   op 7, op 9, close codes (4004) and dropped sockets, for a while every new
//!   connection dropped at once ([`FakeDiscord::drop_connections_for`]), and silent
//!   connections ([`FakeDiscord::go_silent`]: no ACK, no dispatch, a zombie);
//! - `GET /users/@me`, `GET /channels/{id}` (a thread, a DM, or a guild text channel a
//!   message was posted in or a test added, [`FakeDiscord::add_text_channel`]; every
//!   route under `/channels/{id}` answers 404 with code 10003 for a channel the fake does
//!   not know, as Discord does), `GET /channels/{id}/messages` (the channel's
//!   history: users' pushed messages and the bot's, `after` / `before` and `limit` 1–100,
//!   newest first, no `guild_id`, as Discord answers); messages create (JSON or multipart
//!   `payload_json` + `files[n]`) and edit with the [`MAX_CONTENT`] limit, recording
//!   `allowed_mentions`; threads from a message (a message posted in a guild text channel
//!   only: 50024 in a DM or a thread, 10008 for a message not there); typing; reactions;
//! - scripted failures per route ([`FakeDiscord::fail_next`]): 429 with `retry_after` and
//!   the `X-RateLimit-*` headers (calls before the wait is over are refused again and
//!   counted, [`FakeDiscord::early_calls`]), and JSON errors;
//! - `GET /attachments/{name}`: CDN files for attachment events.
//!
//! The fake never panics on what the bridge sends: a bad request gets Discord's error
//! body, a bad frame is counted ([`FakeDiscord::bad_frames`]).
//!
//! Children: `events` builds MESSAGE_CREATE events; `gateway` is the WebSocket and its
//! sessions; `rest` the HTTP edge; `records` what the fake records.

mod events;
mod gateway;
mod records;
mod rest;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

use crate::skeleton::http::{Script, When};
use crate::skeleton::{Fake, Gateway, Platform, Recorded};

pub use crate::skeleton::gateway::{DEFAULT_HEARTBEAT_MS, MAX_LOG};
pub use crate::wait::WaitTimeout;
pub use events::Event;
pub use gateway::{INTENTS, MESSAGE_CONTENT};
pub use records::{
    Call, Connection, Dispatched, Edit, Failure, Heartbeat, Identify, Pushed, Reaction, Resume,
    Sent, Thread, Upload,
};
pub use rest::MAX_CONTENT;

/// The bot token the fake accepts (`Authorization: Bot <TOKEN>`).
pub const TOKEN: &str = "fake.discord.token";
/// The bot's user id (READY's `user.id`, what `<@id>` mentions carry).
pub const BOT_ID: &str = "1300000000000000001";
/// The bot's username.
pub const BOT_USERNAME: &str = "fake-bridge";
/// The guild of the builders' guild messages (and READY / GUILD_CREATE).
pub const GUILD_ID: &str = "1300000000000000100";
/// How long an enforced `nonce` names its message: Discord checks "the past few minutes";
/// the fake keeps one, the least that reading allows.
pub const NONCE_WINDOW: std::time::Duration = std::time::Duration::from_secs(60);

/// Discord's JSON error codes the fake answers.
pub mod code {
    /// Not found (general).
    pub const NOT_FOUND: i64 = 0;
    /// 401: Unauthorized.
    pub const UNAUTHORIZED: i64 = 40001;
    /// Unknown Message.
    pub const UNKNOWN_MESSAGE: i64 = 10008;
    /// Unknown Channel.
    pub const UNKNOWN_CHANNEL: i64 = 10003;
    /// Missing Permissions.
    pub const MISSING_PERMISSIONS: i64 = 50013;
    /// Cannot send an empty message.
    pub const EMPTY_MESSAGE: i64 = 50006;
    /// Invalid Form Body (e.g. content over 2000 characters).
    pub const INVALID_FORM_BODY: i64 = 50035;
    /// A thread has already been created for this message.
    pub const THREAD_EXISTS: i64 = 160004;
    /// Cannot execute action on this channel type (thread in a DM). The spec's fallback.
    pub const WRONG_CHANNEL_TYPE: i64 = 50024;
}

/// The kinds of channel the fake tells apart (Discord's channel types 0, 1 and 11).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ChannelKind {
    /// GUILD_TEXT (0): threads start here.
    GuildText,
    /// DM (1).
    Dm,
    /// PUBLIC_THREAD (11).
    Thread,
}

/// The fake Discord's state: what it recorded, its scripts, the gateway.
pub struct Discord {
    gateway_url: String,
    failures: Script<Failure>,
    limited_until: HashMap<&'static str, Instant>,
    early_calls: usize,
    sent: Vec<Sent>,
    edits: Vec<Edit>,
    threads: Vec<Thread>,
    typing: Vec<String>,
    reactions: Vec<Reaction>,
    dm_channels: Vec<String>,
    /// Guild text channels a test made known before anything was posted in them.
    text_channels: Vec<String>,
    files: HashMap<String, (Vec<u8>, String)>,
    gw: Gateway<Discord>,
    /// Whether IDENTIFY may ask for MESSAGE_CONTENT.
    message_content_enabled: bool,
    /// The bot token was reset ([`FakeDiscord::revoke_token`]): refused everywhere.
    token_revoked: bool,
    /// Every message posted, users' (pushed) and the bot's, oldest first, as REST returns
    /// them (no `guild_id`): what `GET /channels/{id}/messages` reads. Bounded by what a
    /// test pushes and the bot sends.
    history: Vec<Value>,
    /// Connections gone silent ([`FakeDiscord::go_silent`]): nothing reaches them.
    silent: Vec<u64>,
    /// When each connection last heartbeat (or got its HELLO), by the wall clock: what
    /// the heartbeat watch reads. One entry per connection a test opens.
    last_beat: HashMap<u64, std::time::Instant>,
}

impl Discord {
    fn new() -> Self {
        Self {
            gateway_url: String::new(),
            failures: Script::default(),
            limited_until: HashMap::new(),
            early_calls: 0,
            sent: Vec::new(),
            edits: Vec::new(),
            threads: Vec::new(),
            typing: Vec::new(),
            reactions: Vec::new(),
            dm_channels: Vec::new(),
            text_channels: Vec::new(),
            files: HashMap::new(),
            gw: Gateway::default(),
            message_content_enabled: true,
            token_revoked: false,
            history: Vec::new(),
            silent: Vec::new(),
            last_beat: HashMap::new(),
        }
    }

    /// A new message id: the builders' counter, so ids grow with time as snowflakes do.
    fn next_id(&mut self) -> String {
        events::next_id()
    }

    /// Keeps `message` (a message object) in its channel's history, as REST returns it:
    /// without the gateway's `guild_id`.
    fn remember(&mut self, mut message: Value) {
        if let Some(fields) = message.as_object_mut() {
            fields.remove("guild_id");
        }
        self.history.push(message);
    }

    /// What channel `id` is: a thread, a DM, a guild text channel (one a test added or a
    /// message was posted in), or `None` when the fake knows no such channel.
    fn channel_kind(&self, id: &str) -> Option<ChannelKind> {
        if self.threads.iter().any(|t| t.id == id) {
            Some(ChannelKind::Thread)
        } else if self.dm_channels.iter().any(|c| c == id) {
            Some(ChannelKind::Dm)
        } else if self.text_channels.iter().any(|c| c == id)
            || self.history.iter().any(|m| m["channel_id"] == id)
        {
            Some(ChannelKind::GuildText)
        } else {
            None
        }
    }

    /// Whether message `message` was posted in channel `channel`.
    fn has_message(&self, channel: &str, message: &str) -> bool {
        self.history
            .iter()
            .any(|m| m["channel_id"] == channel && m["id"] == message)
    }

    /// A channel object: a known thread (type 11), a DM (type 1), else a guild text
    /// channel (type 0); `GET /channels/{id}` asks it only of a channel the fake knows
    /// ([`Discord::channel_kind`]).
    fn channel_object(&self, id: &str) -> Value {
        if let Some(t) = self.threads.iter().find(|t| t.id == id) {
            return json!({"id": t.id, "type": 11, "guild_id": GUILD_ID, "parent_id": t.parent_id,
                          "owner_id": t.owner_id, "name": t.name, "thread_metadata": {"archived": false,
                          "auto_archive_duration": 1440, "locked": false,
                          "archive_timestamp": "2026-01-01T00:00:00.000000+00:00"}});
        }
        if self.dm_channels.iter().any(|c| c == id) {
            return json!({"id": id, "type": 1, "recipients": []});
        }
        json!({"id": id, "type": 0, "guild_id": GUILD_ID, "name": format!("channel-{id}"),
               "position": 0, "permission_overwrites": [], "nsfw": false})
    }
}

impl Platform for Discord {
    type Call = Call;

    /// The calls, then the IDENTIFYs and RESUMEs.
    fn seen(&self, calls: &[Call]) -> Vec<String> {
        let calls = calls.iter().map(Recorded::line);
        let identifies = self.gw.identifies.iter().map(|i| format!("IDENTIFY {i:?}"));
        let resumes = self.gw.resumes.iter().map(|r| format!("RESUME {r:?}"));
        calls.chain(identifies).chain(resumes).collect()
    }
}

/// What the handlers and [`FakeDiscord`] share.
pub(crate) type Shared = crate::skeleton::Shared<Discord>;

/// The running fake. Dropping it stops the server and closes every connection.
pub type FakeDiscord = Fake<Discord>;

impl Fake<Discord> {
    /// Starts a fake for bot [`TOKEN`] on `127.0.0.1:0`.
    pub async fn start() -> std::io::Result<Self> {
        let fake = Fake::serve(Discord::new(), rest::handle, rest::MAX_BODY).await?;
        let url = format!("ws://{}/gateway", fake.addr());
        fake.with_state(|d| d.gateway_url = url);
        Ok(fake)
    }

    /// The base URL to configure as `api_url`: `http://127.0.0.1:P`.
    pub fn api_url(&self) -> String {
        format!("http://{}", self.addr())
    }

    /// What `GET /gateway/bot` answers as `url`: `ws://127.0.0.1:P/gateway`.
    pub fn gateway_url(&self) -> String {
        self.with_state(|d| d.gateway_url.clone())
    }

    /// Makes `GET /gateway[/bot]` answer `url` instead.
    pub fn set_gateway_url(&self, url: &str) {
        self.with_state(|d| d.gateway_url = url.to_owned());
    }

    /// Fails the next call of `route` (a [`Call::route`] name) with `failure`; several
    /// queue in order.
    pub fn fail_next(&self, route: &str, failure: Failure) {
        self.with_state(|d| d.failures.add(route, When::Next, failure));
    }

    /// Calls refused because they came before a scripted 429's `retry_after` was over.
    pub fn early_calls(&self) -> usize {
        self.with_state(|d| d.early_calls)
    }

    /// Serves `bytes` at `/attachments/{name}`; returns its URL.
    pub fn put_file(&self, name: &str, bytes: Vec<u8>, content_type: &str) -> String {
        self.with_state(|d| {
            let file = (bytes, content_type.to_owned());
            d.files.insert(name.to_owned(), file)
        });
        format!("http://{}/attachments/{name}", self.addr())
    }

    /// Makes `id` a thread in `parent` that already exists, started by the bot (before a
    /// restart, say): `GET /channels/{id}` says so.
    pub fn add_thread(&self, id: &str, parent: &str) {
        self.add_thread_of(id, parent, BOT_ID);
    }

    /// Makes `id` a thread in `parent` that `owner` started (a user's thread, a forum post).
    pub fn add_thread_of(&self, id: &str, parent: &str, owner: &str) {
        let thread = Thread {
            id: id.to_owned(),
            parent_id: parent.to_owned(),
            message_id: String::new(),
            name: format!("thread-{id}"),
            owner_id: owner.to_owned(),
        };
        self.with_state(|d| d.threads.push(thread));
    }

    /// Makes `id` a DM channel the fake knows: `GET /channels/{id}` answers it as one.
    pub fn add_dm_channel(&self, id: &str) {
        self.with_state(|d| d.dm_channels.push(id.to_owned()));
    }

    /// Makes `id` a guild text channel the bot sees, before anything was posted in it:
    /// every route of a channel the fake does not know answers 10003, as Discord does.
    pub fn add_text_channel(&self, id: &str) {
        self.with_state(|d| d.text_channels.push(id.to_owned()));
    }

    /// The bot token is reset (in the Developer Portal) from now on, as Discord does it:
    /// every open connection is closed with 4004, and every later IDENTIFY or RESUME is
    /// closed so, every REST call answered 401. (`close_with(4004)` closes only the
    /// connections open now; a client that reconnected instead of stopping would then go
    /// on with a token Discord would refuse.)
    pub fn revoke_token(&self) {
        self.with_state(|d| {
            d.token_revoked = true;
            d.gw.close(4004);
        });
    }

    /// Refuses IDENTIFYs asking for MESSAGE_CONTENT with 4014, as Discord does when the
    /// intent is not enabled in the Developer Portal.
    pub fn disable_message_content(&self) {
        self.with_state(|d| d.message_content_enabled = false);
    }

    /// Posts `event`: kept in its channel's history, and dispatched as a MESSAGE_CREATE in
    /// the current session; while none is current (before the first READY, after a
    /// session ended) in none, not even a later one (`Pushed::seq` is `None`): only a
    /// read of the history finds it.
    pub fn push(&self, event: &Event) -> Pushed {
        self.with_state(|d| {
            let channel = event.channel_id();
            if event.guild_id().is_none() && !d.dm_channels.iter().any(|c| c == channel) {
                d.dm_channels.push(channel.to_owned());
            }
            d.remember(event.data());
        });
        gateway::push(&self.shared, event.payload())
    }

    /// The open connections go silent, as a TCP connection a NAT or a paused VM dropped
    /// without a word: heartbeats are no longer ACKed and dispatches no longer reach them
    /// (they are still logged in the session). Connections opened later are not silent.
    pub fn go_silent(&self) {
        self.with_state(|d| {
            let open = d.gw.sockets.open_ids();
            d.silent.extend(open);
        });
    }

    /// Dispatches any event: `t` with data `d`.
    pub fn push_raw(&self, t: &str, d: Value) -> Pushed {
        gateway::push(&self.shared, json!({"op": 0, "t": t, "d": d}))
    }

    /// Messages the bot created, in order (content after edits).
    pub fn sent(&self) -> Vec<Sent> {
        self.with_state(|d| d.sent.clone())
    }

    /// Messages the bot created in `channel_id`.
    pub fn sent_to(&self, channel_id: &str) -> Vec<Sent> {
        self.sent()
            .into_iter()
            .filter(|s| s.channel_id == channel_id)
            .collect()
    }

    /// Accepted edits, in order.
    pub fn edits(&self) -> Vec<Edit> {
        self.with_state(|d| d.edits.clone())
    }

    /// Threads started.
    pub fn threads(&self) -> Vec<Thread> {
        self.with_state(|d| d.threads.clone())
    }

    /// Channels a typing indicator was sent to, one entry per call.
    pub fn typing(&self) -> Vec<String> {
        self.with_state(|d| d.typing.clone())
    }

    /// Reactions the bot added.
    pub fn reactions(&self) -> Vec<Reaction> {
        self.with_state(|d| d.reactions.clone())
    }

    /// Waits for `n` accepted IDENTIFYs (READYs sent).
    pub async fn wait_ready(&self, n: usize, deadline: Duration) -> Result<(), WaitTimeout> {
        self.wait_until(&format!("{n} READY"), deadline, |f| {
            f.identifies().iter().filter(|i| i.accepted).count() >= n
        })
        .await
    }

    /// Waits for `n` messages the bot created.
    pub async fn wait_sent(&self, n: usize, deadline: Duration) -> Result<Vec<Sent>, WaitTimeout> {
        self.wait_until(&format!("{n} sent messages"), deadline, |f| {
            f.sent().len() >= n
        })
        .await?;
        Ok(self.sent())
    }
}
