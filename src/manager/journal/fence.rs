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
//! through, nobody else can take an entry that renewal renewed: that is the renewal clock
//! [`Fence`] keeps (an atomic, read without a store round trip), less
//! [`MARGIN_DIVISOR`]'s safety margin for the time a reply still takes between the check
//! and the platform call.
//!
//! The clock proves only the entries the renewal renewed: it extends the leases this
//! process still holds, not one another replica took over before it ran. So a renewal
//! returns the ids it renewed ([`Store::journal_renew`](crate::store::Store::journal_renew)),
//! and every entry of this process (`Shared::mine`) admitted, claimed or taken up before
//! the renewal was sent (stamped once the store said so) that it did not renew is marked
//! lost *before* the clock restarts from it. Entries that came later are judged by the
//! next renewal; the lease their admission or claim wrote runs from when that call was
//! sent, at most a store call's timeout before the renewal, which the claim's grace (a
//! whole lease, the claiming replica's) and the margin below (a quarter of this
//! process's) cover together when they outlast the call's bound, as they do at the
//! default lease (18.75 s against 15 s). With shorter leases (`bridge.store_lease_seconds`,
//! down to 5 s: 6.25 s) an admission or claim whose statement took longer than that sum
//! to commit (a stalled database) is not covered. Entries this process removed, gave up
//! or left held for their chat are no longer judged. Hence a final that passes the gate
//! belongs to an entry either renewed by the renewal the clock runs from or newer than
//! it: nobody else can hold it, however long the final waited in its lane, and without
//! a store call per final. A save that fails therefore still counts as this process's:
//! the renewal that lets the final go out judged the entry.
//!
//! A final is checked just before its delivery (the lane's [`Gate`]) and before each
//! platform call that writes it until one landed: refused, it fails
//! for now ([`WITHHELD`](crate::bus::WITHHELD)) and waits in the entry as any final that
//! failed for now does; its retry waits until a renewal went through again (which marks
//! the entry lost if it was taken), then saves the entry, which tells whether an operator
//! dropped it meanwhile. A save that finds the entry taken (or dropped by an operator), or
//! a renewal that did not renew it, marks it lost: the process no longer acts for it at
//! all, no final, no remove, and no release of its message's dedupe keys (the replica that
//! took it answers the message; a redelivery admitted again would be answered twice).
//!
//! A lost entry's channel hears of its turn's end from whoever has it: when the renewal
//! clock lapsed since the entry was last proven this process's (by a renewal or a save),
//! it was most likely taken over, and the replica that took it tells the channel, so the
//! end held back here for a retry is let go without a word ([`Entry::leave_to_its_owner`]);
//! otherwise an operator dropped it, and the end says the message went unanswered.
//!
//! The renewals run on a task of their own, every third of the lease
//! ([`Journal::keep_renewing`]), held up neither by the journal's other upkeep (a sweep or
//! claim that waits out its timeout) nor by the manager's loop; at shutdown they go on
//! while the lanes empty and stop, the one under way finished, before the leases are given
//! up ([`Journal::shut_down`]).
//!
//! On a store only one process opens (SQLite, whose lock file keeps a second one out)
//! nobody can take an entry over, so the renewal clock never withholds there; a renewal
//! that does not name an entry (an operator dropped it, or the journal's cap evicted it)
//! still marks it lost, there too, and its finals are not sent (nobody else answers such
//! an entry: the operator chose so, or the cap).
//!
//! # What it cannot promise
//!
//! - The gate is asked when the final's turn in its lane comes and again just before each
//!   platform call that writes it until one landed (the delivery engine's lowest layer,
//!   `Fenced`), so a final that waits out a long `Retry-After` or a rate budget is judged
//!   again after the wait. But a final of which a part landed is finished (its later
//!   messages, its files) whatever the gate says by then, and a single platform call that
//!   itself takes longer than the margin plus the claim's grace (another lease) may land:
//!   either may land after another replica took the entry, which sends the final again.
//! - A final whose delivery landed while the store was out of reach is delivered again by
//!   the replica that takes the entry over (as after a crash: the same edit of the same
//!   message where the platform edits, or a send with the same key).
//! - Whether a lost entry was taken over or dropped is judged by the renewal clock: one an
//!   operator dropped while the clock lapsed is taken for a takeover (the channel hears
//!   nothing from here); and a turn that released its dedupe keys before the loss was
//!   learnt does not get them back.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use super::{Entry, Journal, Shared, relock};
use crate::bus::Gate;
use crate::store::DedupeKey;

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
    /// When the last renewal that went through after a lapse (no renewal went through
    /// for `holds_for` before it) was sent, on the same clock (0: none yet): an entry last
    /// proven this process's before then may have been taken over meanwhile
    /// ([`Fence::lapsed_since`]).
    recovered_at: AtomicU64,
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
            recovered_at: AtomicU64::new(0),
            holds_for: u64::try_from(holds_for.as_millis()).unwrap_or(u64::MAX),
            renewed: Notify::new(),
        }
    }

    /// Now, on the fence's clock: what a renewal notes before it is sent.
    pub(super) fn now(&self) -> u64 {
        u64::try_from(self.origin.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// A renewal sent at `sent` (from [`Fence::now`]) went through, and the entries it
    /// did not renew were marked lost ([`Journal::renew`](super::Journal::renew)).
    pub(super) fn renewed(&self, sent: u64) {
        let before = self.renewed_at.fetch_max(sent, Ordering::AcqRel);
        if self.enforced && sent.saturating_sub(before) >= self.holds_for {
            self.recovered_at.fetch_max(sent, Ordering::AcqRel);
        }
        self.renewed.notify_waiters();
    }

    /// Whether the renewal clock lapsed (now, or at any time) since `proven`, when an entry
    /// was last proven this process's: if the entry turns out lost, another replica most
    /// likely took it over (it could only while the clock lapsed), rather than an operator
    /// dropping it. Never on a store only one process opens.
    pub(super) fn lapsed_since(&self, proven: u64) -> bool {
        self.lapsed().is_some() || self.recovered_at.load(Ordering::Acquire) > proven
    }

    /// `None` while this process's entries are provably its own (those the last renewal
    /// that went through renewed, and those newer than it; any it did not renew were
    /// marked lost first); else how long ago that renewal was sent.
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
pub(super) struct Owned {
    /// When, on the renewal clock, the entry was admitted, claimed or taken up by this
    /// process (stamped once the store said so): a renewal sent before then may not have
    /// seen it, so it is judged only by renewals sent later ([`Journal::renew`]).
    since: u64,
    /// When, on the renewal clock, the entry was last proven this process's: its admission
    /// (or claim), a save that went through, or a renewal that renewed it.
    proven: AtomicU64,
    /// A save found the entry taken over by another holder, or dropped by an operator, or
    /// a renewal that went through did not renew it: this process no longer acts for it.
    lost: AtomicBool,
}

impl Owned {
    /// An entry this process holds from `now` on (the renewal clock's).
    pub(super) fn new(now: u64) -> Self {
        Self {
            since: now,
            proven: AtomicU64::new(now),
            lost: AtomicBool::new(false),
        }
    }
}

impl Journal {
    /// Renews this process's lease on every entry it holds. The entries of this process
    /// (older than the renewal) that it did not renew were taken over or dropped before it
    /// ran: they are marked lost first, and only then does the renewal restart the clock
    /// finals are published under, from when it was sent, so a final that waited through
    /// a takeover never passes the gate on the fresh clock.
    pub(crate) async fn renew(&self) {
        renew(&self.shared).await;
    }

    /// Renews the leases every third of the lease from now on, on a task of its own: not
    /// held up by anything else the journal's upkeep does (a slow sweep or claim), nor by
    /// the manager's loop (which stops looking at its clock once a drain's queue ran
    /// empty), so finals are not withheld while the store answers. Stopped by
    /// [`Journal::shut_down`] before the leases go, or when the journal is dropped; a
    /// renewal under way is finished, never cut short.
    pub(crate) fn keep_renewing(&self) -> RenewingGuard<'_> {
        let guard = RenewingGuard(self);
        if !self.shared.renewals.is_empty() {
            // Already renewing: one loop is enough.
            return guard;
        }
        let shared = self.shared.clone();
        let every = (shared.config.lease / 3).max(Duration::from_millis(100));
        self.shared.renewals.spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            tick.reset();
            loop {
                tokio::select! {
                    biased;
                    () = shared.renewing.cancelled() => return,
                    _ = tick.tick() => {}
                }
                renew(&shared).await;
            }
        });
        guard
    }
}

