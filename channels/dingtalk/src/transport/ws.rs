//! DingTalk stream mode: robot messages arrive over a WebSocket the bridge opens itself,
//! so no public URL is needed (spec platforms.md §5.1).
//!
//! `run` loops *open → connect → serve* through the core's reconnect driver
//! (`Reconnect::drive`):
//!
//! - **Open and connect** (`endpoint`): `connections/open` answers an endpoint and a
//!   one-time ticket; the socket is `endpoint?ticket=…`.
//! - **Serve** (here): every text frame is answered with an ack, and the ack goes out
//!   *before* the event is worked on: the [`EventHandler`] only admits a robot message to
//!   a queue and says how that went ([`Verdict`]), and DingTalk delivers again what it
//!   does not see acknowledged with 200. SYSTEM `ping` is acked with its own `data`;
//!   SYSTEM `disconnect` is acked, then the socket is closed and a new ticket fetched at
//!   once. A frame that cannot be read is acked 400 when its `messageId` is readable,
//!   counted through [`EventHandler::dropped`] and logged without its payload; a frame
//!   over [`MAX_FRAME_BYTES`] is dropped unread. Nothing a frame holds can panic this
//!   loop.
//! - **Keepalive:** after [`Timers::keepalive`] without a frame from DingTalk the client
//!   sends a WebSocket ping; with no answer of any kind within [`Timers::pong_timeout`]
//!   the connection counts as lost (a half-open TCP connection would otherwise hang here
//!   forever).
//!
//! After a lost connection or a failed attempt the next waits per the [`Reconnect`] `run`
//! is given (the channel's: [`RECONNECT_BACKOFF`], doubling from 1 s up to 60 s, plus up
//! to 1 s of jitter, the Python SDK's schedule), and back to 1 s once a connection has
//! carried a frame; a `disconnect` after other frames reconnects at once. Each
//! reconnect is counted and logged there, rate-limited. Only a refusal retrying cannot
//! fix ends `run` with a [`StreamError`]; cancelling `shutdown` closes the socket politely
//! and returns `Ok(())`.
//!
//! Every replica connects: DingTalk hands each message to one of an app's connections.
//! Logs name the endpoint's host, frame ids and topics only: never the ticket, the secret
//! or a payload.
//!
//! Children:
//! - `frame`: the JSON frames and acks.
//! - `endpoint`: `connections/open`, the upgrade and the meaning of their refusals.

mod endpoint;
pub mod frame;

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use im_bridge_channel::backoff::Backoff;
use im_bridge_channel::reconnect::{Connect, Ended, LongConnection};
use im_bridge_channel::{Reconnect, Secret, reconnect, socket};
use serde_json::Value;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message;
use tokio_util::sync::CancellationToken;

use endpoint::Connection;
use frame::{Ack, Frame, code};

/// The topic robot messages arrive on (a `CALLBACK`).
pub const TOPIC_BOT_MESSAGE: &str = "/v1.0/im/bot/messages/get";
/// The largest frame worth reading: robot messages are a few KB. A larger one is dropped
/// unread (the connection stays up).
pub const MAX_FRAME_BYTES: usize = 1024 * 1024;
/// The reconnect backoff: 1 s doubling to 60 s plus up to 1 s of jitter, the Python
/// SDK's schedule (and the core's default).
pub const RECONNECT_BACKOFF: Backoff = reconnect::BACKOFF;

/// Where and as whom to connect.
#[derive(Debug, Clone)]
pub struct StreamSettings {
    /// `https://api.dingtalk.com` (or a fake), no trailing path.
    pub api_url: String,
    /// The app's `client_id` (AppKey).
    pub client_id: String,
    /// The app's `client_secret`; sent only in the `connections/open` body.
    pub client_secret: Secret,
    /// Keepalive timing.
    pub timers: Timers,
}

/// Keepalive timing.
#[derive(Debug, Clone)]
pub struct Timers {
    /// Silence from DingTalk after which the client pings.
    pub keepalive: Duration,
    /// How long an answer to that ping may take before the connection counts as lost.
    pub pong_timeout: Duration,
}

impl Default for Timers {
    /// A ping after 60 s of silence, lost after 10 s more.
    fn default() -> Self {
        Self {
            keepalive: Duration::from_secs(60),
            pong_timeout: Duration::from_secs(10),
        }
    }
}

