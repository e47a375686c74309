//! The Feishu long connection: events arrive over a WebSocket the bridge opens itself, so no
//! public URL is needed (spec platforms.md §4.1).
//!
//! `run` loops *discover → connect → serve*:
//!
//! - **Discover** (`endpoint`): `POST {domain}/callback/ws/endpoint` with the app's
//!   credentials answers a one-time WebSocket URL and the server's [`ClientConfig`].
//! - **Connect** (`endpoint`): the URL must carry `device_id` and `service_id`; a refused
//!   upgrade explains itself in `Handshake-*` headers.
//! - **Serve** (here): a ping every `ping_interval` (a pong may carry new timers; a server
//!   silent for 30 s after a ping, or the ping interval if shorter, counts as lost); every
//!   complete data frame goes to the [`EventHandler`] and is acked once the handler's
//!   [`Verdict`] is in, because Feishu re-pushes an event whose ack takes over 3 s: at once
//!   for an event admitted to a queue (the work happens elsewhere), or, for one the
//!   handler holds a moment (a file burst), when it settles, well within the 3 s. Such
//!   deferred acks wait beside the connection; when it ends first they are never sent,
//!   and Feishu delivers those events again.
//!
//! **Reconnecting** is the core's driver (`Reconnect::drive`, paced by
//! [`LongConnection::pace`]) with the [`Reconnect`] policy it is given (the jittered
//! exponential backoff every long connection has, counted and logged there) with Feishu's
//! own timers as a floor: every reconnect waits the backoff plus `random(0..reconnect_nonce)`, and
//! each one after the first in a row at least `reconnect_interval` (plus the nonce), at
//! most `reconnect_count` in a row (-1: forever). A connection proves itself by carrying a
//! frame from the server (a pong, an event): only then does the backoff start over. One
//! that ends before it (a server dropping every new connection) is one more failure in a
//! row, so such a server sees a few attempts a minute, not hundreds a second (issue 27).
//! Refusals that retrying cannot fix end `run` with a [`WsError`]. Cancelling `shutdown`
//! closes the socket politely and returns `Ok(())`.
//!
//! Logs name the endpoint's host only: the URL's query may carry a ticket. The app secret
//! leaves only in the discovery body; payloads are never logged.
//!
//! Children:
//! - `endpoint`: discovery, the WebSocket upgrade and the meaning of its refusals.
//! - `frame`: the binary `pbbp2.Frame` (prost) and the reassembly of split payloads.

mod endpoint;
pub(crate) mod frame;

use std::time::Duration;

use bytes::Bytes;
use futures_util::stream::FuturesUnordered;
use futures_util::{SinkExt, StreamExt};
use im_bridge_channel::Reconnect;
use im_bridge_channel::Secret;
use im_bridge_channel::backoff::jitter;
use im_bridge_channel::reconnect::{Connect, Ended, LongConnection};
use im_bridge_channel::socket::{self, Read};
use prost::Message as _;
use tokio::sync::oneshot;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message;
use tokio_util::sync::CancellationToken;

use crate::model::ClientConfig as WireConfig;
use endpoint::Connection;
use frame::{Dropped, Frame, MAX_PAYLOAD, METHOD_CONTROL, METHOD_DATA, Reassembler};

/// How long the server may stay silent after a ping (or the ping interval, if shorter)
/// before the connection counts as lost and is made again.
const PONG_TIMEOUT: Duration = Duration::from_secs(30);
/// The largest WebSocket message worth decoding: [`MAX_PAYLOAD`] plus room for the frame's
/// headers. A larger one is dropped unread (the connection stays up).
const MAX_FRAME_BYTES: usize = MAX_PAYLOAD + 64 * 1024;

/// The longest timer the server may set: a larger figure (a slip, or a proxy's) would
/// leave the connection unwatched, or the channel idle, for longer than anyone waits, and
/// one past the clock could not be added to it.
const MAX_SERVER_TIMER: Duration = Duration::from_secs(600);

/// Where and as whom to connect.
#[derive(Debug, Clone)]
pub struct WsSettings {
    /// `https://open.feishu.cn` or `https://open.larksuite.com` (or a fake), no trailing path.
    pub domain: String,
    /// The app's `app_id`.
    pub app_id: String,
    /// The app's `app_secret`; sent only in the discovery body.
    pub app_secret: Secret,
}

/// The connection timers. The server sends them in seconds, at discovery and in pongs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientConfig {
    /// How many reconnect attempts in a row before giving up; `-1` means forever.
    pub reconnect_count: i64,
    /// The wait between two failed reconnect attempts (plus jitter).
    pub reconnect_interval: Duration,
    /// The largest random extra wait before a reconnect attempt.
    pub reconnect_nonce: Duration,
    /// How often the client pings.
    pub ping_interval: Duration,
}

