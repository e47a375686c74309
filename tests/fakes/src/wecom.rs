//! A fake WeCom (企业微信) intelligent bot (智能机器人) over its long connection
//! (智能机器人长连接, developer.work.weixin.qq.com/document/path/101463) for the
//! `im-bridge-wecom` adapter's tests: one WebSocket that carries everything (subscribe,
//! heartbeats, message and event callbacks, replies, streams, proactive messages, chunked
//! media uploads), and an HTTP host for the encrypted files users send.
//!
//! [`FakeWecom::start`] binds `127.0.0.1:0`; configure the adapter's `ws_url` as
//! [`FakeWecom::ws_url`] with [`BOT_ID`] and [`SECRET`]. It serves:
//!
//! - the long connection at `ws://127.0.0.1:P/` (`long_connection`): `aibot_subscribe`
//!   first, `ping` heartbeats, one live connection per bot (a newer one replaces the older:
//!   `disconnected_event`, then a close), pushes of `aibot_msg_callback` /
//!   `aibot_event_callback`, and every client command answered with its `req_id`,
//!   `errcode` and `errmsg`;
//! - replies and proactive messages (`replies`): `aibot_respond_msg` (streams and the other
//!   message types), `aibot_respond_welcome_msg`, `aibot_respond_update_msg`,
//!   `aibot_send_msg`, with WeCom's windows, limits and rates against a clock a test can
//!   advance ([`FakeWecom::advance_clock`]);
//! - media (`media`): the three-step upload (`aibot_upload_media_init` / `_chunk` /
//!   `_finish`) with its size, chunk and md5 checks, and the file host `GET /cos/{id}?sign=…`
//!   serving what [`FakeWecom::put_file`] holds, AES-256-CBC encrypted under a per-URL
//!   `aeskey` as WeCom serves it.
//!
//! It never panics on what the bridge sends: a bad frame gets an error answer and is kept
//! ([`FakeWecom::protocol_errors`]). Which rule is WeCom's (and where it is written) and
//! which is the fake's is said where each rule is written, in the [`code`] list and in the
//! crate's README ("The WeCom fake").
//!
//! Children: `records` holds what the fake records; `events` builds the callbacks WeCom
//! pushes; `long_connection` is the socket (subscribe, heartbeat, hand-over, framing,
//! scripted failures); `replies` the reply and send rules; `media` uploads and the file
//! host.

mod events;
mod long_connection;
mod media;
mod records;
mod replies;

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use tokio::time::Instant;

use crate::skeleton::http::{Head, Script};
use crate::skeleton::socket::Sockets;
use crate::skeleton::{Fake, Platform, WithSockets};

pub use crate::wait::WaitTimeout;
pub use events::{Event, MediaFile, Message, MixedItem};
pub use media::{decrypt_file, encrypt_file};
pub use records::{
    Closed, Connection, Failure, Frame, MediaUse, Pushed, Reply, Sent, Stream, StreamExpiry,
    Trigger, Update, Upload,
};

/// What an HTTP call of the file host is recorded as.
pub type Call = crate::skeleton::Call;

