//! In-order handling of one conversation's messages (issue 13; spec manager §7.7).
//!
//! The dispatcher calls [`Turnstile::enter`] in queue order, synchronously, so every
//! message that must keep its place gets a [`Ticket`] that waits for its predecessor's
//! ticket to be dropped. Order is therefore arrival order, whatever order the tasks run in.
//! Different conversations never wait for each other.
//!
//! Busy policy: `enter` refuses a place when the conversation already has `limit` messages
//! waiting behind the one being handled, so the caller can give the busy reply instead of
//! queueing without bound (`reject` is a limit of 0).
//!
//! A ticket dropped before its turn (a redelivery, a refusal, shutdown) must not let its
//! successor overtake its predecessor: [`Ticket::abandon`] hands the wait to a small task
//! that drops the ticket only once its turn came.
//!
//! A predecessor whose run is over is only delivering its answer: [`Settling`] marks that
//! moment (the run registry's guard does, through [`Settling::scope`]), so the caller can
//! keep a successor's place without telling the user another request "is still running"
//! when its answer is already on the way.
//!
//! Bound: the table holds one entry per conversation that has a message in flight; an
//! entry goes when its latest ticket is dropped. Tickets per conversation are bounded by
//! the limit plus the one being handled.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::oneshot;

/// A conversation's line: its latest ticket, that ticket's completion signal and settling
/// mark, and how many tickets are outstanding (handled or waiting).
#[derive(Debug)]
struct Tail {
    id: u64,
    done: oneshot::Receiver<()>,
    settling: Settling,
    outstanding: usize,
}

type Tails = Arc<Mutex<HashMap<String, Tail>>>;

/// The per-conversation order keeper.
#[derive(Debug, Default)]
pub struct Turnstile {
    tails: Tails,
    next: Mutex<u64>,
}

/// One message's place in its conversation's line.
#[derive(Debug)]
pub struct Ticket {
    key: String,
    id: u64,
    previous: Option<oneshot::Receiver<()>>,
    previous_settling: Option<Settling>,
    settling: Settling,
    _done: oneshot::Sender<()>,
    tails: Tails,
}

/// Set once a message's run is over and only its answer's delivery remains.
#[derive(Debug, Clone, Default)]
pub struct Settling(Arc<AtomicBool>);

tokio::task_local! {
    static SETTLING: Settling;
}

impl Settling {
    /// Runs `future` with `self` as the mark [`Settling::mark_current`] sets.
    pub async fn scope<F: Future>(self, future: F) -> F::Output {
        SETTLING.scope(self, future).await
    }

    /// Marks the current task's message as settling, if it is in line.
    pub fn mark_current() {
        let _ = SETTLING.try_with(|settling| settling.0.store(true, Ordering::Release));
    }

