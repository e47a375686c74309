//! A bounded first-in-first-out map, used as the exact read-through cache in front of the
//! SQLite file.
//!
//! Why FIFO and not LRU: a hit must stay a cheap shared lookup, with no bookkeeping write on
//! the read path; the cache exists to spare the hot conversations a round trip to the store
//! thread, and with the bound well above the number of active chats FIFO keeps them all.
//!
//! Bound: at most `capacity` entries. Inserting a new key at the bound drops the entry that
//! was inserted longest ago; its next read misses and reloads from the file. Updating a key
//! keeps its place. A capacity of 0 disables the cache.

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;

/// A map of at most `capacity` entries that forgets the oldest insertion first.
#[derive(Debug)]
pub(super) struct BoundedCache<K, V> {
    /// The entries, each with the insertion number of its place in `order`.
    map: HashMap<K, (u64, V)>,
    /// Keys in insertion order. An entry whose number no longer matches `map` is stale (the
    /// key was dropped by `retain`, then maybe re-inserted) and is skipped; stale entries are compacted away once
    /// they outnumber live ones, so this stays below `2 * capacity + 1` entries.
    order: VecDeque<(K, u64)>,
    /// The next insertion number.
    next: u64,
    /// The bound on `map.len()`.
    capacity: usize,
}

impl<K: Clone + Eq + Hash, V> BoundedCache<K, V> {
    /// An empty cache holding at most `capacity` entries.
    pub(super) fn new(capacity: usize) -> Self {
        Self {
            map: HashMap::new(),
            order: VecDeque::new(),
            next: 0,
            capacity,
        }
    }

    /// The cached value for `key`.
    pub(super) fn get(&self, key: &K) -> Option<&V> {
        self.map.get(key).map(|(_, value)| value)
    }

    /// Caches `value` for `key`, evicting the oldest entry if the cache is full.
    pub(super) fn insert(&mut self, key: K, value: V) {
        if self.capacity == 0 {
            return;
        }
        if let Some(slot) = self.map.get_mut(&key) {
            slot.1 = value;
            return;
        }
        while self.map.len() >= self.capacity {
            let Some((old, seq)) = self.order.pop_front() else {
                break;
            };
            if self.map.get(&old).is_some_and(|(live, _)| *live == seq) {
                self.map.remove(&old);
            }
        }
        let seq = self.next;
        self.next += 1;
        self.order.push_back((key.clone(), seq));
        self.map.insert(key, (seq, value));
    }

    /// Forgets every key for which `keep` returns false.
    pub(super) fn retain(&mut self, mut keep: impl FnMut(&K) -> bool) {
        self.map.retain(|key, _| keep(key));
        self.compact();
    }

    /// Forgets everything.
    pub(super) fn clear(&mut self) {
        self.map.clear();
        self.order.clear();
    }

    /// The number of cached entries.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.map.len()
    }

    /// Drops stale `order` entries once they outnumber the live ones.
    fn compact(&mut self) {
        if self.order.len() > 2 * self.map.len() + 1 {
            let map = &self.map;
            self.order
                .retain(|(key, seq)| map.get(key).is_some_and(|(live, _)| live == seq));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_insertion_goes_first_at_the_bound() {
        let mut cache = BoundedCache::new(2);
        cache.insert("a", 1);
        cache.insert("b", 2);
        cache.insert("a", 10); // an update keeps its place
        cache.insert("c", 3);
        assert_eq!(cache.get(&"a"), None);
        assert_eq!(cache.get(&"b"), Some(&2));
        assert_eq!(cache.get(&"c"), Some(&3));
        assert_eq!(cache.len(), 2);
    }

    #[test]
    fn dropped_and_reinserted_keys_keep_the_bound_and_order() {
        let mut cache = BoundedCache::new(2);
        cache.insert("a", 1);
        cache.insert("b", 2);
        cache.retain(|key| *key != "a");
        cache.insert("a", 3); // now newer than "b"
        cache.insert("c", 4);
        assert_eq!(cache.get(&"b"), None);
        assert_eq!(cache.get(&"a"), Some(&3));
        assert_eq!(cache.get(&"c"), Some(&4));
        for round in 0..100 {
            cache.retain(|key| *key != "a");
            cache.insert("a", round);
        }
        assert_eq!(cache.len(), 2);
        assert!(cache.order.len() <= 2 * cache.capacity + 1);
    }

    #[test]
    fn retain_and_zero_capacity() {
        let mut cache = BoundedCache::new(4);
        for (key, value) in [("x1", 1), ("x2", 2), ("y1", 3)] {
            cache.insert(key, value);
        }
        cache.retain(|key| !key.starts_with('x'));
        assert_eq!(cache.len(), 1);
        assert_eq!(cache.get(&"y1"), Some(&3));

        let mut off = BoundedCache::new(0);
        off.insert("a", 1);
        assert_eq!(off.get(&"a"), None);
    }
}
