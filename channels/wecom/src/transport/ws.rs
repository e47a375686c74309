//! The long connection: one WebSocket to `ws_url` that carries everything, held by the
//! core's [`Reconnect::drive`] over [`Socket`] (a [`LongConnection`]):
//!
//! - **Connect**: open the socket ([`socket::open`], bounded), send `aibot_subscribe`
//!   (`api::subscribe`, the BotID and Secret) and wait for its answer
//!   ([`Timers::subscribe`]). A refusal that is the credentials' (853000, or any code but a
//!   rate limit or a busy server) closes the socket (WeCom keeps it open) and ends `run`
//!   with [`WsError::Refused`]: retrying cannot fix it. Anything else is retried.
//! - **Serve**: the connection is [`attach`](Link::attach)ed to the [`Link`] the channel
//!   sends its commands through, and the loop writes what it queues, reads what WeCom
//!   sends, and pings: `ping` every [`Timers::ping`] (30 s, WeCom's advice); when two
//!   pings in a row got no answer the connection counts as dead and is replaced. A ping
//!   answered with a non-zero `errcode` is no answer (the official SDK's rule, `ws.ts`:
//!   such an ack does not reset its missed-pong count). Answers
//!   (frames without `cmd`) go to the command waiting for their `req_id`; a refusal
//!   without one (WeCom's answer to an invalid request has no `headers`) fails the only
//!   command waiting (pings included) and is logged by its code when several wait; message
//!   callbacks to the [`EventHandler`]; events are sorted by `inbound::event`.
//! - **Not subscribed**: WeCom can drop the subscription while the socket stays open, and
//!   then answers every command `846609` until it closes the socket (57 to 79 s were
//!   reported). The first such answer (to a command or a ping) fails its command
//!   (`ApiError::NotSubscribed`, transient) and ends the connection as lost, so the driver
//!   subscribes on a new one instead of every reply being refused meanwhile.
//! - **Replaced**: when another connection subscribes for the same bot, WeCom sends this
//!   one `disconnected_event` and closes it. That is not a failure, and reconnecting would
//!   take the bot back from the newer connection, which would take it back in turn (an
//!   endless mutual kick was observed). So the connection ends as a shutdown would and
//!   `run` returns [`Exit::Replaced`]: the channel stays off WeCom until the daemon stops.
//!   In a rolling deploy that is what the old replica wants (the new one serves); two
//!   replicas on one shared store never meet it, since only the lease holder connects
//!   (`Channel::exclusive_transport`).
//!
//! Reconnects wait the [`Reconnect`]'s backoff ([`RECONNECT_BACKOFF`], the SDKs' 1 s
//! doubling to 30 s, plus jitter), started over after a connection that proved itself (an
//! answer or a callback after the subscribe; an 846609 refusal proves nothing). A callback's `req_id` is bound to its
//! connection, so a reconnect makes replies to earlier callbacks impossible: the channel
//! sends those as messages of their own.
//!
//! Bounds: a WebSocket message over [`MAX_WS_MESSAGE`] fails the connection
//! (tungstenite's bound); a frame that is not one is dropped and counted; a write that
//! takes over [`SEND_TIMEOUT`] (a stalled, half-open connection) fails the connection (the
//! subscribe's fails the attempt, which is retried), and a shutdown does not wait for one. Logs name
//! commands, codes and the host only: never a frame's body, the Secret or a media URL.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use im_bridge_channel::Secret;
use im_bridge_channel::backoff::Backoff;
use im_bridge_channel::reconnect::{Connect, Ended, LongConnection, Reconnect};
use im_bridge_channel::socket::{self, Read, Socket as WebSocket};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::time::Instant;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_util::sync::CancellationToken;

use crate::api::{self, ConnId, Link};
use crate::error::{ApiError, NOT_SUBSCRIBED};
use crate::inbound::{self, EventAction};
use crate::model::{self, Frame, Kind};

