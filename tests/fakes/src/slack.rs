//! A fake Slack (spec platforms §8) for the `im-bridge-slack` adapter's tests: the Web API,
//! Socket Mode, the file hosts, and the signed HTTP requests Slack sends an app that uses
//! Request URLs.
//!
//! [`FakeSlack::start`] binds `127.0.0.1:0`; [`FakeSlack::api_url`] is the base URL to
//! configure as the adapter's `api_url` (methods under `{api_url}/api/<method>`), with
//! [`BOT_TOKEN`] and [`APP_TOKEN`]. It serves:
//!
//! - the Web API (`POST /api/<method>`, JSON or form bodies, `Authorization: Bearer`):
//!   `auth.test`, `apps.connections.open` (the `xapp-` token only), `chat.postMessage`,
//!   `chat.update`, `reactions.add`, `files.getUploadURLExternal` and
//!   `files.completeUploadExternal`, `chat.startStream` / `appendStream` / `stopStream`
//!   (which [`FakeSlack::set_streaming`] can switch off). Answers are Slack's: HTTP 200
//!   with `{"ok": true, …}` or `{"ok": false, "error": "…"}`, 429 `ratelimited` with
//!   `Retry-After`, 404 `unknown_method`;
//! - the upload URL `POST /upload/v1/{file_id}` (raw bytes or multipart) and the file host
//!   `GET /files-pri/{team}-{file_id}/[download/]{name}` serving what
//!   [`FakeSlack::put_file`] holds, only to the bot token;
//! - Socket Mode: `GET /link/?ticket=…` (one connection per ticket, at most ten open),
//!   `hello` first, envelopes pushed in turn across connections, acks recorded by
//!   `envelope_id`, un-acked `events_api` envelopes delivered again after the ack window
//!   with `retry_attempt` counting up, `disconnect` frames and server-side closes.
//!
//! It enforces Slack's rules (text limits, known channels and threads, the edit pace, one
//! reaction per name) and never panics on what the bridge sends: a bad request gets
//! Slack's error, a bad frame is counted ([`FakeSlack::bad_frames`]) and kept
//! ([`FakeSlack::protocol_errors`]). What is documented and what is the fake's choice is
//! said where each rule is written, and in the [`code`] list.
//!
//! Children: `records` holds what the fake records and answers with; `events` builds
//! the payloads Slack sends (events, slash commands, the `event_callback` wrapper);
//! `signing` signs HTTP requests as Slack does; `socket_mode` is the WebSocket side;
//! `rest` the HTTP edge (routing, tokens, scripted failures, recording); `chat` the
//! messages, edits, reactions and streams; `files` uploads and the file host.

mod chat;
mod commands;
mod events;
mod files;
mod records;
mod rest;
mod signing;
mod socket_mode;

use std::collections::HashMap;
use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;

use crate::skeleton::http::Script;
use crate::skeleton::{Fake, Platform};

pub use crate::wait::WaitTimeout;

/// A response URL's secret part: unguessable enough for a fake.
fn rand_secret() -> u64 {
    use std::hash::{BuildHasher, RandomState};
    RandomState::new().hash_one(std::time::SystemTime::now())
}
pub use commands::{RESPONSE_URL_LIFETIME, RESPONSES_PER_URL};
pub use events::{Event, File, SlashCommand, event_callback, next_ts};
pub use records::{
    Ack, Call, Connection, Delivery, Edit, Failure, Message, Pushed, Reaction, Response, Stream,
    Trigger, Upload,
};
pub use signing::{HttpRequest, SIGNATURE_HEADER, SignedRequest, TIMESTAMP_HEADER, signature};

