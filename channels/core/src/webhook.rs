//! The shared inbound HTTP host for webhook-mode adapters.
//!
//! Several channels may receive webhooks on one address (say Telegram and Feishu both on
//! `0.0.0.0:8443`), so no adapter binds a socket itself. While the daemon builds the
//! channels, each webhook adapter registers its route with [`WebhookHost::route`] and keeps
//! the [`WebhookRoute`]; the daemon then [`start`](WebhookHost::start)s the host, which
//! binds ONE listener per address, and [`stop`](RunningHost::stop)s it at shutdown. A
//! running channel [`install`](WebhookRoute::install)s its [`WebhookHandler`]; while none
//! is installed (not started yet, restarting, stopped) the route answers 503 so the
//! platform redelivers later.
//!
//! The request bounds live here, the same for every platform, each set per route by
//! [`WebhookLimits`] (the defaults are what the Telegram webhook always had): 401 before
//! the body is read when [`WebhookHandler::authorize`] says no, 503 past
//! `max_in_flight`, 413 past `max_body`, 408 past `body_timeout`. Every refusal is counted
//! in [`WEBHOOK_REFUSED_METRIC`], as a receiving error of the channel's
//! [`Telemetry`], and in a warn line written at most once a minute per route. Paths are
//! never logged (operators make them secret), nor headers or bodies. A handler of a
//! platform that signs a timestamp also refuses a delivery outside [`Freshness`]'s window
//! (401, reason `stale`), so a captured request cannot be replayed later.
//!
//! Before a route is known the bounds are per connection (see `listener`): a request head
//! must arrive within 10 s, at most 1024 connections are served per address and at most
//! 128 of them from one remote address; the TLS proxy in front is still the place for
//! stricter connection limits. A route then bounds the bodies one address may be sending at
//! once (16) apart from the requests being handled, so bodies trickled in by someone without
//! the credentials never hold what a signed request needs (issue 27). [`serve_router`]
//! puts another HTTP endpoint (the daemon's admin) under the same connection bounds.
//!
//! Children:
//! - `freshness`: the window a signed timestamp must fall in ([`Freshness`]);
//! - `route`: one route's handler slot and the path of a request through the bounds;
//! - `listener`: one address's accept loop, connections, drain and path dispatch;
//! - `peers`: per-address budgets, so one address's flood cannot take everyone's share;
//! - `refusal`: refusal reasons, their counter and the rate-limited log;
//! - `tests::kit` (tests only): a metrics probe, test handlers and a raw HTTP/1 client,
//!   shared by the tests of every child.

mod freshness;
mod listener;
mod peers;
mod refusal;
mod route;

use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

pub use axum::http::{HeaderMap, StatusCode};

pub use self::freshness::{Freshness, Stale, WEBHOOK_FRESHNESS};
use self::listener::Routes;
use self::refusal::Refusal;
use self::route::Route;
use crate::channel::ChannelExit;
use crate::error::{ChannelError, ChannelResult};
use crate::telemetry::Telemetry;

/// Counter of webhook requests the host refused, by `channel` and `reason`:
/// `unauthorized` (401, from [`WebhookHandler::authorize`] or
/// [`WebhookResponse::unauthorized`]), `stale` (401, [`WebhookResponse::stale`]: signed
/// outside the [`Freshness`] window), `malformed` (400, [`WebhookResponse::malformed`]: a
/// body that does not open or parse), `too_large` (413), `timeout` (408), `busy` (503,
/// `max_in_flight` reached) or `unavailable` (503, no handler installed).
pub const WEBHOOK_REFUSED_METRIC: &str = "im_bridge_webhook_refused_total";

/// Per-route request bounds. [`Default`] is what the Telegram webhook has always used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WebhookLimits {
    /// The largest body read, in bytes (default 1 MiB; real updates are a few KiB). A
    /// larger declared `Content-Length` is refused before reading, a larger chunked body
    /// once it passes the cap: 413.
    pub max_body: usize,
    /// How long the body may take to arrive once the request is admitted (default 10 s);
    /// past it: 408.
    pub body_timeout: Duration,
    /// Requests of this route handled at once (default 100; Telegram opens at most 40
    /// connections). Past it a request gets 503 at once and the platform retries it.
    pub max_in_flight: usize,
}

