//! Long polling: `deleteWebhook`, then `getUpdates` in a loop.
//!
//! Acknowledgement: Telegram confirms every update below the `offset` of the next
//! `getUpdates`. The offset advances past an update only once it is settled: admitted into
//! the inbound queue, or skipped on purpose (not a message, not allowed, unreadable).
//!
//! Backpressure: admission waits for queue space ([`InboundSink::send_waiting`]), so a busy
//! daemon simply polls later and Telegram keeps the rest. When admission is *closed* (the
//! daemon is shutting down) the update is left unacknowledged, polling stops, and the next
//! start receives it again.
//!
//! Connection state: connected once `deleteWebhook` succeeded, then after every successful
//! poll. Failures go through the transports' one retry loop ([`until_ok`]): disconnected,
//! a jittered doubling delay or Telegram's `retry_after`, and a refused token ends the
//! transport with an error.

use std::time::Duration;

use im_bridge_channel::{ChannelExit, ChannelResult, InboundSink, Stage};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::Intake;
use super::retry::until_ok;

/// Polls until `shutdown`, admitting messages through `sink`.
pub(crate) async fn run(
    intake: &Intake,
    sink: &InboundSink,
    shutdown: &CancellationToken,
    timeout: Duration,
) -> ChannelResult<ChannelExit> {
    let deleted = until_ok(intake, shutdown, "deleteWebhook", || {
        intake.api.delete_webhook()
    });
    if deleted.await?.is_none() {
        return Ok(ChannelExit::Stopped);
    }
    // The first long poll may take its whole timeout to answer; the API is reachable and
    // the token valid already.
    intake.telemetry.set_connected(true);
    tracing::info!(
        timeout_s = timeout.as_secs(),
        "Polling Telegram for updates."
    );

    let mut offset: Option<i64> = None;
    loop {
        let polled = until_ok(intake, shutdown, "getUpdates", || {
            intake.api.get_updates(offset, timeout)
        });
        let Some(updates) = polled.await? else {
            return Ok(ChannelExit::Stopped);
        };
        if !intake.telemetry.set_connected(true) {
            tracing::info!("Reconnected to Telegram.");
        }
        intake.telemetry.received(updates.len() as u64);
        for raw in updates {
            let Some(update_id) = raw.get("update_id").and_then(Value::as_i64) else {
                // Without an id it cannot be acknowledged on its own; the next one's id
                // acknowledges it anyway.
                intake.telemetry.error(Stage::Processing);
                tracing::warn!("Skipped a Telegram update without an update_id.");
                continue;
            };
            let msg = intake
                .accept(update_id, serde_json::from_value(raw))
                .map(|m| *m);
            if !sink.send_polled(msg, &intake.telemetry, shutdown).await {
                return Ok(ChannelExit::Stopped);
            }
            tracing::debug!(update_id, "Settled a Telegram update.");
            let next = update_id.saturating_add(1);
            offset = Some(offset.map_or(next, |o| o.max(next)));
        }
    }
}
