//! Socket Mode (docs.slack.dev/apis/events-api/using-socket-mode): `apps.connections.open`,
//! the upgrade at `/link/?ticket=…`, `hello`, envelopes pushed in turn across connections,
//! acks, redeliveries, `disconnect` and server-side closes.
//!
//! - `apps.connections.open` answers `ws://127.0.0.1:P/link/?ticket=…&app_id=…`; a ticket
//!   opens one connection, and at most [`MAX_CONNECTIONS`] are open at once (documented:
//!   "up to 10"); any other upgrade is refused with HTTP 401 and counted.
//! - Each connection gets `{"type": "hello", "num_connections", "debug_info": {host,
//!   build_number, approximate_connection_time}, "connection_info": {app_id}}` first.
//! - An envelope is `{envelope_id, payload, type, accepts_response_payload}`, and for
//!   `events_api` also `retry_attempt` and `retry_reason` (0 and `""` the first time). It
//!   goes to one open connection in turn (documented: "each payload may be sent to any of
//!   the connections"); with none open it waits for the next.
//! - The client acks with `{"envelope_id": …}` (and a `payload` where
//!   `accepts_response_payload`). An `events_api` envelope not acked within the ack window
//!   ([`ACK_WINDOW`], documented as 3 seconds; [`FakeSlack::set_ack_window`]) is delivered
//!   again, in a new envelope (a new `envelope_id`, as Slack's retries arrive) with
//!   `retry_attempt` 1, 2, 3 and `retry_reason: "timeout"`, at most [`MAX_RETRIES`] times;
//!   an ack of any envelope of the payload stops it. Slash commands are not retried.
//!   [`FakeSlack::lose_acks`] makes the next acks go missing on the way, as when Slack
//!   redelivers a payload the app did ack.
//! - Any frame that is not a JSON object with a string `envelope_id` is a protocol error:
//!   counted in `bad_frames` and kept in [`FakeSlack::protocol_errors`].
//! - `disconnect` frames (`warning`, `refresh_requested`, `link_disabled`) go to every open
//!   connection; Slack closes the socket itself about ten seconds after a `warning`
//!   ([`FakeSlack::rotate`] plays that).
//!
//! [`FakeSlack::set_ack_window`]: super::FakeSlack::set_ack_window
//! [`FakeSlack::lose_acks`]: super::FakeSlack::lose_acks
//! [`FakeSlack::protocol_errors`]: super::FakeSlack::protocol_errors
//! [`FakeSlack::rotate`]: super::FakeSlack::rotate

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message as Frame;

use super::events::event_callback;
use super::rest::ok;
use super::{
    ACK_WINDOW, APP_ID, Ack, Connection, Delivery, MAX_CONNECTIONS, MAX_RETRIES, Pushed, Shared,
    Slack, SlashCommand, WaitTimeout,
};
use crate::skeleton::http::{Answer, Head};
use crate::skeleton::socket::{Out, Sockets};
use crate::skeleton::{Fake, WithSockets, socket};

/// How much of a bad frame [`FakeSlack::protocol_errors`] keeps, in characters.
const KEPT: usize = 200;

/// An envelope the fake sent, by `envelope_id`.
struct Sent {
    text: String,
    /// The `envelope_id` of the payload's first delivery.
    first: String,
    kind: String,
    attempt: u32,
}

/// Socket Mode's state, inside the fake's one lock. Bounded by what a test pushes.
pub(super) struct State {
    /// Ticket -> whether it has opened a connection.
    tickets: HashMap<String, bool>,
    sockets: Sockets<Connection>,
    /// Envelopes pushed while no connection was open, in order.
    held: VecDeque<String>,
    envelopes: HashMap<String, Sent>,
    /// First `envelope_id` -> whether any delivery of that payload was acked.
    acked: HashMap<String, bool>,
    deliveries: Vec<Delivery>,
    acks: Vec<Ack>,
    protocol_errors: Vec<String>,
    ack_window: Duration,
    /// Acks still to lose on the way (recorded, not taken).
    lose_acks: usize,
    refused: usize,
    next: u64,
}

