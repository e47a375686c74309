//! Cost of the shared rate budgets (issue 33): what one take of tokens from the Postgres
//! store costs, alone and with three replicas contending for one budget's row, next to the
//! in-process bucket that single-replica deployments use.
//!
//! ```text
//! cargo bench --bench budgets
//! ```
//!
//! The server is `IM_BRIDGE_BENCH_POSTGRES` (a `postgres://` URL whose role may create
//! schemas), else a throwaway cluster from this machine's PostgreSQL binaries (as the tests
//! make one); the bench works in a schema of its own and drops it. Plain `Instant` timings,
//! printed as per-take latency percentiles and takes per second.
//!
//! Measurements:
//! 1. **In-process**: one `LocalBucket` take (the default, and SQLite deployments).
//! 2. **Postgres, one caller**: takes one after another from a budget that never runs dry,
//!    one store call each (the statement, its round trip and the pool).
//! 3. **Postgres, three replicas × 8 callers** on one budget's row: three stores (pools),
//!    24 takes in flight, serialized by the row lock.
//!
//! What it means for a write is in `docs/performance.md`: a replica asks the store once per
//! batch of tokens (at Telegram's 30/s, a batch of 3), so even a bot at its limit costs the
//! database about 10 statements a second per budget.
// A benchmark that cannot set itself up should stop loudly.
#![allow(clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use im_bridge::store::{PostgresOptions, PostgresStore, Store};
use im_bridge_channel::budget::LocalBucket;
use im_bridge_channel::{RateBudget, Writes};

/// Takes per measurement.
const TAKES: usize = 4_000;
/// Replicas and callers per replica of the contended measurement.
const REPLICAS: usize = 3;
const CALLERS: usize = 8;
/// A budget that never runs dry: the cost measured is the take, never a wait.
const ENDLESS: RateBudget = RateBudget {
    name: "bench",
    writes: Writes::ALL,
    burst: 1_000_000,
    every: Duration::from_micros(1),
};

#[tokio::main]
async fn main() {
    let local = LocalBucket::default();
    let started = Instant::now();
    for _ in 0..TAKES * 100 {
        std::hint::black_box(local.take_now(&ENDLESS, 1));
    }
    let per_take = started.elapsed() / u32::try_from(TAKES * 100).expect("fits");
    println!("in-process bucket: {per_take:?} per take");

    let base = match std::env::var("IM_BRIDGE_BENCH_POSTGRES") {
        Ok(url) => url,
        Err(_) => im_bridge_fakes::postgres::url()
            .expect("PostgreSQL: set IM_BRIDGE_BENCH_POSTGRES or install its server binaries")
            .to_owned(),
    };
    let (admin, connection) = tokio_postgres::connect(&base, tokio_postgres::NoTls)
        .await
        .expect("connecting to the bench server");
    tokio::spawn(connection);
    let schema = format!("im_bridge_budget_bench_{:016x}", rand::random::<u64>());
    admin
        .batch_execute(&format!("CREATE SCHEMA {schema}"))
        .await
        .expect("creating the bench schema");
    let separator = if base.contains('?') { '&' } else { '?' };
    let url = format!("{base}{separator}options=-c%20search_path%3D{schema}");
    let mut stores = Vec::new();
    for _ in 0..REPLICAS {
        let config =
            im_bridge::store::postgres::parse_url(&im_bridge_channel::Secret::new(url.clone()))
                .expect("the bench URL");
        let store = PostgresStore::connect_with(config, PostgresOptions::default())
            .await
            .expect("the store connects");
        stores.push(Arc::new(store) as Arc<dyn Store>);
    }

    // Warm the pools and the prepared statements.
    for store in &stores {
        for _ in 0..50 {
            store
                .take_tokens("telegram:bot", &ENDLESS, 1)
                .await
                .expect("a take");
        }
    }

    let mut alone = Vec::with_capacity(TAKES);
    let started = Instant::now();
    for _ in 0..TAKES {
        let at = Instant::now();
        stores[0]
            .take_tokens("telegram:bot", &ENDLESS, 1)
            .await
            .expect("a take");
        alone.push(at.elapsed());
    }
    report("Postgres, one caller", started.elapsed(), alone);

    let started = Instant::now();
    let each = TAKES / (REPLICAS * CALLERS);
    let tasks: Vec<_> = stores
        .iter()
        .flat_map(|store| (0..CALLERS).map(move |_| store.clone()))
        .map(|store| {
            tokio::spawn(async move {
                let mut times = Vec::with_capacity(each);
                for _ in 0..each {
                    let at = Instant::now();
                    store
                        .take_tokens("telegram:bot", &ENDLESS, 1)
                        .await
                        .expect("a take");
                    times.push(at.elapsed());
                }
                times
            })
        })
        .collect();
    let mut contended = Vec::with_capacity(TAKES);
    for task in tasks {
        contended.extend(task.await.expect("the caller finished"));
    }
    report(
        &format!("Postgres, {REPLICAS} replicas x {CALLERS} callers on one budget"),
        started.elapsed(),
        contended,
    );

    for store in &stores {
        store.close().await.expect("closing");
    }
    admin
        .batch_execute(&format!("DROP SCHEMA {schema} CASCADE"))
        .await
        .expect("dropping the bench schema");
}

fn report(what: &str, elapsed: Duration, mut times: Vec<Duration>) {
    times.sort();
    let at = |q: f64| times[((times.len() as f64 - 1.0) * q) as usize];
    println!(
        "{what}: {} takes in {:.2} s = {:.0} takes/s; latency p50 {:?} p99 {:?} max {:?}",
        times.len(),
        elapsed.as_secs_f64(),
        times.len() as f64 / elapsed.as_secs_f64(),
        at(0.5),
        at(0.99),
        at(1.0),
    );
}
