//! Socket Mode: events arrive over a WebSocket the bridge opens itself, so no public URL
//! is needed (spec platforms.md §8.1). A [`LongConnection`] driven by the kit's
//! [`Reconnect::drive`](im_bridge_channel::Reconnect::drive):
//!
//! - **Connect**: the bot's user id first when it is not known yet (`auth.test`, so
//!   mentions are stripped and the bot's own messages skipped from the first event), then
//!   `apps.connections.open` with the app-level token (a single-use URL carrying a ticket:
//!   only its host is ever logged) and the kit's [`socket::open`]. A refused token (or an
//!   app without Socket Mode) ends the loop ([`SocketError`]); anything else is retried
//!   after the backoff.
//! - **Serve**: `hello` proves the connection (the backoff starts over). Each envelope is
//!   read, handed to the [`Envelopes`] handler (which admits it to the daemon's queue, or
//!   skips it on purpose) and only then acknowledged with `{"envelope_id"}`: the handler
//!   does no work, only admission, so the ack leaves well within Slack's 3 seconds. An
//!   envelope the daemon could not take now (shutting down) is left unacknowledged, so
//!   Slack delivers it again (`retry_attempt` 1, 2, 3), possibly to another connection;
//!   a redelivery carries the same event, whose message keeps its redelivery key, so the
//!   daemon runs it once. Envelopes of a type the adapter does not handle are acknowledged
//!   and skipped; a frame that is not JSON is logged (without its text) and dropped.
//! - **Hand-over**: on `disconnect` (`warning`, `refresh_requested`) a new connection is
//!   opened *before* the old one closes, and both are served until Slack closes the old
//!   one (or [`DRAIN`] passes, then it is closed here): an envelope sent to either is
//!   acknowledged, so nothing is lost mid-answer. The rotation is then reported to the
//!   driver (counted and logged as `rotated`) and serving goes on with the new connection.
//!   `link_disabled` (Socket Mode turned off) ends the connection; the next
//!   `apps.connections.open` says whether it can come back.
//! - **Keepalive**: after [`KEEPALIVE`] without any frame a WebSocket ping goes out; with
//!   no sign of life within [`PONG_TIMEOUT`] the connection counts as lost.
//!
//! Logs name the host, envelope ids and types only: never a token, a ticket or a payload.

use std::borrow::Cow;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use im_bridge_channel::Secret;
use im_bridge_channel::reconnect::{Connect, Ended, LongConnection};
use im_bridge_channel::socket::{self, Read, Socket};
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::{Message, Utf8Bytes};
use tokio_util::sync::CancellationToken;

use crate::api::SlackApi;
use crate::error::ApiError;
use crate::model::{Ack, Envelope, SocketFrame};

/// tungstenite's bound on one WebSocket message; a larger one fails the connection.
pub const MAX_FRAME_BYTES: usize = 4 * 1024 * 1024;
/// Bound on the TCP + TLS + upgrade of the socket.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);
/// How long an old connection is served after its replacement opened, at most (Slack
/// closes it about ten seconds after a `warning`).
pub const DRAIN: Duration = Duration::from_secs(15);
/// Silence after which a ping goes out.
pub const KEEPALIVE: Duration = Duration::from_secs(60);
/// How long that ping may go unanswered before the connection counts as lost.
pub const PONG_TIMEOUT: Duration = Duration::from_secs(10);

/// What became of an envelope's content.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Admitted, or skipped on purpose: acknowledge it.
    Ack,
    /// Not admitted now: leave it unacknowledged so Slack delivers it again.
    Again,
}

/// Receives each envelope (the channel's intake).
pub trait Envelopes: Send + Sync {
    /// Whether the bot's user id is still unknown (asked before each connection).
    fn needs_identity(&self) -> bool;
    /// The bot's user id and workspace, from `auth.test`.
    fn identity(&self, user_id: String, team_id: String);
    /// Admits an envelope's event or slash command (or skips it). Called on the
    /// connection's task; the ack follows at once: admit to a queue, do not work.
    fn handle(&self, envelope: Envelope) -> Verdict;
    /// The connection is up (`hello`) or down.
    fn connected(&self, up: bool);
}

