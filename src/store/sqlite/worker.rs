//! The store thread: runs queued jobs against the one connection, with group commit.
//!
//! The thread waits for a job, yields the core once, then takes whatever else is queued
//! (up to [`MAX_BATCH`]) and runs the lot in one transaction. Under load a commit, the
//! expensive part (WAL append, and every ~1000 pages a checkpoint with fsync), is paid once
//! per batch instead of once per call; when idle a batch is a single job, so nothing waits
//! for a batch to fill ([`gather`]). No answer is sent and no cache is updated before the batch's commit, so callers
//! see exactly the durability of one transaction per call.
//!
//! A failing statement rolls back only itself, and every operation is safe to stop after any
//! of its statements (`db.rs`), so one failing job does not fail its batch. If SQLite rolls the whole transaction back (I/O error, disk full) or the
//! commit fails, every job of that transaction gets the error, the caches are dropped, and
//! the jobs not yet run go on in a fresh transaction.

use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};

use super::db::{Caches, Db};
use crate::store::StoreError;

/// Most jobs run in one transaction; bounds how long one commit holds back the answers of
/// the jobs in it (about a millisecond of work).
pub(super) const MAX_BATCH: usize = 64;

/// A queued unit of work for the store thread.
pub(super) type Job = Box<dyn FnOnce(&mut Db) -> Step + Send>;

/// Settles a job once its transaction ended: with `Ok` after a commit, it records its result
/// in the caches and answers; with `Err` it answers with the transaction's error.
pub(super) type Finish = Box<dyn FnOnce(&Caches, Result<(), Arc<rusqlite::Error>>) + Send>;

/// Where a close request reports that the file is closed.
pub(super) type Closer = oneshot::Sender<Result<(), StoreError>>;

/// What a job asks of the store thread after running.
pub(super) enum Step {
    /// It ran inside the current transaction; settle it once that ends.
    Ran(Finish),
    /// Close the store: commit what ran before, close the file, then answer.
    Stop(Closer),
}

/// The store thread's loop: serves batches until a close request or until every handle is
/// dropped, then closes the file and releases the lock.
pub(super) fn serve(mut db: Db, caches: &Caches, mut queue: mpsc::Receiver<Job>) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    let mut closer = None;
    while closer.is_none() && queue.blocking_recv_many(&mut batch, MAX_BATCH) > 0 {
        gather(&mut queue, &mut batch);
        closer = run_batch(&mut db, caches, &mut batch);
    }
    // Refuse new jobs, close the file, and only then drop the jobs left unrun (their callers
    // get `StoreError::Closed`), so a racing `close` returns after the file is closed.
    queue.close();
    let closed = db.close().map_err(|source| StoreError::Query {
        op: "close",
        source: Arc::new(source),
    });
    drop(batch);
    drop(queue);
    if let Some(closer) = closer {
        let _ = closer.send(closed);
    }
}

/// Yields the core once before a batch runs, then takes the jobs that arrived meanwhile
/// (issue 35). On a busy machine the threads the store thread would otherwise hold back run
/// first, and their next jobs join this batch instead of waiting for a commit of their
/// own; on an idle one no other thread wants the core and the yield returns at once. One
/// yield, not a timed wait: the wait is only ever as long as the work that fills it.
fn gather(queue: &mut mpsc::Receiver<Job>, batch: &mut Vec<Job>) {
    if batch.len() >= MAX_BATCH {
        return;
    }
    std::thread::yield_now();
    while batch.len() < MAX_BATCH {
        match queue.try_recv() {
            Ok(job) => batch.push(job),
            Err(_) => break,
        }
    }
}

/// Runs and settles the jobs of `batch`, normally in one transaction. Returns a close
/// request if one came up; the jobs queued after it stay in `batch`, unrun.
fn run_batch(db: &mut Db, caches: &Caches, batch: &mut Vec<Job>) -> Option<Closer> {
    let mut jobs = std::mem::take(batch).into_iter();
    while jobs.len() > 0 {
        // If BEGIN fails the jobs run (and commit) one by one, which is still correct.
        let in_transaction = db.begin().is_ok();
        let mut finishes = Vec::new();
        let mut stop = None;
        let mut aborted = false;
        for job in jobs.by_ref() {
            match job(db) {
                Step::Ran(finish) => finishes.push(finish),
                Step::Stop(closer) => {
                    stop = Some(closer);
                    break;
                }
            }
            if in_transaction && !db.in_transaction() {
                aborted = true;
                break;
            }
        }
        let outcome = if !in_transaction {
            Ok(())
        } else if aborted {
            Err(Arc::new(rolled_back()))
        } else {
            db.commit().map_err(Arc::new)
        };
        if outcome.is_err() {
            db.rollback();
            // The caches only ever hold committed values, but after a failed transaction
            // re-reading the file is the cheap way to be sure.
            caches.clear();
        }
        for finish in finishes {
            finish(caches, outcome.clone());
        }
        if stop.is_some() {
            batch.extend(jobs);
            return stop;
        }
    }
    None
}

