//! The Postgres schema as embedded migrations, and [`PostgresStore::migrate`], which applies
//! them in order at connect: `im_bridge_schema.version` is the number applied. Never edit a
//! released migration; append a new one.

use super::{MIGRATION_TIMEOUT, PostgresStore, failed};
use crate::store::StoreError;

/// An arbitrary constant naming the migration lock among the database's advisory locks.
pub(super) const MIGRATION_LOCK: i64 = 0x1b_b41d_6e00;

/// The embedded migrations, in order; `MIGRATIONS[i]` brings the schema to version `i + 1`.
pub(super) const MIGRATIONS: &[&str] = &[
    "CREATE TABLE im_bridge_bindings (
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
    );",
    "CREATE TABLE im_bridge_leases (
        name       TEXT NOT NULL PRIMARY KEY,
        holder     TEXT NOT NULL,
        expires_at BIGINT NOT NULL             -- unix milliseconds
    );",
    // 3: reply-chain records and binding touch times (issue 13). The default serves replicas
    // of the previous release still writing bindings during a rolling upgrade.
    "ALTER TABLE im_bridge_bindings ADD COLUMN touched_at DOUBLE PRECISION;
    UPDATE im_bridge_bindings SET touched_at = updated_at;
    ALTER TABLE im_bridge_bindings
        ALTER COLUMN touched_at SET NOT NULL,
        ALTER COLUMN touched_at SET DEFAULT extract(epoch FROM now());
    CREATE TABLE im_bridge_messages (
        channel    TEXT NOT NULL,
        chat_id    TEXT NOT NULL,
        message_id TEXT NOT NULL,
        topic      TEXT NOT NULL,              -- '' for the chat itself
        touched_at DOUBLE PRECISION NOT NULL,  -- unix seconds
        seq        BIGSERIAL NOT NULL,         -- renewed on every touch; the cap trims the lowest
        PRIMARY KEY (channel, chat_id, message_id)
    );
    CREATE INDEX im_bridge_messages_seq ON im_bridge_messages (seq);
    CREATE INDEX im_bridge_messages_touched_at ON im_bridge_messages (touched_at);",
    // 4: the in-flight journal (issue 19); `record` is the manager's JSON, `seq` the
    // admission order (the cap trims the lowest; claims return entries in order).
    "CREATE TABLE im_bridge_journal (
        id          TEXT NOT NULL PRIMARY KEY,
        record      TEXT NOT NULL,
        holder      TEXT NOT NULL,
        lease_until BIGINT NOT NULL,           -- unix milliseconds
        created_at  BIGINT NOT NULL,           -- unix milliseconds
        seq         BIGSERIAL NOT NULL
    );
    CREATE INDEX im_bridge_journal_seq ON im_bridge_journal (seq);
    CREATE INDEX im_bridge_journal_holder ON im_bridge_journal (holder);",
    // 5: channel state (issue 32): an adapter's opaque values, one per (channel, key).
    "CREATE TABLE im_bridge_channel_state (
        channel    TEXT NOT NULL,
        key        TEXT NOT NULL,
        value      BYTEA NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL,  -- unix seconds
        PRIMARY KEY (channel, key)
    );",
    // 6: deliveries for operators (issue 33): an entry that gave up stays until an operator
    // retries or drops it (or it is forgotten after a week); a retry restarts its retry
    // window (`retried_at`) or asks its holder to try again now (`due`).
    "ALTER TABLE im_bridge_journal
        ADD COLUMN gave_up_at BIGINT,          -- unix milliseconds; NULL while worked on
        ADD COLUMN retried_at BIGINT,          -- unix milliseconds of the last retry
        ADD COLUMN due BOOLEAN NOT NULL DEFAULT FALSE;
    CREATE INDEX im_bridge_journal_gave_up_at ON im_bridge_journal (gave_up_at)
        WHERE gave_up_at IS NOT NULL;",
    // 7: answers held for a chat's next message (issue 33): the chat a held entry waits
    // for, NULL otherwise.
    "ALTER TABLE im_bridge_journal ADD COLUMN held_channel TEXT, ADD COLUMN held_chat TEXT;
    CREATE INDEX im_bridge_journal_held ON im_bridge_journal (held_channel, held_chat)
        WHERE held_channel IS NOT NULL;",
    // 8: rate budgets shared by replicas (issue 33): one token bucket per `<channel>:<budget>`.
    // `granted` and `wait_us` hold the last take's answer, so the statement can return it.
    "CREATE TABLE im_bridge_rate_budgets (
        name    TEXT NOT NULL PRIMARY KEY,
        tat_us  BIGINT NOT NULL,               -- whole again at, unix µs on the database's clock
        granted BIGINT NOT NULL,
        wait_us BIGINT NOT NULL
    );",
    // 9: pending questions: the agent asked `user_id` in a group chat, and the user's next
    // plain message there, on whichever replica, joins the conversation `topic`. `seq` is
    // renewed when a question is remembered again; the cap trims the lowest.
    "CREATE TABLE im_bridge_questions (
        channel    TEXT NOT NULL,
        chat_id    TEXT NOT NULL,
        user_id    TEXT NOT NULL,
        topic      TEXT NOT NULL,
        expires_at BIGINT NOT NULL,            -- unix milliseconds on the database's clock
        seq        BIGSERIAL NOT NULL,
        PRIMARY KEY (channel, chat_id, user_id)
    );
    CREATE INDEX im_bridge_questions_seq ON im_bridge_questions (seq);
    CREATE INDEX im_bridge_questions_expires_at ON im_bridge_questions (expires_at);",
];

