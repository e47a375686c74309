//! Supervised transports: one channel's transport runs until shutdown, and a transport that
//! fails, panics or stops on its own is restarted after a jittered exponential backoff
//! while every other channel keeps serving (issue 12).
//!
//! Each attempt runs in a task of its own, so a panic ends that attempt
//! ([`JoinError::is_panic`]) and never the daemon. After an attempt:
//!
//! - `Ok(ChannelExit::InputEnded)` (the console's end of file) is passed up unchanged: the
//!   daemon then drains and exits;
//! - `Ok(ChannelExit::Stopped)` after shutdown was cancelled is the normal end;
//! - `Ok(ChannelExit::Stopped)` while shutdown is *not* cancelled is an unexpected stop, and
//!   like an `Err` or a panic it is logged, counted and restarted.
//!
//! Exclusive transports on a shared store go through [`lease::run_exclusive`] inside each
//! attempt, so a restarted one takes (or stands by for) its lease again. A panicking
//! exclusive transport does not release its lease: it expires within the lease TTL and
//! another replica may take over during the backoff.
//!
//! Where the daemon looks: [`TransportHealth`] (one entry per channel, for `/readyz`), the
//! counter [`names::TRANSPORT_RESTARTS`] and the gauge [`names::TRANSPORT_UP`].
//!
//! [`JoinError::is_panic`]: tokio::task::JoinError::is_panic

use std::sync::{Arc, Mutex};
use std::time::Duration;

use im_bridge_channel::{Channel, ChannelError, ChannelExit, InboundSink};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::AbortOnDropHandle;

use crate::lease::{self, Lease};
use crate::telemetry::names;

/// How a failed transport is restarted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SupervisorConfig {
    /// The backoff ceiling before the first restart (default [`FIRST_BACKOFF`]).
    pub first_backoff: Duration,
    /// The largest backoff ceiling (default [`MAX_BACKOFF`]).
    pub max_backoff: Duration,
    /// An attempt that ran at least this long before failing was healthy: the backoff starts
    /// over from `first_backoff` (default [`HEALTHY_AFTER`]).
    pub healthy_after: Duration,
}

/// The first restart waits 0.5–1 s: long enough that a transport failing at once does not
/// spin, short enough that a network blip costs about a second of inbound messages.
pub const FIRST_BACKOFF: Duration = Duration::from_secs(1);

/// The ceiling doubles up to 5 minutes (2.5–5 min waits): a platform that is down for hours
/// sees about one reconnection every few minutes per replica, not a stream of them, and
/// recovery is noticed within minutes.
pub const MAX_BACKOFF: Duration = Duration::from_secs(5 * 60);

/// A minute of serving means the cause of earlier failures is gone: a transport that fails
/// once a day restarts after about a second, not after the ceiling it reached a day ago.
pub const HEALTHY_AFTER: Duration = Duration::from_secs(60);

impl Default for SupervisorConfig {
    fn default() -> Self {
        Self {
            first_backoff: FIRST_BACKOFF,
            max_backoff: MAX_BACKOFF,
            healthy_after: HEALTHY_AFTER,
        }
    }
}

/// Why an attempt ended when it should not have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    /// The transport returned an error.
    Error,
    /// The transport panicked.
    Panic,
    /// The transport returned `Stopped` while shutdown was not requested.
    Stopped,
}

impl Failure {
    /// The label used in metrics and on `/readyz`: `error`, `panic` or `stopped`.
    pub fn as_str(self) -> &'static str {
        match self {
            Failure::Error => "error",
            Failure::Panic => "panic",
            Failure::Stopped => "stopped",
        }
    }
}

/// What one channel's transport is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransportState {
    /// An attempt is running (or about to start).
    Running,
    /// The last attempt ended unexpectedly; the next one starts after a backoff.
    Restarting {
        /// Consecutive failed attempts (reset after a healthy run).
        failures: u32,
        /// Why the last attempt ended.
        last: Failure,
    },
}

