//! The long poll: `getupdates` in a loop from the persisted cursor.
//!
//! - **Cursor.** iLink's `get_updates_buf` is opaque; each answer gives the one after its
//!   messages. It is read from the channel's state at start ([`CURSOR_KEY`]) and written
//!   back once every message of a batch was admitted into the daemon's queue (or skipped
//!   on purpose), so a restart neither loses a message (a batch not yet admitted is asked
//!   for again) nor replays one (a batch admitted is behind the stored cursor; a batch
//!   admitted in part comes again and the daemon's dedupe drops what it already took, by
//!   the message id).
//! - **A batch too large.** An answer over [`MAX_POLL_ANSWER`] cannot be kept whole, and
//!   iLink would answer the same batch to every poll from the same cursor, so refusing it
//!   would stall the poll for good. It is read as a stream (`api::batch`): its ordinary
//!   messages are admitted as any batch's, and the cursor after it stored once they are.
//!   A message over the per-message bound (or past the bound on what one batch keeps, or
//!   unreadable) is lost, as the cursor cannot stop part-way through a batch: each is
//!   counted (`receiving`) and the batch logged with counts and sizes only. No reply tells
//!   its sender: nothing of it is read, not even who sent it. One whose cursor cannot be
//!   read fails as any other poll does.
//! - **Backpressure.** Admission waits for queue space ([`InboundSink::send_waiting`]);
//!   when admission is closed (the daemon is stopping) the rest of the batch is left and
//!   the cursor not moved.
//! - **Holds.** A poll is held `polling_timeout`, or as long as iLink's
//!   `longpolling_timeout_ms` says (`respect_server_longpoll_timeout`); the client waits
//!   that and [`POLL_SLACK`](crate::config::POLL_SLACK) more. A poll still unanswered then
//!   is an empty batch, as the plugin takes its own timeout: no failure, no backoff, the
//!   cursor unmoved, and the next poll asks again at once. An answer that began in time
//!   but did not arrive whole within [`POLL_BODY_WAIT`](crate::config::POLL_BODY_WAIT)
//!   more (a large batch over a slow link) is a failure, counted and retried after a
//!   backoff: the same batch comes to every poll from the same cursor, so passing it for
//!   an empty one would stall the channel without a word.
//! - **Failures.** A failed poll marks the channel disconnected, counts a `receiving`
//!   error and waits `polling_retry_delay`, doubled after each failure in a row up to
//!   [`MAX_RETRY_DELAY`], with jitter (the kit's `Backoff`). The cursor is kept through
//!   every refusal (`ret -1`, `-2`, a server incident), as the plugin and DeerFlow keep
//!   it: what iLink does with an empty cursor is unknown (a lost gap or a replay), so
//!   only a backoff answers a refusal. An ended session (`-14`) drops the cursor with the
//!   session it belonged to (DeerFlow's rule) and goes to the login: a QR login again, or
//!   the transport ends with the error.

use std::time::Duration;

use im_bridge_channel::backoff::Backoff;
use im_bridge_channel::{ChannelError, ChannelExit, ChannelResult, InboundSink, Stage};
use tokio_util::sync::CancellationToken;

use super::Intake;
use crate::NAME;
use crate::api::{MAX_POLL_ANSWER, Oversized, Polled};
use crate::error::ApiError;

/// The state key of the cursor (a plain value).
pub const CURSOR_KEY: &str = "get_updates_buf";
/// The longest wait between two failed polls.
pub const MAX_RETRY_DELAY: Duration = Duration::from_secs(60);
/// The longest hold iLink may ask for (a bound on `longpolling_timeout_ms`).
pub const MAX_HOLD: Duration = Duration::from_secs(300);

/// Polls until `shutdown`, admitting messages through `sink`.
pub(crate) async fn run(
    intake: &Intake,
    sink: &InboundSink,
    shutdown: &CancellationToken,
) -> ChannelResult<ChannelExit> {
    let settings = intake.api.settings();
    let jitter = settings.retry_delay / 2;
    let mut poll = Poll {
        cursor: load_cursor(intake).await,
        hold: settings.polling_timeout,
        backoff: Backoff::new(settings.retry_delay, MAX_RETRY_DELAY, jitter),
    };
    loop {
        if !logged_in(intake, shutdown).await? {
            return Ok(ChannelExit::Stopped);
        }
        let polled = tokio::select! {
            () = shutdown.cancelled() => return Ok(ChannelExit::Stopped),
            r = intake.api.get_updates(&poll.cursor, poll.hold) => r,
        };
        let error = match polled {
            Ok(Polled { updates, oversized }) => {
                poll.answered(intake, updates.longpolling_timeout_ms);
                if let Some(oversized) = oversized {
                    report_oversized(intake, oversized);
                }
                let msgs = updates.msgs.unwrap_or_default();
                if let Some(exit) = admit(intake, sink, msgs, shutdown).await {
                    return Ok(exit);
                }
                poll.advance(intake, updates.get_updates_buf).await;
                continue;
            }
            Err(error) if error.is_held() => {
                tracing::debug!(
                    channel = NAME,
                    hold_ms = u64::try_from(poll.hold.as_millis()).unwrap_or(u64::MAX),
                    "A WeChat poll outlasted the client's wait; polling again."
                );
                poll.answered(intake, None);
                continue;
            }
            Err(error) => error,
        };
        intake.telemetry.set_connected(false);
        intake.telemetry.error(Stage::Receiving);
        if let ApiError::SessionExpired { op } = error {
            poll.forget(intake).await;
            if intake.login.expired(op).await {
                continue;
            }
            return Err(ChannelError::from(error));
        }
        let wait = poll.backoff.next_wait();
        tracing::warn!(
            channel = NAME,
            %error,
            failures = poll.backoff.failures(),
            retry_in_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
            "Polling WeChat failed; retrying."
        );
        tokio::select! {
            () = shutdown.cancelled() => return Ok(ChannelExit::Stopped),
            () = tokio::time::sleep(wait) => {}
        }
    }
}

