//! [`SqliteStore`]: the embedded default store, one SQLite file (`bridge.store`) per daemon.
//!
//! # Concurrency model: one store thread, fed by a bounded queue
//!
//! One dedicated OS thread owns the only connection; async callers send it a job over a
//! bounded `tokio::sync::mpsc` channel and await the answer on a oneshot. Nothing blocking
//! ever runs on the async runtime. Chosen over `spawn_blocking` per call because:
//! - SQLite admits one writer at a time anyway; one connection on one thread serializes
//!   writes without a mutex or `SQLITE_BUSY` retries, and keeps one warm cache of prepared
//!   statements;
//! - the thread sees the whole queue, so it commits everything queued in one transaction
//!   (group commit, `worker.rs`). On the 2-core dev VM a commit costs ~150 µs of wall time
//!   (WAL append, lock calls) against a few µs per statement, so batching is what lifts
//!   the write rate under load from ~4,000/s to well above 10,000/s;
//! - jobs run in arrival order, which is what lets the binding and locale caches be exact
//!   (`db.rs`): a cache hit is answered by the caller itself, with no thread hop;
//! - the queue is the bound: at most [`QUEUE_CAPACITY`] jobs wait; when it is full a caller's
//!   `send` waits for room, so a slow disk pushes back on the manager's workers instead of
//!   piling up blocking-pool threads (up to 512 with `spawn_blocking`).
//!
//! A job whose caller stopped waiting (its future was dropped) still runs; only its answer is
//! discarded. So a cancelled `dedupe_admit` may still have recorded its key, which is why the
//! manager releases the key of a cancelled message (manager.md §3.3).
//!
//! Lifetime: [`Store::close`] stops the thread after the jobs queued before it, closes the
//! connection (checkpointing the WAL into the file) and releases the lock file. Dropping
//! every handle does the same in the background.
//!
//! Time: expiries (dedupe records, leases, journal entries) are this process's clock in unix
//! milliseconds, and that clock is the store's: the lock file lets only one daemon open the
//! file, so no other clock ever judges them (the shared Postgres store uses the database's
//! clock instead, issue 27).
//!
//! The WAL's checkpoints (copying the log into the file, with its `fsync`s) run on a thread
//! and connection of their own, so no job waits behind one (`checkpoint`, issue 35).
//!
//! Children: `checkpoint` (the checkpoint thread), `db` (the file and its statements, the
//! caches), `deliveries` (the async side of the operator's journal operations, issue 33),
//! `questions` (the async side of the pending questions), `schema` (embedded migrations), `worker` (the store thread's loop and group commit),
//! `tests`.
//!
//! Measured on the 2-core dev VM (`tests.rs`, `throughput_of_a_message_mix`: per message one
//! admission, one binding read, one locale read, a binding write per 100; 64 callers):
//! release build 11,000–20,000 messages/s, debug build 3,500–4,000 (1,600 before group
//! commit). A cache hit costs ~0.2 µs (release). Opening a 12 MB file (100,000 dedupe
//! records, 13,000 bindings) takes ~50–75 ms, most of it the integrity check.

mod checkpoint;
mod db;
mod deliveries;
mod questions;
mod schema;
#[cfg(test)]
mod tests;
mod worker;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use im_bridge_channel::budget::Grant;
use im_bridge_channel::{ChatId, RateBudget};
use tokio::sync::{mpsc, oneshot};

use self::db::{Caches, Db};
use self::worker::{Job, Step};

use super::journal::{self, JournalRecord, Journaled, Listed, Sweep};
use super::{
    AskedKey, Binding, BindingWrite, ConversationKey, DedupeKey, PendingQuestion, Pruned,
    QUESTION_CAP, Store, StoreError, check_state, ttl_millis, unix_micros, unix_millis,
    unix_seconds,
};
use crate::gateway::ThreadId;

/// Jobs waiting for the store thread at most; a caller finding the queue full waits for room.
/// At a few microseconds per job in a batch, a full queue is a few milliseconds of work.
pub const QUEUE_CAPACITY: usize = 256;

