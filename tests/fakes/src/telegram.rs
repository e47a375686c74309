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
//! an unknown message is "message to edit not found".
//!
//! Test hooks: [`FakeTelegram::inject`] queues a user's message ([`Incoming`]),
//! [`FakeTelegram::forget_offset`] redelivers what was already confirmed,
//! [`FakeTelegram::fail`] scripts a failure for the Nth call of a method (or the first
//! edit to a given text), [`FakeTelegram::deliver_webhook`] plays Telegram posting to the
//! registered webhook, and [`FakeTelegram::wait_for`] waits for a condition over the
//! recorded calls with a deadline, never a sleep.

mod incoming;
mod methods;

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::extract::{FromRequest, Multipart, Request, State};
use axum::http::{Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

pub use incoming::Incoming;

/// The default bot token the fake accepts.
pub const TOKEN: &str = "123456:FAKE-token_for-tests";
/// The default bot username.
pub const BOT_USERNAME: &str = "ThisBot";
/// The bot's user id.
pub const BOT_ID: i64 = 7_000_000_001;
/// Telegram's message length limit in UTF-16 code units.
pub const MAX_TEXT_UTF16: usize = 4096;
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
}

/// When a scripted failure fires.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Trigger {
    /// On the Nth call (1-based, counting every call) of the method.
    Nth(usize),
    /// On the first call of the method whose `text` equals this.
    TextEquals(String),
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
    /// Current text (caption for files).
    pub text: String,
    /// The message it replies to.
    pub reply_to: Option<i64>,
    /// `text`, `photo` or `document`.
    pub kind: &'static str,
    /// For files: the stored file id.
    pub file_id: String,
    /// Successful edits so far.
    pub edits: usize,
}

/// A wait that reached its deadline.
pub struct WaitTimeout {
    what: String,
    calls: Vec<Call>,
}

impl std::fmt::Debug for WaitTimeout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "timed out waiting for {}; calls so far:", self.what)?;
        for c in &self.calls {
            writeln!(f, "  {} {} {}", c.status, c.method, c.params)?;
        }
        Ok(())
    }
}

impl std::fmt::Display for WaitTimeout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "timed out waiting for {}", self.what)
    }
}

impl std::error::Error for WaitTimeout {}

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

struct Rule {
    method: String,
    trigger: Trigger,
    failure: Failure,
}

pub(crate) struct Inner {
    /// Updates not yet confirmed, in id order.
    pending: Vec<Value>,
    /// Updates confirmed by an offset, kept for [`FakeTelegram::forget_offset`].
    confirmed: Vec<Value>,
    next_update_id: i64,
    next_message_id: i64,
    ignore_offset_once: bool,
    webhook: Option<(String, Option<String>)>,
    calls: Vec<Call>,
    counts: HashMap<String, usize>,
    rules: Vec<Rule>,
    messages: Vec<BotMessage>,
    files: HashMap<String, Vec<u8>>,
    menus: BTreeMap<Option<String>, Vec<(String, String)>>,
}

impl Inner {
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

    fn store_file(&mut self, bytes: Vec<u8>) -> String {
        let id = format!("file-{}", self.files.len() + 1);
        self.files.insert(id.clone(), bytes);
        id
    }

    /// Confirms every pending update below `offset`.
    fn confirm_below(&mut self, offset: i64) {
        let (done, keep): (Vec<_>, Vec<_>) =
            self.pending.drain(..).partition(|u| update_id(u) < offset);
        self.confirmed.extend(done);
        self.pending = keep;
    }

    /// Fires the first matching rule for this call, if any.
    fn scripted_failure(&mut self, method: &str, params: &Value) -> Option<Answer> {
        let count = self.counts.get(method).copied().unwrap_or(0);
        let text = params.get("text").and_then(Value::as_str);
        let index = self.rules.iter().position(|r| {
            r.method == method
                && match &r.trigger {
                    Trigger::Nth(n) => *n == count,
                    Trigger::TextEquals(t) => text == Some(t.as_str()),
                }
        })?;
        let rule = self.rules.remove(index);
        Some(match rule.failure {
            Failure::RetryAfter(secs) => Answer {
                status: 429,
                body: json!({"ok": false, "error_code": 429,
                    "description": format!("Too Many Requests: retry after {secs}"),
                    "parameters": {"retry_after": secs}}),
            },
            Failure::NotModified => Answer::error(
                400,
                "Bad Request: message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message",
            ),
            Failure::MessageToEditNotFound => {
                Answer::error(400, "Bad Request: message to edit not found")
            }
            Failure::CantBeEdited => Answer::error(400, "Bad Request: message can't be edited"),
            Failure::Status(code, description) => Answer::error(code, &description),
        })
    }
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