impl PostgresStore {
    /// Brings the schema to the newest version this build knows. A schema already current
    /// is only read: no DDL and no lock, so the runtime role needs no CREATE privilege
    /// once an operator (or an earlier start) created the tables.
    pub(super) async fn migrate(&self) -> Result<(), StoreError> {
        let supported = MIGRATIONS.len() as i64;
        let exists = self
            .query_one(
                "migrate",
                "SELECT to_regclass('im_bridge_schema') IS NOT NULL",
                &[],
            )
            .await?;
        let found: Option<i64> = if exists.try_get(0).map_err(failed("migrate"))? {
            let version = self
                .query_one("migrate", "SELECT max(version) FROM im_bridge_schema", &[])
                .await?;
            version.try_get(0).map_err(failed("migrate"))?
        } else {
            None
        };
        if found == Some(supported) {
            return Ok(());
        }
        self.check_not_newer(found.unwrap_or(0), supported)?;
        let query = failed("migrate");
        let mut client = self.client().await?;
        let migrate = async {
            let tx = client.transaction().await.map_err(&query)?;
            tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
                .await
                .map_err(&query)?;
            tx.batch_execute(
                "CREATE TABLE IF NOT EXISTS im_bridge_schema (version BIGINT NOT NULL)",
            )
            .await
            .map_err(&query)?;
            // Another replica may have migrated while this one waited for the lock.
            let found: i64 = match tx
                .query_opt("SELECT version FROM im_bridge_schema", &[])
                .await
                .map_err(&query)?
            {
                Some(row) => row.try_get(0).map_err(&query)?,
                None => 0,
            };
            self.check_not_newer(found, supported)?;
            for migration in MIGRATIONS.iter().skip(usize::try_from(found).unwrap_or(0)) {
                tx.batch_execute(migration).await.map_err(&query)?;
            }
            if found < supported {
                tx.execute("DELETE FROM im_bridge_schema", &[])
                    .await
                    .map_err(&query)?;
                tx.execute(
                    "INSERT INTO im_bridge_schema (version) VALUES ($1)",
                    &[&supported],
                )
                .await
                .map_err(&query)?;
                tracing::info!(store = %self.target, from = found, to = supported, "Migrated the store schema.");
            }
            tx.commit().await.map_err(&query)
        };
        // Migrations may wait for another replica's lock: a generous bound.
        tokio::time::timeout(MIGRATION_TIMEOUT, migrate)
            .await
            .unwrap_or(Err(StoreError::TimedOut { op: "migrate" }))
    }

    /// Refuses a schema newer than this build.
    fn check_not_newer(&self, found: i64, supported: i64) -> Result<(), StoreError> {
        if found > supported {
            return Err(StoreError::TooNewSchema {
                target: self.target.clone(),
                found,
                supported,
            });
        }
        Ok(())
    }
}
