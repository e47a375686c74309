//! [`Deliveries`]: the in-flight journal as an operator sees and acts on it (issue 33).
//!
//! A *delivery* is an entry whose answer waits to be delivered (pending) or whose retries
//! gave up; an entry whose turn is still under way is not one, and nothing here touches it.
//! The listing shows who and when, never what (message and answer text only when asked
//! for, `--show-text`), one page at a time, so memory stays bounded whatever the journal
//! holds. Retry and drop act on named deliveries or on all of them; the store re-checks
//! each atomically, so an entry that moved on meanwhile is counted only if it still was a
//! delivery.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use tokio::sync::Notify;

use crate::store::{
    JOURNAL_CAP, JournalState, Listed, Store, StoreError, conversation_key, unix_millis,
};

/// Most entries one page reads from the store (and most deliveries it holds).
pub const PAGE_MAX: usize = 500;

/// Most ids one retry or drop may name.
pub const IDS_MAX: usize = 1000;

/// Where a delivery stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryState {
    /// The bridge still retries it (with backoff, for `bridge.final_retry_hours`).
    Pending,
    /// Its retries gave up; it waits for an operator.
    GaveUp,
    /// It waits for the chat's next message: its own took no more replies (a reply
    /// window closed). Never retried nor given up; an operator may drop it.
    Held,
}

impl DeliveryState {
    /// The state as the listing writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::GaveUp => "gave_up",
            Self::Held => "held",
        }
    }
}

/// One delivery as the operator's listing shows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Delivery {
    /// The journal entry's id (what `retry` and `drop` take).
    pub id: String,
    /// The channel (platform) the message came from.
    pub channel: String,
    /// The conversation, `channel:chat[:topic]`.
    pub conversation: String,
    /// Pending or given up.
    pub state: DeliveryState,
    /// How far its turn got: `final_pending` (the answer waits), `held` (for the chat's
    /// next message), or `admitted` / `running` for a message given up before its answer
    /// was written.
    pub stage: JournalState,
    /// When the message was admitted, unix milliseconds.
    pub admitted_at_ms: i64,
    /// Seconds since it was admitted, when listed.
    pub age_seconds: u64,
    /// When its retries gave up, unix milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gave_up_at_ms: Option<i64>,
    /// Delivery attempts so far: the first delivery and each retry.
    pub attempts: u32,
    /// Answers (messages) waiting to be delivered.
    pub finals: usize,
    /// Why the last attempt failed (log-safe: an operation and a code).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// The texts, only when asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<Texts>,
}

/// A delivery's texts, listed only on request.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Texts {
    /// The message it answers.
    pub message: String,
    /// The answers waiting to be delivered.
    pub answers: Vec<String>,
}

/// One page of the listing.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Page {
    /// The deliveries on it, oldest first.
    pub deliveries: Vec<Delivery>,
    /// Where the next page starts (`after`), or `None` after the last.
    pub next: Option<i64>,
}

/// What an operator does to deliveries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// Makes them due now: one that gave up is retried for another retry window, a
    /// pending one at once ([`Store::journal_retry`]); one held for its chat's next
    /// message is left alone.
    Retry,
    /// Removes them: their answers are never delivered ([`Store::journal_drop`]).
    Drop,
}

impl Change {
    /// Its name: the command, and the last segment of its admin endpoint.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Retry => "retry",
            Self::Drop => "drop",
        }
    }

    /// The change named `name`.
    pub fn named(name: &str) -> Option<Self> {
        [Self::Retry, Self::Drop]
            .into_iter()
            .find(|change| change.as_str() == name)
    }

    /// The key of the count in its endpoint's answer (`{"retried": 1}`).
    pub fn done(self) -> &'static str {
        match self {
            Self::Retry => "retried",
            Self::Drop => "dropped",
        }
    }
}

/// Which deliveries a retry or drop acts on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Selection {
    /// These, by id (at most [`IDS_MAX`]).
    Ids(Vec<String>),
    /// Every delivery in the journal when the call is made.
    All,
}

