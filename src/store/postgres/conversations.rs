//! Reply-chain records and pruning on Postgres (issue 13): which conversation each platform
//! message belongs to, capped by [`PostgresOptions::message_cap`](super::PostgresOptions),
//! and the periodic prune of records and topic bindings nobody touched for the TTL. Each
//! call is one statement, so it is atomic, bounded by the call timeout like every other.

use std::time::Duration;

use im_bridge_channel::ChatId;

use super::clock::now_ms;
use super::{PostgresStore, failed};
use crate::store::{ConversationKey, Pruned, StoreError, unix_seconds};

impl PostgresStore {
    /// `Store::remember_messages`: one statement upserts the records (each takes a new
    /// sequence number), touches the binding, and drops what fell behind the cap.
    pub(super) async fn remember(
        &self,
        key: &ConversationKey,
        message_ids: &[&str],
    ) -> Result<(), StoreError> {
        // One upsert may not touch a row twice, so each id goes in once, in first-seen order.
        let mut ids: Vec<&str> = Vec::with_capacity(message_ids.len());
        for id in message_ids {
            if !ids.contains(id) {
                ids.push(id);
            }
        }
        // The DELETE runs on the statement's snapshot and skips this call's own ids, so it
        // never meets a row the upsert changes; the rows it inserts are newer than the cutoff.
        self.execute(
            "remember_messages",
            "WITH remembered AS (
                 INSERT INTO im_bridge_messages (channel, chat_id, message_id, topic, touched_at)
                 SELECT $1, $2, id, $4, $5
                 FROM unnest($3::text[]) WITH ORDINALITY AS given (id, n) ORDER BY n
                 ON CONFLICT (channel, chat_id, message_id) DO UPDATE SET
                     topic = EXCLUDED.topic, touched_at = EXCLUDED.touched_at, seq = EXCLUDED.seq
                 RETURNING seq
             ), touched AS (
                 UPDATE im_bridge_bindings SET touched_at = $5
                 WHERE channel = $1 AND chat_id = $2 AND topic = $4
                 RETURNING 1
             ), dropped AS (
                 DELETE FROM im_bridge_messages
                 WHERE seq <= (SELECT max(seq) FROM remembered) - $6
                   AND NOT (channel = $1 AND chat_id = $2 AND message_id = ANY ($3))
                 RETURNING 1
             )
             SELECT (SELECT count(*) FROM touched), (SELECT count(*) FROM dropped)",
            &[
                &key.channel,
                &key.chat_id.as_str(),
                &ids,
                &key.topic(),
                &unix_seconds(),
                &self.message_cap,
            ],
        )
        .await?;
        Ok(())
    }

    /// `Store::message_conversation`.
    pub(super) async fn conversation_of(
        &self,
        channel: &str,
        chat_id: &ChatId,
        message_id: &str,
    ) -> Result<Option<String>, StoreError> {
        let row = self
            .query_opt(
                "message_conversation",
                "SELECT topic FROM im_bridge_messages
                 WHERE channel = $1 AND chat_id = $2 AND message_id = $3",
                &[&channel, &chat_id.as_str(), &message_id],
            )
            .await?;
        row.map(|row| row.try_get(0))
            .transpose()
            .map_err(failed("message_conversation"))
    }

    /// `Store::prune_conversations`: the three deletes in one statement. A binding another
    /// replica touches meanwhile is re-checked against the cutoff and kept (read
    /// committed); a question is expired by the database's clock.
    pub(super) async fn prune(&self, older_than: Duration) -> Result<Pruned, StoreError> {
        let cutoff = unix_seconds() - older_than.as_secs_f64();
        let row = self
            .query_one(
                "prune_conversations",
                concat!(
                    "WITH bindings AS (
                         DELETE FROM im_bridge_bindings
                         WHERE topic <> '' AND touched_at <= $1
                         RETURNING 1
                     ), messages AS (
                         DELETE FROM im_bridge_messages WHERE touched_at <= $1
                         RETURNING 1
                     ), questions AS (
                         DELETE FROM im_bridge_questions WHERE expires_at <= ",
                    now_ms!(),
                    " RETURNING 1
                     )
                     SELECT (SELECT count(*) FROM bindings), (SELECT count(*) FROM messages),
                         (SELECT count(*) FROM questions)"
                ),
                &[&cutoff],
            )
            .await?;
        let count = |index: usize| -> Result<usize, StoreError> {
            let count: i64 = row.try_get(index).map_err(failed("prune_conversations"))?;
            Ok(usize::try_from(count).unwrap_or(0))
        };
        Ok(Pruned {
            bindings: count(0)?,
            messages: count(1)?,
            questions: count(2)?,
        })
    }
}
