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
//! Notices once per run (issue 33, item 6): when several messages arrive while one is
//! being handled, only the first to wait is told it is queued ([`Ticket::claim_notice`]),
//! and only the first turned away gets the busy reply ([`Turnstile::claim_busy_reply`]);
//! the others are marked with a reaction where the channel has reactions. The run they
//! count against is the message being handled, the oldest in the line; when the next
//! one's turn comes, that is a new run, and the next message to wait is told again. A
//! message claims its notice only once it is known to be handled (not a redelivery), so a
//! redelivery never takes the notice from the message after it.
//!
//! Bound: the table holds one entry per conversation that has a message in flight; an
//! entry goes when its latest ticket is dropped. Tickets per conversation are bounded by
//! the limit plus the one being handled.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::oneshot;
use tokio::task::futures::TaskLocalFuture;

/// A conversation's line: its latest ticket, that ticket's completion signal and settling
/// mark, the tickets outstanding (handled or waiting), and which runs gave their notices.
#[derive(Debug)]
struct Tail {
    id: u64,
    done: oneshot::Receiver<()>,
    settling: Settling,
    /// The outstanding tickets' ids, oldest first: the first is the one being handled.
    line: VecDeque<u64>,
    /// The run (the id of the ticket being handled) whose queued notice was claimed.
    queued_noticed: Option<u64>,
    /// The run whose busy reply was claimed.
    busy_noticed: Option<u64>,
}

impl Tail {
    /// Whether the current run's notice recorded in `noticed` is still to be given; if so,
    /// it is recorded as given now.
    fn claim(line: &VecDeque<u64>, noticed: &mut Option<u64>) -> bool {
        let run = line.front().copied();
        if run.is_some() && *noticed == run {
            return false;
        }
        *noticed = run;
        true
    }
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
    /// This message claimed its run's queued notice ([`Ticket::claim_notice`]).
    told: bool,
    _done: oneshot::Sender<()>,
    tails: Tails,
}

/// Set once a message's run is over and only its answer's delivery remains, or, with no
/// run, once its turn's work is done and only its bookkeeping remains.
#[derive(Debug, Clone, Default)]
pub struct Settling(Arc<AtomicBool>);

tokio::task_local! {
    static SETTLING: Settling;
}

impl Settling {
    /// Runs `future` with `self` as the mark [`Settling::mark_current`] sets.
    pub fn scope<F: Future>(self, future: F) -> TaskLocalFuture<Settling, F> {
        SETTLING.scope(self, future)
    }

    /// Marks the current task's message as settling, if it is in line.
    pub fn mark_current() {
        let _ = SETTLING.try_with(Settling::mark);
    }

    /// Marks this message as settling.
    pub fn mark(&self) {
        self.0.store(true, Ordering::Release);
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
        if tails.get(&key).is_some_and(|t| t.line.len() > limit) {
            return Err(LineFull);
        }
        let id = {
            let mut next = lock(&self.next);
            *next += 1;
            *next
        };
        let (done, waiter) = oneshot::channel();
        let settling = Settling::default();
        let mut tail = Tail {
            id,
            done: waiter,
            settling: settling.clone(),
            line: VecDeque::new(),
            queued_noticed: None,
            busy_noticed: None,
        };
        let before = tails.remove(&key).map(|before| {
            tail.line = before.line;
            tail.queued_noticed = before.queued_noticed;
            tail.busy_noticed = before.busy_noticed;
            (before.done, before.settling)
        });
        tail.line.push_back(id);
        tails.insert(key.clone(), tail);
        drop(tails);
        let (previous, previous_settling) = before.unzip();
        Ok(Ticket {
            key,
            id,
            previous,
            previous_settling,
            settling,
            told: false,
            _done: done,
            tails: self.tails.clone(),
        })
    }

    /// Whether a message turned away from `key`'s full line is the first of the current
    /// run: it gets the busy reply, later ones a reaction. Claims the reply if so (a line
    /// that emptied meanwhile has no run to share it with: the message gets it).
    pub fn claim_busy_reply(&self, key: &str) -> bool {
        match lock(&self.tails).get_mut(key) {
            Some(tail) => Tail::claim(&tail.line, &mut tail.busy_noticed),
            None => true,
        }
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

    /// Whether this message, which waits, is the first of the current run to wait: it gets
    /// the queued notice, later ones a reaction. Claims the notice if so.
    pub fn claim_notice(&mut self) -> bool {
        let claimed = match lock(&self.tails).get_mut(&self.key) {
            Some(tail) => Tail::claim(&tail.line, &mut tail.queued_noticed),
            None => true,
        };
        self.told |= claimed;
        claimed
    }

    /// Whether this message was told it waits (it claimed the queued notice).
    pub fn told(&self) -> bool {
        self.told
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
            tail.line.retain(|id| *id != self.id);
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

    #[test]
    fn issue_33_one_queued_notice_and_one_busy_reply_per_run() {
        let turnstile = Turnstile::default();
        let enter = || turnstile.enter("a".into(), 2);
        let running = enter().unwrap();
        let mut first = enter().unwrap();
        let mut second = enter().unwrap();
        assert!(first.claim_notice());
        assert!(!second.claim_notice(), "the run was noticed already");
        assert!(first.told() && !second.told());
        assert_eq!(enter().unwrap_err(), LineFull);
        assert!(turnstile.claim_busy_reply("a"));
        assert!(!turnstile.claim_busy_reply("a"));
        // The next message's turn is a new run: its first notices are given again.
        drop(running);
        let mut third = enter().unwrap();
        assert!(third.claim_notice());
        assert!(turnstile.claim_busy_reply("a"));
        // Another conversation counts its own; one with nothing in line turns nobody away.
        let _elsewhere = turnstile.enter("b".into(), 2).unwrap();
        assert!(turnstile.enter("b".into(), 2).unwrap().claim_notice());
        assert!(turnstile.claim_busy_reply("c"));
        drop((first, second, third));
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
