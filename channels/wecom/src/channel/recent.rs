//! [`Recent`]: a bounded set of ids the channel remembers for a while, the oldest
//! forgotten first at the bound.
//!
//! What the channel learns about a reply from WeCom's answers (a callback whose stream
//! expired) decides how the next write for it goes; it is kept only in memory and only for
//! the newest ones, since replies are written within minutes of the user's message. What
//! forgetting one costs is said where the set is declared.

use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard, PoisonError};

/// At most `bound` ids, oldest first.
#[derive(Debug)]
pub(super) struct Recent {
    ids: Mutex<VecDeque<String>>,
    bound: usize,
}

impl Recent {
    /// An empty set that keeps at most `bound` ids.
    pub(super) const fn new(bound: usize) -> Self {
        Self {
            ids: Mutex::new(VecDeque::new()),
            bound,
        }
    }

    fn ids(&self) -> MutexGuard<'_, VecDeque<String>> {
        self.ids.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether `id` is remembered.
    pub(super) fn contains(&self, id: &str) -> bool {
        self.ids().iter().any(|i| i == id)
    }

    /// Remembers `id`, forgetting the oldest at the bound.
    pub(super) fn insert(&self, id: &str) {
        let mut ids = self.ids();
        if ids.iter().any(|i| i == id) {
            return;
        }
        if ids.len() >= self.bound {
            ids.pop_front();
        }
        ids.push_back(id.to_owned());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_is_forgotten_at_the_bound() {
        let recent = Recent::new(2);
        for id in ["a", "b", "a", "c"] {
            recent.insert(id);
        }
        assert!(!recent.contains("a") && recent.contains("b") && recent.contains("c"));
    }
}
