//! Reconnecting a long connection (a socket the adapter holds open for events: Feishu's
//! long connection, DingTalk's stream, the QQ and Discord gateways) without a storm, and
//! visibly.
//!
//! A server that accepts each connection and drops it at once must not be met with
//! hundreds of reconnects a second, unlogged and uncounted (issue 27: 707 in 15 s).
//! [`Reconnect`] is the one policy every long connection follows:
//!
//! - **Wait.** Each reconnect waits its [`Backoff`] (doubling with jitter, up to a bound),
//!   whatever the cause. The one exception is a rotation the platform asked for
//!   ([`Cause::Rotated`]) right after a connection that proved itself: it goes at once,
//!   and counts as a failure in a row so that a server rotating every new connection is
//!   backed off like any other.
//! - **Reset.** [`Reconnect::reset`] starts the backoff over once a connection proved
//!   itself. What proves one is the adapter's to say (a READY or RESUMED, a frame served):
//!   only the protocol knows.
//! - **Count.** Each reconnect increments
//!   [`names::RESTARTS`](crate::telemetry::names::RESTARTS) with the channel and the
//!   cause's label (`connect_failed`, `lost`, `rotated`), the series the daemon's
//!   supervisor counts whole-transport restarts in.
//! - **Log, rate-limited.** Each reconnect is logged with its context (channel, cause,
//!   failures in a row, wait, the adapter's log-safe reason): a warning, or an info line
//!   for a rotation. The first [`LOG_BURST`] in a row each get a line; after that at most
//!   one line per [`LOG_INTERVAL`], carrying how many were not logged since the previous
//!   line (those go to debug). A storm cannot flood the log, and its size is still told.
//!
//! [`Reconnect::drive`] (child `driver`) is the loop around it: connect → serve → ended.
//!
//! A `Reconnect` is made by [`Telemetry::reconnect`](crate::Telemetry::reconnect), so its
//! counters are registered with the adapter's other series.

use std::fmt;
use std::time::Duration;

use metrics::Counter;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::backoff::Backoff;

mod driver;

pub use driver::{Connect, Ended, LongConnection};

/// The policy a long connection gets unless it has reasons for another: 1 s doubling to a
/// minute, plus up to 1 s of jitter. A server dropping every connection sees 4 attempts
/// in the first 15 s (the first connection included), then one a minute.
pub const BACKOFF: Backoff = Backoff::new(
    Duration::from_secs(1),
    Duration::from_secs(60),
    Duration::from_secs(1),
);

/// Reconnects in a row that each get a log line before the rate limit applies.
pub const LOG_BURST: u32 = 3;

/// After the first [`LOG_BURST`] in a row, at most one log line per this interval.
pub const LOG_INTERVAL: Duration = Duration::from_secs(60);

/// Why a long connection is being made again: the `reason` label of
/// [`names::RESTARTS`](crate::telemetry::names::RESTARTS).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Cause {
    /// No connection came up: discovery, the upgrade or the handshake failed, was refused
    /// for now or timed out, or the connection ended before it proved itself.
    ConnectFailed,
    /// A connection that was up ended: the server closed it, the transport failed, or it
    /// went silent.
    Lost,
    /// The platform asked for a new connection (a gateway rotation, QQ's op 7, DingTalk's
    /// `disconnect`).
    Rotated,
}

impl Cause {
    /// Every cause, in label order.
    pub const ALL: [Cause; 3] = [Cause::ConnectFailed, Cause::Lost, Cause::Rotated];

    /// The `reason` label value.
    pub const fn as_str(self) -> &'static str {
        match self {
            Cause::ConnectFailed => "connect_failed",
            Cause::Lost => "lost",
            Cause::Rotated => "rotated",
        }
    }

    pub(crate) const fn index(self) -> usize {
        match self {
            Cause::ConnectFailed => 0,
            Cause::Lost => 1,
            Cause::Rotated => 2,
        }
    }
}

/// One long connection's reconnect policy: its backoff, its counters and its log limiter.
/// Owned by the connection's loop (not shared).
#[derive(Debug)]
pub struct Reconnect {
    channel: &'static str,
    backoff: Backoff,
    /// One counter per [`Cause`], registered when the channel's `Telemetry` was made.
    counters: [Counter; 3],
    log: LogLimit,
}

impl Reconnect {
    pub(crate) fn new(channel: &'static str, counters: [Counter; 3], backoff: Backoff) -> Self {
        Self {
            channel,
            backoff,
            counters,
            log: LogLimit::default(),
        }
    }

