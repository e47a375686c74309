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
//!   once the handler is installed, retried through the transports' one retry loop
//!   (except a refusal, e.g. a URL on a port Telegram does not deliver to: the transport
//!   stops with an error naming it); the channel reports connected from then on. The webhook is left in place at shutdown so
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
//!
//! Albums are the one exception to "answered once admitted". Telegram's Bot API server
//! sends a chat's updates one at a time: the next only once the previous was answered
//! 2xx (tdlib/telegram-bot-api, `WebhookActor`: one queue per chat, its next update sent
//! after `on_update_ok`). An album's second part therefore never arrives while its first
//! is held unanswered, and gathering the parts means answering each 200 as it is held
//! (in [`Albums`], bounded) and admitting the album [`ALBUM_WINDOW`] after its latest
//! part. The cost, stated precisely: a crash (not a clean stop) within that window loses
//! the album, since Telegram holds none of its parts any more; so does a stop that finds
//! admission already closed (logged). A clean stop offers every open album at once.
//! Polling keeps the full guarantee (see `poll`).

use im_bridge_channel::digest::constant_time_eq;
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use im_bridge_channel::webhook::{HeaderMap, StatusCode};
use im_bridge_channel::{
    AdmitError, ChannelExit, ChannelResult, InboundMessage, InboundSink, WebhookHandler,
    WebhookRequest, WebhookResponse, WebhookRoute,
};
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::album::Albums;
use super::retry::until_ok;
use super::{ALBUM_WINDOW, Intake};
use crate::config::WebhookSettings;
use crate::model::Update;

/// The header Telegram echoes the secret token in.
pub const SECRET_HEADER: &str = "x-telegram-bot-api-secret-token";

/// The route's handler while the transport runs.
struct Hook {
    intake: Arc<Intake>,
    sink: InboundSink,
    /// Albums being gathered (bounded: see `album`).
    albums: Mutex<Albums>,
    /// Wakes the gathering loop when an album opened or grew.
    gathered: Notify,
}

impl Hook {
    fn albums(&self) -> MutexGuard<'_, Albums> {
        self.albums
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Admits `msg` now: the status Telegram is to be answered with.
    fn admit(&self, update_id: i64, msg: InboundMessage) -> StatusCode {
        match self.sink.offer(msg) {
            Ok(()) => {
                tracing::debug!(update_id, "Admitted a Telegram message.");
                StatusCode::OK
            }
            // The sender is being told to try again: acknowledge, or they would hear it twice.
            Err(AdmitError::QueueFull) => StatusCode::OK,
            // Shutting down, or too overloaded even to tell the sender: Telegram keeps the
            // update and delivers it again later.
            Err(AdmitError::Closed | AdmitError::Overloaded) => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    /// Admits a gathered album, whose parts Telegram was told are taken.
    fn admit_album(&self, msg: InboundMessage) {
        let parts = msg.files.len();
        match self.sink.offer(msg) {
            Ok(()) => tracing::debug!(parts, "Admitted a Telegram album."),
            Err(AdmitError::QueueFull) => {}
            Err(error @ (AdmitError::Closed | AdmitError::Overloaded)) => {
                tracing::warn!(%error, parts, "Lost a Telegram album gathered from the webhook: it was acknowledged part by part and cannot be admitted.");
            }
        }
    }

    /// Admits each album once complete, until `stop`; then every open album at once.
    async fn gather(&self, stop: &CancellationToken) {
        loop {
            let changed = self.gathered.notified();
            let now = Instant::now();
            let (due, next) = {
                let mut albums = self.albums();
                (albums.take_due(now), albums.next_due())
            };
            for msg in due {
                self.admit_album(msg);
            }
            let wake = next.unwrap_or_else(|| now + ALBUM_WINDOW);
            tokio::select! {
                () = stop.cancelled() => break,
                () = changed => {}
                () = tokio::time::sleep_until(wake), if next.is_some() => {}
            }
        }
        let open = self.albums().drain();
        for msg in open {
            self.admit_album(msg);
        }
    }
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
        let Some(accepted) = self.intake.accept(update_id, update) else {
            return WebhookResponse::status(StatusCode::OK);
        };
        let msg = match accepted.album {
            Some(key) => {
                let join = |album: &mut InboundMessage, part| self.intake.join(album, part);
                let unheld = self.albums().hold(key, accepted.msg, Instant::now(), join);
                let Some(msg) = unheld else {
                    self.gathered.notify_one();
                    tracing::debug!(update_id, "Holding a part of a Telegram album.");
                    return WebhookResponse::status(StatusCode::OK);
                };
                msg
            }
            None => accepted.msg,
        };
        WebhookResponse::status(self.admit(update_id, msg))
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
    let handler = Arc::new(Hook {
        intake: intake.clone(),
        sink,
        albums: Mutex::new(Albums::default()),
        gathered: Notify::new(),
    });
    let _serving = route.install(handler.clone());
    // The path is not logged: operators sometimes make it secret.
    tracing::info!(addr = ?route.local_addr(), "Serving the Telegram webhook.");
    // Updates may come before the registration below (the webhook stays set across
    // restarts), so albums are gathered from the start; a failed registration stops that.
    let stop = shutdown.child_token();
    let registering = async {
        let registered = register(intake, hook, shutdown).await;
        stop.cancel();
        registered
    };
    let (registered, ()) = tokio::join!(registering, handler.gather(&stop));
    registered?;
    Ok(ChannelExit::Stopped)
}

/// `setWebhook`, then serving until `shutdown`: `Ok(false)` when shutdown came before
/// the registration.
async fn register(
    intake: &Intake,
    hook: &WebhookSettings,
    shutdown: &CancellationToken,
) -> ChannelResult<bool> {
    let registered = until_ok(intake, shutdown, "setWebhook", || {
        intake.api.set_webhook(&hook.public_url, &hook.secret_token)
    });
    if registered.await?.is_none() {
        return Ok(false);
    }
    intake.telemetry.set_connected(true);
    tracing::info!("Registered the Telegram webhook.");
    shutdown.cancelled().await;
    Ok(true)
}