/// Tuning for [`SqliteStore::open_with`].
#[derive(Clone, Debug)]
pub struct SqliteOptions {
    /// Most dedupe records kept (default 100,000; 0 counts as 1). When an admission would
    /// exceed it, the oldest records are deleted in the same transaction, so a redelivery
    /// arriving after that many newer admissions is admitted again.
    pub dedupe_cap: usize,
    /// Most entries in each read-through cache, bindings and chat locales (default 10,000;
    /// 0 disables caching). At the bound the entry cached longest ago is dropped and its next
    /// read goes to the file; answers stay exact either way.
    pub cache_capacity: usize,
    /// Most reply-chain message records kept (default 200,000; 0 counts as 1; ~100 bytes
    /// each). When a `remember_messages` would exceed it, exactly the excess goes in the same
    /// transaction, least recently touched first; a reply to a dropped message starts afresh.
    pub message_cap: usize,
    /// Most pending questions kept (default [`QUESTION_CAP`]; 0 counts as 1). A
    /// `remember_question` past it drops the questions remembered longest ago.
    pub question_cap: usize,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        Self {
            dedupe_cap: 100_000,
            cache_capacity: 10_000,
            message_cap: 200_000,
            question_cap: QUESTION_CAP,
        }
    }
}

/// The embedded single-file store. Share it as `Arc<dyn Store>`.
#[derive(Debug)]
pub struct SqliteStore {
    /// The store file, for `describe` and errors.
    path: PathBuf,
    /// The store thread's queue (bounded by [`QUEUE_CAPACITY`]).
    jobs: mpsc::Sender<Job>,
    /// The read-through caches, written by the store thread only.
    caches: Arc<Caches>,
}

impl SqliteStore {
    /// Opens (creating if missing) the store at `path` with default options.
    ///
    /// Fails with a [`StoreError`] naming the file when it is unreadable, corrupt, not an
    /// im-bridge store, locked by another process, or from a newer build. Never resets it.
    pub async fn open(path: &Path) -> Result<Self, StoreError> {
        Self::open_with(path, SqliteOptions::default()).await
    }

    /// Opens the store at `path` with `options`. The blocking open, integrity check and
    /// migrations run on the new store thread; this future only awaits their outcome.
    pub async fn open_with(path: &Path, options: SqliteOptions) -> Result<Self, StoreError> {
        let path = path.to_path_buf();
        let caches = Arc::new(Caches::new(options.cache_capacity));
        let (jobs, queue) = mpsc::channel::<Job>(QUEUE_CAPACITY);
        let (ready_tx, ready) = oneshot::channel();
        let thread_path = path.clone();
        let thread_caches = Arc::clone(&caches);
        std::thread::Builder::new()
            .name("im-bridge-store".into())
            .spawn(move || match Db::open(&thread_path, &options) {
                Ok(db) => {
                    // The opener may have given up waiting; then `queue` ends at once.
                    let _ = ready_tx.send(Ok(()));
                    worker::serve(db, &thread_caches, queue);
                }
                Err(error) => {
                    let _ = ready_tx.send(Err(error));
                }
            })
            .map_err(|e| StoreError::Open {
                path: path.clone(),
                reason: format!("cannot start the store thread: {e}"),
            })?;
        match ready.await {
            Ok(Ok(())) => Ok(Self { path, jobs, caches }),
            Ok(Err(error)) => Err(error),
            Err(_) => Err(StoreError::Open {
                path,
                reason: "the store thread stopped while opening".into(),
            }),
        }
    }

    /// The store file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `value`, or `Closed` once the store thread stopped: a closed store answers nothing,
    /// not even from its cache.
    fn unless_closed<T>(&self, value: T) -> Result<T, StoreError> {
        if self.jobs.is_closed() {
            Err(StoreError::Closed)
        } else {
            Ok(value)
        }
    }

