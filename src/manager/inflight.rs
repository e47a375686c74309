//! Runs in flight, by conversation: what `/stop` cancels (issue 13).
//!
//! A turn registers its run once the Gateway accepted it and knows its id, and the entry
//! goes when the turn ends (a guard), so the table holds at most one entry per run in
//! flight, which `max_concurrency` bounds. `/stop` marks the entry and asks the Gateway to
//! interrupt the run; the turn then sees the mark and ends its final with the localized
//! "stopped" line instead of treating the early end as a failure. A `/stop` that finds no
//! run in its own conversation stops the newest run its sender started in the same chat:
//! where every group message is a conversation of its own (a Telegram message that
//! replies to nothing, DingTalk, WeCom, Feishu outside threads), a fresh `/stop` is never
//! in the run's conversation; another member's run is never stopped that way. Every run has an id to
//! address: streamed runs from the stream's `Content-Location`, runs on final-only channels
//! because they are created and then joined (issue 19: runs outlive their connection, so
//! hanging up no longer stops one). A `/goal from-chat` is registered while the Gateway
//! composes its goal, before there is a run: `/stop` then marks it, and the command saves
//! the goal without starting its run.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use im_bridge_channel::{InboundMessage, UserId};

use crate::gateway::ThreadId;
use crate::store::{ConversationKey, conversation_key};

/// One run in flight.
#[derive(Clone, Debug)]
pub(crate) struct Inflight {
    /// The thread it runs on.
    pub(crate) thread: ThreadId,
    /// The Gateway's run id, when the call told it (`/runs/stream` does).
    pub(crate) run_id: Option<String>,
    /// Who sent the message the run answers.
    user: UserId,
    /// Set by `/stop`.
    stopped: Arc<AtomicBool>,
    /// No run yet: a `/goal from-chat` composing its goal, whose run `/stop` keeps from
    /// starting.
    pub(crate) composing: bool,
    /// Tells this registration from a later one of the same conversation.
    seq: u64,
}

impl Inflight {
    /// Marks the run as stopped on request.
    pub(crate) fn mark_stopped(&self, stopped: bool) {
        self.stopped.store(stopped, Ordering::Release);
    }
}

/// The runs in flight (bounded by the runs in flight: entries leave with their turn).
#[derive(Debug, Default)]
pub(crate) struct Runs {
    table: Mutex<Table>,
}

#[derive(Debug, Default)]
struct Table {
    by_conversation: HashMap<ConversationKey, Inflight>,
    next_seq: u64,
}

impl Runs {
    /// Registers the run answering `msg` until the returned guard drops.
    pub(crate) fn register(
        &self,
        msg: &InboundMessage,
        thread: ThreadId,
        run_id: Option<String>,
    ) -> Running<'_> {
        self.insert(msg, thread, run_id, false)
    }

    /// Registers `msg`'s `/goal from-chat` while the Gateway composes its goal on
    /// `thread`: a `/stop` meanwhile marks it, and the command then starts no run.
    pub(crate) fn register_composing(&self, msg: &InboundMessage, thread: ThreadId) -> Running<'_> {
        self.insert(msg, thread, None, true)
    }

    fn insert(
        &self,
        msg: &InboundMessage,
        thread: ThreadId,
        run_id: Option<String>,
        composing: bool,
    ) -> Running<'_> {
        let key = conversation_key(msg);
        let stopped = Arc::new(AtomicBool::new(false));
        let mut table = self.lock();
        table.next_seq += 1;
        let seq = table.next_seq;
        table.by_conversation.insert(
            key.clone(),
            Inflight {
                thread,
                run_id,
                user: msg.user_id.clone(),
                stopped: stopped.clone(),
                composing,
                seq,
            },
        );
        Running {
            runs: self,
            key,
            seq,
            stopped,
            composing,
        }
    }

    /// The run in flight in `key`'s conversation, if any.
    #[cfg(test)]
    pub(crate) fn get(&self, key: &ConversationKey) -> Option<Inflight> {
        self.lock().by_conversation.get(key).cloned()
    }

    /// The run `/stop` in `msg` stops: its conversation's, else the newest run its sender
    /// started in the same chat (see the module docs). Linear in the runs in flight, which
    /// `max_concurrency` bounds.
    pub(crate) fn to_stop(&self, msg: &InboundMessage) -> Option<Inflight> {
        let key = conversation_key(msg);
        let table = self.lock();
        if let Some(own) = table.by_conversation.get(&key) {
            return Some(own.clone());
        }
        table
            .by_conversation
            .iter()
            .filter(|(k, run)| {
                k.channel == key.channel && k.chat_id == key.chat_id && run.user == msg.user_id
            })
            .map(|(_, run)| run)
            // A run the sender sees working before a goal still being composed.
            .max_by_key(|run| (!run.composing, run.seq))
            .cloned()
    }

    fn lock(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A registered run; dropping it removes the entry (unless a later run replaced it).
#[derive(Debug)]
pub(crate) struct Running<'a> {
    runs: &'a Runs,
    key: ConversationKey,
    seq: u64,
    stopped: Arc<AtomicBool>,
    /// A `/goal from-chat` composing its goal, not a run: its end says nothing of the turn.
    composing: bool,
}

