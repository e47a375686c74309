//! [`PostgresStore`]: the shared store for several replicas (DESIGN.md "Scale-out").
//!
//! Every replica connects to the same database; each trait call is one statement (or one
//! transaction) on a pooled connection, so the database's row locks and unique keys are what
//! make a redelivered message run once across replicas, and what let one of two replicas
//! racing on a conversation's first message win the binding
//! ([`Store::claim_binding`]); the other runs on the winner's thread. Tables carry an `im_bridge_` prefix, because the database is often shared
//! with other services.
//!
//! - **Pool**: at most [`PostgresOptions::max_connections`] connections (default 16); a
//!   caller finding all of them busy waits for one, up to [`POOL_WAIT`], then fails with
//!   [`StoreError::Connect`]. A broken connection is dropped and replaced on next use.
//!   Every call, waiting included, is bounded by [`PostgresOptions::call_timeout`]
//!   (default [`CALL_TIMEOUT`]), and TCP keepalives and a user timeout are set unless the
//!   URL sets them, so a server that stops answering fails calls in seconds. Statements
//!   are prepared once per connection (behind PgBouncer, use session pooling).
//! - **Schema**: embedded migrations applied at connect under a transaction-scoped advisory
//!   lock, so replicas starting together migrate once; a schema already current is only
//!   read (the runtime role then needs no CREATE privilege). A schema newer than this build is a
//!   startup error ([`StoreError::TooNewSchema`]), never a rewrite.
//! - **Dedupe** (manager.md §3.3): one statement admits a key when no live record exists
//!   (an expired one is replaced and takes a new sequence number) and drops the records
//!   more than [`PostgresOptions::dedupe_cap`] sequence numbers older than it. A record
//!   already live consumes no sequence number; only two replicas racing on one key can
//!   leave a gap, so the cap keeps at most `dedupe_cap` records and, in practice, exactly
//!   that many. A message joined from several platform messages has its keys admitted in
//!   one statement too, written in sorted order so that two replicas admitting
//!   overlapping keys do not deadlock on those keys (`journal`; the cap's deletion may
//!   still meet a row another admission holds, rarely: PostgreSQL then aborts one side,
//!   whose message is handled unjournaled, as after any store failure).
//! - **Reply chains** (issue 13): one statement records a call's messages (each takes a new
//!   sequence number, a re-touched one too), touches the conversation's binding, and drops
//!   the records more than [`PostgresOptions::message_cap`] sequence numbers behind the
//!   newest: never more than the cap, least recently touched first. A re-touch leaves its
//!   old number unused, so under heavy re-touching the table holds somewhat fewer records
//!   than the cap (exactness would cost a `count(*)` per call). Pruning is one statement.
//! - **Transport**: plain TCP (or a Unix socket) to the server: `sslmode=require` is
//!   refused at startup with a clear message, as this build has no TLS for Postgres; use a
//!   local connection or a TLS-terminating proxy.
//!
//! - **Time** (issue 27): whatever decides between replicas reads the database's clock,
//!   never a replica's, so replicas whose clocks disagree still agree on what has expired:
//!   every lease (a transport's, [`Store::acquire_lease`]; a journal entry's, admitted,
//!   claimed and renewed), every dedupe record and every pending question is written as
//!   `now_ms!` plus its TTL, and found live or expired against `now_ms!`, all in the
//!   statement that decides. A replica 30 s ahead therefore neither takes a live lease
//!   nor claims live work, and neither shortens nor lengthens the dedupe window. Values kept for ordering and record
//!   keeping stay on the writing replica's clock: binding and chat-setting times and
//!   reply-chain touches (unix seconds; pruning reads them against a horizon of days, where
//!   seconds of skew do not matter), and a journal entry's `created_at` (milliseconds; the
//!   admitting replica keeps the same value in memory, and the final retry window measured
//!   from it is hours long).
//!
//! - **Rate budgets** (issue 33): one upsert per take locks the budget's row, reads the
//!   database's clock once and moves the bucket in the same statement (`budgets`), so
//!   replicas taking at once are served one after another and never oversubscribe it.
//!
//! Children: `budgets` (rate budgets' token buckets, issue 33), `clock` (the database's
//! clock every expiry is judged by, issue 27), `schema`
//! (the embedded migrations and applying them), `journal` (the in-flight journal, issue 19),
//! `deliveries` (the operator's journal operations, issue 33),
//! `conversations`
//! (reply-chain records and pruning), `questions` (the agent's pending questions in
//! groups, taken by whichever replica the answer reaches), `state` (channel state, issue
//! 32), `tests`.

