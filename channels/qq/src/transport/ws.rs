//! The QQ gateway: events arrive over an op-code WebSocket the bridge opens itself, so no
//! public URL is needed (spec platforms.md §6.1).
//!
//! [`run`] hands a [`Gateway`] (a [`LongConnection`]) to the core's [`Reconnect::drive`],
//! which loops *connect → serve → ended* (connect being discovery and the upgrade):
//!
//! - **Discover**: `GET {api_url}/gateway` (with the token) answers the WebSocket URL,
//!   which must pass `url::check_url` before the token is sent to it.
//! - **Serve**: the server says Hello (op 10) with its heartbeat interval; the client
//!   answers Identify (op 2: `QQBot <token>`, intents [`INTENTS`], shard `[0, 1]`), or
//!   Resume (op 6: token, session id, last `s`) when it holds a session. READY (the
//!   session id and the bot's id) or RESUMED starts the heartbeats: op 1 with the last
//!   `s` at once and then every interval; a beat whose predecessor got no ACK (op 11)
//!   means the connection is dead, and it is replaced. A server heartbeat request (op 1)
//!   is answered at once. Each event (op 0) goes to the [`EventHandler`], and once it is
//!   taken its `s` becomes the one heartbeats and a Resume echo; an event the handler
//!   could not take (the daemon overloaded or stopping) ends the connection with `s`
//!   unchanged, and the Resume has QQ send it again: after [`OVERLOAD_BACKOFF`], which
//!   grows with each such connection in a row (the reconnect policy's own backoff starts
//!   over after RESUMED), so a daemon that stays overloaded is not resumed into, and
//!   handed the same event, every second.
//! - **Reconnect**: op 7 reconnects at once and resumes; op 9 reconnects and resumes when
//!   `d` is `true`, identifies anew otherwise, and either way the token is fetched again
//!   (the spec's rule); close codes are sorted by `close` after QQ's table (4008 and
//!   4009 resume, 4000–4007 and 4900–4913 identify anew, 4004 refetches the token, the bot's ban and refused intents end
//!   `run`); a dropped socket resumes. Waits between attempts follow the [`Reconnect`]
//!   `run` is given (the channel's: [`RECONNECT_BACKOFF`], 1 s doubling to 30 s, plus
//!   jitter), started over after a connection that saw READY or RESUMED (it `served`);
//!   each reconnect is counted and logged there, rate-limited. op 7 after a live session
//!   goes at once (a rotation). A refusal met while serving (a fatal close code, the
//!   token refused at Identify) ends the connection as `Ended::Shutdown` with the error
//!   kept, and `run` returns it.
//!   A resume asks QQ for everything after the last `s` the handler saw, so a dropped
//!   socket loses no event.
//!
//! **Bounds.** A frame over [`MAX_FRAME_BYTES`] is dropped unread, a frame that is not a
//! payload dropped too, each with a log line and [`EventHandler::dropped`] (the
//! connection stays); a WebSocket message over 4 MiB fails the connection (tungstenite's
//! bound). Hello, READY and the connect each have a deadline.
//!
//! Logs name the gateway's host and op codes only: never the token, a session id, or an
//! event's content. Cancelling `shutdown` closes the socket politely and returns `Ok`.
//!
//! Children:
//! - `payload`: the `{op, d, s, t, id}` frames, read and written;
//! - `close`: what each close code means;
//! - `url`: the check of the gateway URL.

mod close;
pub(crate) mod payload;
mod url;

pub use self::close::Refusal;
pub use self::url::{UrlRefused, check_url, is_loopback_base};

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use im_bridge_channel::backoff::Backoff;
use im_bridge_channel::reconnect::{Connect, Ended, LongConnection};
use im_bridge_channel::socket::{self, Gone, Read, Socket, UpgradeError};
use im_bridge_channel::{Reconnect, Secret};
use serde_json::Value;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message;
use tokio_util::sync::CancellationToken;

