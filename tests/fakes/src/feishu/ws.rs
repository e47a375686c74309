//! The long connection: endpoint discovery, the WebSocket upgrade at `/ws`, one task per
//! connection, event pushes in turn across connections ("cluster mode"), acks and
//! re-pushes.
//!
//! The upgrade is answered by hand ([`crate::upgrade`]) so the fake can refuse it with
//! Feishu's `handshake-*` headers, or, while a drop window is open, answer it and drop the
//! socket at once (not recorded as a connection, counted apart). Each connection's task owns the socket; pushes reach it through a
//! bounded queue of [`OUTBOX`] frames (a push to a full queue is dropped and counts as a
//! delivery the client never saw, as a lost frame would be).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_util::sync::CancellationToken;

use super::frame::{Frame, METHOD_CONTROL, METHOD_DATA};
use super::{
    APP_ID, APP_SECRET, Ack, Connection, Delivery, Inner, MAX_REPUSHES, Pushed, Shared, code,
};
use crate::upgrade::DropWindow;

/// Frames queued for one connection's socket; a push beyond it is dropped.
const OUTBOX: usize = 1024;

/// One connection's handle.
struct Conn {
    info: Connection,
    outbox: mpsc::Sender<Message>,
    close: CancellationToken,
}

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
    conns: Vec<Conn>,
    /// Round-robin cursor over open connections.
    turn: usize,
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
    pub(super) bad_frames: usize,
    pub(super) refused: usize,
    /// While open, every upgrade is answered and the socket dropped at once.
    pub(super) drops: DropWindow,
    next_frame: u64,
    next_seq: u64,
}

impl State {
    pub(super) fn connections(&self) -> Vec<Connection> {
        self.conns.iter().map(|c| c.info.clone()).collect()
    }
}