impl Default for ClientConfig {
    /// The SDK's values, used until the server sends its own.
    fn default() -> Self {
        Self {
            reconnect_count: -1,
            reconnect_interval: Duration::from_secs(120),
            reconnect_nonce: Duration::from_secs(30),
            ping_interval: Duration::from_secs(120),
        }
    }
}

impl ClientConfig {
    /// Takes the fields the server sent. A missing or negative duration, or a zero ping
    /// interval (a ping storm), keeps the current value; a longer one than
    /// [`MAX_SERVER_TIMER`] is taken as that.
    fn apply(&mut self, wire: &WireConfig) {
        let secs = |v: Option<i64>| {
            v.and_then(|s| u64::try_from(s).ok())
                .map(|s| Duration::from_secs(s).min(MAX_SERVER_TIMER))
        };
        if let Some(count) = wire.reconnect_count {
            self.reconnect_count = count.max(-1);
        }
        if let Some(d) = secs(wire.reconnect_interval) {
            self.reconnect_interval = d;
        }
        if let Some(d) = secs(wire.reconnect_nonce) {
            self.reconnect_nonce = d;
        }
        if let Some(d) = secs(wire.ping_interval).filter(|d| !d.is_zero()) {
            self.ping_interval = d;
        }
    }
}

/// What becomes of a data frame: its ack now, or once the handler settles it.
#[derive(Debug)]
pub enum Verdict {
    /// Accepted (acked with code 200) or not (500, Feishu re-pushes), acked at once.
    Now(bool),
    /// Held by the handler a moment (well under Feishu's 3 s): acked with what it sends,
    /// with 500 if it drops the sender instead. The ack waits beside the connection and
    /// is never sent when the connection ends first (Feishu then delivers the event
    /// again); the handler can tell by [`oneshot::Sender::is_closed`].
    Later(oneshot::Receiver<bool>),
}

impl From<bool> for Verdict {
    fn from(accepted: bool) -> Self {
        Self::Now(accepted)
    }
}

/// Receives each complete data frame.
pub trait EventHandler: Send {
    /// `kind` is the frame's `type` header (`event` or `card`), `payload` its JSON. Called
    /// on the connection's task, which acks by the [`Verdict`]: admit to a queue (or hold
    /// briefly), do not work.
    fn handle(&mut self, kind: &str, payload: Bytes) -> Verdict;

    /// A data frame was dropped (already logged): for the caller's error counter.
    fn dropped(&mut self, _reason: Dropped) {}
}

/// Why the long connection gave up. None of these carries the app secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WsError {
    /// Endpoint discovery answered a code that retrying will not change (bad app id or
    /// secret, app not allowed to use the long connection, …).
    #[error("Feishu refused the long-connection endpoint: code {code}: {msg}")]
    Refused {
        /// The answer's `code`.
        code: i64,
        /// The answer's `msg`.
        msg: String,
    },
    /// The upgrade was refused with `Handshake-Status: 514` (authentication failed).
    #[error("Feishu refused the long connection: authentication failed: {msg}")]
    AuthFailed {
        /// `Handshake-Msg`.
        msg: String,
    },
    /// The upgrade was refused with `Handshake-Status: 403` (the app is forbidden).
    #[error("Feishu refused the long connection: forbidden: {msg}")]
    Forbidden {
        /// `Handshake-Msg`.
        msg: String,
    },
    /// `Handshake-Autherrcode: 1000040350`: the app already holds the most connections
    /// Feishu allows (50).
    #[error("Feishu refused the long connection: too many connections for this app: {msg}")]
    TooManyConnections {
        /// `Handshake-Msg`.
        msg: String,
    },
    /// `reconnect_count` attempts in a row failed.
    #[error("gave up on the Feishu long connection after {attempts} failed reconnect attempts")]
    GaveUp {
        /// How many reconnect attempts failed.
        attempts: u32,
    },
}

/// Holds the long connection until `shutdown`, handing events to `handler` and
/// reconnecting as `reconnect` says (with Feishu's timers as a floor).
///
/// Returns `Ok(())` after a shutdown, `Err` on a refusal retrying cannot fix or when
/// `reconnect_count` attempts in a row failed.
pub(crate) async fn run(
    settings: &WsSettings,
    http: &reqwest::Client,
    handler: &mut dyn EventHandler,
    reconnect: Reconnect,
    shutdown: &CancellationToken,
) -> Result<(), WsError> {
    let mut link = Link {
        settings,
        http,
        handler,
        config: ClientConfig::default(),
        reassembler: Reassembler::new(),
    };
    reconnect.drive(&mut link, shutdown).await
}

