//! Reply-chain records and pruning on the store thread (issue 13): which conversation each
//! platform message belongs to, bounded by `SqliteOptions::message_cap`, and the periodic
//! prune of records and topic bindings nobody touched for the TTL.
//!
//! The cap is exact: `Db::messages` counts the rows, so at the bound exactly the excess
//! goes, least recently touched first (lowest `seq`; a touch renews a record's `seq`).
//! Each operation runs in [`Db::atomically`], so a failing statement leaves nothing half
//! done, not even inside a batch that commits.

use rusqlite::{OptionalExtension, params};

use super::{BindingKey, Db};
use crate::store::Pruned;

impl Db {
    /// Inserts or refreshes the records of `message_ids` under `key`'s topic, touches the
    /// binding of `key`, and trims the table back to the cap; see `Store::remember_messages`.
    pub(in crate::store::sqlite) fn remember_messages(
        &mut self,
        key: &BindingKey,
        message_ids: &[String],
        now: f64,
    ) -> rusqlite::Result<()> {
        self.atomically(|db| {
            let mut count = db.message_count()?;
            for id in message_ids {
                // Delete and re-insert: the new row takes the highest seq, i.e. becomes the
                // most recently touched, whichever topic it had before.
                let replaced = db
                    .conn
                    .prepare_cached(
                        "DELETE FROM messages WHERE channel = ?1 AND chat_id = ?2
                         AND message_id = ?3",
                    )?
                    .execute(params![key.0, key.1, id])?;
                db.conn
                    .prepare_cached(
                        "INSERT INTO messages (channel, chat_id, message_id, topic, touched_at)
                         VALUES (?1, ?2, ?3, ?4, ?5)",
                    )?
                    .execute(params![key.0, key.1, id, key.2, now])?;
                if replaced == 0 {
                    count += 1;
                }
            }
            db.conn
                .prepare_cached(
                    "UPDATE bindings SET touched_at = ?4
                     WHERE channel = ?1 AND chat_id = ?2 AND topic = ?3",
                )?
                .execute(params![key.0, key.1, key.2, now])?;
            if count > db.message_cap {
                let dropped = db
                    .conn
                    .prepare_cached(
                        "DELETE FROM messages WHERE seq IN
                         (SELECT seq FROM messages ORDER BY seq LIMIT ?1)",
                    )?
                    .execute([count - db.message_cap])?;
                count -= i64::try_from(dropped).unwrap_or(i64::MAX);
            }
            db.messages = Some(count);
            Ok(())
        })
    }

    /// The topic a remembered message belongs to.
    pub(in crate::store::sqlite) fn message_conversation(
        &self,
        channel: &str,
        chat_id: &str,
        message_id: &str,
    ) -> rusqlite::Result<Option<String>> {
        self.conn
            .prepare_cached(
                "SELECT topic FROM messages WHERE channel = ?1 AND chat_id = ?2
                 AND message_id = ?3",
            )?
            .query_row(params![channel, chat_id, message_id], |row| row.get(0))
            .optional()
    }

    /// Deletes the records and topic bindings touched at or before `cutoff` (unix seconds)
    /// and the pending questions expired at `now_ms` (unix milliseconds). Returns the
    /// counts and the removed bindings' keys, for the cache to forget.
    pub(in crate::store::sqlite) fn prune_conversations(
        &mut self,
        cutoff: f64,
        now_ms: i64,
    ) -> rusqlite::Result<(Pruned, Vec<BindingKey>)> {
        self.atomically(|db| {
            let bindings = db
                .conn
                .prepare_cached(
                    "DELETE FROM bindings WHERE topic <> '' AND touched_at <= ?1
                     RETURNING channel, chat_id, topic",
                )?
                .query_map([cutoff], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))?
                .collect::<rusqlite::Result<Vec<BindingKey>>>()?;
            let messages = db
                .conn
                .prepare_cached("DELETE FROM messages WHERE touched_at <= ?1")?
                .execute([cutoff])?;
            db.messages = db
                .messages
                .map(|count| count - i64::try_from(messages).unwrap_or(i64::MAX));
            let questions = db.prune_questions(now_ms)?;
            let pruned = Pruned {
                bindings: bindings.len(),
                messages,
                questions,
            };
            Ok((pruned, bindings))
        })
    }

    /// The number of message records, counted once after open or a rollback.
    fn message_count(&mut self) -> rusqlite::Result<i64> {
        if let Some(count) = self.messages {
            return Ok(count);
        }
        let count = self
            .conn
            .prepare_cached("SELECT count(*) FROM messages")?
            .query_row([], |row| row.get(0))?;
        self.messages = Some(count);
        Ok(count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::sqlite::SqliteOptions;

    fn open(dir: &tempfile::TempDir, message_cap: usize) -> Db {
        let options = SqliteOptions {
            message_cap,
            ..SqliteOptions::default()
        };
        Db::open(&dir.path().join("bridge.store"), &options).unwrap()
    }

    fn key(topic: &str) -> BindingKey {
        ("telegram".into(), "1".into(), topic.into())
    }

    fn ids(ids: &[&str]) -> Vec<String> {
        ids.iter().map(|id| (*id).to_owned()).collect()
    }

    fn topic(db: &Db, message: &str) -> Option<String> {
        db.message_conversation("telegram", "1", message).unwrap()
    }

    #[test]
    fn issue_13_retouching_keeps_the_message_cap_exact() {
        let dir = tempfile::tempdir().unwrap();
        let mut db = open(&dir, 4);
        db.remember_messages(&key(""), &ids(&["a", "b", "c", "d"]), 1.0)
            .unwrap();
        for _ in 0..3 {
            db.remember_messages(&key(""), &ids(&["a"]), 2.0).unwrap();
        }
        assert!(["a", "b", "c", "d"].iter().all(|m| topic(&db, m).is_some()));
        db.remember_messages(&key(""), &ids(&["e"]), 3.0).unwrap();
        assert_eq!(topic(&db, "b"), None, "the least recently touched goes");
        assert_eq!(db.messages, Some(4));
        assert_eq!(db.message_count().unwrap(), 4);
    }

    #[test]
    fn issue_13_the_count_is_recounted_after_a_rollback() {
        let dir = tempfile::tempdir().unwrap();
        let mut db = open(&dir, 2);
        db.begin().unwrap();
        db.remember_messages(&key(""), &ids(&["a", "b"]), 1.0)
            .unwrap();
        db.rollback();
        db.begin().unwrap();
        db.remember_messages(&key(""), &ids(&["c", "d"]), 1.0)
            .unwrap();
        db.commit().unwrap();
        // A stale count of 2 would have dropped both as over the cap.
        assert_eq!(topic(&db, "c").as_deref(), Some(""));
        assert_eq!(topic(&db, "d").as_deref(), Some(""));
        assert_eq!(topic(&db, "a"), None);
    }

    #[test]
    fn issue_13_a_failing_remember_leaves_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        let mut db = open(&dir, 8);
        db.remember_messages(&key(""), &ids(&["a"]), 1.0).unwrap();
        db.begin().unwrap();
        // The binding touch, the last statement before the cap, now fails.
        db.conn().execute_batch("DROP TABLE bindings").unwrap();
        assert!(
            db.remember_messages(&key("t"), &ids(&["a", "b"]), 2.0)
                .is_err()
        );
        assert_eq!(topic(&db, "a").as_deref(), Some(""), "a kept its topic");
        assert_eq!(topic(&db, "b"), None);
        assert_eq!(db.messages, None, "recounted on next use");
        db.commit().unwrap();
        assert_eq!(db.message_count().unwrap(), 1);
    }
}
