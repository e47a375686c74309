//! The one retry loop of the transports: every Bot API call they make (`getMe`,
//! `deleteWebhook`, `getUpdates`, `setWebhook`) goes through [`until_ok`].
//!
//! A failure marks the channel disconnected, counts a `receiving` error and waits before
//! the next attempt: Telegram's `retry_after` when it sent one (a 429), otherwise a
//! jittered, doubling [`Backoff`]. A 429, a 5xx, a 409 (another poller or a webhook, which
//! may go away) and a network failure are retried. A refusal
//! ([`TelegramError::is_refusal`]: 401, or another 4xx but 429 and 409) is permanent: the
//! loop ends with an error naming the method and Telegram's reason, and the daemon's
//! supervisor decides what happens next (it restarts the transport after its own, longer
//! backoff). None of these calls changes between attempts in a way a refusal could pass
//! on: a 401 or 404 on the bot's path is a wrong token; "bad webhook: Webhook can be set up
//! only on ports 80, 88, 443 or 8443" fails the same way forever; and a `getUpdates` is
//! built from the configuration and Telegram's own update ids, so a 400 there repeats too,
//! while the restart polls afresh, without the offset. Every wait `select!`s on shutdown.

use std::future::Future;
use std::time::Duration;

use im_bridge_channel::{ChannelError, Stage};
use tokio_util::sync::CancellationToken;

use super::Intake;
use crate::error::TelegramError;

/// Calls `call` until it succeeds. `Ok(None)` = shutdown came first; `Err` = Telegram
/// refused the bot token or the call itself. `method` names the call in logs.
pub(crate) async fn until_ok<T, F, Fut>(
    intake: &Intake,
    shutdown: &CancellationToken,
    method: &'static str,
    mut call: F,
) -> Result<Option<T>, ChannelError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, TelegramError>>,
{
    let mut backoff = Backoff::default();
    loop {
        let result = tokio::select! {
            () = shutdown.cancelled() => return Ok(None),
            r = call() => r,
        };
        let error = match result {
            Ok(value) => return Ok(Some(value)),
            Err(error) => error,
        };
        intake.telemetry.set_connected(false);
        intake.telemetry.error(Stage::Receiving);
        if matches!(error, TelegramError::Unauthorized) {
            tracing::error!(%error, method, "Telegram refused the bot token; the channel stops.");
            return Err(error.into());
        }
        if error.is_refusal() {
            // Telegram's description names the problem, never the token or the URL.
            tracing::error!(%error, method, "Telegram refused a call the channel cannot run without; the channel stops.");
            return Err(error.into());
        }
        let wait = error.retry_after().unwrap_or_else(|| backoff.next_delay());
        let retry_in_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX);
        if matches!(error, TelegramError::Conflict { .. }) {
            tracing::warn!(%error, method, retry_in_ms, "Another poller or a webhook is active for this bot; retrying.");
        } else {
            tracing::warn!(%error, method, retry_in_ms, "Calling Telegram failed; retrying.");
        }
        tokio::select! {
            () = shutdown.cancelled() => return Ok(None),
            () = tokio::time::sleep(wait) => {}
        }
    }
}

/// Reconnect delays: doubling from [`Backoff::MIN`] to [`Backoff::MAX`], each drawn
/// uniformly from its upper half so replicas do not retry in lockstep.
#[derive(Debug)]
pub(crate) struct Backoff {
    next: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self { next: Self::MIN }
    }
}

impl Backoff {
    /// First delay.
    pub(crate) const MIN: Duration = Duration::from_millis(500);
    /// Longest delay.
    pub(crate) const MAX: Duration = Duration::from_secs(30);

    /// The next delay to wait.
    pub(crate) fn next_delay(&mut self) -> Duration {
        let base = self.next;
        self.next = (self.next * 2).min(Self::MAX);
        base.mul_f64(rand::random_range(0.5..=1.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_within_bounds() {
        let mut b = Backoff::default();
        let first = b.next_delay();
        assert!(first >= Backoff::MIN / 2 && first <= Backoff::MIN);
        for _ in 0..20 {
            assert!(b.next_delay() <= Backoff::MAX);
        }
        assert!(b.next_delay() >= Backoff::MAX / 2);
    }
}
