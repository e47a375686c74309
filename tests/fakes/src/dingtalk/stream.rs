//! Stream mode: `connections/open`, the upgrade at `/connect?ticket=…`, one task per
//! connection, callbacks pushed in turn across connections, SYSTEM `ping` and
//! `disconnect`, acks and redeliveries.
//!
//! A ticket opens one connection once. Connections are the skeleton's
//! ([`crate::skeleton::socket`]): frames reach one through its bounded queue (a push to a
//! full queue is dropped, as a lost frame would be, and still counts as a delivery). A
//! callback is delivered again under the same `messageId` when it is not acked with 200
//! within the redelivery time; SYSTEM frames are never delivered again.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message;

use super::{
    Ack, CLIENT_ID, CLIENT_SECRET, Connection, Delivery, DingTalk, MAX_REDELIVERIES, Pushed,
    Shared, TOPIC_BOT_MESSAGE, code,
};
use crate::skeleton::http::Head;
use crate::skeleton::socket::{Out, Sockets};
use crate::skeleton::{WithSockets, socket};

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
    sockets: Sockets<Connection>,
    /// Callbacks pushed while no client was connected, in order.
    held: VecDeque<(String, u32)>,
    frames: HashMap<String, Sent>,
    pub(super) deliveries: Vec<Delivery>,
    pub(super) acks: Vec<Ack>,
    pub(super) redeliver_after: Option<Duration>,
    /// Acks still to treat as arrived too late (recorded, not counted).
    pub(super) late_acks: usize,
    pub(super) refused: usize,
    next_frame: u64,
}

impl State {
    fn next_message_id(&mut self) -> String {
        self.next_frame += 1;
        format!("fake-frame-{}", self.next_frame)
    }
}

impl WithSockets for DingTalk {
    type Connection = Connection;

    fn sockets(&mut self) -> &mut Sockets<Connection> {
        &mut self.stream.sockets
    }
}

