//! The blocking side of [`SqliteStore`](super::SqliteStore): opening and checking the file,
//! one method per store operation, and the read-through [`Caches`]. Runs on the store thread.
//!
//! Each operation is a few statements on cached prepared statements; the store thread wraps a
//! batch of operations in one transaction (see `worker.rs`).
//!
//! Why the caches are exact: only the store thread writes them, it runs operations one at a
//! time in queue order, and it records each result only after the transaction holding it
//! committed. So a cached value is always the file's committed value. That needs every writer
//! to go through this thread, which the lock file guarantees for im-bridge processes; editing
//! the file by hand while the daemon runs is not supported.
//!
//! Children: `budgets` (rate budgets' token buckets, issue 33), `conversations`
//! (reply-chain records and pruning, issue 13), `journal` (the in-flight journal, issue
//! 19), `questions` (the agent's pending questions in groups), `state` (channel state,
//! issue 32).

mod budgets;
mod conversations;
mod journal;
pub(super) mod questions;
mod state;

use std::collections::HashSet;
use std::fs::{File, OpenOptions, TryLockError};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, OptionalExtension, params};

use super::SqliteOptions;
use super::checkpoint::Checkpointer;
use super::schema::{APPLICATION_ID, LATEST, MIGRATIONS};
use crate::gateway::ThreadId;
use crate::store::cache::BoundedCache;
use crate::store::{Binding, BindingWrite, DedupeKey, StoreError};

/// How long a statement waits for a lock held by an outside reader (e.g. the `sqlite3` shell
/// inspecting the file) before failing with "database is locked".
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Prepared statements kept per connection; above the ~50 this module and its children
/// use, so none is ever re-prepared.
const STATEMENT_CACHE: usize = 64;

/// Expired dedupe records are swept on every `SWEEP_EVERY`-th admission, at most
/// `SWEEP_LIMIT` at a time: up to 8 per admission on average, so a backlog left by an idle
/// spell drains faster than traffic adds to it, and no single write grows long.
const SWEEP_EVERY: u64 = 32;
/// See [`SWEEP_EVERY`].
const SWEEP_LIMIT: i64 = 256;

/// `(channel, chat_id, topic)`, topic `""` for the chat itself.
pub(super) type BindingKey = (String, String, String);

/// `(channel, chat_id)`.
pub(super) type ChatKey = (String, String);

/// The read-through caches in front of the file. Written only by the store thread, after a
/// commit; read by callers without a round trip. Each holds at most
/// `SqliteOptions::cache_capacity` entries (absent rows are cached too) and forgets its
/// oldest insertion at the bound.
#[derive(Debug)]
pub(super) struct Caches {
    /// Conversation bindings.
    bindings: Mutex<BoundedCache<BindingKey, Option<Binding>>>,
    /// Chat locale overrides.
    locales: Mutex<BoundedCache<ChatKey, Option<String>>>,
}

impl Caches {
    /// Empty caches of `capacity` entries each.
    pub(super) fn new(capacity: usize) -> Self {
        Self {
            bindings: Mutex::new(BoundedCache::new(capacity)),
            locales: Mutex::new(BoundedCache::new(capacity)),
        }
    }

    /// The cached binding: `Some(None)` means "known absent", `None` means "not cached".
    pub(super) fn binding(&self, key: &BindingKey) -> Option<Option<Binding>> {
        relock(&self.bindings).get(key).cloned()
    }

    /// The cached locale override, in the same shape as [`Caches::binding`].
    pub(super) fn locale(&self, key: &ChatKey) -> Option<Option<String>> {
        relock(&self.locales).get(key).cloned()
    }

    /// Records a committed binding (or its committed absence).
    pub(super) fn put_binding(&self, key: BindingKey, binding: Option<Binding>) {
        relock(&self.bindings).insert(key, binding);
    }

    /// Records that a chat's own binding and all its topic bindings were removed.
    pub(super) fn remove_chat_bindings(&self, channel: &str, chat_id: &str) {
        let mut cache = relock(&self.bindings);
        cache.retain(|(c, chat, _)| c != channel || chat != chat_id);
        cache.insert(
            (channel.to_owned(), chat_id.to_owned(), String::new()),
            None,
        );
    }

    /// Forgets bindings a committed prune removed. They are dropped, not cached as absent,
    /// so a large prune does not push the hot entries out.
    pub(super) fn forget_bindings(&self, keys: &[BindingKey]) {
        if keys.is_empty() {
            return;
        }
        let gone: HashSet<&BindingKey> = keys.iter().collect();
        relock(&self.bindings).retain(|key| !gone.contains(key));
    }