    fn error(code: u16, description: &str) -> Self {
        Self {
            status: code,
            body: json!({"ok": false, "error_code": code, "description": description}),
        }
    }
}

impl IntoResponse for Answer {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        (status, axum::Json(self.body)).into_response()
    }
}

struct Shared {
    token: String,
    bot: Value,
    inner: Mutex<Inner>,
    changed: Notify,
    stop: CancellationToken,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The running fake. Dropping it stops the server.
pub struct FakeTelegram {
    addr: SocketAddr,
    shared: Arc<Shared>,
}

impl Drop for FakeTelegram {
    fn drop(&mut self) {
        self.shared.stop.cancel();
    }
}

impl FakeTelegram {
    /// Starts a fake for bot `@ThisBot` with token [`TOKEN`].
    pub async fn start() -> std::io::Result<Self> {
        Self::start_with(TOKEN, BOT_USERNAME).await
    }

    /// Starts a fake with another token and username.
    pub async fn start_with(token: &str, username: &str) -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            token: token.to_owned(),
            bot: json!({"id": BOT_ID, "is_bot": true, "first_name": "Fake Bridge", "username": username}),
            inner: Mutex::new(Inner {
                pending: Vec::new(),
                confirmed: Vec::new(),
                next_update_id: 500_000_000,
                next_message_id: 1000,
                ignore_offset_once: false,
                webhook: None,
                calls: Vec::new(),
                counts: HashMap::new(),
                rules: Vec::new(),
                messages: Vec::new(),
                files: HashMap::new(),
                menus: BTreeMap::new(),
            }),
            changed: Notify::new(),
            stop: CancellationToken::new(),
        });
        let app = Router::new().fallback(handle).with_state(shared.clone());
        let stop = shared.stop.clone();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(stop.cancelled_owned())
                .await;
        });
        Ok(Self { addr, shared })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The base URL to configure as `api_url`.
    pub fn api_url(&self) -> String {
        format!("http://{}", self.addr)
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
                r["from"] = self.shared.bot.clone();
                r["text"] = json!(m.text);
            }
            r
        });
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
        self.shared.changed.notify_waiters();
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
        self.shared.changed.notify_waiters();
    }

    /// Updates queued and not yet confirmed.
    pub fn pending_updates(&self) -> Vec<Value> {
        self.shared.lock().pending.clone()
    }

    /// Scripts a failure of `method`.
    pub fn fail(&self, method: &str, trigger: Trigger, failure: Failure) {
        self.shared.lock().rules.push(Rule {
            method: method.to_owned(),
            trigger,
            failure,
        });
    }

    /// Scripts a failure of the Nth `editMessageText` (1-based).
    pub fn fail_nth_edit(&self, n: usize, failure: Failure) {
        self.fail("editMessageText", Trigger::Nth(n), failure);
    }

    /// Every call so far.
    pub fn calls(&self) -> Vec<Call> {
        self.shared.lock().calls.clone()
    }

    /// Every call of `method` so far.
    pub fn calls_to(&self, method: &str) -> Vec<Call> {
        self.calls()
            .into_iter()
            .filter(|c| c.method == method)
            .collect()
    }

    /// The bot's messages in `chat_id`, oldest first, as they look now.
    pub fn bot_messages(&self, chat_id: i64) -> Vec<BotMessage> {
        self.shared
            .lock()
            .messages
            .iter()
            .filter(|m| m.chat_id == chat_id)
            .cloned()
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

    /// Waits until `condition` holds over the calls, or `deadline` passes.
    pub async fn wait_for(
        &self,
        what: &str,
        deadline: Duration,
        condition: impl Fn(&[Call]) -> bool,
    ) -> Result<Vec<Call>, WaitTimeout> {
        let until = Instant::now() + deadline;
        loop {
            let notified = self.shared.changed.notified();
            let calls = self.calls();
            if condition(&calls) {
                return Ok(calls);
            }
            if tokio::time::timeout_at(until, notified).await.is_err() {
                return Err(WaitTimeout {
                    what: what.to_owned(),
                    calls,
                });
            }
        }
    }

    /// Waits for the first call matching `matches`.
    pub async fn wait_for_call(
        &self,
        what: &str,
        deadline: Duration,
        matches: impl Fn(&Call) -> bool,
    ) -> Result<Call, WaitTimeout> {
        let calls = self
            .wait_for(what, deadline, |calls| calls.iter().any(&matches))
            .await?;
        calls
            .into_iter()
            .find(|c| matches(c))
            .ok_or_else(|| WaitTimeout {
                what: what.to_owned(),
                calls: Vec::new(),
            })
    }
}

