//! The op-code WebSocket at `/websocket`, on the skeleton's gateway
//! ([`crate::skeleton::Gateway`], which keeps the sessions, the replay log and the
//! controls): QQ's Hello, Identify → READY (its token and intent checked), Resume → replay
//! and RESUMED, heartbeats and their ACKs.
//!
//! QQ's own: READY is `s` 1 and RESUMED takes the next `s` without being logged; an unknown
//! op is only counted as a bad frame. An event pushed while no session is current reaches
//! no session (`HOLDS_EVENTS_FOR_READY` is false): QQ documents replay only for a RESUME
//! (bot-docs `gateway/reference`, 恢复连接: events missed since its `seq`), so the fake
//! gives a new session nothing from before its READY, never more than QQ promises. Close codes end the session as QQ's table says
//! (bot-docs `gateway/error/error.md`): every code it allows no RESUME (4000–4007, 4010–4014,
//! 4900–4915) ends it; 4008, 4009 and a dropped socket keep it resumable.

use std::sync::Arc;

use axum::extract::Request;
use axum::response::Response;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use super::events::Event;
use super::{
    BOT_ID, BOT_USERNAME, Connection, Dispatched, Heartbeat, INTENT_GROUP_AND_C2C, Identify,
    Pushed, Qq, Resume, Shared,
};
use crate::skeleton::socket::{Out, Sockets};
use crate::skeleton::{Gateway, OpGateway, WithSockets, socket};

impl WithSockets for Qq {
    type Connection = Connection;

    fn sockets(&mut self) -> &mut Sockets<Connection> {
        &mut self.gw.sockets
    }
}

impl OpGateway for Qq {
    type Identify = Identify;
    type Resume = Resume;
    type Heartbeat = Heartbeat;
    type Dispatched = Dispatched;
    const RECONNECT: &'static str = r#"{"op":7}"#;
    const HOLDS_EVENTS_FOR_READY: bool = false;

    fn ends_session(code: u16) -> bool {
        matches!(code, 4000..=4007 | 4010..=4014 | 4900..=4915)
    }

    fn dispatched(connection: u64, payload: &Value, replay: bool) -> Dispatched {
        Dispatched {
            connection,
            seq: payload["s"].as_u64().unwrap_or(0),
            kind: payload["t"].as_str().unwrap_or("").to_owned(),
            event_id: payload["id"].as_str().unwrap_or("").to_owned(),
            replay,
        }
    }

    fn gateway(&mut self) -> &mut Gateway<Self> {
        &mut self.gw
    }
}

/// Pushes a message event (stamped with the fake's clock when it has no timestamp).
pub(super) fn push(shared: &Shared, event: &Event) -> Pushed {
    let (event, seq) = shared.update(|qq| {
        let event = event.stamped(qq.clock.now());
        qq.remember(&event);
        let seq = qq.gw.dispatch(event.payload(None));
        (event, seq)
    });
    Pushed {
        event_id: event.event_id().to_owned(),
        message_id: event.message_id().to_owned(),
        seq,
    }
}

/// `GET /websocket`: upgrades; the connection gets Hello first.
pub(super) fn upgrade(shared: &Arc<Shared>, request: Request) -> Response {
    let record = |id| Connection {
        id,
        open: true,
        session: None,
        ready: false,
    };
    let hello = |qq: &mut Qq, id| {
        let interval = qq.gw.heartbeat_interval_ms;
        let hello = json!({"op": 10, "d": {"heartbeat_interval": interval}});
        qq.gw.sockets.send(id, Out::text(hello.to_string()));
    };
    socket::serve(
        shared,
        request,
        record,
        hello,
        |qq, id, message| match message {
            Message::Text(text) => on_frame(qq, id, text.as_str()),
            _ => {
                qq.gw.sockets.bad_frames += 1;
                Vec::new()
            }
        },
    )
}

/// A frame from a client; what to send back, in order.
fn on_frame(qq: &mut Qq, conn: u64, text: &str) -> Vec<Out> {
    let Ok(frame) = serde_json::from_str::<Value>(text) else {
        qq.gw.sockets.bad_frames += 1;
        return Vec::new();
    };
    let d = &frame["d"];
    match frame["op"].as_u64() {
        Some(1) => {
            let acked = qq.gw.ack_heartbeats;
            qq.gw.heartbeats.push(Heartbeat {
                connection: conn,
                seq: d.as_u64(),
                acked,
            });
            acked
                .then(|| Out::text(json!({"op": 11}).to_string()))
                .into_iter()
                .collect()
        }
        Some(2) => identify(qq, conn, d),
        Some(6) => resume(qq, conn, d),
        _ => {
            qq.gw.sockets.bad_frames += 1;
            Vec::new()
        }
    }
}

/// Whether `token` is `QQBot <a valid token>`.
fn token_ok(qq: &mut Qq, token: &str) -> bool {
    token
        .strip_prefix("QQBot ")
        .is_some_and(|t| qq.check_token(t))
}

/// Marks connection `conn` ready: READY or RESUMED goes out on it.
fn ready(qq: &mut Qq, conn: u64) {
    if let Some(c) = qq.gw.sockets.get_mut(conn) {
        c.ready = true;
    }
}

fn identify(qq: &mut Qq, conn: u64, d: &Value) -> Vec<Out> {
    let token = d["token"].as_str().unwrap_or("").to_owned();
    let intents = d["intents"].as_u64().unwrap_or(0);
    let mut record = Identify {
        connection: conn,
        token: token.clone(),
        intents,
        shard: d["shard"].clone(),
        accepted: false,
    };
    let refusal = if !token_ok(qq, &token) {
        Some(4004)
    } else if intents & INTENT_GROUP_AND_C2C == 0 {
        Some(4014)
    } else {
        None
    };
    record.accepted = refusal.is_none();
    qq.gw.identifies.push(record);
    if let Some(code) = refusal {
        return vec![Out::Close(Some(code))];
    }
    // READY is `s` 1, not logged; events that waited for a session follow it.
    let session_id = qq.gw.open_session(conn, 1);
    ready(qq, conn);
    let ready = json!({"op": 0, "s": 1, "t": "READY", "d": {
        "version": 1,
        "session_id": session_id,
        "user": {"id": BOT_ID, "username": BOT_USERNAME, "bot": true, "status": 1},
        "shard": [0, 1],
    }});
    let mut out = vec![Out::text(ready.to_string())];
    out.extend(qq.gw.flush_pending(conn, &session_id));
    out
}

fn resume(qq: &mut Qq, conn: u64, d: &Value) -> Vec<Out> {
    let token = d["token"].as_str().unwrap_or("").to_owned();
    let session_id = d["session_id"].as_str().unwrap_or("").to_owned();
    let after = d["seq"].as_u64().unwrap_or(0);
    let mut record = Resume {
        connection: conn,
        token: token.clone(),
        session_id: session_id.clone(),
        seq: after,
        accepted: false,
    };
    if !token_ok(qq, &token) {
        qq.gw.resumes.push(record);
        return vec![Out::Close(Some(4004))];
    }
    let Some(mut out) = qq.gw.resume(conn, &session_id, after) else {
        qq.gw.resumes.push(record);
        return vec![Out::text(json!({"op": 9, "d": false}).to_string())];
    };
    // RESUMED takes the next `s` and is not logged.
    let seq = qq.gw.next_seq(&session_id);
    out.push(Out::text(
        json!({"op": 0, "s": seq, "t": "RESUMED", "d": ""}).to_string(),
    ));
    record.accepted = true;
    qq.gw.resumes.push(record);
    ready(qq, conn);
    out
}
