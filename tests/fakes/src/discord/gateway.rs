//! The gateway WebSocket (JSON, any path; `/gateway` is what `GET /gateway/bot` hands
//! out, `/resume` is READY's `resume_gateway_url`): HELLO, IDENTIFY → READY +
//! GUILD_CREATE, RESUME → replay and RESUMED, heartbeats and their ACKs, dispatches with
//! increasing `s`, and scripted server behaviour (op 7, op 9, close codes, dropped
//! sockets, raw frames, every new connection dropped at once for a while, connections
//! gone silent).
//!
//! The sessions, the replay log, the connections and the controls are the skeleton's
//! ([`crate::skeleton::Gateway`]). Discord's own: READY and GUILD_CREATE are logged as the
//! session's first events, RESUMED is logged too; an event pushed while no session is
//! current reaches no session (`HOLDS_EVENTS_FOR_READY` is false: Discord gives a new
//! session only what happens after its READY, and a RESUME only what its own session
//! missed); close codes 4001–4014 except 4009 end the session (a dropped socket and op 7
//! keep it resumable); an unknown op is closed with 4001.
//!
//! Heartbeats are enforced per connection, at the interval its own HELLO gave
//! ([`super::FakeDiscord::set_heartbeat_interval`] changes it for later connections): a
//! connection that sends none for that interval and [`HEARTBEAT_GRACE`] is closed with
//! 4009 (Session timed out) and its session ended, as Discord does.
//!
//! An IDENTIFY on a connection opened at `/resume` is closed with 4000: a new session
//! belongs at the URL `GET /gateway/bot` gives (gateway.mdx, "Connecting"), the resume URL
//! only to RESUME.
//!
//! The fake's own rule for intents: an IDENTIFY must ask for at least [`INTENTS`], else it
//! is closed with 4014 (what Discord answers for a privileged intent not enabled in the
//! portal); with [`super::FakeDiscord::disable_message_content`] asking for
//! MESSAGE_CONTENT is refused the same way.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::Request;
use axum::response::Response;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use super::events::user;
use super::{
    BOT_ID, BOT_USERNAME, Connection, Discord, Dispatched, GUILD_ID, Heartbeat, Identify, Pushed,
    Resume, Shared, TOKEN,
};
use crate::skeleton::socket::{Out, Sockets};
use crate::skeleton::{Gateway, OpGateway, WithSockets, socket};

/// GUILDS | GUILD_MESSAGES | DIRECT_MESSAGES | MESSAGE_CONTENT: what IDENTIFY must ask for.
pub const INTENTS: u64 = 1 | (1 << 9) | (1 << 12) | MESSAGE_CONTENT;
/// The privileged MESSAGE_CONTENT intent.
pub const MESSAGE_CONTENT: u64 = 1 << 15;
/// How late past its interval a heartbeat may come before the connection is timed out
/// (4009): the slack Discord leaves for latency (it documents none; a client missing a
/// whole interval is timed out). serenity looks whether a heartbeat is due at least every
/// 0.5 s; two seconds keep a test on a loaded machine from being timed out for the
/// machine's sake, while a heartbeat kept at a longer, stale interval still is.
pub const HEARTBEAT_GRACE: Duration = Duration::from_secs(2);
/// How often a heartbeat watch looks at its connection at the least.
const WATCH_TICK: Duration = Duration::from_millis(100);

impl WithSockets for Discord {
    type Connection = Connection;

    fn sockets(&mut self) -> &mut Sockets<Connection> {
        &mut self.gw.sockets
    }
}

impl OpGateway for Discord {
    type Identify = Identify;
    type Resume = Resume;
    type Heartbeat = Heartbeat;
    type Dispatched = Dispatched;
    const RECONNECT: &'static str = r#"{"op":7,"d":null}"#;
    const HOLDS_EVENTS_FOR_READY: bool = false;

    fn ends_session(code: u16) -> bool {
        (4001..=4014).contains(&code) && code != 4009
    }

