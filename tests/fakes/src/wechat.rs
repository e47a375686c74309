//! A fake WeChat iLink bot API (personal WeChat, `https://ilinkai.weixin.qq.com`) and its
//! CDN (`https://novac2c.cdn.weixin.qq.com/c2c`) for the WeChat adapter's tests: QR login
//! for a bot token, `getupdates` long polling with its opaque cursor, `sendmessage` with the
//! `context_token` rules, typing, and media through the AES-128-ECB encrypted CDN.
//!
//! [`FakeWechat::start`] binds `127.0.0.1:0`, logged in as [`BOT_ID`] with [`BOT_TOKEN`];
//! configure the adapter's `base_url` as [`FakeWechat::base_url`] and its `cdn_base_url` as
//! [`FakeWechat::cdn_base_url`]. [`FakeWechat::start_logged_out`] has no token: the adapter
//! must log in by QR code, which the test drives ([`FakeWechat::scan`],
//! [`FakeWechat::confirm`], [`FakeWechat::expire`]). It serves:
//!
//! - QR login (`login`): `GET|POST /ilink/bot/get_bot_qrcode?bot_type=3`, `GET
//!   /ilink/bot/get_qrcode_status?qrcode=…` (a long poll);
//! - the bot endpoints (`api`), each a POST of JSON with the token headers:
//!   `/ilink/bot/getupdates`, `sendmessage`, `getconfig`, `sendtyping`, `getuploadurl`,
//!   `msg/notifystart`, `msg/notifystop`;
//! - the CDN (`cdn`): `POST /c2c/upload?encrypted_query_param=…&filekey=…`, `GET
//!   /c2c/download?encrypted_query_param=…`.
//!
//! Inbound messages are built with [`Inbound`] and queued with [`FakeWechat::push`], which
//! hosts their media encrypted on the CDN and gives each a `context_token`.
//!
//! Which rule is iLink's (and where it is written or was observed) and which is the fake's
//! is said where each rule is written, in the [`code`] list and in the crate's README ("The
//! WeChat fake"). No official reference of the protocol exists beyond Tencent's
//! `@tencent-weixin/openclaw-weixin` plugin (its README's "Backend API Protocol" and its
//! source); the rest is what its users observed.
//!
//! Children: `records` holds what the fake records; `messages` builds inbound messages;
//! `login` the QR flow; `api` the bot endpoints; `cdn` the CDN and its cipher.

mod api;
mod cdn;
mod login;
mod messages;
mod records;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use futures_util::StreamExt;
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::skeleton::http::{Answer, Head, Script, Tokens};
use crate::skeleton::{Fake, Platform};

pub use crate::wait::WaitTimeout;
pub use cdn::{decrypt, encrypt, padded_size, parse_aes_key};
pub use messages::Inbound;
pub use records::{
    Call, Failure, Pushed, QrCode, QrStatus, Sent, SentItem, Trigger, Typing, Upload,
};

/// The bot's `ilink_bot_id` (iLink's are `…@im.bot`).
pub const BOT_ID: &str = "fakebot00000001@im.bot";
/// The bot token [`FakeWechat::start`] is logged in with (`Authorization: Bearer …`).
pub const BOT_TOKEN: &str = "fakebot00000001@im.bot:fake0000000000000000000000000001";
/// The `ilink_user_id` of the user who scans the QR code (the bot's owner; users are
/// `…@im.wechat`).
pub const OWNER_ID: &str = "o9cq8fakeowner0000000001@im.wechat";
/// The most UTF-8 bytes of a text item (observed: iLink answers `ret -2` past 16 KiB; the
/// clients split at 2000 characters, their own choice).
pub const MAX_TEXT_BYTES: usize = 16_384;
/// The most messages sent with one `context_token` (observed: the 11th reply to one inbound
/// message is `ret -2`).
pub const REPLIES_PER_CONTEXT: usize = 10;
/// How long after a user's last message what the bot sends reaches them (observed: later
/// sends are answered success and dropped). [`FakeWechat::advance_clock`].
pub const REPLY_WINDOW: Duration = Duration::from_secs(24 * 3600);
/// How long `getupdates` and `get_qrcode_status` are held without news (README / SDK: 35 s;
/// the answer's `longpolling_timeout_ms`). [`FakeWechat::set_long_poll_hold`].
pub const LONG_POLL_HOLD: Duration = Duration::from_secs(35);
/// How long an issued bot token lives unless the session is ended (the fake's: iLink's
/// sessions end after an undocumented time; a test ends one with
/// [`FakeWechat::expire_session`]).
const TOKEN_LIFETIME: Duration = Duration::from_secs(365 * 24 * 3600);

