//! The in-flight journal on the store thread (issue 19). Admission writes the dedupe records
//! (a joined message's parts' too) and the entry in one savepoint, so a redelivery is
//! either refused with the entry in place or admitted with it; the other operations are
//! one statement each, or one savepoint (an operator's retry or drop and the sweep, issue
//! 33).

use rusqlite::{OptionalExtension, params};

use super::Db;
use crate::store::journal::{self, Admitting, Journaled, Listed, Operable, Sweep};
use crate::store::{DedupeKey, JOURNAL_CAP};

impl Db {
    /// See `Store::journal_admit`: the keys, then the entry, in one savepoint. A record
    /// [`Admitting::Joined`] is encoded once the savepoint knows which keys it recorded.
    /// `dedupe`: the keys and their TTL in milliseconds.
    pub(in crate::store::sqlite) fn journal_admit(
        &mut self,
        dedupe: (&[DedupeKey], i64),
        id: &str,
        record: Admitting,
        holder: &str,
        now_ms: i64,
        lease_ms: i64,
    ) -> rusqlite::Result<Option<Vec<usize>>> {
        let (keys, ttl_ms) = dedupe;
        self.atomically(|db| {
            let Some(live) = db.admit_keys(keys, now_ms, ttl_ms)? else {
                return Ok(None);
            };
            let record = record.encode(keys, &live);
            db.conn
                .prepare_cached(
                    "INSERT INTO journal (id, record, holder, lease_until, created_at)
                     VALUES (?1, ?2, ?3, ?4, ?5)",
                )?
                .execute(params![
                    id,
                    record,
                    holder,
                    now_ms.saturating_add(lease_ms),
                    now_ms
                ])?;
            let newest = db.conn.last_insert_rowid();
            db.conn
                .prepare_cached("DELETE FROM journal WHERE seq <= ?1")?
                .execute([newest.saturating_sub(JOURNAL_CAP as i64)])?;
            Ok(Some(live))
        })
    }

    /// See `Store::dedupe_admit_joined`: one savepoint.
    pub(in crate::store::sqlite) fn dedupe_admit_joined(
        &mut self,
        keys: &[DedupeKey],
        now_ms: i64,
        ttl_ms: i64,
    ) -> rusqlite::Result<Option<Vec<usize>>> {
        self.atomically(|db| db.admit_keys(keys, now_ms, ttl_ms))
    }

    /// Admits each of `keys` in turn (the caller's savepoint makes them one): the
    /// positions of those that had a live record, or `None` when all had one (then nothing
    /// was written). A key named again counts as its first mention did.
    fn admit_keys(
        &mut self,
        keys: &[DedupeKey],
        now_ms: i64,
        ttl_ms: i64,
    ) -> rusqlite::Result<Option<Vec<usize>>> {
        let mut live = Vec::new();
        let mut recorded = keys.is_empty();
        for (at, key) in keys.iter().enumerate() {
            let new = match keys[..at].iter().position(|k| k == key) {
                Some(first) => !live.contains(&first),
                None => self.dedupe_admit(key, now_ms, ttl_ms)?,
            };
            if new {
                recorded = true;
            } else {
                live.push(at);
            }
        }
        Ok(recorded.then_some(live))
    }

    /// See `Store::journal_save`; `held` is the chat a held record waits for.
    pub(in crate::store::sqlite) fn journal_save(
        &self,
        id: &str,
        record: &str,
        holder: &str,
        held: Option<(&str, &str)>,
    ) -> rusqlite::Result<bool> {
        let (channel, chat) = held.unzip();
        let saved = self
            .conn
            .prepare_cached(
                "UPDATE journal SET record = ?2, held_channel = ?4, held_chat = ?5
                 WHERE id = ?1 AND holder = ?3",
            )?
            .execute(params![id, record, holder, channel, chat])?;
        Ok(saved == 1)
    }

    /// See `Store::journal_take_held`: one savepoint reads and takes them.
    pub(in crate::store::sqlite) fn journal_take_held(
        &mut self,
        channel: &str,
        chat: &str,
        holder: &str,
        until_ms: i64,
    ) -> rusqlite::Result<(Vec<Journaled>, usize)> {
        self.atomically(|db| {
            let rows = db
                .conn
                .prepare_cached(
                    "UPDATE journal SET holder = ?3, lease_until = ?4,
                         held_channel = NULL, held_chat = NULL
                     WHERE held_channel = ?1 AND held_chat = ?2
                     RETURNING seq, id, record, created_at, coalesce(retried_at, created_at)",
                )?
                .query_map(params![channel, chat, holder, until_ms], entry_row)?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            let (taken, unreadable) = decode_rows(rows);
            for id in &unreadable {
                db.journal_forget(id)?;
            }
            Ok((taken, unreadable.len()))
        })
    }

