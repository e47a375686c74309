//! The op-code WebSocket at `/websocket`: Hello, Identify → READY, Resume → replay and
//! RESUMED, heartbeats and their ACKs, event dispatches with increasing `s`, and the
//! scripted server behaviour (op 7, op 9, close codes, dropped sockets, raw frames).
//!
//! The upgrade is answered by hand (hyper's upgrade and tungstenite's accept key), as the
//! Feishu fake does, so the crate keeps one tokio-tungstenite. Each connection's task owns
//! its socket; the fake reaches it through a bounded queue of [`OUTBOX`] frames (a frame
//! to a full queue is dropped, as a lost frame would be).
//!
//! Sessions: an accepted Identify opens a session; events pushed while it is current are
//! logged in it (at most [`MAX_LOG`], oldest dropped) and dispatched to its connection
//! when one is live, so a Resume after a dropped socket replays everything after the
//! client's `seq`. op 9 with `d: false` and close codes 4000–4008 end the session; 4009
//! and a dropped socket keep it resumable. Events pushed while no session is current wait
//! for the next READY.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures_util::{SinkExt, StreamExt};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::frame::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::{Role, frame::coding::CloseCode};

use super::events::Event;
use super::{
    BOT_ID, BOT_USERNAME, Connection, Dispatched, Heartbeat, INTENT_GROUP_AND_C2C, Identify, Inner,
    Pushed, Resume, Shared,
};

/// Frames queued for one connection; beyond it a frame is dropped.
const OUTBOX: usize = 1024;
/// Events a session keeps for replay.
pub const MAX_LOG: usize = 1024;
/// The default `heartbeat_interval` of Hello, in milliseconds (QQ's).
pub const DEFAULT_HEARTBEAT_MS: u64 = 41_250;

/// What a connection's task is told to do.
#[derive(Debug)]
enum Out {
    Text(String),
    Close(u16),
    Drop,
}

struct Conn {
    info: Connection,
    outbox: mpsc::Sender<Out>,
}

struct Session {
    /// The last `s` handed out.
    seq: u64,
    /// `(s, payload)` of every event dispatched in it, oldest first.
    log: VecDeque<(u64, Value)>,
    valid: bool,
}

/// The gateway's state, inside the fake's one lock.
pub(super) struct State {
    pub(super) heartbeat_interval_ms: u64,
    pub(super) ack_heartbeats: bool,
    conns: Vec<Conn>,
    sessions: HashMap<String, Session>,
    /// The session new events go to: the latest READY, while it is valid.
    current: Option<String>,
    /// Events pushed while no session was current; dispatched after the next READY.
    pending: Vec<Value>,
    next_session: u64,
    pub(super) identifies: Vec<Identify>,
    pub(super) resumes: Vec<Resume>,
    pub(super) heartbeats: Vec<Heartbeat>,
    pub(super) dispatched: Vec<Dispatched>,
    pub(super) bad_frames: usize,
}

impl Default for State {
    fn default() -> Self {
        Self {
            heartbeat_interval_ms: DEFAULT_HEARTBEAT_MS,
            ack_heartbeats: true,
            conns: Vec::new(),
            sessions: HashMap::new(),
            current: None,
            pending: Vec::new(),
            next_session: 0,
            identifies: Vec::new(),
            resumes: Vec::new(),
            heartbeats: Vec::new(),
            dispatched: Vec::new(),
            bad_frames: 0,
        }
    }
}

impl State {
    pub(super) fn connections(&self) -> Vec<Connection> {
        self.conns.iter().map(|c| c.info.clone()).collect()
    }

    /// Sends `out` to every open connection.
    fn broadcast(&self, out: impl Fn() -> Out) {
        for conn in self.conns.iter().filter(|c| c.info.open) {
            let _ = conn.outbox.try_send(out());
        }
    }

    /// Ends the sessions of the open connections.
    fn end_live_sessions(&mut self) {
        let live: Vec<String> = self
            .conns
            .iter()
            .filter(|c| c.info.open)
            .filter_map(|c| c.info.session.clone())
            .collect();
        for id in live {
            if let Some(s) = self.sessions.get_mut(&id) {
                s.valid = false;
            }
            if self.current.as_deref() == Some(id.as_str()) {
                self.current = None;
            }
        }
    }