impl Default for State {
    fn default() -> Self {
        Self {
            tickets: HashMap::new(),
            sockets: Sockets::default(),
            held: VecDeque::new(),
            envelopes: HashMap::new(),
            acked: HashMap::new(),
            deliveries: Vec::new(),
            acks: Vec::new(),
            protocol_errors: Vec::new(),
            ack_window: ACK_WINDOW,
            lose_acks: 0,
            refused: 0,
            next: 0,
        }
    }
}

impl State {
    fn next(&mut self) -> u64 {
        self.next += 1;
        self.next
    }

    /// A new `envelope_id`, shaped like Slack's (a UUID).
    fn envelope_id(&mut self) -> String {
        format!("0fa4e000-5eed-4000-8000-{:012x}", self.next())
    }

    /// Sends envelope `id` to `connection`, or the next open connection in turn, or holds
    /// it until one opens.
    fn send(&mut self, id: &str, connection: Option<u64>) {
        let Some(connection) = connection.or_else(|| self.sockets.next_in_turn()) else {
            self.held.push_back(id.to_owned());
            return;
        };
        let Some(sent) = self.envelopes.get(id) else {
            return;
        };
        self.sockets.send(connection, Out::text(sent.text.clone()));
        self.deliveries.push(Delivery {
            envelope_id: id.to_owned(),
            first: sent.first.clone(),
            kind: sent.kind.clone(),
            attempt: sent.attempt,
            connection,
            at: Instant::now(),
        });
    }

    /// A new envelope of `kind` carrying `payload`, the `attempt`th delivery of the payload
    /// first sent as `first` (itself when `None`); returns its id.
    fn envelope(
        &mut self,
        kind: &str,
        payload: &Value,
        first: Option<&str>,
        attempt: u32,
    ) -> String {
        let id = self.envelope_id();
        let mut envelope = json!({"envelope_id": id, "payload": payload, "type": kind,
                                  "accepts_response_payload": kind != "events_api"});
        if kind == "events_api" {
            envelope["retry_attempt"] = json!(attempt);
            envelope["retry_reason"] = json!(if attempt == 0 { "" } else { "timeout" });
        }
        let sent = Sent {
            text: envelope.to_string(),
            first: first.unwrap_or(&id).to_owned(),
            kind: kind.to_owned(),
            attempt,
        };
        self.envelopes.insert(id.clone(), sent);
        id
    }
}

impl WithSockets for Slack {
    type Connection = Connection;

    fn sockets(&mut self) -> &mut Sockets<Connection> {
        &mut self.socket.sockets
    }
}

/// `apps.connections.open` → `{url}` with a new ticket.
pub(super) fn open(s: &mut Slack, addr: SocketAddr) -> Answer {
    let n = s.socket.next();
    let ticket = format!("fake-{n:04}-{:08x}", n.wrapping_mul(0x9e37_79b9));
    s.socket.tickets.insert(ticket.clone(), false);
    ok(json!({"url": format!("ws://{addr}/link/?ticket={ticket}&app_id={APP_ID}")}))
}

/// `GET /link/?ticket=…`: refuses a missing, unknown or used ticket, or an eleventh open
/// connection (401), else upgrades: `hello`, then the envelopes held for a connection.
pub(super) fn upgrade(shared: &Arc<Shared>, head: &Head, request: Request) -> Response {
    let ticket = head.query.get("ticket").cloned().unwrap_or_default();
    let fresh = shared.update(|s| {
        let full = s.socket.sockets.open_ids().len() >= MAX_CONNECTIONS;
        let fresh = !full
            && s.socket
                .tickets
                .get_mut(&ticket)
                .is_some_and(|used| !std::mem::replace(used, true));
        if !fresh {
            s.socket.refused += 1;
        }
        fresh
    });
    if !fresh {
        return (StatusCode::UNAUTHORIZED, "invalid ticket").into_response();
    }
    let record = move |id| Connection {
        id,
        ticket,
        open: true,
        opened_at: Instant::now(),
        closed_at: None,
    };
    let opened = |s: &mut Slack, id| {
        let state = &mut s.socket;
        let hello = json!({"type": "hello", "num_connections": state.sockets.open_ids().len(),
            "debug_info": {"host": format!("applink-fake-{id}"), "build_number": 1,
                           "approximate_connection_time": 18060},
            "connection_info": {"app_id": APP_ID}});
        state.sockets.send(id, Out::text(hello.to_string()));
        for envelope in std::mem::take(&mut state.held) {
            state.send(&envelope, Some(id));
        }
    };
    socket::serve(shared, request, record, opened, |s, id, frame| {
        match frame {
            Frame::Text(text) => on_text(&mut s.socket, id, text.as_str()),
            other => bad_frame(&mut s.socket, &format!("{other:?}")),
        }
        Vec::new()
    })
}