impl Default for WebhookLimits {
    fn default() -> Self {
        Self {
            max_body: 1024 * 1024,
            body_timeout: Duration::from_secs(10),
            max_in_flight: 100,
        }
    }
}

/// Why a route could not be registered or the host not started.
#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    /// Another route already has this path on this address. The path is kept for the caller
    /// but left out of the message, since operators make paths secret.
    #[error("two webhook routes on {listen} have the same path")]
    PathTaken {
        /// The address both routes were registered on.
        listen: SocketAddr,
        /// The path they share.
        path: String,
    },
    /// The host already started: routes (and adopted sockets) are registered before.
    #[error("the webhook host already started")]
    Started,
    /// The path does not start with '/', or holds '?' or '#' (it could never match a
    /// request). Not printed, like every path.
    #[error("a webhook path must start with '/' and hold no '?' or '#'")]
    BadPath(String),
    /// Binding a listen address failed (the daemon treats it as fatal).
    #[error("cannot listen for webhooks on {addr}")]
    Bind {
        /// The configured address.
        addr: SocketAddr,
        /// What the OS said.
        #[source]
        source: io::Error,
    },
}

/// What a running channel serves its route with.
#[async_trait]
pub trait WebhookHandler: Send + Sync + 'static {
    /// Checked on the headers before the body is read (e.g. Telegram's secret-token header,
    /// compared in constant time). `false` answers 401 at once, counted as an
    /// `unauthorized` refusal. Platforms that sign the body check in
    /// [`handle`](Self::handle) and answer [`WebhookResponse::unauthorized`] instead.
    fn authorize(&self, headers: &HeaderMap) -> bool {
        let _ = headers;
        true
    }

    /// One request whose whole body arrived within the route's bounds. The handler counts
    /// it with [`Telemetry::received`]. The future is dropped if the client goes away, or
    /// when the host's shutdown drain ends.
    async fn handle(&self, request: WebhookRequest) -> WebhookResponse;
}

/// A request that passed the bounds.
pub struct WebhookRequest {
    /// The request headers.
    pub headers: HeaderMap,
    /// The query string without its `?`, if the request had one.
    pub query: Option<String>,
    /// The whole body, at most [`WebhookLimits::max_body`] bytes.
    pub body: Bytes,
}

/// A handler's answer.
#[derive(Clone, Debug)]
pub struct WebhookResponse {
    status: StatusCode,
    /// The content type and the body, if there is a body.
    body: Option<(&'static str, Bytes)>,
    /// Counted as a refusal for this reason.
    refused: Option<Refusal>,
}

impl WebhookResponse {
    /// An answer with `status` and no body.
    pub fn status(status: StatusCode) -> Self {
        Self {
            status,
            body: None,
            refused: None,
        }
    }

    /// 200 with an already serialized JSON body.
    pub fn json(body: impl Into<Bytes>) -> Self {
        Self {
            status: StatusCode::OK,
            body: Some(("application/json", body.into())),
            refused: None,
        }
    }

    /// 200 with `value` as its JSON body.
    pub fn json_value(value: &serde_json::Value) -> Self {
        match serde_json::to_vec(value) {
            Ok(body) => Self::json(body),
            // Unreachable for a `Value` (its keys are strings); answer rather than panic.
            Err(_) => Self::status(StatusCode::INTERNAL_SERVER_ERROR),
        }
    }

    /// 401 for a request whose signature the handler rejected: counted and logged like an
    /// [`authorize`](WebhookHandler::authorize) refusal.
    pub fn unauthorized() -> Self {
        Self {
            refused: Some(Refusal::Unauthorized),
            ..Self::status(StatusCode::UNAUTHORIZED)
        }
    }

    /// 401 for a correctly signed request whose signed timestamp is outside the
    /// [`Freshness`] window: counted and logged as a `stale` refusal.
    pub fn stale() -> Self {
        Self {
            refused: Some(Refusal::Stale),
            ..Self::status(StatusCode::UNAUTHORIZED)
        }
    }

