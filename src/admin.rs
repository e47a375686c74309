//! The admin HTTP endpoints on `bridge.admin_listen`: `/healthz`, `/readyz`, `/metrics`.
//!
//! - `/healthz` answers 200 while the process serves requests.
//! - `/readyz` answers 200 only when every enabled channel reports itself connected (or
//!   stands by for its transport lease) and the Gateway answered a probe recently; otherwise
//!   503 with a JSON body naming what is not ready (component names only, never URLs or
//!   tokens). A channel whose transport waits to be restarted is not ready whatever it
//!   reports; the body's `restarting` object names it with its consecutive failures and the
//!   kind of the last one (`error`, `panic`, `stopped`), never the error's text (errors may
//!   name hosts).
//! - `/metrics` renders Prometheus text from the process-wide `metrics` recorder.
//! - `/admin/…`: the operator's endpoints (issue 33: deliveries, drain), only with
//!   `bridge.admin_token` set (child `operator`).
//!
//! While the daemon drains, `/readyz` answers 503 naming `draining`.
//!
//! The handlers hold no locks across awaits; the Gateway probe result is cached for
//! [`PROBE_TTL`] so a scraping load balancer cannot turn into load on the Gateway.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures_util::future::BoxFuture;
use im_bridge_channel::Channel;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

use tokio_util::sync::CancellationToken;

use crate::lease::Standby;
use crate::supervisor::{TransportHealth, TransportState};

mod operator;

pub use operator::Operator;

/// How long a Gateway probe result is reused.
pub const PROBE_TTL: Duration = Duration::from_secs(5);

/// Answers whether the Gateway is reachable.
pub trait GatewayProbe: Send + Sync + 'static {
    /// `true` when the Gateway answered (any HTTP status counts as an answer).
    fn probe(&self) -> BoxFuture<'_, bool>;
}

/// The process-wide Prometheus recorder, installed on first use.
pub fn metrics_handle() -> PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new().build_recorder();
            let handle = recorder.handle();
            // Another recorder may already be installed (an embedding application);
            // then our handle renders an empty page, which is honest.
            if metrics::set_global_recorder(recorder).is_err() {
                tracing::warn!("A metrics recorder was already installed; /metrics will be empty.");
            }
            handle
        })
        .clone()
}

/// What the admin endpoints look at.
#[derive(Clone)]
pub struct AdminState {
    channels: Vec<Arc<dyn Channel>>,
    probe: Arc<dyn GatewayProbe>,
    last_probe: Arc<Mutex<Option<(Instant, bool)>>>,
    metrics: PrometheusHandle,
    standby: Standby,
    transports: TransportHealth,
    /// The operator's endpoints, when a token is configured.
    operator: Option<Operator>,
    /// Cancelled while the daemon drains.
    draining: CancellationToken,
}

impl AdminState {
    /// State over the running channels and a Gateway probe.
    pub fn new(channels: Vec<Arc<dyn Channel>>, probe: Arc<dyn GatewayProbe>) -> Self {
        Self {
            channels,
            probe,
            last_probe: Arc::new(Mutex::new(None)),
            metrics: metrics_handle(),
            standby: Standby::default(),
            transports: TransportHealth::default(),
            operator: None,
            draining: CancellationToken::new(),
        }
    }

    /// Serves the operator's endpoints (`/admin/…`).
    pub fn with_operator(mut self, operator: Operator) -> Self {
        self.operator = Some(operator);
        self
    }

    /// Not ready once `draining` is cancelled.
    pub fn with_draining(mut self, draining: CancellationToken) -> Self {
        self.draining = draining;
        self
    }

    /// Channels standing by for their transport lease count as ready: another replica
    /// runs their transport.
    pub fn with_standby(mut self, standby: Standby) -> Self {
        self.standby = standby;
        self
    }

    /// Channels whose transport waits to be restarted are not ready.
    pub fn with_transports(mut self, transports: TransportHealth) -> Self {
        self.transports = transports;
        self
    }

    async fn gateway_ready(&self) -> bool {
        let cached = *self.last_probe.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((at, ok)) = cached
            && at.elapsed() < PROBE_TTL
        {
            return ok;
        }
        let ok = self.probe.probe().await;
        *self.last_probe.lock().unwrap_or_else(|p| p.into_inner()) = Some((Instant::now(), ok));
        ok
    }
}

/// The admin router.
pub fn router(state: AdminState) -> Router {
    let operator = state.operator.clone();
    let router = Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics_page))
        .with_state(state);
    match operator {
        Some(operator) => router.merge(operator::routes(operator)),
        None => router,
    }
}

/// Serves the admin endpoints on `listener` until `shutdown` is cancelled, under the
/// webhook listeners' connection bounds (at most 1024 connections, 128 from one address, a
/// request head within 10 s; issue 27), since it may listen on all interfaces.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: AdminState,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    im_bridge_channel::webhook::serve_router(listener, router(state), shutdown, ADMIN_DRAIN).await;
    Ok(())
}

/// How long requests in flight on the admin endpoints may finish after shutdown (a scrape
/// of `/metrics` takes milliseconds).
const ADMIN_DRAIN: std::time::Duration = std::time::Duration::from_secs(2);

/// Binds the admin address.
pub async fn bind(addr: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(addr).await
}

async fn healthz() -> &'static str {
    "ok\n"
}

async fn readyz(State(state): State<AdminState>) -> Response {
    let mut not_ready = Vec::new();
    let mut restarting = serde_json::Map::new();
    for channel in &state.channels {
        let name = channel.name();
        match state.transports.state(name) {
            Some(TransportState::Restarting { failures, last }) => {
                not_ready.push(format!("channel:{name}"));
                restarting.insert(
                    name.into(),
                    serde_json::json!({"failures": failures, "last_failure": last.as_str()}),
                );
            }
            _ if !channel.is_connected() && !state.standby.contains(name) => {
                not_ready.push(format!("channel:{name}"));
            }
            _ => {}
        }
    }
    if !state.gateway_ready().await {
        not_ready.push("gateway".into());
    }
    if state.draining.is_cancelled() {
        not_ready.push("draining".into());
    }
    if not_ready.is_empty() {
        (
            StatusCode::OK,
            axum::Json(serde_json::json!({"ready": true})),
        )
            .into_response()
    } else {
        let mut body = serde_json::json!({"ready": false, "not_ready": not_ready});
        if !restarting.is_empty() {
            body["restarting"] = restarting.into();
        }
        (StatusCode::SERVICE_UNAVAILABLE, axum::Json(body)).into_response()
    }
}

async fn metrics_page(State(state): State<AdminState>) -> Response {
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        state.metrics.render(),
    )
        .into_response()
}

#[cfg(test)]
mod tests;
