//! Rate budgets' token buckets, and where their tokens come from (issue 33).
//!
//! A [`RateBudget`] is a token bucket: `burst` tokens when whole, one more per `every`. It
//! is kept as the instant the bucket is whole again (GCRA's "theoretical arrival time",
//! `tat`): taking `n` tokens at `now` moves it to `max(tat, now) + n × every`, allowed while
//! it stays within `burst × every` of `now`. [`take`] is that rule in integer microseconds,
//! the one implementation the in-process [`LocalBucket`] and the daemon's SQLite store
//! compute with; the Postgres store runs the same formula in SQL, and the store
//! conformance suite holds both to the same answers.
//!
//! Tokens come from a [`TokenSource`]: this process alone ([`LocalBucket`], the default),
//! or a store several replicas share, so the replicas together stay within one bot's
//! limits. The delivery engine's budget layer takes them (`delivery/budgets.rs`).

use std::fmt;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use tokio::time::Instant;

use crate::capabilities::RateBudget;

/// Tokens a [`TokenSource`] handed out, or how long until one is free.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grant {
    /// Tokens granted (at most the number asked for; 0 = none free now).
    pub granted: u32,
    /// With nothing granted: how long until the next token is free. Zero otherwise.
    pub retry_in: Duration,
}

/// Why a [`TokenSource`] could not answer (a shared store being down). The caller keeps
/// the budget in-process meanwhile.
#[derive(Debug, thiserror::Error)]
#[error("the shared rate budget store did not answer: {reason}")]
pub struct BudgetError {
    /// A short, log-safe reason.
    pub reason: String,
}

/// Where a budget's tokens come from.
#[async_trait]
pub trait TokenSource: Send + Sync + fmt::Debug {
    /// Takes up to `want` tokens (at least 1 asked) from the bucket `key` kept as `budget`
    /// says, atomically: never more than the bucket holds, whoever else takes at once.
    async fn take(&self, key: &str, budget: &RateBudget, want: u32) -> Result<Grant, BudgetError>;
}

/// The answer of [`take`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Taken {
    /// Tokens granted.
    pub granted: u32,
    /// The bucket's new theoretical arrival time (µs).
    pub tat: i64,
    /// With nothing granted: µs until the next token is free; 0 otherwise.
    pub wait: i64,
}

/// The longest interval a budget may have, in µs (a day): keeps every product in range.
pub const MAX_EVERY_US: i64 = 86_400_000_000;
/// The largest burst a budget may have: keeps every product in range.
pub const MAX_BURST: u32 = 1_000_000;

/// `budget`'s interval and burst as the bucket math takes them: µs (1 to a day), and 1 to
/// [`MAX_BURST`].
pub fn limits_of(budget: &RateBudget) -> (u32, i64) {
    let every = i64::try_from(budget.every.as_micros())
        .unwrap_or(MAX_EVERY_US)
        .clamp(1, MAX_EVERY_US);
    (budget.burst.clamp(1, MAX_BURST), every)
}

/// Takes up to `want` tokens at `now` from a bucket of `burst` tokens refilled one per
/// `every` (both as [`limits_of`] bounds them), whose theoretical arrival time is `tat`
/// (`None`: a bucket never used, i.e. whole). All times in µs on one clock.
pub fn take(tat: Option<i64>, now: i64, burst: u32, every: i64, want: u32) -> Taken {
    let base = tat.map_or(now, |tat| tat.max(now));
    let room = now.saturating_add(i64::from(burst).saturating_mul(every)) - base;
    let free = (room.max(0) / every).min(i64::from(want));
    let granted = u32::try_from(free).unwrap_or(0);
    let tat = base.saturating_add(free.saturating_mul(every));
    let wait = if granted == 0 {
        (base.saturating_add(every) - now.saturating_add(i64::from(burst) * every)).max(1)
    } else {
        0
    };
    Taken { granted, tat, wait }
}

/// A budget kept in this process: one bucket on the runtime's clock (paused in tests).
#[derive(Debug)]
pub struct LocalBucket {
    epoch: Instant,
    /// The theoretical arrival time, µs after `epoch`; `None` while whole.
    tat: Mutex<Option<i64>>,
}

impl Default for LocalBucket {
    fn default() -> Self {
        Self {
            epoch: Instant::now(),
            tat: Mutex::new(None),
        }
    }
}