/// The long connection as the core's reconnect driver runs it: what outlives one
/// connection (the server's timers, split payloads waiting for their parts) lives here.
struct Link<'a> {
    settings: &'a WsSettings,
    http: &'a reqwest::Client,
    handler: &'a mut dyn EventHandler,
    config: ClientConfig,
    reassembler: Reassembler,
}

impl LongConnection for Link<'_> {
    type Connection = Connection;
    type Fatal = WsError;

    async fn connect(&mut self) -> Result<Connection, Connect<WsError>> {
        endpoint::connect(self.settings, self.http, &mut self.config).await
    }

    async fn serve(&mut self, conn: Connection, shutdown: &CancellationToken) -> Ended {
        let handler = &mut *self.handler;
        serve(
            conn,
            &mut self.config,
            &mut self.reassembler,
            handler,
            shutdown,
        )
        .await
    }

    /// Feishu's timers on top of the backoff: at most `reconnect_count` in a row, each
    /// after the first at least `reconnect_interval`, each plus `random(0..reconnect_nonce)`.
    fn pace(&mut self, made: u32, backoff: Duration) -> Result<Duration, WsError> {
        let config = &self.config;
        if config.reconnect_count >= 0 && i64::from(made) >= config.reconnect_count {
            return Err(WsError::GaveUp { attempts: made });
        }
        let floor = if made == 0 {
            Duration::ZERO
        } else {
            config.reconnect_interval
        };
        Ok(backoff.max(floor) + jitter(config.reconnect_nonce))
    }
}