    fn is_set(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

/// The line is full: the message gets the busy reply instead of a place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LineFull;

impl Turnstile {
    /// Takes the next place in `key`'s line, unless `limit` messages already wait behind
    /// the one being handled.
    pub fn enter(&self, key: String, limit: usize) -> Result<Ticket, LineFull> {
        let mut tails = lock(&self.tails);
        let outstanding = tails.get(&key).map_or(0, |t| t.outstanding);
        if outstanding > limit {
            return Err(LineFull);
        }
        let id = {
            let mut next = lock(&self.next);
            *next += 1;
            *next
        };
        let (done, waiter) = oneshot::channel();
        let settling = Settling::default();
        let (previous, previous_settling) = tails
            .insert(
                key.clone(),
                Tail {
                    id,
                    done: waiter,
                    settling: settling.clone(),
                    outstanding: outstanding + 1,
                },
            )
            .map(|tail| (tail.done, tail.settling))
            .unzip();
        drop(tails);
        Ok(Ticket {
            key,
            id,
            previous,
            previous_settling,
            settling,
            _done: done,
            tails: self.tails.clone(),
        })
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        lock(&self.tails).len()
    }
}

impl Ticket {
    /// Whether a predecessor is still being handled (so this message will wait).
    pub fn must_wait(&mut self) -> bool {
        match &mut self.previous {
            None => false,
            Some(rx) => matches!(rx.try_recv(), Err(oneshot::error::TryRecvError::Empty)),
        }
    }

    /// Whether the predecessor's run is over and it is only delivering its answer.
    pub fn predecessor_settling(&self) -> bool {
        self.previous_settling
            .as_ref()
            .is_some_and(Settling::is_set)
    }

    /// This message's settling mark, for [`Settling::scope`].
    pub fn settling(&self) -> Settling {
        self.settling.clone()
    }

    /// Waits until every earlier message of the conversation was handled.
    pub async fn wait_turn(&mut self) {
        if let Some(rx) = &mut self.previous {
            // The predecessor never sends: its ticket being dropped is the signal.
            let _ = rx.await;
            self.previous = None;
            self.previous_settling = None;
        }
    }

    /// Gives the place up without being handled, keeping the line's order: the ticket is
    /// dropped once its turn came (at once when it already had it).
    pub fn abandon(mut self) {
        if self.must_wait() {
            tokio::spawn(async move {
                self.wait_turn().await;
            });
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut tails = lock(&self.tails);
        if let Some(tail) = tails.get_mut(&self.key) {
            tail.outstanding = tail.outstanding.saturating_sub(1);
            if tail.id == self.id {
                tails.remove(&self.key);
            }
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn tickets_run_in_entry_order_per_key() {
        let turnstile = Turnstile::default();
        let mut first = turnstile.enter("a".into(), 3).unwrap();
        let mut second = turnstile.enter("a".into(), 3).unwrap();
        let mut other = turnstile.enter("b".into(), 3).unwrap();
        assert!(!first.must_wait());
        assert!(second.must_wait());
        assert!(!other.must_wait());
        other.wait_turn().await;
        first.wait_turn().await;
        // `second` waits until `first` is dropped.
        let waiting = tokio::time::timeout(Duration::from_millis(20), second.wait_turn()).await;
        assert!(waiting.is_err());
        drop(first);
        tokio::time::timeout(Duration::from_secs(5), second.wait_turn())
            .await
            .unwrap();
        drop(second);
        drop(other);
        assert_eq!(turnstile.len(), 0);
    }

    #[tokio::test]
    async fn a_successor_sees_when_its_predecessor_is_only_settling() {
        let turnstile = Turnstile::default();
        let first = turnstile.enter("a".into(), 3).unwrap();
        let mut second = turnstile.enter("a".into(), 3).unwrap();
        let mut third = turnstile.enter("a".into(), 3).unwrap();
        assert!(!second.predecessor_settling());
        // Outside a scope nothing is marked.
        Settling::mark_current();
        assert!(!second.predecessor_settling());
        first
            .settling()
            .scope(async { Settling::mark_current() })
            .await;
        assert!(second.must_wait() && second.predecessor_settling());
        // The third waits for the second, which has not even started.
        assert!(third.must_wait() && !third.predecessor_settling());
        drop(first);
        second.wait_turn().await;
        assert!(!second.predecessor_settling());
        drop(second);
        third.wait_turn().await;
    }

    #[test]
    fn a_full_line_refuses_a_place() {
        let turnstile = Turnstile::default();
        let running = turnstile.enter("a".into(), 1).unwrap();
        let waiting = turnstile.enter("a".into(), 1).unwrap();
        assert_eq!(turnstile.enter("a".into(), 1).unwrap_err(), LineFull);
        // `reject`: nothing may wait behind a message being handled.
        assert_eq!(turnstile.enter("a".into(), 0).unwrap_err(), LineFull);
        assert!(turnstile.enter("b".into(), 0).is_ok());
        drop(running);
        let third = turnstile.enter("a".into(), 1).unwrap();
        drop((waiting, third));
        assert!(turnstile.enter("a".into(), 0).is_ok());
    }

    #[tokio::test]
    async fn an_abandoned_ticket_keeps_the_line_in_order() {
        let turnstile = Turnstile::default();
        let first = turnstile.enter("a".into(), 3).unwrap();
        let skipped = turnstile.enter("a".into(), 3).unwrap();
        let mut third = turnstile.enter("a".into(), 3).unwrap();
        skipped.abandon();
        // The skipped one is gone, but the third still waits for the first.
        let early = tokio::time::timeout(Duration::from_millis(20), third.wait_turn()).await;
        assert!(early.is_err(), "overtook the message being handled");
        drop(first);
        tokio::time::timeout(Duration::from_secs(5), third.wait_turn())
            .await
            .unwrap();
    }
}
