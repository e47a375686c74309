//! Several replicas sharing the Postgres store: Telegram long polling runs on the holder of
//! the transport lease only, and a standby takes over when the holder stops. A single
//! daemon on SQLite takes no lease at all.

use std::time::Duration;

use im_bridge::config::StoreLocation;
use im_bridge::daemon::{DaemonError, DaemonExit};
use im_bridge::simulator::{Script, Simulator, SimulatorConfig};
use im_bridge_channel::{Secret, WebhookHost};
use im_bridge_fakes::telegram::{Call, FakeTelegram, Incoming};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::USER;
use super::harness::{DEADLINE, Tg, spawn_daemon};
use crate::support::PgSchema;

/// Stops a daemon as a signal would and checks it stopped cleanly.
async fn stop_cleanly(
    stop: CancellationToken,
    daemon: JoinHandle<Result<DaemonExit, DaemonError>>,
) {
    crate::support::stop_cleanly(stop, daemon, DEADLINE).await;
}

#[tokio::test]
async fn replicas_sharing_postgres_poll_one_at_a_time_and_hand_over() {
    let fake = FakeTelegram::start().await.unwrap();
    let sim = Simulator::start(SimulatorConfig::default()).await.unwrap();
    let Some(pg) = PgSchema::create("im_bridge_tg").await else {
        return;
    };
    let url = pg.url.clone();
    let store = || StoreLocation::Postgres(Secret::new(url.clone()));
    // Renewed every second; a standby retries every second.
    let ttl = Duration::from_secs(3);
    let (stop_a, a) = spawn_daemon(
        &sim,
        store(),
        ttl,
        Tg::polling_channel(&fake),
        WebhookHost::new(),
    );
    fake.wait_for_call("replica A polls", DEADLINE, |c| c.method == "getUpdates")
        .await
        .unwrap();
    // B starts while A holds the lease: it stands by without touching Telegram.
    let (stop_b, b) = spawn_daemon(
        &sim,
        store(),
        ttl,
        Tg::polling_channel(&fake),
        WebhookHost::new(),
    );
    sim.script_next_run(Script::with_answer("From the leader.").chunks(1));
    fake.inject(Incoming::private(USER, "first"));
    let calls = fake
        .wait_for("the first answer", DEADLINE, |calls| {
            calls
                .iter()
                .any(|c| c.ok() && c.text() == Some("From the leader."))
        })
        .await
        .unwrap();
    let conflicts = |calls: &[Call]| {
        calls
            .iter()
            .filter(|c| c.method == "getUpdates" && c.status == 409)
            .count()
    };
    assert_eq!(conflicts(&calls), 0, "only one replica polls");
    let identified = |calls: &[Call]| calls.iter().filter(|c| c.method == "getMe").count();
    assert_eq!(
        identified(&calls),
        1,
        "the standby has not started its transport"
    );

    // A stops and hands the lease over; B takes the transport.
    stop_cleanly(stop_a, a).await;
    sim.script_next_run(Script::with_answer("From the standby.").chunks(1));
    fake.inject(Incoming::private(USER, "second"));
    let calls = fake
        .wait_for("the second answer", DEADLINE, |calls| {
            calls
                .iter()
                .any(|c| c.ok() && c.text() == Some("From the standby."))
        })
        .await
        .unwrap();
    assert_eq!(
        identified(&calls),
        2,
        "B started its transport on taking over"
    );
    stop_cleanly(stop_b, b).await;
    pg.drop().await;
}

#[tokio::test]
async fn a_single_daemon_on_sqlite_polls_at_once_even_after_a_crash() {
    use im_bridge::store::{SqliteStore, Store};
    let fake = FakeTelegram::start().await.unwrap();
    let sim = Simulator::start(SimulatorConfig::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bridge.db");
    // A previous run crashed while holding a long lease.
    let store = SqliteStore::open(&path).await.unwrap();
    assert!(
        store
            .acquire_lease("transport:telegram", "crashed", Duration::from_secs(3600))
            .await
            .unwrap()
    );
    store.close().await.unwrap();
    // Its file lock already keeps other daemons out: no lease is waited for.
    let (stop, daemon) = spawn_daemon(
        &sim,
        StoreLocation::Sqlite(path),
        Duration::from_secs(3600),
        Tg::polling_channel(&fake),
        WebhookHost::new(),
    );
    fake.wait_for_call("the restarted daemon polls", DEADLINE, |c| {
        c.method == "getUpdates"
    })
    .await
    .unwrap();
    stop_cleanly(stop, daemon).await;
}