/// The transports' states, shared between the supervisors and `/readyz`. Bounded: one entry
/// per channel, fixed when it is built; a state reported for another name is ignored.
#[derive(Clone, Debug, Default)]
pub struct TransportHealth(Arc<Mutex<Vec<(&'static str, TransportState)>>>);

impl TransportHealth {
    /// One entry per channel name, each [`TransportState::Running`].
    pub fn new(channels: impl IntoIterator<Item = &'static str>) -> Self {
        let entries = channels
            .into_iter()
            .map(|name| (name, TransportState::Running))
            .collect();
        Self(Arc::new(Mutex::new(entries)))
    }

    pub(crate) fn set(&self, channel: &str, state: TransportState) {
        let mut entries = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(entry) = entries.iter_mut().find(|(name, _)| *name == channel) {
            entry.1 = state;
        }
    }

    /// The state of `channel`'s transport, if it is supervised.
    pub fn state(&self, channel: &str) -> Option<TransportState> {
        let entries = self.0.lock().unwrap_or_else(|p| p.into_inner());
        entries
            .iter()
            .find(|(name, _)| *name == channel)
            .map(|(_, state)| *state)
    }
}

/// Runs one channel's transport, restarting it until shutdown.
pub struct Supervisor {
    channel: Arc<dyn Channel>,
    lease: Option<Lease>,
    config: SupervisorConfig,
    health: TransportHealth,
}

impl Supervisor {
    /// A supervisor for `channel`; with `lease`, each attempt runs it under that lease.
    pub fn new(
        channel: Arc<dyn Channel>,
        lease: Option<Lease>,
        config: SupervisorConfig,
        health: TransportHealth,
    ) -> Self {
        Self {
            channel,
            lease,
            config,
            health,
        }
    }

    /// The supervised channel's name.
    pub fn name(&self) -> &'static str {
        self.channel.name()
    }

    /// Runs the transport until `shutdown` is cancelled ([`ChannelExit::Stopped`]) or its
    /// input ends ([`ChannelExit::InputEnded`]); every other end of an attempt is restarted.
    /// Each backoff wait ends at once on `shutdown`; a running attempt gets `shutdown` and
    /// stops on it like any transport.
    pub async fn run(self, sink: InboundSink, shutdown: CancellationToken) -> ChannelExit {
        let channel = self.name();
        for failure in [Failure::Error, Failure::Panic, Failure::Stopped] {
            metrics::counter!(names::TRANSPORT_RESTARTS, "channel" => channel, "reason" => failure.as_str())
                .increment(0);
        }
        let up = metrics::gauge!(names::TRANSPORT_UP, "channel" => channel);
        let mut backoff = Backoff::new(self.config);
        let mut attempt: u64 = 0;
        loop {
            attempt += 1;
            self.health.set(channel, TransportState::Running);
            up.set(1.0);
            let started = Instant::now();
            let outcome = self.attempt(sink.clone(), shutdown.clone()).await;
            up.set(0.0);
            let (failure, error) = match outcome {
                Outcome::Exited(Ok(ChannelExit::InputEnded)) => return ChannelExit::InputEnded,
                // Only the runtime shutting down cancels the attempt's task: nothing to restart.
                Outcome::Cancelled => return ChannelExit::Stopped,
                Outcome::Exited(Ok(ChannelExit::Stopped)) => (Failure::Stopped, None),
                Outcome::Exited(Err(error)) => (Failure::Error, Some(error)),
                Outcome::Panicked => (Failure::Panic, None),
            };
            if shutdown.is_cancelled() {
                // Asked to stop: however the attempt ended, it is not restarted.
                if let Some(error) = error {
                    tracing::warn!(channel, %error, "The channel's transport failed while stopping.");
                }
                return ChannelExit::Stopped;
            }
            if failure == Failure::Panic
                && let Some(lease) = &self.lease
            {
                // It may have panicked while standing by: it no longer is.
                lease.standby.set(channel, false);
            }
            let delay = backoff.failed(started.elapsed());
            // Counted before `/readyz` can show it: whoever saw the state finds the count.
            metrics::counter!(names::TRANSPORT_RESTARTS, "channel" => channel, "reason" => failure.as_str())
                .increment(1);
            let failures = backoff.failures;
            let state = TransportState::Restarting {
                failures,
                last: failure,
            };
            self.health.set(channel, state);
            log_restart(channel, failure, error.as_ref(), attempt, failures, delay);
            tokio::select! {
                () = shutdown.cancelled() => return ChannelExit::Stopped,
                () = tokio::time::sleep(delay) => {}
            }
        }
    }

    /// One attempt, in a task of its own so that a panic ends only the attempt. The task is
    /// aborted if this future is dropped, so no attempt outlives its supervisor.
    async fn attempt(&self, sink: InboundSink, shutdown: CancellationToken) -> Outcome {
        let channel = self.channel.clone();
        let lease = self.lease.clone();
        let task = tokio::spawn(async move {
            match lease {
                Some(lease) => lease::run_exclusive(channel, sink, shutdown, lease).await,
                None => channel.run(sink, shutdown).await,
            }
        });
        match AbortOnDropHandle::new(task).await {
            Ok(exit) => Outcome::Exited(exit),
            Err(error) if error.is_panic() => Outcome::Panicked,
            Err(_) => Outcome::Cancelled,
        }
    }
}

/// Logs a failed attempt: names and numbers only (an error's text is the adapter's
/// log-safe summary; a panic's message is left to the panic hook).
fn log_restart(
    channel: &'static str,
    failure: Failure,
    error: Option<&ChannelError>,
    attempt: u64,
    failures: u32,
    delay: Duration,
) {
    let retry_in_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX);
    match (failure, error) {
        (_, Some(error)) => tracing::error!(
            channel, %error, attempt, failures, retry_in_ms,
            "The channel's transport failed; restarting it."
        ),
        (Failure::Panic, None) => tracing::error!(
            channel,
            error = "panicked",
            attempt,
            failures,
            retry_in_ms,
            "The channel's transport panicked; restarting it."
        ),
        (_, None) => tracing::warn!(
            channel,
            error = "stopped",
            attempt,
            failures,
            retry_in_ms,
            "The channel's transport stopped on its own; restarting it."
        ),
    }
}