fn bad_frame(state: &mut State, what: &str) {
    state.sockets.bad_frames += 1;
    state
        .protocol_errors
        .push(what.chars().take(KEPT).collect());
}

/// A text frame from a client: an ack `{envelope_id, payload?}`, or a protocol error.
fn on_text(state: &mut State, connection: u64, text: &str) {
    let frame = serde_json::from_str::<Value>(text).ok();
    let Some((frame, envelope_id)) = frame.as_ref().and_then(|f| {
        let id = f.get("envelope_id")?.as_str()?.to_owned();
        Some((f, id))
    }) else {
        bad_frame(state, text);
        return;
    };
    let first = state.envelopes.get(&envelope_id).map(|e| e.first.clone());
    let lost = first.is_some() && state.lose_acks > 0;
    if lost {
        state.lose_acks -= 1;
    } else if let Some(first) = &first {
        state.acked.insert(first.clone(), true);
    }
    state.acks.push(Ack {
        envelope_id,
        payload: frame.get("payload").cloned(),
        known: first.is_some(),
        lost,
        connection,
        at: Instant::now(),
    });
}

/// Pushes `payload` in a `kind` envelope; an `events_api` one is delivered again until
/// acked.
fn push(shared: &Arc<Shared>, kind: &str, payload: &Value) -> String {
    let (first, window) = shared.update(|s| {
        let state = &mut s.socket;
        let first = state.envelope(kind, payload, None, 0);
        state.acked.insert(first.clone(), false);
        state.send(&first, None);
        (first, state.ack_window)
    });
    if kind == "events_api" {
        let (kind, payload, chain) = (kind.to_owned(), payload.clone(), first.clone());
        shared.retry_every(window, MAX_RETRIES, move |s, attempt| {
            let state = &mut s.socket;
            if state.acked.get(&chain).copied().unwrap_or(true) {
                return false;
            }
            let id = state.envelope(&kind, &payload, Some(&chain), attempt);
            state.send(&id, None);
            true
        });
    }
    first
}

impl Fake<Slack> {
    /// Pushes `event` (e.g. [`Event::to_json`](super::Event::to_json)) in an
    /// `event_callback` inside an `events_api` envelope, to the next open connection in turn
    /// (held for the next one when none is open). Its channel and message become ones the
    /// bot may answer in.
    pub fn push_event(&self, event: &Value) -> Pushed {
        self.push_payload(&event_callback(event))
    }

    /// Pushes an `event_callback` payload the test built (to know its `event_id`, or to
    /// push the same event twice) in an `events_api` envelope.
    pub fn push_payload(&self, payload: &Value) -> Pushed {
        let event = &payload["event"];
        self.with_state(|s| s.know_event(event));
        let text_of = |v: &Value| v.as_str().map(str::to_owned);
        Pushed {
            envelope_id: push(&self.shared, "events_api", payload),
            event_id: text_of(&payload["event_id"]),
            ts: text_of(&event["ts"]),
        }
    }

    /// Pushes a slash command in a `slash_commands` envelope (`accepts_response_payload`;
    /// never delivered again), with a `response_url` the fake serves. As on Slack, a
    /// command may come from a conversation the bot is not in (`add_channel` makes it a
    /// member).
    pub fn push_command(&self, command: &SlashCommand) -> Pushed {
        let mut command = command.clone();
        self.issue_response_url(&mut command);
        Pushed {
            envelope_id: push(&self.shared, "slash_commands", &command.to_json()),
            event_id: None,
            ts: None,
        }
    }

    /// Pushes any payload in an `interactive` envelope (a button, a shortcut).
    pub fn push_interactive(&self, payload: &Value) -> Pushed {
        Pushed {
            envelope_id: push(&self.shared, "interactive", payload),
            event_id: None,
            ts: None,
        }
    }

    /// Sends `text` as it is to the next open connection; whether one was open.
    pub fn push_raw(&self, text: &str) -> bool {
        self.shared.update(|s| {
            let sockets = &mut s.socket.sockets;
            sockets
                .next_in_turn()
                .is_some_and(|id| sockets.send(id, Out::text(text)))
        })
    }

