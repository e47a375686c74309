//! The persistent store: conversation → thread bindings, inbound dedupe records, reply-chain
//! records (which conversation a platform message belongs to), leases and per-chat settings,
//! behind one [`Store`] trait.
//!
//! The manager holds an `Arc<dyn Store>` and never knows which backend it talks to. SQLite
//! ([`SqliteStore`], one file, the embedded default) serves a single replica; Postgres
//! ([`PostgresStore`]) serves several replicas sharing state (DESIGN.md "Scale-out"). Both must pass
//! the one body in `conformance` (a test-only module), so behaviour cannot drift between
//! them.
//!
//! Keys are typed ([`ConversationKey`], [`DedupeKey`]) so a chat id can never be passed where
//! a thread id is expected. Bindings keep the Python JSON store's key shape
//! ([`ConversationKey::storage_key`]) and record fields (manager.md §4.1); dedupe follows
//! manager.md §3.3.
//!
//! Expiries (dedupe records, leases, journal entries) are judged by the store's clock: the
//! database's on Postgres, so replicas whose clocks disagree still agree on what expired;
//! the process's own on SQLite, which only one process opens (issue 27).
//!
//! State stays bounded: dedupe and reply-chain records are capped per backend, and
//! [`Store::prune_conversations`] drops topic bindings and reply-chain records nobody touched
//! for a while (issue 13); a binding without a topic (a private chat) is kept.
//!
//! Children:
//! - [`error`]: [`StoreError`], typed failures with the file or operation they concern.
//! - [`journal`]: the in-flight journal's record (issue 19).
//! - [`sqlite`]: [`SqliteStore`], the embedded single-file backend.
//! - [`postgres`]: [`PostgresStore`], the shared backend for several replicas.
//! - `cache`: the bounded read-through cache the SQLite backend keeps in front of the file.
//! - `conformance` (tests only): the shared contract test body every backend runs.
//! - `faulty` (tests only): a store that passes calls on but for the faults a test asks
//!   for (blind reads, failing journal renewals).
//!
//! Channel state (issue 32) is an opaque value per `(channel, key)` that adapters keep
//! across restarts ([`Store::put_channel_state`]); the daemon's `state` module scopes it
//! per channel and encrypts secrets before they reach the store.
//!
//! Rate budgets (issue 33) are token buckets several replicas draw on
//! ([`Store::take_tokens`]): one row per budget (a handful per channel), the bucket's
//! theoretical arrival time in microseconds on the store's clock (schema version 8).
//!
//! Pending questions (schema version 9) are the questions the agent asked someone in a
//! group, by channel, chat and user, each naming the asking conversation's topic and when
//! it stops waiting ([`Store::remember_question`]): kept here so an answer finds its
//! question after a restart, and on whichever replica it arrives. At most
//! [`QUESTION_CAP`] by default, the oldest remembered going first; expired ones are
//! pruned with the conversations ([`Store::prune_conversations`]).

mod cache;
#[cfg(test)]
mod conformance;
pub mod error;
#[cfg(test)]
pub(crate) mod faulty;
pub mod journal;
pub mod postgres;
pub mod sqlite;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;

use im_bridge_channel::budget::Grant;
use im_bridge_channel::{ChatId, InboundMessage, RateBudget, Secret};

use crate::gateway::ThreadId;

pub use error::StoreError;
pub use journal::{
    GAVE_UP_KEPT, JOURNAL_CAP, JournalRecord, JournalState, Journaled, Listed, PendingFinal, Sweep,
    arrival_stamp,
};
pub use postgres::{PostgresOptions, PostgresStore};
pub use sqlite::{SqliteOptions, SqliteStore};

/// Where state is stored (`bridge.store`).
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StoreLocation {
    /// An embedded SQLite file.
    Sqlite(PathBuf),
    /// A shared Postgres database (the URL may carry a password, so it is a secret).
    Postgres(Secret),
}