    /// Runs `op` on the store thread and awaits its result; `name` labels its errors.
    /// After the transaction holding `op` commits, `on_commit` records the result in the
    /// caches, before the caller is answered.
    async fn call<R: Send + 'static>(
        &self,
        name: &'static str,
        op: impl FnOnce(&mut Db) -> rusqlite::Result<R> + Send + 'static,
        on_commit: impl FnOnce(&Caches, &R) + Send + 'static,
    ) -> Result<R, StoreError> {
        let (tx, rx) = oneshot::channel();
        let job: Job = Box::new(move |db| {
            let ran = op(db);
            Step::Ran(Box::new(move |caches, committed| {
                let answer = match (ran, committed) {
                    (Ok(value), Ok(())) => {
                        on_commit(caches, &value);
                        Ok(value)
                    }
                    (Err(source), _) => Err(StoreError::Query {
                        op: name,
                        source: Arc::new(source),
                    }),
                    (Ok(_), Err(source)) => Err(StoreError::Query { op: name, source }),
                };
                // The caller may have stopped waiting; the work is done either way.
                let _ = tx.send(answer);
            }))
        });
        self.jobs.send(job).await.map_err(|_| StoreError::Closed)?;
        rx.await.map_err(|_| StoreError::Closed)?
    }
}

impl SqliteStore {
    /// A binding write on the store thread; the cache learns the binding that holds.
    async fn write_binding(
        &self,
        mode: BindingWrite,
        key: &ConversationKey,
        thread_id: &ThreadId,
        user_id: &str,
    ) -> Result<Binding, StoreError> {
        let key = binding_key(key);
        let write = key.clone();
        let thread_id = thread_id.clone();
        let user_id = user_id.to_owned();
        let op = match mode {
            BindingWrite::Overwrite => "set_binding",
            BindingWrite::Claim => "claim_binding",
        };
        self.call(
            op,
            move |db| db.write_binding(mode, &write, &thread_id, &user_id, unix_seconds()),
            move |caches, binding| caches.put_binding(key, Some(binding.clone())),
        )
        .await
    }
}

/// `(channel, chat_id, topic)` with `""` for no topic: the binding's row key.
fn binding_key(key: &ConversationKey) -> db::BindingKey {
    (
        key.channel.clone(),
        key.chat_id.as_str().to_owned(),
        key.topic().to_owned(),
    )
}

/// A message's dedupe keys on their way to the store thread: a message of one key moves
/// it as a plain admission moves its key, with no list to allocate.
enum Keys {
    One(DedupeKey),
    Many(Vec<DedupeKey>),
}

impl Keys {
    fn new(keys: &[DedupeKey]) -> Self {
        match keys {
            [key] => Self::One(key.clone()),
            keys => Self::Many(keys.to_vec()),
        }
    }

    fn as_slice(&self) -> &[DedupeKey] {
        match self {
            Self::One(key) => std::slice::from_ref(key),
            Self::Many(keys) => keys,
        }
    }
}

#[async_trait::async_trait]
impl Store for SqliteStore {
    async fn get_binding(&self, key: &ConversationKey) -> Result<Option<Binding>, StoreError> {
        let key = binding_key(key);
        if let Some(hit) = self.caches.binding(&key) {
            return self.unless_closed(hit);
        }
        let read = key.clone();
        self.call(
            "get_binding",
            move |db| db.get_binding(&read),
            move |caches, binding| caches.put_binding(key, binding.clone()),
        )
        .await
    }

    fn cached_binding(&self, key: &ConversationKey) -> Option<Binding> {
        self.caches.binding(&binding_key(key)).flatten()
    }

    async fn set_binding(
        &self,
        key: &ConversationKey,
        thread_id: &ThreadId,
        user_id: &str,
    ) -> Result<Binding, StoreError> {
        self.write_binding(BindingWrite::Overwrite, key, thread_id, user_id)
            .await
    }

    async fn claim_binding(
        &self,
        key: &ConversationKey,
        thread_id: &ThreadId,
        user_id: &str,
    ) -> Result<Binding, StoreError> {
        self.write_binding(BindingWrite::Claim, key, thread_id, user_id)
            .await
    }