mod budgets;
mod clock;
mod conversations;
mod deliveries;
mod journal;
mod questions;
mod schema;
mod state;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, RecyclingMethod, Timeouts};
use im_bridge_channel::budget::Grant;
use im_bridge_channel::{ChatId, RateBudget, Secret};
use tokio_postgres::config::{Host, SslMode};
use tokio_postgres::types::ToSql;
use tokio_postgres::{Config, NoTls, Row};

use self::clock::{now_ms, ttl_param};
use super::{
    AskedKey, Binding, BindingWrite, ConversationKey, DedupeKey, JournalRecord, Journaled, Listed,
    PendingQuestion, Pruned, QUESTION_CAP, Store, StoreError, Sweep, unix_seconds,
};
use crate::gateway::ThreadId;

/// How long a call waits for a free pooled connection (or a new one to connect).
pub const POOL_WAIT: Duration = Duration::from_secs(10);
/// The most one store call may take, waiting for a connection included; past it the call
/// fails with [`StoreError::TimedOut`] (the manager then fails open, manager.md §3.3).
pub const CALL_TIMEOUT: Duration = Duration::from_secs(15);
/// tokio-postgres's keepalive idle when the URL does not set one.
const DEFAULT_KEEPALIVE_IDLE: Duration = Duration::from_secs(2 * 60 * 60);
/// The most applying migrations at start may take, waiting for another replica included.
const MIGRATION_TIMEOUT: Duration = Duration::from_secs(120);

/// Tuning for [`PostgresStore::connect_with`].
#[derive(Clone, Debug)]
pub struct PostgresOptions {
    /// Most dedupe records kept (default 100,000; 0 counts as 1), as in the SQLite store.
    pub dedupe_cap: usize,
    /// Most pooled connections per replica (default 16; 0 counts as 1).
    pub max_connections: usize,
    /// Most reply-chain message records kept (default 200,000; 0 counts as 1): the records
    /// more than this many touches behind the newest are dropped by the touching statement,
    /// so never more than this many, and somewhat fewer under re-touching (module docs).
    pub message_cap: usize,
    /// The most one call may take (default [`CALL_TIMEOUT`]).
    pub call_timeout: Duration,
    /// Most pending questions kept (default [`QUESTION_CAP`]; 0 counts as 1): a
    /// `remember_question` drops the questions more than this many remembered before it.
    pub question_cap: usize,
}

impl Default for PostgresOptions {
    fn default() -> Self {
        Self {
            dedupe_cap: 100_000,
            max_connections: 16,
            message_cap: 200_000,
            call_timeout: CALL_TIMEOUT,
            question_cap: QUESTION_CAP,
        }
    }
}

/// The shared Postgres backend.
pub struct PostgresStore {
    pool: Pool,
    target: String,
    dedupe_cap: i64,
    message_cap: i64,
    question_cap: i64,
    call_timeout: Duration,
    closed: AtomicBool,
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore")
            .field("target", &self.target)
            .finish_non_exhaustive()
    }
}

impl PostgresStore {
    /// Connects to the database at `url` (`postgres://user:password@host:port/db?…`) with
    /// the default options and applies the migrations.
    pub async fn connect(url: &Secret) -> Result<Self, StoreError> {
        let config = parse_url(url)?;
        Self::connect_with(config, PostgresOptions::default()).await
    }