impl StoreLocation {
    /// Opens the store here: the SQLite file (created if missing, locked for this process)
    /// or a pool of connections to Postgres.
    pub async fn open(&self) -> Result<Arc<dyn Store>, StoreError> {
        match self {
            StoreLocation::Sqlite(path) => Ok(Arc::new(SqliteStore::open(path).await?)),
            StoreLocation::Postgres(url) => Ok(Arc::new(PostgresStore::connect(url).await?)),
        }
    }

    /// Where inbound files wait for their message's turn (the manager's `staging.rs`):
    /// beside the SQLite file (`im-bridge.db.inbound`), so they live as long as the
    /// journal that names them. `None` with Postgres: each process stages in a temporary
    /// directory of its own (the daemon makes it), as replicas cannot see each other's.
    pub fn inbound_files(&self) -> Option<PathBuf> {
        match self {
            StoreLocation::Sqlite(path) => {
                let mut name = path.as_os_str().to_owned();
                name.push(".inbound");
                Some(PathBuf::from(name))
            }
            StoreLocation::Postgres(_) => None,
        }
    }
}

/// Where one conversation's binding lives: a chat on a channel, optionally a topic in it
/// (manager.md §4.3: what a topic is depends on the platform; the store treats it opaquely).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ConversationKey {
    /// The channel name, e.g. `telegram`.
    pub channel: String,
    /// The platform chat.
    pub chat_id: ChatId,
    /// The topic inside the chat. `None` and `Some("")` are the same key: the chat itself.
    pub topic_id: Option<String>,
}

/// The conversation key of a message: its channel, chat and topic (an empty topic is
/// none).
pub fn conversation_key(msg: &InboundMessage) -> ConversationKey {
    ConversationKey {
        channel: msg.channel_name.clone(),
        chat_id: msg.chat_id.clone(),
        topic_id: msg.topic_id.clone().filter(|t| !t.is_empty()),
    }
}

impl ConversationKey {
    /// Builds a key; an empty topic means no topic.
    pub fn new(channel: impl Into<String>, chat_id: ChatId, topic_id: Option<String>) -> Self {
        Self {
            channel: channel.into(),
            chat_id,
            topic_id,
        }
    }

    /// The topic, or `""` for the chat itself (the form stored in the topic column).
    pub fn topic(&self) -> &str {
        self.topic_id.as_deref().unwrap_or("")
    }

    /// The Python JSON store's key: `"<channel>:<chat_id>"`, or `"<channel>:<chat_id>:<topic>"`
    /// when the topic is non-empty. For logs and for importing that store; backends keep the
    /// three parts apart, because a chat id may itself contain `:` (QQ `group:<openid>`).
    pub fn storage_key(&self) -> String {
        match self.topic() {
            "" => format!("{}:{}", self.channel, self.chat_id),
            topic => format!("{}:{}:{topic}", self.channel, self.chat_id),
        }
    }
}

/// A conversation's DeerFlow thread and who bound it (manager.md §4.1).
#[derive(Clone, Debug, PartialEq)]
pub struct Binding {
    /// The Gateway thread the conversation runs in.
    pub thread_id: ThreadId,
    /// The raw platform user who last bound it (PII: kept here only, never in run config).
    pub user_id: String,
    /// When the key was first bound, unix seconds. Kept when the binding is overwritten.
    pub created_at: f64,
    /// When the binding was last written, unix seconds.
    pub updated_at: f64,
}

/// One inbound delivery as a provider identifies it (manager.md §3.3). The manager builds it
/// only when both a workspace scope and a provider message id exist; otherwise it does not
/// dedupe at all (fail closed: two workspaces are never collapsed).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct DedupeKey {
    /// The channel name.
    pub channel: String,
    /// The workspace scope (team, guild, app, or the chat id on single-tenant platforms).
    pub workspace: String,
    /// The platform chat.
    pub chat_id: ChatId,
    /// The provider's event or message id.
    pub message_id: String,
}

/// What one [`Store::prune_conversations`] removed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pruned {
    /// Topic bindings removed.
    pub bindings: usize,
    /// Reply-chain message records removed.
    pub messages: usize,
    /// Pending questions removed because they expired.
    pub questions: usize,
}

