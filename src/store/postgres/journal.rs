//! The in-flight journal on Postgres (issue 19). Each call is one statement, so it is
//! atomic: admission writes the dedupe record and the entry together (or neither), and a
//! claim takes each entry for exactly one replica (row locks, `SKIP LOCKED`). A message
//! joined from several platform messages is the exception: its keys (one statement,
//! [`ADMIT_JOINED`], also `Store::dedupe_admit_joined`) and its entry, whose record names
//! the keys it did not record, go in one transaction.
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
use tokio_postgres::types::ToSql;

/// Inserts a journal entry (`$1` id, `$2` record, `$3` holder, `$4` lease in
/// milliseconds, `$5` created) and drops the entries more than `$6` (the cap) sequence
/// numbers behind it.
const ADD_ENTRY: &str = concat!(
    "WITH added AS (
         INSERT INTO im_bridge_journal (id, record, holder, lease_until, created_at)
         VALUES ($1, $2, $3, ",
    now_ms!(),
    " + $4, $5) RETURNING seq
     )
     DELETE FROM im_bridge_journal WHERE seq <= (SELECT seq FROM added) - $6"
);

/// `Store::dedupe_admit_joined` in one statement (`$1`–`$4` the keys' channels, scopes,
/// chats and ids as arrays, `$5` the TTL in milliseconds, `$6` the cap): each key without
/// a live record is recorded, or an expired one replaced, as `dedupe_admission!` does one,
/// and the records more than the cap behind the newest dropped. Rows are written in the
/// keys' sorted order, so two statements admitting overlapping keys lock them in one order
/// (the cap's deletion may rarely still wait on a row another admission holds: PostgreSQL
/// then aborts one, which fails open); a key named twice is written once. Returns how many keys it
/// recorded and the positions (from 0) of those it did not.
const ADMIT_JOINED: &str = concat!(
    "WITH keys AS (
         SELECT channel, workspace, chat_id, message_id, pos - 1 AS pos
         FROM unnest($1::TEXT[], $2::TEXT[], $3::TEXT[], $4::TEXT[])
             WITH ORDINALITY AS k (channel, workspace, chat_id, message_id, pos)
     ), live AS (
         SELECT k.pos FROM keys k
         JOIN im_bridge_dedupe d USING (channel, workspace, chat_id, message_id)
         WHERE d.expires_at > ",
    now_ms!(),
    "), admitted AS (
         INSERT INTO im_bridge_dedupe (channel, workspace, chat_id, message_id, expires_at)
         SELECT channel, workspace, chat_id, message_id, ",
    now_ms!(),
    " + $5 FROM (
             SELECT DISTINCT channel, workspace, chat_id, message_id FROM keys
             WHERE pos NOT IN (SELECT pos FROM live)
         ) new
         ORDER BY channel, workspace, chat_id, message_id
         ON CONFLICT (channel, workspace, chat_id, message_id) DO UPDATE SET
             expires_at = EXCLUDED.expires_at, seq = EXCLUDED.seq
         WHERE im_bridge_dedupe.expires_at <= ",
    now_ms!(),
    " RETURNING channel, workspace, chat_id, message_id, seq
     ), dropped AS (
         DELETE FROM im_bridge_dedupe
         WHERE seq <= (SELECT max(seq) FROM admitted) - $6
         RETURNING 1
     )
     SELECT (SELECT count(*) FROM admitted),
            ARRAY(
                SELECT k.pos FROM keys k
                WHERE NOT EXISTS (
                    SELECT 1 FROM admitted a
                    WHERE (a.channel, a.workspace, a.chat_id, a.message_id)
                        = (k.channel, k.workspace, k.chat_id, k.message_id)
                )
                ORDER BY k.pos
            ),
            (SELECT count(*) FROM dropped)"
);

/// The columns of `keys` as [`ADMIT_JOINED`] takes them: channels, scopes, chats, ids.
fn key_columns(keys: &[DedupeKey]) -> [Vec<&str>; 4] {
    let column = |field: fn(&DedupeKey) -> &str| keys.iter().map(field).collect();
    [
        column(|k| k.channel.as_str()),
        column(|k| k.workspace.as_str()),
        column(|k| k.chat_id.as_str()),
        column(|k| k.message_id.as_str()),
    ]
}

/// What [`ADMIT_JOINED`] answered: `None` when it recorded no key, else the positions of
/// the keys it left.
fn joined_outcome(row: &Row) -> Result<Option<Vec<usize>>, tokio_postgres::Error> {
    let recorded: i64 = row.try_get(0)?;
    let left: Vec<i64> = row.try_get(1)?;
    let left = left.into_iter().filter_map(|at| usize::try_from(at).ok());
    Ok((recorded > 0).then(|| left.collect()))
}

