//! Channel state on the store thread (issue 32): one opaque value per `(channel, key)`,
//! one statement per operation. Not cached: adapters read it at start, not per message.

use rusqlite::{OptionalExtension, params};

use super::Db;

impl Db {
    /// See `Store::get_channel_state`.
    pub(in crate::store::sqlite) fn get_channel_state(
        &self,
        channel: &str,
        key: &str,
    ) -> rusqlite::Result<Option<Vec<u8>>> {
        self.conn
            .prepare_cached("SELECT value FROM channel_state WHERE channel = ?1 AND key = ?2")?
            .query_row(params![channel, key], |row| row.get(0))
            .optional()
    }

    /// See `Store::put_channel_state`.
    pub(in crate::store::sqlite) fn put_channel_state(
        &self,
        channel: &str,
        key: &str,
        value: &[u8],
        now: f64,
    ) -> rusqlite::Result<()> {
        self.conn
            .prepare_cached(
                "INSERT INTO channel_state (channel, key, value, updated_at)
                 VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (channel, key) DO UPDATE SET
                     value = excluded.value, updated_at = excluded.updated_at",
            )?
            .execute(params![channel, key, value, now])?;
        Ok(())
    }

    /// See `Store::delete_channel_state`.
    pub(in crate::store::sqlite) fn delete_channel_state(
        &self,
        channel: &str,
        key: &str,
    ) -> rusqlite::Result<()> {
        self.conn
            .prepare_cached("DELETE FROM channel_state WHERE channel = ?1 AND key = ?2")?
            .execute(params![channel, key])?;
        Ok(())
    }
}
