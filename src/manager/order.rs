//! In-order handling of one conversation's messages, for channels that serialize
//! conversations (spec manager §7.7).
//!
//! The dispatcher calls [`Turnstile::enter`] in queue order, synchronously, so every
//! message gets a [`Ticket`] that waits for its predecessor's ticket to be dropped. Order
//! is therefore arrival order, whatever order the tasks run in. Different conversations
//! never wait for each other.
//!
//! Bound: the table holds one entry per conversation that has a message in flight; an
//! entry goes when its latest ticket is dropped.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

/// Conversation key → (id of its latest ticket, that ticket's completion signal).
type Tails = Arc<Mutex<HashMap<String, (u64, oneshot::Receiver<()>)>>>;

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
    _done: oneshot::Sender<()>,
    tails: Tails,
}

impl Turnstile {
    /// Takes the next place in `key`'s line.
    pub fn enter(&self, key: String) -> Ticket {
        let id = {
            let mut next = self.next.lock().unwrap_or_else(|p| p.into_inner());
            *next += 1;
            *next
        };
        let (done, waiter) = oneshot::channel();
        let previous = self
            .tails
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key.clone(), (id, waiter))
            .map(|(_, rx)| rx);
        Ticket {
            key,
            id,
            previous,
            _done: done,
            tails: self.tails.clone(),
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.tails.lock().map(|t| t.len()).unwrap_or(0)
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

    /// Waits until every earlier message of the conversation was handled.
    pub async fn wait_turn(&mut self) {
        if let Some(rx) = &mut self.previous {
            // The predecessor never sends: its ticket being dropped is the signal.
            let _ = rx.await;
            self.previous = None;
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut tails = self.tails.lock().unwrap_or_else(|p| p.into_inner());
        if tails.get(&self.key).is_some_and(|(id, _)| *id == self.id) {
            tails.remove(&self.key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn tickets_run_in_entry_order_per_key() {
        let turnstile = Turnstile::default();
        let mut first = turnstile.enter("a".into());
        let mut second = turnstile.enter("a".into());
        let mut other = turnstile.enter("b".into());
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
}