/// The bot's BotID (`aibot_subscribe`'s `bot_id`, every callback's `aibotid`).
pub const BOT_ID: &str = "aibFakeBot0000000000000000000001";
/// The long-connection Secret (`aibot_subscribe`'s `secret`).
pub const SECRET: &str = "FakeLongConnectionSecretForTests0000000001";
/// The bot's display name, as users @mention it in groups (`@RobotA hello`).
pub const BOT_NAME: &str = "DeerFlow";
/// The most bytes (UTF-8) of a stream's `content` and a markdown `content` (documented:
/// "最长不超过20480个字节").
pub const MAX_CONTENT_BYTES: usize = 20_480;
/// The most bytes of a `feedback.id` (documented: "有效长度为 256 字节以内").
pub const MAX_FEEDBACK_ID_BYTES: usize = 256;
/// How long after a message callback replies to it are accepted (documented: "收到消息回调后，
/// 24 小时内可以往该会话回复消息").
pub const REPLY_WINDOW: Duration = Duration::from_secs(24 * 3600);
/// How long a callback's streams may be updated, counted from the callback (the user's
/// message: WeCom waits for the answer's end up to six minutes after it; the stream page
/// says "6分钟超时限制：从首次发送开始计时", and the callback comes before any frame, so the
/// fake is never more lenient than either reading). WeCom answers a late update `846608
/// stream message update expired`.
pub const STREAM_WINDOW: Duration = Duration::from_secs(6 * 60);
/// How long after an `enter_chat` (or `template_card_event`) its welcome (or card update)
/// is accepted (documented: "收到事件回调后需在 5 秒内发送回复").
pub const EVENT_REPLY_WINDOW: Duration = Duration::from_secs(5);
/// Messages to one conversation per minute, replies and proactive sends together
/// (documented: "总共给某个会话发消息的限制为 30 条/分钟，1000 条/小时").
pub const MESSAGES_PER_MINUTE: usize = 30;
/// Messages to one conversation per hour (documented, as above).
pub const MESSAGES_PER_HOUR: usize = 1000;
/// Uploads (inits) per minute per bot (documented: "上传频率不能超过30次/分钟和1000次/小时").
pub const UPLOADS_PER_MINUTE: usize = 30;
/// Uploads per hour per bot (documented, as above).
pub const UPLOADS_PER_HOUR: usize = 1000;
/// The most bytes of one chunk before base64 (documented: "单个分片不能超过 512KB（Base64
/// 编码前）").
pub const MAX_CHUNK_BYTES: usize = 512 * 1024;
/// The most chunks of one upload (documented: "最多支持 100 个分片").
pub const MAX_CHUNKS: u64 = 100;
/// How long an upload session lives after its init (documented: "上传会话有效期为 30 分钟").
pub const UPLOAD_SESSION: Duration = Duration::from_secs(30 * 60);
/// How long an uploaded `media_id` lives (documented: "上传的临时素材有效期为3天").
pub const MEDIA_LIFETIME: Duration = Duration::from_secs(3 * 24 * 3600);
/// How long a file URL in a callback serves (documented: "资源下载地址，5 分钟内有效").
pub const URL_LIFETIME: Duration = Duration::from_secs(5 * 60);
/// The fewest bytes of an upload (documented for 上传临时素材: "所有文件size必须大于5个字节").
pub const MIN_UPLOAD_BYTES: u64 = 6;
/// The interval the SDKs ping at (documented: "建议每 30 秒 发送一次心跳").
pub const PING_INTERVAL: Duration = Duration::from_secs(30);
/// How long a subscribed connection may go without a `ping` before the fake closes it
/// (the fake's: WeCom only says "若长时间未收到心跳，服务端会主动断开连接"; two missed
/// pings of the documented interval). [`FakeWecom::set_heartbeat_timeout`].
pub const HEARTBEAT_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a new connection may stay silent before its first frame (the fake's: WeCom's
/// window is not documented). [`FakeWecom::set_subscribe_window`].
pub const SUBSCRIBE_WINDOW: Duration = Duration::from_secs(10);

/// The route of [`FakeWecom::fail_finishing`] among the scripted failures: the frames that
/// finish a stream, counted apart from the other replies.
const FINISHING: &str = "finishing stream frame";

/// The route of [`FakeWecom::refuse_messages`] among the scripted failures: what WeCom's
/// rate counts, a new message, not a command (no command is named so).
const NEW_MESSAGE: &str = "new message";

/// The `errcode`s the fake answers, each marked by where it comes from: *documented* (the
/// long-connection page), *observed* (answers seen from the real service, cited in the
/// README), *global* (WeCom's global error code list, not confirmed for the long
/// connection), or *fake* (the fake's own: WeCom's answer is unknown; an adapter must only
/// rely on it being non-zero).
pub mod code {
    /// Success. *documented*
    pub const OK: i64 = 0;
    /// Wrong `bot_id` or `secret` at `aibot_subscribe` ("invalid bot_id or secret").
    /// *observed*
    pub const INVALID_CREDENTIALS: i64 = 853_000;
    /// A `req_id` this connection cannot reply to: never pushed, pushed on another
    /// connection (before a reconnect), an event's used for `aibot_respond_msg`
    /// ("invalid req_id"). *observed*. The fake also answers it for a reply past its window
    /// (24 h, or 5 s for welcome / card update): *fake* choice of code.
    pub const INVALID_REQ_ID: i64 = 846_605;
    /// An update of a stream past [`STREAM_WINDOW`](super::STREAM_WINDOW) ("stream message
    /// update expired"). *observed*. The fake also answers it for a new stream on a callback
    /// one of whose streams expired: *fake* (WeCom's plugin never opens one after 846608).
    pub const STREAM_EXPIRED: i64 = 846_608;
    /// Too many calls ("api freq out of limit"): subscribes, the per-conversation message
    /// rate, the upload rate. *observed* (at subscribe) / *global*.
    pub const FREQ_OUT_OF_LIMIT: i64 = 45_009;
    /// A body WeCom would not take: a missing or mistyped field, a content over its byte
    /// limit, an unknown `msgtype`, a malformed frame, an unknown `cmd`. *global*
    /// (40058 "不合法的参数"; the group-robot webhook answers it for an over-long markdown).
    /// Answered `{"errcode": 40058, "errmsg": "invalid Request Parameter"}` with no
    /// `headers`, naming no request: *observed* (a public probe's record).
    pub const INVALID_PARAMETER: i64 = 40_058;
    /// A command on a connection that is not subscribed ("aibot websocket not
    /// subscribed"): before a successful `aibot_subscribe` (the fake then closes the
    /// connection, its own rule), or after WeCom dropped the subscription while the socket
    /// stayed open ([`FakeWecom::drop_subscription`](super::FakeWecom::drop_subscription)).
    /// *observed* (NousResearch/hermes-agent issues 29667 and 47564: every reply answered
    /// so for 57 to 79 s until WeCom closed the socket).
    pub const NOT_SUBSCRIBED: i64 = 846_609;
    /// An update of a stream already finished ("消息将不再可更新" is documented; the code is
    /// *fake*).
    pub const STREAM_FINISHED: i64 = 846_698;
    /// A second welcome or card update for one event. *fake*
    pub const ALREADY_REPLIED: i64 = 846_697;
    /// `aibot_send_msg` to a conversation that never wrote to the bot ("需要用户在会话中给机器人
    /// 发消息，后续机器人才能主动推送" is documented; the code is *fake*).
    pub const CHAT_NOT_ALLOWED: i64 = 846_696;
    /// A `media_id` never issued, expired, or of another type than the message's. *fake*
    pub const INVALID_MEDIA_ID: i64 = 40_007;
    /// An `upload_id` never issued or past [`UPLOAD_SESSION`](super::UPLOAD_SESSION).
    /// *fake*
    pub const INVALID_UPLOAD_ID: i64 = 846_695;
    /// `aibot_upload_media_finish` with a chunk missing or a size that is not `total_size`.
    /// *fake*
    pub const UPLOAD_INCOMPLETE: i64 = 846_694;
    /// `aibot_upload_media_finish` whose bytes do not match the announced `md5`
    /// (documented: "服务端会校验所有分片是否齐全、文件 MD5 是否匹配"). *fake* code.
    pub const MD5_MISMATCH: i64 = 846_693;
}

/// The `errmsg` of an answer with `errcode`.
pub(crate) fn errmsg(errcode: i64) -> &'static str {
    match errcode {
        code::OK => "ok",
        code::INVALID_CREDENTIALS => "invalid bot_id or secret",
        code::INVALID_REQ_ID => "invalid req_id",
        code::STREAM_EXPIRED => "stream message update expired",
        code::FREQ_OUT_OF_LIMIT => "api freq out of limit",
        code::INVALID_PARAMETER => "invalid Request Parameter",
        code::NOT_SUBSCRIBED => "aibot websocket not subscribed",
        code::STREAM_FINISHED => "stream message already finished",
        code::ALREADY_REPLIED => "already replied",
        code::CHAT_NOT_ALLOWED => "chat not allowed: no message from it",
        code::INVALID_MEDIA_ID => "invalid media_id",
        code::INVALID_UPLOAD_ID => "invalid upload_id",
        code::UPLOAD_INCOMPLETE => "upload incomplete",
        code::MD5_MISMATCH => "md5 mismatch",
        _ => "error",
    }
}

