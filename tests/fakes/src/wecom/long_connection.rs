//! The long connection (document/path/101463, "建立长连接" … "保持心跳"): the upgrade at `/`,
//! the frames, `aibot_subscribe`, `ping`, the hand-over to a newer connection, pushes and
//! redeliveries, scripted failures.
//!
//! - Every frame is a JSON text frame `{"cmd", "headers": {"req_id"}, "body"}`; every
//!   client command is answered `{"headers": {"req_id"}, "errcode", "errmsg"}` (plus a
//!   `body` for the upload init and finish), with no `cmd` (documented). A frame that is
//!   not a JSON object, has no `cmd` or no non-empty `headers.req_id`, or names a `cmd`
//!   the protocol has not, is a protocol error: kept, counted in `bad_frames`, answered
//!   [`code::INVALID_PARAMETER`] (the fake's choice: WeCom's answer is not documented).
//!   Binary frames are protocol errors too, not answered. Every
//!   [`code::INVALID_PARAMETER`] answer is `{"errcode": 40058, "errmsg": "invalid Request
//!   Parameter"}` with no `headers` (observed: a public probe recorded WeCom's answers to
//!   invalid requests so), so a client cannot tell by `req_id` which request it refuses.
//! - The first frame must come within the subscribe window (the fake's, default
//!   [`SUBSCRIBE_WINDOW`](super::SUBSCRIBE_WINDOW)), else the connection is closed. A
//!   command before a successful `aibot_subscribe` is answered
//!   [`code::NOT_SUBSCRIBED`] and the connection closed (the fake's rule).
//! - `aibot_subscribe {bot_id, secret}`: the wrong pair is answered `853000 invalid bot_id
//!   or secret` (observed) and the connection is left open, unsubscribed (observed: the
//!   service did not close it within 60 s); a second subscribe on a subscribed connection
//!   is `45009` (documented: "该请求有频率保护，订阅成功后应避免反复请求"; the code is the one
//!   observed for subscribes).
//! - One live connection per bot (documented: "每个智能机器人同一时间只能保持一个有效的长连接"):
//!   when a connection subscribes, the bot's previous one gets an `aibot_event_callback`
//!   with `event.eventtype: disconnected_event` (documented) and is then closed (at once by
//!   default; the service was seen to take 2.2 s to 313 s). Pushes go to the newest.
//! - WeCom can drop a connection's subscription while the socket stays open (observed:
//!   every reply answered [`code::NOT_SUBSCRIBED`], 846609, for 57 to 79 s until WeCom
//!   closed the socket): [`FakeWecom::drop_subscription`]. Every command on it, pings
//!   included, is then answered 846609 and does nothing (a ping so answered does not reset
//!   the heartbeat, so the heartbeat timeout closes it); the client has to subscribe on a
//!   new connection.
//! - `ping` resets the heartbeat; a subscribed connection without one for the heartbeat
//!   timeout (the fake's, default [`HEARTBEAT_TIMEOUT`](super::HEARTBEAT_TIMEOUT)) is
//!   closed (documented: "若长时间未收到心跳，服务端会主动断开连接"). Other frames do not count.
//! - Callbacks are bound to the connection they went out on: a reply on another connection
//!   is `846605 invalid req_id` (observed after reconnects).
//!
//! [`code::INVALID_PARAMETER`]: super::code::INVALID_PARAMETER
//! [`code::NOT_SUBSCRIBED`]: super::code::NOT_SUBSCRIBED

use std::sync::Arc;

use axum::extract::Request;
use axum::response::Response;
use serde_json::{Value, json};
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message as WsMessage;

use super::events::{Event, Message, conversation};
use super::records::{Closed, Connection, Failure, Frame, Pushed};
use super::{
    BOT_ID, Callback, FINISHING, FakeWecom, SECRET, Shared, Wecom, code, errmsg, media, replies,
};
use crate::skeleton::socket::{self, Out};

/// How much of a bad frame [`FakeWecom::protocol_errors`] keeps, in characters.
const KEPT: usize = 200;

