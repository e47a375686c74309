//! The gateway WebSocket (JSON, any path; `/gateway` is what `GET /gateway/bot` hands
//! out, `/resume` is READY's `resume_gateway_url`): HELLO, IDENTIFY → READY +
//! GUILD_CREATE, RESUME → replay and RESUMED, heartbeats and their ACKs, dispatches with
//! increasing `s`, and scripted server behaviour (op 7, op 9, close codes, dropped
//! sockets, raw frames, every new connection dropped at once for a while).
//!
//! Each connection's task owns its socket; the fake reaches it through a bounded queue of
//! [`OUTBOX`] frames (a frame to a full queue is dropped, as a lost frame would be).
//!
//! Sessions: an accepted IDENTIFY opens a session; events pushed while it is current are
//! logged in it (at most [`MAX_LOG`], oldest dropped) and dispatched to its connection
//! when one is live, so a RESUME after a dropped socket replays everything after the
//! client's `seq`. op 9 (`d: false`) and close codes 4000–4014 except 4000 and 4009 end
//! the session; a dropped socket and op 7 keep it resumable. Events pushed while no
//! session is current wait for the next READY.
//!
//! The fake's own rule for intents: an IDENTIFY must ask for at least [`INTENTS`], else it
//! is closed with 4014 (what Discord answers for a privileged intent not enabled in the
//! portal); with [`super::FakeDiscord::disable_message_content`] asking for
//! MESSAGE_CONTENT is refused the same way.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::Request;
use axum::response::Response;
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::frame::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

use super::events::user;
use super::{
    BOT_ID, BOT_USERNAME, Connection, Dispatched, GUILD_ID, Heartbeat, Identify, Inner, Pushed,
    Resume, Shared, TOKEN,
};
use crate::upgrade::{DropWindow, ServerSocket, accept};

/// Frames queued for one connection; beyond it a frame is dropped.
const OUTBOX: usize = 1024;
/// Events a session keeps for replay.
pub const MAX_LOG: usize = 1024;
/// The default `heartbeat_interval` of HELLO, in milliseconds (Discord's).
pub const DEFAULT_HEARTBEAT_MS: u64 = 41_250;
/// GUILDS | GUILD_MESSAGES | DIRECT_MESSAGES | MESSAGE_CONTENT: what IDENTIFY must ask for.
pub const INTENTS: u64 = 1 | (1 << 9) | (1 << 12) | MESSAGE_CONTENT;
/// The privileged MESSAGE_CONTENT intent.
pub const MESSAGE_CONTENT: u64 = 1 << 15;

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
    seq: u64,
    log: VecDeque<(u64, Value)>,
    valid: bool,
}

/// The gateway's state, inside the fake's one lock.
pub(super) struct State {
    pub(super) heartbeat_interval_ms: u64,
    pub(super) ack_heartbeats: bool,
    pub(super) message_content_enabled: bool,
    conns: Vec<Conn>,
    sessions: HashMap<String, Session>,
    current: Option<String>,
    pending: Vec<Value>,
    next_session: u64,
    pub(super) identifies: Vec<Identify>,
    pub(super) resumes: Vec<Resume>,
    pub(super) heartbeats: Vec<Heartbeat>,
    pub(super) dispatched: Vec<Dispatched>,
    pub(super) bad_frames: usize,
    /// While open, every upgrade is answered and the socket dropped at once.
    pub(super) drops: DropWindow,
}

impl Default for State {
    fn default() -> Self {
        Self {
            heartbeat_interval_ms: DEFAULT_HEARTBEAT_MS,
            ack_heartbeats: true,
            message_content_enabled: true,
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
            drops: DropWindow::default(),
        }
    }
}

impl State {
    pub(super) fn connections(&self) -> Vec<Connection> {
        self.conns.iter().map(|c| c.info.clone()).collect()
    }

    fn broadcast(&self, out: impl Fn() -> Out) {
        for conn in self.conns.iter().filter(|c| c.info.open) {
            let _ = conn.outbox.try_send(out());
        }
    }

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

    /// Logs `payload` (without `s`) in session `id` and returns it with its `s`.
    fn log(&mut self, id: &str, mut payload: Value) -> Option<Value> {
        let session = self.sessions.get_mut(id)?;
        session.seq += 1;
        payload["s"] = json!(session.seq);
        session.log.push_back((session.seq, payload.clone()));
        while session.log.len() > MAX_LOG {
            session.log.pop_front();
        }
        Some(payload)
    }

    /// Dispatches in the current session: logged and sent to its live connection.
    fn dispatch(&mut self, payload: Value) -> Option<u64> {
        let Some(id) = self.current.clone() else {
            self.pending.push(payload);
            return None;
        };
        let payload = self.log(&id, payload)?;
        let seq = payload["s"].as_u64();
        if let Some(conn) = self
            .conns
            .iter()
            .find(|c| c.info.open && c.info.session.as_deref() == Some(&id))
        {
            let _ = conn.outbox.try_send(Out::Text(payload.to_string()));
            self.dispatched.push(record(conn.info.id, &payload, false));
        }
        seq
    }
}