/// Every request: `/bot<token>/<method>` or `/file/bot<token>/<path>`.
async fn handle(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let path = request.uri().path().to_owned();
    if let Some(rest) = path.strip_prefix("/file/bot") {
        return download(&shared, rest, request.method());
    }
    let Some((token, method)) = path.strip_prefix("/bot").and_then(|r| r.split_once('/')) else {
        return Answer::error(404, "Not Found").into_response();
    };
    let method = method.to_owned();
    if token != shared.token {
        record(&shared, &method, Value::Null, 401, None);
        return Answer::error(401, "Unauthorized").into_response();
    }
    let (params, upload) = match parse_params(request).await {
        Ok(parsed) => parsed,
        Err(answer) => return answer.into_response(),
    };
    let scripted = {
        let mut inner = shared.lock();
        *inner.counts.entry(method.clone()).or_default() += 1;
        inner.scripted_failure(&method, &params)
    };
    if method == "getUpdates" && scripted.is_none() {
        return get_updates(&shared, params).await.into_response();
    }
    let answer = {
        let mut inner = shared.lock();
        match scripted {
            Some(failure) => failure,
            None => match method.as_str() {
                "getMe" => Answer::ok(shared.bot.clone()),
                "deleteWebhook" => {
                    inner.webhook = None;
                    Answer::ok(json!(true))
                }
                "setWebhook" => methods::set_webhook(&mut inner, &params),
                "setMyCommands" => methods::set_my_commands(&mut inner, &params),
                "sendMessage" => methods::send_message(&mut inner, &params, &shared.bot),
                "editMessageText" => methods::edit_message_text(&mut inner, &params, &shared.bot),
                "sendPhoto" => {
                    methods::send_file(&mut inner, &params, &shared.bot, "photo", upload)
                }
                "sendDocument" => {
                    methods::send_file(&mut inner, &params, &shared.bot, "document", upload)
                }
                "getFile" => methods::get_file(&inner, &params),
                _ => Answer::error(404, "Not Found: method not found"),
            },
        }
    };
    let result = answer.body.get("result").cloned();
    record(&shared, &method, params, answer.status, result);
    answer.into_response()
}

fn record(
    shared: &Shared,
    method: &str,
    params: Value,
    status: u16,
    result: Option<Value>,
) -> usize {
    let mut inner = shared.lock();
    inner.calls.push(Call {
        method: method.to_owned(),
        params,
        at: Instant::now(),
        status,
        result,
    });
    let index = inner.calls.len() - 1;
    drop(inner);
    shared.changed.notify_waiters();
    index
}