/// The bot token (`xoxb-`) every Web API method but `apps.connections.open` takes.
pub const BOT_TOKEN: &str = "xoxb-0000000001-0000000000001-FakeBotTokenForTests00";
/// The app-level token (`xapp-`, scope `connections:write`) `apps.connections.open` takes.
pub const APP_TOKEN: &str = "xapp-1-A0FAKEAPP01-0000000000001-fakeapptokenfortests";
/// The signing secret of the app's HTTP requests ([`HttpRequest::signed`]).
pub const SIGNING_SECRET: &str = "0fake1signing2secret3for4tests56";
/// The deprecated verification token Slack still puts in payloads.
pub const VERIFICATION_TOKEN: &str = "FakeVerificationToken000";
/// The workspace.
pub const TEAM_ID: &str = "T0FAKETEAM";
/// The workspace's domain (`https://fake-team.slack.com/`).
pub const TEAM_DOMAIN: &str = "fake-team";
/// The app.
pub const APP_ID: &str = "A0FAKEAPP01";
/// The bot's user id: what `<@…>` mentions of it carry, `auth.test`'s `user_id`.
pub const BOT_USER_ID: &str = "U0FAKEBOT1";
/// The bot's `bot_id` (on its own messages, `auth.test`'s `bot_id`).
pub const BOT_ID: &str = "B0FAKEBOT1";
/// The bot user's name.
pub const BOT_NAME: &str = "deerflow";
/// The most characters of a message's `text` (documented: Slack truncates beyond it; the
/// fake refuses with `msg_too_long` unless [`FakeSlack::set_truncate_long_text`]).
pub const MAX_TEXT_CHARS: usize = 40_000;
/// The most bytes (UTF-8) of the `text` `chat.update` takes: over it the edit is refused
/// with `msg_too_long`, never truncated. Slack's reference says "cannot exceed 4,000
/// characters"; calls to the live API refuse at 4,001 bytes of multi-byte text
/// (openclaw/openclaw#115027), so the fake counts bytes, the stricter reading.
pub const MAX_UPDATE_BYTES: usize = 4_000;
/// The most characters of a stream's `markdown_text` per call (documented).
pub const MAX_MARKDOWN_CHARS: usize = 12_000;
/// How long Slack waits for an envelope's ack before it delivers it again (documented:
/// "within 3 seconds").
pub const ACK_WINDOW: Duration = Duration::from_secs(3);
/// How many times an un-acked `events_api` envelope is delivered again (Slack retries an
/// event up to three times).
pub const MAX_RETRIES: u32 = 3;
/// The most Socket Mode connections open at once (documented: "up to 10").
pub const MAX_CONNECTIONS: usize = 10;
/// The default pace of edits to one message (the fake's: Slack lists `chat.update` as Tier
/// 3, about 50 a minute, and refuses bursts; one edit a second per message is what the
/// bridge promises).
pub const EDIT_PACE: Duration = Duration::from_secs(1);
/// `reactions.add` is Tier 3: "50+ per minute" per workspace
/// (<https://api.slack.com/apis/rate-limits>). The fake takes 50 calls in any 60 s and
/// answers 429 `ratelimited` beyond them, until the oldest leaves the window.
pub const REACTION_LIMIT: (usize, Duration) = (50, Duration::from_secs(60));

