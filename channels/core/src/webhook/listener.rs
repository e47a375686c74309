//! One bound address: the accept loop, its connections, and routing a request to its
//! route by exact path.
//!
//! This is hyper's HTTP/1 server driven directly rather than `axum::serve`, for two bounds
//! `axum::serve` does not give: its connection tasks are not tracked, so after the drain a
//! connection holding a half-sent request would live on; and it sets no header timeout.
//! Here every connection is a task in the listener's `JoinSet`:
//!
//! - at most [`MAX_CONNECTIONS`] at once; at the bound the loop stops accepting and new
//!   connections wait in the kernel's backlog;
//! - at most [`MAX_CONNECTIONS_PER_PEER`] from one remote address (issue 27): a connection
//!   past it is closed at once, so idle connections from one address cannot take the
//!   slots every other sender needs;
//! - a request head (or the next one on a kept-alive connection) must arrive within
//!   [`HEADER_TIMEOUT`], else hyper closes the connection;
//! - on `stop` the loop stops accepting and asks every connection to finish its request
//!   and close; on `close` (the drain is over) the connections left are aborted, and the
//!   task returns once each of them has ended, so their sockets are closed by then.

use std::collections::HashMap;
use std::convert::Infallible;
use std::io;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::header::{ALLOW, HeaderValue};
use axum::http::{Method, Request, Response, StatusCode};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::peers::{PeerBudget, PeerSlot};
use super::route::{Route, status_response};

/// Connections served at once per address; more wait in the listen backlog.
pub(super) const MAX_CONNECTIONS: usize = 1024;
/// Connections one remote address may hold at once; past it a new one is closed as soon as
/// it is accepted. Telegram opens at most 100 connections (`max_connections`, default 40),
/// Feishu and QQ a few.
pub(super) const MAX_CONNECTIONS_PER_PEER: usize = 128;
/// How long a request head may take to arrive, counted from when the connection (or the
/// previous request on it) became idle. Bounds slow-header clients and idle keep-alives.
pub(super) const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// The pause after an accept error that is not about one connection (e.g. out of file
/// descriptors), so the loop does not spin.
const ACCEPT_BACKOFF: Duration = Duration::from_secs(1);

/// The routes of one address by exact path (no patterns, no percent-decoding). Fixed at
/// `start`; its size is the number of routes registered.
pub(super) type Routes = HashMap<String, Arc<Route>>;

/// What a bounded listener does with each request: the webhook routes of an address, or
/// any axum [`Router`](axum::Router) (the daemon's admin endpoints, issue 27).
pub(super) trait Dispatch: Send + Sync + 'static {
    /// The answer to `request`, which came from `peer`.
    fn dispatch(
        &self,
        request: Request<Incoming>,
        peer: IpAddr,
    ) -> impl Future<Output = Response<Body>> + Send;
}

impl Dispatch for Routes {
    /// 404 for a path no route has, 405 for a method other than POST, else the route.
    async fn dispatch(&self, request: Request<Incoming>, peer: IpAddr) -> Response<Body> {
        let Some(route) = self.get(request.uri().path()) else {
            return status_response(StatusCode::NOT_FOUND);
        };
        if request.method() != Method::POST {
            let mut response = status_response(StatusCode::METHOD_NOT_ALLOWED);
            response
                .headers_mut()
                .insert(ALLOW, HeaderValue::from_static("POST"));
            return response;
        }
        route.serve(request, peer).await
    }
}

impl Dispatch for axum::Router {
    async fn dispatch(&self, request: Request<Incoming>, _peer: IpAddr) -> Response<Body> {
        use tower::ServiceExt;
        match self.clone().oneshot(request.map(Body::new)).await {
            Ok(response) => response,
            Err(infallible) => match infallible {},
        }
    }
}

/// Serves `listener` until `stop`, then drains until its connections end or `close`.
pub(super) async fn serve<D: Dispatch>(
    listener: TcpListener,
    routes: Arc<D>,
    stop: CancellationToken,
    close: CancellationToken,
) {
    let mut connections = JoinSet::new();
    let peers = PeerBudget::new(MAX_CONNECTIONS_PER_PEER);
    let mut turned_away = TurnedAway::default();
    loop {
        tokio::select! {
            () = stop.cancelled() => break,
            Some(ended) = connections.join_next(), if !connections.is_empty() => {
                if let Err(error) = ended {
                    // A handler panicked: its connection is gone, the listener serves on.
                    tracing::error!(%error, "A webhook connection task failed.");
                }
            }
            accepted = listener.accept(), if connections.len() < MAX_CONNECTIONS => {
                match accepted {
                    Ok((stream, peer)) => match peers.try_take(peer.ip()) {
                        Some(slot) => {
                            let routes = routes.clone();
                            connections.spawn(connection(stream, routes, stop.clone(), slot, peer.ip()));
                        }
                        // Closed at once: the address holds its share already.
                        None => turned_away.one(),
                    },
                    Err(error) if is_per_connection(&error) => {}
                    Err(error) => {
                        tracing::warn!(%error, "Accepting a webhook connection failed; pausing.");
                        tokio::select! {
                            () = stop.cancelled() => break,
                            () = tokio::time::sleep(ACCEPT_BACKOFF) => {}
                        }
                    }
                }
            }
        }
    }
    drop(listener);
    tokio::select! {
        () = async { while connections.join_next().await.is_some() {} } => {}
        () = close.cancelled() => {
            if !connections.is_empty() {
                tracing::debug!(
                    open = connections.len(),
                    "Closing webhook connections still open after the shutdown drain."
                );
            }
            connections.abort_all();
            while connections.join_next().await.is_some() {}
        }
    }
}