    /// 400 for a body that does not open or parse as the platform's envelope: counted and
    /// logged (at most once a minute per route, with the count) as a `malformed` refusal,
    /// so a flood of garbage writes one line, not one per request (issue 27).
    pub fn malformed() -> Self {
        Self {
            refused: Some(Refusal::Malformed),
            ..Self::status(StatusCode::BAD_REQUEST)
        }
    }

    /// The status this answers with.
    pub fn status_code(&self) -> StatusCode {
        self.status
    }

    /// The body, if any.
    pub fn body(&self) -> Option<&Bytes> {
        self.body.as_ref().map(|(_, body)| body)
    }
}

/// Shared inbound HTTP: adapters register routes at build time; the daemon binds and serves.
/// Cheap to clone; clones are the same host.
#[derive(Clone, Default)]
pub struct WebhookHost {
    registry: Arc<Mutex<Registry>>,
}

#[derive(Default)]
struct Registry {
    started: bool,
    /// One entry per configured listen address; as many as the config has.
    addresses: BTreeMap<SocketAddr, Address>,
}

#[derive(Default)]
struct Address {
    adopted: Option<std::net::TcpListener>,
    /// One per registered route; as many as the config has.
    routes: Routes,
    /// Set by `start` to the address actually bound; shared with the routes.
    bound: Arc<OnceLock<SocketAddr>>,
}

impl fmt::Debug for WebhookHost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let registry = lock(&self.registry);
        // Addresses only: paths are not printed (operators make them secret).
        f.debug_struct("WebhookHost")
            .field("addresses", &registry.addresses.keys().collect::<Vec<_>>())
            .field("started", &registry.started)
            .finish()
    }
}

impl WebhookHost {
    /// A host with no routes.
    pub fn new() -> Self {
        Self::default()
    }

    /// Serve requests for `listen` on this already-bound socket instead of binding `listen`
    /// (tests, socket activation). Must be called before [`start`](Self::start): afterwards
    /// the socket is closed with a warning. A second socket for one address replaces the
    /// first. A socket for an address no route uses is closed at `start`.
    pub fn adopt(&self, listen: SocketAddr, listener: std::net::TcpListener) {
        let mut registry = lock(&self.registry);
        if registry.started {
            tracing::warn!(%listen, "Closed a socket adopted after the webhook host started.");
            return;
        }
        registry.addresses.entry(listen).or_default().adopted = Some(listener);
    }

    /// Registers POST `path` on `listen` for `telemetry`'s channel, with its refusal
    /// counters (registered now, with the current `metrics` recorder, like
    /// [`Telemetry::new`]). Err if that (address, path) is taken, the host already
    /// started, or `path` does not start with '/' (or holds '?' or '#').
    pub fn route(
        &self,
        telemetry: &Telemetry,
        listen: SocketAddr,
        path: &str,
        limits: WebhookLimits,
    ) -> Result<WebhookRoute, WebhookError> {
        let mut registry = lock(&self.registry);
        if registry.started {
            return Err(WebhookError::Started);
        }
        if !path.starts_with('/') || path.contains(['?', '#']) {
            return Err(WebhookError::BadPath(path.to_owned()));
        }
        let address = registry.addresses.entry(listen).or_default();
        let bound = address.bound.clone();
        match address.routes.entry(path.to_owned()) {
            std::collections::hash_map::Entry::Occupied(_) => Err(WebhookError::PathTaken {
                listen,
                path: path.to_owned(),
            }),
            std::collections::hash_map::Entry::Vacant(slot) => {
                let route = Arc::new(Route::new(telemetry, limits, bound));
                slot.insert(route.clone());
                Ok(WebhookRoute { route })
            }
        }
    }

    /// Whether any route is registered (the daemon starts nothing otherwise).
    pub fn is_empty(&self) -> bool {
        lock(&self.registry)
            .addresses
            .values()
            .all(|address| address.routes.is_empty())
    }

