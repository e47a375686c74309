//! The in-flight journal on the store thread (issue 19). Admission writes the dedupe record
//! and the entry in one savepoint, so a redelivery is either refused with the entry in
//! place or admitted with it; the other operations are one statement each.

use rusqlite::params;

use super::Db;
use crate::store::journal::{self, Journaled};
use crate::store::{DedupeKey, JOURNAL_CAP};

impl Db {
    /// See `Store::journal_admit`.
    pub(in crate::store::sqlite) fn journal_admit(
        &mut self,
        dedupe: Option<(&DedupeKey, i64)>,
        id: &str,
        record: &str,
        holder: &str,
        now_ms: i64,
        lease_ms: i64,
    ) -> rusqlite::Result<bool> {
        self.atomically(|db| {
            if let Some((key, ttl_ms)) = dedupe
                && !db.dedupe_admit(key, now_ms, ttl_ms)?
            {
                return Ok(false);
            }
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
            Ok(true)
        })
    }

    /// See `Store::journal_save`.
    pub(in crate::store::sqlite) fn journal_save(
        &self,
        id: &str,
        record: &str,
        holder: &str,
    ) -> rusqlite::Result<bool> {
        let saved = self
            .conn
            .prepare_cached("UPDATE journal SET record = ?2 WHERE id = ?1 AND holder = ?3")?
            .execute(params![id, record, holder])?;
        Ok(saved == 1)
    }

    /// See `Store::journal_remove`.
    pub(in crate::store::sqlite) fn journal_remove(&self, id: &str) -> rusqlite::Result<()> {
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
            let cutoff = if take_live { i64::MAX } else { now_ms };
            let mut claimed = Vec::new();
            let mut unreadable = Vec::new();
            {
                let mut select = db.conn.prepare_cached(
                    "SELECT id, record, created_at FROM journal
                     WHERE holder <> ?1 AND lease_until <= ?2 ORDER BY seq",
                )?;
                let rows = select.query_map(params![holder, cutoff], |row| {
                    Ok((
                        row.get::<_, String>(0)?,
                        row.get::<_, String>(1)?,
                        row.get::<_, i64>(2)?,
                    ))
                })?;
                for row in rows {
                    let (id, record, created_ms) = row?;
                    match journal::decode(&record) {
                        Some(record) => claimed.push(Journaled {
                            id,
                            created_ms,
                            record,
                        }),
                        None => unreadable.push(id),
                    }
                }
            }
            let mut take = db
                .conn
                .prepare_cached("UPDATE journal SET holder = ?2, lease_until = ?3 WHERE id = ?1")?;
            let until = now_ms.saturating_add(lease_ms);
            for entry in &claimed {
                take.execute(params![entry.id, holder, until])?;
            }
            drop(take);
            for id in &unreadable {
                db.journal_remove(id)?;
            }
            Ok((claimed, unreadable.len()))
        })
    }

    /// See `Store::journal_renew`.
    pub(in crate::store::sqlite) fn journal_renew(
        &self,
        holder: &str,
        until_ms: i64,
    ) -> rusqlite::Result<()> {
        self.conn
            .prepare_cached("UPDATE journal SET lease_until = ?2 WHERE holder = ?1")?
            .execute(params![holder, until_ms])?;
        Ok(())
    }
}
