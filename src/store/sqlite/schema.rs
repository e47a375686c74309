//! The SQLite schema, as embedded migrations applied in order at open.
//!
//! The file's `PRAGMA user_version` is the number of migrations applied. Each migration runs
//! in its own transaction together with the version bump, so a failed upgrade leaves the file
//! at its previous version. A file whose version is above [`LATEST`] was written by a newer
//! build and is refused. Never edit a released migration; append a new one.
//!
//! `PRAGMA application_id` marks the file as an im-bridge store, so pointing `bridge.store` at
//! some other SQLite database is refused instead of adding tables to it.

/// `PRAGMA application_id` of an im-bridge store: ASCII `IMBR`.
pub(super) const APPLICATION_ID: i64 = 0x494D_4252;

/// The schema version this build writes and the newest it can read.
pub(super) const LATEST: i64 = MIGRATIONS.len() as i64;

/// Migration `i` takes the file from version `i` to version `i + 1`.
pub(super) const MIGRATIONS: &[&str] = &[
    // 1: bindings, dedupe records, per-chat settings.
    "
    -- manager.md §4.1. `topic` is '' for the chat itself, so (channel, chat_id, topic) is the
    -- key and a chat id containing ':' stays unambiguous.
    CREATE TABLE bindings (
        channel    TEXT NOT NULL,
        chat_id    TEXT NOT NULL,
        topic      TEXT NOT NULL,
        thread_id  TEXT NOT NULL,
        user_id    TEXT NOT NULL,
        created_at REAL NOT NULL,   -- unix seconds
        updated_at REAL NOT NULL,   -- unix seconds
        PRIMARY KEY (channel, chat_id, topic)
    ) STRICT, WITHOUT ROWID;

    -- manager.md §3.3. `seq` grows with every admission, so the oldest records are the lowest
    -- seq and the cap is one range delete. Times are unix milliseconds.
    CREATE TABLE dedupe (
        seq        INTEGER PRIMARY KEY,
        channel    TEXT NOT NULL,
        workspace  TEXT NOT NULL,
        chat_id    TEXT NOT NULL,
        message_id TEXT NOT NULL,
        seen_at    INTEGER NOT NULL,
        expires_at INTEGER NOT NULL,
        UNIQUE (channel, workspace, chat_id, message_id)
    ) STRICT;
    CREATE INDEX dedupe_expires_at ON dedupe (expires_at);

    -- Per-chat settings set by admin commands; a NULL column means no override.
    CREATE TABLE chat_settings (
        channel    TEXT NOT NULL,
        chat_id    TEXT NOT NULL,
        locale     TEXT,
        updated_at REAL NOT NULL,   -- unix seconds
        PRIMARY KEY (channel, chat_id)
    ) STRICT, WITHOUT ROWID;
    ",
    // 2: leases (one holder per name until expires_at, unix milliseconds).
    "
    CREATE TABLE leases (
        name       TEXT NOT NULL PRIMARY KEY,
        holder     TEXT NOT NULL,
        expires_at INTEGER NOT NULL
    ) STRICT, WITHOUT ROWID;
    ",
    // 3: reply-chain records and binding touch times (issue 13).
    "
    -- When the binding was last written or a message of its conversation remembered (unix
    -- seconds); pruning drops topic bindings untouched for the TTL. Existing rows start at
    -- their last write.
    ALTER TABLE bindings ADD COLUMN touched_at REAL NOT NULL DEFAULT 0.0;
    UPDATE bindings SET touched_at = updated_at;

    -- Which conversation (`topic`, '' for the chat itself) a platform message belongs to.
    -- `seq` is renewed on every touch, so the least recently touched records are the lowest
    -- seq and the cap trims from the front; `touched_at` (unix seconds) is what pruning reads.
    CREATE TABLE messages (
        seq        INTEGER PRIMARY KEY,
        channel    TEXT NOT NULL,
        chat_id    TEXT NOT NULL,
        message_id TEXT NOT NULL,
        topic      TEXT NOT NULL,
        touched_at REAL NOT NULL,
        UNIQUE (channel, chat_id, message_id)
    ) STRICT;
    CREATE INDEX messages_touched_at ON messages (touched_at);
    ",
    // 4: the in-flight journal (issue 19). `record` is the manager's JSON; `seq` orders
    // entries by admission, so the cap trims the oldest and a claim returns them in order.
    "
    CREATE TABLE journal (
        seq         INTEGER PRIMARY KEY,
        id          TEXT NOT NULL UNIQUE,
        record      TEXT NOT NULL,
        holder      TEXT NOT NULL,
        lease_until INTEGER NOT NULL,   -- unix milliseconds
        created_at  INTEGER NOT NULL    -- unix milliseconds
    ) STRICT;
    ",
    // 5: channel state (issue 32): an adapter's opaque values (a cursor, an encrypted
    // token), one per (channel, key).
    "
    CREATE TABLE channel_state (
        channel    TEXT NOT NULL,
        key        TEXT NOT NULL,
        value      BLOB NOT NULL,
        updated_at REAL NOT NULL,   -- unix seconds
        PRIMARY KEY (channel, key)
    ) STRICT, WITHOUT ROWID;
    ",
    // 6: deliveries for operators (issue 33). An entry that gave up stays until an
    // operator retries or drops it (or it is forgotten after a week); a retry restarts its
    // retry window (`retried_at`), or asks its holder to try again now (`due`).
    "
    ALTER TABLE journal ADD COLUMN gave_up_at INTEGER;   -- unix milliseconds; NULL while worked on
    ALTER TABLE journal ADD COLUMN retried_at INTEGER;   -- unix milliseconds of the last retry
    ALTER TABLE journal ADD COLUMN due INTEGER NOT NULL DEFAULT 0;
    CREATE INDEX journal_gave_up_at ON journal (gave_up_at) WHERE gave_up_at IS NOT NULL;
    ",
    // 7: answers held for a chat's next message (issue 33). `held_channel` and `held_chat`
    // name the chat a held entry waits for (NULL otherwise), so a message finds them.
    "
    ALTER TABLE journal ADD COLUMN held_channel TEXT;
    ALTER TABLE journal ADD COLUMN held_chat TEXT;
    CREATE INDEX journal_held ON journal (held_channel, held_chat)
        WHERE held_channel IS NOT NULL;
    ",
    // 8: rate budgets (issue 33): one token bucket per `<channel>:<budget>`, whole again at
    // `tat_us` (unix microseconds on this process's clock).
    "
    CREATE TABLE rate_budgets (
        name   TEXT NOT NULL PRIMARY KEY,
        tat_us INTEGER NOT NULL
    ) STRICT, WITHOUT ROWID;
    ",
    // 9: pending questions: the agent asked `user_id` in a group chat, and the user's next
    // plain message there joins the conversation `topic`. `seq` is renewed when a question
    // is remembered again, so the cap trims the lowest; `expires_at` is unix milliseconds.
    "
    CREATE TABLE questions (
        seq        INTEGER PRIMARY KEY,
        channel    TEXT NOT NULL,
        chat_id    TEXT NOT NULL,
        user_id    TEXT NOT NULL,
        topic      TEXT NOT NULL,
        expires_at INTEGER NOT NULL,
        UNIQUE (channel, chat_id, user_id)
    ) STRICT;
    CREATE INDEX questions_expires_at ON questions (expires_at);
    ",
];