/// How one attempt ended.
enum Outcome {
    Exited(Result<ChannelExit, ChannelError>),
    Panicked,
    Cancelled,
}

/// Exponential backoff with equal jitter: the ceiling doubles from `first_backoff` to
/// `max_backoff`, and each wait is drawn from its upper half. Equal rather than full jitter
/// so that a transport failing at once never restarts in a tight loop (the wait is at least
/// half the ceiling), while replicas that failed together still spread their reconnections.
#[derive(Debug)]
struct Backoff {
    config: SupervisorConfig,
    /// Consecutive failed attempts.
    failures: u32,
}

impl Backoff {
    fn new(config: SupervisorConfig) -> Self {
        Self {
            config,
            failures: 0,
        }
    }

    /// Records a failed attempt that ran for `ran_for` and returns the wait before the next.
    fn failed(&mut self, ran_for: Duration) -> Duration {
        if ran_for >= self.config.healthy_after {
            self.failures = 0;
        }
        let ceiling = self.ceiling();
        self.failures = self.failures.saturating_add(1);
        equal_jitter(ceiling)
    }

    /// The ceiling for the next wait: `first_backoff · 2^failures`, at most `max_backoff`.
    fn ceiling(&self) -> Duration {
        self.config
            .first_backoff
            .saturating_mul(2u32.saturating_pow(self.failures))
            .min(self.config.max_backoff)
    }
}

/// A random wait in `[ceiling / 2, ceiling]`.
fn equal_jitter(ceiling: Duration) -> Duration {
    let half = ceiling / 2;
    let spread = u64::try_from((ceiling - half).as_nanos()).unwrap_or(u64::MAX);
    half + Duration::from_nanos(rand::random_range(0..=spread))
}

#[cfg(test)]
mod tests;