    /// Connects with a parsed configuration and explicit options.
    pub async fn connect_with(
        mut config: Config,
        options: PostgresOptions,
    ) -> Result<Self, StoreError> {
        let target = describe(&config);
        // Notice a dead server in seconds rather than after the kernel's defaults (two
        // hours of keepalive idle, ~15 minutes of retransmissions), unless the URL says.
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(POOL_WAIT);
        }
        if config.get_keepalives_idle() == DEFAULT_KEEPALIVE_IDLE {
            config.keepalives_idle(Duration::from_secs(30));
        }
        #[cfg(target_os = "linux")]
        if config.get_tcp_user_timeout().is_none() {
            config.tcp_user_timeout(CALL_TIMEOUT);
        }
        if config.get_ssl_mode() == SslMode::Require {
            return Err(StoreError::Connect {
                target,
                reason: "sslmode=require, but this build connects without TLS; use a local \
                         connection or a TLS-terminating proxy"
                    .into(),
            });
        }
        let manager = Manager::from_config(
            config,
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(options.max_connections.max(1))
            .timeouts(Timeouts {
                wait: Some(POOL_WAIT),
                create: Some(POOL_WAIT),
                recycle: Some(POOL_WAIT),
            })
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .build()
            .map_err(|error| StoreError::Connect {
                target: target.clone(),
                reason: error.to_string(),
            })?;
        let store = Self {
            pool,
            target,
            dedupe_cap: i64::try_from(options.dedupe_cap.max(1)).unwrap_or(i64::MAX),
            message_cap: i64::try_from(options.message_cap.max(1)).unwrap_or(i64::MAX),
            question_cap: i64::try_from(options.question_cap.max(1)).unwrap_or(i64::MAX),
            call_timeout: options.call_timeout,
            closed: AtomicBool::new(false),
        };
        store.migrate().await?;
        Ok(store)
    }

    /// A pooled connection, or why none could be had.
    async fn client(&self) -> Result<Object, StoreError> {
        if self.closed.load(Ordering::Acquire) {
            return Err(StoreError::Closed);
        }
        self.pool.get().await.map_err(|error| StoreError::Connect {
            target: self.target.clone(),
            reason: pool_reason(&error),
        })
    }