/// Why Socket Mode gave up. Carries no token.
#[derive(Debug, thiserror::Error)]
pub enum SocketError {
    /// Slack refused a token or Socket Mode for good.
    #[error("Slack refused Socket Mode: {0}")]
    Refused(#[source] ApiError),
}

/// Socket Mode as the kit's reconnect driver runs it.
pub struct Link<'a> {
    api: &'a SlackApi,
    app_token: &'a Secret,
    handler: &'a dyn Envelopes,
    /// A connection opened during a hand-over (it said `hello` already), served next.
    next: Option<Socket>,
    /// Whether the connection being served came from a hand-over (so it proved itself).
    handed_over: bool,
}

impl<'a> Link<'a> {
    /// Socket Mode with `app_token`, envelopes to `handler`.
    pub fn new(api: &'a SlackApi, app_token: &'a Secret, handler: &'a dyn Envelopes) -> Self {
        Self {
            api,
            app_token,
            handler,
            next: None,
            handed_over: false,
        }
    }

    /// `apps.connections.open` and the upgrade.
    async fn open(&self) -> Result<Socket, Connect<SocketError>> {
        let url = self
            .api
            .open_connection(self.app_token)
            .await
            .map_err(sort)?;
        let url = url::Url::parse(&url)
            .ok()
            .filter(|u| matches!(u.scheme(), "ws" | "wss"))
            .ok_or(Connect::Retry(
                "apps.connections.open answered no ws(s) URL".into(),
            ))?;
        let host = url.host_str().unwrap_or_default().to_owned();
        let ws = socket::open(&url, MAX_FRAME_BYTES, CONNECT_TIMEOUT)
            .await
            .map_err(Connect::retry)?;
        tracing::info!(channel = crate::NAME, %host, "Connected to Slack Socket Mode.");
        Ok(ws)
    }
}

/// A refusal retrying cannot fix is fatal; the rest is retried.
fn sort(error: ApiError) -> Connect<SocketError> {
    if error.is_transient() || matches!(error, ApiError::Http(_)) {
        Connect::retry(error)
    } else {
        Connect::Fatal(SocketError::Refused(error))
    }
}

impl LongConnection for Link<'_> {
    type Connection = Socket;
    type Fatal = SocketError;

    async fn connect(&mut self) -> Result<Socket, Connect<SocketError>> {
        self.handed_over = self.next.is_some();
        if let Some(next) = self.next.take() {
            return Ok(next);
        }
        if self.handler.needs_identity() {
            let me = self.api.auth_test().await.map_err(sort)?;
            self.handler.identity(me.user_id, me.team_id);
        }
        self.open().await
    }

    async fn serve(&mut self, ws: Socket, shutdown: &CancellationToken) -> Ended {
        let ended = self.serve_one(ws, shutdown).await;
        if !matches!(ended, Ended::Rotated { .. }) {
            self.handler.connected(false);
        }
        ended
    }
}

/// What a frame asks of the connection it came on.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Next {
    /// Keep serving.
    Continue,
    /// `hello`: the connection is ready.
    Ready,
    /// `disconnect` with this reason.
    Disconnect(String),
}

/// One socket being served: the current one or the one being drained.
enum Side {
    Current,
    Old,
}

/// The sockets of one served connection: the current one, the one being drained after a
/// `disconnect` (until when), and the current one's keepalive.
struct Serving {
    current: Socket,
    old: Option<(Socket, Instant)>,
    /// When the next ping goes out (or, once it went, when the connection counts as lost).
    deadline: Instant,
    pinged: bool,
    /// Whether the connection proved itself (`hello`, or an envelope).
    served: bool,
}

/// Why serving stops: the drained connection is gone (the rotation is done), or the
/// current one was lost.
enum Stop {
    HandOver,
    Lost(String),
}

impl Serving {
    /// The current connection showed life: the keepalive starts over.
    fn alive(&mut self) {
        self.pinged = false;
        self.deadline = Instant::now() + KEEPALIVE;
    }

    /// The keepalive is due: a ping, or the connection is lost when the last one went
    /// unanswered.
    async fn keep_alive(&mut self) -> Result<(), Stop> {
        if self.pinged {
            return Err(Stop::Lost("the keepalive ping went unanswered".into()));
        }
        if let Err(error) = self.current.send(Message::Ping(Vec::new().into())).await {
            return Err(Stop::Lost(format!(
                "sending a keepalive ping failed: {}",
                socket::describe(&error)
            )));
        }
        self.pinged = true;
        self.deadline = Instant::now() + PONG_TIMEOUT;
        Ok(())
    }