/// The `ret` / `errcode` values the fake answers, each marked by where it comes from:
/// *SDK* (Tencent's plugin), *observed* (answers of the real service its users reported),
/// *fake* (the fake's own: iLink's answer is unknown; an adapter must only rely on it being
/// non-zero).
pub mod code {
    /// Success (`ret: 0`; `sendmessage` answers `{}`). *SDK*
    pub const OK: i64 = 0;
    /// `{"errcode": -14, "errmsg": "session timeout"}` with no `ret`: the session expired,
    /// or the token or app headers are wrong or missing (iLink answers all alike). An adapter
    /// must read `errcode` as well as `ret`. *SDK* (the code) / *observed* (the shape, and
    /// that a bad token gets it).
    pub const SESSION_EXPIRED: i64 = -14;
    /// `{"ret": -2, "errmsg": …}`: a `sendmessage` refused: no or another user's
    /// `context_token` (`prepare failed`), more than
    /// [`REPLIES_PER_CONTEXT`](super::REPLIES_PER_CONTEXT) replies to one, a text over
    /// [`MAX_TEXT_BYTES`](super::MAX_TEXT_BYTES), throttling (`rate limited`), a malformed
    /// message. *observed* (the code for each cause; the fake's `errmsg` for the malformed
    /// ones).
    pub const REJECTED: i64 = -2;
    /// `{"ret": -1, "errmsg": …}`: a bad parameter of `getuploadurl` (observed for a dummy
    /// `to_user_id`), `getconfig`, `sendtyping`, `get_bot_qrcode`, or a `get_updates_buf`
    /// the fake never issued. *observed* / *fake*.
    pub const INVALID_PARAM: i64 = -1;
}

/// A `context_token` the fake issued.
struct Context {
    user: String,
    replies: usize,
}

/// The fake iLink's state.
pub struct Wechat {
    /// `http://127.0.0.1:P`.
    base: String,
    /// `http://127.0.0.1:P/c2c`.
    cdn_base: String,
    hold: Duration,
    clock_offset: Duration,
    reply_window: Duration,
    require_app_headers: bool,
    media_full_url: bool,
    upload_full_url: bool,
    tokens: Tokens<Instant>,
    failures: Script<Failure>,
    /// The newest `seq` pushed.
    seq: u64,
    log: Vec<Pushed>,
    waiting_polls: usize,
    contexts: HashMap<String, Context>,
    /// User -> when they last wrote, on the fake's clock.
    last_inbound: HashMap<String, Instant>,
    tickets: HashMap<String, String>,
    typing: Vec<Typing>,
    sent: Vec<Sent>,
    uploads: Vec<Upload>,
    upload_params: HashMap<String, usize>,
    hosted: HashMap<String, cdn::Hosted>,
    qrcodes: Vec<QrCode>,
    next: u64,
}

impl Wechat {
    fn new(logged_in: bool) -> Self {
        let mut tokens = Tokens::default();
        if logged_in {
            tokens.issue(BOT_TOKEN.to_owned(), Instant::now() + TOKEN_LIFETIME);
        }
        Self {
            base: String::new(),
            cdn_base: String::new(),
            hold: LONG_POLL_HOLD,
            clock_offset: Duration::ZERO,
            reply_window: REPLY_WINDOW,
            require_app_headers: true,
            media_full_url: true,
            upload_full_url: false,
            tokens,
            failures: Script::default(),
            seq: 0,
            log: Vec::new(),
            waiting_polls: 0,
            contexts: HashMap::new(),
            last_inbound: HashMap::new(),
            tickets: HashMap::new(),
            typing: Vec::new(),
            sent: Vec::new(),
            uploads: Vec::new(),
            upload_params: HashMap::new(),
            hosted: HashMap::new(),
            qrcodes: Vec::new(),
            next: 0,
        }
    }

    fn next(&mut self) -> u64 {
        self.next += 1;
        self.next
    }

