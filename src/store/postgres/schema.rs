//! The Postgres schema as embedded migrations, applied in order at connect (see
//! `PostgresStore::migrate`): `im_bridge_schema.version` is the number applied. Never edit a
//! released migration; append a new one.

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
];