    /// See `Store::journal_remove`: only its holder's, or nobody's (`''`).
    pub(in crate::store::sqlite) fn journal_remove(
        &self,
        id: &str,
        holder: &str,
    ) -> rusqlite::Result<bool> {
        let removed = self
            .conn
            .prepare_cached("DELETE FROM journal WHERE id = ?1 AND holder IN (?2, '')")?
            .execute(params![id, holder])?;
        Ok(removed == 1)
    }

    /// Deletes entry `id` whoever holds it: one whose record this build cannot read.
    fn journal_forget(&self, id: &str) -> rusqlite::Result<()> {
        self.conn
            .prepare_cached("DELETE FROM journal WHERE id = ?1")?
            .execute([id])?;
        Ok(())
    }

    /// See `Store::journal_claim`. Entries whose record this build cannot read are returned
    /// with nothing but their id dropped (deleted), so they do not come back at every claim.
    pub(in crate::store::sqlite) fn journal_claim(
        &mut self,
        holder: &str,
        now_ms: i64,
        lease_ms: i64,
        take_live: bool,
    ) -> rusqlite::Result<(Vec<Journaled>, usize)> {
        self.atomically(|db| {
            // Expired a whole lease ago (the claim's grace), or any with `take_live`.
            let cutoff = if take_live {
                i64::MAX
            } else {
                now_ms.saturating_sub(lease_ms)
            };
            let rows = db
                .conn
                .prepare_cached(
                    "SELECT seq, id, record, created_at, coalesce(retried_at, created_at)
                     FROM journal
                     WHERE holder <> ?1 AND lease_until <= ?2 AND gave_up_at IS NULL",
                )?
                .query_map(params![holder, cutoff], entry_row)?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            let (claimed, unreadable) = decode_rows(rows);
            let mut take = db.conn.prepare_cached(
                "UPDATE journal SET holder = ?2, lease_until = ?3, due = 0 WHERE id = ?1",
            )?;
            let until = now_ms.saturating_add(lease_ms);
            for entry in &claimed {
                take.execute(params![entry.id, holder, until])?;
            }
            drop(take);
            for id in &unreadable {
                db.journal_forget(id)?;
            }
            Ok((claimed, unreadable.len()))
        })
    }

    /// See `Store::journal_renew`: the ids it renewed (a released lease, at 0, is not).
    pub(in crate::store::sqlite) fn journal_renew(
        &self,
        holder: &str,
        until_ms: i64,
    ) -> rusqlite::Result<Vec<String>> {
        self.conn
            .prepare_cached("UPDATE journal SET lease_until = ?2 WHERE holder = ?1 AND lease_until > 0 RETURNING id")?
            .query_map(params![holder, until_ms], |row| row.get(0))?
            .collect()
    }

    /// See `Store::journal_release`: expired long ago, so the claim's grace is over.
    pub(in crate::store::sqlite) fn journal_release(&self, holder: &str) -> rusqlite::Result<()> {
        self.conn
            .prepare_cached("UPDATE journal SET lease_until = 0 WHERE holder = ?1")?
            .execute([holder])?;
        Ok(())
    }

    /// See `Store::journal_give_up`.
    pub(in crate::store::sqlite) fn journal_give_up(
        &self,
        id: &str,
        record: &str,
        holder: &str,
        now_ms: i64,
    ) -> rusqlite::Result<bool> {
        let given = self
            .conn
            .prepare_cached(
                "UPDATE journal SET record = ?2, gave_up_at = ?4, holder = '', lease_until = 0,
                     due = 0
                 WHERE id = ?1 AND holder = ?3",
            )?
            .execute(params![id, record, holder, now_ms])?;
        Ok(given == 1)
    }

    /// See `Store::journal_list`.
    pub(in crate::store::sqlite) fn journal_list(
        &self,
        after: i64,
        limit: usize,
    ) -> rusqlite::Result<Vec<Listed>> {
        let mut select = self.conn.prepare_cached(
            "SELECT seq, id, record, created_at, gave_up_at FROM journal
             WHERE seq > ?1 ORDER BY seq LIMIT ?2",
        )?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = select.query_map(params![after, limit], |row| {
            Ok((
                row.get::<_, i64>(0)?,
                row.get::<_, String>(1)?,
                row.get::<_, String>(2)?,
                row.get::<_, i64>(3)?,
                row.get::<_, Option<i64>>(4)?,
            ))
        })?;
        let mut listed = Vec::new();
        for row in rows {
            let (seq, id, record, created_ms, gave_up_ms) = row?;
            if let Some(record) = journal::decode(&record) {
                listed.push(Listed {
                    seq,
                    id,
                    created_ms,
                    gave_up_ms,
                    record,
                });
            }
        }
        Ok(listed)
    }