    /// Now on the fake's clock.
    fn now(&self) -> Instant {
        Instant::now() + self.clock_offset
    }
}

impl Platform for Wechat {
    type Call = Call;
}

/// What the handlers and [`FakeWechat`] share.
pub(crate) type Shared = crate::skeleton::Shared<Wechat>;

/// The running fake. Dropping it stops the server.
pub type FakeWechat = Fake<Wechat>;

/// Largest request body read (CDN uploads included).
const MAX_BODY: usize = 64 << 20;

/// The cursor a client holds after `seq`: opaque base64 (iLink's is too, README: "treat it
/// as an opaque cursor").
fn cursor_of(seq: u64) -> String {
    STANDARD.encode(format!("fake-get-updates-buf:{BOT_ID}:{seq}"))
}

/// The `seq` a cursor points after (`""`: before everything); `None` for a cursor the fake
/// never issued.
fn cursor_seq(cursor: &str) -> Option<u64> {
    if cursor.is_empty() {
        return Some(0);
    }
    let text = String::from_utf8(STANDARD.decode(cursor).ok()?).ok()?;
    text.strip_prefix(&format!("fake-get-updates-buf:{BOT_ID}:"))?
        .parse()
        .ok()
}

/// Holds a long poll: `check` under the lock each time the fake changes, until it answers,
/// `until` passes (`None`) or the fake stops (`None`).
async fn hold<T>(
    shared: &Shared,
    until: Instant,
    mut check: impl FnMut(&mut Wechat) -> Option<T>,
) -> Option<T> {
    loop {
        let notified = shared.changed.notified();
        if let Some(answer) = check(&mut shared.lock()) {
            return Some(answer);
        }
        if Instant::now() >= until {
            return None;
        }
        tokio::select! {
            () = shared.stop.cancelled() => return None,
            _ = tokio::time::timeout_at(until, notified) => {}
        }
    }
}

/// The route of a request (what failures and `calls_to` take).
fn route_of(head: &Head) -> &'static str {
    const BOT: &[&str] = &[
        "getupdates",
        "sendmessage",
        "getconfig",
        "sendtyping",
        "getuploadurl",
        "get_bot_qrcode",
        "get_qrcode_status",
    ];
    match head.segments().as_slice() {
        ["ilink", "bot", name] => BOT
            .iter()
            .find(|r| *r == name)
            .copied()
            .unwrap_or("unknown"),
        ["ilink", "bot", "msg", "notifystart"] => "notifystart",
        ["ilink", "bot", "msg", "notifystop"] => "notifystop",
        ["c2c", "upload"] => "cdn_upload",
        ["c2c", "download"] => "cdn_download",
        _ => "unknown",
    }
}

/// The answer of a scripted failure (`None` for a delay or a slow body: the call goes on).
fn failure_answer(state: &mut Wechat, failure: &Failure) -> Option<Answer> {
    Some(match failure {
        Failure::RateLimited => api::refused(code::REJECTED, "rate limited"),
        Failure::Error { ret, errmsg } => api::refused(*ret, errmsg),
        Failure::SessionExpired => {
            state.tokens.stale_all();
            api::session_timeout()
        }
        Failure::Http(status) => Answer::empty(*status),
        Failure::Delay(_) | Failure::SlowBody(_) => return None,
    })
}

/// Every request.
async fn handle(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let head = Head::of(&request);
    let route = route_of(&head);
    let Ok(bytes) = axum::body::to_bytes(request.into_body(), MAX_BODY).await else {
        return Answer::empty(413).into_response();
    };
    let (answer, recorded_body, slow) = answer(&shared, &head, route, &bytes).await;
    let code = answer.json_body().and_then(|b| {
        [b.get("errcode"), b.get("ret")]
            .into_iter()
            .flatten()
            .filter_map(Value::as_i64)
            .find(|&c| c != 0)
    });
    let call = Call::new(
        route,
        &head,
        true,
        recorded_body,
        (answer.status, code),
        |status, code| status == 200 && code.is_none(),
    );
    shared.record(call);
    match slow {
        Some(wait) => slow_body(&shared, answer.into_response(), wait).await,
        None => answer.into_response(),
    }
}

