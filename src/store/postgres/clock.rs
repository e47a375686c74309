//! The database's clock (issue 27): every expiry on the shared store, leases, journal
//! entries and dedupe records, is written as `now_ms!` plus a TTL and judged against
//! `now_ms!`, so replicas whose own clocks disagree still agree on what has expired (the
//! parent's "Time" docs list what stays on a replica's clock, and why).

use std::time::Duration;

use crate::store::ttl_millis;

/// The database's clock in unix milliseconds, the one clock every expiry is written in and
/// compared with (the parent's docs, "Time"). `clock_timestamp()` rather than `now()`: a
/// statement that waited for a row lock decides at the time it decides, not at the time it
/// began, and writes an expiry that many milliseconds later. Its several readings in one
/// statement are microseconds apart (and in order, unless the server's clock is stepped),
/// so they agree on what expired.
macro_rules! now_ms {
    () => {
        "(floor(extract(epoch FROM clock_timestamp()) * 1000)::BIGINT)"
    };
}
pub(super) use now_ms;

/// The database's clock in unix microseconds, read once per statement where it is used
/// (rate budgets, issue 33: a token is 33 ms at Telegram's 30/s, so milliseconds would be
/// coarse).
macro_rules! now_us {
    () => {
        "(floor(extract(epoch FROM clock_timestamp()) * 1000000)::BIGINT)"
    };
}
pub(super) use now_us;

/// The longest TTL passed to the database, in milliseconds: added to `now_ms!` it cannot
/// overflow a `BIGINT` (longer TTLs are cut to it; it is some 146 million years).
const MAX_TTL_MS: i64 = i64::MAX / 2;

/// A TTL as the milliseconds parameter added to `now_ms!`.
pub(super) fn ttl_param(ttl: Duration) -> i64 {
    ttl_millis(ttl).min(MAX_TTL_MS)
}