    /// Binds every address that has a route (adopted sockets are used as they are) and
    /// serves them in background tasks. Fails with the address on a bind error (the daemon
    /// treats that as fatal; what was bound already is closed again). Afterwards no route
    /// can be added, and a second call fails with [`WebhookError::Started`].
    pub async fn start(&self) -> Result<RunningHost, WebhookError> {
        let addresses = {
            let mut registry = lock(&self.registry);
            if std::mem::replace(&mut registry.started, true) {
                return Err(WebhookError::Started);
            }
            std::mem::take(&mut registry.addresses)
        };
        let mut bound = Vec::new();
        for (listen, address) in addresses {
            if address.routes.is_empty() {
                continue;
            }
            let listener = match address.adopted {
                Some(std) => std
                    .set_nonblocking(true)
                    .and_then(|()| tokio::net::TcpListener::from_std(std)),
                None => tokio::net::TcpListener::bind(listen).await,
            };
            let listener = listener
                .and_then(|listener| Ok((listener.local_addr()?, listener)))
                .map_err(|source| WebhookError::Bind {
                    addr: listen,
                    source,
                });
            let (local, listener) = listener?;
            // `start` runs once and each address appears once, so the cell is empty.
            let _ = address.bound.set(local);
            bound.push((listen, local, listener, address.routes));
        }
        let stop = CancellationToken::new();
        let close = CancellationToken::new();
        let mut running = RunningHost {
            tasks: JoinSet::new(),
            stop: stop.clone(),
            close: close.clone(),
            addresses: BTreeMap::new(),
            routes: Vec::new(),
        };
        for (listen, local, listener, routes) in bound {
            tracing::info!(%listen, addr = %local, routes = routes.len(), "Serving webhooks.");
            running.addresses.insert(listen, local);
            running.routes.extend(routes.values().cloned());
            let serve = listener::serve(listener, Arc::new(routes), stop.clone(), close.clone());
            running.tasks.spawn(serve);
        }
        Ok(running)
    }
}

/// Serves `router` on `listener` with the connection bounds of the webhook listeners (at
/// most 1024 connections, 128 from one address, a request head within 10 s; see
/// `listener`), for an HTTP endpoint that is not a webhook: the daemon's admin endpoints
/// (issue 27: idle connections there used to pile up without bound). From `shutdown` on it
/// stops accepting, lets requests in flight finish for at most `drain`, then closes the
/// rest; it returns once every connection ended.
pub async fn serve_router(
    listener: tokio::net::TcpListener,
    router: axum::Router,
    shutdown: CancellationToken,
    drain: Duration,
) {
    let close = CancellationToken::new();
    let closing = {
        let (shutdown, close) = (shutdown.clone(), close.clone());
        async move {
            shutdown.cancelled().await;
            tokio::time::sleep(drain).await;
            close.cancel();
        }
    };
    tokio::select! {
        () = listener::serve(listener, Arc::new(router), shutdown, close.clone()) => {}
        () = async { closing.await; std::future::pending::<()>().await } => {}
    }
}

/// The started host. Dropping it without [`stop`](Self::stop) aborts every listener and
/// connection at once (and logs no pending refusals).
pub struct RunningHost {
    /// One task per bound address.
    tasks: JoinSet<()>,
    /// Stop accepting; connections finish their request and close.
    stop: CancellationToken,
    /// The drain is over: abort the connections left.
    close: CancellationToken,
    /// Configured address → bound address.
    addresses: BTreeMap<SocketAddr, SocketAddr>,
    /// Every route served, to flush their refusal logs at the end.
    routes: Vec<Arc<Route>>,
}

impl RunningHost {
    /// The address actually bound for a configured `listen` (port 0 → the port picked).
    pub fn local_addr(&self, listen: SocketAddr) -> Option<SocketAddr> {
        self.addresses.get(&listen).copied()
    }

    /// Stops accepting, lets requests in flight finish for at most `drain` (5 s is the
    /// daemon's), then closes what is left. Returns when every listener task ended, with
    /// every connection closed; then logs the refusals not yet logged.
    pub async fn stop(mut self, drain: Duration) {
        self.stop.cancel();
        let drained = tokio::time::sleep(drain);
        tokio::pin!(drained);
        loop {
            tokio::select! {
                joined = self.tasks.join_next() => match joined {
                    None => break,
                    Some(Ok(())) => {}
                    Some(Err(error)) => {
                        tracing::error!(%error, "A webhook listener task failed.");
                    }
                },
                () = &mut drained, if !self.close.is_cancelled() => self.close.cancel(),
            }
        }
        for route in &self.routes {
            if let Some(tally) = route.refusals.flush() {
                tally.log(route.telemetry.channel());
            }
        }
    }
}