fn record(connection: u64, payload: &Value, replay: bool) -> Dispatched {
    Dispatched {
        connection,
        seq: payload["s"].as_u64().unwrap_or(0),
        kind: payload["t"].as_str().unwrap_or("").to_owned(),
        replay,
    }
}

/// Dispatches `payload` (an event without `s`).
pub(super) fn push(shared: &Shared, payload: Value) -> Pushed {
    let message_id = payload["d"]["id"].as_str().unwrap_or("").to_owned();
    let seq = shared.lock().gw.dispatch(payload);
    shared.notify();
    Pushed { message_id, seq }
}

/// op 7 to every open connection.
pub(super) fn reconnect(shared: &Shared) {
    shared
        .lock()
        .gw
        .broadcast(|| Out::Text(json!({"op": 7, "d": null}).to_string()));
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

/// Closes every open connection with `code`; codes that end a session end theirs.
pub(super) fn close(shared: &Shared, code: u16) {
    let mut inner = shared.lock();
    if (4001..=4014).contains(&code) && code != 4009 {
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

/// An upgrade request at any gateway path (answered and dropped at once while a drop
/// window is open).
pub(super) fn upgrade(shared: &Arc<Shared>, request: Request) -> Response {
    if shared.lock().gw.drops.take() {
        shared.notify();
        return crate::upgrade::accept_and_drop(request);
    }
    let path = request
        .uri()
        .path_and_query()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_default();
    let shared = shared.clone();
    accept(request, move |socket| run(shared, socket, path))
}

async fn run(shared: Arc<Shared>, socket: ServerSocket, path: String) {
    let (tx, mut rx) = mpsc::channel(OUTBOX);
    let (id, hello) = {
        let mut inner = shared.lock();
        let id = inner.gw.conns.len() as u64 + 1;
        inner.gw.conns.push(Conn {
            info: Connection {
                id,
                path,
                open: true,
                session: None,
            },
            outbox: tx,
        });
        let hello = json!({"op": 10, "s": null, "t": null,
            "d": {"heartbeat_interval": inner.gw.heartbeat_interval_ms}});
        (id, hello)
    };
    shared.notify();
    let (mut sink, mut stream) = socket.split();
    let close = |code: u16| {
        Message::Close(Some(CloseFrame {
            code: CloseCode::from(code),
            reason: "".into(),
        }))
    };
    if sink
        .send(Message::Text(hello.to_string().into()))
        .await
        .is_ok()
    {
        'conn: loop {
            tokio::select! {
                () = shared.stop.cancelled() => break,
                out = rx.recv() => match out {
                    Some(Out::Text(text)) => {
                        if sink.send(Message::Text(text.into())).await.is_err() {
                            break;
                        }
                    }
                    Some(Out::Close(code)) => {
                        let _ = sink.send(close(code)).await;
                        break;
                    }
                    Some(Out::Drop) | None => break,
                },
                incoming = stream.next() => match incoming {
                    Some(Ok(Message::Text(text))) => {
                        let replies = on_frame(&shared, id, text.as_str());
                        shared.notify();
                        for out in replies {
                            let sent = match out {
                                Out::Text(t) => sink.send(Message::Text(t.into())).await,
                                Out::Close(code) => {
                                    let _ = sink.send(close(code)).await;
                                    break 'conn;
                                }
                                Out::Drop => break 'conn,
                            };
                            if sent.is_err() {
                                break 'conn;
                            }
                        }
                    }
                    Some(Ok(Message::Binary(_))) => {
                        shared.lock().gw.bad_frames += 1;
                        shared.notify();
                    }
                    Some(Ok(Message::Close(_))) | None | Some(Err(_)) => break,
                    Some(Ok(_)) => {}
                },
            }
        }
    }
    if let Some(conn) = shared.lock().gw.conns.iter_mut().find(|c| c.info.id == id) {
        conn.info.open = false;
    }
    shared.notify();
}

fn on_frame(shared: &Shared, conn: u64, text: &str) -> Vec<Out> {
    let mut inner = shared.lock();
    let Ok(frame) = serde_json::from_str::<Value>(text) else {
        inner.gw.bad_frames += 1;
        return Vec::new();
    };
    let d = &frame["d"];
    match frame["op"].as_u64() {
        Some(1) => {
            inner.gw.heartbeats.push(Heartbeat {
                connection: conn,
                seq: d.as_u64(),
            });
            if inner.gw.ack_heartbeats {
                vec![Out::Text(json!({"op": 11, "d": null}).to_string())]
            } else {
                Vec::new()
            }
        }
        Some(2) => identify(&mut inner, shared.addr, conn, d),
        Some(6) => resume(&mut inner, conn, d),
        // Presence and voice updates, guild member requests: accepted, ignored.
        Some(3 | 4 | 8) => Vec::new(),
        _ => {
            inner.gw.bad_frames += 1;
            vec![Out::Close(4001)]
        }
    }
}

/// The token of a gateway frame, with or without serenity's `Bot ` prefix.
fn token_ok(token: &str) -> bool {
    token.strip_prefix("Bot ").unwrap_or(token) == TOKEN
}

fn identify(inner: &mut Inner, addr: SocketAddr, conn: u64, d: &Value) -> Vec<Out> {
    let token = d["token"].as_str().unwrap_or("").to_owned();
    let intents = d["intents"].as_u64().unwrap_or(0);
    let mut rec = Identify {
        connection: conn,
        token: token.clone(),
        intents,
        accepted: false,
    };
    let gw = &mut inner.gw;
    if !token_ok(&token) {
        gw.identifies.push(rec);
        return vec![Out::Close(4004)];
    }
    let content_refused = !gw.message_content_enabled && intents & MESSAGE_CONTENT != 0;
    if intents & INTENTS != INTENTS || content_refused {
        gw.identifies.push(rec);
        return vec![Out::Close(4014)];
    }
    rec.accepted = true;
    gw.identifies.push(rec);
    gw.next_session += 1;
    let session_id = format!("fake-session-{}", gw.next_session);
    gw.sessions.insert(
        session_id.clone(),
        Session {
            seq: 0,
            log: VecDeque::new(),
            valid: true,
        },
    );
    gw.current = Some(session_id.clone());
    if let Some(c) = gw.conns.iter_mut().find(|c| c.info.id == conn) {
        c.info.session = Some(session_id.clone());
    }
    let ready = json!({"op": 0, "t": "READY", "d": {
        "v": 10,
        "user": user(BOT_ID, BOT_USERNAME, true),
        "guilds": [{"id": GUILD_ID, "unavailable": true}],
        "session_id": session_id,
        "resume_gateway_url": format!("ws://{addr}/resume"),
        "shard": [0, 1],
        "application": {"id": BOT_ID, "flags": 0},
    }});
    let gw = &mut inner.gw;
    let mut out = Vec::new();
    for payload in [ready, guild_create()] {
        if let Some(p) = gw.log(&session_id, payload) {
            gw.dispatched.push(record(conn, &p, false));
            out.push(Out::Text(p.to_string()));
        }
    }
    for payload in std::mem::take(&mut gw.pending) {
        if let Some(p) = gw.log(&session_id, payload) {
            gw.dispatched.push(record(conn, &p, false));
            out.push(Out::Text(p.to_string()));
        }
    }
    out
}

/// GUILD_CREATE for [`GUILD_ID`], with every field serenity requires.
fn guild_create() -> Value {
    json!({"op": 0, "t": "GUILD_CREATE", "d": {
        "id": GUILD_ID, "name": "fake guild", "owner_id": "1", "icon": null,
        "afk_channel_id": null, "afk_timeout": 300, "verification_level": 0,
        "default_message_notifications": 0, "explicit_content_filter": 0, "roles": [],
        "emojis": [], "features": [], "mfa_level": 0, "application_id": null,
        "system_channel_id": null, "system_channel_flags": 0, "rules_channel_id": null,
        "vanity_url_code": null, "description": null, "banner": null, "premium_tier": 0,
        "preferred_locale": "en-US", "public_updates_channel_id": null, "nsfw_level": 0,
        "stickers": [], "premium_progress_bar_enabled": false,
        "joined_at": "2026-01-01T00:00:00.000000+00:00", "large": false, "unavailable": false,
        "member_count": 1, "voice_states": [], "members": [], "channels": [], "threads": [],
        "presences": [], "stage_instances": [], "guild_scheduled_events": [],
    }})
}

fn resume(inner: &mut Inner, conn: u64, d: &Value) -> Vec<Out> {
    let token = d["token"].as_str().unwrap_or("");
    let session_id = d["session_id"].as_str().unwrap_or("").to_owned();
    let after = d["seq"].as_u64().unwrap_or(0);
    let gw = &mut inner.gw;
    let path = gw
        .conns
        .iter()
        .find(|c| c.info.id == conn)
        .map(|c| c.info.path.clone())
        .unwrap_or_default();
    let mut rec = Resume {
        connection: conn,
        path,
        session_id: session_id.clone(),
        seq: after,
        accepted: false,
    };
    if !token_ok(token) {
        gw.resumes.push(rec);
        return vec![Out::Close(4004)];
    }
    let Some(session) = gw.sessions.get_mut(&session_id).filter(|s| s.valid) else {
        gw.resumes.push(rec);
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
    rec.accepted = true;
    gw.resumes.push(rec);
    gw.dispatched.extend(replayed);
    gw.current = Some(session_id.clone());
    for c in gw.conns.iter_mut() {
        if c.info.session.as_deref() == Some(&session_id) && c.info.id != conn {
            c.info.session = None;
        }
    }
    if let Some(c) = gw.conns.iter_mut().find(|c| c.info.id == conn) {
        c.info.session = Some(session_id.clone());
    }
    if let Some(p) = gw.log(&session_id, json!({"op": 0, "t": "RESUMED", "d": {}})) {
        gw.dispatched.push(record(conn, &p, false));
        out.push(Out::Text(p.to_string()));
    }
    out
}