/// The largest WebSocket message read; a larger one fails the connection. Callbacks are a
/// few KB.
pub const MAX_WS_MESSAGE: usize = 1024 * 1024;
/// The reconnect backoff: 1 s doubling to 30 s (the SDKs'), plus up to 1 s of jitter.
pub const RECONNECT_BACKOFF: Backoff = Backoff::new(
    Duration::from_secs(1),
    Duration::from_secs(30),
    Duration::from_secs(1),
);
/// Bound on TCP, TLS and the upgrade.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);
/// Pings in a row without an answer after which the connection is dead (the SDKs').
const MISSED_PINGS: usize = 2;
/// How long one frame may take to write before the connection counts as lost. While a
/// write waits the loop does nothing else (no reads, no pings, no shutdown), and on a
/// half-open TCP connection it would wait forever. The largest frame, an upload chunk
/// (about 700 KB of base64), goes within it at 35 KB/s; it is below a chunk's answer
/// timeout (`api::CHUNK_TIMEOUT`, 30 s) and the 60 s two missed pings take.
const SEND_TIMEOUT: Duration = Duration::from_secs(20);

/// Where and as whom to connect.
#[derive(Clone, Debug)]
pub struct WsSettings {
    /// The endpoint (`wss://openws.work.weixin.qq.com`, or a fake).
    pub ws_url: String,
    /// The BotID.
    pub bot_id: String,
    /// The Secret; it goes only into the subscribe frame.
    pub secret: Secret,
    /// The timing.
    pub timers: Timers,
}

/// The connection's timing.
#[derive(Clone, Copy, Debug)]
pub struct Timers {
    /// Between two pings.
    pub ping: Duration,
    /// How long the subscribe's answer may take.
    pub subscribe: Duration,
}

impl Default for Timers {
    /// A ping every 30 s; 10 s for the subscribe's answer.
    fn default() -> Self {
        Self {
            ping: Duration::from_secs(30),
            subscribe: Duration::from_secs(10),
        }
    }
}

/// Why a frame was dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dropped {
    /// Not a frame: not JSON, no `headers.req_id`, a binary message.
    Unreadable,
}

/// Receives what the connection delivers. Called on the connection's task: admit to a
/// queue, do not work.
pub trait EventHandler: Send {
    /// A connection subscribed.
    fn subscribed(&mut self) {}
    /// A message callback (`aibot_msg_callback`) that came on connection `conn`.
    fn message(&mut self, frame: &Frame, conn: ConnId);
    /// A frame was dropped (already logged).
    fn dropped(&mut self, reason: Dropped) {
        let _ = reason;
    }
    /// The connection ended: `lost` when it failed or dropped (a new one is being made),
    /// not when it was shut down or replaced.
    fn disconnected(&mut self, lost: bool) {
        let _ = lost;
    }
}

/// Why the long connection gave up. Carries no secret.
#[derive(Debug, thiserror::Error)]
pub enum WsError {
    /// WeCom refused the subscribe for a reason retrying cannot fix.
    #[error("WeCom refused the bot's subscription: {0}")]
    Refused(#[source] ApiError),
}

/// How [`run`] ended without an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// `shutdown` was cancelled.
    Shutdown,
    /// Another connection took the bot over (`disconnected_event`); not reconnected.
    Replaced,
}

/// Holds the long connection until `shutdown`, a replacement or a refusal.
pub(crate) async fn run(
    settings: &WsSettings,
    link: &Link,
    handler: &mut dyn EventHandler,
    reconnect: Reconnect,
    shutdown: &CancellationToken,
) -> Result<Exit, WsError> {
    let mut socket = Socket {
        settings,
        link,
        handler,
        replaced: false,
    };
    reconnect.drive(&mut socket, shutdown).await?;
    Ok(if socket.replaced && !shutdown.is_cancelled() {
        Exit::Replaced
    } else {
        Exit::Shutdown
    })
}