/// What an adapter holds for its route. Cheap to clone.
#[derive(Clone)]
pub struct WebhookRoute {
    route: Arc<Route>,
}

impl WebhookRoute {
    /// The route of a channel whose settings chose a webhook. The registry gives every such
    /// channel one; a channel built by hand without it cannot run its transport.
    pub fn required(route: Option<&Self>) -> ChannelResult<&Self> {
        route.ok_or(ChannelError::Unsupported("a webhook without its route"))
    }

    /// Installs `handler`; requests are served by it until the guard is dropped. While no
    /// handler is installed (before the channel runs, while it restarts, after it stopped)
    /// the route answers 503 so the platform redelivers later. Installing twice replaces the
    /// previous handler (whose guard then uninstalls nothing).
    pub fn install(&self, handler: Arc<dyn WebhookHandler>) -> Installed {
        Installed {
            id: self.route.install(handler),
            route: self.route.clone(),
        }
    }

    /// The bound address once the host started (None before).
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.route.bound.get().copied()
    }

    /// A webhook channel's whole transport when nothing is registered with the platform:
    /// installs `handler`, reports the channel connected while it serves, and returns once
    /// `shutdown` is cancelled (the handler uninstalled): the transport's
    /// [`ChannelExit::Stopped`]. The path is not logged: operators sometimes make it secret.
    pub async fn serve(
        &self,
        handler: Arc<dyn WebhookHandler>,
        telemetry: &Telemetry,
        shutdown: &CancellationToken,
    ) -> ChannelExit {
        let _serving = self.install(handler);
        tracing::info!(channel = telemetry.channel(), addr = ?self.local_addr(), "Serving the webhook.");
        telemetry.set_connected(true);
        shutdown.cancelled().await;
        telemetry.set_connected(false);
        ChannelExit::Stopped
    }
}

/// An installed handler; dropping it uninstalls the handler if it is still the one
/// installed (so a guard dropped at once serves nothing). Requests already being handled
/// finish.
#[must_use]
pub struct Installed {
    route: Arc<Route>,
    id: u64,
}

impl Drop for Installed {
    fn drop(&mut self) {
        self.route.uninstall(self.id);
    }
}

/// Locks `mutex`, recovering from poisoning: every critical section here leaves the data
/// consistent.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    match mutex.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    }
}

