//! The journal operations an operator's tools need on Postgres (issue 33): giving an entry
//! up, listing, retrying and dropping deliveries, and the holder's sweep.
//!
//! A retry or a drop reads the named entries under row locks (`FOR UPDATE`) and decides in
//! one transaction which are deliveries ([`Listed::is_delivery`]: the record says whether
//! finals wait, and whether they wait for the chat's next message, which a retry leaves
//! alone), so an entry whose turn is still under way is never touched, whichever replica
//! works on it. Times written here are the database's clock (`now_ms!`).

use std::time::Duration;

use deadpool_postgres::Transaction;

use super::clock::{now_ms, ttl_param};
use super::{PostgresStore, failed};
use crate::store::StoreError;
use crate::store::journal::{self, JournalRecord, Listed, Operable, Sweep};

impl PostgresStore {
    /// `Store::journal_give_up`.
    pub(super) async fn give_up_journaled(
        &self,
        id: &str,
        record: &JournalRecord,
        holder: &str,
    ) -> Result<bool, StoreError> {
        let given = self
            .execute(
                "journal_give_up",
                concat!(
                    "UPDATE im_bridge_journal SET record = $2, holder = '', lease_until = 0,
                         due = FALSE, gave_up_at = ",
                    now_ms!(),
                    " WHERE id = $1 AND holder = $3"
                ),
                &[&id, &journal::encode(record), &holder],
            )
            .await?;
        Ok(given == 1)
    }

    /// `Store::journal_list`.
    pub(super) async fn list_journaled(
        &self,
        after: i64,
        limit: usize,
    ) -> Result<Vec<Listed>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = self
            .query(
                "journal_list",
                "SELECT seq, id, record, created_at, gave_up_at FROM im_bridge_journal
                 WHERE seq > $1 ORDER BY seq LIMIT $2",
                &[&after, &limit],
            )
            .await?;
        let mut listed = Vec::with_capacity(rows.len());
        for row in &rows {
            let text: String = row.try_get(2).map_err(failed("journal_list"))?;
            let Some(record) = journal::decode(&text) else {
                continue;
            };
            listed.push(Listed {
                seq: row.try_get(0).map_err(failed("journal_list"))?,
                id: row.try_get(1).map_err(failed("journal_list"))?,
                created_ms: row.try_get(3).map_err(failed("journal_list"))?,
                gave_up_ms: row.try_get(4).map_err(failed("journal_list"))?,
                record,
            });
        }
        Ok(listed)
    }

    /// `Store::journal_retry`.
    pub(super) async fn retry_journaled(&self, ids: &[String]) -> Result<usize, StoreError> {
        self.on_deliveries(
            "journal_retry",
            ids,
            async |tx, [gave_up, pending, _held]| {
                let revived = tx
                    .execute(
                        concat!(
                            "UPDATE im_bridge_journal SET gave_up_at = NULL, holder = '',
                             lease_until = 0, due = FALSE, retried_at = ",
                            now_ms!(),
                            " WHERE id = ANY($1)"
                        ),
                        &[&gave_up],
                    )
                    .await?;
                let nudged = tx
                    .execute(
                        "UPDATE im_bridge_journal SET due = TRUE WHERE id = ANY($1)",
                        &[&pending],
                    )
                    .await?;
                Ok(revived + nudged)
            },
        )
        .await
    }

    /// `Store::journal_drop`.
    pub(super) async fn drop_journaled(&self, ids: &[String]) -> Result<usize, StoreError> {
        self.on_deliveries("journal_drop", ids, async |tx, lists| {
            let all: Vec<&str> = lists.concat();
            tx.execute("DELETE FROM im_bridge_journal WHERE id = ANY($1)", &[&all])
                .await
        })
        .await
    }

    /// Runs `act` in one transaction on the deliveries among `ids`, locked and split into
    /// those that gave up, those still pending and those held for their chat's next
    /// message; returns the rows it changed.
    async fn on_deliveries<F>(
        &self,
        op: &'static str,
        ids: &[String],
        act: F,
    ) -> Result<usize, StoreError>
    where
        F: AsyncFnOnce(&Transaction<'_>, [Vec<&str>; 3]) -> Result<u64, tokio_postgres::Error>,
    {
        let attempt = async {
            let mut client = self.client().await?;
            let tx = client.transaction().await.map_err(failed(op))?;
            let rows = tx
                .query(
                    "SELECT id, record, gave_up_at IS NOT NULL FROM im_bridge_journal
                     WHERE id = ANY($1) ORDER BY id FOR UPDATE",
                    &[&ids],
                )
                .await
                .map_err(failed(op))?;
            let mut lists: [Vec<&str>; 3] = Default::default();
            for row in &rows {
                let id: &str = row.try_get(0).map_err(failed(op))?;
                let record: &str = row.try_get(1).map_err(failed(op))?;
                let given_up: bool = row.try_get(2).map_err(failed(op))?;
                let list = match journal::operable(record, given_up) {
                    Some(Operable::GaveUp) => 0,
                    Some(Operable::Pending) => 1,
                    Some(Operable::Held) => 2,
                    None => continue,
                };
                lists[list].push(id);
            }
            let changed = act(&tx, lists).await.map_err(failed(op))?;
            tx.commit().await.map_err(failed(op))?;
            Ok(usize::try_from(changed).unwrap_or(usize::MAX))
        };
        tokio::time::timeout(self.call_timeout, attempt)
            .await
            .unwrap_or(Err(StoreError::TimedOut { op }))
    }

    /// `Store::journal_sweep`: one statement. Its final counts read the statement's
    /// snapshot, which still holds the rows it forgets, so they are subtracted.
    pub(super) async fn sweep_journal(
        &self,
        holder: &str,
        forget: Duration,
    ) -> Result<Sweep, StoreError> {
        let row = self
            .query_one(
                "journal_sweep",
                concat!(
                    "WITH due AS (
                         UPDATE im_bridge_journal SET due = FALSE
                         WHERE holder = $1 AND due RETURNING id
                     ), forgotten AS (
                         DELETE FROM im_bridge_journal WHERE gave_up_at + $2 <= ",
                    now_ms!(),
                    " RETURNING 1
                     )
                     SELECT (SELECT array_agg(id) FROM due),
                            (SELECT count(*) FROM forgotten),
                            (SELECT count(*) FROM im_bridge_journal WHERE gave_up_at IS NOT NULL)"
                ),
                &[&holder, &ttl_param(forget)],
            )
            .await?;
        let due: Option<Vec<String>> = row.try_get(0).map_err(failed("journal_sweep"))?;
        let forgotten: i64 = row.try_get(1).map_err(failed("journal_sweep"))?;
        let listed: i64 = row.try_get(2).map_err(failed("journal_sweep"))?;
        Ok(Sweep {
            due: due.unwrap_or_default(),
            gave_up: u64::try_from(listed - forgotten).unwrap_or(0),
            forgotten: u64::try_from(forgotten).unwrap_or(0),
        })
    }
}
