//! Conversation → thread bindings (spec manager §4.2).
//!
//! A conversation is `channel:chat[:topic]`. Its first chat message creates a Gateway
//! thread under a per-conversation lock, so concurrent first messages create exactly one
//! thread; the rest wait on the lock and reuse it. `/new` always creates a fresh thread and
//! overwrites the binding. A reused thread gets one best-effort `channel_source` metadata
//! update per manager lifetime.
//!
//! Bounds: the lock table holds an entry only while someone holds or waits for that
//! conversation's lock; the metadata-sync set holds at most [`MAX_SYNCED`] thread ids and is
//! cleared when full (the worst case is one extra best-effort PATCH per thread).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use im_bridge_channel::InboundMessage;
use serde_json::{Map, Value, json};

use crate::gateway::ThreadId;
use crate::gateway::{GatewayClient, GatewayError, Owner};
pub use crate::store::conversation_key;
use crate::store::{ConversationKey, Store, StoreError};

/// Thread ids remembered as already synced before the set is cleared.
pub const MAX_SYNCED: usize = 4096;

/// Why a binding could not be resolved.
#[derive(Debug, thiserror::Error)]
pub enum BindError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The Gateway refused to create the thread.
    #[error(transparent)]
    Gateway(#[from] GatewayError),
}

/// How a new thread is bound.
#[derive(Clone, Copy)]
enum Bind {
    /// Only if the conversation is still unbound (a first message; replicas may race).
    Claim,
    /// Whatever was bound before (`/new`).
    Overwrite,
}

/// Resolves and creates bindings.
pub struct Bindings {
    store: Arc<dyn Store>,
    gateway: GatewayClient,
    locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    synced: Mutex<HashSet<ThreadId>>,
}

impl Bindings {
    /// Bindings over a store and a Gateway.
    pub fn new(store: Arc<dyn Store>, gateway: GatewayClient) -> Self {
        Self {
            store,
            gateway,
            locks: Mutex::new(HashMap::new()),
            synced: Mutex::new(HashSet::new()),
        }
    }

    /// The thread bound to the message's conversation, without creating one.
    pub async fn current(&self, msg: &InboundMessage) -> Result<Option<ThreadId>, StoreError> {
        Ok(self
            .store
            .get_binding(&conversation_key(msg))
            .await?
            .map(|b| b.thread_id))
    }

    /// The bound thread, created (once, under the conversation's lock) when missing.
    pub async fn get_or_create(
        &self,
        msg: &InboundMessage,
        owner: Option<&Owner>,
    ) -> Result<ThreadId, BindError> {
        let key = conversation_key(msg);
        if let Some(binding) = self.store.get_binding(&key).await? {
            self.sync_metadata(msg, owner, &binding.thread_id).await;
            return Ok(binding.thread_id);
        }
        let storage_key = key.storage_key();
        let lock = self.lock_for(&storage_key);
        let result = async {
            let _guard = lock.lock().await;
            if let Some(binding) = self.store.get_binding(&key).await? {
                return Ok(binding.thread_id);
            }
            self.create_and_bind(msg, owner, &key, Bind::Claim).await
        }
        .await;
        self.release_lock(&storage_key, lock);
        result
    }

    /// `/new`: a fresh thread bound to the conversation, whatever was bound before.
    pub async fn rebind_new(
        &self,
        msg: &InboundMessage,
        owner: Option<&Owner>,
    ) -> Result<ThreadId, BindError> {
        let key = conversation_key(msg);
        let storage_key = key.storage_key();
        let lock = self.lock_for(&storage_key);
        let result = async {
            let _guard = lock.lock().await;
            self.create_and_bind(msg, owner, &key, Bind::Overwrite)
                .await
        }
        .await;
        self.release_lock(&storage_key, lock);
        result
    }