/// `response` with its body held after the first byte for `wait` (or until the fake
/// stops): [`Failure::SlowBody`].
async fn slow_body(shared: &Arc<Shared>, response: Response, wait: Duration) -> Response {
    let (parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_BODY).await else {
        return Answer::empty(500).into_response();
    };
    let (first, rest) = bytes.split_at(bytes.len().min(1));
    let (first, rest) = (bytes.slice_ref(first), bytes.slice_ref(rest));
    let stop = shared.stop.clone();
    let chunks = futures_util::stream::iter([Some(first), None, Some(rest)]).then(move |chunk| {
        let stop = stop.clone();
        async move {
            if chunk.is_none() {
                tokio::select! {
                    () = stop.cancelled() => {}
                    () = tokio::time::sleep(wait) => {}
                }
            }
            Ok::<_, std::convert::Infallible>(chunk.unwrap_or_default())
        }
    });
    Response::from_parts(parts, axum::body::Body::from_stream(chunks))
}

/// The answer to a request, the body to record, and how long its body is held
/// ([`Failure::SlowBody`]).
async fn answer(
    shared: &Shared,
    head: &Head,
    route: &'static str,
    bytes: &[u8],
) -> (Answer, Value, Option<Duration>) {
    use axum::http::Method;
    if route == "unknown" {
        return (Answer::empty(404), Value::Null, None);
    }
    if route.starts_with("cdn_") {
        let recorded = json!({"size": bytes.len()});
        let failure = {
            let mut state = shared.lock();
            state.failures.count(route);
            state.failures.take(route, None)
        };
        let (delay, slow) = match failure {
            Some(Failure::Delay(d)) => (Some(d), None),
            Some(Failure::SlowBody(d)) => (None, Some(d)),
            Some(f) => {
                let answer = failure_answer(&mut shared.lock(), &f);
                return (answer.unwrap_or_else(|| Answer::empty(500)), recorded, None);
            }
            None => (None, None),
        };
        let answer = cdn::handle(shared, head, route, bytes);
        delayed(shared, delay).await;
        return (answer, recorded, slow);
    }
    let body: Value = if bytes.iter().all(u8::is_ascii_whitespace) {
        Value::Null
    } else {
        match serde_json::from_slice(bytes) {
            Ok(v) => v,
            Err(_) => return (Answer::empty(400), Value::Null, None),
        }
    };
    let is_qr = matches!(route, "get_bot_qrcode" | "get_qrcode_status");
    let method_ok = match route {
        "get_bot_qrcode" => head.method == Method::GET || head.method == Method::POST,
        "get_qrcode_status" => head.method == Method::GET,
        _ => head.method == Method::POST && body.is_object(),
    };
    if !method_ok {
        let status = if head.method == Method::POST {
            400
        } else {
            405
        };
        return (Answer::empty(status), body, None);
    }
    let failure = {
        let mut state = shared.lock();
        if !is_qr && !api::authorized(&mut state, head) {
            return (api::session_timeout(), body, None);
        }
        state.failures.count(route);
        state.failures.take(route, None)
    };
    let (delay, slow) = match failure {
        Some(Failure::Delay(d)) => (Some(d), None),
        Some(Failure::SlowBody(d)) => (None, Some(d)),
        Some(f) => {
            let answer = shared.update(|s| failure_answer(s, &f));
            return (answer.unwrap_or_else(|| Answer::empty(500)), body, None);
        }
        None => (None, None),
    };
    let answer = match route {
        "getupdates" => api::get_updates(shared, head, &body).await,
        "get_qrcode_status" => login::qrcode_status(shared, head).await,
        _ => shared.update(|state| match route {
            "get_bot_qrcode" => login::bot_qrcode(state, head),
            "sendmessage" => api::send_message(state, &body),
            "getconfig" => api::get_config(state, &body),
            "sendtyping" => api::send_typing(state, &body),
            "getuploadurl" => api::get_upload_url(state, &body),
            _ => Answer::json(200, json!({"ret": 0})),
        }),
    };
    delayed(shared, delay).await;
    (answer, body, slow)
}

/// Waits a scripted delay (or until the fake stops).
async fn delayed(shared: &Shared, delay: Option<Duration>) {
    if let Some(d) = delay {
        tokio::select! {
            () = shared.stop.cancelled() => {}
            () = tokio::time::sleep(d) => {}
        }
    }
}