    /// Records a committed locale override (or its committed absence).
    pub(super) fn put_locale(&self, key: ChatKey, locale: Option<String>) {
        relock(&self.locales).insert(key, locale);
    }

    /// Forgets everything, after a failed transaction: later reads reload from the file.
    pub(super) fn clear(&self) {
        relock(&self.bindings).clear();
        relock(&self.locales).clear();
    }
}

/// Locks a cache. No code panics while holding one, so a poisoned lock still guards a whole
/// map and is safe to keep using.
fn relock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// An open, checked and migrated store file.
pub(super) struct Db {
    /// The thread that checkpoints the WAL, if it could start. Declared before `conn` so it
    /// stops (and closes its connection) first: the store connection, closing last, then
    /// checkpoints what is left and removes the log.
    checkpointer: Option<Checkpointer>,
    /// The connection. Declared before `_lock` so it closes before the lock is released.
    conn: Connection,
    /// The process-exclusive lock on `<file>.lock`, held while the connection is open.
    _lock: File,
    /// Most dedupe records kept (≥ 1).
    dedupe_cap: i64,
    /// Admissions so far, to pace the sweep of expired records.
    admissions: u64,
    /// Most reply-chain message records kept (≥ 1).
    message_cap: i64,
    /// The number of rows in `messages`, so the cap needs no `count(*)` per call. Exact
    /// because this thread is the only writer and updates it with each statement; `None`
    /// (recounted on next use) at open and after anything rolled back.
    messages: Option<i64>,
    /// Most pending questions kept (≥ 1).
    question_cap: i64,
}