impl WebhookHost {
    /// Registers the route of a platform's `webhook` block as `config::webhook_place` read
    /// it, with the default limits: what an adapter's `build` does in webhook mode. A
    /// refusal (the address and path taken, the host started) is the channel's error.
    pub fn route_place(
        &self,
        telemetry: &Telemetry,
        place: &crate::config::WebhookPlace,
    ) -> Result<WebhookRoute, crate::ChannelError> {
        self.route(
            telemetry,
            place.listen,
            &place.path,
            WebhookLimits::default(),
        )
        .map_err(|e| crate::ChannelError::Transport(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    pub(in crate::webhook) mod kit;

    use self::kit::{Echo, Probe, post};
    use super::*;

    fn any_port() -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], 0))
    }

    #[test]
    fn a_taken_or_bad_path_is_refused_and_never_printed() {
        let host = WebhookHost::new();
        let telemetry = Telemetry::new("unit");
        let limits = WebhookLimits::default();
        assert!(host.is_empty());
        host.route(&telemetry, any_port(), "/secret-path", limits)
            .unwrap();
        assert!(!host.is_empty());
        let taken = host
            .route(&telemetry, any_port(), "/secret-path", limits)
            .err()
            .unwrap();
        assert!(matches!(&taken, WebhookError::PathTaken { path, .. } if path == "/secret-path"));
        assert!(!taken.to_string().contains("secret-path"));
        // The same path on another address is another route.
        let other = SocketAddr::from(([127, 0, 0, 2], 0));
        host.route(&telemetry, other, "/secret-path", limits)
            .unwrap();
        for bad in ["secret-path", "", "/a?b", "/a#b"] {
            let error = host
                .route(&telemetry, any_port(), bad, limits)
                .err()
                .unwrap();
            assert!(matches!(&error, WebhookError::BadPath(path) if path == bad));
            assert!(bad.is_empty() || !error.to_string().contains(bad));
        }
    }

    #[tokio::test]
    async fn after_start_nothing_can_be_registered_or_started_again() {
        let host = WebhookHost::new();
        let telemetry = Telemetry::new("unit");
        let route = host
            .route(&telemetry, any_port(), "/hook", WebhookLimits::default())
            .unwrap();
        assert_eq!(route.local_addr(), None);
        let running = host.start().await.unwrap();
        assert_eq!(route.local_addr(), running.local_addr(any_port()));
        assert!(route.local_addr().is_some());
        let late = host.route(&telemetry, any_port(), "/late", WebhookLimits::default());
        assert!(matches!(late, Err(WebhookError::Started)));
        assert!(matches!(host.start().await, Err(WebhookError::Started)));
        // A socket adopted too late is closed, not served.
        let socket = std::net::TcpListener::bind(any_port()).unwrap();
        let addr = socket.local_addr().unwrap();
        host.adopt(addr, socket);
        assert!(tokio::net::TcpStream::connect(addr).await.is_err());
        running.stop(Duration::from_secs(1)).await;
    }

    #[tokio::test]
    async fn a_bind_error_names_the_address() {
        let taken = std::net::TcpListener::bind(any_port()).unwrap();
        let listen = taken.local_addr().unwrap();
        let host = WebhookHost::new();
        host.route(
            &Telemetry::new("unit"),
            listen,
            "/hook",
            WebhookLimits::default(),
        )
        .unwrap();
        let error = host.start().await.err().unwrap();
        assert!(matches!(error, WebhookError::Bind { addr, .. } if addr == listen));
    }

    #[tokio::test]
    async fn an_adopted_socket_is_served_as_it_is() {
        let probe = Probe::new();
        let socket = std::net::TcpListener::bind(any_port()).unwrap();
        let addr = socket.local_addr().unwrap();
        // The configured address may differ from the socket's (socket activation).
        let listen = SocketAddr::from(([0, 0, 0, 0], 8443));
        let host = WebhookHost::new();
        host.adopt(listen, socket);
        let (telemetry, route) = probe.build(|| {
            let telemetry = Telemetry::new("unit");
            let route = host.route(&telemetry, listen, "/hook", WebhookLimits::default());
            (telemetry, route.unwrap())
        });
        let running = host.start().await.unwrap();
        assert_eq!(running.local_addr(listen), Some(addr));
        let _installed = route.install(Echo::new(&telemetry));
        assert_eq!(post(addr, "/hook", &[], "{}").await.0, 200);
        running.stop(Duration::from_secs(1)).await;
    }

    #[test]
    fn responses_carry_their_status_and_body() {
        let json = WebhookResponse::json_value(&serde_json::json!({"challenge": "c"}));
        assert_eq!(json.status_code(), StatusCode::OK);
        assert_eq!(json.body().unwrap().as_ref(), br#"{"challenge":"c"}"#);
        let refused = WebhookResponse::unauthorized();
        assert_eq!(refused.status_code(), StatusCode::UNAUTHORIZED);
        assert!(refused.refused == Some(Refusal::Unauthorized) && refused.body().is_none());
        let stale = WebhookResponse::stale();
        assert_eq!(stale.status_code(), StatusCode::UNAUTHORIZED);
        assert!(stale.refused == Some(Refusal::Stale) && stale.body().is_none());
        assert!(WebhookResponse::status(StatusCode::OK).refused.is_none());
    }

    #[test]
    fn a_place_is_routed_once() {
        let host = WebhookHost::default();
        let telemetry = Telemetry::new("unit");
        let place = crate::config::WebhookPlace {
            listen: "127.0.0.1:0".parse().unwrap(),
            path: "/x/events".into(),
        };
        assert!(host.route_place(&telemetry, &place).is_ok());
        let Err(taken) = host.route_place(&telemetry, &place) else {
            panic!("the place was routed twice");
        };
        assert!(
            matches!(taken, crate::ChannelError::Transport(_)),
            "{taken:?}"
        );
    }
}