    /// See `Store::journal_retry`.
    pub(in crate::store::sqlite) fn journal_retry(
        &mut self,
        ids: &[String],
        now_ms: i64,
    ) -> rusqlite::Result<usize> {
        self.atomically(|db| {
            let mut retried = 0;
            for id in ids {
                let gave_up = match db.operable(id)? {
                    Some(Operable::GaveUp) => true,
                    Some(Operable::Pending) => false,
                    Some(Operable::Held) | None => continue,
                };
                retried += if gave_up {
                    db.conn
                        .prepare_cached(
                            "UPDATE journal SET gave_up_at = NULL, retried_at = ?2, holder = '',
                                 lease_until = 0, due = 0
                             WHERE id = ?1",
                        )?
                        .execute(params![id, now_ms])?
                } else {
                    db.conn
                        .prepare_cached("UPDATE journal SET due = 1 WHERE id = ?1")?
                        .execute([id])?
                };
            }
            Ok(retried)
        })
    }

    /// See `Store::journal_drop`.
    pub(in crate::store::sqlite) fn journal_drop(
        &mut self,
        ids: &[String],
    ) -> rusqlite::Result<usize> {
        self.atomically(|db| {
            let mut dropped = 0;
            for id in ids {
                if db.operable(id)?.is_some() {
                    dropped += db
                        .conn
                        .prepare_cached("DELETE FROM journal WHERE id = ?1")?
                        .execute([id])?;
                }
            }
            Ok(dropped)
        })
    }

    /// What an operator may do with entry `id`; `None` for an entry still under way (or
    /// none).
    fn operable(&self, id: &str) -> rusqlite::Result<Option<Operable>> {
        let found = self
            .conn
            .prepare_cached("SELECT record, gave_up_at IS NOT NULL FROM journal WHERE id = ?1")?
            .query_row([id], |row| {
                Ok((row.get::<_, String>(0)?, row.get::<_, bool>(1)?))
            })
            .optional()?;
        Ok(found.and_then(|(record, gave_up)| journal::operable(&record, gave_up)))
    }

    /// See `Store::journal_sweep`.
    pub(in crate::store::sqlite) fn journal_sweep(
        &mut self,
        holder: &str,
        forget_before_ms: i64,
    ) -> rusqlite::Result<Sweep> {
        self.atomically(|db| {
            let due = db
                .conn
                .prepare_cached(
                    "UPDATE journal SET due = 0 WHERE holder = ?1 AND due = 1 RETURNING id",
                )?
                .query_map([holder], |row| row.get::<_, String>(0))?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            let forgotten = db
                .conn
                .prepare_cached("DELETE FROM journal WHERE gave_up_at <= ?1")?
                .execute([forget_before_ms])?;
            let gave_up: i64 = db
                .conn
                .prepare_cached("SELECT count(*) FROM journal WHERE gave_up_at IS NOT NULL")?
                .query_row([], |row| row.get(0))?;
            Ok(Sweep {
                due,
                gave_up: u64::try_from(gave_up).unwrap_or(0),
                forgotten: forgotten as u64,
            })
        })
    }
}

/// One row of `seq, id, record, created_at, coalesce(retried_at, created_at)`.
type EntryRow = (i64, String, String, i64, i64);

fn entry_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<EntryRow> {
    Ok((
        row.get(0)?,
        row.get(1)?,
        row.get(2)?,
        row.get(3)?,
        row.get(4)?,
    ))
}

/// Rows of `(seq, id, record, created_at, retry_from)` as entries in admission order, and
/// the ids of those whose record this build cannot read.
fn decode_rows(mut rows: Vec<EntryRow>) -> (Vec<Journaled>, Vec<String>) {
    rows.sort_by_key(|(seq, ..)| *seq);
    let mut entries = Vec::with_capacity(rows.len());
    let mut unreadable = Vec::new();
    for (_, id, record, created_ms, retry_from_ms) in rows {
        match journal::decode(&record) {
            Some(record) => entries.push(Journaled {
                id,
                created_ms,
                retry_from_ms,
                record,
            }),
            None => unreadable.push(id),
        }
    }
    (entries, unreadable)
}