/// The long connection as the driver runs it.
struct Socket<'a> {
    settings: &'a WsSettings,
    link: &'a Link,
    handler: &'a mut dyn EventHandler,
    /// A connection was replaced: the loop ended as on a shutdown.
    replaced: bool,
}

/// A subscribed connection.
struct Subscribed {
    ws: WebSocket,
    id: ConnId,
}

impl LongConnection for Socket<'_> {
    type Connection = Subscribed;
    type Fatal = WsError;

    async fn connect(&mut self) -> Result<Subscribed, Connect<WsError>> {
        let url = url::Url::parse(&self.settings.ws_url)
            .map_err(|_| Connect::Retry("the ws_url is not a URL".into()))?;
        let mut ws = socket::open(&url, MAX_WS_MESSAGE, CONNECT_TIMEOUT)
            .await
            .map_err(Connect::retry)?;
        let subscribed = subscribe(&mut ws, self.settings).await;
        if let Err(error) = subscribed {
            socket::close(&mut ws).await;
            return Err(match error {
                e @ ApiError::AuthFailed { .. } => {
                    tracing::error!(error = %e, "WeCom refused the bot's BotID or Secret.");
                    Connect::Fatal(WsError::Refused(e))
                }
                e => Connect::retry(e),
            });
        }
        let id = self.link.next_id();
        tracing::info!(
            host = url.host_str().unwrap_or_default(),
            connection = id,
            "Subscribed to the WeCom long connection."
        );
        Ok(Subscribed { ws, id })
    }

    async fn serve(&mut self, conn: Subscribed, shutdown: &CancellationToken) -> Ended {
        let id = conn.id;
        let outbox = self.link.attach(id);
        self.handler.subscribed();
        let served = serve(
            conn.ws,
            id,
            outbox,
            self.settings.timers,
            &mut *self.handler,
            self.link,
            shutdown,
        )
        .await;
        self.link.detach(id);
        self.handler
            .disconnected(matches!(served, Served::Lost { .. }));
        match served {
            Served::Shutdown => Ended::Shutdown,
            Served::Replaced => {
                self.replaced = true;
                tracing::warn!(
                    connection = id,
                    "Another connection subscribed for this WeCom bot and took it over; not reconnecting (the newer one serves)."
                );
                Ended::Shutdown
            }
            Served::Lost { reason, served } => Ended::Lost {
                served,
                reason: reason.into(),
            },
        }
    }
}

/// `doctor`'s round trip: opens the socket, subscribes, closes. `Ok` when WeCom accepted
/// the BotID and Secret.
pub(crate) async fn probe(ws_url: &str, bot_id: &str, secret: &Secret) -> Result<(), ApiError> {
    let unreachable = |reason: String| ApiError::Connection {
        op: model::SUBSCRIBE,
        reason: reason.into(),
    };
    let url = url::Url::parse(ws_url).map_err(|_| unreachable("the ws_url is not a URL".into()))?;
    let mut ws = socket::open(&url, MAX_WS_MESSAGE, CONNECT_TIMEOUT)
        .await
        .map_err(|e| unreachable(e.to_string()))?;
    let settings = WsSettings {
        ws_url: ws_url.to_owned(),
        bot_id: bot_id.to_owned(),
        secret: secret.clone(),
        timers: Timers::default(),
    };
    let subscribed = subscribe(&mut ws, &settings).await;
    socket::close(&mut ws).await;
    subscribed
}

