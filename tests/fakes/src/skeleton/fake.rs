//! [`Fake`], the handle a test holds, and the traits through which a platform's state
//! tells the skeleton what it has: calls ([`Platform`]), WebSocket connections
//! ([`WithSockets`]), an op-code gateway ([`OpGateway`]). Each trait gives every fake that
//! has it the same public methods, written once here; a platform adds its own in an `impl
//! Fake<Its>` block.

use std::net::SocketAddr;
use std::time::Duration;

use axum::handler::Handler;
use serde_json::Value;

use super::gateway::{Gateway, InSession};
use super::server::{Server, Shared};
use super::socket::{Linked, Out, Sockets};
use crate::wait::WaitTimeout;

/// A running fake over a platform's state `P` (`FakeQq` is `Fake<Qq>`). Dropping it stops
/// its server and closes every connection.
pub struct Fake<P: Platform> {
    pub(crate) shared: Server<P>,
}

/// A platform's state, with the record of its HTTP calls (kept by the skeleton).
pub trait Platform: Send + Sized + 'static {
    /// One HTTP call as the fake records it ([`Call`](super::Call), or Telegram's).
    type Call: Recorded;
    /// What a timeout reports the fake saw: one line per call (a platform may add what
    /// else it recorded).
    fn seen(&self, calls: &[Self::Call]) -> Vec<String> {
        calls.iter().map(Recorded::line).collect()
    }
}

/// A recorded HTTP call.
pub trait Recorded: Clone + Send + 'static {
    /// The name it is filed under (a route, a Bot API method).
    fn route(&self) -> &str;
    /// One line describing it, for a timeout's report.
    fn line(&self) -> String;
    /// The HTTP status it was answered with.
    fn status(&self) -> u16;
}

/// A platform whose fake accepts WebSocket connections.
pub trait WithSockets: Platform {
    /// A connection as the fake reports it.
    type Connection: Linked;
    /// The fake's connections.
    fn sockets(&mut self) -> &mut Sockets<Self::Connection>;
}

/// A platform whose fake speaks an op-code gateway with sessions (see
/// [`Gateway`](super::Gateway)).
pub trait OpGateway: WithSockets<Connection: InSession> {
    /// An IDENTIFY as the fake records it.
    type Identify: Clone;
    /// A RESUME as the fake records it.
    type Resume: Clone;
    /// A heartbeat as the fake records it.
    type Heartbeat: Clone;
    /// A dispatch as the fake records it.
    type Dispatched: Clone;
    /// op 7 (reconnect), as the platform writes it.
    const RECONNECT: &'static str;
    /// Whether events pushed while no session is current wait for the next READY (then
    /// go to the session it opens); else they reach no session, as on
    /// Discord, where a new session gets only what happens after it and only a RESUME
    /// replays what its own session missed.
    const HOLDS_EVENTS_FOR_READY: bool;
    /// Whether a close with `code` ends the connection's session.
    fn ends_session(code: u16) -> bool;
    /// The record of `payload` dispatched to connection `connection` (`replay`: sent
    /// again by a RESUME).
    fn dispatched(connection: u64, payload: &Value, replay: bool) -> Self::Dispatched;
    /// The gateway's state.
    fn gateway(&mut self) -> &mut Gateway<Self>;
}

impl<P: Platform> Fake<P> {
    /// Starts a fake over `state` on `127.0.0.1:0`, serving every request with `handler`,
    /// bodies up to `max_body` bytes.
    pub(crate) async fn serve<H, T>(state: P, handler: H, max_body: usize) -> std::io::Result<Self>
    where
        H: Handler<T, std::sync::Arc<Shared<P>>>,
        T: 'static,
    {
        let shared = Server::start(state, handler, max_body).await?;
        Ok(Self { shared })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.shared.addr
    }

    /// Runs `f` on the state, under the lock (no waiter is woken: for settings and
    /// reads).
    pub(crate) fn with_state<R>(&self, f: impl FnOnce(&mut P) -> R) -> R {
        f(&mut self.shared.lock())
    }

    /// Every HTTP call so far.
    pub fn calls(&self) -> Vec<P::Call> {
        self.shared.calls().clone()
    }

    /// Every call of `route` so far (a route name, or for Telegram a Bot API method).
    pub fn calls_to(&self, route: &str) -> Vec<P::Call> {
        let calls = self.shared.calls();
        calls
            .iter()
            .filter(|c| c.route() == route)
            .cloned()
            .collect()
    }

    /// The HTTP statuses the calls of `route` were answered with, in order.
    pub fn statuses(&self, route: &str) -> Vec<u16> {
        self.calls_to(route).iter().map(Recorded::status).collect()
    }

    /// Waits until `condition` holds over the fake (anything the fake records wakes it),
    /// or `deadline` passes; the error lists what the fake saw.
    pub async fn wait_until(
        &self,
        what: &str,
        deadline: Duration,
        condition: impl Fn(&Self) -> bool,
    ) -> Result<(), WaitTimeout> {
        self.shared
            .wait_until(what, deadline, || condition(self), || self.seen())
            .await
    }

    /// Waits until `condition` holds over the calls, or `deadline` passes; returns the
    /// calls then.
    pub async fn wait_for(
        &self,
        what: &str,
        deadline: Duration,
        condition: impl Fn(&[P::Call]) -> bool,
    ) -> Result<Vec<P::Call>, WaitTimeout> {
        self.wait_until(what, deadline, |f| condition(&f.calls()))
            .await?;
        Ok(self.calls())
    }