    /// The channel its counters and log lines name.
    pub fn channel(&self) -> &'static str {
        self.channel
    }

    /// Reconnects in a row since the last [`reset`](Self::reset).
    pub fn failures(&self) -> u32 {
        self.backoff.failures()
    }

    /// A connection proved itself: the next reconnect waits the backoff's first step again
    /// (and a rotation goes at once).
    pub fn reset(&mut self) {
        self.backoff.reset();
    }

    /// Why a connection that came up then ended: [`Cause::Lost`] after it `served` (it
    /// proved itself, so the backoff starts over), else [`Cause::ConnectFailed`] (one more
    /// failure in a row: a server that drops every new connection is backed off).
    pub fn ended(&mut self, served: bool) -> Cause {
        if served {
            self.reset();
            Cause::Lost
        } else {
            Cause::ConnectFailed
        }
    }

    /// The wait before a reconnect after `cause`, counted as one more in a row. Neither
    /// counted in the metric nor logged: [`report`](Self::report) does that.
    pub fn next_wait(&mut self, cause: Cause) -> Duration {
        let wait = self.backoff.next_wait();
        if cause == Cause::Rotated && self.backoff.failures() == 1 {
            return Duration::ZERO;
        }
        wait
    }

    /// Counts a reconnect after `cause` that waits (or waited) `wait`, and logs it with
    /// `reason` (log-safe: no token, no URL query, no payload) unless the rate limit holds
    /// the line back.
    pub fn report(&mut self, cause: Cause, wait: Duration, reason: impl fmt::Display) {
        self.counters[cause.index()].increment(1);
        let channel = self.channel;
        let attempt = self.backoff.failures();
        let wait_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX);
        let cause_label = cause.as_str();
        let Some(suppressed) = self.log.allow(attempt, Instant::now()) else {
            tracing::debug!(
                channel, cause = cause_label, attempt, wait_ms, error = %reason,
                "Reconnecting the long connection (rate-limited line)."
            );
            return;
        };
        if cause == Cause::Rotated {
            tracing::info!(
                channel, cause = cause_label, attempt, wait_ms, suppressed, error = %reason,
                "The platform rotated the long connection; reconnecting."
            );
        } else {
            tracing::warn!(
                channel, cause = cause_label, attempt, wait_ms, suppressed, error = %reason,
                "The long connection failed; reconnecting."
            );
        }
    }

    /// [`next_wait`](Self::next_wait) and [`report`](Self::report) in one: the wait before
    /// this reconnect.
    pub fn next(&mut self, cause: Cause, reason: impl fmt::Display) -> Duration {
        let wait = self.next_wait(cause);
        self.report(cause, wait, reason);
        wait
    }

    /// [`next`](Self::next), then the wait itself. Returns `false` when `shutdown` was
    /// cancelled first (or already): the caller stops instead of reconnecting.
    pub async fn wait(
        &mut self,
        cause: Cause,
        reason: impl fmt::Display,
        shutdown: &CancellationToken,
    ) -> bool {
        let wait = self.next(cause, reason);
        tokio::select! {
            biased;
            () = shutdown.cancelled() => false,
            () = tokio::time::sleep(wait) => true,
        }
    }
}

/// The log limiter: the first [`LOG_BURST`] in a row, then one line per [`LOG_INTERVAL`].
/// Bounded: an instant and a count, whatever the storm.
#[derive(Debug, Default)]
struct LogLimit {
    /// When the last line was written.
    last: Option<Instant>,
    /// Reconnects not logged since that line.
    suppressed: u64,
}

