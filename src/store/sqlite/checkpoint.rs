//! The WAL's checkpoints, on a thread of their own (issue 35).
//!
//! SQLite checkpoints a WAL on the connection that commits: by default, the commit that takes
//! the log past 1,000 pages copies them into the database file and syncs both files before
//! its caller hears of it. On the store thread that is a stall of every job queued behind
//! it, two `fsync`s long (2–3 ms on the project's VM, up to ~90 ms seen), about every
//! 140 messages under load: most of the load bench's latency tail at 2,000 messages/s.
//!
//! So the store connection's commits only count the log's pages (its WAL hook replaces
//! SQLite's automatic checkpoint), and past [`BACKGROUND_AT`] they wake the checkpoint
//! thread, which runs a passive checkpoint on a connection of its own. A passive checkpoint
//! never blocks the writer: commits go on appending while it copies. The log starts over
//! from its beginning at the first commit after a checkpoint that copied every page; under
//! a sustained write load one seldom catches up with the writer, so past [`WRITER_AT`]
//! pages the store connection checkpoints itself after a commit, as SQLite would have, with
//! nothing left to copy but what the last background checkpoint missed. That bounds the log
//! at about 40 MB. The file keeps the largest size it reached until the store closes: cut
//! back (`journal_size_limit`), it would have to grow again, and appending new blocks to a
//! file waits for the file system's journal, which the checkpoint thread's syncs keep busy
//! (the store thread's writes took 1–5 ms each while the log regrew past its cut).
//!
//! Durability is unchanged: which connection checkpoints does not change what a commit
//! promises (`db.rs`: WAL, `synchronous = NORMAL`).

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};
use std::sync::{Arc, mpsc};
use std::thread::JoinHandle;

use rusqlite::hooks::Wal;
use rusqlite::wal::CheckpointMode;
use rusqlite::{Connection, OpenFlags};

/// Log pages after which a commit wakes the checkpoint thread: SQLite's own
/// `wal_autocheckpoint` default.
const BACKGROUND_AT: i32 = 1_000;

/// Log pages after which the store connection checkpoints itself after a commit, because the
/// checkpoint thread has not caught up (about 40 MB at the default 4 KiB page).
const WRITER_AT: i32 = 10_000;

/// What the checkpoint thread is asked.
enum Ask {
    /// Checkpoint what the log holds.
    Checkpoint,
    /// Close the connection and end.
    Stop,
}

/// How many checkpoints ran where, for tests and the stop log line.
#[derive(Debug, Default)]
struct Counts {
    /// Passive checkpoints the checkpoint thread ran.
    background: AtomicU64,
    /// Checkpoints the store connection ran itself (the log past [`WRITER_AT`]).
    writer: AtomicU64,
}

/// The checkpoint thread of one store file. Dropping it stops the thread and waits for it,
/// so the store connection closed afterwards is the file's last and checkpoints the rest.
pub(super) struct Checkpointer {
    asks: SyncSender<Ask>,
    thread: Option<JoinHandle<()>>,
    counts: Arc<Counts>,
}

impl Checkpointer {
    /// Opens a second connection to the store file at `path` and starts its thread, then
    /// hands `writer`'s checkpoints to it. On failure `writer` keeps SQLite's automatic
    /// checkpoint and the reason is returned for the log.
    pub(super) fn start(path: &Path, writer: &mut Connection) -> Result<Self, String> {
        let conn = open(path).map_err(|e| e.to_string())?;
        // One pending ask at most: a commit finding one queued has nothing to add.
        let (asks, queue) = mpsc::sync_channel(1);
        let counts = Arc::new(Counts::default());
        let thread_counts = Arc::clone(&counts);
        let thread = std::thread::Builder::new()
            .name("im-bridge-ckpt".into())
            .spawn(move || serve(&conn, &queue, &thread_counts))
            .map_err(|e| e.to_string())?;
        let checkpointer = Self {
            asks,
            thread: Some(thread),
            counts,
        };
        checkpointer.hook(writer).map_err(|e| e.to_string())?;
        Ok(checkpointer)
    }

    /// Installs the WAL hook on `writer`: it replaces SQLite's automatic checkpoint.
    fn hook(&self, writer: &mut Connection) -> rusqlite::Result<()> {
        let asks = self.asks.clone();
        let counts = Arc::clone(&self.counts);
        writer.wal_hook(Some(move |wal: &mut Wal, pages: i32| {
            after_commit(wal, pages, &asks, &counts);
            // An error here would fail the COMMIT that already happened: never return one.
            Ok(())
        }))
    }

    /// Checkpoints run so far, by where.
    #[cfg(test)]
    fn counts(&self) -> Arc<Counts> {
        Arc::clone(&self.counts)
    }

    /// Stops the thread and waits for it, leaving the hook in place.
    #[cfg(test)]
    fn stop_thread(&mut self) {
        let _ = self.asks.send(Ask::Stop);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        // Waits while an ask is pending, i.e. at most one checkpoint.
        let _ = self.asks.send(Ask::Stop);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        tracing::debug!(
            background = self.counts.background.load(Ordering::Relaxed),
            writer = self.counts.writer.load(Ordering::Relaxed),
            "Store checkpoint thread stopped."
        );
    }
}

/// The store connection's WAL hook: runs after each commit, the write lock released, with
/// the log's length in pages.
fn after_commit(wal: &mut Wal, pages: i32, asks: &SyncSender<Ask>, counts: &Counts) {
    if pages < BACKGROUND_AT {
        return;
    }
    match asks.try_send(Ask::Checkpoint) {
        Ok(()) | Err(TrySendError::Full(_)) => {}
        // The thread is gone (it only ends on `Stop`, or by panicking): checkpoint here.
        Err(TrySendError::Disconnected(_)) => {
            checkpoint_here(wal, counts);
            return;
        }
    }
    if pages >= WRITER_AT {
        checkpoint_here(wal, counts);
    }
}