    /// Runs `call` on a pooled connection within the call timeout (waiting for the
    /// connection included): a server that stops answering fails the call instead of
    /// holding a message handler for the kernel's retransmission timeout.
    async fn with_client<T, F>(&self, op: &'static str, call: F) -> Result<T, StoreError>
    where
        F: AsyncFnOnce(&Object) -> Result<T, tokio_postgres::Error>,
    {
        let attempt = async {
            let client = self.client().await?;
            call(&client).await.map_err(failed(op))
        };
        tokio::time::timeout(self.call_timeout, attempt)
            .await
            .unwrap_or(Err(StoreError::TimedOut { op }))
    }

    /// Writes a binding as `mode` says and returns the binding that holds afterwards: an
    /// overwrite keeps `created_at`; a claim keeps an existing row (a no-op update on
    /// conflict makes RETURNING yield it), so the unique key decides between replicas
    /// racing on a first message.
    async fn write_binding(
        &self,
        mode: BindingWrite,
        key: &ConversationKey,
        thread_id: &ThreadId,
        user_id: &str,
    ) -> Result<Binding, StoreError> {
        let (op, sql) = match mode {
            BindingWrite::Overwrite => (
                "set_binding",
                "INSERT INTO im_bridge_bindings
                     (channel, chat_id, topic, thread_id, user_id, created_at, updated_at, touched_at)
                 VALUES ($1, $2, $3, $4, $5, $6, $6, $6)
                 ON CONFLICT (channel, chat_id, topic) DO UPDATE SET
                     thread_id = EXCLUDED.thread_id,
                     user_id = EXCLUDED.user_id,
                     updated_at = EXCLUDED.updated_at,
                     touched_at = EXCLUDED.touched_at
                 RETURNING thread_id, user_id, created_at, updated_at",
            ),
            BindingWrite::Claim => (
                "claim_binding",
                "INSERT INTO im_bridge_bindings
                     (channel, chat_id, topic, thread_id, user_id, created_at, updated_at, touched_at)
                 VALUES ($1, $2, $3, $4, $5, $6, $6, $6)
                 ON CONFLICT (channel, chat_id, topic) DO UPDATE SET
                     channel = im_bridge_bindings.channel
                 RETURNING thread_id, user_id, created_at, updated_at",
            ),
        };
        let row = self
            .query_one(
                op,
                sql,
                &[
                    &key.channel,
                    &key.chat_id.as_str(),
                    &key.topic(),
                    &thread_id.as_str(),
                    &user_id,
                    &unix_seconds(),
                ],
            )
            .await?;
        binding(&row).map_err(failed(op))
    }

    /// One row of a statement (prepared once per connection).
    async fn query_one(
        &self,
        op: &'static str,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Row, StoreError> {
        self.with_client(op, async |client: &Object| {
            let statement = client.prepare_cached(sql).await?;
            client.query_one(&statement, params).await
        })
        .await
    }

    /// Every row of a statement (prepared once per connection).
    async fn query(
        &self,
        op: &'static str,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, StoreError> {
        self.with_client(op, async |client: &Object| {
            let statement = client.prepare_cached(sql).await?;
            client.query(&statement, params).await
        })
        .await
    }

    /// At most one row of a statement (prepared once per connection).
    async fn query_opt(
        &self,
        op: &'static str,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Option<Row>, StoreError> {
        self.with_client(op, async |client: &Object| {
            let statement = client.prepare_cached(sql).await?;
            client.query_opt(&statement, params).await
        })
        .await
    }

    /// The rows a statement changed (prepared once per connection).
    async fn execute(
        &self,
        op: &'static str,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<u64, StoreError> {
        self.with_client(op, async |client: &Object| {
            let statement = client.prepare_cached(sql).await?;
            client.execute(&statement, params).await
        })
        .await
    }
}

/// The common table expressions of a dedupe admission (`$1`–`$4` the key, `$5` the TTL in
/// milliseconds, `$6` the cap): `admitted` holds the new record's seq unless a live record
/// exists (an expired one is replaced and takes the new sequence number), `dropped` what
/// fell out of the cap. The DELETE runs on the statement's snapshot, so it never sees the
/// new row. Shared by `dedupe_admit` and the journal's admission.
macro_rules! dedupe_admission {
    () => {
        concat!(
            "WITH live AS (
                 SELECT 1 FROM im_bridge_dedupe
                 WHERE channel = $1 AND workspace = $2 AND chat_id = $3
                   AND message_id = $4 AND expires_at > ",
            now_ms!(),
            "), admitted AS (
                 INSERT INTO im_bridge_dedupe
                     (channel, workspace, chat_id, message_id, expires_at)
                 SELECT $1, $2, $3, $4, ",
            now_ms!(),
            " + $5 WHERE NOT EXISTS (SELECT 1 FROM live)
                 ON CONFLICT (channel, workspace, chat_id, message_id) DO UPDATE SET
                     expires_at = EXCLUDED.expires_at, seq = EXCLUDED.seq
                 WHERE im_bridge_dedupe.expires_at <= ",
            now_ms!(),
            " RETURNING seq
             ), dropped AS (
                 DELETE FROM im_bridge_dedupe
                 WHERE seq <= (SELECT seq FROM admitted) - $6
                 RETURNING 1
             )"
        )
    };
}
pub(super) use dedupe_admission;

