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
//! - **Schema**: embedded migrations applied at connect under a transaction-scoped advisory
//!   lock, so replicas starting together migrate once. A schema newer than this build is a
//!   startup error ([`StoreError::TooNewSchema`]), never a rewrite.
//! - **Dedupe** (manager.md §3.3): one statement admits a key when no live record exists
//!   (an expired one is replaced and takes a new sequence number) and drops the records
//!   more than [`PostgresOptions::dedupe_cap`] sequence numbers older than it. A record
//!   already live consumes no sequence number; only two replicas racing on one key can
//!   leave a gap, so the cap keeps at most `dedupe_cap` records and, in practice, exactly
//!   that many.
//! - **Transport**: plain TCP (or a Unix socket) to the server: `sslmode=require` is
//!   refused at startup with a clear message, as this build has no TLS for Postgres; use a
//!   local connection or a TLS-terminating proxy.
//!
//! Times are unix seconds (bindings) and milliseconds (dedupe) from the replica's clock, as
//! in the SQLite store.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, RecyclingMethod, Timeouts};
use im_bridge_channel::{ChatId, Secret, ThreadId};
use tokio_postgres::config::{Host, SslMode};
use tokio_postgres::{Config, NoTls, Row};

use super::{
    Binding, ConversationKey, DedupeKey, Store, StoreError, ttl_millis, unix_millis, unix_seconds,
};

/// How long a call waits for a free pooled connection (or a new one to connect).
pub const POOL_WAIT: Duration = Duration::from_secs(10);

/// An arbitrary constant naming the migration lock among the database's advisory locks.
const MIGRATION_LOCK: i64 = 0x1b_b41d_6e00;

/// The embedded migrations, in order; `MIGRATIONS[i]` brings the schema to version `i + 1`.
const MIGRATIONS: &[&str] = &["CREATE TABLE im_bridge_bindings (
        channel    TEXT NOT NULL,
        chat_id    TEXT NOT NULL,
        topic      TEXT NOT NULL,              -- '' for the chat itself
        thread_id  TEXT NOT NULL,
        user_id    TEXT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL,  -- unix seconds
        updated_at DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (channel, chat_id, topic)
    );
    CREATE TABLE im_bridge_dedupe (
        channel    TEXT NOT NULL,
        workspace  TEXT NOT NULL,
        chat_id    TEXT NOT NULL,
        message_id TEXT NOT NULL,
        expires_at BIGINT NOT NULL,            -- unix milliseconds
        seq        BIGSERIAL NOT NULL,
        PRIMARY KEY (channel, workspace, chat_id, message_id)
    );
    CREATE INDEX im_bridge_dedupe_seq ON im_bridge_dedupe (seq);
    CREATE TABLE im_bridge_chat_settings (
        channel    TEXT NOT NULL,
        chat_id    TEXT NOT NULL,
        locale     TEXT,
        updated_at DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (channel, chat_id)
    );"];

/// Tuning for [`PostgresStore::connect_with`].
#[derive(Clone, Debug)]
pub struct PostgresOptions {
    /// Most dedupe records kept (default 100,000; 0 counts as 1), as in the SQLite store.
    pub dedupe_cap: usize,
    /// Most pooled connections per replica (default 16; 0 counts as 1).
    pub max_connections: usize,
}

impl Default for PostgresOptions {
    fn default() -> Self {
        Self {
            dedupe_cap: 100_000,
            max_connections: 16,
        }
    }
}

/// The shared Postgres backend.
pub struct PostgresStore {
    pool: Pool,
    target: String,
    dedupe_cap: i64,
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
        config: Config,
        options: PostgresOptions,
    ) -> Result<Self, StoreError> {
        let target = describe(&config);
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

    /// Brings the schema to the newest version this build knows.
    async fn migrate(&self) -> Result<(), StoreError> {
        let query = |source| StoreError::Postgres {
            op: "migrate",
            source,
        };
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(query)?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
            .await
            .map_err(query)?;
        tx.batch_execute("CREATE TABLE IF NOT EXISTS im_bridge_schema (version BIGINT NOT NULL)")
            .await
            .map_err(query)?;
        let found: i64 = tx
            .query_opt("SELECT version FROM im_bridge_schema", &[])
            .await
            .map_err(query)?
            .map_or(0, |row| row.get(0));
        let supported = MIGRATIONS.len() as i64;
        if found > supported {
            return Err(StoreError::TooNewSchema {
                target: self.target.clone(),
                found,
                supported,
            });
        }
        for migration in MIGRATIONS.iter().skip(usize::try_from(found).unwrap_or(0)) {
            tx.batch_execute(migration).await.map_err(query)?;
        }
        if found < supported {
            tx.execute("DELETE FROM im_bridge_schema", &[])
                .await
                .map_err(query)?;
            tx.execute(
                "INSERT INTO im_bridge_schema (version) VALUES ($1)",
                &[&supported],
            )
            .await
            .map_err(query)?;
            tracing::info!(store = %self.target, from = found, to = supported, "Migrated the store schema.");
        }
        tx.commit().await.map_err(query)
    }
}