    async fn remove_binding(
        &self,
        channel: &str,
        chat_id: &ChatId,
        topic: Option<&str>,
    ) -> Result<usize, StoreError> {
        let key: db::BindingKey = (
            channel.to_owned(),
            chat_id.as_str().to_owned(),
            topic.unwrap_or("").to_owned(),
        );
        let write = key.clone();
        self.call(
            "remove_binding",
            move |db| db.remove_binding(&write.0, &write.1, &write.2),
            move |caches, _| {
                if key.2.is_empty() {
                    caches.remove_chat_bindings(&key.0, &key.1);
                } else {
                    caches.put_binding(key, None);
                }
            },
        )
        .await
    }

    async fn dedupe_admit(&self, key: &DedupeKey, ttl: Duration) -> Result<bool, StoreError> {
        let key = key.clone();
        let ttl_ms = ttl_millis(ttl);
        self.call(
            "dedupe_admit",
            move |db| db.dedupe_admit(&key, unix_millis(), ttl_ms),
            |_, _| {},
        )
        .await
    }

    async fn dedupe_admit_joined(
        &self,
        keys: &[DedupeKey],
        ttl: Duration,
    ) -> Result<Option<Vec<usize>>, StoreError> {
        let keys = Keys::new(keys);
        let ttl_ms = ttl_millis(ttl);
        self.call(
            "dedupe_admit_joined",
            move |db| db.dedupe_admit_joined(keys.as_slice(), unix_millis(), ttl_ms),
            |_, _| {},
        )
        .await
    }

    async fn dedupe_release(&self, key: &DedupeKey) -> Result<(), StoreError> {
        let key = key.clone();
        self.call(
            "dedupe_release",
            move |db| db.dedupe_release(&key),
            |_, _| {},
        )
        .await
    }

    async fn acquire_lease(
        &self,
        name: &str,
        holder: &str,
        ttl: Duration,
    ) -> Result<bool, StoreError> {
        let (name, holder) = (name.to_owned(), holder.to_owned());
        let ttl_ms = ttl_millis(ttl);
        self.call(
            "acquire_lease",
            move |db| db.acquire_lease(&name, &holder, unix_millis(), ttl_ms),
            |_, _| {},
        )
        .await
    }

    async fn release_lease(&self, name: &str, holder: &str) -> Result<(), StoreError> {
        let (name, holder) = (name.to_owned(), holder.to_owned());
        self.call(
            "release_lease",
            move |db| db.release_lease(&name, &holder),
            |_, _| {},
        )
        .await
    }

    async fn remember_messages(
        &self,
        key: &ConversationKey,
        message_ids: &[&str],
    ) -> Result<(), StoreError> {
        let key = binding_key(key);
        let ids: Vec<String> = message_ids.iter().map(|id| (*id).to_owned()).collect();
        // The binding cache holds no touch time, so a touch leaves it as it is.
        self.call(
            "remember_messages",
            move |db| db.remember_messages(&key, &ids, unix_seconds()),
            |_, ()| {},
        )
        .await
    }

    async fn message_conversation(
        &self,
        channel: &str,
        chat_id: &ChatId,
        message_id: &str,
    ) -> Result<Option<String>, StoreError> {
        // Not cached: a lookup happens only on a reply, and a hop to the store thread keeps
        // it exact without a third cache to keep in step with the cap and pruning.
        let (channel, chat_id) = (channel.to_owned(), chat_id.as_str().to_owned());
        let message_id = message_id.to_owned();
        self.call(
            "message_conversation",
            move |db| db.message_conversation(&channel, &chat_id, &message_id),
            |_, _| {},
        )
        .await
    }