#[async_trait::async_trait]
impl Store for PostgresStore {
    async fn get_binding(&self, key: &ConversationKey) -> Result<Option<Binding>, StoreError> {
        let row = self
            .query_opt(
                "get_binding",
                "SELECT thread_id, user_id, created_at, updated_at FROM im_bridge_bindings
                 WHERE channel = $1 AND chat_id = $2 AND topic = $3",
                &[&key.channel, &key.chat_id.as_str(), &key.topic()],
            )
            .await?;
        row.as_ref()
            .map(binding)
            .transpose()
            .map_err(failed("get_binding"))
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
        let removed = match topic.filter(|t| !t.is_empty()) {
            Some(topic) => {
                self.execute(
                    "remove_binding",
                    "DELETE FROM im_bridge_bindings
                     WHERE channel = $1 AND chat_id = $2 AND topic = $3",
                    &[&channel, &chat_id.as_str(), &topic],
                )
                .await?
            }
            None => {
                self.execute(
                    "remove_binding",
                    "DELETE FROM im_bridge_bindings WHERE channel = $1 AND chat_id = $2",
                    &[&channel, &chat_id.as_str()],
                )
                .await?
            }
        };
        Ok(usize::try_from(removed).unwrap_or(usize::MAX))
    }

    async fn dedupe_admit(&self, key: &DedupeKey, ttl: Duration) -> Result<bool, StoreError> {
        // One statement: insert unless a live record exists (an expired one is replaced
        // and takes the new sequence number), then drop what fell out of the cap. The
        // DELETE runs on the statement's snapshot, so it never sees the new row.
        let row = self
            .query_one(
                "dedupe_admit",
                concat!(
                    dedupe_admission!(),
                    " SELECT EXISTS (SELECT 1 FROM admitted), (SELECT count(*) FROM dropped)"
                ),
                &[
                    &key.channel,
                    &key.workspace,
                    &key.chat_id.as_str(),
                    &key.message_id,
                    &ttl_param(ttl),
                    &self.dedupe_cap,
                ],
            )
            .await?;
        row.try_get(0).map_err(failed("dedupe_admit"))
    }

    async fn dedupe_admit_joined(
        &self,
        keys: &[DedupeKey],
        ttl: Duration,
    ) -> Result<Option<Vec<usize>>, StoreError> {
        match keys {
            [] => Ok(Some(Vec::new())),
            [key] => Ok(self.dedupe_admit(key, ttl).await?.then(Vec::new)),
            keys => self.admit_joined(keys, ttl).await,
        }
    }

    async fn dedupe_release(&self, key: &DedupeKey) -> Result<(), StoreError> {
        self.execute(
            "dedupe_release",
            "DELETE FROM im_bridge_dedupe
                 WHERE channel = $1 AND workspace = $2 AND chat_id = $3 AND message_id = $4",
            &[
                &key.channel,
                &key.workspace,
                &key.chat_id.as_str(),
                &key.message_id,
            ],
        )
        .await?;
        Ok(())
    }

    async fn acquire_lease(
        &self,
        name: &str,
        holder: &str,
        ttl: Duration,
    ) -> Result<bool, StoreError> {
        // The row lock of the upsert orders replicas racing for a free lease; the
        // database's clock decides whether the holder's lease ran out.
        let taken = self
            .execute(
                "acquire_lease",
                concat!(
                    "INSERT INTO im_bridge_leases (name, holder, expires_at) VALUES ($1, $2, ",
                    now_ms!(),
                    " + $3)
                     ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder,
                         expires_at = EXCLUDED.expires_at
                     WHERE im_bridge_leases.holder = EXCLUDED.holder
                        OR im_bridge_leases.expires_at <= ",
                    now_ms!()
                ),
                &[&name, &holder, &ttl_param(ttl)],
            )
            .await?;
        Ok(taken == 1)
    }

    async fn release_lease(&self, name: &str, holder: &str) -> Result<(), StoreError> {
        self.execute(
            "release_lease",
            "DELETE FROM im_bridge_leases WHERE name = $1 AND holder = $2",
            &[&name, &holder],
        )
        .await?;
        Ok(())
    }

