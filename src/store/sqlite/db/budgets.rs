//! Rate budgets on the store thread (issue 33): a token bucket per budget, read and moved
//! in the batch's transaction with the core's bucket math
//! ([`im_bridge_channel::budget::take`]). One process opens the file, so nothing else
//! takes from it meanwhile; the daemon keeps budgets in-process with this store, and the
//! method exists so both stores answer the same contract.

use std::time::Duration;

use im_bridge_channel::RateBudget;
use im_bridge_channel::budget::{Grant, limits_of, take};
use rusqlite::{OptionalExtension, params};

use super::Db;

impl Db {
    /// See `Store::take_tokens`; `now` in unix microseconds.
    pub(in crate::store::sqlite) fn take_tokens(
        &self,
        key: &str,
        budget: &RateBudget,
        want: u32,
        now: i64,
    ) -> rusqlite::Result<Grant> {
        let tat: Option<i64> = self
            .conn
            .prepare_cached("SELECT tat_us FROM rate_budgets WHERE name = ?1")?
            .query_row(params![key], |row| row.get(0))
            .optional()?;
        let (burst, every) = limits_of(budget);
        let taken = take(tat, now, burst, every, want.max(1));
        if taken.granted > 0 {
            self.conn
                .prepare_cached(
                    "INSERT INTO rate_budgets (name, tat_us) VALUES (?1, ?2)
                     ON CONFLICT (name) DO UPDATE SET tat_us = excluded.tat_us",
                )?
                .execute(params![key, taken.tat])?;
        }
        Ok(Grant {
            granted: taken.granted,
            retry_in: Duration::from_micros(u64::try_from(taken.wait).unwrap_or(0)),
        })
    }
}
