//! The transport lease on a real SQLite store told it is shared (`store/faulty.rs`), on real
//! time with a short lease: a holder whose store stops answering stops its transport
//! before the lease it last took can run out, and takes it up again once the store
//! answers; a store slow but in time, or failing for a while, keeps it running; a lease
//! taken by a call that answered too late is not run on, and such a replica leaves the
//! lease to another; a shutdown does not wait for a store that does not answer.

use std::num::NonZeroUsize;
use std::sync::atomic::Ordering;

use async_trait::async_trait;
use im_bridge_channel::{
    Capabilities, ChannelIdentity, ChannelResult, SendTarget, SentMessage, inbound_queue,
};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::*;
use crate::store::SqliteStore;
use crate::store::faulty::Faulty;

/// The lease here: renewed 667 ms after each grant; the transport stopped 1.5 s after a
/// grant unless another came, 0.5 s before the lease could run out.
const TTL: Duration = Duration::from_secs(2);
/// How long any wait here may take.
const DEADLINE: Duration = Duration::from_secs(10);

/// When each run of a transport started and, once it did, stopped.
type Runs = Vec<(Instant, Option<Instant>)>;

/// A transport that serves until told to stop, recording its runs.
struct Serving {
    identity: ChannelIdentity,
    runs: watch::Sender<Runs>,
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

/// [`run_exclusive`] over a [`Serving`] transport on a shared [`Faulty`] SQLite store.
struct Rig {
    store: Arc<Faulty>,
    runs: watch::Receiver<Runs>,
    shutdown: CancellationToken,
    task: JoinHandle<Result<ChannelExit, ChannelError>>,
    /// The SQLite store under the faults, and where it lives.
    sqlite: (Arc<dyn Store>, Arc<tempfile::TempDir>),
}

impl Rig {
    /// The store, with `faults` set on it before the transport's lease is first asked for.
    async fn start(faults: impl FnOnce(&Faulty)) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let sqlite: Arc<dyn Store> =
            Arc::new(SqliteStore::open(&dir.path().join("s.db")).await.unwrap());
        Self::on((sqlite, Arc::new(dir)), faults)
    }

    /// Another replica, on the same SQLite store (with faults of its own).
    fn beside(&self, faults: impl FnOnce(&Faulty)) -> Self {
        Self::on(self.sqlite.clone(), faults)
    }

    fn on(sqlite: (Arc<dyn Store>, Arc<tempfile::TempDir>), faults: impl FnOnce(&Faulty)) -> Self {
        let store = Arc::new(Faulty::new(sqlite.0.clone()).shared());
        faults(&store);
        let (runs, watched) = watch::channel(Vec::new());
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
        Self {
            store,
            runs: watched,
            shutdown,
            task,
            sqlite,
        }
    }

    /// Waits until the runs satisfy `done`; returns them.
    async fn wait_runs(&mut self, what: &str, done: impl FnMut(&Runs) -> bool) -> Runs {
        tokio::time::timeout(DEADLINE, self.runs.wait_for(done))
            .await
            .unwrap_or_else(|_| panic!("never: {what}"))
            .unwrap()
            .clone()
    }

    /// When each lease call was made, in order.
    fn calls(&self) -> Vec<Instant> {
        self.store.lease_calls.lock().unwrap().clone()
    }

    /// When each granted lease call was made, in order.
    fn granted(&self) -> Vec<Instant> {
        self.store.leases_granted.lock().unwrap().clone()
    }

    /// Sets `fault` on the store, then waits until `n` more lease calls were made.
    async fn faulted_for_calls(&self, n: usize, fault: impl FnOnce(&Faulty)) {
        let before = self.calls().len();
        fault(&self.store);
        self.wait_store("lease calls under the fault", |rig| {
            rig.calls().len() >= before + n
        })
        .await;
    }

