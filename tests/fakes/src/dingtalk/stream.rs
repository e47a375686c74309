//! Stream mode: `connections/open`, the upgrade at `/connect?ticket=…`, one task per
//! connection, callbacks pushed in turn across connections, SYSTEM `ping` and
//! `disconnect`, acks and redeliveries.
//!
//! A ticket opens one connection once. Each connection's task owns its socket; frames
//! reach it through a bounded queue of [`OUTBOX`] (a push to a full queue is dropped, as a
//! lost frame would be, and still counts as a delivery). A callback is delivered again
//! under the same `messageId` when it is not acked with 200 within the redelivery time;
//! SYSTEM frames are never delivered again.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message;
use tokio_util::sync::CancellationToken;

use super::{
    Ack, CLIENT_ID, CLIENT_SECRET, Connection, Delivery, Inner, MAX_REDELIVERIES, Pushed, Shared,
    TOPIC_BOT_MESSAGE, code,
};
use crate::upgrade::{ServerSocket, accept};

/// Frames queued for one connection's socket; a frame beyond it is dropped.
const OUTBOX: usize = 1024;

/// One connection's handle.
struct Conn {
    info: Connection,
    outbox: mpsc::Sender<Message>,
    close: CancellationToken,
}

/// A frame the fake sent, by `messageId`.
struct Sent {
    text: String,
    kind: &'static str,
    acked: bool,
    /// A ping's `data`, which its ack must echo.
    ping_data: Option<String>,
}

/// Stream mode's state, inside the fake's one lock.
#[derive(Default)]
pub(super) struct State {
    /// Ticket -> whether it has opened a connection.
    pub(super) tickets: HashMap<String, bool>,
    conns: Vec<Conn>,
    /// Round-robin cursor over open connections.
    turn: usize,
    /// Callbacks pushed while no client was connected, in order.
    held: VecDeque<(String, u32)>,
    frames: HashMap<String, Sent>,
    pub(super) deliveries: Vec<Delivery>,
    pub(super) acks: Vec<Ack>,
    pub(super) redeliver_after: Option<Duration>,
    /// Acks still to treat as arrived too late (recorded, not counted).
    pub(super) late_acks: usize,
    pub(super) bad_frames: usize,
    pub(super) refused: usize,
    next_frame: u64,
}

impl State {
    pub(super) fn connections(&self) -> Vec<Connection> {
        self.conns.iter().map(|c| c.info.clone()).collect()
    }

    fn next_message_id(&mut self) -> String {
        self.next_frame += 1;
        format!("fake-frame-{}", self.next_frame)
    }
}