    async fn create_and_bind(
        &self,
        msg: &InboundMessage,
        owner: Option<&Owner>,
        key: &ConversationKey,
        bind: Bind,
    ) -> Result<ThreadId, BindError> {
        let metadata = json!({ "channel_source": channel_source(msg) });
        let preferred = msg
            .metadata
            .get("preferred_thread_id")
            .and_then(Value::as_str)
            .map(ThreadId::new);
        let thread = match self
            .gateway
            .create_thread(owner, &metadata, preferred.as_ref())
            .await
        {
            Ok(info) => info.thread_id,
            // Another creator won a race on the preferred id: reuse it once verified.
            Err(GatewayError::Conflict) if preferred.is_some() => {
                let id = preferred.unwrap_or_default();
                self.gateway.get_thread(owner, &id).await?.thread_id
            }
            Err(e) => return Err(e.into()),
        };
        let user = msg.user_id.as_str();
        let bound = match bind {
            Bind::Overwrite => self.store.set_binding(key, &thread, user).await?,
            Bind::Claim => self.store.claim_binding(key, &thread, user).await?,
        };
        if bound.thread_id != thread {
            // Another replica bound this conversation first: its thread is the one.
            tracing::debug!(channel = %msg.channel_name, thread = %bound.thread_id, "Another replica bound the conversation first.");
            return Ok(bound.thread_id);
        }
        self.mark_synced(&thread);
        tracing::debug!(channel = %msg.channel_name, thread = %thread, "Bound a conversation to a new thread.");
        Ok(thread)
    }

    async fn sync_metadata(&self, msg: &InboundMessage, owner: Option<&Owner>, thread: &ThreadId) {
        if !self.mark_synced(thread) {
            return;
        }
        let metadata = json!({ "channel_source": channel_source(msg) });
        if let Err(error) = self
            .gateway
            .update_thread_metadata(owner, thread, &metadata)
            .await
        {
            tracing::debug!(thread = %thread, %error, "Best-effort thread metadata update failed.");
        }
    }

    /// Records `thread` as synced; `true` when it was not yet.
    fn mark_synced(&self, thread: &ThreadId) -> bool {
        let mut synced = self.synced.lock().unwrap_or_else(|p| p.into_inner());
        if synced.contains(thread) {
            return false;
        }
        if synced.len() >= MAX_SYNCED {
            synced.clear();
        }
        synced.insert(thread.clone())
    }

    fn lock_for(&self, key: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = self.locks.lock().unwrap_or_else(|p| p.into_inner());
        locks.entry(key.to_owned()).or_default().clone()
    }

    /// Drops the table entry when nobody else holds or waits for it.
    fn release_lock(&self, key: &str, lock: Arc<tokio::sync::Mutex<()>>) {
        let mut locks = self.locks.lock().unwrap_or_else(|p| p.into_inner());
        drop(lock);
        if locks.get(key).is_some_and(|l| Arc::strong_count(l) == 1) {
            locks.remove(key);
        }
    }
}