/// How the handler took a robot message; it becomes the frame's ack.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Admitted (or deliberately skipped): ack 200, DingTalk will not deliver it again.
    Accepted,
    /// Not admitted now (shutting down, overloaded): ack 500, DingTalk delivers it again,
    /// possibly to another replica.
    Retry,
    /// Its `data` is not a robot message: ack 400; already counted by the handler.
    Malformed,
}

impl Verdict {
    fn ack(self, message_id: &str) -> Ack {
        match self {
            Self::Accepted => Ack::callback(message_id, code::OK, "OK", Value::from("OK")),
            Self::Retry => Ack::callback(
                message_id,
                code::SYSTEM_EXCEPTION,
                "retry later",
                Value::Null,
            ),
            Self::Malformed => {
                Ack::callback(message_id, code::BAD_REQUEST, "malformed", Value::Null)
            }
        }
    }
}

/// Why a frame was dropped without reaching the handler.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dropped {
    /// Over [`MAX_FRAME_BYTES`].
    TooLarge,
    /// Not a frame: not JSON, no `type`, no `messageId`, a binary message, a callback
    /// without `data`.
    Unreadable,
    /// A `type` the protocol does not have.
    UnknownType,
}

/// Receives each robot message.
pub trait EventHandler: Send {
    /// `data` is the `CALLBACK`'s payload of topic [`TOPIC_BOT_MESSAGE`] (a
    /// `ChatbotMessage` JSON). Called on the connection's task, and the ack follows at
    /// once: admit to a queue, do not work.
    fn handle(&mut self, data: &str) -> Verdict;

    /// A frame was dropped (already logged): for the caller's error counter.
    fn dropped(&mut self, _reason: Dropped) {}
}

/// Why stream mode gave up. None of these carries the secret or the ticket.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StreamError {
    /// `connections/open` was refused for a reason retrying will not change (wrong
    /// credentials, stream mode not enabled for the app, …).
    #[error("DingTalk refused to open a stream connection: HTTP {status}, code {code:?}")]
    Refused {
        /// The HTTP status.
        status: u16,
        /// DingTalk's code, cleaned to an identifier; empty without one.
        code: String,
    },
}

/// Holds stream mode until `shutdown`, handing robot messages to `handler` and
/// reconnecting as `reconnect` says.
///
/// Returns `Ok(())` after a shutdown, `Err` on a refusal retrying cannot fix.
pub(crate) async fn run(
    settings: &StreamSettings,
    http: &reqwest::Client,
    handler: &mut dyn EventHandler,
    reconnect: Reconnect,
    shutdown: &CancellationToken,
) -> Result<(), StreamError> {
    let mut link = Link {
        settings,
        http,
        handler,
    };
    reconnect.drive(&mut link, shutdown).await
}

/// Stream mode as the core's reconnect driver runs it.
struct Link<'a> {
    settings: &'a StreamSettings,
    http: &'a reqwest::Client,
    handler: &'a mut dyn EventHandler,
}

impl LongConnection for Link<'_> {
    type Connection = Connection;
    type Fatal = StreamError;

    async fn connect(&mut self) -> Result<Connection, Connect<StreamError>> {
        endpoint::connect(self.settings, self.http).await
    }

    /// A `disconnect` is a rotation: at once after a connection that carried frames (the
    /// driver's rule); a server that sends nothing but `disconnect` is backed off.
    async fn serve(&mut self, conn: Connection, shutdown: &CancellationToken) -> Ended {
        serve(conn, &self.settings.timers, &mut *self.handler, shutdown).await
    }
}

/// What to do after a frame.
pub(crate) enum Next {
    /// Keep serving.
    Continue,
    /// The frame was a `disconnect`: close and connect again.
    Reconnect,
}