/// The fake's clock: real time moved forward by what a test advanced (windows, rates,
/// lifetimes are measured on it; heartbeats on real time).
#[derive(Debug, Default, Clone, Copy)]
struct Clock {
    offset: Duration,
}

impl Clock {
    fn now(self) -> Instant {
        Instant::now() + self.offset
    }
}

/// A callback the fake pushed, by `req_id`: what replies to it are checked against.
#[derive(Clone, Debug)]
struct Callback {
    /// `aibot_msg_callback`, or the event's `eventtype`.
    kind: String,
    msgid: String,
    /// The connection it went to (`None` while held).
    connection: Option<u64>,
    /// When it went out, on the fake's clock.
    at: Instant,
    /// Its conversation: the group's `chatid`, or the sender's `userid`.
    conversation: String,
    /// The whole frame, to deliver (again).
    body: Value,
    /// Whether its one welcome / card update was accepted.
    answered: bool,
}

/// The fake WeCom's state: its connections, what it pushed and recorded, its rules'
/// settings.
pub struct Wecom {
    sockets: Sockets<Connection>,
    clock: Clock,
    /// The connection pushes go to: the newest that subscribed.
    current: Option<u64>,
    heartbeat_timeout: Duration,
    subscribe_window: Duration,
    replaced_close_delay: Duration,
    reply_window: Duration,
    stream_window: Duration,
    stream_expiry: StreamExpiry,
    event_reply_window: Duration,
    refuse_shrinking: bool,
    failures: Script<Failure>,
    frames: Vec<Frame>,
    protocol_errors: Vec<String>,
    callbacks: HashMap<String, Callback>,
    /// Pushes made while no connection was subscribed, by `req_id`, in order.
    held: VecDeque<String>,
    pushed: Vec<Pushed>,
    streams: Vec<Stream>,
    replies: Vec<Reply>,
    sent: Vec<Sent>,
    /// Conversations that wrote to the bot (proactive sends may go there).
    conversations: HashSet<String>,
    /// Conversation -> when each accepted message went out (the last hour's).
    rates: HashMap<String, VecDeque<Instant>>,
    rate_refusals: usize,
    upload_times: VecDeque<Instant>,
    uploads: Vec<Upload>,
    sessions: HashMap<String, media::Session>,
    hosted: HashMap<String, media::Hosted>,
    /// While `true`, file downloads wait ([`FakeWecom::hold_files`]).
    files_held: tokio::sync::watch::Sender<bool>,
    /// Downloads waiting for the hold to end.
    files_waiting: usize,
    /// Downloads still let through before the hold applies ([`FakeWecom::hold_files_after`]).
    files_passing: usize,
    next: u64,
}