#[async_trait::async_trait]
impl Store for PostgresStore {
    async fn get_binding(&self, key: &ConversationKey) -> Result<Option<Binding>, StoreError> {
        let op = failed("get_binding");
        let client = self.client().await?;
        let row = client
            .query_opt(
                "SELECT thread_id, user_id, created_at, updated_at FROM im_bridge_bindings
                 WHERE channel = $1 AND chat_id = $2 AND topic = $3",
                &[&key.channel, &key.chat_id.as_str(), &key.topic()],
            )
            .await
            .map_err(op)?;
        Ok(row.as_ref().map(binding))
    }

    async fn set_binding(
        &self,
        key: &ConversationKey,
        thread_id: &ThreadId,
        user_id: &str,
    ) -> Result<Binding, StoreError> {
        let op = failed("set_binding");
        let client = self.client().await?;
        let row = client
            .query_one(
                "INSERT INTO im_bridge_bindings
                     (channel, chat_id, topic, thread_id, user_id, created_at, updated_at)
                 VALUES ($1, $2, $3, $4, $5, $6, $6)
                 ON CONFLICT (channel, chat_id, topic) DO UPDATE SET
                     thread_id = EXCLUDED.thread_id,
                     user_id = EXCLUDED.user_id,
                     updated_at = EXCLUDED.updated_at
                 RETURNING thread_id, user_id, created_at, updated_at",
                &[
                    &key.channel,
                    &key.chat_id.as_str(),
                    &key.topic(),
                    &thread_id.as_str(),
                    &user_id,
                    &unix_seconds(),
                ],
            )
            .await
            .map_err(op)?;
        Ok(binding(&row))
    }

    async fn claim_binding(
        &self,
        key: &ConversationKey,
        thread_id: &ThreadId,
        user_id: &str,
    ) -> Result<Binding, StoreError> {
        let op = failed("claim_binding");
        let client = self.client().await?;
        // A no-op update on conflict makes RETURNING yield the row that was there; the
        // unique key decides between replicas racing on a first message.
        let row = client
            .query_one(
                "INSERT INTO im_bridge_bindings
                     (channel, chat_id, topic, thread_id, user_id, created_at, updated_at)
                 VALUES ($1, $2, $3, $4, $5, $6, $6)
                 ON CONFLICT (channel, chat_id, topic) DO UPDATE SET
                     channel = im_bridge_bindings.channel
                 RETURNING thread_id, user_id, created_at, updated_at",
                &[
                    &key.channel,
                    &key.chat_id.as_str(),
                    &key.topic(),
                    &thread_id.as_str(),
                    &user_id,
                    &unix_seconds(),
                ],
            )
            .await
            .map_err(op)?;
        Ok(binding(&row))
    }

    async fn remove_binding(
        &self,
        channel: &str,
        chat_id: &ChatId,
        topic: Option<&str>,
    ) -> Result<usize, StoreError> {
        let op = failed("remove_binding");
        let client = self.client().await?;
        let removed = match topic.filter(|t| !t.is_empty()) {
            Some(topic) => client
                .execute(
                    "DELETE FROM im_bridge_bindings
                     WHERE channel = $1 AND chat_id = $2 AND topic = $3",
                    &[&channel, &chat_id.as_str(), &topic],
                )
                .await
                .map_err(op)?,
            None => client
                .execute(
                    "DELETE FROM im_bridge_bindings WHERE channel = $1 AND chat_id = $2",
                    &[&channel, &chat_id.as_str()],
                )
                .await
                .map_err(op)?,
        };
        Ok(usize::try_from(removed).unwrap_or(usize::MAX))
    }