/// Stops the renewals when dropped: held by the work that keeps the journal's entries
/// (the manager's run), so a run that ended without [`Journal::shut_down`] (it panicked,
/// or was dropped) does not leave a replica renewing leases it does no work for, which
/// would keep other replicas from taking its entries over.
#[must_use]
pub(crate) struct RenewingGuard<'a>(&'a Journal);

impl Drop for RenewingGuard<'_> {
    fn drop(&mut self) {
        self.0.shared.renewing.cancel();
    }
}

/// [`Journal::renew`].
pub(super) async fn renew(shared: &Shared) {
    let sent = shared.fence.now();
    match shared
        .store
        .journal_renew(&shared.holder, shared.config.lease)
        .await
    {
        Ok(renewed) => {
            judge(shared, sent, &renewed);
            shared.fence.renewed(sent);
        }
        Err(error) => tracing::warn!(%error, "Renewing the journal lease failed."),
    }
}

/// Marks lost the entries of this process that a renewal sent at `sent` should have
/// renewed and did not (`renewed`: the ids it did), and notes the others proven then.
/// Entries admitted, claimed or taken up after `sent` are left for the next renewal.
/// Forgets entries nothing works on any more.
fn judge(shared: &Shared, sent: u64, renewed: &[String]) {
    let renewed: HashSet<&str> = renewed.iter().map(String::as_str).collect();
    let mut lost = Vec::new();
    relock(&shared.mine).retain(|id, state| {
        let Some(state) = state.upgrade() else {
            return false;
        };
        if state.owned.since >= sent {
            return true;
        }
        if renewed.contains(id.as_str()) {
            state.owned.proven.fetch_max(sent, Ordering::AcqRel);
            return true;
        }
        lost.push(state);
        false
    });
    for state in lost {
        state.owned.lost.store(true, Ordering::Release);
        tracing::info!(
            "A journal entry was not renewed: it was taken over or dropped, so this process no longer acts for it."
        );
    }
}