async fn get_updates(shared: &Shared, params: Value) -> Answer {
    let index = record(shared, "getUpdates", params.clone(), 0, None);
    let timeout = methods::int(&params, "timeout").unwrap_or(0).max(0) as u64;
    let limit = methods::int(&params, "limit")
        .map(|l| l.clamp(1, MAX_POLL_LIMIT as i64) as usize)
        .unwrap_or(MAX_POLL_LIMIT);
    let offset = methods::int(&params, "offset");
    let until = Instant::now() + Duration::from_secs(timeout).min(MAX_POLL_HOLD);
    let answer = loop {
        let notified = shared.changed.notified();
        {
            let mut inner = shared.lock();
            if inner.webhook.is_some() {
                break Answer::error(
                    409,
                    "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first",
                );
            }
            let ignore = std::mem::take(&mut inner.ignore_offset_once);
            let from = match offset {
                Some(o) if o > 0 && !ignore => {
                    inner.confirm_below(o);
                    o
                }
                _ => i64::MIN,
            };
            let batch: Vec<Value> = inner
                .pending
                .iter()
                .filter(|u| update_id(u) >= from)
                .take(limit)
                .cloned()
                .collect();
            if !batch.is_empty() || Instant::now() >= until {
                break Answer::ok(Value::Array(batch));
            }
            if ignore {
                inner.ignore_offset_once = true;
            }
        }
        tokio::select! {
            () = shared.stop.cancelled() => break Answer::ok(json!([])),
            _ = tokio::time::timeout_at(until, notified) => {}
        }
    };
    {
        let mut inner = shared.lock();
        if let Some(call) = inner.calls.get_mut(index) {
            call.status = answer.status;
            call.result = answer.body.get("result").cloned();
        }
    }
    shared.changed.notify_waiters();
    answer
}

fn download(shared: &Shared, rest: &str, method: &Method) -> Response {
    let Some((token, path)) = rest.split_once('/') else {
        return StatusCode::NOT_FOUND.into_response();
    };
    if token != shared.token || method != Method::GET {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    let id = path
        .trim_start_matches("documents/")
        .trim_end_matches(".bin");
    match shared.lock().files.get(id) {
        Some(bytes) => bytes.clone().into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

/// Query, JSON, urlencoded or multipart parameters as one JSON object; the first
/// uploaded file's bytes are returned separately.
async fn parse_params(request: Request) -> Result<(Value, Option<Vec<u8>>), Answer> {
    let mut params = Map::new();
    if let Some(query) = request.uri().query() {
        for (k, v) in url_pairs(query) {
            params.insert(k, Value::String(v));
        }
    }
    let content_type = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let mut upload = None;
    if content_type.starts_with("multipart/form-data") {
        let mut form = Multipart::from_request(request, &())
            .await
            .map_err(|_| Answer::error(400, "Bad Request: invalid multipart body"))?;
        while let Ok(Some(field)) = form.next_field().await {
            let name = field.name().unwrap_or("").to_owned();
            let file_name = field.file_name().map(str::to_owned);
            let mime = field.content_type().map(str::to_owned);
            let bytes = field
                .bytes()
                .await
                .map_err(|_| Answer::error(400, "Bad Request: invalid multipart body"))?;
            match file_name {
                Some(file_name) => {
                    params.insert(
                        name,
                        json!({"file_name": file_name, "content_type": mime, "size": bytes.len()}),
                    );
                    upload.get_or_insert(bytes.to_vec());
                }
                None => {
                    params.insert(
                        name,
                        Value::String(String::from_utf8_lossy(&bytes).into_owned()),
                    );
                }
            }
        }
    } else {
        let body = axum::body::to_bytes(request.into_body(), 64 << 20)
            .await
            .map_err(|_| Answer::error(400, "Bad Request: unreadable body"))?;
        if content_type.starts_with("application/json") && !body.is_empty() {
            match serde_json::from_slice::<Value>(&body) {
                Ok(Value::Object(map)) => params.extend(map),
                _ => return Err(Answer::error(400, "Bad Request: can't parse JSON object")),
            }
        } else if content_type.starts_with("application/x-www-form-urlencoded") {
            for (k, v) in url_pairs(&String::from_utf8_lossy(&body)) {
                params.insert(k, Value::String(v));
            }
        }
    }
    Ok((Value::Object(params), upload))
}

fn url_pairs(text: &str) -> Vec<(String, String)> {
    reqwest::Url::parse(&format!("http://x/?{text}"))
        .map(|u| {
            u.query_pairs()
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect()
        })
        .unwrap_or_default()
}