    async fn remember_messages(
        &self,
        key: &ConversationKey,
        message_ids: &[&str],
    ) -> Result<(), StoreError> {
        self.remember(key, message_ids).await
    }

    async fn message_conversation(
        &self,
        channel: &str,
        chat_id: &ChatId,
        message_id: &str,
    ) -> Result<Option<String>, StoreError> {
        self.conversation_of(channel, chat_id, message_id).await
    }

    async fn prune_conversations(&self, older_than: Duration) -> Result<Pruned, StoreError> {
        self.prune(older_than).await
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
        self.admit_journaled(keys, ttl, (id, record), holder, lease)
            .await
    }

    async fn journal_save(
        &self,
        id: &str,
        record: &JournalRecord,
        holder: &str,
    ) -> Result<bool, StoreError> {
        self.save_journaled(id, record, holder).await
    }

    async fn journal_take_held(
        &self,
        channel: &str,
        chat_id: &ChatId,
        holder: &str,
        lease: Duration,
    ) -> Result<Vec<Journaled>, StoreError> {
        self.take_held_journaled(channel, chat_id, holder, lease)
            .await
    }

    async fn journal_remove(&self, id: &str, holder: &str) -> Result<bool, StoreError> {
        self.remove_journaled(id, holder).await
    }

    async fn journal_claim(
        &self,
        holder: &str,
        lease: Duration,
        take_live: bool,
    ) -> Result<Vec<Journaled>, StoreError> {
        self.claim_journaled(holder, lease, take_live).await
    }

    async fn journal_renew(
        &self,
        holder: &str,
        lease: Duration,
    ) -> Result<Vec<String>, StoreError> {
        self.renew_journaled(holder, lease).await
    }

    async fn journal_release(&self, holder: &str) -> Result<(), StoreError> {
        self.release_journaled(holder).await
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
        let row = self
            .query_opt(
                "get_chat_locale",
                "SELECT locale FROM im_bridge_chat_settings WHERE channel = $1 AND chat_id = $2",
                &[&channel, &chat_id.as_str()],
            )
            .await?;
        match row {
            Some(row) => row.try_get(0).map_err(failed("get_chat_locale")),
            None => Ok(None),
        }
    }

    async fn set_chat_locale(
        &self,
        channel: &str,
        chat_id: &ChatId,
        locale: Option<&str>,
    ) -> Result<(), StoreError> {
        self.execute(
            "set_chat_locale",
            "INSERT INTO im_bridge_chat_settings (channel, chat_id, locale, updated_at)
                 VALUES ($1, $2, $3, $4)
                 ON CONFLICT (channel, chat_id) DO UPDATE SET
                     locale = EXCLUDED.locale, updated_at = EXCLUDED.updated_at",
            &[&channel, &chat_id.as_str(), &locale, &unix_seconds()],
        )
        .await?;
        Ok(())
    }

    async fn get_channel_state(
        &self,
        channel: &str,
        key: &str,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        self.state_get(channel, key).await
    }

    async fn put_channel_state(
        &self,
        channel: &str,
        key: &str,
        value: &[u8],
    ) -> Result<(), StoreError> {
        self.state_put(channel, key, value).await
    }

    async fn delete_channel_state(&self, channel: &str, key: &str) -> Result<(), StoreError> {
        self.state_delete(channel, key).await
    }

    async fn take_tokens(
        &self,
        key: &str,
        budget: &RateBudget,
        want: u32,
    ) -> Result<Grant, StoreError> {
        self.take(key, budget, want).await
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
        self.closed.store(true, Ordering::Release);
        self.pool.close();
        Ok(())
    }

    fn is_shared(&self) -> bool {
        true
    }

    fn describe(&self) -> String {
        self.target.clone()
    }
}

/// Maps a driver error onto [`StoreError::Postgres`] for `op`.
fn failed(op: &'static str) -> impl Fn(tokio_postgres::Error) -> StoreError {
    move |source| StoreError::Postgres { op, source }
}