impl Wecom {
    fn new() -> Self {
        Self {
            sockets: Sockets::default(),
            clock: Clock::default(),
            current: None,
            heartbeat_timeout: HEARTBEAT_TIMEOUT,
            subscribe_window: SUBSCRIBE_WINDOW,
            replaced_close_delay: Duration::ZERO,
            reply_window: REPLY_WINDOW,
            stream_window: STREAM_WINDOW,
            stream_expiry: StreamExpiry::SinceCallback,
            event_reply_window: EVENT_REPLY_WINDOW,
            refuse_shrinking: false,
            failures: Script::default(),
            frames: Vec::new(),
            protocol_errors: Vec::new(),
            callbacks: HashMap::new(),
            held: VecDeque::new(),
            pushed: Vec::new(),
            streams: Vec::new(),
            replies: Vec::new(),
            sent: Vec::new(),
            conversations: HashSet::new(),
            rates: HashMap::new(),
            rate_refusals: 0,
            upload_times: VecDeque::new(),
            uploads: Vec::new(),
            sessions: HashMap::new(),
            hosted: HashMap::new(),
            files_held: tokio::sync::watch::Sender::new(false),
            files_waiting: 0,
            files_passing: 0,
            next: 0,
        }
    }

    fn next(&mut self) -> u64 {
        self.next += 1;
        self.next
    }

    fn now(&self) -> Instant {
        self.clock.now()
    }
}

impl Platform for Wecom {
    type Call = Call;

    fn seen(&self, calls: &[Call]) -> Vec<String> {
        let mut lines: Vec<String> = self.frames.iter().map(Frame::line).collect();
        lines.extend(calls.iter().map(crate::skeleton::Recorded::line));
        lines
    }
}

