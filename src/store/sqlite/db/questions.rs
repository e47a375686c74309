//! The agent's pending questions in groups on the store thread: one row per (channel,
//! chat, user) asked, naming the asking conversation's topic and its expiry (unix
//! milliseconds on this process's clock, the store's clock, as for every expiry here).
//!
//! Remembering a question (or giving a taken one back) deletes and re-inserts its row, so
//! it takes the highest `seq`; the cap then drops every row more than `question_cap`
//! numbers behind it, the questions remembered longest ago. A re-remembered question leaves its old number unused, so the
//! table holds at most the cap (fewer under re-asking), without a count per call.

use rusqlite::{OptionalExtension, params};

use super::Db;

/// `(channel, chat_id, user_id)`: who was asked.
pub(in crate::store::sqlite) type AskedRow = (String, String, String);

/// A live question: who was asked, the asking topic, milliseconds until it expires.
pub(in crate::store::sqlite) type QuestionRow = (AskedRow, String, i64);

impl Db {
    /// See `Store::remember_question`; `expires_at` in unix milliseconds.
    pub(in crate::store::sqlite) fn remember_question(
        &mut self,
        asked: &AskedRow,
        topic: &str,
        expires_at: i64,
    ) -> rusqlite::Result<()> {
        self.atomically(|db| db.replace_question(asked, topic, expires_at))
    }

    /// See `Store::give_back_question`; `now` and `expires_at` in unix milliseconds.
    pub(in crate::store::sqlite) fn give_back_question(
        &mut self,
        asked: &AskedRow,
        topic: &str,
        now: i64,
        expires_at: i64,
    ) -> rusqlite::Result<bool> {
        self.atomically(|db| {
            let newer: bool = db
                .conn
                .prepare_cached(
                    "SELECT EXISTS (SELECT 1 FROM questions
                     WHERE channel = ?1 AND chat_id = ?2 AND user_id = ?3 AND expires_at > ?4)",
                )?
                .query_row(params![asked.0, asked.1, asked.2, now], |row| row.get(0))?;
            if newer {
                return Ok(false);
            }
            db.replace_question(asked, topic, expires_at)?;
            Ok(true)
        })
    }

    /// Replaces `asked`'s question with one of `topic` expiring at `expires_at`, as the
    /// newest (the module's numbering), and drops what the cap leaves over. Inside a
    /// transaction.
    fn replace_question(
        &self,
        asked: &AskedRow,
        topic: &str,
        expires_at: i64,
    ) -> rusqlite::Result<()> {
        self.conn
            .prepare_cached(
                "DELETE FROM questions WHERE channel = ?1 AND chat_id = ?2 AND user_id = ?3",
            )?
            .execute(params![asked.0, asked.1, asked.2])?;
        let seq: i64 = self
            .conn
            .prepare_cached(
                "INSERT INTO questions (channel, chat_id, user_id, topic, expires_at)
                 VALUES (?1, ?2, ?3, ?4, ?5) RETURNING seq",
            )?
            .query_row(
                params![asked.0, asked.1, asked.2, topic, expires_at],
                |row| row.get(0),
            )?;
        self.conn
            .prepare_cached("DELETE FROM questions WHERE seq <= ?1")?
            .execute([seq.saturating_sub(self.question_cap)])?;
        Ok(())
    }

    /// See `Store::forget_question`.
    pub(in crate::store::sqlite) fn forget_question(
        &self,
        asked: &AskedRow,
        topic: &str,
    ) -> rusqlite::Result<bool> {
        let gone = self
            .conn
            .prepare_cached(
                "DELETE FROM questions
                 WHERE channel = ?1 AND chat_id = ?2 AND user_id = ?3 AND topic = ?4",
            )?
            .execute(params![asked.0, asked.1, asked.2, topic])?;
        Ok(gone > 0)
    }

    /// See `Store::take_question`: one statement removes the row and says how long it
    /// still waited at `now` (unix milliseconds): the asking topic and the milliseconds
    /// left, when it was live.
    pub(in crate::store::sqlite) fn take_question(
        &self,
        asked: &AskedRow,
        now: i64,
    ) -> rusqlite::Result<Option<(String, i64)>> {
        let taken: Option<(String, i64)> = self
            .conn
            .prepare_cached(
                "DELETE FROM questions WHERE channel = ?1 AND chat_id = ?2 AND user_id = ?3
                 RETURNING topic, expires_at - ?4",
            )?
            .query_row(params![asked.0, asked.1, asked.2, now], |row| {
                Ok((row.get(0)?, row.get(1)?))
            })
            .optional()?;
        Ok(taken.filter(|(_, left_ms)| *left_ms > 0))
    }

    /// See `Store::pending_questions`.
    pub(in crate::store::sqlite) fn pending_questions(
        &self,
        now: i64,
        limit: usize,
    ) -> rusqlite::Result<Vec<QuestionRow>> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.conn
            .prepare_cached(
                "SELECT channel, chat_id, user_id, topic, expires_at - ?1 FROM questions
                 WHERE expires_at > ?1 ORDER BY seq DESC LIMIT ?2",
            )?
            .query_map(params![now, limit], |row| {
                Ok((
                    (row.get(0)?, row.get(1)?, row.get(2)?),
                    row.get(3)?,
                    row.get(4)?,
                ))
            })?
            .collect()
    }

    /// Deletes the questions expired at `now` (unix milliseconds); part of the prune.
    pub(super) fn prune_questions(&self, now: i64) -> rusqlite::Result<usize> {
        self.conn
            .prepare_cached("DELETE FROM questions WHERE expires_at <= ?1")?
            .execute([now])
    }
}