    async fn prune_conversations(&self, older_than: Duration) -> Result<Pruned, StoreError> {
        let (pruned, _) = self
            .call(
                "prune_conversations",
                move |db| {
                    let cutoff = unix_seconds() - older_than.as_secs_f64();
                    db.prune_conversations(cutoff, unix_millis())
                },
                // A pruned binding must not be served from the cache.
                |caches, (_, removed)| caches.forget_bindings(removed),
            )
            .await?;
        Ok(pruned)
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
        let ttl_ms = ttl_millis(ttl);
        let record = journal::Admitting::new(record, keys);
        let (keys, id, holder) = (Keys::new(keys), id.to_owned(), holder.to_owned());
        let lease_ms = ttl_millis(lease);
        self.call(
            "journal_admit",
            move |db| {
                let dedupe = (keys.as_slice(), ttl_ms);
                db.journal_admit(dedupe, &id, record, &holder, unix_millis(), lease_ms)
            },
            |_, _| {},
        )
        .await
    }

    async fn journal_save(
        &self,
        id: &str,
        record: &JournalRecord,
        holder: &str,
    ) -> Result<bool, StoreError> {
        let held = record
            .held_chat()
            .map(|(channel, chat)| (channel.to_owned(), chat.to_owned()));
        let (id, record, holder) = (id.to_owned(), journal::encode(record), holder.to_owned());
        self.call(
            "journal_save",
            move |db| {
                let held = held.as_ref().map(|(a, b)| (a.as_str(), b.as_str()));
                db.journal_save(&id, &record, &holder, held)
            },
            |_, _| {},
        )
        .await
    }

    async fn journal_remove(&self, id: &str, holder: &str) -> Result<bool, StoreError> {
        let (id, holder) = (id.to_owned(), holder.to_owned());
        self.call(
            "journal_remove",
            move |db| db.journal_remove(&id, &holder),
            |_, _| {},
        )
        .await
    }

    async fn journal_claim(
        &self,
        holder: &str,
        lease: Duration,
        take_live: bool,
    ) -> Result<Vec<Journaled>, StoreError> {
        let holder = holder.to_owned();
        let lease_ms = ttl_millis(lease);
        let (claimed, unreadable) = self
            .call(
                "journal_claim",
                move |db| db.journal_claim(&holder, unix_millis(), lease_ms, take_live),
                |_, _| {},
            )
            .await?;
        journal::warn_unreadable(unreadable);
        Ok(claimed)
    }

    async fn journal_take_held(
        &self,
        channel: &str,
        chat_id: &ChatId,
        holder: &str,
        lease: Duration,
    ) -> Result<Vec<Journaled>, StoreError> {
        let (channel, chat, holder) = (
            channel.to_owned(),
            chat_id.as_str().to_owned(),
            holder.to_owned(),
        );
        let until = unix_millis().saturating_add(ttl_millis(lease));
        let (taken, unreadable) = self
            .call(
                "journal_take_held",
                move |db| db.journal_take_held(&channel, &chat, &holder, until),
                |_, _| {},
            )
            .await?;
        journal::warn_unreadable(unreadable);
        Ok(taken)
    }

    async fn journal_renew(
        &self,
        holder: &str,
        lease: Duration,
    ) -> Result<Vec<String>, StoreError> {
        let holder = holder.to_owned();
        let lease_ms = ttl_millis(lease);
        self.call(
            "journal_renew",
            move |db| db.journal_renew(&holder, unix_millis().saturating_add(lease_ms)),
            |_, _| {},
        )
        .await
    }

    async fn journal_release(&self, holder: &str) -> Result<(), StoreError> {
        let holder = holder.to_owned();
        self.call(
            "journal_release",
            move |db| db.journal_release(&holder),
            |_, _| {},
        )
        .await
    }

    async fn journal_give_up(
        &self,
        id: &str,
        record: &JournalRecord,
        holder: &str,
    ) -> Result<bool, StoreError> {
        self.give_up_journaled(id, record, holder).await
    }

    async fn journal_list(&self, after: i64, limit: usize) -> Result<Vec<Listed>, StoreError> {
        self.list_journaled(after, limit).await
    }

    async fn journal_retry(&self, ids: &[String]) -> Result<usize, StoreError> {
        self.retry_journaled(ids).await
    }

    async fn journal_drop(&self, ids: &[String]) -> Result<usize, StoreError> {
        self.drop_journaled(ids).await
    }