use self::close::{AfterClose, after_close};
use self::payload::{
    OP_DISPATCH, OP_HEARTBEAT, OP_HEARTBEAT_ACK, OP_HELLO, OP_INVALID_SESSION, OP_RECONNECT,
    Payload,
};
use super::Offered;
use crate::api::Api;
use crate::error::ApiError;

/// The intents asked for: group @-messages and C2C messages (`GROUP_AND_C2C_EVENT`).
pub const INTENTS: u64 = 1 << 25;
/// The largest frame read; a larger one is dropped (the connection stays).
pub const MAX_FRAME_BYTES: usize = 256 * 1024;
/// The default reconnect backoff: 1 s doubling to 30 s, plus up to 1 s of jitter.
pub const RECONNECT_BACKOFF: Backoff = Backoff::new(
    Duration::from_secs(1),
    Duration::from_secs(30),
    Duration::from_secs(1),
);
/// The wait before resuming after a connection that ended on an event the daemon could
/// not take (it was overloaded): 1 s doubling to 30 s, plus up to 1 s of jitter, for each
/// such connection in a row, so an overloaded daemon is not met with a Resume (and the
/// same refused event) every second. Started over after [`OVERLOAD_CALM`].
pub const OVERLOAD_BACKOFF: Backoff = RECONNECT_BACKOFF;
/// A connection that ends otherwise, or that was up this long before an event was turned
/// away, starts [`OVERLOAD_BACKOFF`] over: that overload is a new one.
pub const OVERLOAD_CALM: Duration = Duration::from_secs(60);
/// tungstenite's bound on one message; past it the connection fails. Frames between
/// [`MAX_FRAME_BYTES`] and this are read and dropped.
const MAX_WS_MESSAGE: usize = 4 * 1024 * 1024;
/// Bound on the TCP + TLS + upgrade of the socket.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);
/// How long Hello may take after the upgrade, and READY or RESUMED after Identify or
/// Resume.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(15);

/// How the gateway connects.
#[derive(Clone, Debug)]
pub struct GatewaySettings {
    /// The intents of Identify (default [`INTENTS`]).
    pub intents: u64,
    /// The waits after connections that ended on an event the daemon could not take
    /// (default [`OVERLOAD_BACKOFF`]); never shorter than the reconnect policy's.
    pub overload_backoff: Backoff,
}

impl Default for GatewaySettings {
    fn default() -> Self {
        Self {
            intents: INTENTS,
            overload_backoff: OVERLOAD_BACKOFF,
        }
    }
}

/// READY: the session and who the bot is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ready {
    /// The session id (what a Resume names). Not logged.
    pub session_id: String,
    /// The bot's user id (what `<@!id>` mentions of it carry).
    pub bot_id: String,
    /// The bot's name.
    pub username: String,
}

/// One event (op 0 other than READY and RESUMED).
#[derive(Clone, Debug, PartialEq)]
pub struct Dispatch {
    /// `t`, e.g. `GROUP_AT_MESSAGE_CREATE`.
    pub kind: String,
    /// The payload's `id` (the event id), when present.
    pub id: Option<String>,
    /// `s`.
    pub seq: Option<u64>,
    /// `d`.
    pub data: Value,
}

/// Why a frame was dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dropped {
    /// Over [`MAX_FRAME_BYTES`].
    TooLarge,
    /// Not a `{op, …}` payload, or a READY without its session.
    Malformed,
}

/// Receives what the gateway delivers. Called on the connection's task: admit to a
/// queue, do not work.
pub trait EventHandler: Send {
    /// A session started (READY): the bot's id is known from now on.
    fn ready(&mut self, ready: &Ready) {
        let _ = ready;
    }

    /// A session was resumed (RESUMED).
    fn resumed(&mut self) {}

    /// An event: whether it was taken ([`Offered::Done`], also when it was skipped) or
    /// must come again ([`Offered::Again`]: the connection then ends before its `s` counts,
    /// and the Resume that follows has QQ send it again).
    fn event(&mut self, event: Dispatch) -> Offered;

