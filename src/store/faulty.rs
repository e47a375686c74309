//! A store that passes every call on to another one but for the faults a test asks for
//! (tests only): reads that never see a binding, as if another replica bound the
//! conversation between this replica's read and its write; journal renewals and saves that
//! fail, as for a replica cut off from its store; admissions written but answered too late
//! (a timeout after the commit); takes of a pending question that never answer; lease calls
//! that fail, take long, or reach the store or answer only once a test lets them, each
//! recorded; and a claim to be shared by replicas, so that an SQLite store in a test stands
//! for a shared one.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use im_bridge_channel::ChatId;

use super::{
    AskedKey, Binding, ConversationKey, DedupeKey, JournalRecord, Journaled, Listed,
    PendingQuestion, Store, StoreError, Sweep,
};
use crate::gateway::ThreadId;

/// `inner` with the faults set on it.
pub(crate) struct Faulty {
    inner: Arc<dyn Store>,
    /// `get_binding` finds nothing.
    blind_reads: bool,
    /// `is_shared` says so whatever `inner` is.
    shared: bool,
    /// While set, `journal_renew` fails without reaching `inner`.
    pub(crate) renewals_fail: AtomicBool,
    /// While set, `journal_admit` reaches `inner` and then times out all the same.
    pub(crate) admissions_time_out: AtomicBool,
    /// While set, `take_question` never answers (a store that hangs).
    pub(crate) takes_hang: AtomicBool,
    /// While set, `journal_save` fails without reaching `inner`.
    pub(crate) saves_fail: AtomicBool,
    /// While `true`, `acquire_lease` and `release_lease` wait before they reach `inner` (a
    /// store that does not answer), and go on once it is `false`.
    pub(crate) leases_hang: watch::Sender<bool>,
    /// While `true`, `acquire_lease` waits after `inner` answered (a store that committed
    /// but answers late), and answers once it is `false`.
    pub(crate) leases_late: watch::Sender<bool>,
    /// While set, `acquire_lease` fails without reaching `inner`.
    pub(crate) leases_fail: AtomicBool,
    /// How long each `acquire_lease` takes before it reaches `inner` (a slow store).
    pub(crate) leases_slow: Mutex<Duration>,
    /// When each `acquire_lease` call was made, in order.
    pub(crate) lease_calls: Mutex<Vec<Instant>>,
    /// When each `acquire_lease` that `inner` granted was called, in order, as soon as
    /// `inner` granted it (answered or not).
    pub(crate) leases_granted: Mutex<Vec<Instant>>,
}

impl Faulty {
    /// `inner`, without a fault yet.
    pub(crate) fn new(inner: Arc<dyn Store>) -> Self {
        Self {
            inner,
            blind_reads: false,
            shared: false,
            renewals_fail: AtomicBool::new(false),
            admissions_time_out: AtomicBool::new(false),
            takes_hang: AtomicBool::new(false),
            saves_fail: AtomicBool::new(false),
            leases_hang: watch::Sender::new(false),
            leases_late: watch::Sender::new(false),
            leases_fail: AtomicBool::new(false),
            leases_slow: Mutex::new(Duration::ZERO),
            lease_calls: Mutex::new(Vec::new()),
            leases_granted: Mutex::new(Vec::new()),
        }
    }

    /// Reads never see a binding.
    pub(crate) fn blind_reads(self) -> Self {
        Self {
            blind_reads: true,
            ..self
        }
    }

    /// Shared by replicas, as far as its users can tell.
    pub(crate) fn shared(self) -> Self {
        Self {
            shared: true,
            ..self
        }
    }
}

