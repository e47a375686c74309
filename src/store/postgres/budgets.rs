//! Rate budgets on Postgres (issue 33): a token bucket per budget, taken from in one
//! statement.
//!
//! The upsert locks the budget's row (or inserts it whole), then computes the grant from
//! the row it locked and one reading of the database's clock: the sub-select reads
//! `now_us!` once, so the grant, the new arrival time and the wait all agree. It is the
//! formula of [`im_bridge_channel::budget::take`], which the conformance suite holds both
//! stores to. `$1` the key, `$2` the burst, `$3` the interval in µs, `$4` the tokens wanted.

use std::time::Duration;

use im_bridge_channel::RateBudget;
use im_bridge_channel::budget::{Grant, limits_of};

use super::clock::now_us;
use super::{PostgresStore, failed};
use crate::store::StoreError;

/// The take (see the module docs).
const TAKE: &str = concat!(
    "INSERT INTO im_bridge_rate_budgets AS b (name, tat_us, granted, wait_us)
     SELECT $1::TEXT, n.us + LEAST($4::BIGINT, $2::BIGINT) * $3::BIGINT,
            LEAST($4::BIGINT, $2::BIGINT), 0
     FROM (SELECT ",
    now_us!(),
    ") AS n(us)
     ON CONFLICT (name) DO UPDATE SET (tat_us, granted, wait_us) = (
         SELECT base + k * $3::BIGINT, k,
                CASE WHEN k = 0 THEN GREATEST(base + $3::BIGINT - (us + $2::BIGINT * $3::BIGINT), 1)
                     ELSE 0 END
         FROM (SELECT base, us,
                      LEAST($4::BIGINT,
                            GREATEST(0, (us + $2::BIGINT * $3::BIGINT - base) / $3::BIGINT)) AS k
               FROM (SELECT GREATEST(b.tat_us, n.us) AS base, n.us
                     FROM (SELECT ",
    now_us!(),
    ") AS n(us)) x) y)
     RETURNING granted, wait_us"
);

impl PostgresStore {
    /// `Store::take_tokens`.
    pub(super) async fn take(
        &self,
        key: &str,
        budget: &RateBudget,
        want: u32,
    ) -> Result<Grant, StoreError> {
        let (burst, every) = limits_of(budget);
        let row = self
            .query_one(
                "take_tokens",
                TAKE,
                &[
                    &key,
                    &i64::from(burst),
                    &every,
                    &i64::from(want.clamp(1, burst)),
                ],
            )
            .await?;
        let granted: i64 = row.try_get(0).map_err(failed("take_tokens"))?;
        let wait: i64 = row.try_get(1).map_err(failed("take_tokens"))?;
        Ok(Grant {
            granted: u32::try_from(granted).unwrap_or(0),
            retry_in: Duration::from_micros(u64::try_from(wait).unwrap_or(0)),
        })
    }
}