impl Entry {
    /// Registers the entry as this process's, for renewals to judge ([`judge`]).
    pub(super) fn hold(&self) {
        relock(&self.0.shared.mine).insert(self.0.id.clone(), Arc::downgrade(&self.0));
    }

    /// This process no longer works on the entry (removed, given up, held for its chat,
    /// or lost): renewals no longer judge it.
    pub(super) fn unhold(&self) {
        let mut mine = relock(&self.0.shared.mine);
        if mine
            .get(&self.0.id)
            .is_some_and(|held| std::ptr::eq(held.as_ptr(), Arc::as_ptr(&self.0)))
        {
            mine.remove(&self.0.id);
        }
    }

    /// A save that was sent at `sent` (the renewal clock's) found the entry still this
    /// process's.
    pub(super) fn proven(&self, sent: u64) {
        self.0.owned.proven.fetch_max(sent, Ordering::AcqRel);
    }

    /// A save found the entry no longer this process's.
    pub(super) fn lose(&self) {
        self.0.owned.lost.store(true, Ordering::Release);
        self.unhold();
    }

    /// Whether a save or a renewal found the entry no longer this process's.
    pub(crate) fn lost(&self) -> bool {
        self.0.owned.lost.load(Ordering::Acquire)
    }

    /// Whether the renewal clock lapsed since the entry was last proven this process's
    /// ([`Fence::lapsed_since`]): lost now, it was most likely taken over, and the replica
    /// that took it tells the channel; lost without, an operator dropped it.
    pub(super) fn lapsed(&self) -> bool {
        let proven = self.0.owned.proven.load(Ordering::Acquire);
        self.0.shared.fence.lapsed_since(proven)
    }

