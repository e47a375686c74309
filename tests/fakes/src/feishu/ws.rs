//! The long connection: endpoint discovery, the WebSocket upgrade at `/ws`, one task per
//! connection, event pushes in turn across connections ("cluster mode"), acks and
//! re-pushes.
//!
//! The upgrade is answered by hand ([`crate::skeleton::socket`]) so the fake can refuse it
//! with Feishu's `handshake-*` headers; while a drop window is open it is answered and the
//! socket dropped at once (not recorded as a connection, counted apart). Connections are
//! the skeleton's: pushes reach one through its bounded queue (a push to a full queue is
//! dropped and counts as a delivery the client never saw, as a lost frame would be).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message;

use super::frame::{Frame, METHOD_CONTROL, METHOD_DATA};
use super::{
    APP_ID, APP_SECRET, Ack, Connection, Delivery, Feishu, MAX_REPUSHES, Pushed, Shared, code,
};
use crate::skeleton::http::Head;
use crate::skeleton::socket::{Out, Sockets};
use crate::skeleton::{WithSockets, socket};

/// A pushed event and what the fake needs to push it again.
struct Pushing {
    event_id: String,
    payload: Vec<u8>,
    parts: usize,
    acked: bool,
    attempts: u32,
}

/// The long connection's state, inside the fake's one lock.
#[derive(Default)]
pub(super) struct State {
    sockets: Sockets<Connection>,
    /// Events pushed while no client was connected, in order.
    held: Vec<(String, u32, String)>,
    events: HashMap<String, Pushing>,
    /// Frame id -> event id, for acks.
    frames: HashMap<String, String>,
    pub(super) deliveries: Vec<Delivery>,
    pub(super) acks: Vec<Ack>,
    pub(super) repush_after: Option<Duration>,
    /// Acks still to treat as arrived too late (recorded, not counted).
    pub(super) late_acks: usize,
    pub(super) refused: usize,
    next_frame: u64,
    next_seq: u64,
}

impl WithSockets for Feishu {
    type Connection = Connection;

    fn sockets(&mut self) -> &mut Sockets<Connection> {
        &mut self.ws.sockets
    }
}

/// `POST /callback/ws/endpoint` with `{AppID, AppSecret}`: the connection URL and timers.
pub(super) fn endpoint(inner: &mut Feishu, addr: SocketAddr, body: &Value) -> (u16, Value) {
    let app_id = body.get("AppID").and_then(Value::as_str);
    let secret = body.get("AppSecret").and_then(Value::as_str);
    if app_id != Some(APP_ID) {
        return (
            200,
            json!({"code": code::INVALID_PARAM, "msg": "invalid AppID"}),
        );
    }
    if secret != Some(APP_SECRET) {
        return (
            200,
            json!({"code": code::APP_SECRET_INVALID, "msg": "app secret invalid"}),
        );
    }
    let device = inner.next_id();
    let config = inner.endpoint_config.to_json();
    (
        200,
        json!({"code": 0, "msg": "ok", "data": {
            "URL": format!("ws://{addr}/ws?device_id=fake-device-{device}&service_id=1"),
            "ClientConfig": config,
        }}),
    )
}