/// Serves one connection until it ends or `shutdown` is cancelled.
async fn serve(
    conn: Connection,
    config: &mut ClientConfig,
    reassembler: &mut Reassembler,
    handler: &mut dyn EventHandler,
    shutdown: &CancellationToken,
) -> Ended {
    let Connection {
        mut ws, service, ..
    } = conn;
    // The first ping goes out at once (as the SDK's), the next `ping_interval` after it.
    let mut last_ping: Option<Instant> = None;
    // Set by a ping, cleared by anything the server sends: a connection that went quiet
    // (a half-open TCP connection, a stuck proxy) would otherwise never be noticed.
    let mut answer_due: Option<Instant> = None;
    // Whether the server sent anything on this connection (it proved itself).
    let mut served = false;
    // Acks the handler has not settled yet, bounded by what it holds (its file bursts);
    // dropped unsent with the connection.
    let mut deferred = FuturesUnordered::new();
    let lost = |reason: String, served: bool| Ended::Lost {
        reason: reason.into(),
        served,
    };
    loop {
        let next_ping = last_ping.map_or_else(Instant::now, |at| at + config.ping_interval);
        let silent = async {
            match answer_due {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = silent => {
                return lost("the server did not answer a ping".into(), served);
            }
            () = shutdown.cancelled() => {
                socket::close_at_shutdown(&mut ws, crate::NAME).await;
                return Ended::Shutdown;
            }
            () = tokio::time::sleep_until(next_ping) => {
                let now = Instant::now();
                last_ping = Some(now);
                if answer_due.is_none() {
                    answer_due = Some(now + config.ping_interval.min(PONG_TIMEOUT));
                }
                let ping = Frame::ping(service).encode_to_vec();
                if let Err(error) = ws.send(Message::Binary(ping.into())).await {
                    return lost(format!("sending a ping failed: {error}"), served);
                }
                tracing::trace!("Pinged Feishu.");
            }
            Some(ack) = deferred.next(), if !deferred.is_empty() => {
                let ack: Frame = ack;
                if let Err(error) = ws.send(Message::Binary(ack.encode_to_vec().into())).await {
                    return lost(format!("sending an ack failed: {error}"), served);
                }
            }
            received = ws.next() => {
                answer_due = None;
                let read = match socket::read(received) {
                    Ok(read) => read,
                    Err(gone) => return lost(gone.to_string(), served),
                };
                served = true;
                let data = match read {
                    Read::Binary(data) => data,
                    Read::Text(_) => {
                        tracing::debug!("Ignored a text message on the Feishu long connection.");
                        continue;
                    }
                    Read::Alive => continue,
                };
                let ack = match receive(&data, config, reassembler, handler) {
                    None => continue,
                    Some(Reply::Ack(ack)) => ack,
                    Some(Reply::Later(later)) => {
                        deferred.push(later.settle());
                        continue;
                    }
                };
                if let Err(error) = ws.send(Message::Binary(ack.encode_to_vec().into())).await {
                    return lost(format!("sending an ack failed: {error}"), served);
                }
            }
        }
    }
}

/// The answer to a data frame.
#[derive(Debug)]
pub(crate) enum Reply {
    /// The ack to send now.
    Ack(Frame),
    /// An ack to send once the handler settles it.
    Later(Deferred),
}

/// An ack the handler settles later ([`Verdict::Later`]).
#[derive(Debug)]
pub(crate) struct Deferred {
    /// The frame answered, without its payload.
    frame: Frame,
    started: Instant,
    accepted: oneshot::Receiver<bool>,
}

impl Deferred {
    /// The ack, once the handler settled it (500 when it dropped the sender).
    pub(crate) async fn settle(self) -> Frame {
        let accepted = self.accepted.await.unwrap_or(false);
        ack(&self.frame, accepted, self.started)
    }
}

/// Handles one binary message; returns the ack to send, if any.
pub(crate) fn receive(
    data: &[u8],
    config: &mut ClientConfig,
    reassembler: &mut Reassembler,
    handler: &mut dyn EventHandler,
) -> Option<Reply> {
    if data.len() > MAX_FRAME_BYTES {
        tracing::warn!(len = data.len(), "Dropped an oversized Feishu frame.");
        handler.dropped(Dropped::TooLarge);
        return None;
    }
    let frame = match Frame::decode(data) {
        Ok(frame) => frame,
        Err(error) => {
            tracing::warn!(%error, "Dropped an undecodable Feishu frame.");
            handler.dropped(Dropped::Undecodable);
            return None;
        }
    };
    match frame.method {
        METHOD_CONTROL => {
            control(&frame, config);
            None
        }
        METHOD_DATA => data_frame(&frame, reassembler, handler),
        method => {
            tracing::debug!(method, "Ignored a Feishu frame of an unknown method.");
            None
        }
    }
}

/// A pong may carry new timers; other control frames mean nothing to a client.
fn control(frame: &Frame, config: &mut ClientConfig) {
    if frame.header("type") != Some("pong") {
        return;
    }
    let payload = frame.payload_bytes();
    if payload.is_empty() {
        tracing::trace!("Feishu answered the ping.");
        return;
    }
    match serde_json::from_slice::<WireConfig>(&payload) {
        Ok(wire) => {
            config.apply(&wire);
            tracing::debug!(
                ping_interval_s = config.ping_interval.as_secs(),
                reconnect_count = config.reconnect_count,
                reconnect_interval_s = config.reconnect_interval.as_secs(),
                reconnect_nonce_s = config.reconnect_nonce.as_secs(),
                "Feishu updated the connection timers."
            );
        }
        Err(error) => {
            tracing::warn!(%error, "Ignored an unreadable ClientConfig in a Feishu pong.")
        }
    }
}

/// An event or card: reassembled if split, handed over, acked (now or later).
fn data_frame(
    frame: &Frame,
    reassembler: &mut Reassembler,
    handler: &mut dyn EventHandler,
) -> Option<Reply> {
    let kind = match frame.header("type") {
        Some(kind @ ("event" | "card")) => kind,
        other => {
            tracing::debug!(
                kind = other.unwrap_or(""),
                "Ignored a Feishu data frame of an unknown type."
            );
            return None;
        }
    };
    let payload = match reassembler.push(frame, Instant::now()) {
        Ok(Some(payload)) => payload,
        Ok(None) => return None,
        Err(reason) => {
            handler.dropped(reason);
            return None;
        }
    };
    let started = Instant::now();
    match handler.handle(kind, payload) {
        Verdict::Now(accepted) => Some(Reply::Ack(ack(frame, accepted, started))),
        Verdict::Later(accepted) => {
            let mut frame = frame.clone();
            frame.payload = None;
            Some(Reply::Later(Deferred {
                frame,
                started,
                accepted,
            }))
        }
    }
}

/// The ack of `frame`: 200 when `accepted`, else 500, with the time since `started`.
fn ack(frame: &Frame, accepted: bool, started: Instant) -> Frame {
    let code = if accepted { 200 } else { 500 };
    tracing::debug!(
        kind = frame.header("type").unwrap_or(""),
        message_id = frame.header("message_id").unwrap_or(""),
        trace_id = frame.header("trace_id").unwrap_or(""),
        code,
        "Acking a Feishu data frame."
    );
    frame.ack(code, started.elapsed())
}

#[cfg(test)]
mod tests;