/// Serves one connection until it ends or `shutdown` is cancelled.
async fn serve(
    conn: Connection,
    timers: &Timers,
    handler: &mut dyn EventHandler,
    shutdown: &CancellationToken,
) -> Ended {
    let Connection { mut ws, .. } = conn;
    let mut served = false;
    let mut deadline = Instant::now() + timers.keepalive;
    // Whether a keepalive ping is waiting for any sign of life.
    let mut pinged = false;
    let lost = |reason: String, served: bool| Ended::Lost {
        reason: reason.into(),
        served,
    };
    loop {
        tokio::select! {
            () = shutdown.cancelled() => {
                socket::close_at_shutdown(&mut ws, crate::NAME).await;
                return Ended::Shutdown;
            }
            () = tokio::time::sleep_until(deadline) => {
                if pinged {
                    return lost("the keepalive ping went unanswered".into(), served);
                }
                if let Err(error) = ws.send(Message::Ping(Vec::new().into())).await {
                    return lost(format!("sending a keepalive ping failed: {error}"), served);
                }
                pinged = true;
                deadline = Instant::now() + timers.pong_timeout;
            }
            received = ws.next() => {
                pinged = false;
                deadline = Instant::now() + timers.keepalive;
                let text = match socket::read_text(received, crate::NAME, || handler.dropped(Dropped::Unreadable)) {
                    Ok(Some(text)) => text,
                    // A ping or a pong only proves life.
                    Ok(None) => continue,
                    Err(gone) => return lost(gone.to_string(), served),
                };
                let served_before = served;
                served = true;
                let (ack, next) = receive(text.as_str(), handler);
                if let Some(ack) = ack
                    && let Err(error) = ws.send(Message::Text(ack.to_text().into())).await
                {
                    return lost(format!("sending an ack failed: {error}"), served);
                }
                if let Next::Reconnect = next {
                    socket::close(&mut ws).await;
                    return Ended::Rotated {
                        served: served_before,
                        reason: "SYSTEM disconnect".into(),
                    };
                }
            }
        }
    }
}

/// Handles one text frame: the ack to send (none when the frame names no `messageId`)
/// and what to do next.
pub(crate) fn receive(text: &str, handler: &mut dyn EventHandler) -> (Option<Ack>, Next) {
    if text.len() > MAX_FRAME_BYTES {
        tracing::warn!(len = text.len(), "Dropped an oversized DingTalk frame.");
        handler.dropped(Dropped::TooLarge);
        return (None, Next::Continue);
    }
    let frame = match Frame::parse(text) {
        Ok(frame) => frame,
        Err(malformed) => {
            tracing::warn!(
                message_id = malformed.message_id.as_deref().unwrap_or(""),
                error = %malformed.detail,
                "Dropped an unreadable DingTalk frame."
            );
            handler.dropped(Dropped::Unreadable);
            let ack = malformed
                .message_id
                .map(|id| Ack::callback(&id, code::BAD_REQUEST, "malformed", Value::Null));
            return (ack, Next::Continue);
        }
    };
    let Some(message_id) = frame.message_id() else {
        tracing::warn!(kind = %frame.kind, "Dropped a DingTalk frame without a messageId.");
        handler.dropped(Dropped::Unreadable);
        return (None, Next::Continue);
    };
    let topic = frame.topic().unwrap_or_default();
    let (ack, next) = match frame.kind.as_str() {
        frame::TYPE_SYSTEM => system(&frame, &message_id, &topic),
        frame::TYPE_CALLBACK if topic == TOPIC_BOT_MESSAGE => match frame.data.as_deref() {
            Some(data) => (handler.handle(data).ack(&message_id), Next::Continue),
            None => {
                handler.dropped(Dropped::Unreadable);
                (Verdict::Malformed.ack(&message_id), Next::Continue)
            }
        },
        frame::TYPE_CALLBACK | frame::TYPE_EVENT => {
            tracing::debug!(kind = %frame.kind, %topic, "Ignored a DingTalk frame of a topic not subscribed.");
            let ack = Ack::callback(&message_id, code::NOT_FOUND, "not implemented", Value::Null);
            (ack, Next::Continue)
        }
        other => {
            tracing::warn!(kind = other, "Dropped a DingTalk frame of an unknown type.");
            handler.dropped(Dropped::UnknownType);
            let ack = Ack::callback(&message_id, code::BAD_REQUEST, "unknown type", Value::Null);
            (ack, Next::Continue)
        }
    };
    tracing::debug!(kind = %frame.kind, %topic, %message_id, code = ack.code, "Acking a DingTalk frame.");
    (Some(ack), next)
}

/// A SYSTEM frame: acked 200 echoing its `data` (`ping`'s echo is what DingTalk checks);
/// a `disconnect` then closes the connection.
fn system(frame: &Frame, message_id: &str, topic: &str) -> (Ack, Next) {
    let data = frame.data.clone().unwrap_or_else(|| "{}".to_owned());
    let ack = Ack::new(message_id, code::OK, "OK", data);
    let next = if topic == frame::TOPIC_DISCONNECT {
        Next::Reconnect
    } else {
        if topic != frame::TOPIC_PING {
            tracing::debug!(%topic, "Acked a DingTalk SYSTEM frame of another topic.");
        }
        Next::Continue
    };
    (ack, next)
}

#[cfg(test)]
mod tests;