/// The pending questions a backend keeps by default (`question_cap` of
/// [`SqliteOptions`] and [`PostgresOptions`]): as many as the manager remembers in memory,
/// so a restart loads what one process would have kept.
pub const QUESTION_CAP: usize = 10_000;

/// Who a question the agent asked in a group waits on: the channel, the chat and the user
/// asked. The user's next plain message in that chat is taken as the answer.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AskedKey {
    /// The channel name.
    pub channel: String,
    /// The group chat.
    pub chat_id: ChatId,
    /// The platform user who was asked.
    pub user_id: String,
}

/// A question waiting for its answer, as [`Store::pending_questions`] lists it and
/// [`Store::take_question`] takes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingQuestion {
    /// Who was asked.
    pub asked: AskedKey,
    /// The topic of the conversation that asked (the answer joins it).
    pub topic: String,
    /// How long it still waits, by the store's clock (so a process can keep it on its own
    /// clock without the two having to agree).
    pub expires_in: Duration,
}

/// How a binding write treats a key that is already bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BindingWrite {
    /// Replace it ([`Store::set_binding`]).
    Overwrite,
    /// Keep it and return it ([`Store::claim_binding`]).
    Claim,
}

/// Persistent state shared by the manager's workers.
///
/// Every method is atomic on its own. Errors are returned, not swallowed: the caller owns the
/// policy (the manager treats a failed `dedupe_admit` as "new", manager.md §3.3 fail-open).
#[async_trait::async_trait]
pub trait Store: Send + Sync + 'static {
    /// The conversation's binding, if any.
    async fn get_binding(&self, key: &ConversationKey) -> Result<Option<Binding>, StoreError>;

    /// The conversation's binding when this process holds it in memory, without a round
    /// trip to the store; `None` when only [`Store::get_binding`] could tell. A hint, not an
    /// answer: the journal records it at admission as the thread a message will most likely
    /// run on (issue 35). A store shared by replicas keeps no such copy (the default).
    fn cached_binding(&self, _key: &ConversationKey) -> Option<Binding> {
        None
    }

    /// Binds the conversation to `thread_id` (insert or overwrite). On overwrite `created_at`
    /// is kept and `updated_at` becomes now. Returns the stored binding.
    async fn set_binding(
        &self,
        key: &ConversationKey,
        thread_id: &ThreadId,
        user_id: &str,
    ) -> Result<Binding, StoreError>;

    /// Binds the conversation to `thread_id` only if it is not bound yet, atomically, and
    /// returns the binding that holds afterwards: the new one, or the one another writer
    /// (another replica) stored first. A conversation's first message claims; `/new`
    /// overwrites with [`Store::set_binding`].
    async fn claim_binding(
        &self,
        key: &ConversationKey,
        thread_id: &ThreadId,
        user_id: &str,
    ) -> Result<Binding, StoreError>;

    /// Removes bindings and returns how many went. With a non-empty `topic`, only that
    /// topic's binding; without one (`None` or `""`), the chat's own binding and every topic
    /// binding in that chat.
    async fn remove_binding(
        &self,
        channel: &str,
        chat_id: &ChatId,
        topic: Option<&str>,
    ) -> Result<usize, StoreError>;

    /// Records a delivery, atomically: `true` if it is new (recorded now, live for `ttl`),
    /// `false` if a live record of it exists. A record whose TTL has run out counts as absent:
    /// it is replaced and admitted. `Duration::ZERO` records a delivery that is expired at
    /// once (tests use it to exercise expiry without sleeping).
    ///
    /// Expired records are deleted lazily. The number of records is bounded by the backend
    /// (e.g. [`SqliteOptions::dedupe_cap`]); at the bound the oldest records are dropped
    /// first, so a redelivery older than the bound's worth of traffic is admitted again.
    async fn dedupe_admit(&self, key: &DedupeKey, ttl: Duration) -> Result<bool, StoreError>;

    /// Records, atomically, the deliveries of one message joined from several platform
    /// messages (its own key and its parts', `InboundMessage::redelivery_parts`): the
    /// message is new when any of `keys` has no live record, and then each such key is
    /// recorded, live for `ttl`, and the keys that had one are left as they are (an earlier
    /// admission recorded them and owns them). Returns the positions in `keys` of those
    /// left (empty when it recorded them all; a key named twice counts once), or `None`,
    /// with nothing written, when every key had a live record: a redelivery. Two callers
    /// admitting overlapping keys at once never both record one key, so of two copies of a
    /// message arriving together one is refused. Keys count as [`Store::dedupe_admit`]'s
    /// do (expiry, the cap); an empty `keys` is a new message that records nothing.
    async fn dedupe_admit_joined(
        &self,
        keys: &[DedupeKey],
        ttl: Duration,
    ) -> Result<Option<Vec<usize>>, StoreError>;

    /// Forgets a delivery so a provider retry is processed again. Idempotent.
    async fn dedupe_release(&self, key: &DedupeKey) -> Result<(), StoreError>;

    /// Takes or renews the lease `name` for `holder` until `ttl` from now: `true` when
    /// `holder` holds it afterwards (it was free, expired, or already `holder`'s), `false`
    /// while another holder's lease is live. Replicas sharing a store use it to elect the
    /// one that runs a transport only one process may run (Telegram long polling). "Now"
    /// and "expired" are the store's clock, never the caller's (module docs).
    async fn acquire_lease(
        &self,
        name: &str,
        holder: &str,
        ttl: Duration,
    ) -> Result<bool, StoreError>;

    /// Gives the lease `name` up if `holder` holds it, so another replica can take it at
    /// once. Idempotent.
    async fn release_lease(&self, name: &str, holder: &str) -> Result<(), StoreError>;

    /// Records that platform messages `message_ids` (of `key.channel` / `key.chat_id`) belong
    /// to the conversation `key` (its topic; `""` = the chat itself), so a reply to any of
    /// them continues that conversation ([`Store::message_conversation`]). Each is inserted,
    /// or refreshed (touched, and moved to `key`'s topic if it was recorded under another).
    /// Also touches the conversation's binding, if it has one, so an active topic is not
    /// pruned. Duplicate ids count once; an empty slice only touches the binding.
    ///
    /// Atomic: every record and the touch, or nothing. Bound: a backend keeps at most a fixed
    /// number of records ([`SqliteOptions::message_cap`], [`PostgresOptions::message_cap`]);
    /// past it the least recently touched records are dropped in the same transaction, so a
    /// reply to a message that many remembered messages ago finds nothing and starts afresh.
    async fn remember_messages(
        &self,
        key: &ConversationKey,
        message_ids: &[&str],
    ) -> Result<(), StoreError>;

    /// The conversation (its topic; `Some("")` = the chat itself) that the remembered message
    /// `message_id` of `channel` / `chat_id` belongs to, or `None` if it is not remembered
    /// (never was, dropped at the cap, or pruned). A read: it touches nothing.
    async fn message_conversation(
        &self,
        channel: &str,
        chat_id: &ChatId,
        message_id: &str,
    ) -> Result<Option<String>, StoreError>;

    /// Deletes, atomically, the message records untouched for `older_than`, the topic
    /// bindings (non-empty topic) untouched for `older_than` and the pending questions
    /// that expired (whatever `older_than` says), and returns how many of each went. A
    /// binding is touched when written ([`Store::set_binding`], or a
    /// [`Store::claim_binding`] that binds) and when a message of its conversation is
    /// remembered; reads touch nothing. Bindings without a topic (private chats, a group's
    /// own binding) are never pruned. `Duration::ZERO` prunes everything touched up to now.
    ///
    /// Meant to run now and then (`bridge.conversation_ttl_days`); one call's work is
    /// bounded by the message and question caps plus the number of bindings.
    async fn prune_conversations(&self, older_than: Duration) -> Result<Pruned, StoreError>;

    /// Admits a chat message into the in-flight journal as entry `id`, held by `holder` for
    /// `lease`, together with the dedupe records of its `keys` (its own and its parts',
    /// none for a message the platform names no redelivery of), each live for `ttl`, in one
    /// transaction: the keys are admitted as [`Store::dedupe_admit_joined`] admits them,
    /// `None` (and nothing written) when every key had a live record, a redelivery. When
    /// some had one, the entry's record is written naming them
    /// ([`JournalRecord::not_recorded`]), so a release of the entry's turn, after a restart
    /// too, frees only the keys this admission recorded; their positions in `keys` are
    /// returned (empty: every key recorded, always so for a message of at most one key,
    /// which takes one statement as a plain admission does). At [`JOURNAL_CAP`] entries
    /// the oldest go in the same transaction.
    async fn journal_admit(
        &self,
        keys: &[DedupeKey],
        ttl: Duration,
        id: &str,
        record: &JournalRecord,
        holder: &str,
        lease: Duration,
    ) -> Result<Option<Vec<usize>>, StoreError>;

    /// Replaces entry `id`'s record if `holder` still holds it: `false` when the entry is
    /// gone or another holder claimed it (then the caller no longer owns that work).
    async fn journal_save(
        &self,
        id: &str,
        record: &JournalRecord,
        holder: &str,
    ) -> Result<bool, StoreError>;

    /// Deletes entry `id` (its final landed) if `holder` holds it, or nobody does (it gave
    /// up, or an operator retried it and no process claimed it yet): `true` when it went.
    /// An entry another holder took over stays, `false`: its work is that holder's now, and
    /// a late remove by the holder it was taken from must not lose it. Idempotent.
    async fn journal_remove(&self, id: &str, holder: &str) -> Result<bool, StoreError>;

    /// Takes over, atomically, the entries `holder` does not hold whose lease ran out at
    /// least `lease` ago (expiry + `lease` <= now, so a holder whose renewal comes a little
    /// late keeps what it still works on), or, with `take_live`, every such entry (a
    /// single-replica store after a restart, where the previous holder is known dead),
    /// holding them for `lease`; returns them oldest first. Entries whose holder released
    /// them ([`Store::journal_release`]), or that nobody holds (an operator's retry), are
    /// taken at once. Two replicas claiming at once never both get an entry. Entries that
    /// gave up are never claimed ([`Store::journal_give_up`]); a claimed entry is no
    /// longer due.
    async fn journal_claim(
        &self,
        holder: &str,
        lease: Duration,
        take_live: bool,
    ) -> Result<Vec<Journaled>, StoreError>;

    /// Extends `holder`'s lease on every entry it holds to `lease` from now, and returns
    /// those entries' ids (in no order): an entry of `holder`'s that is not among them was
    /// taken over or dropped before the renewal ran, which is how the journal's fence learns
    /// it no longer holds an entry whose final still waits (`manager/journal/fence.rs`).
    /// Released leases ([`Store::journal_release`]) are not renewed: a renewal that reaches
    /// the store after the release (one the client's timeout cut short) holds none of them
    /// again, and another replica's claim still takes them at once.
    async fn journal_renew(&self, holder: &str, lease: Duration)
    -> Result<Vec<String>, StoreError>;

    /// Gives `holder`'s leases on its entries up, so that the next claim (any process's)
    /// takes them at once, without waiting out the claim's grace: for a holder that stopped
    /// working on them (a clean shutdown whose replies all landed). The entries stay.
    async fn journal_release(&self, holder: &str) -> Result<(), StoreError>;

    /// Takes up, atomically, the entries waiting for a message of `channel` / `chat_id`
    /// (saved [`JournalState::Held`], issue 33), whoever holds them: they stop waiting and
    /// are `holder`'s for `lease`; returned oldest first. Two replicas taking at once never
    /// both get an entry. The caller then saves each with its new state.
    async fn journal_take_held(
        &self,
        channel: &str,
        chat_id: &ChatId,
        holder: &str,
        lease: Duration,
    ) -> Result<Vec<Journaled>, StoreError>;

    /// Gives entry `id` up if `holder` still holds it (`false` otherwise): its `record` is
    /// saved, it is marked given up now, and nobody holds it. [`Store::journal_claim`] never
    /// returns it again; it stays for an operator to retry or drop (issue 33) until
    /// [`Store::journal_sweep`] forgets it.
    async fn journal_give_up(
        &self,
        id: &str,
        record: &JournalRecord,
        holder: &str,
    ) -> Result<bool, StoreError>;

    /// Up to `limit` entries admitted after the one whose seq is `after` (0: from the
    /// start), oldest first, whoever holds them: the operator's listing, one page at a time
    /// so that memory stays bounded. Entries this build cannot read are left out.
    async fn journal_list(&self, after: i64, limit: usize) -> Result<Vec<Listed>, StoreError>;

    /// An operator's retry, atomically, of the deliveries among `ids` ([`Listed::is_delivery`]),
    /// returning how many: one that gave up is no longer given up, nobody holds it and its
    /// retry window starts now, so the next claim (any process's) takes it; one still
    /// worked on is marked due, so its holder's next [`Store::journal_sweep`] names it. Ids
    /// of entries still under way, of entries held for their chat's next message
    /// ([`JournalState::Held`]: a retry would meet the same closed window), or of none, are
    /// left alone.
    async fn journal_retry(&self, ids: &[String]) -> Result<usize, StoreError>;

    /// An operator's drop, atomically, of the deliveries among `ids`, returning how many
    /// went. Entries still under way are left alone. A holder's next
    /// [`Store::journal_save`] of a dropped entry returns `false`.
    async fn journal_drop(&self, ids: &[String]) -> Result<usize, StoreError>;

    /// The journal's upkeep for `holder`, run every renewal: returns (and clears) which of
    /// its entries an operator marked due, forgets entries that gave up more than `forget`
    /// ago, and counts those that remain given up.
    async fn journal_sweep(&self, holder: &str, forget: Duration) -> Result<Sweep, StoreError>;

    /// The chat's locale override, if an admin set one.
    async fn get_chat_locale(
        &self,
        channel: &str,
        chat_id: &ChatId,
    ) -> Result<Option<String>, StoreError>;

    /// Sets the chat's locale override; `None` removes it. Idempotent.
    async fn set_chat_locale(
        &self,
        channel: &str,
        chat_id: &ChatId,
        locale: Option<&str>,
    ) -> Result<(), StoreError>;

    /// The channel-state value under `key` of `channel`, if any (issue 32).
    async fn get_channel_state(
        &self,
        channel: &str,
        key: &str,
    ) -> Result<Option<Vec<u8>>, StoreError>;

    /// Stores `value` under `key` of `channel`, replacing what was there. A key over
    /// [`STATE_KEY_MAX`] bytes (or empty) or a value over [`STATE_VALUE_MAX`] bytes is
    /// refused with [`StoreError::OutOfBounds`].
    async fn put_channel_state(
        &self,
        channel: &str,
        key: &str,
        value: &[u8],
    ) -> Result<(), StoreError>;

    /// Removes `key` of `channel`. Idempotent.
    async fn delete_channel_state(&self, channel: &str, key: &str) -> Result<(), StoreError>;

    /// Takes up to `want` tokens (at least 1) from the token bucket `key`, which holds
    /// `budget.burst` tokens when whole and earns one more per `budget.every` (as
    /// [`im_bridge_channel::budget::limits_of`] bounds them), atomically: replicas taking at
    /// once never get more between them than the bucket holds. A bucket never used is
    /// whole. Judged by the store's clock; the grant says how long until the next token
    /// when none is free (issue 33: rate budgets shared by replicas).
    async fn take_tokens(
        &self,
        key: &str,
        budget: &RateBudget,
        want: u32,
    ) -> Result<Grant, StoreError>;

    /// Remembers that the conversation `topic` asked `asked` a question, waiting `ttl` from
    /// now by the store's clock: inserted, or replacing the question that user had pending
    /// in that chat (and counting as remembered now). At most the backend's question cap
    /// (default [`QUESTION_CAP`]) are kept; past it the questions remembered longest ago
    /// go in the same statement or transaction.
    async fn remember_question(
        &self,
        asked: &AskedKey,
        topic: &str,
        ttl: Duration,
    ) -> Result<(), StoreError>;

    /// Forgets the question pending for `asked` if the conversation `topic` asked it (that
    /// conversation ended a turn without a question); a question another conversation
    /// asked since stays. Returns whether one went.
    async fn forget_question(&self, asked: &AskedKey, topic: &str) -> Result<bool, StoreError>;

    /// Takes, atomically, the question pending for `asked`: the asking conversation's topic
    /// and how long it still waits, when it is live, and it is gone afterwards, so of two
    /// callers (replicas) taking at once only one gets it. An expired question is removed
    /// and counts as none.
    async fn take_question(&self, asked: &AskedKey) -> Result<Option<PendingQuestion>, StoreError>;

    /// Puts back a question [`Store::take_question`] took for a message that was then not
    /// run (a redelivery): waiting `question.expires_in` from now by the store's clock, so
    /// it keeps its deadline, unless its user has a live question pending in that chat
    /// again (asked since: the newer one stays). Counts as remembered now for the cap, as
    /// [`Store::remember_question`]. Returns whether it was put back.
    async fn give_back_question(&self, question: &PendingQuestion) -> Result<bool, StoreError>;

    /// Up to `limit` live pending questions, the most recently remembered first: what a
    /// process that alone opens the store loads at start.
    async fn pending_questions(&self, limit: usize) -> Result<Vec<PendingQuestion>, StoreError>;

    /// Flushes and releases the backend (file lock, connections). Later calls fail with
    /// [`StoreError::Closed`]. Idempotent. Dropping the store without closing is safe but
    /// finishes in the background.
    async fn close(&self) -> Result<(), StoreError>;

    /// Whether several daemons may share this store (then transports only one process may
    /// run are run under a lease). `false` for a store only one daemon can open.
    fn is_shared(&self) -> bool {
        false
    }

    /// The backend and its location for logs, e.g. `sqlite:/var/lib/im-bridge/bridge.store`.
    /// Never includes a password.
    fn describe(&self) -> String;
}