    /// The dedupe keys of `keys` (the entry's admission recorded them) a turn that asks
    /// for their release frees: none once the entry is lost, as the replica that took it
    /// over answers the message, and a redelivery freed now would be answered twice.
    pub(crate) fn releasable<'k>(&self, keys: &'k [DedupeKey]) -> &'k [DedupeKey] {
        if self.lost() { &[] } else { keys }
    }

    /// Whether a final of this entry may go out now: the entry was not found lost and the
    /// renewal clock proves it this process's. Logged when not (never the text).
    pub(super) fn may_publish(&self, final_id: u32) -> bool {
        // The clock first: a renewal marks what it did not renew lost before it restarts
        // the clock, so a fresh clock read here means those marks are seen below.
        let lapsed = self.0.shared.fence.lapsed();
        if self.lost() {
            tracing::info!(
                final_id,
                "Withheld a final: its journal entry was taken over or dropped."
            );
            return false;
        }
        let Some(since) = lapsed else {
            return true;
        };
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
    /// dropped it) has its finals; this process neither retries nor removes it. A final of
    /// it that failed for now held the channel's turn end back for a retry that will not
    /// come from here: taken over, the end is left to the replica that took it (nothing is
    /// told from here); dropped, the end says the message went unanswered. `taken` is
    /// [`Entry::lapsed`], asked once by the caller (which may have chosen by it already);
    /// `keys` the send keys of the finals left.
    pub(super) async fn leave_to_its_owner(&self, taken: bool, keys: &[String]) {
        tracing::info!(
            taken,
            "A journal entry is no longer this process's: its finals are left to the one that holds it."
        );
        let record = self.record();
        let answers = record.carrier.as_ref().unwrap_or(&record.message);
        let outbound = &self.0.shared.outbound;
        // This may run inside a lane's drainer (`settle`, from the hook of the turn's last
        // final), where a push to that lane could wait for room only the drainer frees.
        // It never pushes there: `retries_left` is true only once the turn's end came
        // through the lane, and a turn's end is pushed after its finals, so from a final's
        // hook the end is still behind it in the lane. A retry that ends here runs on a
        // task of its own.
        if outbound.retries_left(answers, taken, keys) {
            outbound.retries_settled(answers, false, keys).await;
        }
    }

    /// The gate that asks [`Entry::may_publish`] just before final `id` goes out.
    pub(super) fn gate(&self, id: u32) -> Gate {
        let entry = self.clone();
        Arc::new(move || entry.may_publish(id))
    }

    /// Waits until the entry is provably this process's again, if it lapsed: `false` when
    /// it is no longer this process's. The renewal that went through says so (it did not
    /// renew the entry), and a save then too (an operator may have dropped it); a save that
    /// fails leaves it to that renewal.
    pub(super) async fn still_ours(&self) -> bool {
        if self.lost() {
            return false;
        }
        let fence = &self.0.shared.fence;
        if fence.lapsed().is_none() {
            return true;
        }
        tracing::info!("A pending final waits until this process renews its journal lease.");
        fence.holds_again().await;
        // The renewal that went through marked the entry lost if it no longer held it.
        !self.lost() && self.save().await
    }
}

#[cfg(test)]
mod tests;