    /// A frame was dropped (already logged): for the caller's error counter.
    fn dropped(&mut self, reason: Dropped) {
        let _ = reason;
    }

    /// The connection was lost (a new one is being made, or `run` is about to return).
    fn disconnected(&mut self) {}
}

/// Why the gateway gave up. None of these carries a token.
#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    /// QQ closed the connection with a code retrying cannot fix.
    #[error("QQ closed the gateway with code {code}: {meaning}")]
    Closed {
        /// The close code.
        code: u16,
        /// What it refused.
        meaning: Refusal,
    },
    /// The token or the gateway URL was refused for good (a wrong secret, say).
    #[error("QQ refused the gateway: {0}")]
    Refused(#[source] ApiError),
}

/// The session the next connection resumes, if any.
#[derive(Debug, Default)]
struct Session {
    id: Option<String>,
    /// The last `s` seen in this session.
    seq: Option<u64>,
}

/// What the next connection does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Next {
    Resume,
    Identify,
}

/// Why a connection ended, or none came up (safe to log: no token, session or content).
#[derive(Debug, thiserror::Error)]
enum Lost {
    #[error("discovering the gateway failed: {0}")]
    Discovery(ApiError),
    #[error("the gateway URL was refused: {0}")]
    BadUrl(UrlRefused),
    #[error(transparent)]
    Upgrade(UpgradeError),
    #[error("no Hello in time")]
    NoHello,
    #[error("no READY or RESUMED in time")]
    NoReady,
    #[error("the last heartbeat got no ACK")]
    NoAck,
    #[error(transparent)]
    Gone(Gone),
    #[error("closed with code {0}")]
    Closed(u16),
    #[error("QQ asked to reconnect (op 7)")]
    Reconnect,
    #[error("QQ invalidated the session (op 9, resumable: {0})")]
    InvalidSession(bool),
    #[error("READY without a session")]
    BadReady,
    #[error("the daemon could not take an event now; it is resumed to come again")]
    NotTaken,
    #[error("no access token: {0}")]
    NoToken(ApiError),
    #[error("sending failed: {0}")]
    Send(tokio_tungstenite::tungstenite::Error),
}

/// How one connection ended.
enum Outcome {
    Shutdown,
    Lost {
        reason: Lost,
        next: Next,
        /// Whether QQ asked for the new connection (op 7): a rotation, not a failure.
        rotated: bool,
    },
    Fatal(GatewayError),
}

fn lost(reason: Lost, next: Next) -> Outcome {
    Outcome::Lost {
        reason,
        next,
        rotated: false,
    }
}

/// Holds the gateway until `shutdown`, handing events to `handler` and reconnecting as
/// `reconnect` says (the core's [`Reconnect::drive`] over [`Gateway`]).
///
/// Returns `Ok(())` after a shutdown, `Err` when QQ refused something retrying cannot fix.
pub(crate) async fn run(
    api: &Api,
    settings: &GatewaySettings,
    handler: &mut dyn EventHandler,
    reconnect: Reconnect,
    shutdown: &CancellationToken,
) -> Result<(), GatewayError> {
    let mut gateway = Gateway {
        api,
        intents: settings.intents,
        loopback: is_loopback_base(api.api_url()),
        session: Session::default(),
        handler,
        fatal: None,
        overload: settings.overload_backoff.clone(),
        overloaded: false,
    };
    reconnect.drive(&mut gateway, shutdown).await?;
    // A refusal met while serving ended the loop as a shutdown would.
    gateway.fatal.take().map_or(Ok(()), Err)
}

