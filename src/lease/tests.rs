//! The transport lease on a real SQLite store told it is shared (`store/faulty.rs`), on real
//! time with a short lease: a holder whose store stops answering stops its transport
//! before the lease it last took can run out, and takes it up again once the store answers.

use std::num::NonZeroUsize;

use async_trait::async_trait;
use im_bridge_channel::{
    Capabilities, ChannelIdentity, ChannelResult, SendTarget, SentMessage, inbound_queue,
};
use tokio::sync::watch;

use super::*;
use crate::store::SqliteStore;
use crate::store::faulty::Faulty;

/// The lease here: renewed every 400 ms, the transport stopped 900 ms after a renewal
/// unless another went through.
const TTL: Duration = Duration::from_millis(1200);
/// How long any wait here may take.
const DEADLINE: Duration = Duration::from_secs(10);

/// A transport that serves until told to stop, recording when each run started and
/// stopped.
struct Serving {
    identity: ChannelIdentity,
    runs: watch::Sender<Vec<(Instant, Option<Instant>)>>,
}

#[async_trait]
impl Channel for Serving {
    fn identity(&self) -> &ChannelIdentity {
        &self.identity
    }
    async fn run(&self, _: InboundSink, shutdown: CancellationToken) -> ChannelResult<ChannelExit> {
        self.runs
            .send_modify(|runs| runs.push((Instant::now(), None)));
        shutdown.cancelled().await;
        self.runs.send_modify(|runs| {
            if let Some(run) = runs.last_mut() {
                run.1 = Some(Instant::now());
            }
        });
        Ok(ChannelExit::Stopped)
    }
    async fn send_text(&self, _: SendTarget<'_>, _: &str) -> ChannelResult<SentMessage> {
        Err(ChannelError::Stopped)
    }
}

/// Waits until `runs` satisfies `done`; returns them.
async fn wait_runs(
    runs: &mut watch::Receiver<Vec<(Instant, Option<Instant>)>>,
    what: &str,
    done: impl FnMut(&Vec<(Instant, Option<Instant>)>) -> bool,
) -> Vec<(Instant, Option<Instant>)> {
    tokio::time::timeout(DEADLINE, runs.wait_for(done))
        .await
        .unwrap_or_else(|_| panic!("never: {what}"))
        .unwrap()
        .clone()
}

#[tokio::test]
async fn a_holder_whose_renewal_does_not_answer_stops_its_transport_before_its_lease_runs_out() {
    let dir = tempfile::tempdir().unwrap();
    let sqlite: Arc<dyn Store> =
        Arc::new(SqliteStore::open(&dir.path().join("s.db")).await.unwrap());
    let store = Arc::new(Faulty::new(sqlite).shared());
    let (runs, mut watched) = watch::channel(Vec::new());
    let channel = Arc::new(Serving {
        identity: ChannelIdentity::always_connected("serving", Capabilities::final_only(100)),
        runs,
    });
    let (sink, _queue) = inbound_queue(NonZeroUsize::MIN);
    let shutdown = CancellationToken::new();
    let lease = Lease {
        store: store.clone(),
        holder: holder_id(),
        ttl: TTL,
        standby: Standby::default(),
    };
    let task = tokio::spawn(run_exclusive(channel, sink, shutdown.clone(), lease));
    wait_runs(&mut watched, "the transport started", |r| !r.is_empty()).await;
    let granted = || store.leases_granted.lock().unwrap().clone();
    // Renewed twice: then the store stops answering.
    let until = Instant::now() + DEADLINE;
    while granted().len() < 3 {
        assert!(Instant::now() < until, "never renewed");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    store.leases_hang.send_replace(true);
    let runs = wait_runs(&mut watched, "the transport stopped", |r| r[0].1.is_some()).await;
    let stopped = runs[0].1.unwrap();
    let last = *granted().last().unwrap();
    assert!(
        stopped < last + TTL,
        "stopped {:?} after the last lease was taken, which lasts {TTL:?}",
        stopped - last
    );
    assert_eq!(runs.len(), 1, "not started again while the store is silent");
    store.leases_hang.send_replace(false);
    wait_runs(&mut watched, "the transport started again", |r| {
        r.len() == 2
    })
    .await;
    shutdown.cancel();
    let exit = tokio::time::timeout(DEADLINE, task).await.unwrap().unwrap();
    assert!(matches!(exit, Ok(ChannelExit::Stopped)), "{exit:?}");
}
