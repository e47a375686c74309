//! The server side of a WebSocket, for the fakes that speak one (Feishu's long
//! connection, DingTalk's stream mode, the Discord and QQ gateways): the upgrade, answered
//! by hand ([`accept`]); the table of a fake's connections with a bounded send queue and a
//! close token each ([`Sockets`]); one connection's life ([`serve`]: registered, greeted,
//! relayed, marked closed); and a window during which every new connection is dropped at
//! once ([`DropWindow`]).
//!
//! The fakes answer upgrades themselves (hyper's upgrade plus tungstenite's accept key)
//! rather than through axum's `ws` feature: a fake can then refuse an upgrade the way its
//! platform does (status and headers of its choosing), and the crate keeps one
//! tokio-tungstenite.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures_util::{Sink, SinkExt, StreamExt};

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use hyper::upgrade::Upgraded;
use hyper_util::rt::TokioIo;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::Role;
use tokio_tungstenite::tungstenite::protocol::frame::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_util::sync::CancellationToken;

use super::{Shared, WithSockets};

/// The server end of an accepted WebSocket.
pub(crate) type ServerSocket = WebSocketStream<TokioIo<Upgraded>>;

/// Frames queued for one connection; a frame to a full queue is dropped, as a lost frame
/// would be.
const OUTBOX: usize = 1024;

/// What a connection's task is told to do, in order with the frames queued before it.
#[derive(Debug)]
pub enum Out {
    /// Send this frame.
    Frame(Message),
    /// Send a close frame (with this code, if any), then end.
    Close(Option<u16>),
    /// End without a close frame: the socket is dropped.
    Drop,
}

impl Out {
    /// A text frame.
    pub fn text(text: impl Into<String>) -> Self {
        Self::Frame(Message::Text(text.into().into()))
    }
}

/// A connection record a fake reports: each has an id (1, 2, … in order of arrival) and
/// says whether it is still open. Implemented with `linked!(Record)`
/// for a record with `id: u64` and `open: bool` fields.
pub trait Linked: Clone + Send + 'static {
    /// Its id.
    fn id(&self) -> u64;
    /// Whether it is still open.
    fn is_open(&self) -> bool;
    /// Marks it closed: its task ended.
    fn set_closed(&mut self);
}

/// Implements [`Linked`] (and with `, session`, [`InSession`](super::gateway::InSession)) for a connection record
/// with `id: u64` and `open: bool` (and `session: Option<String>`) fields. With
/// `, closed_at`, its `closed_at: Option<Instant>` is set when it ends, to tell which of
/// two connections outlived the other.
macro_rules! linked {
    (@impl $record:ty, |$closed:ident| $on_close:expr) => {
        impl $crate::skeleton::Linked for $record {
            fn id(&self) -> u64 {
                self.id
            }
            fn is_open(&self) -> bool {
                self.open
            }
            fn set_closed(&mut self) {
                self.open = false;
                let $closed = self;
                $on_close;
            }
        }
    };
    ($record:ty) => {
        $crate::skeleton::socket::linked!(@impl $record, |_record| ());
    };
    ($record:ty, closed_at) => {
        $crate::skeleton::socket::linked!(@impl $record, |record| {
            record.closed_at = Some(tokio::time::Instant::now());
        });
    };
    ($record:ty, session) => {
        $crate::skeleton::socket::linked!($record);
        impl $crate::skeleton::gateway::InSession for $record {
            fn session(&self) -> Option<&str> {
                self.session.as_deref()
            }
            fn set_session(&mut self, session: Option<String>) {
                self.session = session;
            }
        }
    };
}
pub(crate) use linked;

/// One connection: what the fake reports of it, its send queue, its close token.
struct Link<C> {
    info: C,
    outbox: mpsc::Sender<Out>,
    close: CancellationToken,
}

/// A fake's WebSocket connections, open and closed (bounded by the connections a test
/// makes), a cursor that hands work to open ones in turn, the frames it could not use,
/// and its `DropWindow`.
pub struct Sockets<C> {
    links: Vec<Link<C>>,
    turn: usize,
    pub(crate) bad_frames: usize,
    pub(crate) drops: DropWindow,
}

impl<C> Default for Sockets<C> {
    fn default() -> Self {
        Self {
            links: Vec::new(),
            turn: 0,
            bad_frames: 0,
            drops: DropWindow::default(),
        }
    }
}

