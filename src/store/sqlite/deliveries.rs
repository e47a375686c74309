//! The async side of the journal operations an operator's tools need (issue 33): giving an
//! entry up, listing, retrying and dropping deliveries, and the holder's sweep. Each runs
//! on the store thread (`db/journal.rs` holds the statements); the [`Store`](super::Store)
//! implementation forwards to these.

use std::time::Duration;

use super::SqliteStore;
use crate::store::journal::{self, JournalRecord, Listed, Sweep};
use crate::store::{StoreError, ttl_millis, unix_millis};

impl SqliteStore {
    /// `Store::journal_give_up`.
    pub(super) async fn give_up_journaled(
        &self,
        id: &str,
        record: &JournalRecord,
        holder: &str,
    ) -> Result<bool, StoreError> {
        let (id, record, holder) = (id.to_owned(), journal::encode(record), holder.to_owned());
        self.call(
            "journal_give_up",
            move |db| db.journal_give_up(&id, &record, &holder, unix_millis()),
            |_, _| {},
        )
        .await
    }

    /// `Store::journal_list`.
    pub(super) async fn list_journaled(
        &self,
        after: i64,
        limit: usize,
    ) -> Result<Vec<Listed>, StoreError> {
        self.call(
            "journal_list",
            move |db| db.journal_list(after, limit),
            |_, _| {},
        )
        .await
    }

    /// `Store::journal_retry`.
    pub(super) async fn retry_journaled(&self, ids: &[String]) -> Result<usize, StoreError> {
        let ids = ids.to_vec();
        self.call(
            "journal_retry",
            move |db| db.journal_retry(&ids, unix_millis()),
            |_, _| {},
        )
        .await
    }

    /// `Store::journal_drop`.
    pub(super) async fn drop_journaled(&self, ids: &[String]) -> Result<usize, StoreError> {
        let ids = ids.to_vec();
        self.call("journal_drop", move |db| db.journal_drop(&ids), |_, _| {})
            .await
    }

    /// `Store::journal_sweep`.
    pub(super) async fn sweep_journal(
        &self,
        holder: &str,
        forget: Duration,
    ) -> Result<Sweep, StoreError> {
        let holder = holder.to_owned();
        let before = unix_millis().saturating_sub(ttl_millis(forget));
        self.call(
            "journal_sweep",
            move |db| db.journal_sweep(&holder, before),
            |_, _| {},
        )
        .await
    }
}
