//! Refused webhook requests: why they were refused, the one counter they feed and the
//! rate-limited log line that reports them.
//!
//! A scanner hammering a public webhook must not flood the log, and the operator must
//! still learn how many requests were turned away. So every refusal is counted at once in
//! [`WEBHOOK_REFUSED_METRIC`](super::WEBHOOK_REFUSED_METRIC), while the log gets at most one
//! line per route per [`LOG_INTERVAL`], carrying the number refused (by reason) since the
//! previous line. Refusals after the last line are not lost: the next line carries them,
//! and [`RunningHost::stop`](super::RunningHost::stop) flushes whatever is still pending.

use std::sync::Mutex;
use std::time::Duration;

use metrics::Counter;
use tokio::time::Instant;

use super::{WEBHOOK_REFUSED_METRIC, lock};

/// At most one log line per route per this interval about refused requests.
pub(super) const LOG_INTERVAL: Duration = Duration::from_secs(60);

/// Why the host turned a request away: the `reason` label of
/// [`WEBHOOK_REFUSED_METRIC`](super::WEBHOOK_REFUSED_METRIC).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Refusal {
    /// 401: the handler's `authorize` said no, or its `handle` answered
    /// [`WebhookResponse::unauthorized`](super::WebhookResponse::unauthorized).
    Unauthorized,
    /// 401: correctly signed, but the signed timestamp is outside the
    /// [`Freshness`](super::Freshness) window
    /// ([`WebhookResponse::stale`](super::WebhookResponse::stale)).
    Stale,
    /// 400: signed (or unsigned where the platform allows it) but the body does not open or
    /// parse as the platform's envelope
    /// ([`WebhookResponse::malformed`](super::WebhookResponse::malformed)).
    Malformed,
    /// 413: the body is over `max_body`.
    TooLarge,
    /// 408: the body took longer than `body_timeout` to arrive.
    Timeout,
    /// 503: `max_in_flight` requests of this route were already being handled.
    Busy,
    /// 503: no handler installed (the channel is not running, restarting or stopped).
    Unavailable,
}

impl Refusal {
    /// Every reason, in label (and index) order.
    pub(super) const ALL: [Refusal; 7] = [
        Refusal::Unauthorized,
        Refusal::Stale,
        Refusal::Malformed,
        Refusal::TooLarge,
        Refusal::Timeout,
        Refusal::Busy,
        Refusal::Unavailable,
    ];

    /// The `reason` label value.
    pub(super) const fn as_str(self) -> &'static str {
        match self {
            Refusal::Unauthorized => "unauthorized",
            Refusal::Stale => "stale",
            Refusal::Malformed => "malformed",
            Refusal::TooLarge => "too_large",
            Refusal::Timeout => "timeout",
            Refusal::Busy => "busy",
            Refusal::Unavailable => "unavailable",
        }
    }

    const fn index(self) -> usize {
        match self {
            Refusal::Unauthorized => 0,
            Refusal::Stale => 1,
            Refusal::Malformed => 2,
            Refusal::TooLarge => 3,
            Refusal::Timeout => 4,
            Refusal::Busy => 5,
            Refusal::Unavailable => 6,
        }
    }
}

/// Refusals counted since the last log line, by reason.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Tally([u64; Refusal::ALL.len()]);

impl Tally {
    /// How many were refused for `reason`.
    pub(super) fn of(self, reason: Refusal) -> u64 {
        self.0[reason.index()]
    }

    fn total(self) -> u64 {
        self.0.iter().sum()
    }

    /// Writes the one warn line for `channel`. Never the path, headers or body.
    pub(super) fn log(self, channel: &'static str) {
        tracing::warn!(
            channel,
            refused = self.total(),
            unauthorized = self.of(Refusal::Unauthorized),
            stale = self.of(Refusal::Stale),
            malformed = self.of(Refusal::Malformed),
            too_large = self.of(Refusal::TooLarge),
            timeout = self.of(Refusal::Timeout),
            busy = self.of(Refusal::Busy),
            unavailable = self.of(Refusal::Unavailable),
            "Refused webhook requests."
        );
    }
}