impl<C: Linked> Sockets<C> {
    /// Registers a new connection, `record` made from its id; returns its id, the
    /// receiving end of its queue and its close token.
    fn add(
        &mut self,
        record: impl FnOnce(u64) -> C,
    ) -> (u64, mpsc::Receiver<Out>, CancellationToken) {
        let id = self.links.len() as u64 + 1;
        let (outbox, rx) = mpsc::channel(OUTBOX);
        let close = CancellationToken::new();
        let info = record(id);
        self.links.push(Link {
            info,
            outbox,
            close: close.clone(),
        });
        (id, rx, close)
    }

    /// Every connection so far, open or closed.
    pub(crate) fn records(&self) -> Vec<C> {
        self.links.iter().map(|l| l.info.clone()).collect()
    }

    /// The connections' records.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &C> {
        self.links.iter().map(|l| &l.info)
    }

    /// The record of connection `id`.
    pub(crate) fn get_mut(&mut self, id: u64) -> Option<&mut C> {
        self.links
            .iter_mut()
            .find(|l| l.info.id() == id)
            .map(|l| &mut l.info)
    }

    /// Every connection's record, to change.
    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = &mut C> {
        self.links.iter_mut().map(|l| &mut l.info)
    }

    /// Queues `out` for connection `id`; whether it was queued.
    pub(crate) fn send(&self, id: u64, out: Out) -> bool {
        self.links
            .iter()
            .find(|l| l.info.id() == id)
            .is_some_and(|l| l.outbox.try_send(out).is_ok())
    }

    /// The ids of the open connections.
    pub(crate) fn open_ids(&self) -> Vec<u64> {
        self.iter()
            .filter(|c| c.is_open())
            .map(Linked::id)
            .collect()
    }

    /// Queues `out()` for every open connection.
    pub(crate) fn broadcast(&self, out: impl Fn() -> Out) {
        for link in self.links.iter().filter(|l| l.info.is_open()) {
            let _ = link.outbox.try_send(out());
        }
    }

    /// The next open connection in turn (round robin over those open now).
    pub(crate) fn next_in_turn(&mut self) -> Option<u64> {
        let open: Vec<u64> = self
            .links
            .iter()
            .filter(|l| l.info.is_open() && !l.outbox.is_closed())
            .map(|l| l.info.id())
            .collect();
        if open.is_empty() {
            return None;
        }
        let id = open[self.turn % open.len()];
        self.turn = self.turn.wrapping_add(1);
        Some(id)
    }

    /// Closes every connection from the server side, with a close frame.
    pub(crate) fn close_all(&self) {
        for link in &self.links {
            link.close.cancel();
        }
    }
}

/// Answers `request` with `101 Switching Protocols` and runs `serve` on the socket once
/// the upgrade completes (on a task of its own); a request that is no WebSocket upgrade
/// gets `400`.
pub(crate) fn accept<F, Fut>(mut request: Request, serve: F) -> Response
where
    F: FnOnce(ServerSocket) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let key = request
        .headers()
        .get(header::SEC_WEBSOCKET_KEY)
        .map(|k| derive_accept_key(k.as_bytes()));
    let is_upgrade = request
        .headers()
        .get(header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("websocket"));
    let (Some(accept), true) = (key, is_upgrade) else {
        return (StatusCode::BAD_REQUEST, "expected a WebSocket upgrade").into_response();
    };
    let on_upgrade = hyper::upgrade::on(&mut request);
    tokio::spawn(async move {
        let Ok(upgraded) = on_upgrade.await else {
            return;
        };
        let socket =
            WebSocketStream::from_raw_socket(TokioIo::new(upgraded), Role::Server, None).await;
        serve(socket).await;
    });
    let mut response = Response::new(Body::empty());
    *response.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let headers = response.headers_mut();
    headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    headers.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    if let Ok(v) = HeaderValue::from_str(&accept) {
        headers.insert(header::SEC_WEBSOCKET_ACCEPT, v);
    }
    response
}