impl Db {
    /// Locks, opens, checks and migrates the file. Every failure names `path`.
    pub(super) fn open(path: &Path, options: &SqliteOptions) -> Result<Self, StoreError> {
        let fail = |reason: String| StoreError::Open {
            path: path.to_path_buf(),
            reason,
        };
        // A path that can never be a store file fails before the lock file is made next to
        // it (issue 27: a directory used to leave `<dir>.lock` behind).
        if path.is_dir() {
            return Err(fail(
                "it is a directory; name a file inside it, e.g. im-bridge.db".into(),
            ));
        }
        let lock = lock(path)?;
        create_private(path).map_err(|e| fail(e.to_string()))?;
        // No SQLITE_OPEN_URI: a configured path is a path, even if it starts with `file:`.
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let mut conn = Connection::open_with_flags(path, flags).map_err(|e| fail(e.to_string()))?;
        conn.busy_timeout(BUSY_TIMEOUT)
            .map_err(|e| fail(e.to_string()))?;

        // The first read of the header: garbage or a foreign format fails here, before
        // anything is written to the file.
        let version = pragma_i64(&conn, "user_version").map_err(|e| fail(e.to_string()))?;
        let app_id = pragma_i64(&conn, "application_id").map_err(|e| fail(e.to_string()))?;
        let tables: i64 = conn
            .query_row("SELECT count(*) FROM sqlite_schema", [], |row| row.get(0))
            .map_err(|e| fail(e.to_string()))?;
        let ours = app_id == APPLICATION_ID || (app_id == 0 && version == 0 && tables == 0);
        if !ours {
            return Err(fail(
                "it is a SQLite database of another application, not an im-bridge store".into(),
            ));
        }
        if version > LATEST {
            return Err(StoreError::TooNew {
                path: path.to_path_buf(),
                found: version,
                supported: LATEST,
            });
        }
        if version < 0 {
            return Err(fail(format!("unknown schema version {version}")));
        }
        integrity_check(&conn).map_err(fail)?;

        let mode: String = conn
            .query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))
            .map_err(|e| fail(e.to_string()))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(fail(format!(
                "cannot switch to WAL (journal mode is {mode})"
            )));
        }
        // WAL + NORMAL: a commit survives a process crash; a power loss may undo the commits
        // since the last checkpoint (a redelivery then runs again), never corrupt the file.
        conn.execute_batch("PRAGMA synchronous = NORMAL")
            .map_err(|e| fail(e.to_string()))?;
        migrate(&mut conn, path, version)?;
        conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        let checkpointer = Checkpointer::start(path, &mut conn)
            .inspect_err(|reason| {
                tracing::warn!(
                    path = %path.display(),
                    reason,
                    "The store's checkpoint thread did not start; commits checkpoint the write-ahead log themselves."
                );
            })
            .ok();

        Ok(Self {
            checkpointer,
            conn,
            _lock: lock,
            dedupe_cap: i64::try_from(options.dedupe_cap.max(1)).unwrap_or(i64::MAX),
            admissions: 0,
            message_cap: i64::try_from(options.message_cap.max(1)).unwrap_or(i64::MAX),
            question_cap: i64::try_from(options.question_cap.max(1)).unwrap_or(i64::MAX),
            messages: None,
        })
    }

    /// Opens the transaction a batch of operations shares.
    pub(super) fn begin(&self) -> rusqlite::Result<()> {
        self.conn.prepare_cached("BEGIN")?.execute([])?;
        Ok(())
    }

    /// Commits the batch's transaction.
    pub(super) fn commit(&self) -> rusqlite::Result<()> {
        self.conn.prepare_cached("COMMIT")?.execute([])?;
        Ok(())
    }

    /// Abandons the batch's transaction, if SQLite has not already.
    pub(super) fn rollback(&mut self) {
        // Fails only when no transaction is open, which is the state wanted.
        let _ = self.conn.execute_batch("ROLLBACK");
        self.messages = None;
    }

    /// Runs `body` all or nothing inside the batch's transaction (a savepoint): on an error
    /// its statements are undone, and the message count is recounted on next use.
    pub(super) fn atomically<R>(
        &mut self,
        body: impl FnOnce(&mut Self) -> rusqlite::Result<R>,
    ) -> rusqlite::Result<R> {
        self.conn.prepare_cached("SAVEPOINT op")?.execute([])?;
        let outcome = body(self).and_then(|value| {
            self.conn.prepare_cached("RELEASE op")?.execute([])?;
            Ok(value)
        });
        if outcome.is_err() {
            // Fails only when SQLite already rolled the whole transaction back.
            let _ = self.conn.execute_batch("ROLLBACK TO op; RELEASE op");
            self.messages = None;
        }
        outcome
    }

    /// Whether a transaction is open. SQLite rolls one back by itself after some errors
    /// (I/O, disk full), which the store thread detects with this.
    pub(super) fn in_transaction(&self) -> bool {
        !self.conn.is_autocommit()
    }

    /// The connection, for tests that drive the store thread with raw SQL.
    #[cfg(test)]
    pub(super) fn conn(&self) -> &Connection {
        &self.conn
    }

    /// Stops the checkpoint thread, closes the connection (checkpointing the WAL into the
    /// file), then releases the lock.
    pub(super) fn close(self) -> rusqlite::Result<()> {
        let Self {
            checkpointer,
            conn,
            _lock,
            ..
        } = self;
        drop(checkpointer);
        conn.close().map_err(|(_, error)| error)
    }

    /// Reads a binding.
    pub(super) fn get_binding(&self, key: &BindingKey) -> rusqlite::Result<Option<Binding>> {
        self.conn
            .prepare_cached(
                "SELECT thread_id, user_id, created_at, updated_at FROM bindings
                 WHERE channel = ?1 AND chat_id = ?2 AND topic = ?3",
            )?
            .query_row(params![key.0, key.1, key.2], |row| {
                Ok(Binding {
                    thread_id: ThreadId::new(row.get::<_, String>(0)?),
                    user_id: row.get(1)?,
                    created_at: row.get(2)?,
                    updated_at: row.get(3)?,
                })
            })
            .optional()
    }

    /// Writes a binding as `mode` says (an overwrite keeps `created_at`; a claim keeps the
    /// whole existing row) and returns the binding that holds afterwards.
    pub(super) fn write_binding(
        &self,
        mode: BindingWrite,
        key: &BindingKey,
        thread_id: &ThreadId,
        user_id: &str,
        now: f64,
    ) -> rusqlite::Result<Binding> {
        let sql = match mode {
            BindingWrite::Overwrite => {
                "INSERT INTO bindings
                     (channel, chat_id, topic, thread_id, user_id, created_at, updated_at, touched_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6, ?6)
                 ON CONFLICT (channel, chat_id, topic) DO UPDATE SET
                     thread_id = excluded.thread_id,
                     user_id = excluded.user_id,
                     updated_at = excluded.updated_at,
                     touched_at = excluded.touched_at
                 RETURNING thread_id, user_id, created_at, updated_at"
            }
            // A no-op update on conflict makes RETURNING yield the row that was there.
            BindingWrite::Claim => {
                "INSERT INTO bindings
                     (channel, chat_id, topic, thread_id, user_id, created_at, updated_at, touched_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6, ?6)
                 ON CONFLICT (channel, chat_id, topic) DO UPDATE SET channel = channel
                 RETURNING thread_id, user_id, created_at, updated_at"
            }
        };
        self.conn.prepare_cached(sql)?.query_row(
            params![key.0, key.1, key.2, thread_id.as_str(), user_id, now],
            |row| {
                Ok(Binding {
                    thread_id: ThreadId::new(row.get::<_, String>(0)?),
                    user_id: row.get(1)?,
                    created_at: row.get(2)?,
                    updated_at: row.get(3)?,
                })
            },
        )
    }

    /// Deletes one topic's binding, or (topic `""`) the chat's and all its topics'.
    pub(super) fn remove_binding(
        &self,
        channel: &str,
        chat_id: &str,
        topic: &str,
    ) -> rusqlite::Result<usize> {
        if topic.is_empty() {
            self.conn
                .prepare_cached("DELETE FROM bindings WHERE channel = ?1 AND chat_id = ?2")?
                .execute(params![channel, chat_id])
        } else {
            self.conn
                .prepare_cached(
                    "DELETE FROM bindings WHERE channel = ?1 AND chat_id = ?2 AND topic = ?3",
                )?
                .execute(params![channel, chat_id, topic])
        }
    }

    /// Records a delivery unless a live record exists; see `Store::dedupe_admit`.
    ///
    /// Check-then-write is atomic because this thread is the only writer. Each write step is
    /// harmless on its own if a later one fails (an expired record gone, a cap trim or sweep
    /// deferred to the next admission), so no savepoint is needed.
    pub(super) fn dedupe_admit(
        &mut self,
        key: &DedupeKey,
        now_ms: i64,
        ttl_ms: i64,
    ) -> rusqlite::Result<bool> {
        let fields = params![
            key.channel,
            key.workspace,
            key.chat_id.as_str(),
            key.message_id
        ];
        // Equality lookups only: a range on a bound parameter would make SQLite re-plan
        // the statement on every call.
        let existing: Option<i64> = self
            .conn
            .prepare_cached(
                "SELECT expires_at FROM dedupe WHERE channel = ?1 AND workspace = ?2
                 AND chat_id = ?3 AND message_id = ?4",
            )?
            .query_row(fields, |row| row.get(0))
            .optional()?;
        match existing {
            Some(expires_at) if expires_at > now_ms => return Ok(false),
            Some(_) => {
                // Expired: replaced by a new record, which takes the newest seq.
                self.conn
                    .prepare_cached(
                        "DELETE FROM dedupe WHERE channel = ?1 AND workspace = ?2
                         AND chat_id = ?3 AND message_id = ?4",
                    )?
                    .execute(fields)?;
            }
            None => {}
        }
        self.conn
            .prepare_cached(
                "INSERT INTO dedupe (channel, workspace, chat_id, message_id, seen_at, expires_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )?
            .execute(params![
                key.channel,
                key.workspace,
                key.chat_id.as_str(),
                key.message_id,
                now_ms,
                now_ms.saturating_add(ttl_ms)
            ])?;
        // The new row holds the highest seq; keeping only the seqs within the last
        // `dedupe_cap` bounds the table at `dedupe_cap` rows, dropping the oldest first.
        let newest = self.conn.last_insert_rowid();
        self.conn
            .prepare_cached("DELETE FROM dedupe WHERE seq <= ?1")?
            .execute([newest.saturating_sub(self.dedupe_cap)])?;
        self.admissions = self.admissions.wrapping_add(1);
        if self.admissions.is_multiple_of(SWEEP_EVERY) {
            self.conn
                .prepare_cached(
                    "DELETE FROM dedupe WHERE seq IN
                     (SELECT seq FROM dedupe WHERE expires_at <= ?1 LIMIT ?2)",
                )?
                .execute([now_ms, SWEEP_LIMIT])?;
        }
        Ok(true)
    }

    /// Forgets a delivery.
    pub(super) fn dedupe_release(&self, key: &DedupeKey) -> rusqlite::Result<()> {
        self.conn
            .prepare_cached(
                "DELETE FROM dedupe WHERE channel = ?1 AND workspace = ?2 AND chat_id = ?3
                 AND message_id = ?4",
            )?
            .execute(params![
                key.channel,
                key.workspace,
                key.chat_id.as_str(),
                key.message_id
            ])?;
        Ok(())
    }

    /// Takes or renews a lease; see `Store::acquire_lease`.
    pub(super) fn acquire_lease(
        &self,
        name: &str,
        holder: &str,
        now_ms: i64,
        ttl_ms: i64,
    ) -> rusqlite::Result<bool> {
        let taken = self
            .conn
            .prepare_cached(
                "INSERT INTO leases (name, holder, expires_at) VALUES (?1, ?2, ?4)
                 ON CONFLICT (name) DO UPDATE SET holder = excluded.holder,
                     expires_at = excluded.expires_at
                 WHERE leases.holder = excluded.holder OR leases.expires_at <= ?3",
            )?
            .execute(params![name, holder, now_ms, now_ms.saturating_add(ttl_ms)])?;
        Ok(taken == 1)
    }

    /// Gives a lease up if `holder` holds it.
    pub(super) fn release_lease(&self, name: &str, holder: &str) -> rusqlite::Result<()> {
        self.conn
            .prepare_cached("DELETE FROM leases WHERE name = ?1 AND holder = ?2")?
            .execute(params![name, holder])?;
        Ok(())
    }

    /// Reads a chat's locale override.
    pub(super) fn get_chat_locale(&self, key: &ChatKey) -> rusqlite::Result<Option<String>> {
        Ok(self
            .conn
            .prepare_cached("SELECT locale FROM chat_settings WHERE channel = ?1 AND chat_id = ?2")?
            .query_row(params![key.0, key.1], |row| row.get::<_, Option<String>>(0))
            .optional()?
            .flatten())
    }

    /// Sets or clears a chat's locale override.
    pub(super) fn set_chat_locale(
        &self,
        key: &ChatKey,
        locale: Option<&str>,
        now: f64,
    ) -> rusqlite::Result<()> {
        self.conn
            .prepare_cached(
                "INSERT INTO chat_settings (channel, chat_id, locale, updated_at)
                 VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (channel, chat_id) DO UPDATE SET
                     locale = excluded.locale, updated_at = excluded.updated_at",
            )?
            .execute(params![key.0, key.1, locale, now])?;
        Ok(())
    }
}