impl WithSockets for Wecom {
    type Connection = Connection;

    fn sockets(&mut self) -> &mut Sockets<Connection> {
        &mut self.sockets
    }
}

/// What the handlers and [`FakeWecom`] share.
pub(crate) type Shared = crate::skeleton::Shared<Wecom>;

/// The running fake. Dropping it stops the server and closes every connection.
pub type FakeWecom = Fake<Wecom>;

/// Largest HTTP request body read (the file host takes none).
const MAX_BODY: usize = 1 << 20;

/// Every request: a WebSocket upgrade at `/` is the long connection, `GET /cos/…` the file
/// host; anything else is a 404.
async fn handle(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let head = Head::of(&request);
    let segments = head.segments();
    if head.is_upgrade() && head.path.trim_matches('/').is_empty() {
        return long_connection::upgrade(&shared, request);
    }
    if segments.first() == Some(&"cos") {
        return media::download(&shared, &head, segments.get(1).copied()).await;
    }
    (axum::http::StatusCode::NOT_FOUND, "not found").into_response()
}

impl Fake<Wecom> {
    /// Starts a fake bot [`BOT_ID`] / [`SECRET`] on `127.0.0.1:0`.
    pub async fn start() -> std::io::Result<Self> {
        Fake::serve(Wecom::new(), handle, MAX_BODY).await
    }

    /// The URL to configure as the adapter's `ws_url`: `ws://127.0.0.1:P/` (WeCom's is
    /// `wss://openws.work.weixin.qq.com`).
    pub fn ws_url(&self) -> String {
        format!("ws://{}/", self.addr())
    }

    // ---- settings --------------------------------------------------------------------

    /// Holds every file download from now until [`FakeWecom::release_files`]: each waits,
    /// counted by [`FakeWecom::files_waiting`], before it is answered.
    pub fn hold_files(&self) {
        self.hold_files_after(0);
    }

    /// Answers the next `served` file downloads, then holds every one after them as
    /// [`FakeWecom::hold_files`] does.
    pub fn hold_files_after(&self, served: usize) {
        self.with_state(|s| {
            s.files_passing = served;
            s.files_held.send_replace(true)
        });
    }

    /// Lets the downloads [`FakeWecom::hold_files`] held go on.
    pub fn release_files(&self) {
        self.with_state(|s| s.files_held.send_replace(false));
    }

    /// How many file downloads wait for [`FakeWecom::release_files`] now.
    pub fn files_waiting(&self) -> usize {
        self.with_state(|s| s.files_waiting)
    }

    /// Moves the fake's clock forward by `by`: reply windows, stream expiry, welcome
    /// windows, rates, upload sessions, media and URL lifetimes are measured on it.
    pub fn advance_clock(&self, by: Duration) {
        self.shared.update(|s| s.clock.offset += by);
    }

    /// How long a subscribed connection may go without a `ping` (default
    /// [`HEARTBEAT_TIMEOUT`]); applies from the next check of each connection.
    pub fn set_heartbeat_timeout(&self, timeout: Duration) {
        self.with_state(|s| s.heartbeat_timeout = timeout);
    }

    /// How long a new connection may stay silent before its first frame (default
    /// [`SUBSCRIBE_WINDOW`]), for connections from now.
    pub fn set_subscribe_window(&self, window: Duration) {
        self.with_state(|s| s.subscribe_window = window);
    }

    /// How long after its `disconnected_event` a replaced connection is closed (default
    /// zero: at once, after the event). WeCom's delay was seen from 2.2 s to 313 s; a test
    /// proving the adapter closes the replaced connection itself sets a long one.
    pub fn set_replaced_close_delay(&self, delay: Duration) {
        self.with_state(|s| s.replaced_close_delay = delay);
    }

    /// The reply window of message callbacks (default [`REPLY_WINDOW`]).
    pub fn set_reply_window(&self, window: Duration) {
        self.with_state(|s| s.reply_window = window);
    }

    /// How long a stream may be updated and from when (default [`STREAM_WINDOW`] since the
    /// callback it answers; [`StreamExpiry::SinceLast`] plays what was observed:
    /// updates every four minutes kept a stream alive past eight).
    pub fn set_stream_expiry(&self, window: Duration, expiry: StreamExpiry) {
        self.with_state(|s| {
            s.stream_window = window;
            s.stream_expiry = expiry;
        });
    }