/// `POST /v1.0/gateway/connections/open`: checks the app and its subscription, and
/// answers an endpoint and a new ticket (with characters that need URL encoding).
pub(super) fn open(inner: &mut Inner, addr: SocketAddr, body: &Value) -> (u16, Value) {
    let client_id = body.get("clientId").and_then(Value::as_str);
    let secret = body.get("clientSecret").and_then(Value::as_str);
    if client_id != Some(CLIENT_ID) || secret != Some(CLIENT_SECRET) {
        return super::rest::error(400, code::INVALID_CLIENT);
    }
    let subscribed = body
        .get("subscriptions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|s| s["type"] == "CALLBACK" && s["topic"] == TOPIC_BOT_MESSAGE);
    if !subscribed {
        return super::rest::error(400, code::INVALID_PARAMETER);
    }
    let ticket = format!("fake+ticket/{}={}", inner.next_id(), rand_word());
    inner.stream.tickets.insert(ticket.clone(), false);
    (
        200,
        json!({ "endpoint": format!("ws://{addr}/connect"), "ticket": ticket }),
    )
}

/// `GET /connect?ticket=…`: refuses a missing, unknown or used ticket (401), else
/// upgrades and runs the connection.
pub(super) fn upgrade(shared: &Arc<Shared>, request: Request) -> Response {
    let ticket = super::rest::query(request.uri()).remove("ticket");
    let fresh = {
        let mut inner = shared.lock();
        let fresh = ticket
            .as_ref()
            .and_then(|t| inner.stream.tickets.get_mut(t))
            .is_some_and(|used| !std::mem::replace(used, true));
        if !fresh {
            inner.stream.refused += 1;
        }
        fresh
    };
    let Some(ticket) = ticket.filter(|_| fresh) else {
        shared.notify();
        let body = json!({"code": code::INVALID_AUTHENTICATION, "message": "invalid ticket"});
        return (StatusCode::UNAUTHORIZED, axum::Json(body)).into_response();
    };
    let shared = shared.clone();
    accept(request, move |socket| run(shared, socket, ticket))
}

/// One connection: registers it, flushes held callbacks to it, then relays its outbox and
/// reads its acks until either side closes or the fake stops.
async fn run(shared: Arc<Shared>, socket: ServerSocket, ticket: String) {
    let (tx, rx) = mpsc::channel(OUTBOX);
    let close = CancellationToken::new();
    let id = {
        let mut inner = shared.lock();
        let id = inner.stream.conns.len() as u64 + 1;
        inner.stream.conns.push(Conn {
            info: Connection {
                id,
                ticket,
                open: true,
            },
            outbox: tx,
            close: close.clone(),
        });
        let held = std::mem::take(&mut inner.stream.held);
        for (message_id, attempt) in held {
            deliver(&mut inner.stream, &message_id, attempt);
        }
        id
    };
    shared.notify();
    crate::upgrade::relay(socket, rx, &close, &shared.stop, |message| {
        match message {
            Message::Text(text) => on_text(&shared, id, text.as_str()),
            _ => {
                shared.lock().stream.bad_frames += 1;
                shared.notify();
            }
        }
        None
    })
    .await;
    if let Some(conn) = shared
        .lock()
        .stream
        .conns
        .iter_mut()
        .find(|c| c.info.id == id)
    {
        conn.info.open = false;
    }
    shared.notify();
}

/// A text frame from a client: an ack `{code, headers: {messageId, contentType}, message,
/// data}`, or a bad frame.
fn on_text(shared: &Shared, connection: u64, text: &str) {
    let mut inner = shared.lock();
    let parsed = serde_json::from_str::<Value>(text).ok();
    let fields = parsed.as_ref().and_then(|v| {
        let code = v.get("code")?.as_i64();
        let message_id = v.pointer("/headers/messageId")?.as_str()?.to_owned();
        Some((v, code, message_id))
    });
    let Some((v, code, message_id)) = fields else {
        inner.stream.bad_frames += 1;
        drop(inner);
        shared.notify();
        return;
    };
    let late = code == Some(200) && inner.stream.late_acks > 0;
    if late {
        inner.stream.late_acks -= 1;
    }
    let known = match inner.stream.frames.get_mut(&message_id) {
        Some(sent) => {
            if code == Some(200) && !late {
                sent.acked = true;
            }
            true
        }
        None => false,
    };
    let text_of = |pointer: &str| {
        v.pointer(pointer)
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    inner.stream.acks.push(Ack {
        message_id,
        code,
        content_type: text_of("/headers/contentType"),
        message: text_of("/message"),
        data: text_of("/data"),
        known,
        connection,
        at: Instant::now(),
    });
    drop(inner);
    shared.notify();
}

/// The frame text of `kind` on `topic` with `data` (a JSON string).
fn frame_text(kind: &str, topic: &str, message_id: &str, data: &str) -> String {
    let time = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    json!({
        "specVersion": "1.0",
        "type": kind,
        "headers": {
            "appId": "fake-app-id", "connectionId": "fake-connection",
            "contentType": "application/json", "messageId": message_id,
            "time": time.to_string(), "topic": topic,
        },
        "data": data,
    })
    .to_string()
}

/// Pushes a robot message as a `CALLBACK`, and schedules its redeliveries when asked.
pub(super) fn push_callback(shared: &Arc<Shared>, message: &Value) -> Pushed {
    let mut inner = shared.lock();
    let text_of = |key: &str| message.get(key).and_then(Value::as_str).map(str::to_owned);
    let group = matches!(message.get("conversationType"), Some(v) if v == "2" || v == 2);
    if let (true, Some(cid)) = (group, text_of("conversationId")) {
        inner.groups.insert(cid);
    }
    if let Some(staff) = text_of("senderStaffId") {
        inner.users.insert(staff);
    }
    let message_id = inner.stream.next_message_id();
    let text = frame_text(
        "CALLBACK",
        TOPIC_BOT_MESSAGE,
        &message_id,
        &message.to_string(),
    );
    inner.stream.frames.insert(
        message_id.clone(),
        Sent {
            text,
            kind: "CALLBACK",
            acked: false,
            ping_data: None,
        },
    );
    deliver(&mut inner.stream, &message_id, 0);
    let redeliver = inner.stream.redeliver_after;
    drop(inner);
    shared.notify();
    if let Some(after) = redeliver {
        tokio::spawn(redeliver_loop(shared.clone(), message_id.clone(), after));
    }
    Pushed {
        message_id,
        msg_id: text_of("msgId"),
    }
}

/// Sends `text` as it is to the next open connection.
pub(super) fn push_raw(shared: &Shared, text: &str) -> bool {
    let mut inner = shared.lock();
    let Some(index) = next_open(&mut inner.stream) else {
        return false;
    };
    let sent = inner.stream.conns[index]
        .outbox
        .try_send(Message::Text(text.to_owned().into()))
        .is_ok();
    drop(inner);
    shared.notify();
    sent
}

/// Sends a SYSTEM frame of `topic` to every open connection; returns their `messageId`s.
pub(super) fn system(shared: &Shared, topic: &'static str) -> Vec<String> {
    let mut inner = shared.lock();
    let open: Vec<usize> = (0..inner.stream.conns.len())
        .filter(|&i| inner.stream.conns[i].info.open)
        .collect();
    let mut ids = Vec::new();
    for index in open {
        let message_id = inner.stream.next_message_id();
        let data = match topic {
            "ping" => json!({ "opaque": format!("fake-ping-{}", rand_word()) }),
            _ => json!({ "reason": "the fake rotates its gateway" }),
        }
        .to_string();
        let text = frame_text("SYSTEM", topic, &message_id, &data);
        let conn = &inner.stream.conns[index];
        let _ = conn.outbox.try_send(Message::Text(text.clone().into()));
        let connection = conn.info.id;
        inner.stream.deliveries.push(Delivery {
            message_id: message_id.clone(),
            kind: "SYSTEM",
            connection,
            attempt: 0,
            at: Instant::now(),
        });
        let ping_data = (topic == "ping").then_some(data);
        inner.stream.frames.insert(
            message_id.clone(),
            Sent {
                text,
                kind: "SYSTEM",
                acked: false,
                ping_data,
            },
        );
        ids.push(message_id);
    }
    drop(inner);
    shared.notify();
    ids
}

/// Whether the ping `message_id` was acked 200 with its own `data`; `None` while unacked.
pub(super) fn ping_echoed(state: &State, message_id: &str) -> Option<bool> {
    let sent = state.frames.get(message_id)?;
    let ack = state.acks.iter().find(|a| a.message_id == message_id)?;
    Some(ack.code == Some(200) && ack.data.is_some() && ack.data == sent.ping_data)
}

/// Closes every open connection from the server side.
pub(super) fn close_all(shared: &Shared) {
    for conn in &shared.lock().stream.conns {
        conn.close.cancel();
    }
}

/// Delivers `message_id` again every `after` until it is acked, [`MAX_REDELIVERIES`]
/// times at most.
async fn redeliver_loop(shared: Arc<Shared>, message_id: String, after: Duration) {
    for attempt in 1..=MAX_REDELIVERIES {
        tokio::select! {
            () = shared.stop.cancelled() => return,
            () = tokio::time::sleep(after) => {}
        }
        let mut inner = shared.lock();
        match inner.stream.frames.get(&message_id) {
            Some(sent) if !sent.acked => deliver(&mut inner.stream, &message_id, attempt),
            _ => return,
        }
        drop(inner);
        shared.notify();
    }
}

/// The index of the next open connection in turn.
fn next_open(state: &mut State) -> Option<usize> {
    let open: Vec<usize> = (0..state.conns.len())
        .filter(|&i| state.conns[i].info.open && !state.conns[i].outbox.is_closed())
        .collect();
    if open.is_empty() {
        return None;
    }
    let index = open[state.turn % open.len()];
    state.turn = state.turn.wrapping_add(1);
    Some(index)
}

/// Sends one delivery of the callback `message_id` to the next open connection, or holds
/// it when none is open.
fn deliver(state: &mut State, message_id: &str, attempt: u32) {
    let Some(index) = next_open(state) else {
        state.held.push_back((message_id.to_owned(), attempt));
        return;
    };
    let Some(sent) = state.frames.get(message_id) else {
        return;
    };
    let conn = &state.conns[index];
    let _ = conn
        .outbox
        .try_send(Message::Text(sent.text.clone().into()));
    state.deliveries.push(Delivery {
        message_id: message_id.to_owned(),
        kind: sent.kind,
        connection: conn.info.id,
        attempt,
        at: Instant::now(),
    });
}

/// A short random word (tickets, ping data).
fn rand_word() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!("{nanos:08x}")
}
