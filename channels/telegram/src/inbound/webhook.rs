//! Webhook mode: Telegram posts each update to our HTTP server.
//!
//! - The server binds `webhook.listen` and serves `POST <path of webhook.public_url>`.
//! - Every request must carry `X-Telegram-Bot-Api-Secret-Token` equal to
//!   `webhook.secret_token` (compared in constant time) before its body is even read;
//!   anything else gets 401 at once. Refusals are counted, and logged at most once a
//!   minute with the number refused, so a scanner cannot flood the log.
//! - `setWebhook` (url = `public_url`, the secret, `allowed_updates: [message]`) is called
//!   once the server listens, retried with backoff until it succeeds; the channel reports
//!   connected from then on. The webhook is left in place at shutdown so Telegram queues
//!   updates for the next start (or another replica behind the same URL).
//!
//! Answers (Telegram retries any non-2xx, and holds back later updates meanwhile):
//! - 200 once the update is admitted, skipped on purpose, or unreadable (retrying a
//!   malformed update cannot help);
//! - 200 when the queue is full: [`InboundSink::offer`] hands the message to the refusal
//!   path, so its sender is told at once to try again; a retry from Telegram would only
//!   answer the same message twice;
//! - 503 when admission is closed (shutting down): the update is not ours to drop, and
//!   Telegram redelivers it after the restart; likewise when the queue is full and so
//!   many senders already wait for their "too busy" reply that this one cannot be told.
//!
//! - 503 when [`MAX_IN_FLIGHT`] requests are already being handled (Telegram retries);
//! - 413 for a body over [`MAX_UPDATE_BYTES`], 408 for one that takes longer than
//!   [`BODY_TIMEOUT`] to arrive.
//!
//! The server does not time out slow request *headers*; Telegram only calls HTTPS on
//! ports 443, 80, 88 or 8443, so the TLS proxy in front (README, Telegram setup) is where
//! connection limits and header timeouts belong.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use im_bridge_channel::{
    AdmitError, AllowedUsers, ChannelError, ChannelExit, InboundSink, Secret, Stage, Telemetry,
};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::{Backoff, InboundContext, Normalized, normalize};
use crate::Shared;
use crate::config::WebhookSettings;
use crate::error::TelegramError;
use crate::model::Update;

/// The header Telegram echoes the secret token in.
pub const SECRET_HEADER: &str = "x-telegram-bot-api-secret-token";

/// The largest update body read; real updates are a few KiB.
pub const MAX_UPDATE_BYTES: usize = 1024 * 1024;
/// Authenticated requests handled at once; more get 503 and Telegram retries them
/// (Telegram itself opens at most 40 connections by default).
pub const MAX_IN_FLIGHT: usize = 100;
/// How long an authenticated body may take to arrive.
pub const BODY_TIMEOUT: Duration = Duration::from_secs(10);
/// How long requests in flight may take to finish after shutdown.
pub const SHUTDOWN_DRAIN: Duration = Duration::from_secs(5);
/// At most one log line per this interval about refused requests.
const REFUSAL_LOG_INTERVAL: Duration = Duration::from_secs(60);

/// What each request handler needs.
struct HookState {
    sink: InboundSink,
    secret: Secret,
    bot_username: Option<String>,
    allowed_users: AllowedUsers,
    telemetry: Telemetry,
    /// [`MAX_IN_FLIGHT`] permits.
    in_flight: Arc<Semaphore>,
    refusals: RefusalLog,
}

/// Counts requests refused for a wrong or missing secret and logs them at most once per
/// [`REFUSAL_LOG_INTERVAL`].
#[derive(Default)]
struct RefusalLog {
    unlogged: AtomicU64,
    last: Mutex<Option<Instant>>,
}

impl RefusalLog {
    fn refused(&self) {
        self.unlogged.fetch_add(1, Ordering::Relaxed);
        let now = Instant::now();
        let mut last = match self.last.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        if last.is_some_and(|at| now.duration_since(at) < REFUSAL_LOG_INTERVAL) {
            return;
        }
        *last = Some(now);
        drop(last);
        let refused = self.unlogged.swap(0, Ordering::Relaxed);
        tracing::warn!(
            refused,
            "Refused webhook requests without the right secret token."
        );
    }
}

/// Serves the webhook until `shutdown`. `listener` is a socket bound in advance (tests,
/// socket activation); otherwise `hook.listen` is bound here.
pub(crate) async fn run(
    shared: &Shared,
    hook: &WebhookSettings,
    listener: Option<std::net::TcpListener>,
    sink: InboundSink,
    shutdown: &CancellationToken,
) -> Result<ChannelExit, ChannelError> {
    let listener = match listener {
        Some(std) => std
            .set_nonblocking(true)
            .and_then(|()| TcpListener::from_std(std)),
        None => TcpListener::bind(hook.listen).await,
    }
    .map_err(|source| {
        ChannelError::from(TelegramError::Bind {
            addr: hook.listen,
            source,
        })
    })?;
    let local = listener.local_addr().ok();
    let state = Arc::new(HookState {
        sink,
        secret: hook.secret_token.clone(),
        bot_username: shared.bot_username(),
        allowed_users: shared.allowed_users.clone(),
        telemetry: shared.telemetry.clone(),
        in_flight: Arc::new(Semaphore::new(MAX_IN_FLIGHT)),
        refusals: RefusalLog::default(),
    });
    let app = Router::new()
        .route(&hook.path, post(receive))
        .route_layer(middleware::from_fn_with_state(state.clone(), admit_request))
        .with_state(state);
    let server = axum::serve(listener, app)
        .with_graceful_shutdown(shutdown.clone().cancelled_owned())
        .into_future();
    tokio::pin!(server);
    // The path is not logged: operators sometimes make it secret.
    tracing::info!(addr = ?local, "Serving the Telegram webhook.");

    let register = register(shared, hook, shutdown);
    tokio::pin!(register);
    let mut registered = false;
    // After shutdown the server finishes the requests in flight; a connection that never
    // completes its request must not hold the daemon's exit for longer than this.
    let drained = async {
        shutdown.cancelled().await;
        tokio::time::sleep(SHUTDOWN_DRAIN).await;
    };
    tokio::pin!(drained);
    loop {
        tokio::select! {
            () = &mut drained => {
                shared.telemetry.set_connected(false);
                tracing::debug!("Closed webhook connections still open after the shutdown drain.");
                return Ok(ChannelExit::Stopped);
            }
            result = &mut server => {
                shared.telemetry.set_connected(false);
                return match result {
                    Ok(()) => Ok(ChannelExit::Stopped),
                    Err(error) => {
                        shared.telemetry.error(Stage::Receiving);
                        Err(ChannelError::Io(error))
                    }
                };
            }
            result = &mut register, if !registered => {
                registered = true;
                result?;
            }
        }
    }
}