    /// Waits for the first call matching `matches`, and returns it.
    pub async fn wait_for_call(
        &self,
        what: &str,
        deadline: Duration,
        matches: impl Fn(&P::Call) -> bool,
    ) -> Result<P::Call, WaitTimeout> {
        let calls = self
            .wait_for(what, deadline, |calls| calls.iter().any(&matches))
            .await?;
        let found = calls.into_iter().find(|c| matches(c));
        found.ok_or_else(|| self.timeout(what))
    }

    /// A timeout of the wait for `what`, listing what the fake saw.
    pub(crate) fn timeout(&self, what: &str) -> WaitTimeout {
        WaitTimeout::new(what, self.seen())
    }

    fn seen(&self) -> Vec<String> {
        let calls = self.shared.calls().clone();
        self.shared.lock().seen(&calls)
    }
}

impl<P: WithSockets> Fake<P> {
    /// Every connection so far, open or closed.
    pub fn connections(&self) -> Vec<P::Connection> {
        self.with_state(|p| p.sockets().records())
    }

    /// Connections open now.
    pub fn open_connections(&self) -> usize {
        self.with_state(|p| p.sockets().open_ids().len())
    }

    /// Waits until at least `n` connections are open.
    pub async fn wait_connected(&self, n: usize, deadline: Duration) -> Result<(), WaitTimeout> {
        self.wait_until(&format!("{n} open connections"), deadline, |f| {
            f.open_connections() >= n
        })
        .await
    }

    /// Frames received that the fake could not use (see the platform's rules).
    pub fn bad_frames(&self) -> usize {
        self.with_state(|p| p.sockets().bad_frames)
    }

    /// Closes every open connection from the server side (a close frame, then the
    /// socket), as a platform rotating its gateway does.
    pub fn close_connections(&self) {
        self.with_state(|p| p.sockets().close_all());
    }

    /// For `window` from now, answers every WebSocket upgrade and drops the socket at once,
    /// before any frame: a server that drops each new connection. Such connections are
    /// not in [`Self::connections`]; [`Self::dropped_connections`] counts them.
    pub fn drop_connections_for(&self, window: Duration) {
        self.with_state(|p| p.sockets().drops.start(window));
    }

    /// Connections dropped at once by [`Self::drop_connections_for`] so far.
    pub fn dropped_connections(&self) -> usize {
        self.with_state(|p| p.sockets().drops.dropped())
    }

    /// Waits, while [`Self::drop_connections_for`] drops every attempt, until the client
    /// connects once the window has closed, or until it has made more than ten attempts
    /// (a reconnect storm: the wait ends early so the test fails fast); returns how many
    /// attempts were dropped. Call it after the window has started, before it ends.
    pub async fn wait_through_dropped_connections(
        &self,
        deadline: Duration,
    ) -> Result<usize, WaitTimeout> {
        let before = self.connections().len();
        let what = "a connection once the dropping window closed, or a storm";
        self.wait_until(what, deadline, |f| {
            f.connections().len() > before || f.dropped_connections() > 10
        })
        .await?;
        Ok(self.dropped_connections())
    }
}

impl<P: OpGateway> Fake<P> {
    /// HELLO's `heartbeat_interval` for later connections, in milliseconds (default
    /// [`DEFAULT_HEARTBEAT_MS`](super::gateway::DEFAULT_HEARTBEAT_MS)).
    pub fn set_heartbeat_interval(&self, ms: u64) {
        self.with_state(|p| p.gateway().heartbeat_interval_ms = ms);
    }

    /// Whether heartbeats are ACKed (default true). Without ACKs the client must notice
    /// a dead connection.
    pub fn set_heartbeat_acks(&self, ack: bool) {
        self.with_state(|p| p.gateway().ack_heartbeats = ack);
    }

    /// Sends op 7 (reconnect) to every open connection.
    pub fn send_reconnect(&self) {
        self.with_state(|p| p.gateway().reconnect());
    }

    /// Sends op 9 (invalid session) with `d: resumable` to every open connection; `false`
    /// ends their sessions.
    pub fn send_invalid_session(&self, resumable: bool) {
        self.with_state(|p| p.gateway().invalid_session(resumable));
    }

    /// Closes every open connection with `code`; the platform's session-ending codes end
    /// their sessions (a bad token gets 4004).
    pub fn close_with(&self, code: u16) {
        self.with_state(|p| p.gateway().close(code));
    }

    /// Drops every open socket without a close frame (sessions stay resumable).
    pub fn drop_sockets(&self) {
        self.with_state(|p| p.sockets().broadcast(|| Out::Drop));
    }

    /// Sends `text` as a frame, as is, to every open connection (malformed or oversized
    /// frames, a server heartbeat request).
    pub fn send_raw(&self, text: &str) {
        self.with_state(|p| p.sockets().broadcast(|| Out::text(text)));
    }

    /// Every IDENTIFY received.
    pub fn identifies(&self) -> Vec<P::Identify> {
        self.with_state(|p| p.gateway().identifies.clone())
    }

    /// Every RESUME received.
    pub fn resumes(&self) -> Vec<P::Resume> {
        self.with_state(|p| p.gateway().resumes.clone())
    }

    /// Every heartbeat received.
    pub fn heartbeats(&self) -> Vec<P::Heartbeat> {
        self.with_state(|p| p.gateway().heartbeats.clone())
    }

    /// Every dispatch sent (first sends and replays).
    pub fn dispatched(&self) -> Vec<P::Dispatched> {
        self.with_state(|p| p.gateway().dispatched.clone())
    }
}
