//! Long polling: `deleteWebhook`, then `getUpdates` in a loop.
//!
//! Acknowledgement: Telegram confirms every update below the `offset` of the next
//! `getUpdates`. The offset advances past an update only once it is settled: admitted into
//! the inbound queue, or skipped on purpose (not a message, not allowed, unreadable).
//!
//! Albums: an album's parts are gathered in the [`Backlog`] until [`ALBUM_WINDOW`](super::ALBUM_WINDOW) after
//! the latest one, then admitted as one message, the offset held on the album's first
//! part until then (so a crash meanwhile loses nothing: the next start gets every part
//! again). While an album gathers, the poller asks again every [`ALBUM_POLL_PACE`] from
//! that offset, for the parts still to come, since a long poll would return at once with
//! the updates already held.
//!
//! Backpressure: admission waits for queue space ([`InboundSink::send_waiting`]), so a busy
//! daemon simply polls later and Telegram keeps the rest. When admission is *closed* (the
//! daemon is shutting down) the update is left unacknowledged, polling stops, and the next
//! start receives it again.
//!
//! Connection state: connected once `deleteWebhook` succeeded, then after every successful
//! poll. Failures go through the transports' one retry loop ([`until_ok`]): disconnected,
//! a jittered doubling delay or Telegram's `retry_after`; a refusal (a 4xx but 429 and
//! 409: a wrong token, a bad request) of `deleteWebhook` or of a poll ends the transport
//! with an error, and the restart polls afresh.
//!
//! Child: `backlog` — the updates received and not yet acknowledged.

mod backlog;

use std::time::Duration;

use im_bridge_channel::{ChannelExit, ChannelResult, InboundSink, Stage};
use serde_json::Value;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use self::backlog::Backlog;
use super::Intake;
use super::retry::until_ok;

/// How often the poller asks again while an album gathers.
const ALBUM_POLL_PACE: Duration = Duration::from_millis(250);

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

    let mut backlog = Backlog::default();
    loop {
        if !settle(intake, sink, shutdown, &mut backlog).await {
            return Ok(ChannelExit::Stopped);
        }
        // A long poll, or a quick one while an album gathers at the front.
        let wait = match backlog.gathering_until() {
            Some(due) => {
                let next = due.min(Instant::now() + ALBUM_POLL_PACE);
                tokio::select! {
                    () = shutdown.cancelled() => return Ok(ChannelExit::Stopped),
                    () = tokio::time::sleep_until(next) => {}
                }
                Duration::ZERO
            }
            None => timeout,
        };
        let offset = backlog.offset();
        let polled = until_ok(intake, shutdown, "getUpdates", || {
            intake.api.get_updates(offset, wait)
        });
        let Some(updates) = polled.await? else {
            return Ok(ChannelExit::Stopped);
        };
        if !intake.telemetry.set_connected(true) {
            tracing::info!("Reconnected to Telegram.");
        }
        take_in(intake, &mut backlog, updates);
    }
}

/// Admits what the front of the backlog settles, in order; `false` when shutdown (or
/// closed admission) stopped it, the rest left unacknowledged for the next start.
async fn settle(
    intake: &Intake,
    sink: &InboundSink,
    shutdown: &CancellationToken,
    backlog: &mut Backlog,
) -> bool {
    while let Some(settled) = backlog.pop_ready(Instant::now()) {
        if !sink
            .send_polled(settled.msg, &intake.telemetry, shutdown)
            .await
        {
            return false;
        }
        tracing::debug!(update_id = settled.update_id, "Settled a Telegram update.");
    }
    true
}

/// Takes a poll's updates into the backlog, leaving out those it holds already.
fn take_in(intake: &Intake, backlog: &mut Backlog, updates: Vec<Value>) {
    let now = Instant::now();
    for raw in updates {
        let Some(update_id) = raw.get("update_id").and_then(Value::as_i64) else {
            // Without an id it cannot be acknowledged on its own; the next one's id
            // acknowledges it anyway.
            intake.telemetry.received(1);
            intake.telemetry.error(Stage::Processing);
            tracing::warn!("Skipped a Telegram update without an update_id.");
            continue;
        };
        if backlog.seen(update_id) {
            continue;
        }
        intake.telemetry.received(1);
        let accepted = intake.accept(update_id, serde_json::from_value(raw));
        if accepted.as_ref().is_some_and(|a| a.album.is_some()) {
            tracing::debug!(update_id, "Holding a part of a Telegram album.");
        }
        backlog.push(update_id, accepted, now, |album, part| {
            intake.join(album, part);
        });
    }
}
