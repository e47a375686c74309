//! Webhook mode: Telegram posts each update to our HTTP server.
//!
//! - The server binds `webhook.listen` and serves `POST <path of webhook.public_url>`.
//! - Every request must carry `X-Telegram-Bot-Api-Secret-Token` equal to
//!   `webhook.secret_token` (compared in constant time); anything else gets 401 and is
//!   never parsed.
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
//!   Telegram redelivers it after the restart.
//!
//! The request body is bounded by axum's default limit (2 MB); updates are far smaller.

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use im_bridge_channel::{
    AdmitError, AllowedUsers, ChannelError, ChannelExit, InboundSink, Secret, Stage, Telemetry,
};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::{Backoff, InboundContext, Normalized, normalize};
use crate::Shared;
use crate::config::WebhookSettings;
use crate::error::TelegramError;
use crate::model::Update;

/// The header Telegram echoes the secret token in.
pub const SECRET_HEADER: &str = "x-telegram-bot-api-secret-token";

/// What each request handler needs.
struct HookState {
    sink: InboundSink,
    secret: Secret,
    bot_username: Option<String>,
    allowed_users: AllowedUsers,
    telemetry: Telemetry,
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
    });
    let app = Router::new()
        .route(&hook.path, post(receive))
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
    loop {
        tokio::select! {
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

async fn receive(
    State(state): State<Arc<HookState>>,
    headers: HeaderMap,
    body: Bytes,
) -> StatusCode {
    let authorized = headers
        .get(SECRET_HEADER)
        .is_some_and(|given| constant_time_eq(given.as_bytes(), state.secret.expose().as_bytes()));
    if !authorized {
        state.telemetry.error(Stage::Receiving);
        tracing::warn!("Refused a webhook request without the right secret token.");
        return StatusCode::UNAUTHORIZED;
    }
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
        Err(AdmitError::QueueFull) => StatusCode::OK,
        Err(AdmitError::Closed) => StatusCode::SERVICE_UNAVAILABLE,
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