/// Accepts `request` as a connection of the fake, unless its drop window is open (then the
/// socket is answered and dropped at once, counted, and not recorded). Once upgraded, the
/// connection is recorded as `record(id)`, `opened` queues what goes first (a HELLO, held
/// events), and each text or binary message goes to `on_message`, whose frames are sent
/// back in order (a message it cannot use it counts in [`Sockets::bad_frames`]). The
/// fake's waiters are woken after each step.
pub(crate) fn serve<P, M>(
    shared: &Arc<Shared<P>>,
    request: Request,
    record: impl FnOnce(u64) -> P::Connection + Send + 'static,
    opened: impl FnOnce(&mut P, u64) + Send + 'static,
    on_message: M,
) -> Response
where
    P: WithSockets,
    M: FnMut(&mut P, u64, Message) -> Vec<Out> + Send + 'static,
{
    if shared.update(|state| state.sockets().drops.take()) {
        return accept(request, |socket| async move { drop(socket) });
    }
    let shared = shared.clone();
    accept(request, move |socket| {
        run(shared, socket, record, opened, on_message)
    })
}

async fn run<P, M>(
    shared: Arc<Shared<P>>,
    socket: ServerSocket,
    record: impl FnOnce(u64) -> P::Connection,
    opened: impl FnOnce(&mut P, u64),
    mut on_message: M,
) where
    P: WithSockets,
    M: FnMut(&mut P, u64, Message) -> Vec<Out>,
{
    let (id, outbox, close) = shared.update(|state| {
        let (id, outbox, close) = state.sockets().add(record);
        opened(state, id);
        (id, outbox, close)
    });
    relay(socket, outbox, &close, &shared.stop, |message| {
        shared.update(|state| on_message(state, id, message))
    })
    .await;
    shared.update(|state| {
        if let Some(c) = state.sockets().get_mut(id) {
            c.set_closed();
        }
    });
}

/// Relays one connection until the client closes it, the transport fails, `stop` is
/// cancelled, `close` is (then with a close frame first), or the fake says [`Out::Close`]
/// or [`Out::Drop`]: what is queued in `outbox` goes out, and each text or binary message
/// that comes in goes to `on_message`, whose answers are sent back. WebSocket pings are
/// answered by tungstenite.
async fn relay(
    socket: ServerSocket,
    mut outbox: mpsc::Receiver<Out>,
    close: &CancellationToken,
    stop: &CancellationToken,
    mut on_message: impl FnMut(Message) -> Vec<Out>,
) {
    let (mut sink, mut stream) = socket.split();
    loop {
        tokio::select! {
            () = stop.cancelled() => break,
            () = close.cancelled() => {
                let _ = sink.send(Message::Close(None)).await;
                break;
            }
            out = outbox.recv() => match out {
                Some(out) => if !put(&mut sink, out).await {
                    break;
                },
                None => break,
            },
            incoming = stream.next() => match incoming {
                Some(Ok(message @ (Message::Text(_) | Message::Binary(_)))) => {
                    let mut going = true;
                    for out in on_message(message) {
                        going = put(&mut sink, out).await;
                        if !going {
                            break;
                        }
                    }
                    if !going {
                        break;
                    }
                }
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => break,
                Some(Ok(_)) => {}
            }
        }
    }
}

/// Does what `out` says; whether the connection goes on.
async fn put<S>(sink: &mut S, out: Out) -> bool
where
    S: Sink<Message> + Unpin,
{
    match out {
        Out::Frame(message) => sink.send(message).await.is_ok(),
        Out::Close(code) => {
            let frame = code.map(|code| CloseFrame {
                code: CloseCode::from(code),
                reason: "".into(),
            });
            let _ = sink.send(Message::Close(frame)).await;
            false
        }
        Out::Drop => false,
    }
}

/// A server that accepts each new connection and drops it at once (issue 27's reconnect
/// storm), for a while: [`start`](Self::start) opens the window, [`take`](Self::take)
/// says whether a connection arriving now is dropped and counts it. Bounded: an instant
/// and a count.
#[derive(Debug, Default)]
pub(crate) struct DropWindow {
    until: Option<Instant>,
    dropped: usize,
}

impl DropWindow {
    /// Drops every new connection from now until `window` has passed (replacing a window
    /// still open; a zero window ends it).
    pub(crate) fn start(&mut self, window: Duration) {
        self.until = Some(Instant::now() + window);
    }

    /// Whether a connection arriving now is dropped; counted when it is.
    pub(crate) fn take(&mut self) -> bool {
        let dropping = self.until.is_some_and(|u| Instant::now() < u);
        if dropping {
            self.dropped += 1;
        }
        dropping
    }

    /// Connections dropped so far.
    pub(crate) fn dropped(&self) -> usize {
        self.dropped
    }
}