    /// The window of welcomes and card updates after their event (default
    /// [`EVENT_REPLY_WINDOW`]).
    pub fn set_event_reply_window(&self, window: Duration) {
        self.with_state(|s| s.event_reply_window = window);
    }

    /// Refuses a stream update whose `content` does not extend the one before (default
    /// false: WeCom shows each update's content as the whole message, "第一次回复内容为"1"，
    /// 第二次回复"123"，则此时消息展示内容"123"", and takes a shorter one; the fake records it
    /// in [`Stream::shrank`] either way). Refused with [`code::INVALID_PARAMETER`].
    pub fn set_refuse_shrinking(&self, refuse: bool) {
        self.with_state(|s| s.refuse_shrinking = refuse);
    }

    /// Scripts a failure of the client command `cmd` (`aibot_subscribe`, `ping`,
    /// `aibot_respond_msg`, `aibot_send_msg`, `aibot_upload_media_chunk`, …) when
    /// `trigger` says. Failures fire after the frame's shape and subscription checks, so a
    /// malformed frame uses none up.
    pub fn fail(&self, cmd: &str, trigger: Trigger, failure: Failure) {
        self.with_state(|s| s.failures.add(cmd, trigger.into(), failure));
    }

    /// Scripts a failure of the frames that finish a stream (`aibot_respond_msg` with
    /// `stream.finish: true`) when `trigger` says, counted among those frames only: a test
    /// fails the final's finish however many updates came before it. A failure scripted
    /// for `aibot_respond_msg` itself goes first.
    pub fn fail_finishing(&self, trigger: Trigger, failure: Failure) {
        self.with_state(|s| s.failures.add(FINISHING, trigger.into(), failure));
    }

    /// Scripts a refusal with `errcode` of new messages (what WeCom's rate counts: a
    /// stream's first frame, any other reply, a welcome, a send; not a stream's later
    /// frames) when `trigger` says, counted from the fake's start: as WeCom refuses one
    /// over its rate (`45009`) whatever the fake's own count says. Fires after the
    /// message's checks, in place of the rate's.
    pub fn refuse_messages(&self, trigger: Trigger, errcode: i64) {
        let failure = Failure::Code(errcode, errmsg(errcode).to_owned());
        self.with_state(|s| s.failures.add(NEW_MESSAGE, trigger.into(), failure));
    }

    /// Removes every scripted failure.
    pub fn clear_failures(&self) {
        self.with_state(|s| s.failures.clear());
    }

    /// Makes `conversation` (a group's `chatid` or a user's `userid`) one that wrote to the
    /// bot, so `aibot_send_msg` may go there without a push.
    pub fn add_conversation(&self, conversation: &str) {
        self.with_state(|s| s.conversations.insert(conversation.to_owned()));
    }

    // ---- what the bridge did ---------------------------------------------------------

    /// Every client frame, in order, with the `errcode` the fake answered.
    pub fn frames(&self) -> Vec<Frame> {
        self.with_state(|s| s.frames.clone())
    }

    /// Every client frame of `cmd`, in order.
    pub fn frames_of(&self, cmd: &str) -> Vec<Frame> {
        let mut all = self.frames();
        all.retain(|f| f.cmd == cmd);
        all
    }

    /// The frames that broke the protocol (not JSON, no `cmd` or `req_id`, an unknown
    /// `cmd`, binary), up to 200 characters each, in order.
    pub fn protocol_errors(&self) -> Vec<String> {
        self.with_state(|s| s.protocol_errors.clone())
    }

    /// Every callback pushed (first pushes and redeliveries), in order.
    pub fn pushed(&self) -> Vec<Pushed> {
        self.with_state(|s| s.pushed.clone())
    }

    /// Every stream the bridge opened, in order of its first frame.
    pub fn streams(&self) -> Vec<Stream> {
        self.with_state(|s| s.streams.clone())
    }

    /// The streams answering the callback `req_id`, in order.
    pub fn streams_of(&self, req_id: &str) -> Vec<Stream> {
        let mut all = self.streams();
        all.retain(|s| s.req_id == req_id);
        all
    }