/// Whether the channel has a bot token to poll with (a QR login gets one when it may);
/// `false` at shutdown, an error when there is none and no QR login.
async fn logged_in(intake: &Intake, shutdown: &CancellationToken) -> ChannelResult<bool> {
    intake.login.ensure(shutdown).await.map_err(|error| {
        intake.telemetry.error(Stage::Receiving);
        tracing::error!(channel = NAME, %error, "The WeChat channel has no bot token: set channels.wechat.bot_token or qrcode_login_enabled: true.");
        error.into()
    })
}

/// Offers each message of a batch to the daemon's queue, waiting for space; the exit when
/// the daemon stops taking them (the rest of the batch is left for the next start).
async fn admit(
    intake: &Intake,
    sink: &InboundSink,
    msgs: Vec<serde_json::Value>,
    shutdown: &CancellationToken,
) -> Option<ChannelExit> {
    intake.telemetry.received(msgs.len() as u64);
    for raw in msgs {
        if !sink
            .send_polled(intake.accept(raw), &intake.telemetry, shutdown)
            .await
        {
            return Some(ChannelExit::Stopped);
        }
    }
    None
}

/// Logs a batch over the size bound that was read as a stream (counts and sizes only), and
/// counts each message skipped in it as a `receiving` error.
fn report_oversized(intake: &Intake, oversized: Oversized) {
    let Oversized {
        bytes,
        kept,
        skipped,
        skipped_bytes,
    } = oversized;
    if skipped == 0 {
        tracing::warn!(
            channel = NAME,
            bytes,
            limit = MAX_POLL_ANSWER,
            kept,
            "Read a WeChat batch over the size bound message by message; none was skipped."
        );
        return;
    }
    for _ in 0..skipped {
        intake.telemetry.error(Stage::Receiving);
    }
    tracing::error!(
        channel = NAME,
        bytes,
        limit = MAX_POLL_ANSWER,
        kept,
        skipped,
        skipped_bytes,
        "Skipped messages of a WeChat batch over the size bound: they are lost."
    );
}

/// Where the poll stands: the cursor, the hold asked for, the wait after failures.
struct Poll {
    cursor: String,
    hold: Duration,
    backoff: Backoff,
}

impl Poll {
    /// A poll was answered: the failures are over, the channel is connected, and the hold
    /// is what iLink asked for (when it may ask).
    fn answered(&mut self, intake: &Intake, longpolling_timeout_ms: Option<i64>) {
        self.backoff.reset();
        if !intake.telemetry.set_connected(true) {
            tracing::info!(
                channel = NAME,
                hold_s = self.hold.as_secs(),
                "Polling WeChat (iLink) for messages."
            );
        }
        if intake.api.settings().respect_server_longpoll_timeout
            && let Some(ms) = longpolling_timeout_ms.filter(|ms| *ms > 0)
        {
            self.hold = Duration::from_millis(ms.unsigned_abs()).min(MAX_HOLD);
        }
    }

    /// The batch was admitted: the cursor after it, stored.
    async fn advance(&mut self, intake: &Intake, next: Option<String>) {
        if let Some(next) = next.filter(|b| !b.is_empty() && *b != self.cursor) {
            self.cursor = next;
            store_cursor(intake, &self.cursor).await;
        }
    }

    /// The session ended: its cursor is dropped, here and in the store (DeerFlow clears it
    /// on `-14`; the next login polls from iLink's own position, and the dedupe drops a
    /// message seen again).
    async fn forget(&mut self, intake: &Intake) {
        if self.cursor.is_empty() {
            return;
        }
        self.cursor.clear();
        if let Err(error) = intake.state.delete(CURSOR_KEY).await {
            tracing::warn!(channel = NAME, %error, "Deleting the WeChat cursor failed.");
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