/// The `error` strings the fake answers. Those marked *documented* are in Slack's method
/// or Socket Mode documentation; the others are Slack's names seen in the field, used
/// where the documentation says nothing.
pub mod code {
    /// No token given. *documented*
    pub const NOT_AUTHED: &str = "not_authed";
    /// A token the fake does not know. *documented*
    pub const INVALID_AUTH: &str = "invalid_auth";
    /// The bot token where the app token is needed, or the other way. *documented*
    pub const NOT_ALLOWED_TOKEN_TYPE: &str = "not_allowed_token_type";
    /// A method Slack does not have (HTTP 404, with `req_method`).
    pub const UNKNOWN_METHOD: &str = "unknown_method";
    /// A JSON body that does not parse. *documented* (standard error)
    pub const INVALID_JSON: &str = "invalid_json";
    /// A body that cannot be read. *documented* (standard error)
    pub const INVALID_FORM_DATA: &str = "invalid_form_data";
    /// A required argument missing or of the wrong type. *documented* (standard error)
    pub const INVALID_ARGUMENTS: &str = "invalid_arguments";
    /// Too many calls (HTTP 429 with `Retry-After`). *documented*
    pub const RATELIMITED: &str = "ratelimited";
    /// A channel the bot does not know. *documented*
    pub const CHANNEL_NOT_FOUND: &str = "channel_not_found";
    /// No `text`, `blocks` or `attachments`. *documented*
    pub const NO_TEXT: &str = "no_text";
    /// A `text` over [`MAX_TEXT_CHARS`](super::MAX_TEXT_CHARS), or a `markdown_text` over
    /// [`MAX_MARKDOWN_CHARS`](super::MAX_MARKDOWN_CHARS). *documented*
    pub const MSG_TOO_LONG: &str = "msg_too_long";
    /// A `thread_ts` that names no root message of the channel.
    pub const THREAD_NOT_FOUND: &str = "thread_not_found";
    /// A `thread_ts` that is no timestamp.
    pub const INVALID_THREAD_TS: &str = "invalid_thread_ts";
    /// An edit or reaction of a message the channel does not have. *documented*
    pub const MESSAGE_NOT_FOUND: &str = "message_not_found";
    /// An edit of a message the bot did not write. *documented*
    pub const CANT_UPDATE_MESSAGE: &str = "cant_update_message";
    /// The bot already reacted with that name. *documented*
    pub const ALREADY_REACTED: &str = "already_reacted";
    /// A reaction name that is empty or written with colons. *documented*
    pub const INVALID_NAME: &str = "invalid_name";
    /// `reactions.add` without `channel` and `timestamp`. *documented*
    pub const NO_ITEM_SPECIFIED: &str = "no_item_specified";
    /// A `length` of 0 in `files.getUploadURLExternal`. *documented*
    pub const MISSING_ARGUMENT: &str = "missing_argument";
    /// A file id never handed out, not uploaded yet, or already completed.
    pub const FILE_NOT_FOUND: &str = "file_not_found";
    /// An append or stop of a stream already stopped.
    pub const NOT_STREAMING: &str = "message_not_in_streaming_state";
    /// A stream outside a DM without `recipient_user_id`.
    pub const MISSING_RECIPIENT_USER_ID: &str = "missing_recipient_user_id";
    /// A stream outside a DM without `recipient_team_id`.
    pub const MISSING_RECIPIENT_TEAM_ID: &str = "missing_recipient_team_id";
}

/// A file a user shared, served at its `url_private` to the bot token.
struct HostedFile {
    name: String,
    mimetype: String,
    bytes: Vec<u8>,
}

/// The fake Slack's state: the workspace it plays, what it recorded, its rules' settings.
pub struct Slack {
    failures: Script<Failure>,
    /// Route -> when a scripted 429's `Retry-After` is over (calls before are refused).
    limited_until: HashMap<&'static str, Instant>,
    early_calls: usize,
    edit_pace: Option<Duration>,
    /// (channel, ts) -> when its last edit was accepted.
    last_edit: HashMap<(String, String), Instant>,
    /// `reactions.add` calls taken in any window of `.1` at most (`None`: no limit).
    reaction_limit: Option<(usize, Duration)>,
    /// When each `reactions.add` call within the window came, oldest first.
    reaction_calls: std::collections::VecDeque<Instant>,
    rate_refusals: usize,
    streaming: bool,
    truncate_long_text: bool,
    /// Where the file host moves files ([`FakeSlack::move_files_to`]).
    files_moved_to: Option<String>,
    /// Channel id -> its type (`im`, `channel`, `group`, `mpim`).
    channels: HashMap<String, String>,
    /// Every message the fake knows, users' and the bot's, oldest first.
    messages: Vec<Message>,
    reactions: Vec<Reaction>,
    uploads: Vec<Upload>,
    pending: HashMap<String, files::Pending>,
    /// File id -> a file users shared.
    hosted: HashMap<String, HostedFile>,
    socket: socket_mode::State,
    /// `{team}/{n}/{secret}` -> a slash command's `response_url` handed out.
    responses_issued: HashMap<String, commands::Issued>,
    /// Every post to a `response_url` taken, oldest first.
    responses: Vec<Response>,
    next_id: u64,
}

