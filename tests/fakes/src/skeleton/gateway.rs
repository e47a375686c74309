//! An op-code gateway's sessions and controls, shared by the Discord and QQ fakes (both
//! speak Discord's design: HELLO, IDENTIFY → READY, RESUME → replay, heartbeats, op 7,
//! op 9, close codes). The platform keeps its rules: what HELLO and READY carry, how a
//! token is checked, which close codes end a session, what it records of each frame.
//!
//! Sessions: an accepted IDENTIFY opens a session ([`Gateway::open_session`]); events
//! pushed while it is current are logged in it (at most [`MAX_LOG`], oldest dropped) and
//! dispatched to its connection when one is open ([`Gateway::dispatch`]), so a RESUME
//! after a dropped socket replays everything after the client's `seq`
//! ([`Gateway::resume`]). Ending a session (op 9 with `false`, a close code that ends it)
//! makes later RESUMEs of it fail. Events pushed while no session is current wait for the
//! next READY ([`Gateway::flush_pending`]) where the platform holds them
//! ([`OpGateway::HOLDS_EVENTS_FOR_READY`]); else they reach no session.

use std::collections::{HashMap, VecDeque};

use serde_json::{Value, json};

use super::OpGateway;
use super::socket::{Linked, Out, Sockets};

/// Events a session keeps for replay.
pub const MAX_LOG: usize = 1024;
/// The default `heartbeat_interval` of HELLO, in milliseconds (Discord's and QQ's).
pub const DEFAULT_HEARTBEAT_MS: u64 = 41_250;

/// A gateway connection record that names the session it identified or resumed into.
/// Implemented with `linked!(Record, session)` for a record with a `session:
/// Option<String>` field.
pub trait InSession: Linked {
    /// Its session.
    fn session(&self) -> Option<&str>;
    /// Binds it to a session, or to none.
    fn set_session(&mut self, session: Option<String>);
}

struct Session {
    /// The last `s` handed out.
    seq: u64,
    /// `(s, payload)` of every event logged in it, oldest first; at most [`MAX_LOG`].
    log: VecDeque<(u64, Value)>,
    valid: bool,
}

/// A gateway's state, inside the fake's one lock: its connections, sessions, settings and
/// what it recorded. Bounded by what a test pushes and connects, and [`MAX_LOG`] per
/// session.
pub struct Gateway<P: OpGateway> {
    pub(crate) sockets: Sockets<P::Connection>,
    /// HELLO's `heartbeat_interval` for later connections.
    pub(crate) heartbeat_interval_ms: u64,
    /// Whether heartbeats are ACKed.
    pub(crate) ack_heartbeats: bool,
    sessions: HashMap<String, Session>,
    /// The session new events go to: the latest READY or RESUME, while it is valid.
    current: Option<String>,
    /// Events pushed while no session was current, where the platform holds them
    /// ([`OpGateway::HOLDS_EVENTS_FOR_READY`]); dispatched after the next READY.
    pending: Vec<Value>,
    next_session: u64,
    pub(crate) identifies: Vec<P::Identify>,
    pub(crate) resumes: Vec<P::Resume>,
    pub(crate) heartbeats: Vec<P::Heartbeat>,
    pub(crate) dispatched: Vec<P::Dispatched>,
}

impl<P: OpGateway> Default for Gateway<P> {
    fn default() -> Self {
        Self {
            sockets: Sockets::default(),
            heartbeat_interval_ms: DEFAULT_HEARTBEAT_MS,
            ack_heartbeats: true,
            sessions: HashMap::new(),
            current: None,
            pending: Vec::new(),
            next_session: 0,
            identifies: Vec::new(),
            resumes: Vec::new(),
            heartbeats: Vec::new(),
            dispatched: Vec::new(),
        }
    }
}

impl<P: OpGateway> Gateway<P> {
    /// Opens a session for connection `conn` (its first event gets `first_seq + 1`) and
    /// makes it current; returns its id.
    pub(crate) fn open_session(&mut self, conn: u64, first_seq: u64) -> String {
        self.next_session += 1;
        let id = format!("fake-session-{}", self.next_session);
        self.sessions.insert(
            id.clone(),
            Session {
                seq: first_seq,
                log: VecDeque::new(),
                valid: true,
            },
        );
        self.bind(conn, &id);
        id
    }

    /// Makes session `id` current and connection `conn` its only connection.
    fn bind(&mut self, conn: u64, id: &str) {
        self.current = Some(id.to_owned());
        for c in self.sockets.iter_mut() {
            if c.id() == conn {
                c.set_session(Some(id.to_owned()));
            } else if c.session() == Some(id) {
                c.set_session(None);
            }
        }
    }

    /// Hands out session `id`'s next `s` without logging anything.
    pub(crate) fn next_seq(&mut self, id: &str) -> Option<u64> {
        let session = self.sessions.get_mut(id)?;
        session.seq += 1;
        Some(session.seq)
    }

