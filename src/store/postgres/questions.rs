//! The agent's pending questions in groups on Postgres: one row per (channel, chat, user)
//! asked, naming the asking conversation's topic and its expiry on the database's clock
//! (issue 27), so every replica agrees on whether an answer still finds its question.
//!
//! Each operation is one statement. A take is a `DELETE … RETURNING`: of two replicas
//! taking one question at once, the second waits for the first's row lock and then finds
//! no row, so an answer joins its question on one replica only. Remembering upserts the
//! row with a new sequence number and drops, in the same statement, the questions more
//! than [`PostgresOptions::question_cap`](super::PostgresOptions) numbers behind it; giving
//! a taken question back is the same statement, but the upsert replaces only an expired
//! row (a question asked since stays).

use std::time::Duration;

use im_bridge_channel::ChatId;

use super::clock::{now_ms, ttl_param};
use super::{PostgresStore, failed};
use crate::store::{AskedKey, PendingQuestion, StoreError};

/// The statement remembering a question: an upsert that takes a new sequence number,
/// then the drop of the questions more than the cap behind it; the row replaces the one
/// pending for that user in that chat when that one matches the `WHERE` given (`TRUE`:
/// always). It returns how many rows it wrote (0 or 1).
macro_rules! remember_sql {
    ($replace_when:expr) => {
        // The DELETE runs on the statement's snapshot and skips the row being upserted, so
        // it never meets a row the upsert changes.
        concat!(
            "WITH remembered AS (
                 INSERT INTO im_bridge_questions (channel, chat_id, user_id, topic, expires_at)
                 VALUES ($1, $2, $3, $4, ",
            now_ms!(),
            " + $5)
                 ON CONFLICT (channel, chat_id, user_id) DO UPDATE SET
                     topic = EXCLUDED.topic, expires_at = EXCLUDED.expires_at,
                     seq = EXCLUDED.seq
                 WHERE ",
            $replace_when,
            "
                 RETURNING seq
             ), dropped AS (
                 DELETE FROM im_bridge_questions
                 WHERE seq <= (SELECT seq FROM remembered) - $6
                   AND NOT (channel = $1 AND chat_id = $2 AND user_id = $3)
                 RETURNING 1
             )
             SELECT (SELECT count(*) FROM remembered), (SELECT count(*) FROM dropped)"
        )
    };
}

impl PostgresStore {
    /// `Store::remember_question`.
    pub(super) async fn question_remember(
        &self,
        asked: &AskedKey,
        topic: &str,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        self.question_write(
            "remember_question",
            remember_sql!("TRUE"),
            asked,
            topic,
            ttl,
        )
        .await?;
        Ok(())
    }

    /// `Store::give_back_question`: the upsert replaces only an expired row, so a question
    /// asked since stays, also when it is remembered at the same moment (the conflict waits
    /// for its row lock, then sees it live).
    pub(super) async fn question_give_back(
        &self,
        question: &PendingQuestion,
    ) -> Result<bool, StoreError> {
        let given_back = self
            .question_write(
                "give_back_question",
                remember_sql!(concat!("im_bridge_questions.expires_at <= ", now_ms!())),
                &question.asked,
                &question.topic,
                question.expires_in,
            )
            .await?;
        Ok(given_back)
    }

    /// Runs `sql`, one of the `remember_sql!` statements, for `asked`'s question of `topic`
    /// waiting `ttl`: whether it wrote the row.
    async fn question_write(
        &self,
        op: &'static str,
        sql: &'static str,
        asked: &AskedKey,
        topic: &str,
        ttl: Duration,
    ) -> Result<bool, StoreError> {
        let row = self
            .query_one(
                op,
                sql,
                &[
                    &asked.channel,
                    &asked.chat_id.as_str(),
                    &asked.user_id,
                    &topic,
                    &ttl_param(ttl),
                    &self.question_cap,
                ],
            )
            .await?;
        let written: i64 = row.try_get(0).map_err(failed(op))?;
        Ok(written > 0)
    }

    /// `Store::forget_question`.
    pub(super) async fn question_forget(
        &self,
        asked: &AskedKey,
        topic: &str,
    ) -> Result<bool, StoreError> {
        let gone = self
            .execute(
                "forget_question",
                "DELETE FROM im_bridge_questions
                 WHERE channel = $1 AND chat_id = $2 AND user_id = $3 AND topic = $4",
                &[
                    &asked.channel,
                    &asked.chat_id.as_str(),
                    &asked.user_id,
                    &topic,
                ],
            )
            .await?;
        Ok(gone > 0)
    }

    /// `Store::take_question`: the row goes whether or not it expired; only a live one
    /// answers.
    pub(super) async fn question_take(
        &self,
        asked: &AskedKey,
    ) -> Result<Option<PendingQuestion>, StoreError> {
        let row = self
            .query_opt(
                "take_question",
                concat!(
                    "DELETE FROM im_bridge_questions
                     WHERE channel = $1 AND chat_id = $2 AND user_id = $3
                     RETURNING topic, expires_at - ",
                    now_ms!()
                ),
                &[&asked.channel, &asked.chat_id.as_str(), &asked.user_id],
            )
            .await?;
        let Some(row) = row else {
            return Ok(None);
        };
        let failed = failed("take_question");
        let left: i64 = row.try_get(1).map_err(&failed)?;
        if left <= 0 {
            return Ok(None);
        }
        Ok(Some(PendingQuestion {
            asked: asked.clone(),
            topic: row.try_get(0).map_err(failed)?,
            expires_in: Duration::from_millis(u64::try_from(left).unwrap_or(0)),
        }))
    }

    /// `Store::pending_questions`.
    pub(super) async fn questions_pending(
        &self,
        limit: usize,
    ) -> Result<Vec<PendingQuestion>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = self
            .query(
                "pending_questions",
                concat!(
                    "WITH now (ms) AS (SELECT ",
                    now_ms!(),
                    ")
                     SELECT channel, chat_id, user_id, topic, expires_at - now.ms
                     FROM im_bridge_questions, now
                     WHERE expires_at > now.ms
                     ORDER BY seq DESC LIMIT $1"
                ),
                &[&limit],
            )
            .await?;
        let failed = failed("pending_questions");
        rows.iter()
            .map(|row| {
                let left: i64 = row.try_get(4)?;
                Ok(PendingQuestion {
                    asked: AskedKey {
                        channel: row.try_get(0)?,
                        chat_id: ChatId::new(row.try_get::<_, String>(1)?),
                        user_id: row.try_get(2)?,
                    },
                    topic: row.try_get(3)?,
                    expires_in: Duration::from_millis(u64::try_from(left).unwrap_or(0)),
                })
            })
            .collect::<Result<_, tokio_postgres::Error>>()
            .map_err(failed)
    }
}