impl Slack {
    fn new() -> Self {
        Self {
            failures: Script::default(),
            limited_until: HashMap::new(),
            early_calls: 0,
            edit_pace: Some(EDIT_PACE),
            last_edit: HashMap::new(),
            reaction_limit: Some(REACTION_LIMIT),
            reaction_calls: std::collections::VecDeque::new(),
            rate_refusals: 0,
            streaming: true,
            truncate_long_text: false,
            files_moved_to: None,
            channels: HashMap::new(),
            messages: Vec::new(),
            reactions: Vec::new(),
            uploads: Vec::new(),
            pending: HashMap::new(),
            hosted: HashMap::new(),
            socket: socket_mode::State::default(),
            responses_issued: HashMap::new(),
            responses: Vec::new(),
            next_id: 0,
        }
    }

    fn next_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// Makes `channel` known, of `kind` (from the id's first letter when `None`).
    fn know_channel(&mut self, channel: &str, kind: Option<&str>) {
        let kind = kind.map_or_else(|| events::channel_kind(channel), str::to_owned);
        self.channels.insert(channel.to_owned(), kind);
    }

    /// Records the message of a pushed event (its channel, user, ts and thread).
    fn know_event(&mut self, event: &Value) {
        let text_of = |key: &str| event.get(key).and_then(Value::as_str).map(str::to_owned);
        let (Some(channel), Some(ts)) = (text_of("channel"), text_of("ts")) else {
            return;
        };
        self.know_channel(&channel, event.get("channel_type").and_then(Value::as_str));
        if self.message(&channel, &ts).is_none() {
            let user = text_of("user").unwrap_or_default();
            let mut message = Message::new(&channel, &ts, &user, false);
            message.thread_ts = text_of("thread_ts");
            message.text = text_of("text").unwrap_or_default();
            self.messages.push(message);
        }
    }

    fn message(&self, channel: &str, ts: &str) -> Option<&Message> {
        self.messages
            .iter()
            .find(|m| m.channel == channel && m.ts == ts)
    }
}

impl Platform for Slack {
    type Call = Call;
}

/// What the handlers and [`FakeSlack`] share.
pub(crate) type Shared = crate::skeleton::Shared<Slack>;

/// The running fake. Dropping it stops the server and closes every connection.
pub type FakeSlack = Fake<Slack>;

impl Fake<Slack> {
    /// Starts a fake workspace [`TEAM_ID`] with the app [`APP_ID`] on `127.0.0.1:0`.
    pub async fn start() -> std::io::Result<Self> {
        Fake::serve(Slack::new(), rest::handle, rest::MAX_BODY).await
    }

    /// The base URL to configure as `api_url`: `http://127.0.0.1:P` (methods under
    /// `/api/`).
    pub fn api_url(&self) -> String {
        format!("http://{}", self.addr())
    }

    // ---- settings --------------------------------------------------------------------

    /// Makes `channel` a conversation the bot is in, of `kind` (`im`, `channel`, `group`,
    /// `mpim`). Pushing an event from a channel does too; any other channel is
    /// `channel_not_found`.
    pub fn add_channel(&self, channel: &str, kind: &str) {
        self.with_state(|s| s.know_channel(channel, Some(kind)));
    }

    /// Makes `ts` a message of `user` in `channel` (a thread root the bot may reply to),
    /// without pushing an event. `thread_ts` makes it a reply.
    pub fn add_message(&self, channel: &str, ts: &str, user: &str, thread_ts: Option<&str>) {
        self.with_state(|s| {
            s.know_channel(channel, None);
            let mut message = Message::new(channel, ts, user, false);
            message.thread_ts = thread_ts.map(str::to_owned);
            s.messages.push(message);
        });
    }

    /// The pace of edits to one message: a second `chat.update` of it sooner is a 429
    /// `ratelimited` with `Retry-After` (default [`EDIT_PACE`]; `None` lets every edit
    /// through).
    pub fn set_edit_pace(&self, pace: Option<Duration>) {
        self.with_state(|s| s.edit_pace = pace);
    }