    /// Dispatches `payload` (an event without `s`) in the current session: logged and
    /// sent to its live connection. Returns the `s`, or `None` when it waits for a READY.
    fn dispatch(&mut self, mut payload: Value) -> Option<u64> {
        let Some(id) = self.current.clone() else {
            self.pending.push(payload);
            return None;
        };
        let session = self.sessions.get_mut(&id)?;
        session.seq += 1;
        let seq = session.seq;
        payload["s"] = json!(seq);
        session.log.push_back((seq, payload.clone()));
        while session.log.len() > MAX_LOG {
            session.log.pop_front();
        }
        if let Some(conn) = self
            .conns
            .iter()
            .find(|c| c.info.open && c.info.ready && c.info.session.as_deref() == Some(&id))
        {
            let _ = conn.outbox.try_send(Out::Text(payload.to_string()));
            self.dispatched.push(record(conn.info.id, &payload, false));
        }
        Some(seq)
    }
}

fn record(connection: u64, payload: &Value, replay: bool) -> Dispatched {
    Dispatched {
        connection,
        seq: payload["s"].as_u64().unwrap_or(0),
        kind: payload["t"].as_str().unwrap_or("").to_owned(),
        event_id: payload["id"].as_str().unwrap_or("").to_owned(),
        replay,
    }
}

/// Pushes a message event (stamped with the fake's clock when it has no timestamp).
pub(super) fn push(shared: &Shared, event: &Event) -> Pushed {
    let mut inner = shared.lock();
    let event = event.stamped(inner.clock.now());
    inner.remember(&event);
    let seq = inner.gw.dispatch(event.payload(None));
    drop(inner);
    shared.changed.notify_waiters();
    Pushed {
        event_id: event.event_id().to_owned(),
        message_id: event.message_id().to_owned(),
        seq,
    }
}

/// op 7 to every open connection.
pub(super) fn reconnect(shared: &Shared) {
    shared
        .lock()
        .gw
        .broadcast(|| Out::Text(json!({"op": 7}).to_string()));
}

/// op 9 to every open connection; not resumable ends their sessions.
pub(super) fn invalid_session(shared: &Shared, resumable: bool) {
    let mut inner = shared.lock();
    if !resumable {
        inner.gw.end_live_sessions();
    }
    inner
        .gw
        .broadcast(|| Out::Text(json!({"op": 9, "d": resumable}).to_string()));
}

/// Closes every open connection with `code`; 4000–4008 end their sessions.
pub(super) fn close(shared: &Shared, code: u16) {
    let mut inner = shared.lock();
    if (4000..=4008).contains(&code) {
        inner.gw.end_live_sessions();
    }
    inner.gw.broadcast(|| Out::Close(code));
}

/// Drops every open socket without a close frame.
pub(super) fn drop_sockets(shared: &Shared) {
    shared.lock().gw.broadcast(|| Out::Drop);
}

/// Sends `text` as is to every open connection.
pub(super) fn send_raw(shared: &Shared, text: &str) {
    shared.lock().gw.broadcast(|| Out::Text(text.to_owned()));
}

/// `GET /websocket`: upgrades and spawns the connection's task.
pub(super) fn upgrade(shared: &Arc<Shared>, mut request: Request) -> Response {
    let key = request
        .headers()
        .get(header::SEC_WEBSOCKET_KEY)
        .map(|k| derive_accept_key(k.as_bytes()));
    let is_upgrade = request
        .headers()
        .get(header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("websocket"));
    let (Some(accept), true) = (key, is_upgrade) else {
        return (StatusCode::BAD_REQUEST, "expected a WebSocket upgrade").into_response();
    };
    let on_upgrade = hyper::upgrade::on(&mut request);
    let shared = shared.clone();
    tokio::spawn(async move {
        let Ok(upgraded) = on_upgrade.await else {
            return;
        };
        let socket =
            WebSocketStream::from_raw_socket(TokioIo::new(upgraded), Role::Server, None).await;
        run(shared, socket).await;
    });
    let mut response = Response::new(Body::empty());
    *response.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let headers = response.headers_mut();
    headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    headers.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    if let Ok(v) = HeaderValue::from_str(&accept) {
        headers.insert(header::SEC_WEBSOCKET_ACCEPT, v);
    }
    response
}