/// Sends `aibot_subscribe` (within [`SEND_TIMEOUT`], as every write: a stalled socket
/// fails the attempt instead of holding it forever) and reads until its answer: `Ok` when
/// accepted. A shutdown meanwhile is the reconnect driver's, which stops waiting on the
/// connect.
async fn subscribe<T: AsyncRead + AsyncWrite + Unpin>(
    ws: &mut WebSocketStream<T>,
    settings: &WsSettings,
) -> Result<(), ApiError> {
    let frame = api::subscribe(&settings.bot_id, &settings.secret);
    let gone = |reason: Cow<'static, str>| ApiError::Connection {
        op: model::SUBSCRIBE,
        reason,
    };
    let text =
        serde_json::to_string(&frame).map_err(|_| gone("the frame could not be written".into()))?;
    match write(ws, text, "the subscribe", &CancellationToken::new()).await {
        Ok(()) => {}
        Err(Unwritten::Lost(reason)) => return Err(gone(reason.into())),
        Err(Unwritten::Shutdown) => return Err(gone("shut down".into())),
    }
    let deadline = Instant::now() + settings.timers.subscribe;
    loop {
        let received = tokio::time::timeout_at(deadline, ws.next())
            .await
            .map_err(|_| gone("no answer in time".into()))?;
        let text = match socket::read(received) {
            Ok(Read::Text(text)) => text,
            Ok(_) => continue,
            Err(ended) => return Err(gone(ended.to_string().into())),
        };
        let Ok(answer) = serde_json::from_str::<Frame>(text.as_str()) else {
            continue;
        };
        // The subscribe is the only request on the connection: a refusal naming none is
        // its.
        let ours = answer.headers.req_id == frame.headers.req_id || answer.is_unnamed_refusal();
        if answer.kind() == Kind::Answer && ours {
            return ApiError::subscribe(answer.errcode);
        }
    }
}

/// How one served connection ended.
enum Served {
    Shutdown,
    Replaced,
    Lost { reason: String, served: bool },
}

/// Why a write did not go.
enum Unwritten {
    /// The socket failed or stalled past [`SEND_TIMEOUT`]: the reason, log-safe.
    Lost(String),
    /// `shutdown` came while it waited.
    Shutdown,
}

/// Writes `text` (a `what`), within [`SEND_TIMEOUT`] and giving way to `shutdown`.
async fn write<T: AsyncRead + AsyncWrite + Unpin>(
    ws: &mut WebSocketStream<T>,
    text: String,
    what: &str,
    shutdown: &CancellationToken,
) -> Result<(), Unwritten> {
    let sent = tokio::select! {
        () = shutdown.cancelled() => return Err(Unwritten::Shutdown),
        sent = tokio::time::timeout(SEND_TIMEOUT, ws.send(Message::Text(text.into()))) => sent,
    };
    match sent {
        Ok(Ok(())) => Ok(()),
        Ok(Err(error)) => Err(Unwritten::Lost(format!(
            "sending {what} failed: {}",
            socket::describe(&error)
        ))),
        Err(_) => Err(Unwritten::Lost(format!(
            "sending {what} took over {} s: the connection stalled",
            SEND_TIMEOUT.as_secs()
        ))),
    }
}