    /// How many `reactions.add` calls the workspace takes in any window of `window`
    /// (default [`REACTION_LIMIT`]); more are answered 429 `ratelimited` with `Retry-After`.
    pub fn set_reaction_limit(&self, calls: usize, window: Duration) {
        self.with_state(|s| s.reaction_limit = Some((calls, window)));
    }

    /// Whether the streaming methods exist (default true). Off, they answer as a method
    /// Slack does not have: HTTP 404 `unknown_method` (what an app without the AI
    /// features gets is not documented; a test needing another answer scripts it with
    /// [`Self::fail`]).
    pub fn set_streaming(&self, on: bool) {
        self.with_state(|s| s.streaming = on);
    }

    /// Plays Slack's own answer to a text over [`MAX_TEXT_CHARS`]: cut to the limit and
    /// posted, with the `message_truncated` warning (default false: refused as
    /// `msg_too_long`, so a bridge that relies on the cut is noticed).
    pub fn set_truncate_long_text(&self, truncate: bool) {
        self.with_state(|s| s.truncate_long_text = truncate);
    }

    /// Plays Enterprise Grid's file host: every file asked of the fake under another host
    /// name than `origin`'s is answered with a 302 to the same path at `origin` (another
    /// name of the fake, e.g. `http://localhost:<port>`), which serves it only with the bot
    /// token, as the first host does (hermes-agent#114483: `files.slack.com` redirects to
    /// `files-origin.slack.com`, and the second hop without the token gets the sign-in
    /// page).
    pub fn move_files_to(&self, origin: &str) {
        let origin = origin.trim_end_matches('/').to_owned();
        self.with_state(|s| s.files_moved_to = Some(origin));
    }

    /// Scripts a failure of `method` (a Web API method name, `upload` for the upload URL,
    /// `file` for the file host, `response_url` for slash commands' URLs) when `trigger`
    /// says. Failures fire after the token check,
    /// so a call refused for its token uses none up.
    pub fn fail(&self, method: &str, trigger: Trigger, failure: Failure) {
        self.with_state(|s| s.failures.add(method, trigger.into(), failure));
    }

    /// Removes every scripted failure and ends any scripted 429 still running.
    pub fn clear_failures(&self) {
        self.with_state(|s| {
            s.failures.clear();
            s.limited_until.clear();
        });
    }

    /// Calls refused because they came before a scripted 429's `Retry-After` was over.
    pub fn early_calls(&self) -> usize {
        self.with_state(|s| s.early_calls)
    }

    /// 429s the fake's own pace rules answered (not scripted ones).
    pub fn rate_refusals(&self) -> usize {
        self.with_state(|s| s.rate_refusals)
    }

    // ---- files users share -----------------------------------------------------------

    /// Holds a file a user shared: it is served at the [`File`]'s `url_private` and
    /// `url_private_download` to the bot token only. Returns the file to put in an event.
    pub fn put_file(&self, name: &str, mimetype: &str, bytes: Vec<u8>) -> File {
        let addr = self.addr();
        self.with_state(|s| {
            let id = format!("F0FAKE{:04}", s.next_id());
            let file = File::new(&id, name, mimetype, bytes.len(), addr);
            let hosted = HostedFile {
                name: name.to_owned(),
                mimetype: mimetype.to_owned(),
                bytes,
            };
            s.hosted.insert(id, hosted);
            file
        })
    }

    // ---- what the bot did ------------------------------------------------------------

    /// Every message the fake knows, users' and the bot's, oldest first.
    pub fn messages(&self) -> Vec<Message> {
        self.with_state(|s| s.messages.clone())
    }

    /// The bot's messages in `channel`, oldest first (with their edits and streams).
    pub fn bot_messages(&self, channel: &str) -> Vec<Message> {
        let mut all = self.messages();
        all.retain(|m| m.bot && m.channel == channel);
        all
    }

