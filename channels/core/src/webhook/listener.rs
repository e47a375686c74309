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
//! - a request head (or the next one on a kept-alive connection) must arrive within
//!   [`HEADER_TIMEOUT`], else hyper closes the connection;
//! - on `stop` the loop stops accepting and asks every connection to finish its request
//!   and close; on `close` (the drain is over) the connections left are aborted, and the
//!   task returns once each of them has ended, so their sockets are closed by then.

use std::collections::HashMap;
use std::convert::Infallible;
use std::io;
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

use super::route::{Route, status_response};

/// Connections served at once per address; more wait in the listen backlog.
pub(super) const MAX_CONNECTIONS: usize = 1024;
/// How long a request head may take to arrive, counted from when the connection (or the
/// previous request on it) became idle. Bounds slow-header clients and idle keep-alives.
pub(super) const HEADER_TIMEOUT: Duration = Duration::from_secs(30);
/// The pause after an accept error that is not about one connection (e.g. out of file
/// descriptors), so the loop does not spin.
const ACCEPT_BACKOFF: Duration = Duration::from_secs(1);

/// The routes of one address by exact path (no patterns, no percent-decoding). Fixed at
/// `start`; its size is the number of routes registered.
pub(super) type Routes = HashMap<String, Arc<Route>>;

/// Serves `listener` until `stop`, then drains until its connections end or `close`.
pub(super) async fn serve(
    listener: TcpListener,
    routes: Arc<Routes>,
    stop: CancellationToken,
    close: CancellationToken,
) {
    let mut connections = JoinSet::new();
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
                    Ok((stream, _peer)) => {
                        connections.spawn(connection(stream, routes.clone(), stop.clone()));
                    }
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

/// One connection, until it closes; from `stop` on it finishes its request and closes.
async fn connection(stream: TcpStream, routes: Arc<Routes>, stop: CancellationToken) {
    let service = hyper::service::service_fn(move |request| {
        let routes = routes.clone();
        async move { Ok::<_, Infallible>(dispatch(&routes, request).await) }
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

/// 404 for a path no route has, 405 for a method other than POST, else the route.
async fn dispatch(routes: &Routes, request: Request<Incoming>) -> Response<Body> {
    let Some(route) = routes.get(request.uri().path()) else {
        return status_response(StatusCode::NOT_FOUND);
    };
    if request.method() != Method::POST {
        let mut response = status_response(StatusCode::METHOD_NOT_ALLOWED);
        response
            .headers_mut()
            .insert(ALLOW, HeaderValue::from_static("POST"));
        return response;
    }
    route.serve(request).await
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use tokio::io::AsyncReadExt;

    use super::*;
    use crate::telemetry::Telemetry;
    use crate::webhook::tests::kit::{
        Blocking, CHANNEL, Echo, PATH, Probe, fixture, head, post, raw_status, send, within,
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
