//! Webhook mode: Telegram posts each update to a route on the daemon's shared webhook
//! host ([`WebhookHost`](im_bridge_channel::WebhookHost)), which owns the listener and the
//! request bounds (body cap, body timeout, in-flight cap, refusal counting and logging).
//!
//! - The route is `POST <path of webhook.public_url>` on `webhook.listen`, registered when
//!   the channel is built; while the transport is not running the host answers 503 and
//!   Telegram redelivers later.
//! - Every request must carry `X-Telegram-Bot-Api-Secret-Token` equal to
//!   `webhook.secret_token` (compared in constant time) before its body is even read;
//!   anything else gets 401 at once (the host counts and logs refusals, rate-limited).
//! - `setWebhook` (url = `public_url`, the secret, `allowed_updates: [message]`) is called
//!   once the handler is installed, retried through the transports' one retry loop; the
//!   channel reports connected from then on. The webhook is left in place at shutdown so
//!   Telegram queues updates for the next start (or another replica behind the same URL).
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

use im_bridge_channel::digest::constant_time_eq;
use std::sync::Arc;

use async_trait::async_trait;
use im_bridge_channel::webhook::{HeaderMap, StatusCode};
use im_bridge_channel::{
    AdmitError, ChannelExit, ChannelResult, InboundSink, WebhookHandler, WebhookRequest,
    WebhookResponse, WebhookRoute,
};
use tokio_util::sync::CancellationToken;

use super::Intake;
use super::retry::until_ok;
use crate::config::WebhookSettings;
use crate::model::Update;

/// The header Telegram echoes the secret token in.
pub const SECRET_HEADER: &str = "x-telegram-bot-api-secret-token";

/// The route's handler while the transport runs.
struct Hook {
    intake: Arc<Intake>,
    sink: InboundSink,
}

#[async_trait]
impl WebhookHandler for Hook {
    fn authorize(&self, headers: &HeaderMap) -> bool {
        let secret = match &self.intake.webhook_secret {
            Some(secret) => secret.expose().as_bytes(),
            None => return false,
        };
        headers
            .get(SECRET_HEADER)
            .is_some_and(|given| constant_time_eq(given.as_bytes(), secret))
    }

    async fn handle(&self, request: WebhookRequest) -> WebhookResponse {
        self.intake.telemetry.received(1);
        let update = serde_json::from_slice::<Update>(&request.body);
        let update_id = update.as_ref().map_or(0, |u| u.update_id);
        let Some(msg) = self.intake.accept(update_id, update) else {
            return WebhookResponse::status(StatusCode::OK);
        };
        let status = match self.sink.offer(*msg) {
            Ok(()) => {
                tracing::debug!(update_id, "Admitted a Telegram message.");
                StatusCode::OK
            }
            // The sender is being told to try again: acknowledge, or they would hear it twice.
            Err(AdmitError::QueueFull) => StatusCode::OK,
            // Shutting down, or too overloaded even to tell the sender: Telegram keeps the
            // update and delivers it again later.
            Err(AdmitError::Closed | AdmitError::Overloaded) => StatusCode::SERVICE_UNAVAILABLE,
        };
        WebhookResponse::status(status)
    }
}

/// Serves the route until `shutdown`: installs the handler, then registers the webhook.
pub(crate) async fn run(
    intake: &Arc<Intake>,
    hook: &WebhookSettings,
    route: &WebhookRoute,
    sink: InboundSink,
    shutdown: &CancellationToken,
) -> ChannelResult<ChannelExit> {
    let _serving = route.install(Arc::new(Hook {
        intake: intake.clone(),
        sink,
    }));
    // The path is not logged: operators sometimes make it secret.
    tracing::info!(addr = ?route.local_addr(), "Serving the Telegram webhook.");
    let registered = until_ok(intake, shutdown, "setWebhook", || {
        intake.api.set_webhook(&hook.public_url, &hook.secret_token)
    });
    if registered.await?.is_none() {
        return Ok(ChannelExit::Stopped);
    }
    intake.telemetry.set_connected(true);
    tracing::info!("Registered the Telegram webhook.");
    shutdown.cancelled().await;
    Ok(ChannelExit::Stopped)
}