/// The gateway as [`Reconnect::drive`] runs it: [`connect`](LongConnection::connect)
/// discovers the URL and opens the socket, [`serve`](LongConnection::serve) says Hello to
/// READY and serves events until the connection ends.
struct Gateway<'a> {
    api: &'a Api,
    intents: u64,
    /// Whether `api_url` is a loopback address (a loopback gateway URL is then accepted).
    loopback: bool,
    /// The session the next connection resumes (kept across connections).
    session: Session,
    handler: &'a mut dyn EventHandler,
    /// A refusal met while serving (a fatal close code, a refused token at Identify): the
    /// connection reports a shutdown to end the loop, and [`run`] returns this.
    fatal: Option<GatewayError>,
    /// The waits after connections the daemon turned an event away on, one after another
    /// ([`GatewaySettings::overload_backoff`]): the core's policy starts over after every
    /// connection that saw READY or RESUMED, which such a connection did.
    overload: Backoff,
    /// Whether the last connection ended on an event the daemon could not take.
    overloaded: bool,
}

impl LongConnection for Gateway<'_> {
    type Connection = Socket;
    type Fatal = GatewayError;

    async fn connect(&mut self) -> Result<Socket, Connect<GatewayError>> {
        let text = match self.api.gateway_url().await {
            Ok(text) => text,
            Err(error) if error.is_transient() => {
                return Err(Connect::retry(Lost::Discovery(error)));
            }
            Err(error) => {
                tracing::error!(%error, "QQ refused the gateway discovery.");
                return Err(Connect::Fatal(GatewayError::Refused(error)));
            }
        };
        let url = check_url(&text, self.loopback)
            .map_err(|reason| Connect::retry(Lost::BadUrl(reason)))?;
        let host = url.host_str().unwrap_or("").to_owned();
        let ws = socket::open(&url, MAX_WS_MESSAGE, CONNECT_TIMEOUT)
            .await
            .map_err(|e| Connect::retry(Lost::Upgrade(e)))?;
        tracing::info!(%host, resume = self.session.id.is_some(), "Connected to the QQ gateway.");
        Ok(ws)
    }

    async fn serve(&mut self, ws: Socket, shutdown: &CancellationToken) -> Ended {
        let started = Instant::now();
        let mut conn = Conn {
            ws,
            api: self.api,
            intents: self.intents,
            session: &mut self.session,
            live: false,
            handler: &mut *self.handler,
            token: None,
        };
        let outcome = conn.serve(shutdown).await;
        let served = conn.live;
        self.overloaded = matches!(
            outcome,
            Outcome::Lost {
                reason: Lost::NotTaken,
                ..
            }
        );
        if !self.overloaded || started.elapsed() >= OVERLOAD_CALM {
            self.overload.reset();
        }
        match outcome {
            Outcome::Shutdown => Ended::Shutdown,
            Outcome::Fatal(error) => {
                self.handler.disconnected();
                tracing::error!(%error, "The QQ gateway refused the bot.");
                self.fatal = Some(error);
                Ended::Shutdown
            }
            Outcome::Lost {
                reason,
                next,
                rotated,
            } => {
                self.handler.disconnected();
                if next == Next::Identify {
                    self.session = Session::default();
                }
                let reason = reason.to_string().into();
                if rotated {
                    Ended::Rotated { served, reason }
                } else {
                    Ended::Lost { served, reason }
                }
            }
        }
    }

    /// After a connection the daemon turned an event away on, the overload's wait (longer
    /// for each such connection in a row); otherwise the policy's `backoff`.
    fn pace(&mut self, _in_a_row: u32, backoff: Duration) -> Result<Duration, GatewayError> {
        if self.overloaded {
            Ok(self.overload.next_wait().max(backoff))
        } else {
            Ok(backoff)
        }
    }
}

/// One connection and what it updates.
struct Conn<'a> {
    ws: Socket,
    api: &'a Api,
    intents: u64,
    session: &'a mut Session,
    /// Whether READY or RESUMED came on this connection (it proved itself).
    live: bool,
    handler: &'a mut dyn EventHandler,
    /// The token Identify or Resume carried, to forget when QQ refuses it.
    token: Option<Secret>,
}