    /// Loses the next `n` acks of known envelopes on their way to Slack: each is recorded
    /// in [`Self::acks`] but counts for nothing, so the payload is delivered again once the
    /// ack window passes, as when Slack misses an ack the app sent.
    pub fn lose_acks(&self, n: usize) {
        self.with_state(|s| s.socket.lose_acks = n);
    }

    /// How long an `events_api` envelope may stay un-acked before it is delivered again
    /// (default [`ACK_WINDOW`]); applies to pushes from now.
    pub fn set_ack_window(&self, window: Duration) {
        self.with_state(|s| s.socket.ack_window = window);
    }

    /// Sends `{"type": "disconnect", "reason": reason, "debug_info": {"host"}}` to every
    /// open connection (`warning`, `refresh_requested`, `link_disabled`); returns their ids.
    pub fn disconnect(&self, reason: &str) -> Vec<u64> {
        self.shared.update(|s| {
            let sockets = &mut s.socket.sockets;
            let open = sockets.open_ids();
            for &id in &open {
                let frame = json!({"type": "disconnect", "reason": reason,
                                   "debug_info": {"host": format!("applink-fake-{id}")}});
                sockets.send(id, Out::text(frame.to_string()));
            }
            open
        })
    }

    /// Slack refreshing its connections: a `disconnect` `warning` to every open
    /// connection now, and `after` that (about ten seconds at Slack) a close of those same
    /// connections. Returns their ids.
    pub fn rotate(&self, after: Duration) -> Vec<u64> {
        let warned = self.disconnect("warning");
        let closing = warned.clone();
        self.shared.retry_every(after, 1, move |s, _| {
            for &id in &closing {
                s.socket.sockets.send(id, Out::Close(None));
            }
            false
        });
        warned
    }

    /// Closes connection `id` from the server side (a close frame, after what is queued).
    pub fn close_connection(&self, id: u64) {
        self.with_state(|s| s.socket.sockets.send(id, Out::Close(None)));
    }

    /// Whether connection `new` opened before connection `old` closed (a hand-over
    /// without a gap); false while `old` is open or `new` never opened.
    pub fn opened_before_closed(&self, new: u64, old: u64) -> bool {
        let connections = self.connections();
        let find = |id| connections.iter().find(|c| c.id == id);
        match (find(new), find(old).and_then(|c| c.closed_at)) {
            (Some(new), Some(closed)) => new.opened_at < closed,
            _ => false,
        }
    }

    /// Every envelope delivered so far (first deliveries and retries).
    pub fn deliveries(&self) -> Vec<Delivery> {
        self.with_state(|s| s.socket.deliveries.clone())
    }

    /// Every ack received so far.
    pub fn acks(&self) -> Vec<Ack> {
        self.with_state(|s| s.socket.acks.clone())
    }

    /// The frames that were no ack (up to 200 characters each), in order.
    pub fn protocol_errors(&self) -> Vec<String> {
        self.with_state(|s| s.socket.protocol_errors.clone())
    }

    /// Upgrades refused so far (no ticket, an unknown or used one, too many connections).
    pub fn refused_upgrades(&self) -> usize {
        self.with_state(|s| s.socket.refused)
    }

    /// How many tickets `apps.connections.open` issued.
    pub fn tickets_issued(&self) -> usize {
        self.with_state(|s| s.socket.tickets.len())
    }

    /// Waits until some delivery of the payload first pushed as `envelope_id` is acked,
    /// and returns that ack.
    pub async fn wait_acked(
        &self,
        envelope_id: &str,
        deadline: Duration,
    ) -> Result<Ack, WaitTimeout> {
        let found = |f: &Self| {
            f.with_state(|s| {
                let state = &s.socket;
                let of_chain = |a: &&Ack| {
                    state
                        .envelopes
                        .get(&a.envelope_id)
                        .is_some_and(|e| e.first == envelope_id)
                };
                state.acks.iter().find(of_chain).cloned()
            })
        };
        let what = format!("an ack of {envelope_id}");
        self.wait_until(&what, deadline, |f| found(f).is_some())
            .await?;
        found(self).ok_or_else(|| self.timeout(&what))
    }
}

#[cfg(test)]
mod tests;