    fn dispatched(connection: u64, payload: &Value, replay: bool) -> Dispatched {
        Dispatched {
            connection,
            seq: payload["s"].as_u64().unwrap_or(0),
            kind: payload["t"].as_str().unwrap_or("").to_owned(),
            replay,
        }
    }

    fn gateway(&mut self) -> &mut Gateway<Self> {
        &mut self.gw
    }
}

/// Dispatches `payload` (an event without `s`).
pub(super) fn push(shared: &Shared, payload: Value) -> Pushed {
    let message_id = payload["d"]["id"].as_str().unwrap_or("").to_owned();
    let seq = shared.update(|d| d.gw.dispatch_except(payload, &d.silent));
    Pushed { message_id, seq }
}

/// An upgrade request at any gateway path; the connection gets HELLO first.
pub(super) fn upgrade(shared: &Arc<Shared>, request: Request) -> Response {
    let path = request
        .uri()
        .path_and_query()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_default();
    let record = |id| Connection {
        id,
        path,
        open: true,
        session: None,
        heartbeat_interval_ms: 0,
        timed_out: false,
    };
    let watched = shared.clone();
    let hello = move |d: &mut Discord, id| {
        let interval = d.gw.heartbeat_interval_ms;
        let hello = json!({"op": 10, "s": null, "t": null,
            "d": {"heartbeat_interval": interval}});
        d.gw.sockets.send(id, Out::text(hello.to_string()));
        if let Some(c) = d.gw.sockets.get_mut(id) {
            c.heartbeat_interval_ms = interval;
        }
        d.last_beat.insert(id, Instant::now());
        watch_heartbeats(watched, id, Duration::from_millis(interval));
    };
    let addr = shared.addr;
    socket::serve(
        shared,
        request,
        record,
        hello,
        move |d, id, message| match message {
            Message::Text(text) => on_frame(d, addr, id, text.as_str()),
            _ => {
                d.gw.sockets.bad_frames += 1;
                Vec::new()
            }
        },
    )
}

/// Watches connection `conn`, whose HELLO asked for a heartbeat every `interval`: once
/// [`HEARTBEAT_GRACE`] past an interval with no heartbeat, it is closed with 4009 and its
/// session ends, as Discord times a session out. A thread on the wall clock, as the
/// client's heartbeats are: a test on tokio's paused clock does not time it out early.
/// It ends with the connection or the fake.
fn watch_heartbeats(shared: Arc<Shared>, conn: u64, interval: Duration) {
    std::thread::spawn(move || {
        loop {
            let due = shared.update(|d| {
                let open = d.gw.sockets.iter().any(|c| c.id == conn && c.open);
                let last = d.last_beat.get(&conn).copied();
                match last {
                    Some(last) if open && !shared.stop.is_cancelled() => {
                        Some(last + interval + HEARTBEAT_GRACE)
                    }
                    _ => None,
                }
            });
            let Some(due) = due else {
                return;
            };
            let now = Instant::now();
            if now < due {
                // Looks again at least every tick, to end soon after the connection does.
                std::thread::sleep((due - now).min(WATCH_TICK));
                continue;
            }
            shared.update(|d| {
                d.gw.close_ending_session(conn, 4009);
                if let Some(c) = d.gw.sockets.get_mut(conn) {
                    c.timed_out = true;
                }
            });
            return;
        }
    });
}

fn on_frame(discord: &mut Discord, addr: SocketAddr, conn: u64, text: &str) -> Vec<Out> {
    let Ok(frame) = serde_json::from_str::<Value>(text) else {
        discord.gw.sockets.bad_frames += 1;
        return Vec::new();
    };
    let d = &frame["d"];
    match frame["op"].as_u64() {
        Some(1) => {
            discord.last_beat.insert(conn, Instant::now());
            let gw = &mut discord.gw;
            gw.heartbeats.push(Heartbeat {
                connection: conn,
                seq: d.as_u64(),
            });
            (gw.ack_heartbeats && !discord.silent.contains(&conn))
                .then(|| Out::text(json!({"op": 11, "d": null}).to_string()))
                .into_iter()
                .collect()
        }
        Some(2) => identify(discord, addr, conn, d),
        Some(6) => resume(discord, conn, d),
        // Presence and voice updates, guild member requests: accepted, ignored.
        Some(3 | 4 | 8) => Vec::new(),
        _ => {
            discord.gw.sockets.bad_frames += 1;
            vec![Out::Close(Some(4001))]
        }
    }
}