    /// Waits, polling, until `done` says so.
    async fn wait_store(&self, what: &str, done: impl Fn(&Self) -> bool) {
        let until = Instant::now() + DEADLINE;
        while !done(self) {
            assert!(Instant::now() < until, "never: {what}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// [`Rig::start`] without faults, once the transport runs.
    async fn running() -> Self {
        let mut rig = Self::start(|_| {}).await;
        rig.wait_runs("the transport started", |r| !r.is_empty())
            .await;
        rig
    }

    /// Stops it, once sure the transport ran once and never stopped.
    async fn stop_having_served_throughout(self) {
        let runs = self.runs.borrow().clone();
        assert!(
            runs.len() == 1 && runs[0].1.is_none(),
            "never stopped: {runs:?}"
        );
        self.stop().await;
    }

    async fn stop(self) {
        self.shutdown.cancel();
        let exit = tokio::time::timeout(DEADLINE, self.task).await.unwrap();
        assert!(matches!(exit, Ok(Ok(ChannelExit::Stopped))), "{exit:?}");
    }
}

#[tokio::test]
async fn a_holder_whose_renewal_does_not_answer_stops_its_transport_before_its_lease_runs_out() {
    let mut rig = Rig::running().await;
    // Renewed twice: then the store stops answering.
    rig.wait_store("renewed twice", |rig| rig.granted().len() >= 3)
        .await;
    rig.store.leases_hang.send_replace(true);
    let runs = rig
        .wait_runs("the transport stopped", |r| r[0].1.is_some())
        .await;
    let (stopped, last) = (runs[0].1.unwrap(), *rig.granted().last().unwrap());
    assert!(
        stopped < last + TTL,
        "stopped {:?} after the last lease was asked for, which lasts {TTL:?}",
        stopped - last
    );
    // Standing by: taken up again once the store answers.
    rig.store.leases_hang.send_replace(false);
    rig.wait_runs("the transport started again", |r| r.len() == 2)
        .await;
    rig.stop().await;
}

#[tokio::test]
async fn a_lease_taken_by_a_call_that_answered_too_late_is_not_run_on() {
    // The store takes the lease at once but answers only once the next call was made: the
    // first call is abandoned a third of a lease after it was sent, and the transport
    // starts on the second, made once the lease the first took ran out.
    let mut rig = Rig::start(|store| {
        store.leases_late.send_replace(true);
    })
    .await;
    rig.wait_store("a second call", |rig| rig.calls().len() >= 2)
        .await;
    rig.store.leases_late.send_replace(false);
    let runs = rig
        .wait_runs("the transport started", |r| !r.is_empty())
        .await;
    let (calls, started) = (rig.calls(), runs[0].0);
    // Abandoned a third of a lease after it was sent, then a whole lease and a third of
    // standing back: 3.3 s.
    assert!(
        (TTL..TTL * 2).contains(&(calls[1] - calls[0])),
        "the first call abandoned early, and the second made once its lease ran out: {calls:?}"
    );
    assert!(
        calls[1] <= started && started < calls[1] + TTL / 3,
        "started on the second call's lease, with most of it left: {:?} after it",
        started - calls[1]
    );
    rig.stop().await;
}

#[tokio::test]
async fn a_store_slow_but_in_time_keeps_the_transport_running() {
    // Each call takes a quarter of a lease: a renewal made a third of a lease after the one
    // before answered would not make it in time; one made a third after it was granted does.
    let rig = Rig::running().await;
    *rig.store.leases_slow.lock().unwrap() = TTL / 4;
    rig.wait_store("renewed four times", |rig| rig.granted().len() >= 5)
        .await;
    rig.stop_having_served_throughout().await;
}

#[tokio::test]
async fn renewals_that_fail_for_a_while_are_tried_again_until_three_quarters_of_the_lease() {
    let rig = Rig::running().await;
    // Two renewals in a row fail (a third and five twelfths of a lease after the grant),
    // then the store is back.
    rig.faulted_for_calls(2, |store| store.leases_fail.store(true, Ordering::SeqCst))
        .await;
    rig.store.leases_fail.store(false, Ordering::SeqCst);
    let granted = rig.granted().len();
    rig.wait_store("renewed twice again", |rig| {
        rig.granted().len() >= granted + 2
    })
    .await;
    rig.stop_having_served_throughout().await;
}

#[tokio::test]
async fn a_shutdown_during_a_renewal_that_does_not_answer_stops_at_once() {
    let rig = Rig::running().await;
    rig.faulted_for_calls(1, |store| {
        store.leases_hang.send_replace(true);
    })
    .await;
    // The transport serves on while the renewal waits, and stops when told, without
    // waiting for the renewal's deadline (up to 0.83 s away) nor long for the release,
    // which does not answer either.
    let asked = Instant::now();
    rig.stop().await;
    assert!(asked.elapsed() < TTL / 5, "{:?}", asked.elapsed());
}

#[tokio::test]
async fn a_replica_whose_store_answers_too_late_leaves_the_lease_to_another() {
    let a = Rig::running().await;
    let mut b = a.beside(|_| {});
    // A's store goes on taking the lease for it, but answers late: A stops its transport,
    // and stands back long enough for the lease its late takes renewed to run out.
    a.store.leases_late.send_replace(true);
    b.wait_runs("b took the lease over", |r| !r.is_empty())
        .await;
    let mut a = a;
    let runs = a.wait_runs("a stopped", |r| r[0].1.is_some()).await;
    assert_eq!(runs.len(), 1, "a did not start again: {runs:?}");
    assert!(
        runs[0].1.unwrap() <= b.runs.borrow()[0].0,
        "a stopped before b started"
    );
    a.store.leases_late.send_replace(false);
    a.stop().await;
    b.stop_having_served_throughout().await;
}