    async fn journal_sweep(&self, holder: &str, forget: Duration) -> Result<Sweep, StoreError> {
        self.sweep_journal(holder, forget).await
    }

    async fn get_chat_locale(
        &self,
        channel: &str,
        chat_id: &ChatId,
    ) -> Result<Option<String>, StoreError> {
        let key = (channel.to_owned(), chat_id.as_str().to_owned());
        if let Some(hit) = self.caches.locale(&key) {
            return self.unless_closed(hit);
        }
        let read = key.clone();
        self.call(
            "get_chat_locale",
            move |db| db.get_chat_locale(&read),
            move |caches, locale| caches.put_locale(key, locale.clone()),
        )
        .await
    }

    async fn set_chat_locale(
        &self,
        channel: &str,
        chat_id: &ChatId,
        locale: Option<&str>,
    ) -> Result<(), StoreError> {
        let key = (channel.to_owned(), chat_id.as_str().to_owned());
        let write = key.clone();
        let locale = locale.map(str::to_owned);
        let cached = locale.clone();
        self.call(
            "set_chat_locale",
            move |db| db.set_chat_locale(&write, locale.as_deref(), unix_seconds()),
            move |caches, ()| caches.put_locale(key, cached),
        )
        .await
    }

    async fn get_channel_state(
        &self,
        channel: &str,
        key: &str,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        check_state("get_channel_state", key, &[])?;
        let (channel, key) = (channel.to_owned(), key.to_owned());
        self.call(
            "get_channel_state",
            move |db| db.get_channel_state(&channel, &key),
            |_, _| {},
        )
        .await
    }

    async fn put_channel_state(
        &self,
        channel: &str,
        key: &str,
        value: &[u8],
    ) -> Result<(), StoreError> {
        check_state("put_channel_state", key, value)?;
        let (channel, key, value) = (channel.to_owned(), key.to_owned(), value.to_vec());
        self.call(
            "put_channel_state",
            move |db| db.put_channel_state(&channel, &key, &value, unix_seconds()),
            |_, ()| {},
        )
        .await
    }

    async fn delete_channel_state(&self, channel: &str, key: &str) -> Result<(), StoreError> {
        check_state("delete_channel_state", key, &[])?;
        let (channel, key) = (channel.to_owned(), key.to_owned());
        self.call(
            "delete_channel_state",
            move |db| db.delete_channel_state(&channel, &key),
            |_, ()| {},
        )
        .await
    }

    async fn take_tokens(
        &self,
        key: &str,
        budget: &RateBudget,
        want: u32,
    ) -> Result<Grant, StoreError> {
        let (key, budget) = (key.to_owned(), *budget);
        self.call(
            "take_tokens",
            move |db| db.take_tokens(&key, &budget, want, unix_micros()),
            |_, _| {},
        )
        .await
    }

    async fn remember_question(
        &self,
        asked: &AskedKey,
        topic: &str,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        self.question_remember(asked, topic, ttl).await
    }

    async fn forget_question(&self, asked: &AskedKey, topic: &str) -> Result<bool, StoreError> {
        self.question_forget(asked, topic).await
    }

    async fn take_question(&self, asked: &AskedKey) -> Result<Option<PendingQuestion>, StoreError> {
        self.question_take(asked).await
    }

    async fn give_back_question(&self, question: &PendingQuestion) -> Result<bool, StoreError> {
        self.question_give_back(question).await
    }

    async fn pending_questions(&self, limit: usize) -> Result<Vec<PendingQuestion>, StoreError> {
        self.questions_pending(limit).await
    }

    async fn close(&self) -> Result<(), StoreError> {
        let (done_tx, done) = oneshot::channel();
        let job: Job = Box::new(move |_| Step::Stop(done_tx));
        if self.jobs.send(job).await.is_err() {
            return Ok(()); // already closed
        }
        // A dropped sender means another close got there first: closed all the same.
        done.await.unwrap_or(Ok(()))
    }

    fn describe(&self) -> String {
        format!("sqlite:{}", self.path.display())
    }
}