/// One connection: Hello, then frames both ways until either side ends it.
async fn run<S>(shared: Arc<Shared>, socket: WebSocketStream<S>)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let (tx, mut rx) = mpsc::channel(OUTBOX);
    let (id, hello) = {
        let mut inner = shared.lock();
        let id = inner.gw.conns.len() as u64 + 1;
        inner.gw.conns.push(Conn {
            info: Connection {
                id,
                open: true,
                session: None,
                ready: false,
            },
            outbox: tx,
        });
        let hello = json!({"op": 10, "d": {"heartbeat_interval": inner.gw.heartbeat_interval_ms}});
        (id, hello)
    };
    shared.changed.notify_waiters();
    let (mut sink, mut stream) = socket.split();
    if sink
        .send(Message::Text(hello.to_string().into()))
        .await
        .is_ok()
    {
        loop {
            tokio::select! {
                () = shared.stop.cancelled() => break,
                out = rx.recv() => match out {
                    Some(Out::Text(text)) => {
                        if sink.send(Message::Text(text.into())).await.is_err() {
                            break;
                        }
                    }
                    Some(Out::Close(code)) => {
                        let frame = CloseFrame { code: CloseCode::from(code), reason: "".into() };
                        let _ = sink.send(Message::Close(Some(frame))).await;
                        break;
                    }
                    Some(Out::Drop) | None => break,
                },
                incoming = stream.next() => match incoming {
                    Some(Ok(Message::Text(text))) => {
                        let replies = on_frame(&shared, id, text.as_str());
                        let mut failed = false;
                        for out in replies {
                            let sent = match out {
                                Out::Text(t) => sink.send(Message::Text(t.into())).await,
                                Out::Close(code) => {
                                    let frame = CloseFrame { code: CloseCode::from(code), reason: "".into() };
                                    let _ = sink.send(Message::Close(Some(frame))).await;
                                    failed = true;
                                    break;
                                }
                                Out::Drop => { failed = true; break; }
                            };
                            if sent.is_err() {
                                failed = true;
                                break;
                            }
                        }
                        shared.changed.notify_waiters();
                        if failed {
                            break;
                        }
                    }
                    Some(Ok(Message::Binary(_))) => {
                        shared.lock().gw.bad_frames += 1;
                        shared.changed.notify_waiters();
                    }
                    Some(Ok(Message::Close(_))) | None | Some(Err(_)) => break,
                    Some(Ok(_)) => {}
                },
            }
        }
    }
    {
        let mut inner = shared.lock();
        if let Some(conn) = inner.gw.conns.iter_mut().find(|c| c.info.id == id) {
            conn.info.open = false;
            conn.info.ready = false;
        }
    }
    shared.changed.notify_waiters();
}

/// A frame from a client; what to send back, in order.
fn on_frame(shared: &Shared, conn: u64, text: &str) -> Vec<Out> {
    let mut inner = shared.lock();
    let Ok(frame) = serde_json::from_str::<Value>(text) else {
        inner.gw.bad_frames += 1;
        return Vec::new();
    };
    let d = &frame["d"];
    match frame["op"].as_u64() {
        Some(1) => {
            let acked = inner.gw.ack_heartbeats;
            inner.gw.heartbeats.push(Heartbeat {
                connection: conn,
                seq: d.as_u64(),
                acked,
            });
            if acked {
                vec![Out::Text(json!({"op": 11}).to_string())]
            } else {
                Vec::new()
            }
        }
        Some(2) => identify(&mut inner, conn, d),
        Some(6) => resume(&mut inner, conn, d),
        _ => {
            inner.gw.bad_frames += 1;
            Vec::new()
        }
    }
}