fn is_per_connection(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::ConnectionAborted | io::ErrorKind::ConnectionReset
    )
}

/// Counts connections closed for their address's bound, logged at most once a minute
/// with the count since the last line (a flood must not flood the log too).
#[derive(Default)]
struct TurnedAway {
    since_logged: u64,
    logged_at: Option<std::time::Instant>,
}

impl TurnedAway {
    const LOG_EVERY: Duration = Duration::from_secs(60);

    fn one(&mut self) {
        self.since_logged += 1;
        let due = self
            .logged_at
            .is_none_or(|at| at.elapsed() >= Self::LOG_EVERY);
        if due {
            tracing::warn!(
                closed = self.since_logged,
                per_peer = MAX_CONNECTIONS_PER_PEER,
                "Closed webhook connections from an address that holds its share already."
            );
            self.since_logged = 0;
            self.logged_at = Some(std::time::Instant::now());
        }
    }
}

/// One connection, until it closes; from `stop` on it finishes its request and closes.
/// `_slot` is its place in its address's connection budget, given back when it ends.
async fn connection<D: Dispatch>(
    stream: TcpStream,
    routes: Arc<D>,
    stop: CancellationToken,
    _slot: PeerSlot,
    peer: IpAddr,
) {
    let service = hyper::service::service_fn(move |request| {
        let routes = routes.clone();
        async move { Ok::<_, Infallible>(routes.dispatch(request, peer).await) }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT);
    let conn = builder.serve_connection(TokioIo::new(stream), service);
    tokio::pin!(conn);
    let result = tokio::select! {
        result = conn.as_mut() => result,
        () = stop.cancelled() => {
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    };
    if let Err(error) = result {
        // Client-side trouble (reset, bad request head, header timeout): nothing to act on.
        tracing::debug!(%error, "A webhook connection ended with an error.");
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;
    use crate::telemetry::Telemetry;
    use crate::webhook::tests::kit::{
        Blocking, CHANNEL, Echo, PATH, Probe, SECRET, SECRET_HEADER, fixture, head, post,
        raw_status, send, send_from, within,
    };
    use crate::webhook::{
        WebhookHandler, WebhookHost, WebhookLimits, WebhookRequest, WebhookResponse,
    };

    #[tokio::test]
    async fn two_channels_share_one_listener_each_reaching_its_own_handler() {
        let probe = Probe::new();
        let host = WebhookHost::new();
        let listen: std::net::SocketAddr = "127.0.0.1:0".parse().unwrap();
        let (a, b, route_a, route_b) = probe.build(|| {
            let a = Telemetry::new("a");
            let b = Telemetry::new("b");
            let limits = WebhookLimits::default();
            let route_a = host.route(&a, listen, "/a", limits).unwrap();
            let route_b = host.route(&b, listen, "/b", limits).unwrap();
            (a, b, route_a, route_b)
        });
        let running = host.start().await.unwrap();
        let addr = running.local_addr(listen).unwrap();
        assert_ne!(addr.port(), 0);
        assert_eq!(route_a.local_addr(), Some(addr));
        assert_eq!(route_b.local_addr(), Some(addr));
        let _a = route_a.install(Echo::new(&a));
        let _b = route_b.install(Echo::new(&b));
        for channel in ["a", "b"] {
            let (status, body) = post(addr, &format!("/{channel}"), &[], "hi").await;
            assert_eq!(status, 200);
            let body: serde_json::Value = serde_json::from_str(&body).unwrap();
            assert_eq!(body["channel"], channel);
            assert_eq!(probe.received(channel), 1);
        }
        running.stop(Duration::from_secs(1)).await;
    }

    /// Issue 27: the probe that shut every webhook off. From other addresses, 200
    /// connections trickle bodies that pass the header check (as Feishu's do: its signature
    /// needs the body) and 1,500 sit idle; a signed request and a request whose body comes
    /// in one go are still answered, each within a second.
    #[tokio::test]
    async fn issue_27_slow_and_idle_floods_from_other_addresses_starve_nobody() {
        let f = fixture(WebhookLimits::default()).await;
        let (echo, _installed) = f.echo();
        let slow: std::net::IpAddr = "127.0.0.2".parse().unwrap();
        let idle: std::net::IpAddr = "127.0.0.3".parse().unwrap();
        let mut held = Vec::new();
        let trickle = head("POST", PATH, &["content-length: 1000"]) + "x";
        for _ in 0..200 {
            held.push(send_from(slow, f.addr, trickle.as_bytes()).await);
        }
        for _ in 0..1500 {
            held.push(send_from(idle, f.addr, b"").await);
        }
        let started = Instant::now();
        let signed = format!("{SECRET_HEADER}: {SECRET}");
        let (status, _) = post(f.addr, PATH, &[&signed], "{\"signed\": true}").await;
        assert_eq!(status, 200);
        let (status, _) = post(f.addr, PATH, &[], "{\"plain\": true}").await;
        assert_eq!(status, 200);
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "answered after {:?}",
            started.elapsed()
        );
        assert_eq!(echo.calls(), 2, "no trickled body reached the handler");
        drop(held);
    }

    #[tokio::test]
    async fn issue_27_one_address_holds_at_most_its_share_of_connections() {
        let f = fixture(WebhookLimits::default()).await;
        let (_echo, _installed) = f.echo();
        let other: std::net::IpAddr = "127.0.0.4".parse().unwrap();
        let mut held = Vec::new();
        for _ in 0..MAX_CONNECTIONS_PER_PEER {
            held.push(send_from(other, f.addr, b"").await);
        }
        // The next one from that address is closed at once, unanswered.
        let mut extra = send_from(other, f.addr, head("POST", PATH, &[]).as_bytes()).await;
        let mut rest = Vec::new();
        let read = within(extra.read_to_end(&mut rest)).await;
        assert!(read.is_err() || rest.is_empty(), "{rest:?}");
        // Another address is served.
        assert_eq!(post(f.addr, PATH, &[], "{}").await.0, 200);
        // Once the address gives a connection back, it may open one again.
        drop(held.pop());
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let mut again = send_from(other, f.addr, b"").await;
            let request = head("POST", PATH, &["content-length: 2"]) + "{}";
            if again.write_all(request.as_bytes()).await.is_ok() {
                let mut answer = Vec::new();
                if again.read_to_end(&mut answer).await.is_ok()
                    && answer.starts_with(b"HTTP/1.1 200")
                {
                    break;
                }
            }
            assert!(Instant::now() < deadline, "the slot never came back");
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test]
    async fn an_unknown_path_is_404_and_another_method_405() {
        let f = fixture(WebhookLimits::default()).await;
        let (echo, _installed) = f.echo();
        assert_eq!(post(f.addr, "/elsewhere", &[], "{}").await.0, 404);
        assert_eq!(post(f.addr, &format!("{PATH}/"), &[], "{}").await.0, 404);
        assert_eq!(raw_status(f.addr, &head("GET", PATH, &[])).await, 405);
        assert_eq!(echo.calls(), 0);
        assert_eq!(f.probe.receiving_errors(CHANNEL), 0);
    }

    /// Lets the test know the server read a request head (authorize runs before the body).
    #[derive(Default)]
    struct Gate {
        headers_read: tokio::sync::Notify,
    }

    #[async_trait::async_trait]
    impl WebhookHandler for Gate {
        fn authorize(&self, _headers: &axum::http::HeaderMap) -> bool {
            self.headers_read.notify_one();
            true
        }

        async fn handle(&self, _request: WebhookRequest) -> WebhookResponse {
            WebhookResponse::status(StatusCode::OK)
        }
    }

    #[tokio::test]
    async fn stop_returns_within_the_drain_while_a_client_holds_a_half_sent_request() {
        let f = fixture(WebhookLimits::default()).await;
        let gate = Arc::new(Gate::default());
        let _installed = f.install(gate.clone());
        // The body's 10 s timeout is far beyond the drain: only the drain can end this.
        let request = head("POST", PATH, &["content-length: 100"]) + "half";
        let mut held = send(f.addr, request.as_bytes()).await;
        within(gate.headers_read.notified()).await;

        let drain = Duration::from_millis(300);
        let started = Instant::now();
        within(f.running.stop(drain)).await;
        let took = started.elapsed();
        assert!(took >= drain, "stop returned before the drain: {took:?}");
        assert!(
            took < Duration::from_secs(3),
            "stop held past the drain: {took:?}"
        );
        // The held connection is closed (EOF, or a reset), and nothing listens any more.
        let mut rest = Vec::new();
        let _ = within(held.read_to_end(&mut rest)).await;
        assert!(TcpStream::connect(f.addr).await.is_err());
    }

    #[tokio::test]
    async fn a_request_in_flight_finishes_during_the_drain() {
        let f = fixture(WebhookLimits::default()).await;
        let blocking = Arc::new(Blocking::default());
        let _installed = f.install(blocking.clone());
        let request = tokio::spawn(post(f.addr, PATH, &[], "{}"));
        within(blocking.entered.notified()).await;
        let stop = tokio::spawn(f.running.stop(Duration::from_secs(30)));
        blocking.release.notify_one();
        assert_eq!(within(request).await.unwrap().0, 200);
        within(stop).await.unwrap();
    }
}