/// `POST /callback/ws/endpoint` with `{AppID, AppSecret}`: the connection URL and timers.
pub(super) fn endpoint(inner: &mut Inner, addr: SocketAddr, body: &Value) -> (u16, Value) {
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

/// `GET /ws?device_id=…&service_id=…`: refuses as scripted, else upgrades and spawns the
/// connection's task. Returns the response and the HTTP status for the call record.
pub(super) fn upgrade(shared: &Arc<Shared>, request: Request) -> Response {
    let query: HashMap<String, String> = super::rest::query_pairs(request.uri().query());
    let refuse = shared.lock().refuse.take();
    let refusal = |status: i32, msg: &str, autherr: Option<i64>| {
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
    if let Some((status, autherr)) = refuse {
        shared.lock().ws.refused += 1;
        let msg = match autherr {
            Some(code::EXCEED_CONN_LIMIT) => "exceed connection limit",
            _ if status == code::HANDSHAKE_FORBIDDEN => "forbidden",
            _ => "auth failed",
        };
        return refusal(status, msg, autherr);
    }
    let (Some(device_id), Some(service_id)) = (query.get("device_id"), query.get("service_id"))
    else {
        shared.lock().ws.refused += 1;
        return refusal(
            code::HANDSHAKE_AUTH_FAILED,
            "device_id and service_id are required",
            None,
        );
    };
    if shared.lock().ws.drops.take() {
        shared.changed.notify_waiters();
        return crate::upgrade::accept_and_drop(request);
    }
    let (device_id, service_id) = (device_id.clone(), service_id.clone());
    let shared = shared.clone();
    crate::upgrade::accept(request, move |socket| {
        run(shared, socket, device_id, service_id)
    })
}

/// One connection: registers it, flushes held events to it, then relays its outbox and
/// answers its frames until either side closes or the fake stops.
async fn run<S>(
    shared: Arc<Shared>,
    socket: WebSocketStream<S>,
    device_id: String,
    service_id: String,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let (tx, rx) = mpsc::channel(OUTBOX);
    let close = CancellationToken::new();
    let id = {
        let mut inner = shared.lock();
        let id = inner.ws.conns.len() as u64 + 1;
        inner.ws.conns.push(Conn {
            info: Connection {
                id,
                device_id,
                service_id,
                open: true,
                pings: 0,
            },
            outbox: tx,
            close: close.clone(),
        });
        let held = std::mem::take(&mut inner.ws.held);
        for (event_id, attempt, frame_id) in held {
            send(&mut inner.ws, &event_id, attempt, frame_id);
        }
        id
    };
    shared.changed.notify_waiters();
    crate::upgrade::relay(socket, rx, &close, &shared.stop, |message| match message {
        Message::Binary(bytes) => on_frame(&shared, id, &bytes).map(|r| Message::Binary(r.into())),
        _ => {
            shared.lock().ws.bad_frames += 1;
            shared.changed.notify_waiters();
            None
        }
    })
    .await;
    {
        let mut inner = shared.lock();
        if let Some(conn) = inner.ws.conns.iter_mut().find(|c| c.info.id == id) {
            conn.info.open = false;
        }
    }
    shared.changed.notify_waiters();
}

/// A frame from a client: a ping gets a pong, a data frame is an ack; anything else is
/// counted as bad.
fn on_frame(shared: &Shared, conn: u64, bytes: &[u8]) -> Option<Vec<u8>> {
    let mut inner = shared.lock();
    let Ok(frame) = Frame::decode_bytes(bytes) else {
        inner.ws.bad_frames += 1;
        drop(inner);
        shared.changed.notify_waiters();
        return None;
    };
    let reply = match (frame.method, frame.header("type")) {
        (METHOD_CONTROL, Some("ping")) => {
            if let Some(c) = inner.ws.conns.iter_mut().find(|c| c.info.id == conn) {
                c.info.pings += 1;
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
            inner.ws.bad_frames += 1;
            None
        }
    };
    drop(inner);
    shared.changed.notify_waiters();
    reply
}

/// Pushes an event (split into `parts` frames) and, when asked, schedules its re-pushes.
/// Makes the user message an event carries known to the REST API (replies and reactions
/// to it work); its id, if it has one.
pub(super) fn remember_message(inner: &mut Inner, event: &Value) -> Option<String> {
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

pub(super) fn push(shared: &Arc<Shared>, event: &Value, parts: usize) -> Pushed {
    let payload = event.to_string().into_bytes();
    let mut inner = shared.lock();
    let event_id = match event.pointer("/header/event_id").and_then(Value::as_str) {
        Some(id) => id.to_owned(),
        None => format!("fake-event-{}", inner.next_id()),
    };
    let message_id = remember_message(&mut inner, event);
    let parts = parts.clamp(1, payload.len().max(1));
    inner.ws.events.insert(
        event_id.clone(),
        Pushing {
            event_id: event_id.clone(),
            payload,
            parts,
            acked: false,
            attempts: 0,
        },
    );
    let frame_id = deliver(&mut inner.ws, &event_id, 0);
    let repush = inner.ws.repush_after;
    drop(inner);
    shared.changed.notify_waiters();
    if let Some(after) = repush {
        tokio::spawn(repush_loop(shared.clone(), event_id.clone(), after));
    }
    Pushed {
        event_id,
        message_id,
        frame_id,
    }
}

/// Re-pushes `event_id` every `after` until it is acked, [`MAX_REPUSHES`] times at most.
async fn repush_loop(shared: Arc<Shared>, event_id: String, after: Duration) {
    for attempt in 1..=MAX_REPUSHES {
        tokio::select! {
            () = shared.stop.cancelled() => return,
            () = tokio::time::sleep(after) => {}
        }
        let mut inner = shared.lock();
        match inner.ws.events.get(&event_id) {
            Some(p) if !p.acked => {
                deliver(&mut inner.ws, &event_id, attempt);
            }
            _ => return,
        }
        drop(inner);
        shared.changed.notify_waiters();
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
    let open: Vec<usize> = (0..ws.conns.len())
        .filter(|&i| ws.conns[i].info.open && !ws.conns[i].outbox.is_closed())
        .collect();
    if open.is_empty() {
        ws.held
            .push((event_id.to_owned(), attempt, frame_id.clone()));
        return frame_id;
    }
    let conn = open[ws.turn % open.len()];
    ws.turn = ws.turn.wrapping_add(1);
    let Some(pushing) = ws.events.get_mut(event_id) else {
        return frame_id;
    };
    pushing.attempts = attempt;
    let frames = frames_for(pushing, &frame_id, &mut ws.next_seq);
    ws.frames.insert(frame_id.clone(), pushing.event_id.clone());
    let target = &ws.conns[conn];
    for frame in frames {
        let _ = target.outbox.try_send(Message::Binary(frame.into()));
    }
    ws.deliveries.push(Delivery {
        event_id: event_id.to_owned(),
        frame_id: frame_id.clone(),
        connection: target.info.id,
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

/// Closes every open connection from the server side.
pub(super) fn close_all(shared: &Shared) {
    for conn in &shared.lock().ws.conns {
        conn.close.cancel();
    }
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
