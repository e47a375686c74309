//! The in-flight journal on Postgres (issue 19). Each call is one statement, so it is
//! atomic: admission writes the dedupe record and the entry together (or neither), and a
//! claim takes each entry for exactly one replica (row locks, `SKIP LOCKED`).
//!
//! Entry leases are written and compared in the database's clock (`now_ms!`, issue 27):
//! a replica whose clock runs ahead cannot find a live replica's entries expired and take
//! them. `created_at` alone is the admitting replica's clock (the parent's docs say why).

use std::time::Duration;

use super::clock::{now_ms, ttl_param};
use super::{PostgresStore, failed};
use crate::store::journal::{self, JournalRecord, Journaled};
use im_bridge_channel::ChatId;
use tokio_postgres::Row;

use crate::store::{DedupeKey, JOURNAL_CAP, StoreError, unix_millis};

impl PostgresStore {
    /// `Store::journal_admit`.
    pub(super) async fn admit_journaled(
        &self,
        dedupe: Option<(&DedupeKey, Duration)>,
        id: &str,
        record: &JournalRecord,
        holder: &str,
        lease: Duration,
    ) -> Result<bool, StoreError> {
        // Record keeping only: the admitting replica's clock (module docs).
        let created = unix_millis();
        let lease = ttl_param(lease);
        let record = journal::encode(record);
        let cap = JOURNAL_CAP as i64;
        let Some((key, ttl)) = dedupe else {
            self.execute(
                "journal_admit",
                concat!(
                    "WITH added AS (
                         INSERT INTO im_bridge_journal
                             (id, record, holder, lease_until, created_at)
                         VALUES ($1, $2, $3, ",
                    now_ms!(),
                    " + $4, $5) RETURNING seq
                     )
                     DELETE FROM im_bridge_journal WHERE seq <= (SELECT seq FROM added) - $6"
                ),
                &[&id, &record, &holder, &lease, &created, &cap],
            )
            .await?;
            return Ok(true);
        };
        // The dedupe upsert of `dedupe_admit`, then the entry only if it admitted.
        let row = self
            .query_one(
                "journal_admit",
                concat!(
                    super::dedupe_admission!(),
                    ", added AS (
                         INSERT INTO im_bridge_journal
                             (id, record, holder, lease_until, created_at)
                         SELECT $7, $8, $9, ",
                    now_ms!(),
                    " + $10, $11 WHERE EXISTS (SELECT 1 FROM admitted)
                         RETURNING seq
                     ), trimmed AS (
                         DELETE FROM im_bridge_journal
                         WHERE seq <= (SELECT seq FROM added) - $12
                         RETURNING 1
                     )
                     SELECT EXISTS (SELECT 1 FROM admitted), (SELECT count(*) FROM dropped),
                            (SELECT count(*) FROM trimmed)"
                ),
                &[
                    &key.channel,
                    &key.workspace,
                    &key.chat_id.as_str(),
                    &key.message_id,
                    &ttl_param(ttl),
                    &self.dedupe_cap,
                    &id,
                    &record,
                    &holder,
                    &lease,
                    &created,
                    &cap,
                ],
            )
            .await?;
        row.try_get(0).map_err(failed("journal_admit"))
    }

    /// `Store::journal_save`.
    pub(super) async fn save_journaled(
        &self,
        id: &str,
        record: &JournalRecord,
        holder: &str,
    ) -> Result<bool, StoreError> {
        let (channel, chat) = record.held_chat().unzip();
        let saved = self
            .execute(
                "journal_save",
                "UPDATE im_bridge_journal SET record = $2, held_channel = $4, held_chat = $5
                 WHERE id = $1 AND holder = $3",
                &[&id, &journal::encode(record), &holder, &channel, &chat],
            )
            .await?;
        Ok(saved == 1)
    }

    /// `Store::journal_take_held`: one statement; a replica taking the same rows at once
    /// waits for the row locks, then finds them no longer held and takes none.
    pub(super) async fn take_held_journaled(
        &self,
        channel: &str,
        chat_id: &ChatId,
        holder: &str,
        lease: Duration,
    ) -> Result<Vec<Journaled>, StoreError> {
        let rows = self
            .query(
                "journal_take_held",
                concat!(
                    "UPDATE im_bridge_journal SET holder = $3, lease_until = ",
                    now_ms!(),
                    " + $4, held_channel = NULL, held_chat = NULL
                     WHERE held_channel = $1 AND held_chat = $2
                     RETURNING id, record, created_at, seq, coalesce(retried_at, created_at)"
                ),
                &[&channel, &chat_id.as_str(), &holder, &ttl_param(lease)],
            )
            .await?;
        self.taken("journal_take_held", &rows).await
    }

    /// `Store::journal_remove`: only its holder's, or nobody's (`''`).
    pub(super) async fn remove_journaled(
        &self,
        id: &str,
        holder: &str,
    ) -> Result<bool, StoreError> {
        let removed = self
            .execute(
                "journal_remove",
                "DELETE FROM im_bridge_journal WHERE id = $1 AND holder IN ($2, '')",
                &[&id, &holder],
            )
            .await?;
        Ok(removed == 1)
    }

    /// Deletes entry `id` whoever holds it: one whose record this build cannot read.
    async fn forget_journaled(&self, id: &str) -> Result<(), StoreError> {
        self.execute(
            "journal_forget",
            "DELETE FROM im_bridge_journal WHERE id = $1",
            &[&id],
        )
        .await?;
        Ok(())
    }

    /// `Store::journal_claim`: expired a whole lease ago (the claim's grace), written as
    /// `lease_until <= now - lease`: `lease_until + lease` could overflow (both may be
    /// near half a `BIGINT`), `now - lease` cannot. Entries whose record this
    /// build cannot read are deleted (logged) instead of coming back at every claim.
    pub(super) async fn claim_journaled(
        &self,
        holder: &str,
        lease: Duration,
        take_live: bool,
    ) -> Result<Vec<Journaled>, StoreError> {
        let lease = ttl_param(lease);
        let rows = self
            .query(
                "journal_claim",
                concat!(
                    "UPDATE im_bridge_journal SET holder = $1, due = FALSE, lease_until = ",
                    now_ms!(),
                    " + $3
                     WHERE id IN (
                         SELECT id FROM im_bridge_journal
                         WHERE holder <> $1 AND gave_up_at IS NULL
                           AND ($2 OR lease_until <= ",
                    now_ms!(),
                    " - $3",
                    ")
                         ORDER BY seq FOR UPDATE SKIP LOCKED
                     )
                     RETURNING id, record, created_at, seq, coalesce(retried_at, created_at)"
                ),
                &[&holder, &take_live, &lease],
            )
            .await?;
        self.taken("journal_claim", &rows).await
    }

    /// Rows of `id, record, created_at, seq, retry_from` a claim or a take returned, as entries in
    /// admission order; those whose record this build cannot read are deleted (logged).
    async fn taken(&self, op: &'static str, rows: &[Row]) -> Result<Vec<Journaled>, StoreError> {
        let mut taken = Vec::with_capacity(rows.len());
        let mut unreadable = Vec::new();
        for row in rows {
            let id: String = row.try_get(0).map_err(failed(op))?;
            let text: String = row.try_get(1).map_err(failed(op))?;
            let created_ms: i64 = row.try_get(2).map_err(failed(op))?;
            let seq: i64 = row.try_get(3).map_err(failed(op))?;
            let retry_from_ms: i64 = row.try_get(4).map_err(failed(op))?;
            match journal::decode(&text) {
                Some(record) => taken.push((
                    seq,
                    Journaled {
                        id,
                        created_ms,
                        retry_from_ms,
                        record,
                    },
                )),
                None => unreadable.push(id),
            }
        }
        journal::warn_unreadable(unreadable.len());
        for id in &unreadable {
            self.forget_journaled(id).await?;
        }
        taken.sort_by_key(|(seq, _)| *seq);
        Ok(taken.into_iter().map(|(_, entry)| entry).collect())
    }

    /// `Store::journal_release`: expired long ago, so the claim's grace is over.
    pub(super) async fn release_journaled(&self, holder: &str) -> Result<(), StoreError> {
        self.execute(
            "journal_release",
            "UPDATE im_bridge_journal SET lease_until = 0 WHERE holder = $1",
            &[&holder],
        )
        .await?;
        Ok(())
    }

    /// `Store::journal_renew`.
    pub(super) async fn renew_journaled(
        &self,
        holder: &str,
        lease: Duration,
    ) -> Result<(), StoreError> {
        self.execute(
            "journal_renew",
            concat!(
                "UPDATE im_bridge_journal SET lease_until = ",
                now_ms!(),
                " + $2 WHERE holder = $1"
            ),
            &[&holder, &ttl_param(lease)],
        )
        .await?;
        Ok(())
    }
}