/// A binding row (`thread_id, user_id, created_at, updated_at`); a column of another type
/// is an error, never a panic.
fn binding(row: &Row) -> Result<Binding, tokio_postgres::Error> {
    Ok(Binding {
        thread_id: ThreadId::new(row.try_get::<_, String>(0)?),
        user_id: row.try_get(1)?,
        created_at: row.try_get(2)?,
        updated_at: row.try_get(3)?,
    })
}

/// Parses a store URL; the error never repeats it (it may hold a password).
pub fn parse_url(url: &Secret) -> Result<Config, StoreError> {
    url.expose()
        .parse::<Config>()
        .map_err(|error| StoreError::Connect {
            target: "postgres://…".into(),
            // The parser's messages name the bad option, never its value.
            reason: format!("the URL is not valid ({error})"),
        })
}

/// `postgres://user@host:port/db`: where the store is, never the password.
pub fn describe(config: &Config) -> String {
    let user = config.get_user().unwrap_or("");
    let host = match config.get_hosts().first() {
        // An unescaped `@` in a password makes the parser take its tail for the host:
        // never print a host that is not a plain host name or address.
        Some(Host::Tcp(host))
            if !host.chars().all(|c| {
                c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':' | '[' | ']')
            }) =>
        {
            "<unreadable host>".into()
        }
        Some(Host::Tcp(host)) => host.clone(),
        #[cfg(unix)]
        Some(Host::Unix(path)) => path.display().to_string(),
        None => "localhost".into(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let db = config.get_dbname().unwrap_or(user);
    format!("postgres://{user}@{host}:{port}/{db}")
}

/// A pool error's reason without connection details beyond the driver's message.
fn pool_reason(error: &deadpool_postgres::PoolError) -> String {
    use deadpool_postgres::{PoolError, TimeoutType};
    let secs = POOL_WAIT.as_secs();
    match error {
        PoolError::Timeout(TimeoutType::Wait) => {
            format!("no pooled connection became free within {secs} s")
        }
        PoolError::Timeout(TimeoutType::Create) => format!("could not connect within {secs} s"),
        PoolError::Timeout(TimeoutType::Recycle) => {
            format!("checking a pooled connection took over {secs} s")
        }
        PoolError::Backend(error) => connect_reason(error),
        other => other.to_string(),
    }
}

/// Why the server refused a connection, by its SQLSTATE.
#[derive(Clone, Copy, Debug, thiserror::Error)]
enum Refused {
    #[error("the server refused the password for this role")]
    Password,
    #[error(
        "the server refused this role (no such role, or pg_hba.conf does not let it in from here)"
    )]
    Role,
    #[error("the database does not exist")]
    Database,
    #[error("this role may not connect to the database")]
    Privilege,
    #[error("the server has no connection slot free")]
    Slots,
    #[error("the server is starting up or shutting down")]
    Starting,
    #[error("the server refused the connection")]
    Other,
}

/// Which part of connecting failed (issue 27: the driver's own text is only "db error" or
/// "error connecting to server"): the network, the role, the password, the database, or
/// TLS, by the server's SQLSTATE where it answered. Never the password.
fn connect_reason(error: &tokio_postgres::Error) -> String {
    if let Some(db) = error.as_db_error() {
        let code = db.code().code();
        let what = match code {
            "28P01" => Refused::Password,
            "28000" => Refused::Role,
            "3D000" => Refused::Database,
            "42501" => Refused::Privilege,
            "53300" => Refused::Slots,
            "57P03" => Refused::Starting,
            _ => Refused::Other,
        };
        return format!("{what} (SQLSTATE {code})");
    }
    // The driver's text says where it failed; its source says why ("Connection refused").
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        let line = cause.to_string();
        if !text.contains(&line) {
            text.push_str(": ");
            text.push_str(&line);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests;