impl PostgresStore {
    /// `Store::dedupe_admit_joined` for two keys or more: one statement.
    pub(super) async fn admit_joined(
        &self,
        keys: &[DedupeKey],
        ttl: Duration,
    ) -> Result<Option<Vec<usize>>, StoreError> {
        let [channels, scopes, chats, ids] = key_columns(keys);
        let row = self
            .query_one(
                "dedupe_admit_joined",
                ADMIT_JOINED,
                &[
                    &channels,
                    &scopes,
                    &chats,
                    &ids,
                    &ttl_param(ttl),
                    &self.dedupe_cap,
                ],
            )
            .await?;
        joined_outcome(&row).map_err(failed("dedupe_admit_joined"))
    }

    /// `Store::journal_admit`: one statement for a message of at most one key; a joined
    /// message's keys and its entry in one transaction, the entry's record naming the keys
    /// the admission left.
    pub(super) async fn admit_journaled(
        &self,
        keys: &[DedupeKey],
        ttl: Duration,
        entry: (&str, &JournalRecord),
        holder: &str,
        lease: Duration,
    ) -> Result<Option<Vec<usize>>, StoreError> {
        let (id, record) = entry;
        // Record keeping only: the admitting replica's clock (module docs).
        let created = unix_millis();
        let lease = ttl_param(lease);
        let cap = JOURNAL_CAP as i64;
        let key = match keys {
            [] => None,
            [key] => Some(key),
            keys => {
                let entry = (id, record, holder, lease, created);
                return self.admit_journaled_joined(keys, ttl, entry).await;
            }
        };
        let record = journal::encode(record);
        let Some(key) = key else {
            let params: [&(dyn ToSql + Sync); 6] = [&id, &record, &holder, &lease, &created, &cap];
            self.execute("journal_admit", ADD_ENTRY, &params).await?;
            return Ok(Some(Vec::new()));
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
        let admitted: bool = row.try_get(0).map_err(failed("journal_admit"))?;
        Ok(admitted.then(Vec::new))
    }

    /// [`PostgresStore::admit_journaled`] for a message of several keys: [`ADMIT_JOINED`],
    /// then, unless it recorded none, the entry, in one transaction (a refused one rolls
    /// back, having written nothing). `entry`: id, record, holder, lease, created.
    async fn admit_journaled_joined(
        &self,
        keys: &[DedupeKey],
        ttl: Duration,
        entry: (&str, &JournalRecord, &str, i64, i64),
    ) -> Result<Option<Vec<usize>>, StoreError> {
        const OP: &str = "journal_admit";
        let (id, record, holder, lease, created) = entry;
        let [channels, scopes, chats, ids] = key_columns(keys);
        let (ttl, cap) = (ttl_param(ttl), JOURNAL_CAP as i64);
        let attempt = async {
            let mut client = self.client().await?;
            let tx = client.transaction().await.map_err(failed(OP))?;
            let admit = tx.prepare_cached(ADMIT_JOINED).await.map_err(failed(OP))?;
            let params: [&(dyn ToSql + Sync); 6] =
                [&channels, &scopes, &chats, &ids, &ttl, &self.dedupe_cap];
            let row = tx.query_one(&admit, &params).await.map_err(failed(OP))?;
            let Some(live) = joined_outcome(&row).map_err(failed(OP))? else {
                // Dropped unfinished: rolled back (it wrote nothing anyway).
                return Ok(None);
            };
            let mut noted = record.clone();
            noted.note_not_recorded(keys, &live);
            let record = journal::encode(&noted);
            let add = tx.prepare_cached(ADD_ENTRY).await.map_err(failed(OP))?;
            let params: [&(dyn ToSql + Sync); 6] = [&id, &record, &holder, &lease, &created, &cap];
            tx.execute(&add, &params).await.map_err(failed(OP))?;
            tx.commit().await.map_err(failed(OP))?;
            Ok(Some(live))
        };
        tokio::time::timeout(self.call_timeout, attempt)
            .await
            .unwrap_or(Err(StoreError::TimedOut { op: OP }))
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

    /// `Store::journal_renew`: the ids it renewed (a released lease, at 0, is not).
    pub(super) async fn renew_journaled(
        &self,
        holder: &str,
        lease: Duration,
    ) -> Result<Vec<String>, StoreError> {
        let rows = self
            .query(
                "journal_renew",
                concat!(
                    "UPDATE im_bridge_journal SET lease_until = ",
                    now_ms!(),
                    " + $2 WHERE holder = $1 AND lease_until > 0 RETURNING id"
                ),
                &[&holder, &ttl_param(lease)],
            )
            .await?;
        rows.iter()
            .map(|row| row.try_get(0).map_err(failed("journal_renew")))
            .collect()
    }
}
