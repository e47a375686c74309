//! The server side of a WebSocket, for the fakes that speak one (Feishu's long
//! connection, DingTalk's stream mode, the Discord gateway): the upgrade, answered by
//! hand, the relay loop of one connection, and a window during which every new
//! connection is dropped at once ([`DropWindow`]).
//!
//! The fakes answer upgrades themselves (hyper's upgrade plus tungstenite's accept key)
//! rather than through axum's `ws` feature: a fake can then refuse an upgrade the way its
//! platform does (status and headers of its choosing), and the crate keeps one
//! tokio-tungstenite.

use std::future::Future;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use hyper::upgrade::Upgraded;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::Role;
use tokio_util::sync::CancellationToken;

/// The server end of an accepted WebSocket.
pub(crate) type ServerSocket = WebSocketStream<TokioIo<Upgraded>>;

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

/// Relays one connection until the client closes it, the transport fails, `stop` is
/// cancelled, or `close` is (then with a close frame first): frames from `outbox` go out,
/// and each text or binary message that comes in goes to `on_message`, whose answer, if
/// any, is sent back. WebSocket pings are answered by tungstenite.
pub(crate) async fn relay<S>(
    socket: WebSocketStream<S>,
    mut outbox: mpsc::Receiver<Message>,
    close: &CancellationToken,
    stop: &CancellationToken,
    mut on_message: impl FnMut(Message) -> Option<Message>,
) where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let (mut sink, mut stream) = socket.split();
    loop {
        tokio::select! {
            () = stop.cancelled() => break,
            () = close.cancelled() => {
                let _ = sink.send(Message::Close(None)).await;
                break;
            }
            Some(message) = outbox.recv() => {
                if sink.send(message).await.is_err() {
                    break;
                }
            }
            incoming = stream.next() => match incoming {
                Some(Ok(message @ (Message::Text(_) | Message::Binary(_)))) => {
                    if let Some(reply) = on_message(message)
                        && sink.send(reply).await.is_err()
                    {
                        break;
                    }
                }
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => break,
                Some(Ok(_)) => {}
            }
        }
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

/// Answers the upgrade, then closes the socket at once: no frame, no close handshake.
pub(crate) fn accept_and_drop(request: Request) -> Response {
    accept(request, |socket| async move { drop(socket) })
}