/// A passive checkpoint on the store connection itself. Busy (the checkpoint thread is
/// mid-checkpoint) is fine: the next commit tries again.
fn checkpoint_here(wal: &mut Wal, counts: &Counts) {
    match wal.checkpoint_v2(CheckpointMode::PASSIVE) {
        Ok(_) => {
            counts.writer.fetch_add(1, Ordering::Relaxed);
        }
        Err(error) if is_busy(&error) => {}
        Err(error) => {
            tracing::warn!(%error, "The store could not checkpoint its write-ahead log.");
        }
    }
}

/// The checkpoint thread's loop, until it is asked to stop.
fn serve(conn: &Connection, queue: &Receiver<Ask>, counts: &Counts) {
    let mut failing = false;
    while let Ok(Ask::Checkpoint) = queue.recv() {
        match conn.wal_checkpoint_v2(None::<&str>, CheckpointMode::PASSIVE) {
            Ok(_) => {
                counts.background.fetch_add(1, Ordering::Relaxed);
                failing = false;
            }
            // The store connection is checkpointing itself.
            Err(error) if is_busy(&error) => {}
            Err(error) => {
                // Once per spell of failures (a full disk fails every try).
                if !failing {
                    tracing::warn!(%error, "The store's checkpoint thread could not checkpoint the write-ahead log; the store connection will, past its limit.");
                }
                failing = true;
            }
        }
    }
}

/// The checkpoint thread's connection: the file must exist (the store connection made it).
fn open(path: &Path) -> rusqlite::Result<Connection> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags)?;
    // The checkpoint syncs the log before copying it and the file after, as the store
    // connection's would.
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    Ok(conn)
}

fn is_busy(error: &rusqlite::Error) -> bool {
    matches!(
        error.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    )
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    /// A WAL-mode file with a table of blobs, and its store-like connection.
    fn writer(dir: &tempfile::TempDir) -> (PathBuf, Connection) {
        let path = dir.path().join("bridge.store");
        let conn = Connection::open(&path).unwrap();
        let mode: String = conn
            .query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
        conn.execute_batch("PRAGMA synchronous = NORMAL; CREATE TABLE t (x BLOB)")
            .unwrap();
        (path, conn)
    }

    /// Commits `pages` new pages or so, in commits of 25 (100 KB).
    fn write_pages(conn: &Connection, pages: i32) {
        for _ in 0..pages / 25 {
            conn.execute("INSERT INTO t VALUES (randomblob(100000))", [])
                .unwrap();
        }
    }

    fn len(path: &std::path::Path) -> u64 {
        std::fs::metadata(path).map_or(0, |m| m.len())
    }

    #[test]
    fn commits_leave_checkpoints_to_the_checkpoint_thread() {
        let dir = tempfile::tempdir().unwrap();
        let (path, mut conn) = writer(&dir);
        let checkpointer = Checkpointer::start(&path, &mut conn).unwrap();
        let counts = checkpointer.counts();
        let before = len(&path);
        write_pages(&conn, 3 * BACKGROUND_AT);
        // Stopping waits for the checkpoint still asked for.
        drop(checkpointer);
        assert!(counts.background.load(Ordering::Relaxed) >= 1);
        assert_eq!(counts.writer.load(Ordering::Relaxed), 0);
        // The pages went into the file itself, not only into the log.
        let grown = len(&path) - before;
        assert!(grown >= 2 * BACKGROUND_AT as u64 * 4096, "{grown}");
        // The writer never waited for a checkpoint, so back-to-back commits outran them and
        // the log grew (to 13 MB here); the last one caught up, so the next commit starts it
        // over from its beginning instead of growing it.
        let wal = dir.path().join("bridge.store-wal");
        let log = len(&wal);
        write_pages(&conn, 25);
        assert_eq!(len(&wal), log);
        conn.close().unwrap();
        assert_eq!(len(&dir.path().join("bridge.store-wal")), 0);
    }

    #[test]
    fn a_log_the_thread_does_not_keep_short_is_checkpointed_by_its_writer() {
        let dir = tempfile::tempdir().unwrap();
        let (path, mut conn) = writer(&dir);
        let mut checkpointer = Checkpointer::start(&path, &mut conn).unwrap();
        let counts = checkpointer.counts();
        checkpointer.stop_thread();
        write_pages(&conn, BACKGROUND_AT - 100);
        assert_eq!(counts.writer.load(Ordering::Relaxed), 0);
        write_pages(&conn, 200);
        // Past the mark, with no thread to ask, each commit checkpoints itself.
        assert!(counts.writer.load(Ordering::Relaxed) >= 1);
        assert_eq!(counts.background.load(Ordering::Relaxed), 0);
        write_pages(&conn, 2 * BACKGROUND_AT);
        // The log started over each time instead of growing.
        let log = len(&dir.path().join("bridge.store-wal"));
        assert!(log <= (BACKGROUND_AT as u64 + 100) * 4096, "{log}");
    }

    #[test]
    fn a_file_the_thread_cannot_open_keeps_sqlites_own_checkpoints() {
        let dir = tempfile::tempdir().unwrap();
        let (_, mut conn) = writer(&dir);
        let missing = dir.path().join("gone.store");
        assert!(Checkpointer::start(&missing, &mut conn).is_err());
        // No hook was installed: SQLite's automatic checkpoint keeps the log short.
        write_pages(&conn, 3 * BACKGROUND_AT);
        let log = len(&dir.path().join("bridge.store-wal"));
        assert!(log <= (BACKGROUND_AT as u64 + 100) * 4096, "{log}");
    }
}
