//! The intake's memory, behind one lock: the bot's id, the threads it knows (each
//! channel's active one), message ids seen, sources given their ✅, guild channels known
//! to be no threads or whose lookup failed lately, and the channels active lately. Each
//! map states its bound; at it the oldest entry is forgotten.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Mutex, MutexGuard, PoisonError};

use tokio::time::Instant;

use super::backfill::Recent;

/// Message ids remembered against replays (and sources given their ✅, channels known to
/// be no threads).
const SEEN_CAPACITY: usize = 4096;
/// Threads remembered (oldest forgotten first).
const MAX_THREADS: usize = 10_000;

/// The intake's memory: the bot's id, threads, message ids seen.
#[derive(Default)]
pub(super) struct State {
    pub(super) bot_id: Option<u64>,
    /// Threads the bot created → their parent channel.
    pub(super) threads: HashMap<u64, u64>,
    pub(super) thread_order: VecDeque<u64>,
    /// A channel's active thread (thread mode's mapping).
    pub(super) active: HashMap<u64, u64>,
    pub(super) seen: HashSet<u64>,
    pub(super) seen_order: VecDeque<u64>,
    /// Sources whose ✅ was added (a split answer adds it once).
    pub(super) done: HashSet<String>,
    pub(super) done_order: VecDeque<String>,
    /// Guild channels Discord said are no threads (so they are not asked about again).
    pub(super) plain: HashSet<u64>,
    pub(super) plain_order: VecDeque<u64>,
    /// The channels active lately and the last message seen in each (read back after a
    /// lost session, `backfill`).
    pub(super) recent: Recent,
    /// Guild channels whose lookup failed lately → when they may be asked about again (a
    /// failure is not retried for every message); at most [`SEEN_CAPACITY`], the oldest
    /// forgotten (asked about again).
    pub(super) unasked: HashMap<u64, Instant>,
    pub(super) unasked_order: VecDeque<u64>,
    /// No lookup before this: a global 429's wait.
    pub(super) lookups_after: Option<Instant>,
    /// READYs seen: each after the first starts a new session, and a read-back.
    pub(super) sessions: u64,
}

impl State {
    /// Whether `id` is new (and remembers it).
    pub(super) fn first_time(&mut self, id: u64) -> bool {
        if !self.seen.insert(id) {
            return false;
        }
        self.seen_order.push_back(id);
        while self.seen_order.len() > SEEN_CAPACITY {
            if let Some(old) = self.seen_order.pop_front() {
                self.seen.remove(&old);
            }
        }
        true
    }

    /// Whether `source` gets its ✅ now (the first time only).
    pub(super) fn first_done(&mut self, source: &str) -> bool {
        if !self.done.insert(source.to_owned()) {
            return false;
        }
        self.done_order.push_back(source.to_owned());
        while self.done_order.len() > SEEN_CAPACITY {
            if let Some(old) = self.done_order.pop_front() {
                self.done.remove(&old);
            }
        }
        true
    }

    /// Whether `channel` needs asking Discord if it is a thread: a guild channel that is
    /// neither a known thread nor known to be none.
    pub(super) fn unknown(&self, channel: u64) -> bool {
        !self.threads.contains_key(&channel) && !self.plain.contains(&channel)
    }

    /// Whether `channel` may be asked about at `now`: no failed lookup of it, nor a global
    /// rate limit, is still waited out.
    pub(super) fn may_ask(&self, channel: u64, now: Instant) -> bool {
        let waited = |until: Option<&Instant>| until.is_none_or(|until| now >= *until);
        waited(self.lookups_after.as_ref()) && waited(self.unasked.get(&channel))
    }

    /// A lookup of `channel` failed: it is not asked about again before `until`, nor is
    /// any channel when `global` (a global rate limit).
    pub(super) fn lookup_failed(&mut self, channel: u64, until: Instant, global: bool) {
        if global {
            self.lookups_after = Some(until);
        }
        if self.unasked.insert(channel, until).is_none() {
            self.unasked_order.push_back(channel);
        }
        while self.unasked_order.len() > SEEN_CAPACITY {
            if let Some(old) = self.unasked_order.pop_front() {
                self.unasked.remove(&old);
            }
        }
    }

    pub(super) fn add_plain(&mut self, channel: u64) {
        if self.plain.insert(channel) {
            self.plain_order.push_back(channel);
            while self.plain_order.len() > SEEN_CAPACITY {
                if let Some(old) = self.plain_order.pop_front() {
                    self.plain.remove(&old);
                }
            }
        }
    }

    pub(super) fn add_thread(&mut self, thread: u64, parent: u64) {
        self.active.insert(parent, thread);
        self.know_thread(thread, parent);
    }

    /// Remembers that `thread` lives in `parent` (without making it the channel's active
    /// thread).
    pub(super) fn know_thread(&mut self, thread: u64, parent: u64) {
        self.threads.insert(thread, parent);
        self.thread_order.push_back(thread);
        while self.thread_order.len() > MAX_THREADS {
            if let Some(old) = self.thread_order.pop_front() {
                self.threads.remove(&old);
                self.active.retain(|_, t| *t != old);
            }
        }
    }
}

pub(super) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// A failed lookup holds its channel until its time; a global rate limit holds them all.
    #[test]
    fn a_failed_lookup_waits_and_a_global_limit_holds_every_channel() {
        let mut state = State::default();
        let now = Instant::now();
        let later = now + Duration::from_secs(60);
        state.lookup_failed(10, later, false);
        assert!(!state.may_ask(10, now) && state.may_ask(11, now));
        assert!(state.may_ask(10, later));
        state.lookup_failed(12, later, true);
        assert!(
            !state.may_ask(11, now),
            "a global limit holds every channel"
        );
        assert!(state.may_ask(11, later));
    }
}