    async fn dedupe_admit(&self, key: &DedupeKey, ttl: Duration) -> Result<bool, StoreError> {
        let op = failed("dedupe_admit");
        let now = unix_millis();
        let expires_at = now.saturating_add(ttl_millis(ttl));
        let client = self.client().await?;
        // One statement: insert unless a live record exists (an expired one is replaced
        // and takes the new sequence number), then drop what fell out of the cap. The
        // DELETE runs on the statement's snapshot, so it never sees the new row.
        let row = client
            .query_one(
                "WITH live AS (
                     SELECT 1 FROM im_bridge_dedupe
                     WHERE channel = $1 AND workspace = $2 AND chat_id = $3
                       AND message_id = $4 AND expires_at > $5
                 ), admitted AS (
                     INSERT INTO im_bridge_dedupe
                         (channel, workspace, chat_id, message_id, expires_at)
                     SELECT $1, $2, $3, $4, $6 WHERE NOT EXISTS (SELECT 1 FROM live)
                     ON CONFLICT (channel, workspace, chat_id, message_id) DO UPDATE SET
                         expires_at = EXCLUDED.expires_at, seq = EXCLUDED.seq
                     WHERE im_bridge_dedupe.expires_at <= $5
                     RETURNING seq
                 ), dropped AS (
                     DELETE FROM im_bridge_dedupe
                     WHERE seq <= (SELECT seq FROM admitted) - $7
                     RETURNING 1
                 )
                 SELECT EXISTS (SELECT 1 FROM admitted), (SELECT count(*) FROM dropped)",
                &[
                    &key.channel,
                    &key.workspace,
                    &key.chat_id.as_str(),
                    &key.message_id,
                    &now,
                    &expires_at,
                    &self.dedupe_cap,
                ],
            )
            .await
            .map_err(op)?;
        Ok(row.get(0))
    }

    async fn dedupe_release(&self, key: &DedupeKey) -> Result<(), StoreError> {
        let op = failed("dedupe_release");
        let client = self.client().await?;
        client
            .execute(
                "DELETE FROM im_bridge_dedupe
                 WHERE channel = $1 AND workspace = $2 AND chat_id = $3 AND message_id = $4",
                &[
                    &key.channel,
                    &key.workspace,
                    &key.chat_id.as_str(),
                    &key.message_id,
                ],
            )
            .await
            .map_err(op)?;
        Ok(())
    }

    async fn get_chat_locale(
        &self,
        channel: &str,
        chat_id: &ChatId,
    ) -> Result<Option<String>, StoreError> {
        let op = failed("get_chat_locale");
        let client = self.client().await?;
        let row = client
            .query_opt(
                "SELECT locale FROM im_bridge_chat_settings WHERE channel = $1 AND chat_id = $2",
                &[&channel, &chat_id.as_str()],
            )
            .await
            .map_err(op)?;
        Ok(row.and_then(|row| row.get(0)))
    }

    async fn set_chat_locale(
        &self,
        channel: &str,
        chat_id: &ChatId,
        locale: Option<&str>,
    ) -> Result<(), StoreError> {
        let op = failed("set_chat_locale");
        let client = self.client().await?;
        client
            .execute(
                "INSERT INTO im_bridge_chat_settings (channel, chat_id, locale, updated_at)
                 VALUES ($1, $2, $3, $4)
                 ON CONFLICT (channel, chat_id) DO UPDATE SET
                     locale = EXCLUDED.locale, updated_at = EXCLUDED.updated_at",
                &[&channel, &chat_id.as_str(), &locale, &unix_seconds()],
            )
            .await
            .map_err(op)?;
        Ok(())
    }

    async fn close(&self) -> Result<(), StoreError> {
        self.closed.store(true, Ordering::Release);
        self.pool.close();
        Ok(())
    }

    fn describe(&self) -> String {
        self.target.clone()
    }
}

/// Maps a driver error onto [`StoreError::Postgres`] for `op`.
fn failed(op: &'static str) -> impl Fn(tokio_postgres::Error) -> StoreError {
    move |source| StoreError::Postgres { op, source }
}

fn binding(row: &Row) -> Binding {
    Binding {
        thread_id: ThreadId::new(row.get::<_, String>(0)),
        user_id: row.get(1),
        created_at: row.get(2),
        updated_at: row.get(3),
    }
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
    match error {
        deadpool_postgres::PoolError::Timeout(_) => {
            format!("no connection became free within {} s", POOL_WAIT.as_secs())
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests;