/// The commands a client may send.
const COMMANDS: &[&str] = &[
    "aibot_subscribe",
    "ping",
    "aibot_respond_msg",
    "aibot_respond_welcome_msg",
    "aibot_respond_update_msg",
    "aibot_send_msg",
    "aibot_upload_media_init",
    "aibot_upload_media_chunk",
    "aibot_upload_media_finish",
];

/// What a command answers: its `errcode` and, on success, an optional `body`.
pub(super) struct Answer {
    pub(super) errcode: i64,
    pub(super) body: Option<Value>,
}

impl Answer {
    pub(super) fn ok() -> Self {
        Self {
            errcode: code::OK,
            body: None,
        }
    }

    pub(super) fn with(body: Value) -> Self {
        Self {
            errcode: code::OK,
            body: Some(body),
        }
    }

    pub(super) fn err(errcode: i64) -> Self {
        Self {
            errcode,
            body: None,
        }
    }
}

impl From<Result<Answer, i64>> for Answer {
    fn from(result: Result<Answer, i64>) -> Self {
        result.unwrap_or_else(Answer::err)
    }
}

/// The frame answering `req_id` with `errcode` (and its `errmsg`), and `body` if any; a
/// [`code::INVALID_PARAMETER`] answer names no request and says WeCom's words (observed).
fn answer_frame(req_id: &str, errcode: i64, errmsg: &str, body: Option<Value>) -> Out {
    if errcode == code::INVALID_PARAMETER {
        let frame = json!({"errcode": errcode, "errmsg": super::errmsg(errcode)});
        return Out::text(frame.to_string());
    }
    let mut frame = json!({"headers": {"req_id": req_id}, "errcode": errcode, "errmsg": errmsg});
    if let Some(body) = body {
        frame["body"] = body;
    }
    Out::text(frame.to_string())
}

/// `GET /` with `Upgrade: websocket`: a new connection, watched for its first frame and
/// its heartbeats.
pub(super) fn upgrade(shared: &Arc<Shared>, request: Request) -> Response {
    let record = |id| {
        let now = Instant::now();
        Connection {
            id,
            open: true,
            subscribed: false,
            replaced: false,
            unsubscribed: false,
            pings: 0,
            closed_by: None,
            opened_at: now,
            closed_at: None,
            last_ping: now,
            spoke: false,
        }
    };
    let watched = shared.clone();
    let opened = move |_: &mut Wecom, id| {
        tokio::spawn(watch(watched, id));
    };
    let inner = shared.clone();
    socket::serve(
        shared,
        request,
        record,
        opened,
        move |s, id, frame| match frame {
            WsMessage::Text(text) => on_text(&inner, s, id, text.as_str()),
            other => {
                protocol_error(s, &format!("{other:?}"));
                Vec::new()
            }
        },
    )
}

/// Closes connection `id` from the server side, saying why.
pub(super) fn close(s: &mut Wecom, id: u64, why: Closed) {
    if let Some(c) = s.sockets.get_mut(id).filter(|c| c.open) {
        c.closed_by.get_or_insert(why);
        s.sockets.send(id, Out::Close(None));
    }
}

/// The watchdog of connection `id`: closes it when its first frame is late, or when it is
/// subscribed and its heartbeat is (real time).
async fn watch(shared: Arc<Shared>, id: u64) {
    loop {
        let deadline = shared.update(|s| {
            let (subscribe_window, heartbeat) = (s.subscribe_window, s.heartbeat_timeout);
            let c = s.sockets.get_mut(id).filter(|c| c.open)?;
            let (deadline, why) = if !c.spoke {
                (c.opened_at + subscribe_window, Closed::SubscribeTimeout)
            } else if c.subscribed && !c.replaced {
                (c.last_ping + heartbeat, Closed::Heartbeat)
            } else {
                // Spoke without subscribing (a refused secret) or replaced: nothing to
                // time; look again later.
                return Some(Instant::now() + subscribe_window.min(heartbeat));
            };
            if Instant::now() >= deadline {
                close(s, id, why);
                return None;
            }
            // Looked at again within a quarter of the timeout: a subscribe or a changed
            // setting moves the deadline.
            Some(deadline.min(Instant::now() + heartbeat / 4))
        });
        let Some(deadline) = deadline else {
            return;
        };
        tokio::select! {
            () = shared.stop.cancelled() => return,
            () = tokio::time::sleep_until(deadline) => {}
        }
    }
}