impl Conn<'_> {
    /// Serves the connection until it ends or `shutdown` is cancelled.
    async fn serve(&mut self, shutdown: &CancellationToken) -> Outcome {
        // Hello, then READY/RESUMED, must come by this; `None` once live.
        let mut handshake: Option<Instant> = Some(Instant::now() + HANDSHAKE_TIMEOUT);
        let mut hello_seen = false;
        let mut interval = payload::DEFAULT_HEARTBEAT;
        let mut next_beat: Option<Instant> = None;
        let mut awaiting_ack = false;
        loop {
            let far = Instant::now() + Duration::from_secs(3600);
            tokio::select! {
                () = shutdown.cancelled() => {
                    socket::close_at_shutdown(&mut self.ws, crate::NAME).await;
                    return Outcome::Shutdown;
                }
                () = tokio::time::sleep_until(handshake.unwrap_or(far)), if handshake.is_some() => {
                    let reason = if hello_seen { Lost::NoReady } else { Lost::NoHello };
                    return lost(reason, Next::Resume);
                }
                () = tokio::time::sleep_until(next_beat.unwrap_or(far)), if next_beat.is_some() => {
                    if awaiting_ack {
                        return lost(Lost::NoAck, Next::Resume);
                    }
                    if let Err(error) = self.send(payload::heartbeat(self.session.seq)).await {
                        return lost(Lost::Send(error), Next::Resume);
                    }
                    awaiting_ack = true;
                    next_beat = Some(Instant::now() + interval);
                }
                received = self.ws.next() => {
                    let bytes = match socket::read(received) {
                        Err(Gone::Closed { code }) => return self.closed(code).await,
                        Err(gone) => return lost(Lost::Gone(gone), Next::Resume),
                        Ok(Read::Text(text)) => bytes::Bytes::from(text),
                        Ok(Read::Binary(data)) => data,
                        Ok(Read::Alive) => continue,
                    };
                    let frame = match payload::decode(&bytes, MAX_FRAME_BYTES) {
                        Ok(frame) => frame,
                        Err(reason) => {
                            tracing::warn!(len = bytes.len(), ?reason, "Dropped a QQ gateway frame.");
                            self.handler.dropped(reason);
                            continue;
                        }
                    };
                    match frame.op {
                        OP_HELLO if !hello_seen => {
                            hello_seen = true;
                            interval = payload::heartbeat_interval(&frame.d);
                            let introduced = tokio::select! {
                                () = shutdown.cancelled() => return Outcome::Shutdown,
                                i = self.introduce() => i,
                            };
                            if let Err(ended) = introduced {
                                return ended;
                            }
                            handshake = Some(Instant::now() + HANDSHAKE_TIMEOUT);
                        }
                        OP_HEARTBEAT_ACK => awaiting_ack = false,
                        OP_HEARTBEAT => {
                            if let Err(error) = self.send(payload::heartbeat(self.session.seq)).await {
                                return lost(Lost::Send(error), Next::Resume);
                            }
                        }
                        OP_RECONNECT => {
                            return Outcome::Lost {
                                reason: Lost::Reconnect,
                                next: Next::Resume,
                                rotated: true,
                            };
                        }
                        OP_INVALID_SESSION => {
                            self.forget_token().await;
                            let resumable = frame.d.as_bool() == Some(true);
                            let next = if resumable { Next::Resume } else { Next::Identify };
                            return lost(Lost::InvalidSession(resumable), next);
                        }
                        OP_DISPATCH => match self.dispatch(frame) {
                            Live::Started => {
                                handshake = None;
                                awaiting_ack = false;
                                next_beat = Some(Instant::now());
                            }
                            Live::Unchanged => {}
                            Live::Broken => return lost(Lost::BadReady, Next::Identify),
                            // Dropped without a close frame: a client's close may end
                            // the session a Resume needs.
                            Live::NotTaken => return lost(Lost::NotTaken, Next::Resume),
                        },
                        op => tracing::debug!(op, "Ignored a QQ gateway frame."),
                    }
                }
            }
        }
    }

    /// Identify, or Resume when a session is held.
    async fn introduce(&mut self) -> Result<(), Outcome> {
        let token = match self.api.tokens().get().await {
            Ok(token) => token,
            Err(error) if error.is_transient() => {
                return Err(lost(Lost::NoToken(error), Next::Resume));
            }
            Err(error) => return Err(Outcome::Fatal(GatewayError::Refused(error))),
        };
        let text = match &self.session.id {
            Some(id) => payload::resume(&token, id, self.session.seq.unwrap_or(0)),
            None => payload::identify(&token, self.intents),
        };
        self.token = Some(token);
        self.send(text)
            .await
            .map_err(|e| lost(Lost::Send(e), Next::Resume))
    }

    /// An op 0 frame: READY, RESUMED or an event.
    fn dispatch(&mut self, frame: Payload) -> Live {
        let kind = frame.t.unwrap_or_default();
        match kind.as_str() {
            "READY" => {
                let Some(ready) = payload::ready(&frame.d) else {
                    tracing::warn!("Dropped a QQ READY without its session.");
                    self.handler.dropped(Dropped::Malformed);
                    return Live::Broken;
                };
                self.session.id = Some(ready.session_id.clone());
                self.session.seq = frame.s;
                self.live = true;
                tracing::info!(bot = %ready.bot_id, "The QQ gateway is ready.");
                self.handler.ready(&ready);
                Live::Started
            }
            "RESUMED" => {
                if let Some(s) = frame.s.filter(|s| *s > 0) {
                    self.session.seq = Some(s);
                }
                self.live = true;
                tracing::info!("Resumed the QQ gateway session.");
                self.handler.resumed();
                Live::Started
            }
            _ => {
                // The latest `s` taken is what heartbeats and a Resume echo (as the
                // official SDKs do). An event seen twice is still handed on: duplicates
                // are the inbound layer's to drop (`inbound::Seen`, the redelivery key),
                // so an unexpected numbering can never make this layer lose one. An event
                // the handler could not take leaves `s` where it was.
                tracing::debug!(kind = %kind, seq = frame.s, "Received a QQ event.");
                let offered = self.handler.event(Dispatch {
                    kind,
                    id: frame.id,
                    seq: frame.s,
                    data: frame.d,
                });
                if offered == Offered::Again {
                    return Live::NotTaken;
                }
                if let Some(s) = frame.s.filter(|s| *s > 0) {
                    self.session.seq = Some(s);
                }
                Live::Unchanged
            }
        }
    }

    /// The server closed the connection with `code`.
    async fn closed(&mut self, code: Option<u16>) -> Outcome {
        let Some(code) = code else {
            return lost(Lost::Gone(Gone::Closed { code: None }), Next::Resume);
        };
        match after_close(code) {
            AfterClose::Resume => lost(Lost::Closed(code), Next::Resume),
            AfterClose::Identify { refresh_token } => {
                if refresh_token {
                    self.forget_token().await;
                }
                lost(Lost::Closed(code), Next::Identify)
            }
            AfterClose::Fatal(meaning) => Outcome::Fatal(GatewayError::Closed { code, meaning }),
        }
    }

    /// QQ refused the token Identify or Resume carried: fetch another next time.
    async fn forget_token(&mut self) {
        if let Some(token) = self.token.take() {
            self.api.tokens().invalidate(&token).await;
        }
    }

    async fn send(&mut self, text: String) -> Result<(), tokio_tungstenite::tungstenite::Error> {
        self.ws.send(Message::Text(text.into())).await
    }
}

/// What a dispatch did to the connection's state.
enum Live {
    /// READY or RESUMED: heartbeats start.
    Started,
    /// An event (or nothing).
    Unchanged,
    /// A READY that cannot be used.
    Broken,
    /// An event the handler could not take: resume, so QQ sends it again.
    NotTaken,
}

#[cfg(test)]
mod tests;