/// `POST /v1.0/gateway/connections/open`: checks the app and its subscription, and
/// answers an endpoint and a new ticket (with characters that need URL encoding).
pub(super) fn open(inner: &mut DingTalk, addr: SocketAddr, body: &Value) -> (u16, Value) {
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
/// upgrades; held callbacks go first on the new connection.
pub(super) fn upgrade(shared: &Arc<Shared>, head: &Head, request: Request) -> Response {
    let ticket = head.query.get("ticket").cloned();
    let fresh = shared.update(|d| {
        let fresh = ticket
            .as_ref()
            .and_then(|t| d.stream.tickets.get_mut(t))
            .is_some_and(|used| !std::mem::replace(used, true));
        if !fresh {
            d.stream.refused += 1;
        }
        fresh
    });
    let Some(ticket) = ticket.filter(|_| fresh) else {
        let body = json!({"code": code::INVALID_AUTHENTICATION, "message": "invalid ticket"});
        return (StatusCode::UNAUTHORIZED, axum::Json(body)).into_response();
    };
    let record = |id| Connection {
        id,
        ticket,
        open: true,
    };
    let flush_held = |d: &mut DingTalk, _| {
        for (message_id, attempt) in std::mem::take(&mut d.stream.held) {
            deliver(&mut d.stream, &message_id, attempt);
        }
    };
    socket::serve(shared, request, record, flush_held, |d, id, message| {
        match message {
            Message::Text(text) => on_text(d, id, text.as_str()),
            _ => d.stream.sockets.bad_frames += 1,
        }
        Vec::new()
    })
}

/// A text frame from a client: an ack `{code, headers: {messageId, contentType}, message,
/// data}`, or a bad frame.
fn on_text(d: &mut DingTalk, connection: u64, text: &str) {
    let stream = &mut d.stream;
    let parsed = serde_json::from_str::<Value>(text).ok();
    let fields = parsed.as_ref().and_then(|v| {
        let code = v.get("code")?.as_i64();
        let message_id = v.pointer("/headers/messageId")?.as_str()?.to_owned();
        Some((v, code, message_id))
    });
    let Some((v, code, message_id)) = fields else {
        stream.sockets.bad_frames += 1;
        return;
    };
    let late = code == Some(200) && stream.late_acks > 0;
    if late {
        stream.late_acks -= 1;
    }
    let known = match stream.frames.get_mut(&message_id) {
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
    stream.acks.push(Ack {
        message_id,
        code,
        content_type: text_of("/headers/contentType"),
        message: text_of("/message"),
        data: text_of("/data"),
        known,
        connection,
        at: Instant::now(),
    });
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
    let text_of = |key: &str| message.get(key).and_then(Value::as_str).map(str::to_owned);
    let (message_id, redeliver) = shared.update(|d| {
        let group = matches!(message.get("conversationType"), Some(v) if v == "2" || v == 2);
        if let (true, Some(cid)) = (group, text_of("conversationId")) {
            d.groups.insert(cid);
        }
        if let Some(staff) = text_of("senderStaffId") {
            d.users.insert(staff);
        }
        let stream = &mut d.stream;
        let message_id = stream.next_message_id();
        let text = frame_text(
            "CALLBACK",
            TOPIC_BOT_MESSAGE,
            &message_id,
            &message.to_string(),
        );
        let sent = Sent {
            text,
            kind: "CALLBACK",
            acked: false,
            ping_data: None,
        };
        stream.frames.insert(message_id.clone(), sent);
        deliver(stream, &message_id, 0);
        (message_id, stream.redeliver_after)
    });
    if let Some(after) = redeliver {
        // Delivered again under the same `messageId` until acked with 200.
        let id = message_id.clone();
        shared.retry_every(after, MAX_REDELIVERIES, move |d, attempt| {
            match d.stream.frames.get(&id) {
                Some(sent) if !sent.acked => deliver(&mut d.stream, &id, attempt),
                _ => return false,
            }
            true
        });
    }
    Pushed {
        message_id,
        msg_id: text_of("msgId"),
    }
}

/// Sends `text` as it is to the next open connection.
pub(super) fn push_raw(shared: &Shared, text: &str) -> bool {
    shared.update(|d| {
        let sockets = &mut d.stream.sockets;
        sockets
            .next_in_turn()
            .is_some_and(|id| sockets.send(id, Out::text(text)))
    })
}

/// Sends a SYSTEM frame of `topic` to every open connection; returns their `messageId`s.
pub(super) fn system(shared: &Shared, topic: &'static str) -> Vec<String> {
    shared.update(|d| {
        let stream = &mut d.stream;
        let mut ids = Vec::new();
        for connection in stream.sockets.open_ids() {
            let message_id = stream.next_message_id();
            let data = match topic {
                "ping" => json!({ "opaque": format!("fake-ping-{}", rand_word()) }),
                _ => json!({ "reason": "the fake rotates its gateway" }),
            }
            .to_string();
            let text = frame_text("SYSTEM", topic, &message_id, &data);
            stream.sockets.send(connection, Out::text(text.clone()));
            stream.deliveries.push(Delivery {
                message_id: message_id.clone(),
                kind: "SYSTEM",
                connection,
                attempt: 0,
                at: Instant::now(),
            });
            let ping_data = (topic == "ping").then_some(data);
            let sent = Sent {
                text,
                kind: "SYSTEM",
                acked: false,
                ping_data,
            };
            stream.frames.insert(message_id.clone(), sent);
            ids.push(message_id);
        }
        ids
    })
}

/// Whether the ping `message_id` was acked 200 with its own `data`; `None` while unacked.
pub(super) fn ping_echoed(state: &State, message_id: &str) -> Option<bool> {
    let sent = state.frames.get(message_id)?;
    let ack = state.acks.iter().find(|a| a.message_id == message_id)?;
    Some(ack.code == Some(200) && ack.data.is_some() && ack.data == sent.ping_data)
}

/// Sends one delivery of the callback `message_id` to the next open connection, or holds
/// it when none is open.
fn deliver(state: &mut State, message_id: &str, attempt: u32) {
    let Some(connection) = state.sockets.next_in_turn() else {
        state.held.push_back((message_id.to_owned(), attempt));
        return;
    };
    let Some(sent) = state.frames.get(message_id) else {
        return;
    };
    state.sockets.send(connection, Out::text(sent.text.clone()));
    state.deliveries.push(Delivery {
        message_id: message_id.to_owned(),
        kind: sent.kind,
        connection,
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
