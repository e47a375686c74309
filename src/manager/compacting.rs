//! The threads this process's `/compact` is compacting, so that a run about to start on
//! one waits for it.
//!
//! DeerFlow holds a thread's checkpoint writes for the whole compaction (a model call).
//! `/compact` answers at once, beside the conversation's line, so a chat message sent
//! right after it would ask for its run while the compaction still holds the thread: a
//! single-process Gateway makes that request wait for it, past the bridge's timeout, and
//! then starts the run with no one following it (its answer lost, the user told the agent
//! is unreachable); a multi-worker one answers 409. A run start therefore waits until
//! the `/compact` request on its thread has returned (done, refused, or timed out:
//! bounded by the compaction's own timeout). A compaction started elsewhere (DeerFlow's
//! own UI) is not seen here.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use tokio::sync::watch;

use crate::gateway::ThreadId;

/// The compactions in flight, by thread (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct Compacting {
    threads: Mutex<HashMap<ThreadId, Flight>>,
}

/// One thread's compactions in flight: how many, and what a waiter watches (closed once
/// the last one ended).
#[derive(Debug)]
struct Flight {
    count: usize,
    ended: watch::Receiver<()>,
    /// Held until the last compaction ends; dropped, it wakes the waiters.
    _open: watch::Sender<()>,
}

/// A compaction in flight; dropped when its request returned.
#[must_use]
pub(crate) struct Compaction<'a> {
    compacting: &'a Compacting,
    thread: ThreadId,
}

impl Compacting {
    fn lock(&self) -> MutexGuard<'_, HashMap<ThreadId, Flight>> {
        self.threads.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Marks a compaction of `thread` in flight until the returned guard is dropped.
    pub(crate) fn start(&self, thread: &ThreadId) -> Compaction<'_> {
        let mut threads = self.lock();
        let flight = threads.entry(thread.clone()).or_insert_with(|| {
            let (open, ended) = watch::channel(());
            Flight {
                count: 0,
                ended,
                _open: open,
            }
        });
        flight.count += 1;
        Compaction {
            compacting: self,
            thread: thread.clone(),
        }
    }

    /// Waits until no compaction of `thread` is in flight.
    pub(crate) async fn wait(&self, thread: &ThreadId) {
        let ended = self.lock().get(thread).map(|f| f.ended.clone());
        if let Some(mut ended) = ended {
            // Closed when the last compaction's flight is removed.
            while ended.changed().await.is_ok() {}
        }
    }
}

impl Drop for Compaction<'_> {
    fn drop(&mut self) {
        let mut threads = self.compacting.lock();
        if let Some(flight) = threads.get_mut(&self.thread) {
            flight.count -= 1;
            if flight.count == 0 {
                threads.remove(&self.thread);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use futures_util::FutureExt;

    use super::*;

    #[tokio::test]
    async fn a_run_waits_for_the_last_compaction_of_its_thread_only() {
        let compacting = Compacting::default();
        let (t1, t2) = (ThreadId::from("t1"), ThreadId::from("t2"));
        // Nothing in flight: no wait.
        assert!(compacting.wait(&t1).now_or_never().is_some());
        let first = compacting.start(&t1);
        let second = compacting.start(&t1);
        assert!(
            compacting.wait(&t2).now_or_never().is_some(),
            "another thread"
        );
        let mut waiting = Box::pin(compacting.wait(&t1));
        assert!((&mut waiting).now_or_never().is_none());
        drop(first);
        assert!(
            (&mut waiting).now_or_never().is_none(),
            "one still in flight"
        );
        drop(second);
        tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("woken when the last one ended");
        assert!(compacting.lock().is_empty(), "nothing kept");
    }
}
