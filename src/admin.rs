//! The admin HTTP endpoints on `bridge.admin_listen`: `/healthz`, `/readyz`, `/metrics`.
//!
//! - `/healthz` answers 200 while the process serves requests.
//! - `/readyz` answers 200 only when every enabled channel reports itself connected and the
//!   Gateway answered a probe recently; otherwise 503 with a JSON body naming what is not
//!   ready (component names only, never URLs or tokens).
//! - `/metrics` renders Prometheus text from the process-wide `metrics` recorder.
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

use crate::lease::Standby;
use tokio_util::sync::CancellationToken;

/// How long a Gateway probe result is reused.
pub const PROBE_TTL: Duration = Duration::from_secs(5);

/// Metric names, one place for all of them.
pub mod names {
    /// Counter: inbound messages admitted, by `channel`.
    pub const INBOUND: &str = "im_bridge_inbound_messages_total";
    /// Counter: inbound messages refused at admission, by `channel` and `reason`.
    pub const INBOUND_REFUSED: &str = im_bridge_channel::REFUSED_METRIC;
    /// Gauge: messages waiting in the inbound queue.
    pub const QUEUE_DEPTH: &str = "im_bridge_inbound_queue_depth";
    /// Counter: agent runs, by `outcome`.
    pub const RUNS: &str = "im_bridge_runs_total";
    /// Counter: outbound deliveries, by `channel` and `result`.
    pub const OUTBOUND: &str = "im_bridge_outbound_sends_total";
}

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
        }
    }

    /// Channels standing by for their transport lease count as ready: another replica
    /// runs their transport.
    pub fn with_standby(mut self, standby: Standby) -> Self {
        self.standby = standby;
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
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics_page))
        .with_state(state)
}

/// Serves the admin endpoints on `listener` until `shutdown` is cancelled.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: AdminState,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    axum::serve(listener, router(state))
        .with_graceful_shutdown(shutdown.cancelled_owned())
        .await
}

/// Binds the admin address.
pub async fn bind(addr: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(addr).await
}

async fn healthz() -> &'static str {
    "ok\n"
}

async fn readyz(State(state): State<AdminState>) -> Response {
    let mut not_ready: Vec<String> = state
        .channels
        .iter()
        .filter(|c| !c.is_connected() && !state.standby.contains(c.name()))
        .map(|c| format!("channel:{}", c.name()))
        .collect();
    if !state.gateway_ready().await {
        not_ready.push("gateway".into());
    }
    if not_ready.is_empty() {
        (
            StatusCode::OK,
            axum::Json(serde_json::json!({"ready": true})),
        )
            .into_response()
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            axum::Json(serde_json::json!({"ready": false, "not_ready": not_ready})),
        )
            .into_response()
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