    /// The bot's messages in the thread `thread_ts` of `channel` (replies, not the root).
    pub fn thread_replies(&self, channel: &str, thread_ts: &str) -> Vec<Message> {
        let mut all = self.bot_messages(channel);
        all.retain(|m| m.thread_ts.as_deref() == Some(thread_ts));
        all
    }

    /// The message `ts` of `channel`, as it is now.
    pub fn message(&self, channel: &str, ts: &str) -> Option<Message> {
        self.with_state(|s| s.message(channel, ts).cloned())
    }

    /// Every reaction the bot added, in order.
    pub fn reactions(&self) -> Vec<Reaction> {
        self.with_state(|s| s.reactions.clone())
    }

    /// Every post to a slash command's `response_url` the fake took, oldest first.
    pub fn responses(&self) -> Vec<Response> {
        self.with_state(|s| s.responses.clone())
    }

    /// Gives `command` a `response_url` the fake serves (`commands`), as Slack gives each
    /// command one of its own.
    pub fn issue_response_url(&self, command: &mut SlashCommand) {
        let addr = self.addr();
        let url = self.with_state(|s| {
            let key = format!("{TEAM_ID}/{}/{:016x}", s.next_id(), rand_secret());
            let issued = commands::Issued::new(&command.channel_id, &command.user_id);
            s.responses_issued.insert(key.clone(), issued);
            format!("http://{addr}/commands/{key}")
        });
        command.response_url = url;
    }

    /// The names of the bot's reactions on `ts` in `channel`, in order.
    pub fn reactions_on(&self, channel: &str, ts: &str) -> Vec<String> {
        let mut all = self.reactions();
        all.retain(|r| r.channel == channel && r.timestamp == ts);
        all.into_iter().map(|r| r.name).collect()
    }

    /// Every completed upload, in order.
    pub fn uploads(&self) -> Vec<Upload> {
        self.with_state(|s| s.uploads.clone())
    }

    /// Waits for a message (a user's or the bot's) matching `matches`, and returns it.
    pub async fn wait_message(
        &self,
        what: &str,
        deadline: Duration,
        matches: impl Fn(&Message) -> bool,
    ) -> Result<Message, WaitTimeout> {
        let found = |f: &Self| f.messages().into_iter().find(|m| matches(m));
        self.wait_until(what, deadline, |f| found(f).is_some())
            .await?;
        found(self).ok_or_else(|| self.timeout(what))
    }

    /// Waits until a bot message in the thread `thread_ts` of `channel` (or the root
    /// itself) shows exactly `text` (after edits; a stream once stopped).
    pub async fn wait_text(
        &self,
        channel: &str,
        thread_ts: &str,
        text: &str,
        deadline: Duration,
    ) -> Result<Message, WaitTimeout> {
        let what = format!("{text:?} in {channel}/{thread_ts}");
        self.wait_message(&what, deadline, |m| {
            m.bot && m.channel == channel && m.in_thread(thread_ts) && m.settled() && m.text == text
        })
        .await
    }

    /// Waits until the bridge marked the thread `thread_ts` of `channel` done (a
    /// `white_check_mark` or `x` reaction of the bot on its root, platforms §8.3) with no
    /// stream of it still open, and returns the text of the bot's newest message in it.
    pub async fn wait_final_text(
        &self,
        channel: &str,
        thread_ts: &str,
        deadline: Duration,
    ) -> Result<String, WaitTimeout> {
        let last = |f: &Self| {
            let replies = f.thread_replies(channel, thread_ts);
            let done = f
                .reactions_on(channel, thread_ts)
                .iter()
                .any(|r| r == "white_check_mark" || r == "x");
            let settled = replies.iter().all(Message::settled);
            replies
                .last()
                .filter(|_| done && settled)
                .map(|m| m.text.clone())
        };
        let what = format!("the final answer in {channel}/{thread_ts}");
        self.wait_until(&what, deadline, |f| last(f).is_some())
            .await?;
        last(self).ok_or_else(|| self.timeout(&what))
    }
}

#[cfg(test)]
mod tests;