/// Serves subscribed connection `id` until it ends.
async fn serve<T: AsyncRead + AsyncWrite + Unpin>(
    mut ws: WebSocketStream<T>,
    id: ConnId,
    mut outbox: tokio::sync::mpsc::Receiver<String>,
    timers: Timers,
    handler: &mut dyn EventHandler,
    link: &Link,
    shutdown: &CancellationToken,
) -> Served {
    let mut served = false;
    // The req_ids of the pings not answered yet, oldest first.
    let mut pings: VecDeque<String> = VecDeque::new();
    let mut next_ping = Instant::now() + timers.ping;
    let lost = |reason: String, served: bool| Served::Lost { reason, served };
    let unwritten = |why: Unwritten, served: bool| match why {
        Unwritten::Lost(reason) => lost(reason, served),
        Unwritten::Shutdown => {
            // The socket may be stalled: not waited for (dropping it closes it).
            tracing::info!(channel = crate::NAME, "Closed the long connection.");
            Served::Shutdown
        }
    };
    loop {
        tokio::select! {
            () = shutdown.cancelled() => {
                socket::close_at_shutdown(&mut ws, crate::NAME).await;
                return Served::Shutdown;
            }
            () = tokio::time::sleep_until(next_ping) => {
                if pings.len() >= MISSED_PINGS {
                    return lost(format!("{MISSED_PINGS} pings in a row got no answer"), served);
                }
                let ping = Frame::request(model::PING, api::req_id(model::PING), None);
                let text = serde_json::to_string(&ping).unwrap_or_default();
                if let Err(why) = write(&mut ws, text, "a ping", shutdown).await {
                    return unwritten(why, served);
                }
                pings.push_back(ping.headers.req_id);
                next_ping = Instant::now() + timers.ping;
            }
            Some(text) = outbox.recv() => {
                if let Err(why) = write(&mut ws, text, "a command", shutdown).await {
                    return unwritten(why, served);
                }
            }
            received = ws.next() => {
                let text = match socket::read_text(received, crate::NAME, || handler.dropped(Dropped::Unreadable)) {
                    Ok(Some(text)) => text,
                    Ok(None) => continue,
                    Err(gone) => return lost(gone.to_string(), served),
                };
                let Ok(frame) = serde_json::from_str::<Frame>(text.as_str()) else {
                    tracing::warn!(len = text.len(), "Dropped an unreadable WeCom frame.");
                    handler.dropped(Dropped::Unreadable);
                    continue;
                };
                let not_subscribed =
                    frame.kind() == Kind::Answer && frame.errcode == Some(NOT_SUBSCRIBED);
                if not_subscribed {
                    // No new command goes to it from before the refusal is handed on:
                    // what its command does next (a message of its own instead) waits for
                    // the next connection rather than this one's outbox, never written.
                    link.retire(id);
                } else {
                    // A connection refused at once proves nothing: the backoff goes on.
                    served = true;
                }
                match frame.kind() {
                    Kind::Answer => place_answer(frame, id, &mut pings, link),
                    Kind::Message => handler.message(&frame, id),
                    Kind::Event => match inbound::event(&frame) {
                        EventAction::Replaced => {
                            socket::close(&mut ws).await;
                            return Served::Replaced;
                        }
                        action => tracing::debug!(?action, "Skipped a WeCom event."),
                    },
                    Kind::Unknown => {
                        let cmd: String = frame.cmd.as_deref().unwrap_or_default().chars().take(40).collect();
                        tracing::debug!(%cmd, "Skipped a WeCom frame of an unknown cmd.");
                    }
                }
                if not_subscribed {
                    // Every command on it would be refused until WeCom closes it: a new
                    // connection subscribes now.
                    socket::close(&mut ws).await;
                    let why = format!("WeCom says the connection is no longer subscribed (errcode {NOT_SUBSCRIBED})");
                    return lost(why, served);
                }
            }
        }
    }
}

/// Hands WeCom's answer `frame` on connection `id` to what waits for it: a ping (one
/// answered with a non-zero `errcode` is no sign of life, as in the official SDK, and
/// stays unanswered), or the command with its `req_id`. A refusal naming no request goes
/// to the only command waiting, if exactly one does and no ping.
fn place_answer(frame: Frame, id: ConnId, pings: &mut VecDeque<String>, link: &Link) {
    if frame.is_unnamed_refusal() {
        let errcode = frame.errcode.unwrap_or_default();
        if !pings.is_empty() || !link.refuse_only_waiting(id, frame) {
            tracing::warn!(
                errcode,
                "WeCom refused a request without naming it, and not exactly one command waits: it goes unplaced."
            );
        }
    } else if let Some(at) = pings.iter().position(|p| *p == frame.headers.req_id) {
        match frame.errcode {
            None | Some(0) => drop(pings.drain(..=at)),
            // Still unanswered: it counts towards the missed pings.
            Some(errcode) => tracing::warn!(
                errcode,
                "WeCom answered a ping with an error; it is no sign of life."
            ),
        }
    } else if !link.answer(id, frame) {
        tracing::debug!("A WeCom answer came for no waiting command.");
    }
}

#[cfg(test)]
mod tests;