fn protocol_error(s: &mut Wecom, what: &str) {
    s.sockets.bad_frames += 1;
    s.protocol_errors.push(what.chars().take(KEPT).collect());
}

/// A text frame from connection `id`.
fn on_text(shared: &Arc<Shared>, s: &mut Wecom, id: u64, text: &str) -> Vec<Out> {
    if let Some(c) = s.sockets.get_mut(id) {
        c.spoke = true;
    }
    let parsed = serde_json::from_str::<Value>(text)
        .ok()
        .filter(Value::is_object);
    let Some(frame) = parsed else {
        protocol_error(s, text);
        let errcode = code::INVALID_PARAMETER;
        return vec![answer_frame("", errcode, "invalid json", None)];
    };
    let cmd = frame["cmd"].as_str().unwrap_or_default().to_owned();
    let req_id = frame["headers"]["req_id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let body = frame.get("body").cloned().unwrap_or(Value::Null);
    let mut record = Frame {
        connection: id,
        cmd: cmd.clone(),
        req_id: req_id.clone(),
        body: body.clone(),
        errcode: None,
        at: Instant::now(),
    };
    let refuse = |s: &mut Wecom, mut record: Frame, errcode: i64, why: &str| {
        protocol_error(s, text);
        record.errcode = Some(errcode);
        s.frames.push(record);
        vec![answer_frame(&req_id, errcode, why, None)]
    };
    if cmd.is_empty() || req_id.is_empty() {
        return refuse(s, record, code::INVALID_PARAMETER, "missing cmd or req_id");
    }
    if !COMMANDS.contains(&cmd.as_str()) {
        return refuse(s, record, code::INVALID_PARAMETER, "unknown cmd");
    }
    let dropped = s.sockets.get_mut(id).is_some_and(|c| c.unsubscribed);
    if dropped {
        // The socket stays open; nothing the command asks happens.
        record.errcode = Some(code::NOT_SUBSCRIBED);
        s.frames.push(record);
        let errmsg = errmsg(code::NOT_SUBSCRIBED);
        return vec![answer_frame(&req_id, code::NOT_SUBSCRIBED, errmsg, None)];
    }
    let subscribed = s.sockets.get_mut(id).is_some_and(|c| c.subscribed);
    if !subscribed && cmd != "aibot_subscribe" {
        record.errcode = Some(code::NOT_SUBSCRIBED);
        s.frames.push(record);
        let out = answer_frame(
            &req_id,
            code::NOT_SUBSCRIBED,
            errmsg(code::NOT_SUBSCRIBED),
            None,
        );
        if let Some(c) = s.sockets.get_mut(id) {
            c.closed_by.get_or_insert(Closed::NotSubscribed);
        }
        return vec![out, Out::Close(None)];
    }
    s.failures.count(&cmd);
    let mut failure = s.failures.take(&cmd, None);
    if cmd == "aibot_respond_msg" && body["stream"]["finish"] == true {
        s.failures.count(FINISHING);
        failure = failure.or_else(|| s.failures.take(FINISHING, None));
    }
    if let Some(Failure::Code(errcode, message)) = &failure {
        record.errcode = Some(*errcode);
        s.frames.push(record);
        return vec![answer_frame(&req_id, *errcode, message, None)];
    }
    if failure == Some(Failure::Lost) {
        s.frames.push(record);
        return Vec::new();
    }
    if failure == Some(Failure::Drop) {
        s.frames.push(record);
        if let Some(c) = s.sockets.get_mut(id) {
            c.closed_by.get_or_insert(Closed::Server);
        }
        return vec![Out::Drop];
    }
    let answer = if cmd != "ping" && !body.is_object() {
        Answer::err(code::INVALID_PARAMETER)
    } else {
        dispatch(shared, s, id, &cmd, &req_id, &body)
    };
    record.errcode = Some(answer.errcode);
    s.frames.push(record);
    let out = answer_frame(&req_id, answer.errcode, errmsg(answer.errcode), answer.body);
    match failure {
        Some(Failure::Silence) => Vec::new(),
        Some(Failure::Delay(after)) => {
            let mut out = Some(out);
            shared.retry_every(after, 1, move |s, _| {
                if let Some(out) = out.take() {
                    s.sockets.send(id, out);
                }
                false
            });
            Vec::new()
        }
        _ => vec![out],
    }
}

fn dispatch(
    shared: &Arc<Shared>,
    s: &mut Wecom,
    id: u64,
    cmd: &str,
    req_id: &str,
    body: &Value,
) -> Answer {
    match cmd {
        "aibot_subscribe" => subscribe(shared, s, id, body).into(),
        "ping" => {
            if let Some(c) = s.sockets.get_mut(id) {
                c.pings += 1;
                c.last_ping = Instant::now();
            }
            Answer::ok()
        }
        "aibot_upload_media_init" => media::init(s, body).into(),
        "aibot_upload_media_chunk" => media::chunk(s, body).into(),
        "aibot_upload_media_finish" => media::finish(s, body).into(),
        _ => replies::handle(s, id, cmd, req_id, body).into(),
    }
}

/// `aibot_subscribe {bot_id, secret}`.
fn subscribe(shared: &Arc<Shared>, s: &mut Wecom, id: u64, body: &Value) -> Result<Answer, i64> {
    let (Some(bot_id), Some(secret)) = (body["bot_id"].as_str(), body["secret"].as_str()) else {
        return Err(code::INVALID_PARAMETER);
    };
    if bot_id != BOT_ID || secret != SECRET {
        return Err(code::INVALID_CREDENTIALS);
    }
    let c = s.sockets.get_mut(id).ok_or(code::INVALID_PARAMETER)?;
    if c.subscribed {
        return Err(code::FREQ_OUT_OF_LIMIT);
    }
    c.subscribed = true;
    c.last_ping = Instant::now();
    if let Some(old) = s.current.filter(|&old| old != id) {
        replace(shared, s, old);
    }
    s.current = Some(id);
    let now = s.now();
    for req_id in std::mem::take(&mut s.held) {
        if let Some(cb) = s.callbacks.get_mut(&req_id) {
            cb.connection = Some(id);
            cb.at = now;
            let text = cb.body.to_string();
            s.sockets.send(id, Out::text(text));
            if let Some(p) = s.pushed.iter_mut().find(|p| p.req_id == req_id) {
                p.connection = Some(id);
            }
        }
    }
    Ok(Answer::ok())
}

/// The bot's connection `old` is replaced: `disconnected_event`, then a close.
fn replace(shared: &Arc<Shared>, s: &mut Wecom, old: u64) {
    let Some(c) = s.sockets.get_mut(old).filter(|c| c.open) else {
        return;
    };
    c.replaced = true;
    push_to(
        s,
        "aibot_event_callback",
        &Event::disconnected().to_json(),
        Some(old),
        false,
    );
    let delay = s.replaced_close_delay;
    if delay.is_zero() {
        close(s, old, Closed::Replaced);
    } else {
        shared.retry_every(delay, 1, move |s, _| {
            close(s, old, Closed::Replaced);
            false
        });
    }
}

/// Pushes `body` as a `cmd` frame with a new `req_id` to `connection`; returns the push.
fn push_to(
    s: &mut Wecom,
    cmd: &str,
    body: &Value,
    connection: Option<u64>,
    redelivery: bool,
) -> Pushed {
    let req_id = format!("{cmd}_fake_{:012x}", s.next());
    let frame = json!({"cmd": cmd, "headers": {"req_id": req_id}, "body": body});
    let kind = if cmd == "aibot_msg_callback" {
        cmd.to_owned()
    } else {
        body["event"]["eventtype"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    let msgid = body["msgid"].as_str().unwrap_or_default().to_owned();
    if let Some(id) = connection {
        s.sockets.send(id, Out::text(frame.to_string()));
    } else {
        s.held.push_back(req_id.clone());
    }
    let callback = Callback {
        kind,
        msgid: msgid.clone(),
        connection,
        at: s.now(),
        conversation: conversation(body),
        body: frame,
        answered: false,
    };
    s.callbacks.insert(req_id.clone(), callback);
    let pushed = Pushed {
        req_id,
        msgid,
        cmd: cmd.to_owned(),
        connection,
        redelivery,
    };
    s.pushed.push(pushed.clone());
    pushed
}

/// The connection pushes go to now: the newest subscribed one, if still open.
fn current(s: &mut Wecom) -> Option<u64> {
    let id = s.current?;
    s.sockets
        .get_mut(id)
        .filter(|c| c.open && !c.replaced)
        .map(|c| c.id)
}

impl FakeWecom {
    /// Pushes `message` in an `aibot_msg_callback` with a new `req_id` to the bot's live
    /// connection (held until one subscribes when none is). Its conversation becomes one
    /// the bot may send to.
    pub fn push(&self, message: &Message) -> Pushed {
        let body = message.to_json();
        self.shared.update(|s| {
            s.conversations.insert(conversation(&body));
            let to = current(s);
            push_to(s, "aibot_msg_callback", &body, to, false)
        })
    }

    /// Pushes `event` in an `aibot_event_callback` with a new `req_id`, as [`Self::push`].
    pub fn push_event(&self, event: &Event) -> Pushed {
        self.shared.update(|s| {
            let to = current(s);
            push_to(s, "aibot_event_callback", &event.to_json(), to, false)
        })
    }

    /// Pushes the message first pushed with `msgid` again, same body (same `msgid`), in a
    /// new callback with a new `req_id`: WeCom may call back twice ("可能因为网络等原因重复
    /// 回调", documented; there is no ack in the protocol, and when it redelivers is not
    /// documented, so a test says when). `None` if no such message was pushed.
    pub fn redeliver(&self, msgid: &str) -> Option<Pushed> {
        self.shared.update(|s| {
            let body = s
                .pushed
                .iter()
                .filter(|p| p.msgid == msgid)
                .find_map(|p| s.callbacks.get(&p.req_id))
                .map(|cb| (cb.body["cmd"].clone(), cb.body["body"].clone()))?;
            let cmd = body.0.as_str().unwrap_or("aibot_msg_callback").to_owned();
            let to = current(s);
            Some(push_to(s, &cmd, &body.1, to, true))
        })
    }

    /// Sends `text` as it is to the bot's live connection; whether there was one.
    pub fn push_raw(&self, text: &str) -> bool {
        self.shared
            .update(|s| current(s).is_some_and(|id| s.sockets.send(id, Out::text(text))))
    }

    /// Closes connection `id` from the server side (a close frame after what is queued).
    pub fn close_connection(&self, id: u64) {
        self.shared.update(|s| close(s, id, Closed::Server));
    }

    /// WeCom drops connection `id`'s subscription and keeps its socket open: from now on
    /// every command on it is answered `846609` (see the module docs) until it closes.
    /// Pushes no longer go to it.
    pub fn drop_subscription(&self, id: u64) {
        self.shared.update(|s| {
            if let Some(c) = s.sockets.get_mut(id).filter(|c| c.open) {
                c.unsubscribed = true;
            }
            if s.current == Some(id) {
                s.current = None;
            }
        });
    }

    /// The id of the connection pushes go to now, if any.
    pub fn live_connection(&self) -> Option<u64> {
        self.with_state(current)
    }
}