/// One route's refusal counters and log limiter.
pub(super) struct RefusalLog {
    /// One [`WEBHOOK_REFUSED_METRIC`] series per reason, registered up front (so a quiet
    /// route exports zeros) with the recorder current when the route was registered.
    counters: [Counter; Refusal::ALL.len()],
    state: Mutex<LogState>,
}

#[derive(Default)]
struct LogState {
    /// When the last line was written; `None` before the first.
    last: Option<Instant>,
    /// Refused since that line. Bounded: one integer per reason, whatever the traffic.
    pending: Tally,
}

impl RefusalLog {
    /// Registers the counters for `channel`.
    pub(super) fn new(channel: &'static str) -> Self {
        Self {
            counters: Refusal::ALL.map(|reason| {
                metrics::counter!(
                    WEBHOOK_REFUSED_METRIC,
                    "channel" => channel,
                    "reason" => reason.as_str()
                )
            }),
            state: Mutex::new(LogState::default()),
        }
    }

    /// Counts one refusal. Returns the tally to log when a line is due: the first refusal,
    /// or the first one at least [`LOG_INTERVAL`] after the previous line.
    pub(super) fn refused(&self, reason: Refusal) -> Option<Tally> {
        self.counters[reason.index()].increment(1);
        let now = Instant::now();
        let mut state = lock(&self.state);
        state.pending.0[reason.index()] += 1;
        if state
            .last
            .is_some_and(|at| now.duration_since(at) < LOG_INTERVAL)
        {
            return None;
        }
        state.last = Some(now);
        Some(std::mem::take(&mut state.pending))
    }

    /// Takes what was refused since the last line, if anything (at shutdown).
    pub(super) fn flush(&self) -> Option<Tally> {
        let mut state = lock(&self.state);
        let pending = std::mem::take(&mut state.pending);
        (pending.total() > 0).then_some(pending)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tally(entries: &[(Refusal, u64)]) -> Tally {
        let mut tally = Tally::default();
        for &(reason, n) in entries {
            tally.0[reason.index()] = n;
        }
        tally
    }

    #[test]
    fn reasons_are_distinct_and_indexed_in_order() {
        for (i, reason) in Refusal::ALL.into_iter().enumerate() {
            assert_eq!(reason.index(), i);
        }
        let labels: std::collections::HashSet<_> = Refusal::ALL.map(Refusal::as_str).into();
        assert_eq!(labels.len(), Refusal::ALL.len());
    }

    #[tokio::test(start_paused = true)]
    async fn one_line_per_interval_carries_everything_refused_since_the_last() {
        let log = RefusalLog::new("unit");
        assert_eq!(
            log.refused(Refusal::Unauthorized),
            Some(tally(&[(Refusal::Unauthorized, 1)]))
        );
        assert_eq!(log.refused(Refusal::Unauthorized), None);
        assert_eq!(log.refused(Refusal::Busy), None);
        tokio::time::advance(LOG_INTERVAL - Duration::from_millis(1)).await;
        assert_eq!(log.refused(Refusal::Timeout), None);
        tokio::time::advance(Duration::from_millis(1)).await;
        assert_eq!(
            log.refused(Refusal::Timeout),
            Some(tally(&[
                (Refusal::Unauthorized, 1),
                (Refusal::Busy, 1),
                (Refusal::Timeout, 2),
            ]))
        );
        assert_eq!(log.flush(), None);
    }

    #[tokio::test(start_paused = true)]
    async fn refusals_after_the_last_line_are_flushed_not_lost() {
        let log = RefusalLog::new("unit");
        assert!(log.refused(Refusal::TooLarge).is_some());
        assert_eq!(log.refused(Refusal::TooLarge), None);
        assert_eq!(log.refused(Refusal::Unavailable), None);
        assert_eq!(
            log.flush(),
            Some(tally(&[(Refusal::TooLarge, 1), (Refusal::Unavailable, 1)]))
        );
        assert_eq!(log.flush(), None);
    }
}
