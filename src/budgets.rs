//! Rate budgets on the daemon's side (issue 33).
//!
//! Each adapter declares its bot-wide budgets in its capabilities
//! ([`RateBudget`]); the delivery engine keeps every write within them
//! ([`im_bridge_channel::Budgets`]). What the daemon adds:
//!
//! - **The operator's adjustments**: `channels.<name>.rate_budgets.<budget>` may set a
//!   budget's `per_second` and `burst` (a bot with higher limits, or a test's lowered fake).
//!   The keys are read with the config ([`BudgetOverride`]); that each names a budget the
//!   channel declares is checked once the channel is built
//!   ([`check_rate_budgets`](crate::config::check_rate_budgets)), before anything starts.
//! - **Where tokens come from**: with a store several replicas share (Postgres), the store
//!   ([`StoreTokens`], one row per budget), so the replicas together stay within one bot's
//!   limits; otherwise each budget is a bucket in this process ([`plan`]).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use im_bridge_channel::budget::{BudgetError, Grant, TokenSource};
use im_bridge_channel::{BudgetPlan, Capabilities, RateBudget};

use crate::store::Store;

/// The operator's adjustment of one declared budget.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct BudgetOverride {
    /// The budget's name, as the channel declares it.
    pub name: String,
    /// A new burst, if set.
    pub burst: Option<u32>,
    /// A new sustained rate in writes a second ([`MIN_PER_SECOND`] to [`MAX_PER_SECOND`]),
    /// if set.
    pub per_second: Option<f64>,
}

/// The slowest sustained rate a budget may be set to: one write a day.
pub const MIN_PER_SECOND: f64 = 1.0 / 86_400.0;
/// The fastest sustained rate a budget may be set to.
pub const MAX_PER_SECOND: f64 = 100_000.0;

/// Each channel's adjustments, by channel name.
pub type BudgetOverrides = BTreeMap<String, Vec<BudgetOverride>>;

/// The budgets `caps` declares with `overrides` applied, their tokens from `shared` when
/// set, else kept in this process.
pub fn plan(
    caps: &Capabilities,
    overrides: &[BudgetOverride],
    shared: Option<Arc<dyn TokenSource>>,
) -> BudgetPlan {
    let budgets = caps
        .rate_budgets
        .iter()
        .map(|declared| {
            let found = overrides.iter().find(|o| o.name == declared.name);
            let every = found.and_then(|o| o.per_second).map(|rate| {
                Duration::from_secs_f64(1.0 / rate.clamp(MIN_PER_SECOND, MAX_PER_SECOND))
            });
            RateBudget {
                burst: found.and_then(|o| o.burst).unwrap_or(declared.burst),
                every: every.unwrap_or(declared.every),
                ..*declared
            }
        })
        .collect();
    BudgetPlan { budgets, shared }
}

/// The store as the token source replicas share.
pub struct StoreTokens(pub Arc<dyn Store>);

impl std::fmt::Debug for StoreTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("StoreTokens")
            .field(&self.0.describe())
            .finish()
    }
}

#[async_trait]
impl TokenSource for StoreTokens {
    async fn take(&self, key: &str, budget: &RateBudget, want: u32) -> Result<Grant, BudgetError> {
        self.0
            .take_tokens(key, budget, want)
            .await
            .map_err(|error| BudgetError {
                reason: error.to_string(),
            })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use im_bridge_channel::Writes;

    /// Two budgets a channel declares, for the tests here and in the config's check.
    pub(crate) const DECLARED: [RateBudget; 2] = [
        RateBudget::per_second("bot", Writes::ALL, 20, 30),
        RateBudget::per_second("card_updates", Writes::EDITS, 5, 5),
    ];

    #[test]
    fn overrides_replace_what_they_set_and_keep_the_rest() {
        let caps = Capabilities {
            rate_budgets: &DECLARED,
            ..Capabilities::final_only(100)
        };
        let plan = plan(
            &caps,
            &[BudgetOverride {
                name: "bot".into(),
                burst: Some(4),
                per_second: None,
            }],
            None,
        );
        assert_eq!(plan.budgets[0].burst, 4);
        assert_eq!(plan.budgets[0].every, DECLARED[0].every);
        assert_eq!(plan.budgets[1], DECLARED[1]);
        assert!(plan.shared.is_none());
        let slower = BudgetOverride {
            name: "card_updates".into(),
            burst: None,
            per_second: Some(0.5),
        };
        let plan = super::plan(&caps, &[slower], None);
        assert_eq!(plan.budgets[1].every, Duration::from_secs(2));
        assert_eq!(plan.budgets[1].burst, 5);
    }
}
