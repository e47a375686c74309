//! The async side of the agent's pending questions in groups: each operation runs on the
//! store thread (`db/questions.rs` holds the statements) against this process's clock,
//! the store's; the [`Store`](super::Store) implementation forwards to these. Not
//! cached: a process that alone opens the file keeps its questions in memory itself (the
//! manager's `clarify`), so these run only on its writes and at its start.

use std::time::Duration;

use im_bridge_channel::ChatId;

use super::SqliteStore;
use super::db::questions::AskedRow;
use crate::store::{AskedKey, PendingQuestion, StoreError, ttl_millis, unix_millis};

/// The row key of who was asked.
fn row(asked: &AskedKey) -> AskedRow {
    (
        asked.channel.clone(),
        asked.chat_id.as_str().to_owned(),
        asked.user_id.clone(),
    )
}

impl SqliteStore {
    /// `Store::remember_question`.
    pub(super) async fn question_remember(
        &self,
        asked: &AskedKey,
        topic: &str,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        let (asked, topic) = (row(asked), topic.to_owned());
        let ttl_ms = ttl_millis(ttl);
        self.call(
            "remember_question",
            move |db| {
                let expires_at = unix_millis().saturating_add(ttl_ms);
                db.remember_question(&asked, &topic, expires_at)
            },
            |_, ()| {},
        )
        .await
    }

    /// `Store::forget_question`.
    pub(super) async fn question_forget(
        &self,
        asked: &AskedKey,
        topic: &str,
    ) -> Result<bool, StoreError> {
        let (asked, topic) = (row(asked), topic.to_owned());
        self.call(
            "forget_question",
            move |db| db.forget_question(&asked, &topic),
            |_, _| {},
        )
        .await
    }

    /// `Store::take_question`.
    pub(super) async fn question_take(
        &self,
        asked: &AskedKey,
    ) -> Result<Option<PendingQuestion>, StoreError> {
        let key = row(asked);
        let taken = self
            .call(
                "take_question",
                move |db| db.take_question(&key, unix_millis()),
                |_, _| {},
            )
            .await?;
        Ok(taken.map(|(topic, left_ms)| PendingQuestion {
            asked: asked.clone(),
            topic,
            expires_in: left(left_ms),
        }))
    }

    /// `Store::give_back_question`.
    pub(super) async fn question_give_back(
        &self,
        question: &PendingQuestion,
    ) -> Result<bool, StoreError> {
        let (asked, topic) = (row(&question.asked), question.topic.clone());
        let ttl_ms = ttl_millis(question.expires_in);
        self.call(
            "give_back_question",
            move |db| {
                let now = unix_millis();
                db.give_back_question(&asked, &topic, now, now.saturating_add(ttl_ms))
            },
            |_, _| {},
        )
        .await
    }

    /// `Store::pending_questions`.
    pub(super) async fn questions_pending(
        &self,
        limit: usize,
    ) -> Result<Vec<PendingQuestion>, StoreError> {
        let rows = self
            .call(
                "pending_questions",
                move |db| db.pending_questions(unix_millis(), limit),
                |_, _| {},
            )
            .await?;
        Ok(rows
            .into_iter()
            .map(
                |((channel, chat_id, user_id), topic, left_ms)| PendingQuestion {
                    asked: AskedKey {
                        channel,
                        chat_id: ChatId::new(chat_id),
                        user_id,
                    },
                    topic,
                    expires_in: left(left_ms),
                },
            )
            .collect())
    }
}

/// How long a question still waits, from the milliseconds left (none when negative).
fn left(left_ms: i64) -> Duration {
    Duration::from_millis(u64::try_from(left_ms).unwrap_or(0))
}