/// The longest channel-state key, in bytes: the adapter's own bound.
pub const STATE_KEY_MAX: usize = im_bridge_channel::state::MAX_KEY_LEN;

/// The largest channel-state value, in bytes: the adapter's bound plus room for the
/// envelope an encrypted secret is stored in (a version byte, a nonce and a tag).
pub const STATE_VALUE_MAX: usize = im_bridge_channel::state::MAX_VALUE_LEN + 64;

/// Refuses a channel-state key or value outside the bounds, before any I/O.
pub(crate) fn check_state(op: &'static str, key: &str, value: &[u8]) -> Result<(), StoreError> {
    if key.is_empty() || key.len() > STATE_KEY_MAX || value.len() > STATE_VALUE_MAX {
        return Err(StoreError::OutOfBounds {
            op,
            key: key.len(),
            value: value.len(),
        });
    }
    Ok(())
}

/// Unix time in seconds, as bindings record it. A clock before 1970 reads as 0.
pub(crate) fn unix_seconds() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |since| since.as_secs_f64())
}

/// Unix time in milliseconds, as dedupe records it.
pub(crate) fn unix_millis() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| {
            i64::try_from(since.as_millis()).unwrap_or(i64::MAX)
        })
}

/// Unix time in microseconds, as the SQLite store's rate budgets keep it.
pub(crate) fn unix_micros() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| {
            i64::try_from(since.as_micros()).unwrap_or(i64::MAX / 2)
        })
}

/// A TTL in milliseconds, saturating.
pub(crate) fn ttl_millis(ttl: Duration) -> i64 {
    i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn storage_key_matches_the_python_json_store() {
        let chat = ChatId::new("group:abc");
        let base = ConversationKey::new("qq", chat.clone(), None);
        assert_eq!(base.storage_key(), "qq:group:abc");
        let empty = ConversationKey::new("qq", chat.clone(), Some(String::new()));
        assert_eq!(empty.storage_key(), "qq:group:abc");
        assert_eq!(empty.topic(), "");
        let topic = ConversationKey::new("qq", chat, Some("42".into()));
        assert_eq!(topic.storage_key(), "qq:group:abc:42");
        assert_eq!(topic.topic(), "42");
    }
}