/// `setWebhook`, retried until it succeeds or shutdown.
async fn register(
    shared: &Shared,
    hook: &WebhookSettings,
    shutdown: &CancellationToken,
) -> Result<(), ChannelError> {
    let mut backoff = Backoff::default();
    loop {
        match shared
            .api
            .set_webhook(&hook.public_url, &hook.secret_token)
            .await
        {
            Ok(()) => {
                shared.telemetry.set_connected(true);
                tracing::info!("Registered the Telegram webhook.");
                return Ok(());
            }
            Err(TelegramError::Unauthorized) => {
                shared.telemetry.error(Stage::Receiving);
                let error = TelegramError::Unauthorized;
                tracing::error!(%error, "Telegram refused the bot token; the channel stops.");
                return Err(error.into());
            }
            Err(error) => {
                shared.telemetry.error(Stage::Receiving);
                let wait = match &error {
                    TelegramError::RetryAfter(wait) => *wait,
                    _ => backoff.next_delay(),
                };
                tracing::warn!(%error, retry_in_ms = wait.as_millis() as u64, "Registering the Telegram webhook failed; retrying.");
                tokio::select! {
                    () = shutdown.cancelled() => return Ok(()),
                    () = tokio::time::sleep(wait) => {}
                }
            }
        }
    }
}

/// Runs before the body is read: the secret, then a slot among [`MAX_IN_FLIGHT`].
async fn admit_request(
    State(state): State<Arc<HookState>>,
    request: Request,
    next: Next,
) -> Response {
    let authorized = request
        .headers()
        .get(SECRET_HEADER)
        .is_some_and(|given| constant_time_eq(given.as_bytes(), state.secret.expose().as_bytes()));
    if !authorized {
        state.telemetry.error(Stage::Receiving);
        state.refusals.refused();
        return StatusCode::UNAUTHORIZED.into_response();
    }
    let Ok(_slot) = state.in_flight.clone().try_acquire_owned() else {
        return StatusCode::SERVICE_UNAVAILABLE.into_response();
    };
    next.run(request).await
}

async fn receive(State(state): State<Arc<HookState>>, body: Body) -> StatusCode {
    let body = match tokio::time::timeout(
        BODY_TIMEOUT,
        axum::body::to_bytes(body, MAX_UPDATE_BYTES),
    )
    .await
    {
        Ok(Ok(body)) => body,
        Ok(Err(_)) => {
            // Over the limit, or the connection broke mid-body.
            state.telemetry.error(Stage::Receiving);
            tracing::warn!(
                limit = MAX_UPDATE_BYTES,
                "Refused a webhook body that was too large or broken."
            );
            return StatusCode::PAYLOAD_TOO_LARGE;
        }
        Err(_) => {
            state.telemetry.error(Stage::Receiving);
            tracing::warn!("Refused a webhook body that arrived too slowly.");
            return StatusCode::REQUEST_TIMEOUT;
        }
    };
    state.telemetry.received(1);
    let update: Update = match serde_json::from_slice(&body) {
        Ok(update) => update,
        Err(error) => {
            state.telemetry.error(Stage::Processing);
            tracing::warn!(error = ?error.classify(), "Skipped a Telegram update that could not be read.");
            return StatusCode::OK;
        }
    };
    let ctx = InboundContext {
        bot_username: state.bot_username.as_deref(),
        allowed_users: &state.allowed_users,
    };
    let msg = match normalize(&update, &ctx) {
        Normalized::Message(msg) => msg,
        Normalized::Skipped(reason) => {
            tracing::debug!(
                update_id = update.update_id,
                reason = reason.as_str(),
                "Skipped a Telegram update."
            );
            return StatusCode::OK;
        }
    };
    match state.sink.offer(*msg) {
        Ok(()) => {
            tracing::debug!(update_id = update.update_id, "Admitted a Telegram message.");
            StatusCode::OK
        }
        // The sender is being told to try again: acknowledge, or they would hear it twice.
        Err(AdmitError::QueueFull) => StatusCode::OK,
        // Shutting down, or too overloaded even to tell the sender: Telegram keeps the
        // update and delivers it again later.
        Err(AdmitError::Closed | AdmitError::Overloaded) => StatusCode::SERVICE_UNAVAILABLE,
    }
}

/// Equality whose running time does not depend on where the inputs differ.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_comparison() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"abcd"));
        assert!(!constant_time_eq(b"", b"a"));
    }
}