    /// Every accepted reply that is no stream update (markdown, media, cards, welcomes,
    /// card updates), in order.
    pub fn replies(&self) -> Vec<Reply> {
        self.with_state(|s| s.replies.clone())
    }

    /// Every accepted `aibot_send_msg`, in order.
    pub fn sent(&self) -> Vec<Sent> {
        self.with_state(|s| s.sent.clone())
    }

    /// Every upload, finished or not, in order of its init.
    pub fn uploads(&self) -> Vec<Upload> {
        self.with_state(|s| s.uploads.clone())
    }

    /// Messages refused for the per-conversation rate (not scripted failures).
    pub fn rate_refusals(&self) -> usize {
        self.with_state(|s| s.rate_refusals)
    }

    // ---- waits -----------------------------------------------------------------------

    /// Waits until at least `n` connections subscribed successfully (open or not since).
    pub async fn wait_subscribed(&self, n: usize, deadline: Duration) -> Result<(), WaitTimeout> {
        self.wait_until(&format!("{n} subscribed connections"), deadline, |f| {
            f.connections().iter().filter(|c| c.subscribed).count() >= n
        })
        .await
    }

    /// Waits until connection `id` is closed, and returns its record.
    pub async fn wait_closed(
        &self,
        id: u64,
        deadline: Duration,
    ) -> Result<Connection, WaitTimeout> {
        let found = |f: &Self| f.connections().into_iter().find(|c| c.id == id && !c.open);
        let what = format!("connection {id} closed");
        self.wait_until(&what, deadline, |f| found(f).is_some())
            .await?;
        found(self).ok_or_else(|| self.timeout(&what))
    }

    /// Waits for a client frame of `cmd` matching `matches`, and returns it.
    pub async fn wait_frame(
        &self,
        cmd: &str,
        deadline: Duration,
        matches: impl Fn(&Frame) -> bool,
    ) -> Result<Frame, WaitTimeout> {
        let found = |f: &Self| f.frames_of(cmd).into_iter().find(|fr| matches(fr));
        let what = format!("a {cmd} frame");
        self.wait_until(&what, deadline, |f| found(f).is_some())
            .await?;
        found(self).ok_or_else(|| self.timeout(&what))
    }

    /// Waits until a stream answering `req_id` is finished (`finish: true` accepted), and
    /// returns the first such.
    pub async fn wait_stream_finished(
        &self,
        req_id: &str,
        deadline: Duration,
    ) -> Result<Stream, WaitTimeout> {
        let found = |f: &Self| f.streams_of(req_id).into_iter().find(|s| s.finished);
        let what = format!("a finished stream answering {req_id}");
        self.wait_until(&what, deadline, |f| found(f).is_some())
            .await?;
        found(self).ok_or_else(|| self.timeout(&what))
    }

    /// Waits until the answer to `req_id` is final, and returns the text the user sees: the
    /// content of its first finished stream.
    pub async fn wait_final_text(
        &self,
        req_id: &str,
        deadline: Duration,
    ) -> Result<String, WaitTimeout> {
        Ok(self.wait_stream_finished(req_id, deadline).await?.content())
    }

    /// Waits for an accepted `aibot_send_msg` to `chatid`, and returns it.
    pub async fn wait_sent(&self, chatid: &str, deadline: Duration) -> Result<Sent, WaitTimeout> {
        let found = |f: &Self| f.sent().into_iter().find(|s| s.chatid == chatid);
        let what = format!("a message sent to {chatid}");
        self.wait_until(&what, deadline, |f| found(f).is_some())
            .await?;
        found(self).ok_or_else(|| self.timeout(&what))
    }

    /// Waits for a finished upload named `filename`, and returns it.
    pub async fn wait_upload(
        &self,
        filename: &str,
        deadline: Duration,
    ) -> Result<Upload, WaitTimeout> {
        let found = |f: &Self| {
            f.uploads()
                .into_iter()
                .find(|u| u.filename == filename && u.media_id.is_some())
        };
        let what = format!("a finished upload of {filename}");
        self.wait_until(&what, deadline, |f| found(f).is_some())
            .await?;
        found(self).ok_or_else(|| self.timeout(&what))
    }
}

#[cfg(test)]
mod tests;