    /// Closes the connection being drained, if any.
    async fn close_old(&mut self) {
        if let Some((mut ws, _)) = self.old.take() {
            socket::close(&mut ws).await;
        }
    }

    /// The text of what `side` received; `None` for a frame with no text (a binary one,
    /// dropped; a ping or a pong, which only proves life).
    async fn text(
        &mut self,
        side: &Side,
        received: Option<Result<Message, tokio_tungstenite::tungstenite::Error>>,
    ) -> Result<Option<Utf8Bytes>, Stop> {
        match socket::read(received) {
            Ok(Read::Text(text)) => Ok(Some(text)),
            Ok(Read::Binary(data)) => {
                tracing::warn!(
                    channel = crate::NAME,
                    len = data.len(),
                    "Dropped a binary Socket Mode message."
                );
                Ok(None)
            }
            // Pongs only prove life.
            Ok(Read::Alive) => {
                if matches!(side, Side::Current) {
                    self.alive();
                }
                Ok(None)
            }
            // Slack closed the old connection: the hand-over is done.
            Err(_) if matches!(side, Side::Old) => Err(Stop::HandOver),
            Err(gone) => {
                self.close_old().await;
                Err(Stop::Lost(gone.to_string()))
            }
        }
    }

    /// The socket of `side`, while it is open.
    fn socket(&mut self, side: &Side) -> Option<&mut Socket> {
        match side {
            Side::Current => Some(&mut self.current),
            Side::Old => self.old.as_mut().map(|(ws, _)| ws),
        }
    }
}

