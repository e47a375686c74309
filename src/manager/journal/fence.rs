//! The journal's fence: on a store several replicas share, this process publishes an
//! entry's final only while the entry is provably its own, so a replica cut off from the
//! store for longer than its lease does not answer a message another replica took over and
//! answers too.
//!
//! # Why it holds
//!
//! Another replica claims an entry only once its lease ran out a whole lease ago
//! ([`Store::journal_claim`](crate::store::Store::journal_claim)), judged by the store's
//! clock. The lease runs from when the store wrote it, which is no earlier than when this
//! process sent the renewal (or the admission, or the claim). So while less than a lease
//! has passed on this process's monotonic clock since it sent its last renewal that went
//! through, nobody else can hold the entry: that is the renewal clock [`Fence`] keeps (an
//! atomic, read without a store round trip), less [`MARGIN_DIVISOR`]'s safety margin for
//! the time a reply still takes between the check and the platform call.
//!
//! A final is checked just before its delivery (the lane's [`Gate`]): refused, it fails
//! for now ([`WITHHELD`](crate::bus::WITHHELD)) and waits in the entry as any final that failed for now does;
//! its retry waits until a renewal went through again, then saves the entry, which tells
//! whether it is still this process's (delivered then) or was taken over (left to the
//! replica that took it, which delivers it from what was written ahead, or follows the
//! run). A save that finds the entry taken (or dropped by an operator) marks it lost: the
//! process no longer acts for it at all, no final and no remove.
//!
//! On a store only one process opens (SQLite, whose lock file keeps a second one out)
//! nobody can take an entry over, so the fence never withholds there.
//!
//! What it cannot promise: a final that passed the gate and then spends longer than the
//! margin plus the claim's grace (another lease) inside the delivery engine (a long
//! `Retry-After`) may still land after another replica took the entry; and a final whose
//! delivery landed while the store was out of reach is delivered again by the replica that
//! takes the entry over (as after a crash: the same edit of the same message where the
//! platform edits, or a send with the same key).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use super::Entry;
use crate::bus::Gate;

/// The safety margin is the lease divided by this: with the default 15 s lease, renewed
/// every 5 s, finals are withheld once no renewal went through for 11.25 s (two renewals
/// in a row failed or were late).
const MARGIN_DIVISOR: u32 = 4;

/// The renewal clock of this process's journal leases (see the module docs).
pub(super) struct Fence {
    /// Whether another process could take an entry over (a shared store); otherwise the
    /// fence never withholds.
    enforced: bool,
    /// The clock's origin: the journal's creation, before this process held any entry.
    origin: Instant,
    /// When, in milliseconds after `origin`, the last renewal that went through was sent
    /// (0 until the first one: every entry was granted its lease after the origin).
    renewed_at: AtomicU64,
    /// How long after a renewal was sent the entries are provably this process's: the
    /// lease less the safety margin, in milliseconds.
    holds_for: u64,
    /// Woken by each renewal that went through: what a withheld final's retry waits for.
    renewed: Notify,
}

impl Fence {
    /// The fence of entries leased for `lease`, `enforced` on a store replicas share.
    pub(super) fn new(lease: Duration, enforced: bool) -> Self {
        let holds_for = lease.saturating_sub(lease / MARGIN_DIVISOR);
        Self {
            enforced,
            origin: Instant::now(),
            renewed_at: AtomicU64::new(0),
            holds_for: u64::try_from(holds_for.as_millis()).unwrap_or(u64::MAX),
            renewed: Notify::new(),
        }
    }