/// Takes the process-exclusive lock on `<path>.lock`, so a second daemon on the same file
/// fails at start instead of double-admitting deliveries and staling the caches. The OS
/// releases the lock when the holder exits, even on a crash; the empty file stays.
fn lock(path: &Path) -> Result<File, StoreError> {
    let mut name = path.as_os_str().to_owned();
    name.push(".lock");
    let lock_path = PathBuf::from(name);
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| StoreError::Open {
            path: path.to_path_buf(),
            reason: format!("cannot create the lock file {}: {e}", lock_path.display()),
        })?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(TryLockError::WouldBlock) => Err(StoreError::Locked {
            path: path.to_path_buf(),
        }),
        Err(TryLockError::Error(e)) => Err(StoreError::Open {
            path: path.to_path_buf(),
            reason: format!("cannot lock {}: {e}", lock_path.display()),
        }),
    }
}

/// Creates a missing store file readable by its owner only: it holds platform user ids.
/// SQLite gives the `-wal` and `-shm` files the same permissions.
fn create_private(path: &Path) -> std::io::Result<()> {
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    match options.open(path) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

/// Reads an integer pragma.
fn pragma_i64(conn: &Connection, name: &str) -> rusqlite::Result<i64> {
    conn.query_row(&format!("PRAGMA {name}"), [], |row| row.get(0))
}

/// Runs `PRAGMA quick_check` so damage inside the file is a startup error, not a surprise on
/// the first unlucky read. It reads every page: ~50 ms for a 12 MB file (a full dedupe
/// table of 100,000 records plus 13,000 bindings).
fn integrity_check(conn: &Connection) -> Result<(), String> {
    let verdict: String = conn
        .query_row("PRAGMA quick_check(1)", [], |row| row.get(0))
        .map_err(|e| e.to_string())?;
    if verdict == "ok" {
        Ok(())
    } else {
        Err(format!("integrity check failed: {verdict}"))
    }
}

/// Applies the migrations after `from`, each in its own transaction with its version bump.
fn migrate(conn: &mut Connection, path: &Path, from: i64) -> Result<(), StoreError> {
    let applied = usize::try_from(from).unwrap_or(usize::MAX);
    for (index, sql) in MIGRATIONS.iter().enumerate().skip(applied) {
        let version = i64::try_from(index + 1).unwrap_or(i64::MAX);
        let fail = |source| StoreError::Migration {
            path: path.to_path_buf(),
            version,
            source,
        };
        let tx = conn.transaction().map_err(fail)?;
        tx.execute_batch(sql).map_err(fail)?;
        tx.execute_batch(&format!(
            "PRAGMA user_version = {version}; PRAGMA application_id = {APPLICATION_ID};"
        ))
        .map_err(fail)?;
        tx.commit().map_err(fail)?;
    }
    Ok(())
}
