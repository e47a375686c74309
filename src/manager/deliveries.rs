//! The manager's side of the operator's tools (issue 33): the [`Deliveries`] handle the
//! admin endpoints act through (its retries wake the journal's upkeep at once), holding the
//! retries of pending finals for a drain, and the journal's upkeep every third of the lease:
//! sweep (wake the retries an operator asked for, forget old given-up entries, set their
//! gauge), and take over the entries nobody holds: another replica's whose lease ran out a
//! whole lease ago (or that it gave up at its shutdown), or one an operator retried after
//! it gave up. The leases are renewed on a task of their own
//! ([`Journal::keep_renewing`](super::journal::Journal::keep_renewing)), so a slow sweep or
//! claim never delays a renewal.

use super::{Manager, Workers};
use crate::operator::Deliveries;

impl Manager {
    /// The journal as the operator's tools act on it, through this manager's store; a
    /// retry makes this manager take the retried deliveries up at once.
    pub fn deliveries(&self) -> Deliveries {
        Deliveries::new(self.inner.store.clone()).with_upkeep(self.inner.journal.upkeep_handle())
    }

    /// Holds the retries of pending finals for a drain: from now on this process tries
    /// none of them again (nor counts an attempt); they stay in the journal for the next
    /// one. Turns under way still deliver their answers.
    pub fn hold_deliveries(&self) {
        tracing::info!("Holding the retries of pending deliveries for the next process.");
        self.inner.journal.hold();
    }

    /// The journal's upkeep (module docs); no takeover once admission `closed`.
    pub(super) async fn journal_upkeep(&self, closed: bool, workers: &Workers) {
        let journal = &self.inner.journal;
        journal.sweep().await;
        if !closed {
            let orphans = journal.claim(false).await;
            self.spawn_recovered(orphans, workers);
        }
    }
}
