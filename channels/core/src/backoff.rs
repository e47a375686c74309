//! How long a transport waits before it reconnects: random jitter, and an exponential
//! backoff bounded above.
//!
//! Every replica of the bridge reconnects when a platform drops its connections at once (a
//! gateway rotation, an outage), so waits carry random jitter: the replicas do not all ask
//! again in the same second. [`jitter`] is that random part on its own (Feishu's server
//! names its own interval and nonce); [`Backoff`] doubles the wait after each failure in a
//! row, from `base` up to `max`, adds jitter, and starts again from `base` once a
//! connection worked ([`Backoff::reset`]).

use std::time::Duration;

use rand::Rng;

/// A random wait in `0..max` (zero when `max` is zero), at millisecond resolution.
pub fn jitter(max: Duration) -> Duration {
    let max_ms = u64::try_from(max.as_millis()).unwrap_or(u64::MAX);
    if max_ms == 0 {
        return Duration::ZERO;
    }
    Duration::from_millis(rand::rng().random_range(0..max_ms))
}

/// Exponential backoff with jitter: the `n`th wait in a row is `min(base * 2^n, max)` plus
/// a random `0..jitter`. The bound on a wait is therefore `max + jitter`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Backoff {
    base: Duration,
    max: Duration,
    jitter: Duration,
    /// Waits handed out since the last reset (saturating).
    failures: u32,
}

impl Backoff {
    /// A backoff starting at `base`, doubling up to `max`, plus up to `jitter`.
    pub const fn new(base: Duration, max: Duration, jitter: Duration) -> Self {
        Self {
            base,
            max,
            jitter,
            failures: 0,
        }
    }

    /// Waits of one to five milliseconds, without jitter: for tests, where a connection is
    /// tried again at once but a loop of failures must not spin.
    pub const fn quick() -> Self {
        Self::new(
            Duration::from_millis(1),
            Duration::from_millis(5),
            Duration::ZERO,
        )
    }

    /// The wait before the next attempt; each call counts one more failure in a row.
    pub fn next_wait(&mut self) -> Duration {
        let doubled = self
            .base
            .saturating_mul(2u32.saturating_pow(self.failures.min(31)));
        self.failures = self.failures.saturating_add(1);
        doubled.min(self.max) + jitter(self.jitter)
    }

    /// Failures in a row since the last [`reset`](Self::reset).
    pub fn failures(&self) -> u32 {
        self.failures
    }

    /// A connection worked: the next wait is `base` again.
    pub fn reset(&mut self) {
        self.failures = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn waits_double_up_to_the_bound_and_reset() {
        let mut backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(5), MS);
        let waits: Vec<u64> = (0..6).map(|_| backoff.next_wait().as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 5, 5, 5]);
        assert_eq!(backoff.failures(), 6);
        backoff.reset();
        assert_eq!(backoff.next_wait().as_secs(), 1);
        // Far past any shift width, the wait is still the bound.
        let mut long = Backoff::new(Duration::from_secs(1), Duration::from_secs(60), MS);
        for _ in 0..100 {
            assert!(long.next_wait() <= Duration::from_secs(60));
        }
    }

    #[test]
    fn jitter_stays_below_its_bound() {
        assert_eq!(jitter(Duration::ZERO), Duration::ZERO);
        let bound = Duration::from_millis(20);
        let seen: std::collections::HashSet<Duration> = (0..200).map(|_| jitter(bound)).collect();
        assert!(seen.iter().all(|d| *d < bound));
        assert!(seen.len() > 1, "jitter is random");
        let mut backoff = Backoff::new(Duration::ZERO, Duration::ZERO, bound);
        assert!(backoff.next_wait() < bound);
    }
}