impl Running<'_> {
    /// Whether `/stop` asked for this run to stop.
    pub(crate) fn stopped(&self) -> bool {
        self.stopped.load(Ordering::Acquire)
    }
}

impl Drop for Running<'_> {
    /// The run is over: a message in line behind this turn's is told nothing more than that
    /// it waits (its predecessor is only delivering the answer).
    fn drop(&mut self) {
        if !self.composing {
            super::order::Settling::mark_current();
        }
        let mut table = self.runs.lock();
        if table
            .by_conversation
            .get(&self.key)
            .is_some_and(|entry| entry.seq == self.seq)
        {
            table.by_conversation.remove(&self.key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use im_bridge_channel::ChatId;

    fn key(topic: Option<&str>) -> ConversationKey {
        ConversationKey::new("any", ChatId::new("c"), topic.map(str::to_owned))
    }

    /// A message of `user` in chat `c`, in `topic`.
    fn msg(topic: Option<&str>, user: &str) -> InboundMessage {
        let mut msg = InboundMessage::new("any", "c", user, "x");
        msg.topic_id = topic.map(str::to_owned);
        msg
    }

    #[test]
    fn stop_finds_its_conversations_run_else_its_senders_newest_in_the_chat() {
        let runs = Runs::default();
        let t = || ThreadId::new("t");
        let _a1 = runs.register(&msg(Some("m1"), "alice"), t(), Some("a1".into()));
        let _b = runs.register(&msg(Some("m2"), "bob"), t(), Some("b".into()));
        let _a2 = runs.register(&msg(Some("m3"), "alice"), t(), Some("a2".into()));
        let stop = |topic, user| runs.to_stop(&msg(topic, user)).and_then(|r| r.run_id);
        // In its own conversation: that run, whoever asks.
        assert_eq!(stop(Some("m2"), "alice").as_deref(), Some("b"));
        // A fresh message (a conversation of its own): the sender's newest run.
        assert_eq!(stop(Some("m9"), "alice").as_deref(), Some("a2"));
        assert_eq!(stop(None, "bob").as_deref(), Some("b"));
        // Nobody else's, and nothing in another chat.
        assert_eq!(stop(Some("m9"), "carol"), None);
        let mut elsewhere = msg(Some("m9"), "alice");
        elsewhere.chat_id = ChatId::new("other");
        assert!(runs.to_stop(&elsewhere).is_none());
    }

    /// A fresh `/stop` stops the run its sender sees working, not a `/goal from-chat` of
    /// theirs still composing in another conversation (newer though it is).
    #[test]
    fn stop_prefers_a_run_to_a_goal_being_composed() {
        let runs = Runs::default();
        let _run = runs.register(
            &msg(Some("m1"), "alice"),
            ThreadId::new("t1"),
            Some("a".into()),
        );
        let _composing = runs.register_composing(&msg(Some("m3"), "alice"), ThreadId::new("t3"));
        let found = runs.to_stop(&msg(Some("m9"), "alice")).unwrap();
        assert_eq!(found.run_id.as_deref(), Some("a"));
        // In its own conversation, the composing command is what `/stop` finds.
        let own = runs.to_stop(&msg(Some("m3"), "alice")).unwrap();
        assert!(own.composing);
    }

    #[test]
    fn entries_live_as_long_as_their_turn() {
        let runs = Runs::default();
        let running = runs.register(&msg(None, "u"), ThreadId::new("t"), Some("r1".into()));
        let found = runs.get(&key(None)).unwrap();
        assert_eq!(found.run_id.as_deref(), Some("r1"));
        assert!(runs.get(&key(Some("x"))).is_none());
        assert!(!running.stopped());
        found.mark_stopped(true);
        assert!(running.stopped());
        drop(running);
        assert!(runs.get(&key(None)).is_none());
    }

    #[test]
    fn an_older_guard_does_not_remove_a_newer_run() {
        let runs = Runs::default();
        let old = runs.register(&msg(None, "u"), ThreadId::new("t"), Some("r1".into()));
        let new = runs.register(&msg(None, "u"), ThreadId::new("t"), Some("r2".into()));
        drop(old);
        assert_eq!(runs.get(&key(None)).unwrap().run_id.as_deref(), Some("r2"));
        drop(new);
        assert!(runs.get(&key(None)).is_none());
    }

    /// The successor of a turn whose run ended learns it is only waiting for an answer on
    /// its way, and gets no "still running" notice.
    #[tokio::test]
    async fn a_run_ending_marks_its_turn_settling() {
        let turnstile = super::super::order::Turnstile::default();
        let first = turnstile.enter("c".into(), 3).unwrap();
        let second = turnstile.enter("c".into(), 3).unwrap();
        let runs = Runs::default();
        first
            .settling()
            .scope(async {
                let running = runs.register(&msg(None, "u"), ThreadId::new("t"), Some("r1".into()));
                assert!(!second.predecessor_settling(), "the run is still going");
                drop(running);
            })
            .await;
        assert!(second.predecessor_settling());
    }
}