/// The error given to jobs whose transaction SQLite rolled back because of a later job.
fn rolled_back() -> rusqlite::Error {
    rusqlite::Error::SqliteFailure(
        rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_ABORT),
        Some("the transaction was rolled back by a failure in the same batch".into()),
    )
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc as std_mpsc;

    use super::*;
    use crate::store::Binding;
    use crate::store::sqlite::SqliteOptions;

    type Outcomes = std_mpsc::Receiver<(&'static str, bool)>;

    /// A job running `sql`; reports whether it ran and committed.
    fn job(
        name: &'static str,
        sql: &'static str,
        report: &std_mpsc::Sender<(&'static str, bool)>,
    ) -> Job {
        let report = report.clone();
        Box::new(move |db| {
            let ran = db.conn().execute_batch(sql);
            Step::Ran(Box::new(move |_, committed| {
                let _ = report.send((name, ran.is_ok() && committed.is_ok()));
            }))
        })
    }

    fn outcomes(rx: &Outcomes) -> Vec<(&'static str, bool)> {
        rx.try_iter().collect()
    }

    fn rows(db: &Db) -> Vec<String> {
        let mut stmt = db.conn().prepare("SELECT x FROM t ORDER BY x").unwrap();
        stmt.query_map([], |row| row.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    }

    fn setup() -> (tempfile::TempDir, Db, Caches) {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(&dir.path().join("bridge.store"), &SqliteOptions::default()).unwrap();
        db.conn().execute_batch("CREATE TABLE t (x TEXT)").unwrap();
        (dir, db, Caches::new(4))
    }

    #[test]
    fn issue_35_gathering_takes_what_was_queued_up_to_the_batch_bound() {
        let (report, _outcomes) = std_mpsc::channel();
        let (tx, mut queue) = mpsc::channel::<Job>(MAX_BATCH * 2);
        for _ in 0..MAX_BATCH + 5 {
            assert!(tx.try_send(job("x", "SELECT 1", &report)).is_ok());
        }
        let mut batch = Vec::new();
        assert_eq!(queue.blocking_recv_many(&mut batch, 1), 1);
        gather(&mut queue, &mut batch);
        assert_eq!(batch.len(), MAX_BATCH);
        assert_eq!(queue.len(), 5, "the rest wait for the next batch");
        // A lone job gathers nothing and does not wait for more.
        let (_tx, mut idle) = mpsc::channel::<Job>(1);
        let mut lone = vec![job("y", "SELECT 1", &report)];
        gather(&mut idle, &mut lone);
        assert_eq!(lone.len(), 1);
    }

    #[test]
    fn a_failing_job_does_not_fail_its_batch() {
        let (_dir, mut db, caches) = setup();
        let (tx, rx) = std_mpsc::channel();
        let mut batch = vec![
            job("a", "INSERT INTO t VALUES ('a')", &tx),
            job("bad", "INSERT INTO missing VALUES (1)", &tx),
            job("b", "INSERT INTO t VALUES ('b')", &tx),
        ];
        assert!(run_batch(&mut db, &caches, &mut batch).is_none());
        assert_eq!(outcomes(&rx), [("a", true), ("bad", false), ("b", true)]);
        assert_eq!(rows(&db), ["a", "b"]);
    }

    #[test]
    fn a_transaction_sqlite_rolled_back_fails_its_jobs_and_the_rest_go_on() {
        let (_dir, mut db, caches) = setup();
        let key = ("c".to_owned(), "1".to_owned(), String::new());
        let binding = Binding {
            thread_id: "t".into(),
            user_id: "u".into(),
            created_at: 1.0,
            updated_at: 1.0,
        };
        caches.put_binding(key.clone(), Some(binding));
        let (tx, rx) = std_mpsc::channel();
        let mut batch = vec![
            job("c", "INSERT INTO t VALUES ('c')", &tx),
            // What SQLite does by itself after an I/O error or a full disk.
            job("abort", "ROLLBACK", &tx),
            job("d", "INSERT INTO t VALUES ('d')", &tx),
        ];
        assert!(run_batch(&mut db, &caches, &mut batch).is_none());
        assert_eq!(outcomes(&rx), [("c", false), ("abort", false), ("d", true)]);
        assert_eq!(rows(&db), ["d"]);
        assert_eq!(caches.binding(&key), None, "caches dropped after a failure");
    }

    #[test]
    fn a_close_request_commits_what_came_before_and_leaves_the_rest_unrun() {
        let (_dir, mut db, caches) = setup();
        let (tx, rx) = std_mpsc::channel();
        let (closer, _closed) = oneshot::channel();
        let mut batch = vec![
            job("e", "INSERT INTO t VALUES ('e')", &tx),
            Box::new(move |_: &mut Db| Step::Stop(closer)) as Job,
            job("f", "INSERT INTO t VALUES ('f')", &tx),
        ];
        assert!(run_batch(&mut db, &caches, &mut batch).is_some());
        assert_eq!(outcomes(&rx), [("e", true)]);
        assert_eq!(batch.len(), 1, "the job after the close stays unrun");
        assert_eq!(rows(&db), ["e"]);
    }
}