    /// Logs `payload` (without `s`) in session `id`; returns it with its `s`.
    fn log(&mut self, id: &str, mut payload: Value) -> Option<Value> {
        let seq = self.next_seq(id)?;
        payload["s"] = json!(seq);
        let session = self.sessions.get_mut(id)?;
        session.log.push_back((seq, payload.clone()));
        while session.log.len() > MAX_LOG {
            session.log.pop_front();
        }
        Some(payload)
    }

    /// Logs `payload` in session `id` and returns the frame for connection `conn`, with
    /// the dispatch recorded.
    pub(crate) fn logged(&mut self, conn: u64, id: &str, payload: Value) -> Option<Out> {
        let payload = self.log(id, payload)?;
        self.dispatched.push(P::dispatched(conn, &payload, false));
        Some(Out::text(payload.to_string()))
    }

    /// The events that waited for a session, logged in session `id` as frames for
    /// connection `conn`.
    pub(crate) fn flush_pending(&mut self, conn: u64, id: &str) -> Vec<Out> {
        std::mem::take(&mut self.pending)
            .into_iter()
            .filter_map(|payload| self.logged(conn, id, payload))
            .collect()
    }

    /// Dispatches `payload` (an event without `s`) in the current session: logged, and
    /// queued for its connection when that is open. Returns the `s`, or `None` when no
    /// session is current (it waits for a READY, or reaches no session:
    /// [`OpGateway::HOLDS_EVENTS_FOR_READY`]).
    pub(crate) fn dispatch(&mut self, payload: Value) -> Option<u64> {
        self.dispatch_except(payload, &[])
    }

    /// [`Gateway::dispatch`], except that the connections in `muted` (gone silent) are
    /// sent nothing: the event is only logged.
    pub(crate) fn dispatch_except(&mut self, payload: Value, muted: &[u64]) -> Option<u64> {
        let Some(id) = self.current.clone() else {
            if P::HOLDS_EVENTS_FOR_READY {
                self.pending.push(payload);
            }
            return None;
        };
        let payload = self.log(&id, payload)?;
        let seq = payload["s"].as_u64();
        let conn = self
            .sockets
            .iter()
            .find(|c| c.is_open() && c.session() == Some(id.as_str()))
            .map(Linked::id)
            .filter(|conn| !muted.contains(conn));
        if let Some(conn) = conn {
            self.sockets.send(conn, Out::text(payload.to_string()));
            self.dispatched.push(P::dispatched(conn, &payload, false));
        }
        seq
    }

    /// Resumes session `id` on connection `conn` after the client's `after`: the frames
    /// of every logged event after it (recorded as replays), with the session current
    /// again and bound to `conn`; `None` when the session is unknown or ended.
    pub(crate) fn resume(&mut self, conn: u64, id: &str, after: u64) -> Option<Vec<Out>> {
        let session = self.sessions.get(id).filter(|s| s.valid)?;
        let replayed: Vec<Value> = session
            .log
            .iter()
            .filter(|(seq, _)| *seq > after)
            .map(|(_, payload)| payload.clone())
            .collect();
        self.bind(conn, id);
        let mut out = Vec::new();
        for payload in replayed {
            self.dispatched.push(P::dispatched(conn, &payload, true));
            out.push(Out::text(payload.to_string()));
        }
        Some(out)
    }

    /// Ends the sessions of the open connections.
    fn end_live_sessions(&mut self) {
        self.end_sessions_of(|_| true);
    }

    /// Closes connection `conn` with `code` and ends its session (a heartbeat that did
    /// not come in time: Discord's 4009, "Session timed out").
    pub(crate) fn close_ending_session(&mut self, conn: u64, code: u16) {
        self.end_sessions_of(|c| c.id() == conn);
        self.sockets.send(conn, Out::Close(Some(code)));
    }

    /// Ends the sessions of the open connections `which` picks.
    fn end_sessions_of(&mut self, which: impl Fn(&P::Connection) -> bool) {
        let live: Vec<String> = self
            .sockets
            .iter()
            .filter(|c| c.is_open() && which(c))
            .filter_map(|c| c.session().map(str::to_owned))
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

    /// op 7 to every open connection.
    pub(crate) fn reconnect(&self) {
        self.sockets.broadcast(|| Out::text(P::RECONNECT));
    }

    /// op 9 to every open connection; not `resumable` ends their sessions.
    pub(crate) fn invalid_session(&mut self, resumable: bool) {
        if !resumable {
            self.end_live_sessions();
        }
        let frame = json!({"op": 9, "d": resumable}).to_string();
        self.sockets.broadcast(|| Out::text(frame.clone()));
    }

    /// Closes every open connection with `code`, ending their sessions when the
    /// platform's `code` does.
    pub(crate) fn close(&mut self, code: u16) {
        if P::ends_session(code) {
            self.end_live_sessions();
        }
        self.sockets.broadcast(|| Out::Close(Some(code)));
    }
}