/// The journal as the operator's tools act on it. Cheap to clone.
#[derive(Clone)]
pub struct Deliveries {
    store: Arc<dyn Store>,
    /// A running manager's journal upkeep, woken after a retry so it takes the retried
    /// deliveries up at once (the daemon's admin endpoints); `None` on the command line.
    upkeep: Option<Arc<Notify>>,
}

impl Deliveries {
    /// The deliveries in `store`.
    pub fn new(store: Arc<dyn Store>) -> Self {
        Self {
            store,
            upkeep: None,
        }
    }

    /// Wakes `upkeep` after each retry.
    pub(crate) fn with_upkeep(mut self, upkeep: Arc<Notify>) -> Self {
        self.upkeep = Some(upkeep);
        self
    }

    /// The deliveries among the next (at most `limit`, capped at [`PAGE_MAX`]) journal
    /// entries after `after` (0: the first page), with their texts when `show_text`.
    pub async fn page(
        &self,
        after: i64,
        limit: usize,
        show_text: bool,
    ) -> Result<Page, StoreError> {
        let limit = limit.clamp(1, PAGE_MAX);
        let listed = self.store.journal_list(after, limit).await?;
        let next = listed
            .last()
            .filter(|_| listed.len() == limit)
            .map(|last| last.seq);
        let now = unix_millis();
        let deliveries = listed
            .iter()
            .filter(|entry| entry.is_delivery())
            .map(|entry| describe(entry, now, show_text))
            .collect();
        Ok(Page { deliveries, next })
    }

    /// Retries or drops the selected deliveries; returns how many.
    pub async fn change(&self, change: Change, selection: &Selection) -> Result<usize, StoreError> {
        let mut changed = 0;
        for ids in self.resolve(selection).await?.chunks(PAGE_MAX) {
            changed += match change {
                Change::Retry => self.store.journal_retry(ids).await?,
                Change::Drop => self.store.journal_drop(ids).await?,
            };
        }
        if change == Change::Retry
            && changed > 0
            && let Some(upkeep) = &self.upkeep
        {
            upkeep.notify_one();
        }
        Ok(changed)
    }

    /// The ids a selection names: for [`Selection::All`], every delivery listed now (at
    /// most the journal's cap).
    async fn resolve(&self, selection: &Selection) -> Result<Vec<String>, StoreError> {
        let mut after = match selection {
            Selection::Ids(ids) => return Ok(ids.iter().take(IDS_MAX).cloned().collect()),
            Selection::All => 0,
        };
        let mut ids = Vec::new();
        while ids.len() < JOURNAL_CAP {
            let listed = self.store.journal_list(after, PAGE_MAX).await?;
            ids.extend(
                listed
                    .iter()
                    .filter(|entry| entry.is_delivery())
                    .map(|entry| entry.id.clone()),
            );
            match listed.last() {
                Some(last) if listed.len() == PAGE_MAX => after = last.seq,
                _ => break,
            }
        }
        Ok(ids)
    }
}

/// What the listing shows of `entry`, listed at `now`.
fn describe(entry: &Listed, now: i64, show_text: bool) -> Delivery {
    let record = &entry.record;
    let message = &record.message;
    let age_ms = now.saturating_sub(entry.created_ms).max(0);
    Delivery {
        id: entry.id.clone(),
        channel: message.channel_name.clone(),
        conversation: conversation_key(message).storage_key(),
        state: match (entry.gave_up_ms, record.state) {
            (Some(_), _) => DeliveryState::GaveUp,
            (None, JournalState::Held) => DeliveryState::Held,
            (None, _) => DeliveryState::Pending,
        },
        stage: record.state,
        admitted_at_ms: entry.created_ms,
        age_seconds: u64::try_from(age_ms / 1000).unwrap_or(0),
        gave_up_at_ms: entry.gave_up_ms,
        attempts: record.attempts,
        finals: record.finals.len(),
        last_error: record.last_error.clone(),
        text: show_text.then(|| Texts {
            message: message.text.clone(),
            answers: record.finals.iter().map(|f| f.text.clone()).collect(),
        }),
    }
}
