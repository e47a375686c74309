//! Rate budgets in the conformance suite (issue 33): a bucket hands out its burst and no
//! more, refuses with the wait until its next token, earns tokens back over time, keeps
//! keys apart, and never oversubscribes when many take at once (on Postgres, on several
//! connections).

use std::time::Duration;

use im_bridge_channel::budget::Grant;
use im_bridge_channel::{RateBudget, Writes};
use tokio::time::Instant;

use super::must;
use crate::store::Store;

/// A bucket of `burst` that earns a token back every `every`.
fn budget(burst: u32, every: Duration) -> RateBudget {
    RateBudget {
        name: "bot",
        writes: Writes::ALL,
        burst,
        every,
    }
}

async fn take(store: &dyn Store, key: &str, budget: &RateBudget, want: u32) -> Grant {
    must(store.take_tokens(key, budget, want).await, "take_tokens")
}

/// Burst, refusal, refill, keys, concurrency.
pub(super) async fn issue_33_rate_budgets(store: &dyn Store) {
    let hourly = budget(3, Duration::from_secs(3600));
    let grant = take(store, "telegram:bot", &hourly, 2).await;
    assert_eq!(grant.granted, 2, "a bucket never used is whole");
    assert_eq!(grant.retry_in, Duration::ZERO);
    assert_eq!(
        take(store, "telegram:bot", &hourly, 5).await.granted,
        1,
        "no more than the burst, whatever is asked"
    );
    let refused = take(store, "telegram:bot", &hourly, 1).await;
    assert_eq!(refused.granted, 0);
    assert!(
        refused.retry_in > Duration::from_secs(3590) && refused.retry_in <= hourly.every,
        "the wait until the next token: {:?}",
        refused.retry_in
    );
    // Keys are apart.
    assert_eq!(take(store, "discord:bot", &hourly, 3).await.granted, 3);

    // Many takers at once get exactly the burst between them.
    let key = "telegram:crowd";
    let takes = (0..24).map(|_| take(store, key, &hourly, 1));
    let granted: u32 = futures_util::future::join_all(takes)
        .await
        .iter()
        .map(|g| g.granted)
        .sum();
    assert_eq!(granted, 3, "never oversubscribed");

    // A token is earned back after its interval (waited for with a deadline).
    let fast = budget(1, Duration::from_millis(20));
    assert_eq!(take(store, "telegram:fast", &fast, 1).await.granted, 1);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let grant = take(store, "telegram:fast", &fast, 1).await;
        if grant.granted == 1 {
            break;
        }
        assert!(grant.retry_in <= fast.every, "{:?}", grant.retry_in);
        assert!(Instant::now() < deadline, "no token came back");
        tokio::time::sleep(grant.retry_in).await;
    }
}