impl LocalBucket {
    /// Takes up to `want` tokens of `budget` now.
    pub fn take_now(&self, budget: &RateBudget, want: u32) -> Grant {
        let (burst, every) = limits_of(budget);
        let now = i64::try_from(self.epoch.elapsed().as_micros()).unwrap_or(i64::MAX / 2);
        // Poisoning only means a panic elsewhere mid-update; the value is still valid.
        let mut tat = self.tat.lock().unwrap_or_else(|p| p.into_inner());
        let taken = take(*tat, now, burst, every, want.max(1));
        *tat = Some(taken.tat);
        Grant {
            granted: taken.granted,
            retry_in: Duration::from_micros(u64::try_from(taken.wait).unwrap_or(0)),
        }
    }
}

#[async_trait]
impl TokenSource for LocalBucket {
    async fn take(&self, _key: &str, budget: &RateBudget, want: u32) -> Result<Grant, BudgetError> {
        Ok(self.take_now(budget, want))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capabilities::Writes;

    const EVERY: i64 = 100_000;

    #[test]
    fn a_whole_bucket_gives_its_burst_then_one_per_interval() {
        let (mut tat, mut now) = (None, 1_000_000);
        let t = take(tat, now, 3, EVERY, 2);
        assert_eq!((t.granted, t.wait), (2, 0));
        tat = Some(t.tat);
        // One left of the burst, whatever is asked.
        let t = take(tat, now, 3, EVERY, 5);
        assert_eq!(t.granted, 1);
        tat = Some(t.tat);
        // Empty: the next token is one interval away.
        let t = take(tat, now, 3, EVERY, 1);
        assert_eq!((t.granted, t.wait), (0, EVERY));
        assert_eq!(t.tat, tat.unwrap(), "a refusal changes nothing");
        now += EVERY - 1;
        assert_eq!(take(tat, now, 3, EVERY, 1).wait, 1, "1 µs left");
        now += 1;
        let t = take(tat, now, 3, EVERY, 4);
        assert_eq!(t.granted, 1, "one token earned back");
        tat = Some(t.tat);
        // A long idle refills to the burst and no further.
        now += 3600 * 1_000_000;
        assert_eq!(take(tat, now, 3, EVERY, 10).granted, 3);
    }

    #[test]
    fn partial_refills_and_large_values_stay_in_range() {
        // Two and a half intervals idle after emptying: two tokens, the half kept.
        let t = take(Some(1_000_000 + 3 * EVERY), 1_000_000, 3, EVERY, 3);
        assert_eq!(t.granted, 0);
        let later = 1_000_000 + EVERY * 5 / 2;
        let t = take(Some(1_000_000 + 3 * EVERY), later, 3, EVERY, 3);
        assert_eq!(t.granted, 2);
        assert_eq!(take(Some(t.tat), later + EVERY / 2, 3, EVERY, 3).granted, 1);
        // The extremes neither overflow nor panic.
        let t = take(Some(i64::MAX), 0, MAX_BURST, MAX_EVERY_US, u32::MAX);
        assert_eq!(t.granted, 0);
        assert!(t.wait > 0);
        let t = take(None, i64::MAX / 2, MAX_BURST, MAX_EVERY_US, u32::MAX);
        assert_eq!(t.granted, MAX_BURST);
    }

    #[test]
    fn limits_are_bounded() {
        let budget = |burst, every| RateBudget {
            name: "bot",
            writes: Writes::ALL,
            burst,
            every,
        };
        assert_eq!(limits_of(&budget(0, Duration::ZERO)), (1, 1));
        assert_eq!(
            limits_of(&budget(u32::MAX, Duration::MAX)),
            (MAX_BURST, MAX_EVERY_US)
        );
        let telegram = RateBudget::per_second("bot", Writes::ALL, 20, 30);
        assert_eq!(limits_of(&telegram), (20, 33_333));
        let group = RateBudget::per_minute("bot", Writes::ALL, 3, 20);
        assert_eq!(group.every, Duration::from_secs(3));
    }

    #[tokio::test(start_paused = true)]
    async fn the_local_bucket_refills_on_the_runtime_clock() {
        let bucket = LocalBucket::default();
        let budget = RateBudget::per_second("bot", Writes::ALL, 2, 10);
        assert_eq!(bucket.take_now(&budget, 5).granted, 2);
        let short = bucket.take_now(&budget, 1);
        assert_eq!(short.granted, 0);
        assert_eq!(short.retry_in, Duration::from_millis(100));
        tokio::time::advance(short.retry_in).await;
        assert_eq!(bucket.take_now(&budget, 5).granted, 1);
    }
}