/// `GET /ws?device_id=…&service_id=…`: refuses as scripted, else upgrades; held events
/// go first on the new connection.
pub(super) fn upgrade(shared: &Arc<Shared>, head: &Head, request: Request) -> Response {
    let refusal = |status: i32, msg: &str, autherr: Option<i64>| {
        shared.update(|f| f.ws.refused += 1);
        let mut response = (StatusCode::FORBIDDEN, msg.to_owned()).into_response();
        let headers = response.headers_mut();
        headers.insert("handshake-status", HeaderValue::from(status));
        if let Ok(v) = HeaderValue::from_str(msg) {
            headers.insert("handshake-msg", v);
        }
        if let Some(code) = autherr {
            headers.insert("handshake-autherrcode", HeaderValue::from(code));
        }
        response
    };
    let refuse = shared.lock().refuse.take();
    if let Some((status, autherr)) = refuse {
        let msg = match autherr {
            Some(code::EXCEED_CONN_LIMIT) => "exceed connection limit",
            _ if status == code::HANDSHAKE_FORBIDDEN => "forbidden",
            _ => "auth failed",
        };
        return refusal(status, msg, autherr);
    }
    let (Some(device_id), Some(service_id)) =
        (head.query.get("device_id"), head.query.get("service_id"))
    else {
        return refusal(
            code::HANDSHAKE_AUTH_FAILED,
            "device_id and service_id are required",
            None,
        );
    };
    let (device_id, service_id) = (device_id.clone(), service_id.clone());
    let record = |id| Connection {
        id,
        device_id,
        service_id,
        open: true,
        pings: 0,
    };
    let flush_held = |f: &mut Feishu, _| {
        for (event_id, attempt, frame_id) in std::mem::take(&mut f.ws.held) {
            send(&mut f.ws, &event_id, attempt, frame_id);
        }
    };
    socket::serve(shared, request, record, flush_held, |f, id, message| {
        match message {
            Message::Binary(bytes) => on_frame(f, id, &bytes),
            _ => {
                f.ws.sockets.bad_frames += 1;
                None
            }
        }
        .map(|reply| Out::Frame(Message::Binary(reply.into())))
        .into_iter()
        .collect()
    })
}

/// A frame from a client: a ping gets a pong, a data frame is an ack; anything else is
/// counted as bad.
fn on_frame(inner: &mut Feishu, conn: u64, bytes: &[u8]) -> Option<Vec<u8>> {
    let Ok(frame) = Frame::decode_bytes(bytes) else {
        inner.ws.sockets.bad_frames += 1;
        return None;
    };
    match (frame.method, frame.header("type")) {
        (METHOD_CONTROL, Some("ping")) => {
            if let Some(c) = inner.ws.sockets.get_mut(conn) {
                c.pings += 1;
            }
            let mut pong = Frame::new(METHOD_CONTROL, &[("type", "pong")]);
            pong.seq_id = frame.seq_id;
            pong.log_id = frame.log_id;
            pong.service = frame.service;
            pong.payload = inner
                .pong_config
                .map(|c| c.to_json().to_string().into_bytes());
            Some(pong.encode_to_vec())
        }
        (METHOD_DATA, _) => {
            let frame_id = frame.header("message_id").unwrap_or("").to_owned();
            let code = frame
                .payload
                .as_deref()
                .and_then(|p| serde_json::from_slice::<Value>(p).ok())
                .and_then(|v| v.get("code").and_then(Value::as_i64));
            let event_id = inner.ws.frames.get(&frame_id).cloned();
            let late = code == Some(200) && inner.ws.late_acks > 0;
            if late {
                inner.ws.late_acks -= 1;
            }
            if let (Some(event), Some(200), false) = (&event_id, code, late)
                && let Some(p) = inner.ws.events.get_mut(event)
            {
                p.acked = true;
            }
            inner.ws.acks.push(Ack {
                frame_id,
                event_id,
                code,
                biz_rt: frame.header("biz_rt").map(str::to_owned),
                connection: conn,
                at: Instant::now(),
            });
            None
        }
        _ => {
            inner.ws.sockets.bad_frames += 1;
            None
        }
    }
}

/// Makes the user message an event carries known to the REST API (replies and reactions
/// to it work); its id, if it has one.
pub(super) fn remember_message(inner: &mut Feishu, event: &Value) -> Option<String> {
    let message = event.pointer("/event/message")?;
    let message_id = message
        .get("message_id")
        .and_then(Value::as_str)?
        .to_owned();
    let chat_id = message
        .get("chat_id")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    inner.user_messages.insert(message_id.clone(), chat_id);
    Some(message_id)
}