#[async_trait::async_trait]
impl Store for Faulty {
    async fn get_binding(&self, key: &ConversationKey) -> Result<Option<Binding>, StoreError> {
        if self.blind_reads {
            return Ok(None);
        }
        self.inner.get_binding(key).await
    }
    async fn set_binding(
        &self,
        key: &ConversationKey,
        thread: &ThreadId,
        user: &str,
    ) -> Result<Binding, StoreError> {
        self.inner.set_binding(key, thread, user).await
    }
    async fn claim_binding(
        &self,
        key: &ConversationKey,
        thread: &ThreadId,
        user: &str,
    ) -> Result<Binding, StoreError> {
        self.inner.claim_binding(key, thread, user).await
    }
    async fn remove_binding(
        &self,
        channel: &str,
        chat: &ChatId,
        topic: Option<&str>,
    ) -> Result<usize, StoreError> {
        self.inner.remove_binding(channel, chat, topic).await
    }
    async fn dedupe_admit(&self, key: &DedupeKey, ttl: Duration) -> Result<bool, StoreError> {
        self.inner.dedupe_admit(key, ttl).await
    }
    async fn dedupe_admit_joined(
        &self,
        keys: &[DedupeKey],
        ttl: Duration,
    ) -> Result<Option<Vec<usize>>, StoreError> {
        self.inner.dedupe_admit_joined(keys, ttl).await
    }
    async fn dedupe_release(&self, key: &DedupeKey) -> Result<(), StoreError> {
        self.inner.dedupe_release(key).await
    }
    async fn journal_admit(
        &self,
        keys: &[DedupeKey],
        ttl: Duration,
        id: &str,
        record: &JournalRecord,
        holder: &str,
        lease: Duration,
    ) -> Result<Option<Vec<usize>>, StoreError> {
        let admitted = self
            .inner
            .journal_admit(keys, ttl, id, record, holder, lease)
            .await;
        if self.admissions_time_out.load(Ordering::SeqCst) {
            return Err(StoreError::TimedOut {
                op: "journal_admit",
            });
        }
        admitted
    }
    async fn journal_save(
        &self,
        id: &str,
        record: &JournalRecord,
        holder: &str,
    ) -> Result<bool, StoreError> {
        if self.saves_fail.load(Ordering::SeqCst) {
            return Err(StoreError::TimedOut { op: "journal_save" });
        }
        self.inner.journal_save(id, record, holder).await
    }
    async fn journal_remove(&self, id: &str, holder: &str) -> Result<bool, StoreError> {
        self.inner.journal_remove(id, holder).await
    }
    async fn journal_claim(
        &self,
        holder: &str,
        lease: Duration,
        take_live: bool,
    ) -> Result<Vec<Journaled>, StoreError> {
        self.inner.journal_claim(holder, lease, take_live).await
    }
    async fn journal_renew(
        &self,
        holder: &str,
        lease: Duration,
    ) -> Result<Vec<String>, StoreError> {
        if self.renewals_fail.load(Ordering::SeqCst) {
            return Err(StoreError::TimedOut {
                op: "journal_renew",
            });
        }
        self.inner.journal_renew(holder, lease).await
    }
    async fn journal_release(&self, holder: &str) -> Result<(), StoreError> {
        self.inner.journal_release(holder).await
    }
    async fn journal_take_held(
        &self,
        channel: &str,
        chat_id: &ChatId,
        holder: &str,
        lease: Duration,
    ) -> Result<Vec<Journaled>, StoreError> {
        self.inner
            .journal_take_held(channel, chat_id, holder, lease)
            .await
    }
    async fn journal_give_up(
        &self,
        id: &str,
        record: &JournalRecord,
        holder: &str,
    ) -> Result<bool, StoreError> {
        self.inner.journal_give_up(id, record, holder).await
    }
    async fn journal_list(&self, after: i64, limit: usize) -> Result<Vec<Listed>, StoreError> {
        self.inner.journal_list(after, limit).await
    }
    async fn journal_retry(&self, ids: &[String]) -> Result<usize, StoreError> {
        self.inner.journal_retry(ids).await
    }
    async fn journal_drop(&self, ids: &[String]) -> Result<usize, StoreError> {
        self.inner.journal_drop(ids).await
    }
    async fn journal_sweep(&self, holder: &str, forget: Duration) -> Result<Sweep, StoreError> {
        self.inner.journal_sweep(holder, forget).await
    }
    async fn acquire_lease(
        &self,
        name: &str,
        holder: &str,
        ttl: Duration,
    ) -> Result<bool, StoreError> {
        let called = Instant::now();
        (self.lease_calls.lock())
            .unwrap_or_else(|p| p.into_inner())
            .push(called);
        let slow = *self.leases_slow.lock().unwrap_or_else(|p| p.into_inner());
        tokio::time::sleep(slow).await;
        if self.leases_fail.load(Ordering::SeqCst) {
            return Err(StoreError::TimedOut {
                op: "acquire_lease",
            });
        }
        // Never closed: the senders are this store's own.
        let _ = self.leases_hang.subscribe().wait_for(|hang| !hang).await;
        let granted = self.inner.acquire_lease(name, holder, ttl).await?;
        if granted {
            (self.leases_granted.lock())
                .unwrap_or_else(|p| p.into_inner())
                .push(called);
        }
        let _ = self.leases_late.subscribe().wait_for(|late| !late).await;
        Ok(granted)
    }
    async fn release_lease(&self, name: &str, holder: &str) -> Result<(), StoreError> {
        // Never closed: the sender is this store's own.
        let _ = self.leases_hang.subscribe().wait_for(|hang| !hang).await;
        self.inner.release_lease(name, holder).await
    }
    async fn remember_messages(
        &self,
        key: &ConversationKey,
        ids: &[&str],
    ) -> Result<(), StoreError> {
        self.inner.remember_messages(key, ids).await
    }
    async fn message_conversation(
        &self,
        channel: &str,
        chat: &ChatId,
        message: &str,
    ) -> Result<Option<String>, StoreError> {
        self.inner
            .message_conversation(channel, chat, message)
            .await
    }
    async fn prune_conversations(
        &self,
        older_than: Duration,
    ) -> Result<crate::store::Pruned, StoreError> {
        self.inner.prune_conversations(older_than).await
    }
    async fn get_chat_locale(
        &self,
        channel: &str,
        chat: &ChatId,
    ) -> Result<Option<String>, StoreError> {
        self.inner.get_chat_locale(channel, chat).await
    }
    async fn set_chat_locale(
        &self,
        channel: &str,
        chat: &ChatId,
        locale: Option<&str>,
    ) -> Result<(), StoreError> {
        self.inner.set_chat_locale(channel, chat, locale).await
    }
    async fn get_channel_state(
        &self,
        channel: &str,
        key: &str,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        self.inner.get_channel_state(channel, key).await
    }
    async fn put_channel_state(
        &self,
        channel: &str,
        key: &str,
        value: &[u8],
    ) -> Result<(), StoreError> {
        self.inner.put_channel_state(channel, key, value).await
    }
    async fn delete_channel_state(&self, channel: &str, key: &str) -> Result<(), StoreError> {
        self.inner.delete_channel_state(channel, key).await
    }
    async fn take_tokens(
        &self,
        key: &str,
        budget: &im_bridge_channel::RateBudget,
        want: u32,
    ) -> Result<im_bridge_channel::budget::Grant, StoreError> {
        self.inner.take_tokens(key, budget, want).await
    }
    async fn remember_question(
        &self,
        asked: &AskedKey,
        topic: &str,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        self.inner.remember_question(asked, topic, ttl).await
    }
    async fn forget_question(&self, asked: &AskedKey, topic: &str) -> Result<bool, StoreError> {
        self.inner.forget_question(asked, topic).await
    }
    async fn take_question(&self, asked: &AskedKey) -> Result<Option<PendingQuestion>, StoreError> {
        if self.takes_hang.load(Ordering::SeqCst) {
            std::future::pending::<()>().await;
        }
        self.inner.take_question(asked).await
    }
    async fn give_back_question(&self, question: &PendingQuestion) -> Result<bool, StoreError> {
        self.inner.give_back_question(question).await
    }
    async fn pending_questions(&self, limit: usize) -> Result<Vec<PendingQuestion>, StoreError> {
        self.inner.pending_questions(limit).await
    }
    async fn close(&self) -> Result<(), StoreError> {
        self.inner.close().await
    }
    fn is_shared(&self) -> bool {
        self.shared || self.inner.is_shared()
    }
    fn describe(&self) -> String {
        self.inner.describe()
    }
}