/// Whether `token` is `QQBot <a valid token>`.
fn token_ok(inner: &mut Inner, token: &str) -> bool {
    token
        .strip_prefix("QQBot ")
        .is_some_and(|t| inner.check_token(t))
}

fn identify(inner: &mut Inner, conn: u64, d: &Value) -> Vec<Out> {
    let token = d["token"].as_str().unwrap_or("").to_owned();
    let intents = d["intents"].as_u64().unwrap_or(0);
    let mut record = Identify {
        connection: conn,
        token: token.clone(),
        intents,
        shard: d["shard"].clone(),
        accepted: false,
    };
    if !token_ok(inner, &token) {
        inner.gw.identifies.push(record);
        return vec![Out::Close(4004)];
    }
    if intents & INTENT_GROUP_AND_C2C == 0 {
        inner.gw.identifies.push(record);
        return vec![Out::Close(4014)];
    }
    record.accepted = true;
    inner.gw.identifies.push(record);
    let gw = &mut inner.gw;
    gw.next_session += 1;
    let session_id = format!("fake-session-{}", gw.next_session);
    gw.sessions.insert(
        session_id.clone(),
        Session {
            seq: 1,
            log: VecDeque::new(),
            valid: true,
        },
    );
    gw.current = Some(session_id.clone());
    if let Some(c) = gw.conns.iter_mut().find(|c| c.info.id == conn) {
        c.info.session = Some(session_id.clone());
        c.info.ready = true;
    }
    let ready = json!({"op": 0, "s": 1, "t": "READY", "d": {
        "version": 1,
        "session_id": session_id,
        "user": {"id": BOT_ID, "username": BOT_USERNAME, "bot": true, "status": 1},
        "shard": [0, 1],
    }});
    let mut out = vec![Out::Text(ready.to_string())];
    // Events that waited for a session, sent after READY (through the outbox, in order).
    let pending = std::mem::take(&mut gw.pending);
    let mut queued = Vec::new();
    for payload in pending {
        if let Some(session) = gw.sessions.get_mut(&session_id) {
            session.seq += 1;
            let mut payload = payload;
            payload["s"] = json!(session.seq);
            session.log.push_back((session.seq, payload.clone()));
            gw.dispatched.push(record_of(conn, &payload));
            queued.push(Out::Text(payload.to_string()));
        }
    }
    out.extend(queued);
    out
}

fn record_of(conn: u64, payload: &Value) -> Dispatched {
    record(conn, payload, false)
}

fn resume(inner: &mut Inner, conn: u64, d: &Value) -> Vec<Out> {
    let token = d["token"].as_str().unwrap_or("").to_owned();
    let session_id = d["session_id"].as_str().unwrap_or("").to_owned();
    let after = d["seq"].as_u64().unwrap_or(0);
    let mut record_resume = Resume {
        connection: conn,
        token: token.clone(),
        session_id: session_id.clone(),
        seq: after,
        accepted: false,
    };
    if !token_ok(inner, &token) {
        inner.gw.resumes.push(record_resume);
        return vec![Out::Close(4004)];
    }
    let gw = &mut inner.gw;
    let Some(session) = gw.sessions.get_mut(&session_id).filter(|s| s.valid) else {
        gw.resumes.push(record_resume);
        return vec![Out::Text(json!({"op": 9, "d": false}).to_string())];
    };
    let mut out = Vec::new();
    let mut replayed = Vec::new();
    for (seq, payload) in &session.log {
        if *seq > after {
            replayed.push(record(conn, payload, true));
            out.push(Out::Text(payload.to_string()));
        }
    }
    session.seq += 1;
    out.push(Out::Text(
        json!({"op": 0, "s": session.seq, "t": "RESUMED", "d": ""}).to_string(),
    ));
    record_resume.accepted = true;
    gw.resumes.push(record_resume);
    gw.dispatched.extend(replayed);
    gw.current = Some(session_id.clone());
    if let Some(c) = gw.conns.iter_mut().find(|c| c.info.id == conn) {
        c.info.session = Some(session_id);
        c.info.ready = true;
    }
    out
}