/// Pushes an event (split into `parts` frames) and, when asked, schedules its re-pushes.
pub(super) fn push(shared: &Arc<Shared>, event: &Value, parts: usize) -> Pushed {
    let payload = event.to_string().into_bytes();
    let (event_id, message_id, frame_id, repush) = shared.update(|f| {
        let event_id = match event.pointer("/header/event_id").and_then(Value::as_str) {
            Some(id) => id.to_owned(),
            None => format!("fake-event-{}", f.next_id()),
        };
        let message_id = remember_message(f, event);
        let parts = parts.clamp(1, payload.len().max(1));
        let pushing = Pushing {
            event_id: event_id.clone(),
            payload,
            parts,
            acked: false,
            attempts: 0,
        };
        f.ws.events.insert(event_id.clone(), pushing);
        let frame_id = deliver(&mut f.ws, &event_id, 0);
        (event_id, message_id, frame_id, f.ws.repush_after)
    });
    if let Some(after) = repush {
        // Pushed again under a new frame id until acked with 200.
        let id = event_id.clone();
        shared.retry_every(after, MAX_REPUSHES, move |f, attempt| {
            match f.ws.events.get(&id) {
                Some(p) if !p.acked => deliver(&mut f.ws, &id, attempt),
                _ => return false,
            };
            true
        });
    }
    Pushed {
        event_id,
        message_id,
        frame_id,
    }
}

/// Sends one delivery of `event_id` under a new frame id to the next open connection,
/// or holds it (frame id kept) when none is open. Returns the delivery's frame id.
fn deliver(ws: &mut State, event_id: &str, attempt: u32) -> String {
    ws.next_frame += 1;
    let frame_id = format!("fake-frame-{}", ws.next_frame);
    send(ws, event_id, attempt, frame_id)
}

fn send(ws: &mut State, event_id: &str, attempt: u32, frame_id: String) -> String {
    let Some(connection) = ws.sockets.next_in_turn() else {
        ws.held
            .push((event_id.to_owned(), attempt, frame_id.clone()));
        return frame_id;
    };
    let Some(pushing) = ws.events.get_mut(event_id) else {
        return frame_id;
    };
    pushing.attempts = attempt;
    let frames = frames_for(pushing, &frame_id, &mut ws.next_seq);
    ws.frames.insert(frame_id.clone(), pushing.event_id.clone());
    for frame in frames {
        ws.sockets
            .send(connection, Out::Frame(Message::Binary(frame.into())));
    }
    ws.deliveries.push(Delivery {
        event_id: event_id.to_owned(),
        frame_id: frame_id.clone(),
        connection,
        attempt,
        at: Instant::now(),
    });
    frame_id
}

/// The data frames of one delivery: the payload cut into `parts` nearly equal pieces.
fn frames_for(pushing: &Pushing, frame_id: &str, seq: &mut u64) -> Vec<Vec<u8>> {
    let len = pushing.payload.len();
    let size = len.div_ceil(pushing.parts).max(1);
    let chunks: Vec<&[u8]> = pushing.payload.chunks(size).collect();
    let sum = chunks.len().to_string();
    let trace = format!("fake-trace-{frame_id}");
    chunks
        .iter()
        .enumerate()
        .map(|(i, chunk)| {
            *seq += 1;
            let index = i.to_string();
            let mut frame = Frame::new(
                METHOD_DATA,
                &[
                    ("type", "event"),
                    ("message_id", frame_id),
                    ("sum", &sum),
                    ("seq", &index),
                    ("trace_id", &trace),
                ],
            );
            frame.seq_id = *seq;
            frame.log_id = *seq;
            frame.service = 1;
            frame.payload = Some(chunk.to_vec());
            frame.encode_to_vec()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_split_payload_reassembles_by_seq() {
        let pushing = Pushing {
            event_id: "e".into(),
            payload: b"0123456789".to_vec(),
            parts: 3,
            acked: false,
            attempts: 0,
        };
        let mut seq = 0;
        let frames: Vec<Frame> = frames_for(&pushing, "f1", &mut seq)
            .iter()
            .map(|b| Frame::decode_bytes(b).unwrap())
            .collect();
        assert_eq!(frames.len(), 3);
        let mut joined = Vec::new();
        for (i, f) in frames.iter().enumerate() {
            assert_eq!(f.header("sum"), Some("3"));
            assert_eq!(f.header("seq"), Some(i.to_string().as_str()));
            assert_eq!(f.header("message_id"), Some("f1"));
            joined.extend(f.payload.clone().unwrap());
        }
        assert_eq!(joined, b"0123456789");
    }
}