    /// Now, on the fence's clock: what a renewal notes before it is sent.
    pub(super) fn now(&self) -> u64 {
        u64::try_from(self.origin.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// A renewal sent at `sent` (from [`Fence::now`]) went through.
    pub(super) fn renewed(&self, sent: u64) {
        self.renewed_at.fetch_max(sent, Ordering::AcqRel);
        self.renewed.notify_waiters();
    }

    /// `None` while this process's entries are provably its own; else how long ago the
    /// last renewal that went through was sent.
    pub(super) fn lapsed(&self) -> Option<Duration> {
        if !self.enforced {
            return None;
        }
        let since = self
            .now()
            .saturating_sub(self.renewed_at.load(Ordering::Acquire));
        (since >= self.holds_for).then(|| Duration::from_millis(since))
    }

    /// Waits until the entries are provably this process's again (a renewal went through).
    pub(super) async fn holds_again(&self) {
        loop {
            let renewed = self.renewed.notified();
            tokio::pin!(renewed);
            renewed.as_mut().enable();
            if self.lapsed().is_none() {
                return;
            }
            renewed.await;
        }
    }
}

/// What an entry knows of its ownership beyond the renewal clock.
#[derive(Default)]
pub(super) struct Owned {
    /// A save found the entry taken over by another holder, or dropped by an operator:
    /// this process no longer acts for it.
    lost: AtomicBool,
    /// A final of it was withheld because the lease lapsed: if it turns out lost, another
    /// replica most likely took it over and answers, so this one tells the channel nothing.
    lapsed: AtomicBool,
}

impl Entry {
    /// A save found the entry no longer this process's.
    pub(super) fn lose(&self) {
        self.0.owned.lost.store(true, Ordering::Release);
    }

    /// Whether a save found the entry no longer this process's.
    pub(super) fn lost(&self) -> bool {
        self.0.owned.lost.load(Ordering::Acquire)
    }

    /// Whether a final of this entry was withheld because the lease lapsed.
    pub(super) fn lapsed(&self) -> bool {
        self.0.owned.lapsed.load(Ordering::Acquire)
    }

    /// Whether a final of this entry may go out now: the entry was not found lost and the
    /// renewal clock proves it this process's. Logged when not (never the text).
    pub(super) fn may_publish(&self, final_id: u32) -> bool {
        if self.lost() {
            tracing::info!(
                final_id,
                "Withheld a final: its journal entry was taken over or dropped."
            );
            return false;
        }
        let Some(since) = self.0.shared.fence.lapsed() else {
            return true;
        };
        self.0.owned.lapsed.store(true, Ordering::Release);
        let (channel, state) = {
            let progress = self.progress();
            let record = &progress.record;
            (record.message.channel_name.clone(), record.state)
        };
        tracing::warn!(
            %channel,
            ?state,
            final_id,
            since_renewal_ms = u64::try_from(since.as_millis()).unwrap_or(u64::MAX),
            lease_ms = u64::try_from(self.0.shared.config.lease.as_millis()).unwrap_or(u64::MAX),
            "Withheld a final: the journal lease was not renewed in time, so another replica may have taken the message over; it is delivered once this one renews, unless another took it."
        );
        false
    }

    /// The turn came to rest with the entry lost: whoever holds it now (or the operator who
    /// dropped it) has its finals; this process neither retries nor removes it.
    pub(super) fn leave_to_its_owner(&self) {
        tracing::info!(
            "A journal entry is no longer this process's: its finals are left to the one that holds it."
        );
    }

    /// The gate that asks [`Entry::may_publish`] just before final `id` goes out.
    pub(super) fn gate(&self, id: u32) -> Gate {
        let entry = self.clone();
        Box::new(move || entry.may_publish(id))
    }

    /// Waits until the entry is provably this process's again, if it lapsed, and checks
    /// with a save that nobody took it meanwhile: `false` when it is no longer this
    /// process's. A save that fails leaves the renewal clock to say so.
    pub(super) async fn still_ours(&self) -> bool {
        if self.lost() {
            return false;
        }
        let fence = &self.0.shared.fence;
        if fence.lapsed().is_none() {
            return true;
        }
        self.0.owned.lapsed.store(true, Ordering::Release);
        tracing::info!("A pending final waits until this process renews its journal lease.");
        fence.holds_again().await;
        self.save().await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::Ordering;
    use std::time::Duration;

    use im_bridge_channel::{Capabilities, InboundMessage};
    use tokio::time::Instant;

    use super::super::retry::tests::{Rig, rig_over};
    use super::super::{Admission, Entry, Final, JournalConfig};
    use crate::bus::WITHHELD;
    use crate::store::faulty::Faulty;
    use crate::store::{JournalState, SqliteStore, Store};

    /// The lease of both replicas here: short, so that it runs out (and the claim's grace
    /// after it) while the test waits.
    const LEASE: Duration = Duration::from_secs(1);
    /// How long any wait here may take.
    const DEADLINE: Duration = Duration::from_secs(10);

    /// Two replicas on one real SQLite store: `a`, told the store is shared, whose
    /// renewals fail while `cut_off.renewals_fail` is set, and `b`, which never renews
    /// (its fence, on a store it is not told is shared, never withholds).
    struct Replicas {
        cut_off: Arc<Faulty>,
        a: Rig,
        b: Rig,
        _dir: tempfile::TempDir,
    }

    async fn replicas() -> Replicas {
        let dir = tempfile::tempdir().unwrap();
        let sqlite: Arc<dyn Store> =
            Arc::new(SqliteStore::open(&dir.path().join("s.db")).await.unwrap());
        let cut_off = Arc::new(Faulty::new(sqlite.clone()).shared());
        let config = JournalConfig {
            lease: LEASE,
            final_retry: Duration::from_secs(3600),
        };
        let caps = Capabilities::final_only(1000);
        let a = rig_over(cut_off.clone(), config.clone(), caps);
        let b = rig_over(sqlite, config, caps);
        a.deliver_all();
        b.deliver_all();
        Replicas {
            cut_off,
            a,
            b,
            _dir: dir,
        }
    }

    /// Waits, polling, until `done` says so.
    async fn wait_until(what: &str, done: impl Fn() -> bool) {
        let until = Instant::now() + DEADLINE;
        while !done() {
            assert!(Instant::now() < until, "never: {what}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Admits a message on `rig`'s journal.
    async fn admit(rig: &Rig) -> (InboundMessage, Entry) {
        let msg = InboundMessage::new("flaky", "4242", "u1", "question");
        let Admission::New {
            entry: Some(entry), ..
        } = rig.journal.admit(&msg, None, true).await
        else {
            panic!("a chat message is journaled");
        };
        (msg, entry)
    }

    /// The turn of `entry` publishes `msg`'s answer as its one final and ends; returns
    /// once the entry came to rest.
    async fn answer(rig: &Rig, msg: &InboundMessage, entry: &Entry) {
        let mut out = msg.reply("the answer".to_owned(), true);
        let hooks = entry.track(&mut out, "", Final::Answer).await;
        rig.outbound.publish_hooked(out, hooks).await;
        entry.turn_ended().await;
        entry.at_rest(DEADLINE).await;
    }

    /// Claims on `rig` until the other replica's entries are taken (their lease ran out a
    /// whole lease ago).
    async fn take_over(rig: &Rig) -> Vec<Entry> {
        let until = Instant::now() + DEADLINE;
        loop {
            let claimed = rig.journal.claim(false).await;
            if !claimed.is_empty() {
                return claimed;
            }
            assert!(Instant::now() < until, "never taken over");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// A replica whose renewals fail for longer than its lease withholds its final
    /// (written ahead, so the entry keeps it); the replica that takes the entry over
    /// delivers it, once; and the first one, renewing again, finds the entry gone and
    /// sends nothing.
    #[tokio::test]
    async fn a_replica_that_cannot_renew_withholds_its_final_for_the_one_that_takes_over() {
        let Replicas { cut_off, a, b, .. } = replicas().await;
        let (msg, entry) = admit(&a).await;
        cut_off.renewals_fail.store(true, Ordering::SeqCst);
        a.journal.renew().await;
        let fence = &a.journal.shared.fence;
        wait_until("a's lease lapsed by its own clock", || {
            fence.lapsed().is_some()
        })
        .await;

        answer(&a, &msg, &entry).await;
        let pending = a
            .wait_entry("the withheld final", |e| {
                e.record.last_error.as_deref() == Some(WITHHELD)
            })
            .await;
        assert_eq!(pending.record.state, JournalState::FinalPending);
        assert_eq!(pending.record.finals.len(), 1, "written ahead, kept");
        assert_eq!(a.sends(), 0, "withheld, not sent");

        let claimed = take_over(&b).await;
        assert_eq!(claimed.len(), 1);
        for entry in &claimed {
            entry.retry_finals_later();
        }
        b.wait_empty().await;
        assert_eq!(b.sends(), 1, "delivered once, by the replica that took it");

        // Renewing again, a's retry finds the entry no longer its own and stops.
        cut_off.renewals_fail.store(false, Ordering::SeqCst);
        a.journal.renew().await;
        let id = entry.0.id.clone();
        wait_until("a's retry gave up the entry", || {
            !super::super::relock(&a.journal.shared.wakers).contains_key(&id)
        })
        .await;
        assert_eq!(a.sends(), 0, "never sent by the replica cut off");
        a.journal.shut_down(DEADLINE).await;
        b.journal.shut_down(DEADLINE).await;
        assert_eq!(b.sends(), 1);
    }

    /// A replica that renews again after its entry was taken over (its clock says the
    /// lease holds) learns from its next save that the entry is no longer its own: it
    /// neither publishes the final nor removes the entry the other replica now works on.
    #[tokio::test]
    async fn a_replica_whose_entry_was_taken_over_neither_answers_nor_removes_it() {
        let Replicas { cut_off, a, b, .. } = replicas().await;
        let (msg, entry) = admit(&a).await;
        cut_off.renewals_fail.store(true, Ordering::SeqCst);
        let claimed = take_over(&b).await;
        assert_eq!(claimed.len(), 1);
        cut_off.renewals_fail.store(false, Ordering::SeqCst);
        a.journal.renew().await;
        assert_eq!(
            a.journal.shared.fence.lapsed(),
            None,
            "a's clock says it holds"
        );

        answer(&a, &msg, &entry).await;
        assert_eq!(a.sends(), 0, "not sent by the replica it was taken from");
        let listed = b.store.journal_list(0, 10).await.unwrap();
        assert_eq!(listed.len(), 1, "still there for the replica that took it");
        assert_eq!(listed[0].record.state, JournalState::Admitted);
        assert!(listed[0].record.finals.is_empty(), "nothing of a's written");
        a.journal.shut_down(DEADLINE).await;
        b.journal.shut_down(DEADLINE).await;
    }

    /// On a store only one process opens, nobody can take an entry over: a final goes out
    /// however long renewals have failed.
    #[tokio::test]
    async fn a_store_only_one_process_opens_never_withholds() {
        let dir = tempfile::tempdir().unwrap();
        let sqlite: Arc<dyn Store> =
            Arc::new(SqliteStore::open(&dir.path().join("s.db")).await.unwrap());
        let failing = Arc::new(Faulty::new(sqlite));
        failing.renewals_fail.store(true, Ordering::SeqCst);
        let config = JournalConfig {
            lease: Duration::ZERO,
            final_retry: Duration::from_secs(3600),
        };
        let rig = rig_over(failing, config, Capabilities::final_only(1000));
        rig.deliver_all();
        let (msg, entry) = admit(&rig).await;
        rig.journal.renew().await;
        answer(&rig, &msg, &entry).await;
        rig.wait_empty().await;
        assert_eq!(rig.sends(), 1);
        rig.journal.shut_down(DEADLINE).await;
    }
}