impl Fake<Wechat> {
    /// Starts a fake logged in as [`BOT_ID`] with [`BOT_TOKEN`] on `127.0.0.1:0`.
    pub async fn start() -> std::io::Result<Self> {
        Self::start_with(true).await
    }

    /// Starts a fake with no live token: every bot endpoint answers `-14` until a QR login.
    pub async fn start_logged_out() -> std::io::Result<Self> {
        Self::start_with(false).await
    }

    async fn start_with(logged_in: bool) -> std::io::Result<Self> {
        let fake = Fake::serve(Wechat::new(logged_in), handle, MAX_BODY).await?;
        let base = format!("http://{}", fake.addr());
        fake.with_state(|s| {
            s.cdn_base = format!("{base}/c2c");
            s.base = base;
        });
        Ok(fake)
    }

    /// The adapter's `base_url`: `http://127.0.0.1:P` (iLink's is
    /// `https://ilinkai.weixin.qq.com`; a QR login's `baseurl` is this too).
    pub fn base_url(&self) -> String {
        self.with_state(|s| s.base.clone())
    }

    /// The adapter's `cdn_base_url`: `http://127.0.0.1:P/c2c` (iLink's is
    /// `https://novac2c.cdn.weixin.qq.com/c2c`).
    pub fn cdn_base_url(&self) -> String {
        self.with_state(|s| s.cdn_base.clone())
    }

    // ---- settings --------------------------------------------------------------------

    /// How long `getupdates` and `get_qrcode_status` are held without news (default
    /// [`LONG_POLL_HOLD`]); also the `longpolling_timeout_ms` answered. For polls from now.
    pub fn set_long_poll_hold(&self, hold: Duration) {
        self.with_state(|s| s.hold = hold);
    }

    /// Moves the fake's clock forward (the [`REPLY_WINDOW`] is measured on it).
    pub fn advance_clock(&self, by: Duration) {
        self.shared.update(|s| s.clock_offset += by);
    }

    /// Whether the token headers must carry `iLink-App-Id` and a numeric
    /// `iLink-App-ClientVersion` (default true: observed, iLink answered `-14` without
    /// them).
    pub fn set_require_app_headers(&self, require: bool) {
        self.with_state(|s| s.require_app_headers = require);
    }

    /// Whether inbound media carry `media.full_url` (default true, as iLink's do now; false
    /// plays the older answers, where a client builds `<cdn>/download?encrypted_query_param=`
    /// itself). For messages pushed from now.
    pub fn set_media_full_url(&self, full_url: bool) {
        self.with_state(|s| s.media_full_url = full_url);
    }

    /// Whether `getuploadurl` answers `upload_full_url` beside `upload_param` (default
    /// false: the README's answer, where a client builds `<cdn>/upload?…` itself).
    pub fn set_upload_full_url(&self, full_url: bool) {
        self.with_state(|s| s.upload_full_url = full_url);
    }

    /// Scripts a failure of `route` (`getupdates`, `sendmessage`, `getuploadurl`,
    /// `getconfig`, `sendtyping`, `get_bot_qrcode`, `get_qrcode_status`, `cdn_upload`,
    /// `cdn_download`, …) when `trigger` says. It fires after the body and token checks.
    pub fn fail(&self, route: &str, trigger: Trigger, failure: Failure) {
        self.with_state(|s| s.failures.add(route, trigger.into(), failure));
    }

    /// Removes every scripted failure.
    pub fn clear_failures(&self) {
        self.with_state(|s| s.failures.clear());
    }

    // ---- the session -----------------------------------------------------------------

    /// The live bot token, if the session is live.
    pub fn bot_token(&self) -> Option<String> {
        self.with_state(|s| s.tokens.newest_live().map(|(t, _)| t.to_owned()))
    }

    /// Ends the session: every bot endpoint answers `{"errcode": -14, "errmsg": "session
    /// timeout"}`, a held `getupdates` at once, until a new QR login.
    pub fn expire_session(&self) {
        self.shared.update(|s| s.tokens.stale_all());
    }

    /// Every QR code issued, oldest first.
    pub fn qrcodes(&self) -> Vec<QrCode> {
        self.with_state(|s| s.qrcodes.clone())
    }

    /// The user scans the newest QR code (`wait` → `scaned`); false when there is none
    /// waiting.
    pub fn scan(&self) -> bool {
        self.shared.update(|s| s.set_qr(None, QrStatus::Scaned))
    }

