//! The long poll: `getupdates` in a loop from the persisted cursor.
//!
//! - **Cursor.** iLink's `get_updates_buf` is opaque; each answer gives the one after its
//!   messages. It is read from the channel's state at start ([`CURSOR_KEY`]) and written
//!   back once every message of a batch was admitted into the daemon's queue (or skipped
//!   on purpose), so a restart neither loses a message (a batch not yet admitted is asked
//!   for again) nor replays one (a batch admitted is behind the stored cursor; a batch
//!   admitted in part comes again and the daemon's dedupe drops what it already took, by
//!   the message id).
//! - **Backpressure.** Admission waits for queue space ([`InboundSink::send_waiting`]);
//!   when admission is closed (the daemon is stopping) the rest of the batch is left and
//!   the cursor not moved.
//! - **Holds.** A poll is held `polling_timeout`, or as long as iLink's
//!   `longpolling_timeout_ms` says (`respect_server_longpoll_timeout`); the client waits
//!   that and [`POLL_SLACK`](crate::api::POLL_SLACK) more.
//! - **Failures.** A failed poll marks the channel disconnected, counts a `receiving`
//!   error and waits `polling_retry_delay`, doubled after each failure in a row up to
//!   [`MAX_RETRY_DELAY`], with jitter (the kit's `Backoff`). iLink refusing the stored
//!   cursor [`CURSOR_REFUSALS`] times in a row drops it (iLink then answers from its own
//!   position; the dedupe drops a message seen again). An ended session (`-14`) goes to the
//!   login: a QR login again, or the transport ends with the error.

use std::time::Duration;

use im_bridge_channel::backoff::Backoff;
use im_bridge_channel::{ChannelError, ChannelExit, ChannelResult, InboundSink, Stage, Waited};
use tokio_util::sync::CancellationToken;

use super::Intake;
use crate::NAME;
use crate::error::ApiError;

/// The state key of the cursor (a plain value).
pub const CURSOR_KEY: &str = "get_updates_buf";
/// The longest wait between two failed polls.
pub const MAX_RETRY_DELAY: Duration = Duration::from_secs(60);
/// The longest hold iLink may ask for (a bound on `longpolling_timeout_ms`).
pub const MAX_HOLD: Duration = Duration::from_secs(300);
/// Refusals of the stored cursor in a row after which it is dropped.
pub const CURSOR_REFUSALS: u32 = 3;

/// Polls until `shutdown`, admitting messages through `sink`.
pub(crate) async fn run(
    intake: &Intake,
    sink: &InboundSink,
    shutdown: &CancellationToken,
) -> ChannelResult<ChannelExit> {
    let settings = intake.api.settings();
    let mut cursor = load_cursor(intake).await;
    let mut hold = settings.polling_timeout;
    let jitter = settings.retry_delay / 2;
    let mut backoff = Backoff::new(settings.retry_delay, MAX_RETRY_DELAY, jitter);
    let mut refused = 0;
    loop {
        match intake.login.ensure(shutdown).await {
            Ok(true) => {}
            Ok(false) => return Ok(ChannelExit::Stopped),
            Err(error) => {
                intake.telemetry.error(Stage::Receiving);
                tracing::error!(channel = NAME, %error, "The WeChat channel has no bot token: set channels.wechat.bot_token or qrcode_login_enabled: true.");
                return Err(error.into());
            }
        }
        let polled = tokio::select! {
            () = shutdown.cancelled() => return Ok(ChannelExit::Stopped),
            r = intake.api.get_updates(&cursor, hold) => r,
        };
        let error = match polled {
            Ok(updates) => {
                backoff.reset();
                refused = 0;
                if !intake.telemetry.set_connected(true) {
                    tracing::info!(
                        channel = NAME,
                        hold_s = hold.as_secs(),
                        "Polling WeChat (iLink) for messages."
                    );
                }
                if settings.respect_server_longpoll_timeout
                    && let Some(ms) = updates.longpolling_timeout_ms.filter(|ms| *ms > 0)
                {
                    hold = Duration::from_millis(ms.unsigned_abs()).min(MAX_HOLD);
                }
                let msgs = updates.msgs.unwrap_or_default();
                intake.telemetry.received(msgs.len() as u64);
                for raw in msgs {
                    let waited = match intake.accept(raw) {
                        Some(msg) => sink.send_waiting(msg, shutdown).await,
                        None => Waited::Admitted,
                    };
                    match waited {
                        Waited::Admitted => {}
                        Waited::Stopped => return Ok(ChannelExit::Stopped),
                        Waited::Closed => {
                            tracing::info!(
                                channel = NAME,
                                "Inbound admission is closed; leaving the rest of the WeChat batch for the next start."
                            );
                            intake.telemetry.set_connected(false);
                            shutdown.cancelled().await;
                            return Ok(ChannelExit::Stopped);
                        }
                    }
                }
                if let Some(next) = updates
                    .get_updates_buf
                    .filter(|b| !b.is_empty() && *b != cursor)
                {
                    cursor = next;
                    store_cursor(intake, &cursor).await;
                }
                continue;
            }
            Err(error) => error,
        };
        intake.telemetry.set_connected(false);
        intake.telemetry.error(Stage::Receiving);
        if let ApiError::SessionExpired { op } = error {
            if intake.login.expired(op).await {
                continue;
            }
            return Err(ChannelError::from(error));
        }
        if matches!(error, ApiError::Api { .. }) && !cursor.is_empty() {
            refused += 1;
            if refused >= CURSOR_REFUSALS {
                tracing::warn!(
                    channel = NAME,
                    refusals = refused,
                    "iLink keeps refusing the stored WeChat cursor; polling from iLink's own position."
                );
                cursor.clear();
                refused = 0;
                if let Err(error) = intake.state.delete(CURSOR_KEY).await {
                    tracing::warn!(channel = NAME, %error, "Deleting the WeChat cursor failed.");
                }
            }
        }
        let wait = backoff.next_wait();
        tracing::warn!(
            channel = NAME,
            %error,
            failures = backoff.failures(),
            retry_in_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
            "Polling WeChat failed; retrying."
        );
        tokio::select! {
            () = shutdown.cancelled() => return Ok(ChannelExit::Stopped),
            () = tokio::time::sleep(wait) => {}
        }
    }
}

/// The stored cursor, or `""` (none yet, or unreadable: iLink starts from its position).
async fn load_cursor(intake: &Intake) -> String {
    match intake.state.get(CURSOR_KEY).await {
        Ok(Some(bytes)) => String::from_utf8(bytes).unwrap_or_default(),
        Ok(None) => String::new(),
        Err(error) => {
            tracing::warn!(channel = NAME, %error, "Reading the stored WeChat cursor failed; polling from iLink's position.");
            String::new()
        }
    }
}

/// Stores the cursor; a failure is logged (a restart then asks for a batch again, which
/// the dedupe drops).
async fn store_cursor(intake: &Intake, cursor: &str) {
    if let Err(error) = intake.state.put(CURSOR_KEY, cursor.as_bytes()).await {
        tracing::warn!(channel = NAME, %error, "Storing the WeChat cursor failed.");
    }
}