/// `{"type": "im_channel", "provider", "chat_id", "topic_id"?, "thread_ts"?}` (DeerFlow's
/// `connection_id` joins it with the identity gate).
pub fn channel_source(msg: &InboundMessage) -> Value {
    let mut source = Map::new();
    source.insert("type".into(), json!("im_channel"));
    source.insert("provider".into(), json!(msg.channel_name));
    source.insert("chat_id".into(), json!(msg.chat_id.as_str()));
    if let Some(topic) = msg.topic_id.as_deref().filter(|t| !t.is_empty()) {
        source.insert("topic_id".into(), json!(topic));
    }
    if let Some(ts) = &msg.thread_ts {
        source.insert("thread_ts".into(), json!(ts.as_str()));
    }
    Value::Object(source)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use im_bridge_channel::ChatId;

    use super::*;
    use crate::gateway::GatewayConfig;
    use crate::simulator::{Simulator, SimulatorConfig};
    use crate::store::{
        AskedKey, Binding, DedupeKey, JournalRecord, Journaled, Listed, PendingQuestion,
        SqliteStore, Sweep,
    };

    /// A store whose reads never see a binding: as if another replica bound the
    /// conversation between this replica's read and its write.
    struct BlindReads(SqliteStore);

    #[async_trait::async_trait]
    impl Store for BlindReads {
        async fn get_binding(&self, _: &ConversationKey) -> Result<Option<Binding>, StoreError> {
            Ok(None)
        }
        async fn set_binding(
            &self,
            key: &ConversationKey,
            thread: &ThreadId,
            user: &str,
        ) -> Result<Binding, StoreError> {
            self.0.set_binding(key, thread, user).await
        }
        async fn claim_binding(
            &self,
            key: &ConversationKey,
            thread: &ThreadId,
            user: &str,
        ) -> Result<Binding, StoreError> {
            self.0.claim_binding(key, thread, user).await
        }
        async fn remove_binding(
            &self,
            channel: &str,
            chat: &ChatId,
            topic: Option<&str>,
        ) -> Result<usize, StoreError> {
            self.0.remove_binding(channel, chat, topic).await
        }
        async fn dedupe_admit(&self, key: &DedupeKey, ttl: Duration) -> Result<bool, StoreError> {
            self.0.dedupe_admit(key, ttl).await
        }
        async fn dedupe_release(&self, key: &DedupeKey) -> Result<(), StoreError> {
            self.0.dedupe_release(key).await
        }
        async fn dedupe_admit_joined(
            &self,
            keys: &[DedupeKey],
            ttl: Duration,
        ) -> Result<Option<Vec<usize>>, StoreError> {
            self.0.dedupe_admit_joined(keys, ttl).await
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
            self.0
                .journal_admit(keys, ttl, id, record, holder, lease)
                .await
        }
        async fn journal_save(
            &self,
            id: &str,
            record: &JournalRecord,
            holder: &str,
        ) -> Result<bool, StoreError> {
            self.0.journal_save(id, record, holder).await
        }
        async fn journal_remove(&self, id: &str) -> Result<(), StoreError> {
            self.0.journal_remove(id).await
        }
        async fn journal_claim(
            &self,
            holder: &str,
            lease: Duration,
            take_live: bool,
        ) -> Result<Vec<Journaled>, StoreError> {
            self.0.journal_claim(holder, lease, take_live).await
        }
        async fn journal_renew(&self, holder: &str, lease: Duration) -> Result<(), StoreError> {
            self.0.journal_renew(holder, lease).await
        }
        async fn journal_take_held(
            &self,
            channel: &str,
            chat_id: &ChatId,
            holder: &str,
            lease: Duration,
        ) -> Result<Vec<Journaled>, StoreError> {
            self.0
                .journal_take_held(channel, chat_id, holder, lease)
                .await
        }
        async fn journal_give_up(
            &self,
            id: &str,
            record: &JournalRecord,
            holder: &str,
        ) -> Result<bool, StoreError> {
            self.0.journal_give_up(id, record, holder).await
        }
        async fn journal_list(&self, after: i64, limit: usize) -> Result<Vec<Listed>, StoreError> {
            self.0.journal_list(after, limit).await
        }
        async fn journal_retry(&self, ids: &[String]) -> Result<usize, StoreError> {
            self.0.journal_retry(ids).await
        }
        async fn journal_drop(&self, ids: &[String]) -> Result<usize, StoreError> {
            self.0.journal_drop(ids).await
        }
        async fn journal_sweep(&self, holder: &str, forget: Duration) -> Result<Sweep, StoreError> {
            self.0.journal_sweep(holder, forget).await
        }
        async fn acquire_lease(
            &self,
            name: &str,
            holder: &str,
            ttl: Duration,
        ) -> Result<bool, StoreError> {
            self.0.acquire_lease(name, holder, ttl).await
        }
        async fn release_lease(&self, name: &str, holder: &str) -> Result<(), StoreError> {
            self.0.release_lease(name, holder).await
        }
        async fn remember_messages(
            &self,
            key: &ConversationKey,
            ids: &[&str],
        ) -> Result<(), StoreError> {
            self.0.remember_messages(key, ids).await
        }
        async fn message_conversation(
            &self,
            channel: &str,
            chat: &ChatId,
            message: &str,
        ) -> Result<Option<String>, StoreError> {
            self.0.message_conversation(channel, chat, message).await
        }
        async fn prune_conversations(
            &self,
            older_than: Duration,
        ) -> Result<crate::store::Pruned, StoreError> {
            self.0.prune_conversations(older_than).await
        }
        async fn get_chat_locale(
            &self,
            channel: &str,
            chat: &ChatId,
        ) -> Result<Option<String>, StoreError> {
            self.0.get_chat_locale(channel, chat).await
        }
        async fn set_chat_locale(
            &self,
            channel: &str,
            chat: &ChatId,
            locale: Option<&str>,
        ) -> Result<(), StoreError> {
            self.0.set_chat_locale(channel, chat, locale).await
        }
        async fn get_channel_state(
            &self,
            channel: &str,
            key: &str,
        ) -> Result<Option<Vec<u8>>, StoreError> {
            self.0.get_channel_state(channel, key).await
        }
        async fn put_channel_state(
            &self,
            channel: &str,
            key: &str,
            value: &[u8],
        ) -> Result<(), StoreError> {
            self.0.put_channel_state(channel, key, value).await
        }
        async fn delete_channel_state(&self, channel: &str, key: &str) -> Result<(), StoreError> {
            self.0.delete_channel_state(channel, key).await
        }
        async fn take_tokens(
            &self,
            key: &str,
            budget: &im_bridge_channel::RateBudget,
            want: u32,
        ) -> Result<im_bridge_channel::budget::Grant, StoreError> {
            self.0.take_tokens(key, budget, want).await
        }
        async fn remember_question(
            &self,
            asked: &AskedKey,
            topic: &str,
            ttl: Duration,
        ) -> Result<(), StoreError> {
            self.0.remember_question(asked, topic, ttl).await
        }
        async fn forget_question(&self, asked: &AskedKey, topic: &str) -> Result<bool, StoreError> {
            self.0.forget_question(asked, topic).await
        }
        async fn take_question(&self, asked: &AskedKey) -> Result<Option<String>, StoreError> {
            self.0.take_question(asked).await
        }
        async fn pending_questions(
            &self,
            limit: usize,
        ) -> Result<Vec<PendingQuestion>, StoreError> {
            self.0.pending_questions(limit).await
        }
        async fn close(&self) -> Result<(), StoreError> {
            self.0.close().await
        }
        fn describe(&self) -> String {
            self.0.describe()
        }
    }

    #[tokio::test]
    async fn a_first_message_uses_the_thread_another_replica_bound_first() {
        let sim = Simulator::start(SimulatorConfig::default()).await.unwrap();
        let gateway = GatewayClient::new(GatewayConfig {
            langgraph_url: sim.langgraph_url(),
            gateway_url: sim.gateway_url(),
            ..GatewayConfig::default()
        })
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let sqlite = SqliteStore::open(&dir.path().join("b.db")).await.unwrap();
        let msg = InboundMessage::new("telegram", "42", "u1", "hi");
        // The other replica's binding.
        sqlite
            .set_binding(&conversation_key(&msg), &ThreadId::new("theirs"), "u0")
            .await
            .unwrap();
        let bindings = Bindings::new(Arc::new(BlindReads(sqlite)), gateway);
        let thread = bindings.get_or_create(&msg, None).await.unwrap();
        assert_eq!(thread.as_str(), "theirs");
        // `/new` still overwrites.
        let fresh = bindings.rebind_new(&msg, None).await.unwrap();
        assert_ne!(fresh.as_str(), "theirs");
        sim.shutdown().await.unwrap();
    }
}