impl Link<'_> {
    /// Serves `current` (and, after a `disconnect`, its replacement alongside it) until it
    /// ends; a completed hand-over returns [`Ended::Rotated`] with the new connection kept
    /// for [`LongConnection::connect`].
    async fn serve_one(&mut self, current: Socket, shutdown: &CancellationToken) -> Ended {
        let mut serving = Serving {
            current,
            old: None,
            deadline: Instant::now() + KEEPALIVE,
            pinged: false,
            // A connection handed over said `hello` while the old one was still served.
            served: self.handed_over,
        };
        let stop = loop {
            match self.step(&mut serving, shutdown).await {
                Ok(Some(ended)) => return ended,
                Ok(None) => {}
                Err(stop) => break stop,
            }
        };
        match stop {
            Stop::HandOver => self.hand_over(serving.current, serving.served),
            Stop::Lost(reason) => Ended::Lost {
                reason: reason.into(),
                served: serving.served,
            },
        }
    }

    /// Waits for what comes first (shutdown, the keepalive, the end of the drain, a frame
    /// on either socket) and handles it; `Some` when the connection ended at shutdown.
    async fn step(
        &mut self,
        serving: &mut Serving,
        shutdown: &CancellationToken,
    ) -> Result<Option<Ended>, Stop> {
        let drain_until = serving.old.as_ref().map(|(_, until)| *until);
        let (side, received) = tokio::select! {
            () = shutdown.cancelled() => {
                socket::close(&mut serving.current).await;
                serving.close_old().await;
                tracing::info!(channel = crate::NAME, "Closed the Slack Socket Mode connection.");
                return Ok(Some(Ended::Shutdown));
            }
            () = tokio::time::sleep_until(serving.deadline) => {
                serving.keep_alive().await?;
                return Ok(None);
            }
            () = sleep_until(drain_until) => {
                serving.close_old().await;
                return Err(Stop::HandOver);
            }
            received = serving.current.next() => (Side::Current, received),
            received = next_of(&mut serving.old) => (Side::Old, received),
        };
        if let Some(text) = serving.text(&side, received).await? {
            self.frame(serving, &side, &text).await?;
        }
        Ok(None)
    }

    /// Handles a text frame that came on `side`: the handler sees it, its ack goes back
    /// on the same socket, and what it asks of the connection is done.
    async fn frame(&mut self, serving: &mut Serving, side: &Side, text: &str) -> Result<(), Stop> {
        let current = matches!(side, Side::Current);
        if current {
            serving.alive();
        }
        let (ack, next) = receive(text, self.handler);
        if ack.is_some() && current {
            // An envelope proves the connection as well as `hello` does.
            serving.served = true;
        }
        let Some(socket) = serving.socket(side) else {
            return Ok(());
        };
        if let Some(ack) = ack
            && let Err(error) = socket.send(Message::Text(ack.into())).await
        {
            let error = socket::describe(&error);
            tracing::debug!(channel = crate::NAME, %error, "Sending an ack failed.");
            if current {
                return Err(Stop::Lost(format!("sending an ack failed: {error}")));
            }
        }
        match next {
            Next::Continue => {}
            Next::Ready if current => {
                serving.served = true;
                self.handler.connected(true);
            }
            Next::Disconnect(reason) if current => self.rotate(serving, &reason).await?,
            Next::Ready | Next::Disconnect(_) => {}
        }
        Ok(())
    }

    /// Slack asked for a new connection (`disconnect`): opens it and drains the current
    /// one beside it; `link_disabled` ends the connection instead.
    async fn rotate(&mut self, serving: &mut Serving, reason: &str) -> Result<(), Stop> {
        if reason == "link_disabled" {
            socket::close(&mut serving.current).await;
            return Err(Stop::Lost("Slack disabled the Socket Mode link".into()));
        }
        tracing::info!(channel = crate::NAME, %reason, "Slack asked for a new Socket Mode connection; opening it first.");
        match self.open().await {
            Ok(new) => {
                // An older connection still draining is closed now.
                serving.close_old().await;
                let previous = std::mem::replace(&mut serving.current, new);
                serving.old = Some((previous, Instant::now() + DRAIN));
                serving.alive();
            }
            Err(_) => {
                tracing::warn!(
                    channel = crate::NAME,
                    "Opening the replacement Socket Mode connection failed; serving the old one until it closes."
                );
            }
        }
        Ok(())
    }

    /// The old connection is gone: the new one is served next, after the driver counted
    /// the rotation.
    fn hand_over(&mut self, current: Socket, served: bool) -> Ended {
        self.next = Some(current);
        Ended::Rotated {
            served,
            reason: Cow::Borrowed("disconnect"),
        }
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

async fn next_of(
    old: &mut Option<(Socket, Instant)>,
) -> Option<Result<Message, tokio_tungstenite::tungstenite::Error>> {
    match old {
        Some((ws, _)) => ws.next().await,
        None => std::future::pending().await,
    }
}

/// Handles one text frame: the ack to send (the JSON text) and what the frame asks of the
/// connection. Nothing a frame holds can panic this.
pub(crate) fn receive(text: &str, handler: &dyn Envelopes) -> (Option<String>, Next) {
    let frame = match SocketFrame::read(text.as_bytes()) {
        Ok(frame) => frame,
        Err(error) => {
            tracing::warn!(channel = crate::NAME, error = ?error.classify(), "Dropped an unreadable Socket Mode frame.");
            return (None, Next::Continue);
        }
    };
    match frame {
        SocketFrame::Hello(hello) => {
            let host = hello
                .debug_info
                .as_ref()
                .and_then(|d| d.host.as_deref())
                .unwrap_or_default()
                .to_owned();
            tracing::debug!(channel = crate::NAME, %host, connections = hello.num_connections, "Slack said hello.");
            (None, Next::Ready)
        }
        SocketFrame::Disconnect(disconnect) => (None, Next::Disconnect(disconnect.reason)),
        SocketFrame::Other(kind) => {
            tracing::debug!(channel = crate::NAME, %kind, "Ignored a Socket Mode frame.");
            (None, Next::Continue)
        }
        SocketFrame::Envelope(envelope) => {
            let id = envelope.envelope_id.clone();
            let kind = envelope.kind.clone();
            let attempt = envelope.retry_attempt.unwrap_or(0);
            let verdict = handler.handle(envelope);
            tracing::debug!(channel = crate::NAME, envelope_id = %id, %kind, attempt, ?verdict, "Handled a Socket Mode envelope.");
            let ack = match verdict {
                Verdict::Ack => serde_json::to_string(&Ack {
                    envelope_id: id,
                    payload: None,
                })
                .ok(),
                Verdict::Again => None,
            };
            (ack, Next::Continue)
        }
    }
}

#[cfg(test)]
mod tests;
