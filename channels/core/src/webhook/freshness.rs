//! The freshness window of signed webhooks: how old (or how far ahead) a signed timestamp
//! may be before the delivery is refused as a replay.
//!
//! A signature proves who sent a delivery, not when: without a window a captured request
//! replayed byte for byte hours later still verifies. Feishu and QQ sign a unix-seconds
//! timestamp with every delivery, so a handler checks it, after the signature (only a
//! verified timestamp means anything), against [`WEBHOOK_FRESHNESS`] either way of this
//! host's clock (which must therefore be NTP-synced). Outside it the handler answers
//! [`WebhookResponse::stale`](super::WebhookResponse::stale): 401, counted with the reason
//! `stale`.
//!
//! Inside the window a replay is a redelivery, and the daemon's dedupe drops it: its dedupe
//! TTL is at least twice the window (a const assertion in the daemon), the widest gap
//! between two deliveries of one signed timestamp that are both accepted.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How far a signed timestamp may be from this host's clock, in the past or the future,
/// for the delivery to be accepted: 5 minutes (the window platforms' SDKs use). The bound
/// itself is accepted.
pub const WEBHOOK_FRESHNESS: Duration = Duration::from_secs(5 * 60);

/// Why a signed timestamp was refused. Never quotes the header: it came from the network.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Stale {
    /// Missing, empty, or not a decimal number of unix seconds.
    #[error("the signed timestamp is not unix seconds")]
    Unreadable,
    /// Signed this long before now, past the window.
    #[error("the delivery was signed {0:?} ago, past the freshness window")]
    Old(Duration),
    /// Signed this long after now, past the window.
    #[error("the delivery was signed {0:?} ahead of this host's clock, past the freshness window")]
    Ahead(Duration),
}

/// A freshness window: [`Default`] is [`WEBHOOK_FRESHNESS`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Freshness {
    window: Duration,
}

impl Default for Freshness {
    fn default() -> Self {
        Self::new(WEBHOOK_FRESHNESS)
    }
}

impl Freshness {
    /// A window of `window` either way.
    pub const fn new(window: Duration) -> Self {
        Self { window }
    }

    /// The window, either way.
    pub const fn window(self) -> Duration {
        self.window
    }

    /// Whether a delivery signed at `timestamp` (decimal unix seconds, as the platform's
    /// header carries it) is within the window of `now` (the caller's clock, so tests need
    /// no sleeps). A timestamp that does not parse is refused.
    pub fn check(self, timestamp: &str, now: SystemTime) -> Result<(), Stale> {
        let signed = parse(timestamp).ok_or(Stale::Unreadable)?;
        match now.duration_since(signed) {
            Ok(age) if age > self.window => Err(Stale::Old(age)),
            Ok(_) => Ok(()),
            Err(ahead) if ahead.duration() > self.window => Err(Stale::Ahead(ahead.duration())),
            Err(_) => Ok(()),
        }
    }
}

/// The time of a decimal unix-seconds timestamp: ASCII digits only (no sign, no spaces, no
/// fraction), and a time `SystemTime` can hold.
fn parse(timestamp: &str) -> Option<SystemTime> {
    if timestamp.is_empty() || !timestamp.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let secs = timestamp.parse().ok()?;
    UNIX_EPOCH.checked_add(Duration::from_secs(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2024-10-15T08:33:15Z, the moment "now" in these tests.
    const NOW: u64 = 1_728_981_195;

    fn now() -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(NOW)
    }

    fn at(secs: u64) -> String {
        secs.to_string()
    }

    #[test]
    fn five_minutes_either_way_is_accepted_and_a_second_more_is_not() {
        let fresh = Freshness::default();
        assert_eq!(fresh.window(), Duration::from_secs(300));
        for signed in [NOW, NOW - 240, NOW + 240, NOW - 300, NOW + 300] {
            assert_eq!(fresh.check(&at(signed), now()), Ok(()), "{signed}");
        }
        assert_eq!(
            fresh.check(&at(NOW - 301), now()),
            Err(Stale::Old(Duration::from_secs(301)))
        );
        assert_eq!(
            fresh.check(&at(NOW + 301), now()),
            Err(Stale::Ahead(Duration::from_secs(301)))
        );
        assert_eq!(
            fresh.check(&at(NOW - 360), now()),
            Err(Stale::Old(Duration::from_secs(360)))
        );
    }

    #[test]
    fn the_bound_is_exact_to_the_nanosecond() {
        // The platform signs whole seconds; the host's clock is finer.
        let fresh = Freshness::default();
        let just_after = now() + Duration::from_nanos(1);
        assert_eq!(
            fresh.check(&at(NOW - 300), just_after),
            Err(Stale::Old(Duration::new(300, 1)))
        );
        let just_before = now() - Duration::from_nanos(1);
        assert_eq!(
            fresh.check(&at(NOW + 300), just_before),
            Err(Stale::Ahead(Duration::new(300, 1)))
        );
    }

    #[test]
    fn issue_27_a_delivery_signed_in_2017_is_refused() {
        // 2017-01-01T00:00:00Z, as in the probe that found issue 27.
        let old = Freshness::default().check("1483228800", now());
        assert!(matches!(old, Err(Stale::Old(age)) if age > Duration::from_secs(86_400 * 365)));
    }

    #[test]
    fn a_timestamp_that_does_not_parse_is_refused() {
        let fresh = Freshness::default();
        let in_millis = (NOW * 1000).to_string();
        for bad in [
            "",
            " ",
            "abc",
            "+1728981195",
            "-1728981195",
            " 1728981195",
            "1728981195 ",
            "1728981195.5",
            "1.7e9",
            "99999999999999999999999",
            &u64::MAX.to_string(),
        ] {
            assert_eq!(fresh.check(bad, now()), Err(Stale::Unreadable), "{bad:?}");
        }
        // Milliseconds read as seconds are far in the future: refused too.
        assert!(matches!(
            fresh.check(&in_millis, now()),
            Err(Stale::Ahead(_))
        ));
    }

    #[test]
    fn another_window_is_its_own() {
        let tight = Freshness::new(Duration::from_secs(30));
        assert_eq!(tight.check(&at(NOW - 30), now()), Ok(()));
        assert_eq!(
            tight.check(&at(NOW - 31), now()),
            Err(Stale::Old(Duration::from_secs(31)))
        );
        // A clock before 1970 sees every real timestamp ahead of it, and refuses it.
        let before_epoch = UNIX_EPOCH - Duration::from_secs(10);
        assert!(matches!(
            tight.check(&at(NOW), before_epoch),
            Err(Stale::Ahead(_))
        ));
    }

    #[test]
    fn errors_never_quote_the_header() {
        let error = Freshness::default()
            .check("not-a-time-SECRETISH", now())
            .unwrap_err();
        assert!(!error.to_string().contains("SECRETISH"));
    }
}