    /// The user confirms on the phone (`scaned` → `confirmed`): a new bot token is issued
    /// and every older one ends. Returns the token; `None` when the newest code is not
    /// scanned.
    pub fn confirm(&self) -> Option<String> {
        self.shared.update(|s| {
            s.set_qr(None, QrStatus::Confirmed)
                .then(|| s.qr(None).and_then(|q| q.bot_token.clone()))
                .flatten()
        })
    }

    /// The newest QR code expires (`expired`); false when it was already used or expired.
    pub fn expire(&self) -> bool {
        self.shared.update(|s| s.set_qr(None, QrStatus::Expired))
    }

    /// Waits until `n` QR codes were issued, and returns the newest.
    pub async fn wait_qrcode(&self, n: usize, deadline: Duration) -> Result<QrCode, WaitTimeout> {
        let what = format!("{n} QR codes issued");
        self.wait_until(&what, deadline, |f| f.qrcodes().len() >= n)
            .await?;
        self.qrcodes().pop().ok_or_else(|| self.timeout(&what))
    }

    // ---- inbound ---------------------------------------------------------------------

    /// Queues `inbound` for `getupdates` (waking a held poll), hosting its media; returns
    /// it as queued, with its `context_token`.
    pub fn push(&self, inbound: &Inbound) -> Pushed {
        self.shared.update(|s| s.queue(inbound))
    }

    /// Queues every one of `inbound` at once, in order, so the next `getupdates` answers
    /// them in one batch (a held poll wakes once they are all queued); returns them as
    /// queued.
    pub fn push_all(&self, inbound: &[Inbound]) -> Vec<Pushed> {
        self.shared
            .update(|s| inbound.iter().map(|i| s.queue(i)).collect())
    }

    /// Delivers the message pushed as `seq` again, unchanged (its `message_id` and
    /// `context_token`), after everything queued: what a poller sees when iLink hands a
    /// message out twice (the fake's script of a redelivery; iLink repeats what follows a
    /// cursor a poller goes back to). False when there is no such message.
    pub fn redeliver(&self, seq: u64) -> bool {
        self.shared.update(|s| {
            let Some(original) = s.log.iter().find(|p| p.seq == seq).cloned() else {
                return false;
            };
            s.seq += 1;
            let mut again = original;
            again.seq = s.seq;
            again.body["seq"] = serde_json::json!(s.seq);
            s.log.push(again);
            true
        })
    }

    /// Every message pushed, in order.
    pub fn pushed(&self) -> Vec<Pushed> {
        self.with_state(|s| s.log.clone())
    }

    /// The cursor (`get_updates_buf`) a client holds once it has seen up to `seq` (0: none).
    pub fn cursor_after(&self, seq: u64) -> String {
        cursor_of(seq)
    }

    /// `getupdates` calls held now.
    pub fn waiting_polls(&self) -> usize {
        self.with_state(|s| s.waiting_polls)
    }

    /// Waits until a `getupdates` is held (the client is polling).
    pub async fn wait_polling(&self, deadline: Duration) -> Result<(), WaitTimeout> {
        self.wait_until("a held getupdates", deadline, |f| f.waiting_polls() > 0)
            .await
    }

    // ---- outbound --------------------------------------------------------------------

    /// Every accepted `sendmessage`, in order.
    pub fn sent(&self) -> Vec<Sent> {
        self.with_state(|s| s.sent.clone())
    }

    /// The accepted `sendmessage`s to `user`, in order.
    pub fn sent_to(&self, user: &str) -> Vec<Sent> {
        let mut all = self.sent();
        all.retain(|m| m.to_user_id == user);
        all
    }

    /// Waits for `n` accepted messages to `user`, and returns them.
    pub async fn wait_sent(
        &self,
        user: &str,
        n: usize,
        deadline: Duration,
    ) -> Result<Vec<Sent>, WaitTimeout> {
        let what = format!("{n} messages sent to {user}");
        self.wait_until(&what, deadline, |f| f.sent_to(user).len() >= n)
            .await?;
        Ok(self.sent_to(user))
    }

    /// Every accepted `sendtyping`, in order.
    pub fn typing(&self) -> Vec<Typing> {
        self.with_state(|s| s.typing.clone())
    }
}

#[cfg(test)]
mod tests;