/// The token of a gateway frame, with or without serenity's `Bot ` prefix, unless the
/// token was revoked.
fn token_ok(discord: &Discord, token: &str) -> bool {
    !discord.token_revoked && token.strip_prefix("Bot ").unwrap_or(token) == TOKEN
}

fn identify(discord: &mut Discord, addr: SocketAddr, conn: u64, d: &Value) -> Vec<Out> {
    let token = d["token"].as_str().unwrap_or("").to_owned();
    let intents = d["intents"].as_u64().unwrap_or(0);
    let path = connection_path(discord, conn);
    let mut rec = Identify {
        connection: conn,
        path: path.clone(),
        token: token.clone(),
        intents,
        accepted: false,
    };
    let content_refused = !discord.message_content_enabled && intents & MESSAGE_CONTENT != 0;
    let refusal = if !token_ok(discord, &token) {
        Some(4004)
    } else if intents & INTENTS != INTENTS || content_refused {
        Some(4014)
    } else if path.starts_with("/resume") {
        // READY's `resume_gateway_url` is for resuming; a new session connects at the
        // `GET /gateway/bot` URL (gateway.mdx). The fake holds a client to that: 4000.
        Some(4000)
    } else {
        None
    };
    rec.accepted = refusal.is_none();
    let gw = &mut discord.gw;
    gw.identifies.push(rec);
    if let Some(code) = refusal {
        return vec![Out::Close(Some(code))];
    }
    let session_id = gw.open_session(conn, 0);
    let ready = json!({"op": 0, "t": "READY", "d": {
        "v": 10,
        "user": user(BOT_ID, BOT_USERNAME, true),
        "guilds": [{"id": GUILD_ID, "unavailable": true}],
        "session_id": session_id,
        "resume_gateway_url": format!("ws://{addr}/resume"),
        "shard": [0, 1],
        "application": {"id": BOT_ID, "flags": 0},
    }});
    let mut out: Vec<Out> = [ready, guild_create()]
        .into_iter()
        .filter_map(|payload| gw.logged(conn, &session_id, payload))
        .collect();
    out.extend(gw.flush_pending(conn, &session_id));
    out
}

/// The path connection `conn` was opened at.
fn connection_path(discord: &Discord, conn: u64) -> String {
    let connection = discord.gw.sockets.iter().find(|c| c.id == conn);
    connection.map(|c| c.path.clone()).unwrap_or_default()
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

fn resume(discord: &mut Discord, conn: u64, d: &Value) -> Vec<Out> {
    let token = d["token"].as_str().unwrap_or("");
    let session_id = d["session_id"].as_str().unwrap_or("").to_owned();
    let after = d["seq"].as_u64().unwrap_or(0);
    let path = connection_path(discord, conn);
    let token_ok = token_ok(discord, token);
    let gw = &mut discord.gw;
    let mut rec = Resume {
        connection: conn,
        path,
        session_id: session_id.clone(),
        seq: after,
        accepted: false,
    };
    if !token_ok {
        gw.resumes.push(rec);
        return vec![Out::Close(Some(4004))];
    }
    let Some(mut out) = gw.resume(conn, &session_id, after) else {
        gw.resumes.push(rec);
        return vec![Out::text(json!({"op": 9, "d": false}).to_string())];
    };
    rec.accepted = true;
    gw.resumes.push(rec);
    let resumed = json!({"op": 0, "t": "RESUMED", "d": {}});
    out.extend(gw.logged(conn, &session_id, resumed));
    out
}
