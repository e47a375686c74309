//! Long polling: `deleteWebhook`, then `getUpdates` in a loop.
//!
//! Acknowledgement: Telegram confirms every update below the `offset` of the next
//! `getUpdates`. The offset advances past an update only once it is settled: admitted into
//! the inbound queue, or skipped on purpose (not a message, not allowed, unreadable).
//!
//! Backpressure: admission waits for queue space ([`InboundSink::reserve_wait`]), so a busy
//! daemon simply polls later and Telegram keeps the rest. When admission is *closed* (the
//! daemon is shutting down) the update is left unacknowledged, polling stops, and the next
//! start receives it again.
//!
//! Connection state: connected once `deleteWebhook` succeeded, then after every successful
//! poll. Failures: every failed poll marks the channel disconnected and waits a jittered,
//! doubling delay (0.5 s up to 30 s; a 429's `retry_after` instead) before the next one. A
//! refused token ends the transport with an error. Every wait `select!`s on shutdown.

use std::time::Duration;

use im_bridge_channel::{
    AdmitError, ChannelError, ChannelExit, InboundMessage, InboundSink, Stage,
};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::{Backoff, Normalized};
use crate::Shared;
use crate::error::TelegramError;
use crate::model::Update;

/// What became of one update.
enum Settled {
    /// Admitted or skipped: acknowledge it.
    Done,
    /// Admission is closed: leave it (and everything after it) unacknowledged.
    Closed,
    /// Shutdown was requested while waiting for queue space.
    Stopped,
}

/// Polls until `shutdown`, admitting messages through `sink`.
pub(crate) async fn run(
    shared: &Shared,
    sink: &InboundSink,
    shutdown: &CancellationToken,
    timeout: Duration,
) -> Result<ChannelExit, ChannelError> {
    let mut backoff = Backoff::default();
    loop {
        let result = tokio::select! {
            () = shutdown.cancelled() => return Ok(ChannelExit::Stopped),
            r = shared.api.delete_webhook() => r,
        };
        match result {
            Ok(()) => {
                // The first long poll may take its whole timeout to answer; the API is
                // reachable and the token valid already.
                shared.telemetry.set_connected(true);
                break;
            }
            Err(error) => {
                if !wait_after(shared, &error, &mut backoff, shutdown, "deleteWebhook").await? {
                    return Ok(ChannelExit::Stopped);
                }
            }
        }
    }
    backoff.reset();
    tracing::info!(
        timeout_s = timeout.as_secs(),
        "Polling Telegram for updates."
    );

    let mut offset: Option<i64> = None;
    loop {
        let result = tokio::select! {
            () = shutdown.cancelled() => return Ok(ChannelExit::Stopped),
            r = shared.api.get_updates(offset, timeout) => r,
        };
        let updates = match result {
            Ok(updates) => updates,
            Err(error) => {
                if !wait_after(shared, &error, &mut backoff, shutdown, "getUpdates").await? {
                    return Ok(ChannelExit::Stopped);
                }
                continue;
            }
        };
        if !shared.telemetry.set_connected(true) {
            tracing::info!("Reconnected to Telegram.");
        }
        backoff.reset();
        shared.telemetry.received(updates.len() as u64);
        for raw in updates {
            let Some(update_id) = raw.get("update_id").and_then(Value::as_i64) else {
                // Without an id it cannot be acknowledged on its own; the next one's id
                // acknowledges it anyway.
                shared.telemetry.error(Stage::Processing);
                tracing::warn!("Skipped a Telegram update without an update_id.");
                continue;
            };
            match settle(shared, sink, shutdown, update_id, raw).await {
                Settled::Done => {
                    offset = Some(offset.map_or(update_id + 1, |o| o.max(update_id + 1)));
                }
                Settled::Stopped => return Ok(ChannelExit::Stopped),
                Settled::Closed => {
                    tracing::info!(
                        update_id,
                        "Inbound admission is closed; leaving the remaining Telegram updates unacknowledged."
                    );
                    shared.telemetry.set_connected(false);
                    shutdown.cancelled().await;
                    return Ok(ChannelExit::Stopped);
                }
            }
        }
    }
}

/// Logs a failed call and waits before the next attempt. `Ok(false)` = shutdown came
/// first; `Err` = the failure is permanent (a refused token).
async fn wait_after(
    shared: &Shared,
    error: &TelegramError,
    backoff: &mut Backoff,
    shutdown: &CancellationToken,
    method: &'static str,
) -> Result<bool, ChannelError> {
    shared.telemetry.set_connected(false);
    shared.telemetry.error(Stage::Receiving);
    if matches!(error, TelegramError::Unauthorized) {
        tracing::error!(%error, method, "Telegram refused the bot token; the channel stops.");
        return Err(ChannelError::Rejected {
            reason: error.to_string(),
        });
    }
    let wait = match error {
        TelegramError::RetryAfter(wait) => *wait,
        _ => backoff.next_delay(),
    };
    if matches!(error, TelegramError::Conflict { .. }) {
        tracing::warn!(%error, method, retry_in_ms = wait.as_millis() as u64, "Another poller or a webhook is active for this bot; retrying.");
    } else {
        tracing::warn!(%error, method, retry_in_ms = wait.as_millis() as u64, "Calling Telegram failed; retrying.");
    }
    tokio::select! {
        () = shutdown.cancelled() => Ok(false),
        () = tokio::time::sleep(wait) => Ok(true),
    }
}

async fn settle(
    shared: &Shared,
    sink: &InboundSink,
    shutdown: &CancellationToken,
    update_id: i64,
    raw: Value,
) -> Settled {
    let update: Update = match serde_json::from_value(raw) {
        Ok(update) => update,
        Err(error) => {
            // serde's message names the field and type, never the text of the update.
            shared.telemetry.error(Stage::Processing);
            tracing::warn!(update_id, error = ?error.classify(), "Skipped a Telegram update that could not be read.");
            return Settled::Done;
        }
    };
    let msg = match shared.normalize(&update) {
        Normalized::Message(msg) => msg,
        Normalized::Skipped(reason) => {
            tracing::debug!(
                update_id,
                reason = reason.as_str(),
                "Skipped a Telegram update."
            );
            return Settled::Done;
        }
    };
    admit(sink, shutdown, update_id, *msg).await
}

async fn admit(
    sink: &InboundSink,
    shutdown: &CancellationToken,
    update_id: i64,
    msg: InboundMessage,
) -> Settled {
    let reservation = tokio::select! {
        () = shutdown.cancelled() => return Settled::Stopped,
        r = sink.reserve_wait() => r,
    };
    match reservation.and_then(|slot| slot.commit(msg)) {
        Ok(()) => {
            tracing::debug!(update_id, "Admitted a Telegram message.");
            Settled::Done
        }
        Err(AdmitError::Closed | AdmitError::QueueFull | AdmitError::Overloaded) => Settled::Closed,
    }
}