impl LogLimit {
    /// Whether the `attempt`th reconnect in a row gets a line at `now`: `Some(lines held
    /// back since the previous one)`, or `None` (it is held back and counted).
    fn allow(&mut self, attempt: u32, now: Instant) -> Option<u64> {
        let quiet = self
            .last
            .is_none_or(|at| now.duration_since(at) >= LOG_INTERVAL);
        if attempt <= LOG_BURST || quiet {
            self.last = Some(now);
            return Some(std::mem::take(&mut self.suppressed));
        }
        self.suppressed += 1;
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use metrics_util::debugging::{DebugValue, DebuggingRecorder};

    fn reconnect(backoff: Backoff) -> Reconnect {
        crate::Telemetry::new("unit").reconnect(backoff)
    }

    #[test]
    fn causes_are_distinct_and_indexed_in_order() {
        for (i, cause) in Cause::ALL.into_iter().enumerate() {
            assert_eq!(cause.index(), i);
        }
        let labels: std::collections::HashSet<_> = Cause::ALL.map(Cause::as_str).into();
        assert_eq!(labels.len(), Cause::ALL.len());
    }

    #[test]
    fn a_connection_that_served_starts_the_backoff_over_one_that_did_not_counts_on() {
        let mut policy = reconnect(BACKOFF);
        policy.next_wait(Cause::ConnectFailed);
        policy.next_wait(Cause::ConnectFailed);
        assert_eq!(policy.ended(false), Cause::ConnectFailed);
        assert_eq!(policy.failures(), 2, "not served: still in a row");
        assert_eq!(policy.ended(true), Cause::Lost);
        assert_eq!(policy.failures(), 0, "served: over");
    }

    /// The policy against a server that drops every connection at once: attempts during
    /// 15 s, the first connection included. Before issue 27 Feishu made 707 and Discord 676.
    #[tokio::test(start_paused = true)]
    async fn issue_27_fifteen_seconds_of_dropped_connections_make_at_most_ten_attempts() {
        for _ in 0..20 {
            let mut policy = reconnect(BACKOFF);
            let shutdown = CancellationToken::new();
            let start = Instant::now();
            let mut attempts = 0;
            while start.elapsed() < Duration::from_secs(15) {
                attempts += 1;
                assert!(policy.wait(Cause::Lost, "dropped", &shutdown).await);
            }
            assert!((4..=10).contains(&attempts), "{attempts} attempts");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_that_proved_itself_starts_the_backoff_over() {
        let step = Duration::from_secs(1);
        let mut policy = reconnect(Backoff::new(step, Duration::from_secs(60), Duration::ZERO));
        let waits: Vec<u64> = (0..4)
            .map(|_| policy.next(Cause::ConnectFailed, "refused").as_secs())
            .collect();
        assert_eq!(waits, [1, 2, 4, 8]);
        assert_eq!(policy.failures(), 4);
        policy.reset();
        assert_eq!(policy.next(Cause::Lost, "closed"), step);
    }

    #[tokio::test(start_paused = true)]
    async fn a_rotation_goes_at_once_only_after_a_connection_that_proved_itself() {
        let step = Duration::from_secs(1);
        let mut policy = reconnect(Backoff::new(step, Duration::from_secs(60), Duration::ZERO));
        assert_eq!(policy.next(Cause::Rotated, "op 7"), Duration::ZERO);
        // Rotated again before the new connection proved itself: backed off.
        assert_eq!(policy.next(Cause::Rotated, "op 7"), 2 * step);
        policy.reset();
        assert_eq!(policy.next(Cause::Rotated, "op 7"), Duration::ZERO);
        // A loss right after a rotation waits too.
        assert_eq!(policy.next(Cause::Lost, "closed"), 2 * step);
    }

    #[tokio::test(start_paused = true)]
    async fn shutdown_ends_the_wait_at_once() {
        let mut policy = reconnect(Backoff::new(
            Duration::from_secs(3600),
            Duration::from_secs(3600),
            Duration::ZERO,
        ));
        let shutdown = CancellationToken::new();
        let cancel = shutdown.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(1)).await;
            cancel.cancel();
        });
        let start = Instant::now();
        assert!(!policy.wait(Cause::Lost, "closed", &shutdown).await);
        assert_eq!(start.elapsed(), Duration::from_secs(1));
        assert!(!policy.wait(Cause::Lost, "closed", &shutdown).await);
    }

    #[test]
    fn each_reconnect_is_counted_by_cause() {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        let telemetry = metrics::with_local_recorder(&recorder, || crate::Telemetry::new("unit"));
        let mut policy =
            telemetry.reconnect(Backoff::new(Duration::ZERO, Duration::ZERO, Duration::ZERO));
        policy.next(Cause::Lost, "closed");
        policy.next(Cause::Lost, "closed");
        policy.next(Cause::ConnectFailed, "refused");
        let counts: std::collections::HashMap<String, u64> = snapshotter
            .snapshot()
            .into_vec()
            .into_iter()
            .filter(|(key, ..)| key.key().name() == crate::telemetry::names::RESTARTS)
            .map(|(key, _, _, value)| {
                let labels: Vec<_> = key.key().labels().map(|l| l.value().to_owned()).collect();
                assert!(labels.contains(&"unit".to_owned()), "{labels:?}");
                let DebugValue::Counter(n) = value else {
                    panic!("a counter");
                };
                let reason = key
                    .key()
                    .labels()
                    .find(|l| l.key() == "reason")
                    .map(|l| l.value().to_owned())
                    .unwrap_or_default();
                (reason, n)
            })
            .collect();
        let expected = [("connect_failed", 1), ("lost", 2), ("rotated", 0)];
        for (reason, n) in expected {
            assert_eq!(counts.get(reason), Some(&n), "{counts:?}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_log_gets_the_first_few_then_one_line_a_minute_with_the_count_held_back() {
        let mut log = LogLimit::default();
        let second = Duration::from_secs(1);
        let allowed: Vec<Option<u64>> = (1..=LOG_BURST + 3)
            .map(|attempt| log.allow(attempt, Instant::now()))
            .collect();
        assert_eq!(allowed, [Some(0), Some(0), Some(0), None, None, None]);
        tokio::time::advance(LOG_INTERVAL - second).await;
        assert_eq!(log.allow(LOG_BURST + 4, Instant::now()), None);
        tokio::time::advance(second).await;
        assert_eq!(log.allow(LOG_BURST + 5, Instant::now()), Some(4));
        assert_eq!(log.allow(LOG_BURST + 6, Instant::now()), None);
        // After a reset the burst applies again, and carries what was held back.
        assert_eq!(log.allow(1, Instant::now()), Some(1));
    }
}
